#!/bin/sh
# `make install` puts every piece where its consumer looks for it for the
# configured prefix: the Python package where python3 finds it (Debian:
# /usr/lib/python3/dist-packages for /usr, /usr/local/lib/python3.X/
# dist-packages for /usr/local), with no libtool .la files; the units
# where systemctl finds them, the sysusers.d and tmpfiles.d snippets where
# systemd-sysusers and systemd-tmpfiles read them (they create the group,
# the user and the runtime dir the daemon uses); the bash completion where
# bash-completion loads it.  Installs into a scratch DESTDIR, which stands
# for the root of the system (the tools' --root), then uninstalls.
. "$(dirname "$0")/lib.sh"

R="$T/root"
mkvar() { sed -n "s|^$1 = ||p" "$top_builddir/Makefile" | head -n 1; }
prefix=$(mkvar prefix)
python3_bin=$(mkvar PYTHON3)
case "$prefix" in /*) ;; *) fail "no prefix in Makefile";; esac
make -s -C "$top_builddir" install DESTDIR="$R" >"$T/install.log" 2>&1 ||
	{ tail -n 30 "$T/install.log" >&2; fail "make install failed"; }
ok "make install DESTDIR (prefix $prefix)"

# Python.
if [ -n "$python3_bin" ] && [ -f "$top_builddir/python/stage.stamp" ]; then
	init=$(find "$R" -path '*/mspti/__init__.py' | head -n 1)
	[ -n "$init" ] || fail "mspti/__init__.py not installed"
	pkg=$(dirname "$init")
	pydir=${pkg%/mspti}
	pydir=${pydir#"$R"}
	"$python3_bin" - "$prefix" "$pydir" <<'PY' || fail "python3 does not look in $pydir for $prefix"
import site, sys
prefix, pydir = sys.argv[1:]
# Debian's python3 searches /usr and /usr/local itself (sys.path); for
# another prefix, the site dirs it would use there.
where = sys.path if prefix in ("/usr", "/usr/local") else site.getsitepackages([prefix])
assert pydir in where, (pydir, where)
PY
	ok "mspti package in $pydir, where $python3_bin finds it"
	la=$(find "$pkg" -name '*.la')
	[ -z "$la" ] || fail "libtool archives in the Python package: $la"
	for m in _mspti _npusim; do
		[ -f "$pkg/$m.so" ] || fail "$m.so not installed in $pkg"
	done
	libdir=$(dirname "$(find "$R" -name 'libmspti.so.0' | head -n 1)")
	# Sanitizer build: python3's own allocations at exit are suppressed
	# as in the Python tests (tests/python/lsan-python.supp).
	[ -n "${MSPTI_ASAN_RUNTIME:-}" ] && {
		cat "$top_srcdir/tests/lsan.supp" \
		    "$top_srcdir/tests/python/lsan-python.supp" >"$T/lsan.supp"
		LSAN_OPTIONS="suppressions=$T/lsan.supp"
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}malloc_context_size=2"
		export LSAN_OPTIONS ASAN_OPTIONS
	}
	PYTHONPATH="$R$pydir" LD_LIBRARY_PATH="$libdir" LD_PRELOAD="${MSPTI_ASAN_RUNTIME:+$MSPTI_ASAN_RUNTIME:}$libdir/libmspti.so" \
	    MSPTID_RUNTIME_DIR="$RT" "$python3_bin" -c '
import sys, mspti, mspti._mspti, mspti._npusim
assert mspti.__file__.startswith(sys.argv[1]), mspti.__file__
' "$R$pydir" >"$T/py.out" 2>&1 || { cat "$T/py.out" >&2; fail "installed package does not import"; }
	ok "no .la files; the installed package imports with its extensions"
else
	echo "skip: built without Python"
fi

# systemd: the tools, given the scratch root, find what was installed.
if [ "$prefix" != /usr ] && [ "$prefix" != /usr/local ]; then
	echo "skip: systemd searches no unit dirs under prefix $prefix"
elif command -v systemctl >/dev/null && command -v systemd-tmpfiles >/dev/null &&
    command -v systemd-sysusers >/dev/null; then
	mkdir -p "$R/etc"
	systemctl --root="$R" enable msptid.socket msptid.service \
	    >"$T/enable.out" 2>&1 || { cat "$T/enable.out" >&2; fail "systemctl --root cannot find the units"; }
	[ -L "$R/etc/systemd/system/sockets.target.wants/msptid.socket" ] ||
		fail "msptid.socket not enabled: $(cat "$T/enable.out")"
	ok "systemctl finds and enables msptid.socket and msptid.service"
	systemd-sysusers --root="$R" >"$T/sysusers.out" 2>&1 ||
		{ cat "$T/sysusers.out" >&2; fail "systemd-sysusers failed"; }
	grep -q '^mspti:' "$R/etc/group" || fail "systemd-sysusers did not read our snippet"
	systemd-tmpfiles --root="$R" --create >"$T/tmpfiles.out" 2>&1
	rundir=$(sed -n 's|^ListenStream=\(.*\)/ctl\.sock$|\1|p' "$top_srcdir/systemd/msptid.socket")
	[ -d "$R$rundir" ] || fail "systemd-tmpfiles did not create $rundir: $(cat "$T/tmpfiles.out")"
	ok "systemd-sysusers creates group mspti, systemd-tmpfiles creates $rundir"
else
	echo "skip: systemctl, systemd-sysusers or systemd-tmpfiles missing"
fi

# bash completion: loaded on demand by bash-completion from its dirs.
bc=/usr/share/bash-completion/bash_completion
if [ -r "$bc" ] && command -v bash >/dev/null; then
	case "$prefix" in
	/usr|/usr/local)
		XDG_DATA_DIRS="$R/usr/local/share:$R/usr/share" bash -c '
. "$1" || exit 1
__load_completion msptictl || exit 2
complete -p msptictl' bash "$bc" >"$T/bc.out" 2>&1 ||
			fail "bash-completion does not load msptictl's completion: $(cat "$T/bc.out")"
		ok "bash-completion loads msptictl's completion";;
	*)	[ -n "$(find "$R" -path '*/bash-completion/completions/msptictl')" ] ||
			fail "no bash completion installed"
		ok "bash completion installed (prefix $prefix: XDG_DATA_DIRS must name it)";;
	esac
else
	echo "skip: bash-completion missing"
fi

# What was installed, uninstalls.
rm -rf "$R/etc" "$R/run" "$R/var"
make -s -C "$top_builddir" uninstall DESTDIR="$R" >"$T/uninstall.log" 2>&1 ||
	{ tail -n 30 "$T/uninstall.log" >&2; fail "make uninstall failed"; }
left=$(find "$R" ! -type d | head -n 5)
[ -z "$left" ] || fail "make uninstall left: $left"
ok "make uninstall removes everything"

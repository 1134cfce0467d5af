#!/bin/sh
# Runs one pytest file of the mspti package against the build tree:
# the staged package on PYTHONPATH, libmspti.so preloaded (interposition
# in effect, as users run it) and a private simulator shm prefix.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
py="${PYTHON3:-/usr/bin/python3}"
name=$(basename "$1" .py)
PYTHONPATH="$top_builddir/python/stage${PYTHONPATH:+:$PYTHONPATH}"
LD_LIBRARY_PATH="$top_builddir/agent/.libs:$top_builddir/sim/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Set just before the export: LD_PRELOAD may be exported already, and
# the commands until then (mktemp) must not get the agent.
preload="$top_builddir/agent/.libs/libmspti.so"
# Sanitizer build: python3 is not built with ASan, so its runtime is
# preloaded first; what python itself allocates and never frees at exit
# is suppressed (lsan-python.supp says how), nothing of ours.
supp=""
if [ -n "${MSPTI_ASAN_RUNTIME:-}" ]; then
	supp=$(mktemp "${TMPDIR:-/tmp}/mspti-lsan.XXXXXX") || exit 99
	cat "$top_srcdir/tests/lsan.supp" \
	    "$top_srcdir/tests/python/lsan-python.supp" >"$supp"
	preload="$MSPTI_ASAN_RUNTIME:$preload"
	# Options the caller set (LSAN_OPTIONS=verbosity=1 ...) are kept;
	# the last suppressions= is the one in effect.
	LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$supp"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}malloc_context_size=2"
	export LSAN_OPTIONS ASAN_OPTIONS
fi
NPUSIM_SHM_PREFIX="pytest-$name-$$"
NPUSIM_DEVICES=4
MSPTI_TEST_BUILDDIR="$top_builddir"
MSPTI_TEST_SRCDIR="$top_srcdir"
PYTHONDONTWRITEBYTECODE=1
LD_PRELOAD=$preload
export PYTHONPATH LD_LIBRARY_PATH LD_PRELOAD NPUSIM_SHM_PREFIX NPUSIM_DEVICES \
    MSPTI_TEST_BUILDDIR MSPTI_TEST_SRCDIR PYTHONDONTWRITEBYTECODE
# Agents register with no daemon (a private, empty runtime dir).
MSPTID_RUNTIME_DIR="${TMPDIR:-/tmp}/mspti-pytest-none-$$"
export MSPTID_RUNTIME_DIR
"$py" -m pytest -q -p no:cacheprovider --rootdir="$top_srcdir/tests/python" \
    "$1"
rc=$?
# Remove the simulator's shm objects of this run.
rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-* 2>/dev/null
[ -n "$supp" ] && rm -f "$supp"
# 5 is "no tests collected": a broken test file, not a pass.
[ $rc -eq 5 ] && echo "no tests collected from $1" && exit 1
exit $rc

#!/bin/sh
# CI for the Debian packages (doc/install.md), as root on Debian 12:
#  1. builds them from the tracked tree in a scratch copy:
#     dpkg-buildpackage -us -uc -b, without the test suite (nocheck: CI
#     runs make check on its own build);
#  2. lintian: fails on any error;
#  3. installs them on a copy-on-write copy of this system (a private
#     mount namespace, an overlay over /, chroot; fresh /run, /tmp and
#     /dev/shm) and checks what a new user would see: maintainer scripts
#     (group, user, runtime dir, units enabled), msptid started by socket
#     activation as msptid.socket and msptid.service describe it, an agent
#     preloaded by name registering, a capture and its report, the Python
#     package, a CANN-style program built from the -dev packages, the
#     bash completion, a two-rank job exported as ascend-pt, the metrics
#     drop-in (msptid restarted with it, scraped, by Debian's prometheus
#     where installed); then purges them and checks nothing is left.
# Nothing of it reaches the host: the check kills what it starts by pid,
# and the mount and pid namespaces take their mounts and any straggler
# with them when they end.
# MSPTI_DEB_NO_APT=1 skips installing the build dependencies;
# MSPTI_DEB_KEEP=DIR keeps the .debs there; MSPTI_DEB_PREBUILT=DIR takes
# them from there instead of building.
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "ci-debian: needs root" >&2; exit 1; }
W=$(mktemp -d /tmp/mspti-deb.XXXXXX)
trap 'rm -rf "$W"' EXIT
export DEBIAN_FRONTEND=noninteractive

if [ -z "${MSPTI_DEB_NO_APT:-}" ]; then
	apt-get build-dep -y -q ./ >"$W/apt.log" 2>&1 ||
		{ tail -n 30 "$W/apt.log"; exit 1; }
fi

if [ -n "${MSPTI_DEB_PREBUILT:-}" ]; then
	echo "== packages from $MSPTI_DEB_PREBUILT"
	cp "$MSPTI_DEB_PREBUILT"/*.deb "$MSPTI_DEB_PREBUILT"/*.changes \
	    "$MSPTI_DEB_PREBUILT"/*.buildinfo "$W/"
else
	echo "== dpkg-buildpackage -us -uc -b"
	src="$W/mspti"
	mkdir "$src"
	if git rev-parse --git-dir >/dev/null 2>&1; then
		git ls-files -z -co --exclude-standard | xargs -0 sh -c \
		    'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		    tar --null -T - -cf - | tar -xf - -C "$src"
	else
		tar --exclude=./build --exclude=./debian/build -cf - . | tar -xf - -C "$src"
	fi
	(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=${JOBS:-2}" \
	    dpkg-buildpackage -us -uc -b) >"$W/build.log" 2>&1 ||
		{ tail -n 60 "$W/build.log"; echo "ci-debian: package build failed"; exit 1; }
fi
ls "$W"/*.deb | sed 's|.*/|  |'
[ -z "${MSPTI_DEB_KEEP:-}" ] ||
	{ mkdir -p "$MSPTI_DEB_KEEP"; cp "$W"/*.deb "$W"/*.changes "$W"/*.buildinfo "$MSPTI_DEB_KEEP/"; }

echo "== lintian"
# Its scratch files (mldbm-elf-*) go under $W, not /tmp, where each run
# left a dozen.
mkdir -p "$W/tmp"
TMPDIR="$W/tmp" lintian --fail-on error "$W"/*.changes >"$W/lintian.out" 2>&1 || lint=$?
grep -v '^running with root' "$W/lintian.out" || true
[ "${lint:-0}" -eq 0 ] || { echo "ci-debian: lintian reports errors"; exit 1; }

echo "== install on a copy of this system"
mkdir "$W/debs"
for d in "$W"/*.deb; do
	case $d in *-dbgsym_*) ;; *) cp "$d" "$W/debs/";; esac
done
for d in "$W"/debs/*.deb; do
	dpkg-deb --fsys-tarfile "$d" | tar -tf - | sed -n 's|^\./|/|p' |
	    grep -v '/$' >>"$W/debs/files" || true
done
cp scripts/ci-debian-check.sh "$W/debs/check.sh"
# Its own network namespace too: the metrics check listens on the
# drop-in's fixed port 9464, Prometheus on 9090.
timeout 600 unshare -m -p -n -f --kill-child --propagation private sh -eu -c '
W=$1
ip link set lo up
m="$W/root"
mkdir "$W/ovl" "$m"
mount -t tmpfs mspti-ovl "$W/ovl"
mkdir "$W/ovl/upper" "$W/ovl/work"
mount -t overlay overlay -o lowerdir=/,upperdir="$W/ovl/upper",workdir="$W/ovl/work" "$m"
mount -t proc proc "$m/proc"
mount --rbind /dev "$m/dev"
mount -t tmpfs mspti-shm "$m/dev/shm"
mount --rbind /sys "$m/sys"
mount -t tmpfs -o mode=0755 mspti-run "$m/run"
mount -t tmpfs -o mode=1777 mspti-tmp "$m/tmp"
cp -r "$W/debs" "$m/tmp/debs"
chroot "$m" /bin/sh /tmp/debs/check.sh
' sh "$W"
echo "ci-debian: packages build, pass lintian, install, run and purge"

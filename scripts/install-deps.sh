#!/bin/sh
# Installs the Debian packages the build and the tests need
# (scripts/debian-packages.txt, those of this architecture).  Does nothing
# when all are present.
set -e
here=$(dirname "$0")
missing=""
for p in $("$here/debian-packages.sh"); do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "missing Debian packages:$missing" >&2
	echo "run: sudo apt-get install -y$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends $missing

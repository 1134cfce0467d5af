#!/bin/sh
# One command from a fresh Debian 12 machine:
#   ./bootstrap.sh demo   install packages, build, run the demo
#   ./bootstrap.sh test   install packages, build, run every test
#   ./bootstrap.sh build  install packages and build only
#   ./bootstrap.sh cluster-demo  build, then the 2-node Slurm demo (root)
# The build goes to ./build; extra configure flags come from $CONFIGURE_FLAGS.
set -e
cd "$(dirname "$0")"
what=${1:-build}
case "$what" in
demo|test|build|cluster-demo) ;;
*) echo "usage: ./bootstrap.sh demo|test|build|cluster-demo" >&2; exit 2;;
esac
scripts/install-deps.sh
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh
mkdir -p build
cd build
[ -f Makefile ] || ../configure ${CONFIGURE_FLAGS:-}
make -j"$(nproc)"
case "$what" in
demo) make demo ;;
cluster-demo) ../scripts/cluster-demo ;;
test) make -j"$(nproc)" check ;;
esac

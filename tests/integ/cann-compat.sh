#!/bin/sh
# cann-compat.sh - a CANN-style C++ program builds against an installed
# prefix with only -I<prefix>/include -L<prefix>/lib and CANN's library
# names (-lascendcl -lhccl -lnnopbase -lopapi -lmsprofiler -lc_sec
# -lmspti), runs on the simulator (aclnn results, HcclCommInitAll,
# acl_prof, securec), and with libmspti preloaded its aclnn kernels come
# back as msPTI KERNEL records.  Also: the installed header layout, the
# pkg-config files, the CANN-shaped home with set_env.sh, and uninstall.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
CXX=${CXX:-c++}
command -v "$CXX" >/dev/null 2>&1 || { echo "SKIP: no C++ compiler"; exit 77; }
NPUSIM_SHM_PREFIX="npusimtest-cann-$$"
export NPUSIM_SHM_PREFIX
unset NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK NPUSIM_TIME_SCALE LD_PRELOAD || true
tmp=$(mktemp -d)
stage="$tmp/stage"
fail() {
	echo "FAIL: $*"
	[ -f "$tmp/out" ] && cat "$tmp/out"
	rm -rf "$tmp"
	rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-*
	exit 1
}

# Install as a user would, into a staging root.
env -u MAKEFLAGS -u MFLAGS ${MAKE:-make} -C "$top_builddir" install \
	DESTDIR="$stage" >"$tmp/out" 2>&1 || fail "make install"
pcval() { sed -n "s|^$1=||p" "$top_builddir/pkgconfig/npusim.pc"; }
inc="$stage$(pcval includedir)"
lib="$stage$(pcval libdir)"

for h in acl/acl.h acl/acl_base.h acl/acl_prof.h aclnn/acl_meta.h \
    aclnn/aclnn_base.h aclnnop/aclnn_add.h aclnnop/aclnn_matmul.h \
    hccl/hccl.h hccl/hccl_types.h runtime/rt.h npusim/npusim.h securec.h \
    mspti/mspti.h mstx/ms_tools_ext.h; do
	[ -f "$inc/$h" ] || fail "not installed: include/$h"
done
[ -e "$inc/sim" ] && fail "headers still under include/sim"
for n in ascendcl hccl hcomm nnopbase opapi runtime msprofiler c_sec; do
	[ -e "$lib/lib$n.so" ] || fail "no lib$n.so"
done

# libnpusim exports the CANN API, the simulator's own calls and securec,
# nothing internal.
for s in $(nm -D --defined-only "$lib/libnpusim.so" |
    awk '$2 ~ /^[TDBRVWiu]$/ { print $3 }' | sed 's/@.*//' | sort -u); do
	case "$s" in
	acl[A-Z]*|aclrt[A-Z]*|aclnn[A-Z]*|aclprof[A-Z]*|Hccl[A-Z]*|rt[A-Z]*) ;;
	npusim[A-Z]*|npusim_*) ;;
	mem*_s|str*_s|*printf_s) ;;
	*) fail "libnpusim exports $s" ;;
	esac
done

# pkg-config finds both packages in the staged prefix.
PKG_CONFIG_LIBDIR="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" \
	pkg-config --cflags --libs npusim libmspti >"$tmp/pc" 2>&1 ||
	fail "pkg-config: $(cat "$tmp/pc")"
grep -q -- "-I$inc" "$tmp/pc" || fail "pkg-config cflags: $(cat "$tmp/pc")"
grep -q -- "-lnpusim" "$tmp/pc" && grep -q -- "-lmspti" "$tmp/pc" ||
	fail "pkg-config libs: $(cat "$tmp/pc")"

# Build with nothing but the prefix and CANN's names.
"$CXX" -std=c++11 -Wall -Werror -I"$inc" -I"$inc/mspti" \
	-o "$tmp/prog" "$top_srcdir/tests/integ/cann-prog.cpp" -L"$lib" \
	-lascendcl -lhccl -lnnopbase -lopapi -lmsprofiler -lc_sec -lmspti \
	-lpthread >"$tmp/out" 2>&1 || fail "build the CANN program"
LD_LIBRARY_PATH="$lib" ldd "$tmp/prog" >"$tmp/out" 2>&1
grep -q "libnpusim.so.0 => $lib" "$tmp/out" || fail "not linked to libnpusim"

NPUSIM_DEVICES=2 LD_LIBRARY_PATH="$lib" "$tmp/prog" >"$tmp/out" 2>&1 ||
	fail "program failed"
for w in "add ok" "matmul ok" "hccl ok" "prof ok"; do
	grep -qx "$w" "$tmp/out" || fail "missing: $w"
done

# Preloaded (no daemon running: the agent waits silently), the aclnn
# launches are KERNEL records with the operator's name.
mkdir "$tmp/run"
MSPTID_RUNTIME_DIR="$tmp/run" NPUSIM_DEVICES=2 LD_LIBRARY_PATH="$lib" \
	LD_PRELOAD="$lib/libmspti.so" "$tmp/prog" >"$tmp/out" 2>&1 ||
	fail "program failed with libmspti preloaded"
grep -qx "kernel aclnnAdd_AddAiCore_Add KERNEL_AIVEC" "$tmp/out" ||
	fail "no Add KERNEL record"
grep -qx "kernel aclnnMatmul_MatMulV3Common_MatMulV3 KERNEL_AICORE" \
	"$tmp/out" || fail "no Matmul KERNEL record"
[ "$(grep -c '^api aclrtLaunchKernel$' "$tmp/out")" -eq 2 ] ||
	fail "expected one launch API record per aclnn call"

# The CANN-shaped home: $ASCEND_HOME_PATH/{include,lib64} as the
# samples' build files use them.
home="$lib/npusim/ascend"
bash -c ". '$home/set_env.sh' && [ -f \"\$ASCEND_HOME_PATH/include/aclnnop/aclnn_add.h\" ] &&
	[ -e \"\$ASCEND_HOME_PATH/lib64/libascendcl.so\" ] &&
	[ -e \"\$ASCEND_HOME_PATH/lib64/libmspti.so\" ]" ||
	fail "set_env.sh home"
# As the samples' CMakeLists do: include dirs and library paths from
# $ASCEND_HOME_PATH, libraries named by absolute path.
"$CXX" -std=c++11 -Wall -Werror -I"$home/include" -I"$home/include/acl" \
	-I"$home/include/aclnn" -I"$home/include/mspti" -o "$tmp/prog2" \
	"$top_srcdir/tests/integ/cann-prog.cpp" "$home/lib64/libascendcl.so" \
	"$home/lib64/libnnopbase.so" "$home/lib64/libopapi.so" \
	"$home/lib64/libhccl.so" "$home/lib64/libhcomm.so" \
	"$home/lib64/libmsprofiler.so" "$home/lib64/libmspti.so" \
	"$home/lib64/libc_sec.so" -ldl -lpthread >"$tmp/out" 2>&1 ||
	fail "build from the CANN home"
NPUSIM_DEVICES=2 LD_LIBRARY_PATH="$home/lib64" "$tmp/prog2" >"$tmp/out" \
	2>&1 || fail "program built from the CANN home failed"
grep -qx "prof ok" "$tmp/out" || fail "home build: no prof ok"

env -u MAKEFLAGS -u MFLAGS ${MAKE:-make} -C "$top_builddir" uninstall \
	DESTDIR="$stage" >"$tmp/out" 2>&1 || fail "make uninstall"
[ -e "$lib/libascendcl.so" ] && fail "uninstall left libascendcl.so"
[ -e "$home" ] && fail "uninstall left the CANN home"

rm -rf "$tmp"
rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-*
exit 0

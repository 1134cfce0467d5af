#!/bin/sh
# Link order never matters: api-linkorder.c built with libmspti before or
# after the runtime (libnpusim), with and without --as-needed.  libmspti
# first interposes (records come); the runtime first does not, and Enable
# says so (6) instead of SUCCESS and silence.  Every ACL call works in
# every case, also when --as-needed dropped the runtime from the link.
set -u
MSPTI_TEST_CC=
[ -f "$top_builddir/tests/integ/api-cc.env" ] &&
	. "$top_builddir/tests/integ/api-cc.env"
cc=${MSPTI_TEST_CC:-cc}
src="$top_srcdir/tests/integ/api-linkorder.c"
agent="$top_builddir/agent/.libs"
sim="$top_builddir/sim/.libs"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
works="enable api=0 memcpy=0 acl=0 records api=8 memcpy=1 device=1"
honest="enable api=6 memcpy=6 acl=0 records api=0 memcpy=0 device=0"
build() {	# out flag libs...
	out=$1; flag=$2; shift 2
	$cc -I"$top_srcdir/include" -I"$top_srcdir/sim/include" "$src" \
	    -o "$tmp/$out" -Wl,"$flag" -L"$agent" -L"$sim" "$@" || {
		echo "FAIL: cannot build $out"; fail=1; return 1; }
}
check() {	# what want preload cmd...: preload "" for none
	what=$1; want=$2; pre=$3; shift 3
	# A sanitizer build's libraries need its runtime loaded first.
	pre=${MSPTI_ASAN_RUNTIME:+$MSPTI_ASAN_RUNTIME${pre:+:}}$pre
	if [ -n "$pre" ]; then
		got=$(LD_PRELOAD="$pre" "$@" 2>&1)
	else
		got=$("$@" 2>&1)
	fi
	if [ "$got" != "$want" ]; then
		echo "FAIL $what: got '$got' want '$want'"; fail=1
	else
		echo "ok $what: $got"
	fi
}
for f in --as-needed --no-as-needed; do
	if build "first$f" "$f" -lmspti -lnpusim; then
		check "-lmspti -lnpusim $f" "$works" "" \
		    env LD_LIBRARY_PATH="$agent:$sim" "$tmp/first$f"
		# Dropped from the link, the runtime is found by
		# MSPTI_RUNTIME_LIBS alone.
		[ "$f" = --as-needed ] &&
		check "-lmspti -lnpusim $f, MSPTI_RUNTIME_LIBS" "$works" "" \
		    env LD_LIBRARY_PATH="$agent" \
		    MSPTI_RUNTIME_LIBS="/nonexistent/libx.so:$sim/libnpusim.so.0" \
		    "$tmp/first$f"
	fi
	if build "last$f" "$f" -lnpusim -lmspti; then
		check "-lnpusim -lmspti $f" "$honest" "" \
		    env LD_LIBRARY_PATH="$agent:$sim" "$tmp/last$f"
		check "-lnpusim -lmspti $f, LD_PRELOAD" "$works" \
		    "$agent/libmspti.so" \
		    env LD_LIBRARY_PATH="$agent:$sim" "$tmp/last$f"
	fi
done
exit $fail

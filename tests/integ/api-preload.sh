#!/bin/sh
# MSPTI_ERROR_WITHOUT_LD_PRELOAD (6) exactly when interposition is not in
# effect: decided from where the symbols resolve, not from the environment.
set -u
probe="$top_builddir/tests/integ/api-preload-probe"
lib="$top_builddir/agent/.libs/libmspti.so"
export NPUSIM_SHM_PREFIX="mspti-preload-$$"
fail=0
check() {
	if [ "$2" != "$3" ]; then
		echo "FAIL $1: got '$2' want '$3'"; fail=1
	else
		echo "ok $1: $2"
	fi
}
none=$("$probe")
check "runtime first, no preload" "$none" \
    "memcpy=6 hccl=6 memory=6 memset=6 subscribe=6 marker=0 kernel=6 api=6 comm=6 acl_api=6 node_api=6 runtime_api=6 external=6"
pre=$(LD_PRELOAD="${MSPTI_ASAN_RUNTIME:+$MSPTI_ASAN_RUNTIME:}$lib" "$probe")
check "LD_PRELOAD" "$pre" \
    "memcpy=0 hccl=0 memory=0 memset=0 subscribe=0 marker=0 kernel=0 api=0 comm=0 acl_api=0 node_api=0 runtime_api=0 external=0"
# The string alone proves nothing: naming a missing file must not count.
fake=$(LD_PRELOAD=/nonexistent/libmspti.so "$probe" 2>/dev/null)
check "LD_PRELOAD string without effect" "$fake" "$none"
exit $fail

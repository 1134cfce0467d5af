#!/bin/sh
# libmspti.so exports the msPTI/MSTX API and the interposed runtime
# functions, and nothing else (nm -D).  ASan's one-definition-rule
# markers (__odr_asan.NAME, sanitizer builds) go with an exported NAME.
set -u
lib="$top_builddir/agent/.libs/libmspti.so"
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVWiu]$/ { print $3 }' | sed 's/@.*//' |
    grep -v '^__odr_asan\.' | sort -u)
fail=0
for s in $syms; do
	case "$s" in
	mspti[A-Z]*|mstx[A-Z]*|acl[A-Z]*|aclrt[A-Z]*|Hccl[A-Z]*|rt[A-Z]*) ;;
	# agent/env.c: locked against the agent's threads reading it.
	setenv|unsetenv|putenv|clearenv) ;;
	*) echo "unexpected export: $s"; fail=1 ;;
	esac
done
for s in msptiActivityRegisterCallbacks msptiActivityEnable \
    msptiActivityDisable msptiActivityIsEnabled \
    msptiActivityEnableMarkerDomain msptiActivityDisableMarkerDomain \
    msptiActivityGetNextRecord msptiActivityFlushAll msptiActivityFlushPeriod \
    msptiActivityPushExternalCorrelationId msptiActivityPopExternalCorrelationId \
    msptiSubscribe msptiUnsubscribe msptiEnableCallback msptiEnableDomain \
    msptiActivityGetNumDroppedRecords \
    mstxMarkA mstxRangeStartA mstxRangeEnd mstxDomainCreateA mstxDomainDestroy \
    mstxDomainMarkA mstxDomainRangeStartA mstxDomainRangeEnd \
    aclrtLaunchKernel aclrtMemcpy aclrtMalloc HcclAllReduce; do
	echo "$syms" | grep -qx "$s" || { echo "missing export: $s"; fail=1; }
done
[ $fail = 0 ] && echo "exports ok: $(echo "$syms" | wc -l) symbols"
exit $fail

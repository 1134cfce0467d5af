#!/bin/sh
# A launcher that forks its ranks and sets RANK in each child after the
# child registered (so its Hello said rank -1): the child's rank shows once
# it starts using a device.
. "$(dirname "$0")/lib.sh"

export NPUSIM_SHM_PREFIX="mspti-regrank-$$"
start_daemon
MSPTI_JOB_ID=ranks $WITH_AGENT "$top_builddir/tests/integ/fork-rank" "$T/go" \
    >"$T/out" 2>&1 &
LP=$!; PIDS="$PIDS $LP"
ranks() {
	"$MSPTICTL" -r "$RT" --json list | python3 -c 'import json, sys; print(sorted((a["rank"], a["world_size"]) for a in json.load(sys.stdin)))'
}
wait_until 15 sh -c "[ \"\$(cd $T && '$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(sorted((a[\"rank\"], a[\"world_size\"]) for a in json.load(sys.stdin)))')\" = '[(-1, -1), (5, 8)]' ]" ||
	fail "ranks after fork: $(ranks), want [(-1, -1), (5, 8)]"
ok "a forked rank reports the RANK set after it registered"
touch "$T/go"
wait "$LP" || fail "launcher failed: $(cat "$T/out")"
rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"* 2>/dev/null
echo "registration-rank: all passed"

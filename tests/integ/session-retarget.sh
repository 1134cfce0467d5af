#!/bin/sh
# Retarget a live session: add the communication kind mid-session (only
# records after the change have it), remove and add a pid.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
MSPTI_JOB_ID=rt $WITH_AGENT "$DIST" --ranks 2 --steps 0 >"$T/dist.out" 2>&1 &
DP=$!; PIDS="$PIDS $DP"
wait_until 30 job_agents_ge rt 2 || fail "ranks did not register"
$CTL --json start --job rt --kinds kernel,marker --output "$T/rt.mspti" >"$T/s.json" ||
	fail "start: $(cat "$T/s.json")"
SID=$(json "$T/s.json" 'j["session"]')
sleep 1.5
T0=$(now_ns)
$CTL retarget --kinds +communication "$SID" >"$T/r.out" 2>&1 || fail "retarget: $(cat "$T/r.out")"
sleep 1.5
$CTL stop "$SID" >/dev/null || fail "stop"
"$DUMP" "$T/rt.mspti" >"$T/rt.jsonl" || fail "unreadable"
python3 - "$T/rt.jsonl" "$T0" <<'PY' >"$T/py.out" 2>&1 || fail "retarget content: $(tail -3 "$T/py.out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][:-1]
t0 = int(sys.argv[2])
comm = [r for r in recs if r["type"] == "communication"]
kern = [r for r in recs if r["type"] == "kernel"]
assert comm, "no communication records after retarget"
assert [k for k in kern if k["ts"] < t0], "no kernels before the change"
# Device-timed ops are read from the channel a little later: 1 s of slack.
early = [c for c in comm if c["end"] < t0 - 1000000000]
assert not early, early[:3]
assert any(r["type"] == "session" and r["event"] == 3 for r in recs)
PY
ok "retarget adds communication; only records after the change have it"

# Remove one pid, then add it back.
$CTL --json list >"$T/l.json"
P1=$(json "$T/l.json" '[a["pid"] for a in j if a["job"] == "rt"][0]')
$CTL --json start --pid "$P1" --kinds kernel --output "$T/rt2.mspti" >"$T/s2.json" || fail "start2"
SID2=$(json "$T/s2.json" 'j["session"]')
$CTL retarget --remove-pid "$P1" --add-pid 999999 "$SID2" >"$T/r2.out" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "mixed retarget exit $rc: $(cat "$T/r2.out")"
grep -q "pid $P1 .*removed" "$T/r2.out" || fail "remove ack: $(cat "$T/r2.out")"
grep -q "999999 .*FAILED: no agent registered" "$T/r2.out" || fail "add ack: $(cat "$T/r2.out")"
ok "retarget acks per pid: removed, and not found"
$CTL stop "$SID2" >/dev/null 2>&1
kill -TERM $DP; wait $DP
echo "session-retarget: all passed"

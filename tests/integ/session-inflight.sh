#!/bin/sh
# Launches still queued on the device when a capture stops: msptid waits
# (bounded, without blocking its loop) for their device tasks and
# delivers them joined; what is still missing after the wait is counted
# lost (device_unmatched) in stop --json, sessions, the trace footer (and
# a per-kind loss record) and report's banner - never silently absent.
# A back-to-back session of the same pid, started while the first still
# waits, takes none of the first one's tasks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

INFLIGHT="$top_builddir/tests/integ/inflight-app"

start_daemon

# app_registered PID: the daemon lists the real inflight-app as PID (not
# the libtool wrapper that execs it).
app_registered() {
	$CTL --json list 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(a["pid"] == int(sys.argv[1]) and "inflight-app" in a["exe"]
    for a in json.load(sys.stdin)) else 1)' "$1"
}

# inflight_run NAME N MS: an agent launching N kernels of MS ms once
# capturing; stops the capture right after the launches.  Leaves
# $T/NAME.stop (stop --json), $T/NAME.jsonl (trace-dump) and APPPID.
inflight_run() {
	rm -f "$T/$1.go" "$T/$1.done"
	$WITH_AGENT "$INFLIGHT" --go "$T/$1.go" --done "$T/$1.done" \
	    --kernels "$2" --kernel-ms "$3" >"$T/$1.out" 2>&1 &
	APPPID=$!; PIDS="$PIDS $APPPID"
	wait_until 20 app_registered $APPPID || fail "$1: app did not register"
	$CTL --json start --pid $APPPID --kinds api,kernel \
	    --output "$T/$1.mspti" >"$T/$1.start" 2>&1 ||
		fail "$1: start: $(cat "$T/$1.start")"
	sid=$(json "$T/$1.start" 'j["session"]')
	touch "$T/$1.go"
	wait_until 20 test -f "$T/$1.done" || fail "$1: no launches: $(cat "$T/$1.out")"
	# The device has just begun the first kernel.
	$CTL --json stop "$sid" >"$T/$1.stop" 2>&1 ||
		fail "$1: stop: $(cat "$T/$1.stop")"
	[ "$(json "$T/$1.stop" 'j["state"]')" = finalized ] ||
		fail "$1: not finalized: $(cat "$T/$1.stop")"
	"$DUMP" "$T/$1.mspti" >"$T/$1.jsonl" 2>"$T/$1.dump.err" ||
		fail "$1: trace unreadable: $(cat "$T/$1.dump.err")"
}

# Four kernels of 150 ms: all complete within the daemon's wait.
inflight_run short 4 150
python3 - "$T/short.jsonl" "$T/short.stop" <<'PY' >"$T/short.py" 2>&1 ||
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
end = recs.pop()
stop = json.load(open(sys.argv[2]))
api = {r["corr"] for r in recs if r["type"] == "api" and
    r["name"] == "aclrtLaunchKernel"}
kern = [r for r in recs if r["type"] == "kernel" and r["name"] == "inflight"]
warm = [r for r in recs if r["type"] == "kernel" and r["name"] == "warmup"]
joined = {k["corr"] for k in kern if k["flags"] & 8 and k["corr"] in api}
lost = end["footer"]["losses"][5]
assert len(api) == 5, "launches in the trace: %d" % len(api)
assert len(warm) == 1 and warm[0]["corr"] in api, warm
assert len(joined) + lost == 4, \
    "%d launches, %d kernels joined, %d counted lost: the rest vanished" % (
    len(api), len(joined), lost)
assert len(joined) == 4, "%d of 4 kernels delivered (%d counted lost)" % (
    len(joined), lost)
assert stop["losses"]["device_unmatched"] == 0, stop
print("kernels joined:", len(joined))
PY
	fail "short kernels: $(cat "$T/short.py")"
ok "kernels still queued at the stop are delivered, joined to their launch"
kill -TERM $APPPID

# One kernel of 60 s: beyond the wait; counted, not silent.
inflight_run long 1 60000
python3 - "$T/long.jsonl" "$T/long.stop" <<'PY' >"$T/long.py" 2>&1 ||
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
end = recs.pop()
stop = json.load(open(sys.argv[2]))
api = [r for r in recs if r["type"] == "api" and r["name"] == "aclrtLaunchKernel"]
kern = [r for r in recs if r["type"] == "kernel" and r["name"] == "inflight"]
warm = [r for r in recs if r["type"] == "kernel" and r["name"] == "warmup"]
assert len(api) == 2 and len(warm) == 1 and not kern, (api, kern, warm)
assert end["footer"]["losses"][5] == 1, end["footer"]
assert stop["losses"]["device_unmatched"] == 1, stop
assert stop["targets"][0]["losses"]["device_unmatched"] == 1, stop
# Per kind: a loss record for the KERNEL launch of this pid.
loss = [r for r in recs if r["type"] == "loss"]
assert [(l["stage"], l["lost_type"], l["count"], l["pid"]) for l in loss] == \
    [(5, 2, 1, api[0]["pid"])], loss
PY
	fail "long kernel: $(cat "$T/long.py")"
ok "a kernel still running after the wait is counted (stop --json, footer, per kind)"

$CTL sessions >"$T/sessions.out" 2>&1 || fail "sessions: $(cat "$T/sessions.out")"
grep -q "device_unmatched=1" "$T/sessions.out" ||
	fail "sessions does not show the loss: $(cat "$T/sessions.out")"
$CTL report "$T/long.mspti" >/dev/null 2>"$T/long.rep" ||
	fail "report: $(cat "$T/long.rep")"
grep -q "INCOMPLETE INPUT.*1 records lost" "$T/long.rep" ||
	fail "no banner: $(cat "$T/long.rep")"
ok "sessions and report's banner show it"
kill -9 $APPPID

# Back to back: session B of the same pid starts while A still waits for
# A's queued kernels.  Each of them is A's: delivered in A (joined) or
# counted lost in A, never written into B (B launched nothing).
try_start_b() {
	$CTL --json start --pid $APPPID --kinds api,kernel \
	    --output "$T/b2b-b.mspti" >"$T/b2b-b.start" 2>&1 &&
	    [ "$(json "$T/b2b-b.start" 'j["acks"][0]["ok"]')" = True ]
}
rm -f "$T/b2b.go" "$T/b2b.done"
$WITH_AGENT "$INFLIGHT" --go "$T/b2b.go" --done "$T/b2b.done" \
    --kernels 6 --kernel-ms 700 >"$T/b2b.out" 2>&1 &
APPPID=$!; PIDS="$PIDS $APPPID"
wait_until 20 app_registered $APPPID || fail "b2b: app did not register"
$CTL --json start --pid $APPPID --kinds api,kernel \
    --output "$T/b2b-a.mspti" >"$T/b2b-a.start" 2>&1 ||
	fail "b2b: start A: $(cat "$T/b2b-a.start")"
sida=$(json "$T/b2b-a.start" 'j["session"]')
touch "$T/b2b.go"
wait_until 20 test -f "$T/b2b.done" || fail "b2b: no launches: $(cat "$T/b2b.out")"
# 6 x 700 ms queued: A's stop waits its 3 s while B captures the pid.
$CTL --json stop "$sida" >"$T/b2b-a.stop" 2>&1 &
STOPA=$!
wait_until 20 try_start_b || fail "b2b: start B: $(cat "$T/b2b-b.start")"
sidb=$(json "$T/b2b-b.start" 'j["session"]')
wait $STOPA || fail "b2b: stop A: $(cat "$T/b2b-a.stop")"
# The queue is done 4.2 s after the launches; B sees whatever comes late.
sleep 2
$CTL --json stop "$sidb" >"$T/b2b-b.stop" 2>&1 || fail "b2b: stop B: $(cat "$T/b2b-b.stop")"
"$DUMP" "$T/b2b-a.mspti" >"$T/b2b-a.jsonl" || fail "b2b: A unreadable"
"$DUMP" "$T/b2b-b.mspti" >"$T/b2b-b.jsonl" || fail "b2b: B unreadable"
python3 - "$T/b2b-a.jsonl" "$T/b2b-a.stop" "$T/b2b-b.jsonl" "$T/b2b-b.stop" <<'PY' >"$T/b2b.py" 2>&1 ||
import json, sys
def load(f):
    recs = [json.loads(l) for l in open(f)]
    return recs[:-1], recs[-1]
ra, enda = load(sys.argv[1]); rb, endb = load(sys.argv[3])
sa, sb = json.load(open(sys.argv[2])), json.load(open(sys.argv[4]))
api = {r["corr"] for r in ra if r["type"] == "api" and r["name"] == "aclrtLaunchKernel"}
ka = [r for r in ra if r["type"] == "kernel" and r["name"] == "inflight"]
kb = [r for r in rb if r["type"] == "kernel" and r["name"] == "inflight"]
joined = {k["corr"] for k in ka if k["flags"] & 8 and k["corr"] in api}
lost = enda["footer"]["losses"][5]
assert len(api) == 7, "launches in A: %d" % len(api)
assert not kb, "%d of A's kernels written into B: %s" % (len(kb), kb[:2])
assert len(ka) == len(joined), "A: %d kernels, %d joined" % (len(ka), len(joined))
assert len(joined) + lost == 6, "A: %d joined + %d lost != 6" % (len(joined), lost)
assert sa["losses"]["device_unmatched"] == lost, sa["losses"]
assert endb["footer"]["losses"][5] == 0 and sb["losses"]["device_unmatched"] == 0, sb
print("A: %d joined, %d lost; B: none" % (len(joined), lost))
PY
	fail "back to back: $(cat "$T/b2b.py")"
ok "back to back: kernels queued in A stay A's ($(cat "$T/b2b.py"))"
kill -9 $APPPID

echo "session-inflight: all passed"

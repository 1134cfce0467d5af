#!/bin/sh
# The daemon's join of device tasks to launches holds only what can still
# be joined.  A marker-only capture of a process whose device runs
# kernels all the time keeps no device task waiting (msptictl sessions
# shows what the join holds): no launch can come for a kind the session
# never had on.  Retargeted to add kernel, the capture then gets kernel
# records joined to their launches, and the join drains as it goes.
# A device that completes more tasks in a drain period than its channel
# holds loses none: msptid polls the channels sooner while they fill.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
$WITH_AGENT "$TRAIN" --steps 0 >"$T/train.out" 2>&1 &
APP=$!; PIDS="$PIDS $APP"
wait_until 30 is_registered "$APP" || fail "npusim-train did not register"
$CTL --json start --pid "$APP" --kinds marker --output "$T/j.mspti" \
    >"$T/s.json" 2>&1 || fail "start: $(cat "$T/s.json")"
SID=$(json "$T/s.json" 'j["session"]')
sleep 1
$CTL --json sessions >"$T/a.json" || fail "sessions"
python3 - "$T/a.json" "$SID" <<'PY' >"$T/py.out" 2>&1 || fail "marker capture: $(tail -3 "$T/py.out")"
import json, sys
s = [x for x in json.load(open(sys.argv[1])) if x["session"] == int(sys.argv[2])]
assert s and s[0]["state"] == "active", s
s = s[0]
# Two marker records a step: the app ran hundreds of steps.
assert s["records"] > 400, "the app did not run: %s" % s
assert s["dev_tasks_waiting"] == 0, "%d device tasks held for launches " \
    "that cannot come" % s["dev_tasks_waiting"]
assert s["launches_waiting"] == 0, s
PY
ok "a marker-only capture of a busy device holds no device task"

T0=$(now_ns)
$CTL retarget --kinds +kernel "$SID" >"$T/r.out" 2>&1 ||
	fail "retarget: $(cat "$T/r.out")"
sleep 1
$CTL --json sessions >"$T/b.json" || fail "sessions"
$CTL stop "$SID" >"$T/stop.out" 2>&1 || fail "stop: $(cat "$T/stop.out")"
kill "$APP"
"$DUMP" "$T/j.mspti" >"$T/j.jsonl" || fail "trace unreadable"
python3 - "$T/b.json" "$SID" "$T/j.jsonl" "$T0" <<'PY' >"$T/py.out" 2>&1 || fail "kernel after retarget: $(tail -3 "$T/py.out")"
import json, sys
s = [x for x in json.load(open(sys.argv[1])) if x["session"] == int(sys.argv[2])][0]
# Launches and tasks meet within a drain or two: a step's worth, not
# the ~1,300 steps a second that the device runs.
assert s["dev_tasks_waiting"] + s["launches_waiting"] < 20000, s
recs = [json.loads(l) for l in open(sys.argv[3])][:-1]
t0 = int(sys.argv[4])
kern = [r for r in recs if r["type"] == "kernel"]
assert len(kern) > 1000, "%d kernel records after the retarget" % len(kern)
assert all(k["ts"] >= t0 - 1000000000 for k in kern), \
    [k for k in kern if k["ts"] < t0 - 1000000000][:2]
unjoined = [k for k in kern if k["corr"] == 0]
# At most the tasks of the launches in flight at the change.
assert len(unjoined) < 200, "%d of %d kernels without their launch" % (
    len(unjoined), len(kern))
PY
ok "after +kernel, kernels come joined to their launches"

# npusim-train's device completes ~63,000 tasks a second (45 a step of
# 0.71 ms); a channel of 2,048 records holds 32 ms of them, a third of
# msptid's 100 ms drain period.  Polled only by the drain timer, the
# channel lapped: 78 % of the records were lost (a lost task counts
# twice: the task and its launch left without timing).  Polled sooner, none
# are on an idle machine; with two busy loops on this test's 2 CPUs,
# msptid waited so long for a CPU that up to 28 % were.  So the test asks
# for less than half.  Device 1: device 0's channel (made by the first
# process with the default size) is still there.
# counts ERR WHAT: recs and lost from msptictl run's "finalized:" line.
counts() {
	line=$(grep 'finalized:' "$1")
	recs=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) records.*/\1/p')
	lost=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) lost.*/\1/p')
	[ -n "$recs" ] && [ -n "$lost" ] || fail "$2: no counts: $line"
}
NPUSIM_CHANNEL_RECORDS=2048 $CTL run --kinds kernel,memcpy,communication \
    --output "$T/fast.mspti" -- "$TRAIN" --steps 1500 --device 1 \
    >"$T/fast.out" 2>"$T/fast.err" ||
	fail "fast device: $(tail -3 "$T/fast.err")"
counts "$T/fast.err" "fast device"
[ "$recs" -gt 50000 ] || fail "fast device: $recs records ($line)"
[ $((lost * 2)) -lt $((recs + lost)) ] ||
	fail "fast device: $lost records lost of $((recs + lost)) ($line)"
ok "a device faster than its channel per drain period: $lost of $((recs + lost)) records lost"

# A device idle for 300 ms, then 40,000 kernels of 2.5 us (400,000 tasks
# a second: a 16,384-record channel laps in 41 ms), six times.  Over the
# idle spell msptid saw no rate; polled again only by the 100 ms drain
# timer, it lost 56-65 % of the records (most of every burst).  A channel
# in use is polled at least every 25 ms: none on an idle machine; busy
# ones may lose a little, so the test asks for less than a quarter.
$CTL run --kinds kernel --output "$T/burst.mspti" -- \
    "$top_builddir/tests/integ/burst-app" 6 40000 2500 300 \
    >"$T/burst.out" 2>"$T/burst.err" ||
	fail "bursts: $(tail -3 "$T/burst.err")"
counts "$T/burst.err" bursts
[ $((recs + lost / 2)) -ge 240000 ] ||
	fail "bursts: $recs records, $lost lost: not all 240,000 launches ($line)"
[ $((lost * 4)) -lt $((recs + lost)) ] ||
	fail "bursts: $lost records lost of $((recs + lost)) ($line)"
ok "a device idle, then faster than its channel per drain period: $lost of $((recs + lost)) records lost"
echo "session-devjoin: all passed"

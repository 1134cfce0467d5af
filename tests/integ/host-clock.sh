#!/bin/sh
# The agent's clock in a real capture (agent/hostclock.c): with the
# default clock on a host whose TSC is invariant and the kernel's
# clocksource, the trace holds the agent's TSC mappings (REC_HOST_CLOCK,
# one per refit: MSPTI_CLOCK_REFIT_MS=20 over ~0.5 s), each off by less
# than 1 ms when replaced; with MSPTI_CLOCK=realtime it says
# clock_gettime.  Either way every marker lies within 1 ms of the
# CLOCK_REALTIME reads the application made around its batch, markers
# keep their call order, and report and both exports read the trace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

CM="$top_builddir/tests/integ/clock-marks"
tsc=realtime
if grep -qw constant_tsc /proc/cpuinfo && grep -qw nonstop_tsc /proc/cpuinfo &&
    grep -qw rdtscp /proc/cpuinfo && [ "$(uname -m)" = x86_64 ] &&
    [ "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)" = tsc ]; then
	tsc=tsc
fi
registered() {
	$CTL --json list 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(a["pid"] == int(sys.argv[1]) and "clock-marks" in a["exe"]
    for a in json.load(sys.stdin)) else 1)' "$1"
}
start_daemon
for mode in default realtime; do
rm -f "$T/go"
if [ $mode = realtime ]; then
	MSPTI_CLOCK=realtime MSPTI_CLOCK_REFIT_MS=20 $WITH_AGENT "$CM" 150 "$T/go" >"$T/cm.out" 2>"$T/cm.err" &
	want=realtime
else
	MSPTI_CLOCK_REFIT_MS=20 $WITH_AGENT "$CM" 150 "$T/go" >"$T/cm.out" 2>"$T/cm.err" &
	want=$tsc
fi
APP=$!; PIDS="$PIDS $APP"
wait_until 20 registered $APP || fail "clock-marks did not register"
capture_start $APP marker "$T/$mode.mspti"
touch "$T/go"
wait "$APP" || fail "clock-marks failed: $(cat "$T/cm.err")"
$CTL --json wait "$SID" >"$T/wait.json" 2>&1 || $CTL --json stop "$SID" >"$T/wait.json" 2>&1
"$DUMP" "$T/$mode.mspti" >"$T/t.jsonl" || fail "trace unreadable"
python3 - "$T/t.jsonl" "$T/cm.out" $APP $want <<'PY' >"$T/py.out" 2>&1 || fail "$mode: $(tail -5 "$T/py.out")"
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
pid, want = int(sys.argv[3]), sys.argv[4]
end = recs.pop()
assert end["end"] and not end["truncated"], end
assert end["footer"]["losses"][1] == 0, end["footer"]
batches = {}
for l in open(sys.argv[2]):
    i, a, b = map(int, l.split())
    batches["b%d" % i] = (a, b)
assert len(batches) == 150, len(batches)
clocks = [r for r in recs if r["type"] == "host_clock"]
assert clocks and all(c["pid"] == pid for c in clocks), clocks[:3]
srcs = collections.Counter(c["source"] for c in clocks)
# Every HOST_CLOCK lies in the session's window (SESSION start to stop),
# like every other record of the capture.
sess = {r["event"]: r["ts"] for r in recs if r["type"] == "session"}
for c in clocks:
    assert sess[1] <= c["ts"] <= sess[2], ("HOST_CLOCK outside the session",
        c["ts"] - sess[1], sess[2] - c["ts"], c)
if want == "tsc":
    # The calibration's clock_gettime spell, then one mapping per refit.
    assert srcs["tsc"] >= 5, srcs
    for c in clocks:
        if c["source"] == "tsc":
            assert c["mult"] > 0 and abs(c["correction_ns"]) < 1000000, c
else:
    assert set(srcs) == {"realtime"}, srcs
marks = [r for r in recs if r["type"] == "marker"]
assert len(marks) == 150 * 100, len(marks)
B = 1000000
worst = 0
last = {}
for m in marks:
    a, b = batches[m["name"]]
    e = a - m["ts"] if m["ts"] < a else m["ts"] - b if m["ts"] > b else 0
    worst = max(worst, e)
    assert e <= B, (m, a, b)
    # Ids are the call order within the process (one thread here).
    p = last.get(m["tid"])
    assert p is None or (m["id"] > p["id"] and m["ts"] >= p["ts"]), (p, m)
    last[m["tid"]] = m
print("%d mappings %s, largest distance from CLOCK_REALTIME %d ns" %
      (len(clocks), dict(srcs), worst))
PY
ok "$mode (expects $want): $(cat "$T/py.out")"
$CTL report "$T/$mode.mspti" >"$T/report.out" 2>&1 || fail "report: $(tail -3 "$T/report.out")"
$CTL export --format perfetto "$T/$mode.mspti" -o "$T/$mode.pftrace" >"$T/exp.out" 2>&1 ||
	fail "perfetto export: $(tail -3 "$T/exp.out")"
$CTL export --format chrome "$T/$mode.mspti" -o "$T/$mode.json" >"$T/exp.out" 2>&1 ||
	fail "chrome export: $(tail -3 "$T/exp.out")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d["traceEvents"] if isinstance(d,dict) else d; assert sum(1 for e in ev if e.get("name","").startswith("b"))>=15000, len(ev)' "$T/$mode.json" ||
	fail "chrome export lacks the markers"
ok "$mode: report and exports read the trace"
done

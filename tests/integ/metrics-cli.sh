#!/bin/sh
# msptictl metrics against a real msptid and a real npusim-train with the
# agent preloaded: no sampling while no agent uses a device; then the
# device in use with plausible utilization, memory, power and temperature,
# and the process's cpu and rss; sampling stops when the job is gone.
. "$(dirname "$0")/lib.sh"

NPUSIM_SHM_PREFIX="mspti-metrics-$$"
export NPUSIM_SHM_PREFIX
unset NPUSIM_TIME_SCALE NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK || true
shm_cleanup() { rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-*; cleanup; }
trap shm_cleanup EXIT
TRAIN="$top_builddir/sim/.libs/npusim-train"
LIBDIR="$top_builddir/sim/.libs"
CTL="$MSPTICTL -r $RT"

start_daemon

$CTL --json metrics >"$T/m0.json" || fail "metrics with no agents"
python3 - "$T/m0.json" <<'PY' || fail "idle metrics wrong"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["period_ms"] == 0, m          # no timer while no device is used
assert m["devices"] == [] and m["processes"] == [], m
PY
ok "idle daemon samples nothing"

$CTL metrics --device x >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --device not a usage error"
$CTL metrics --last nope >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --last not a usage error"
ok "bad arguments are usage errors"

LD_LIBRARY_PATH="$LIBDIR" $WITH_AGENT "$TRAIN" --steps 0 >"$T/train.out" 2>&1 &
TP=$!
PIDS="$PIDS $TP"

# Wait until the device is in use and at least three points of every
# track (cpu % needs two /proc readings) are in the history.
check() {
	$CTL --json metrics --last 60s >"$T/m.json" 2>/dev/null &&
	python3 - "$T/m.json" "$TP" 2>/dev/null <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); pid = int(sys.argv[2])
d = [x for x in m["devices"] if x["device"] == 0]
p = [x for x in m["processes"] if x["pid"] == pid]
assert d and d[0]["in_use"] and p and p[0]["alive"]
assert d[0]["tracks"]["npu.util"]["samples"] >= 3
assert p[0]["tracks"]["cpu.percent"]["samples"] >= 2
PY
}
wait_until 30 check || { cat "$T/m.json" >&2; fail "device 0 and pid $TP never showed up in metrics"; }

python3 - "$T/m.json" "$TP" <<'PY' || fail "implausible metrics"
import json, sys
m = json.load(open(sys.argv[1])); pid = int(sys.argv[2])
assert m["period_ms"] > 0
d = [x for x in m["devices"] if x["device"] == 0][0]["tracks"]
u = d["npu.util"]
assert 0 < u["max"] <= 100 and 0 <= u["min"] <= u["avg"] <= u["max"], u
assert u["latest_ns"] <= m["now_ns"] and m["now_ns"] - u["latest_ns"] < 30e9, u
mt = d["npu.mem.total"]["latest"]; mu = d["npu.mem.used"]["latest"]
assert mt > 0 and 0 < mu <= mt, (mu, mt)
assert 0 < d["npu.power"]["latest"] < 10000, d["npu.power"]
assert 0 < d["npu.temp"]["latest"] < 200, d["npu.temp"]
p = [x for x in m["processes"] if x["pid"] == pid][0]
assert p["exe"] == "npusim-train", p
c = p["tracks"]["cpu.percent"]; r = p["tracks"]["mem.rss"]
assert c["samples"] >= 2 and 0 <= c["min"] and c["max"] < 1700, c
assert r["latest"] > 1 << 20, r
PY
ok "device 0 in use: utilization, memory, power, temperature; pid cpu and rss"

$CTL metrics --device 0 --last 30s >"$T/human.txt" || fail "human metrics"
grep -q "^device 0 (in use), last 30" "$T/human.txt" || fail "human header: $(cat "$T/human.txt")"
grep -q "npu.util" "$T/human.txt" && grep -q "^pid $TP npusim-train" "$T/human.txt" ||
	fail "human tracks: $(cat "$T/human.txt")"
$CTL --json metrics --device 1 >"$T/m1.json" || fail "metrics --device 1"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["devices"]==[] and m["processes"]==[], m' \
	"$T/m1.json" || fail "--device 1 shows other devices"
ok "table view and --device filter"

kill -TERM "$TP"; wait "$TP"
gone() {
	$CTL --json metrics >"$T/m2.json" 2>/dev/null &&
	python3 - "$T/m2.json" "$TP" 2>/dev/null <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); pid = int(sys.argv[2])
assert m["period_ms"] == 0
d = [x for x in m["devices"] if x["device"] == 0][0]
assert not d["in_use"] and d["tracks"]["npu.util"]["samples"] >= 3
p = [x for x in m["processes"] if x["pid"] == pid][0]
assert not p["alive"]
PY
}
wait_until 10 gone || { cat "$T/m2.json" >&2; fail "sampling did not stop after the job exited"; }
ok "sampling stops when no agent uses a device; history is kept"
kill -0 "$DAEMON_PID" || fail "daemon died"

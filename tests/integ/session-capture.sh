#!/bin/sh
# Capture a running npusim-train: the kernels in the trace are exactly
# those the simulator launched in every complete step of the window, with
# their names, their device timing joined in msptid (REC_F_JOINED, host
# times inside the launch's step, clock sync records and the model in the
# header, device-channel losses reported); stop by command, --duration,
# --steps; ring mode and snapshot; a 4-rank npusim-dist job captured by
# --job.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
$WITH_AGENT "$TRAIN" --steps 0 >"$T/train.out" 2>&1 &
APP=$!; PIDS="$PIDS $APP"
wait_until 20 is_registered $APP || fail "npusim-train did not register"

# Stop by command.
$CTL --json start --pid $APP --kinds api,kernel,marker \
    --output "$T/cap.mspti" >"$T/start.json" || fail "start failed: $(cat "$T/start.json")"
SID=$(json "$T/start.json" 'j["session"]')
[ "$(json "$T/start.json" 'j["acks"][0]["ok"]')" = True ] || fail "no ack: $(cat "$T/start.json")"
ok "start acknowledges the target"
sleep 2
$CTL --json stop "$SID" >"$T/stop.json" || fail "stop failed: $(cat "$T/stop.json")"
[ "$(json "$T/stop.json" 'j["state"]')" = finalized ] || fail "not finalized"
[ "$(json "$T/stop.json" '"device_channel" in j["losses"]')" = True ] ||
	fail "device-channel losses not reported: $(cat "$T/stop.json")"
"$DUMP" "$T/cap.mspti" >"$T/cap.jsonl" || fail "trace unreadable"
python3 - "$T/cap.jsonl" "$APP" <<'PY' >"$T/py.out" 2>&1 || fail "kernels in the trace do not match the simulator: $(tail -3 "$T/py.out")"
import bisect, json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
end = recs.pop()
assert end["end"] and not end["truncated"], end
# No ring, reject or disk loss; every launch got its device timing
# (device_unmatched, [5]: those still queued at the stop are not lost).
assert end["footer"]["losses"][1:] == [0, 0, 0, 0, 0], end
assert end["config"]["clock_sync"] == "daemon", end["config"]
assert end["config"]["clock_model"].startswith("dev0 "), end["config"]
syncs = [r for r in recs if r["type"] == "clock_sync"]
assert syncs and all(s["samples"] > 0 for s in syncs), syncs
assert any(r["type"] == "counter" and r["track"] == "npu.util" for r in recs)
assert any(r["type"] == "counter" and r["track"] == "cpu.percent" for r in recs)
want = collections.Counter({"DynamicShape": 1, "Conv2D": 8, "LayerNorm": 4,
    "Relu": 4, "MatMul": 12, "Add": 4, "Gelu": 4, "Softmax": 1, "Mul": 4,
    "ApplyAdam": 1})
api = {r["corr"]: r for r in recs if r["type"] == "api" and r["name"] == "aclrtLaunchKernel"}
# One API record a call: "api" takes the layer kinds (ACL, runtime) too,
# which would repeat it.
api_n = collections.Counter(r["corr"] for r in recs if r["type"] == "api")
assert api_n and max(api_n.values()) == 1, [c for c, n in api_n.items() if n > 1][:5]
starts = {r["id"]: r["ts"] for r in recs if r["type"] == "marker" and r["name"] == "step" and r["flag"] == 2}
steps = [(starts[r["id"]], r["ts"]) for r in recs if r["type"] == "marker" and r["name"] == "step" and r["flag"] == 4 and r["id"] in starts]
assert len(steps) >= 3, len(steps)
steps.sort()
step_starts = [st for st, _ in steps]
per = [collections.Counter() for _ in steps]
kernels = [r for r in recs if r["type"] == "kernel"]
assert kernels
joined = 0
for k in kernels:
    assert k["name"] in want, k
    a = api.get(k["corr"])
    if a is None:
        continue
    # Joined in msptid: device time mapped to host time runs after the
    # launch call (1 ms for the clock fit).
    assert k["flags"] & 8 and k["task"] != 0xffffffff, k
    # The call's API record says who made it: the launch's thread.
    assert a["kind"] == 3 and a["pid"] == k["pid"] == int(sys.argv[2]), (k, a)
    assert a["tid"] == k["tid"] and a["tid"] != 0, (k, a)
    assert k["ts"] >= a["ts"] - 1000000 and k["end"] >= k["ts"], (k, a)
    joined += 1
    # Steps do not overlap: the last one starting at or before the launch.
    i = bisect.bisect_right(step_starts, a["ts"]) - 1
    if i >= 0 and a["ts"] <= steps[i][1]:
        per[i][k["name"]] += 1
for i, c in enumerate(per):
    assert c == want, (i, c)
assert joined * 2 > len(kernels), (joined, len(kernels))
print("complete steps:", len(steps), "kernels:", len(kernels), "joined:", joined)
PY
ok "kernel count and names match every complete step in the window"

# --duration with --wait.
$CTL start --pid $APP --kinds kernel --duration 500ms --output "$T/dur.mspti" --wait >"$T/dur.out" 2>&1 ||
	fail "start --duration --wait: $(cat "$T/dur.out")"
grep -q "finalized (duration)" "$T/dur.out" || fail "no duration stop: $(cat "$T/dur.out")"
"$DUMP" "$T/dur.mspti" | grep -q '"type":"kernel"' || fail "no kernels in duration trace"
ok "--duration stops the session; --wait reports it"

# --steps with a custom step name counts marker ranges.
$CTL --json start --pid $APP --kinds marker --steps 5 --step-name step \
    --output "$T/steps.mspti" --wait >"$T/steps.out" 2>&1 || fail "steps: $(cat "$T/steps.out")"
tail -1 "$T/steps.out" >"$T/steps.json"
[ "$(json "$T/steps.json" 'j["stop_reason"]')" = steps ] || fail "steps: $(cat "$T/steps.out")"
[ "$(json "$T/steps.json" 'j["steps"]')" = 5 ] || fail "steps count: $(cat "$T/steps.out")"
ok "--steps 5 stops after five step ranges"

# Size limit.
$CTL --json start --pid $APP --kinds api,kernel,marker --max-size 64K \
    --output "$T/size.mspti" --wait >"$T/size.out" 2>&1 || fail "max-size: $(cat "$T/size.out")"
tail -1 "$T/size.out" >"$T/size.json"
[ "$(json "$T/size.json" 'j["stop_reason"]')" = "size limit" ] || fail "size: $(cat "$T/size.out")"
ok "--max-size stops the session"

# Ring mode: nothing written until snapshot; the snapshot is a full trace.
$CTL --json start --pid $APP --kinds kernel --mode ring --buffer 256K \
    --output "$T/ring.mspti" >"$T/ring.json" || fail "ring start"
RID=$(json "$T/ring.json" 'j["session"]')
sleep 1
# Options may follow SESSION.
$CTL snapshot "$RID" --output "$T/snap.mspti" >/dev/null || fail "snapshot failed"
"$DUMP" "$T/snap.mspti" >"$T/snap.jsonl" || fail "snapshot unreadable"
n=$(grep -c '"type":"kernel"' "$T/snap.jsonl")
[ "$n" -gt 100 ] || fail "snapshot has $n kernels"
$CTL stop "$RID" >/dev/null || fail "ring stop"
"$DUMP" "$T/ring.mspti" | grep -q '"type":"kernel"' || fail "ring stop wrote no kernels"
ok "ring mode: snapshot and stop write the flight recorder ($n kernels)"

$CTL --json sessions >"$T/sessions.json" || fail "sessions"
[ "$(json "$T/sessions.json" 'len([s for s in j if s["state"] == "finalized"])')" -ge 5 ] ||
	fail "sessions: $(cat "$T/sessions.json")"
ok "sessions lists finished sessions"

# Unknown pid: exit 3 and no file left behind.
(cd "$T" && $CTL start --pid 999999 >"$T/nf.out" 2>&1); rc=$?
[ $rc -eq 3 ] || fail "unknown pid exit $rc: $(cat "$T/nf.out")"
grep -q "no agent registered with pid 999999" "$T/nf.out" || fail "message: $(cat "$T/nf.out")"
ls "$T"/mspti-*.mspti 2>/dev/null && fail "file left for a failed start"
grep -q "output:" "$T/nf.out" && fail "printed a path for a failed start"
ok "unknown pid: exit 3, clear message, no file"

kill -TERM $APP; wait $APP || fail "npusim-train exit status after capture"

# A 4-rank job captured by job id (all-reducing 1000 gradient elements:
# the records carry the count the job asked for).
MSPTI_JOB_ID=distjob $WITH_AGENT "$DIST" --ranks 4 --grads 1000 --steps 0 \
    >"$T/dist.out" 2>&1 &
DP=$!; PIDS="$PIDS $DP"
wait_until 30 job_agents_ge distjob 4 || fail "ranks did not register"
$CTL --json start --job distjob --kinds kernel,hccl,communication \
    --output "$T/dist.mspti" >"$T/dstart.json" || fail "job start: $(cat "$T/dstart.json")"
[ "$(json "$T/dstart.json" 'sum(1 for a in j["acks"] if a["ok"])')" -ge 4 ] ||
	fail "job acks: $(cat "$T/dstart.json")"
DSID=$(json "$T/dstart.json" 'j["session"]')
sleep 1.5
$CTL stop "$DSID" >/dev/null || fail "job stop"
"$DUMP" "$T/dist.mspti" >"$T/dist.jsonl" || fail "dist trace unreadable"
python3 - "$T/dist.jsonl" <<'PY' || fail "dist trace content"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][:-1]
pids = {r["pid"] for r in recs if r["type"] == "kernel"}
procs = [r for r in recs if r["type"] == "process"]
assert len(pids) >= 4, pids
assert len(procs) >= 4, procs
comm = [r for r in recs if r["type"] in ("hccl", "communication")]
assert comm, "no communication records"
assert any(r["flags"] & 8 and r["corr"] for r in comm), comm[:3]
counts = {r["count"] for r in comm if r["type"] == "communication"}
assert counts == {1000}, counts
# Each rank on a device of its own: every rank's launches joined to its
# device's tasks (a launch record naming another device never joins).
end = json.loads(open(sys.argv[1]).read().splitlines()[-1])
joined = {r["pid"] for r in recs if r["type"] == "kernel" and r["flags"] & 8}
assert joined == pids, (joined, pids)
assert end["footer"]["losses"][5] == 0, end["footer"]
PY
ok "npusim-dist --ranks 4 --grads 1000: one session, every rank's kernels joined, the all-reduce's count"
kill -TERM $DP; wait $DP
echo "session-capture: all passed"

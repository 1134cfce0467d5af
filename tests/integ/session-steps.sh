#!/bin/sh
# Step windows: `msptictl start --steps N` over several ranks (real msptid,
# real agents stepping at different speeds) records exactly the same step
# indices [k, k+N) on every rank, k chosen ahead of every rank or forced
# with --start-step; the reply and `sessions` say k and the start skew;
# a rank that is past the window is told, not silently short.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
cd "$T" || fail "cd"

# start_ranks JOB N PERIOD_US [GO]: N step-ranks processes of JOB, rank i
# slower by half a period per rank; their pids in RANK_PIDS.  They start
# stepping together once registered, and are at different steps 0.3 s
# later; with GO, once the file GO exists.
start_ranks() {
	RANK_PIDS=""
	for i in $(seq 0 $(($2 - 1))); do
		RANK=$i WORLD_SIZE=$2 MSPTI_JOB_ID=$1 $WITH_AGENT "$STEPS" \
		    --steps 0 --period-us "$3" --spread 50 --until "$T/stop-$1" \
		    --go "${4:-$T/go-$1}" >/dev/null 2>&1 &
		RANK_PIDS="$RANK_PIDS $!"
		PIDS="$PIDS $!"
	done
	wait_until 20 step_agents "$1" "$2" || fail "ranks of $1 did not register"
	if [ -z "${4:-}" ]; then
		: >"$T/go-$1"
		sleep 0.3
	fi
}

stop_ranks() {
	: >"$T/stop-$1"
	for p in $RANK_PIDS; do wait "$p"; done
}

# Two ranks, one session: both record the window (one recorded 0 steps
# when the session counted N steps over all its agents).
start_ranks two 2 3000
$CTL --json start --job two --steps 3 --output "$T/two.mspti" >"$T/two.json" ||
	fail "start: $(cat "$T/two.json")"
sid=$(json "$T/two.json" 'j["session"]')
k=$(json "$T/two.json" 'j["step_from"]')
[ "$k" -ge 0 ] || fail "no step window in the reply: $(cat "$T/two.json")"
timeout 60 $CTL --json wait "$sid" >"$T/two-wait.json" || fail "wait"
stop_ranks two
[ "$(json "$T/two-wait.json" 'j["stop_reason"]')" = steps ] ||
	fail "did not stop by steps: $(cat "$T/two-wait.json")"
got=$(step_window "$T/two.mspti" 3) || exit 1
[ "$got" = "$k" ] || fail "trace window at $got, reply said $k"
json "$T/two-wait.json" '[(t["first_step"], t["steps"]) for t in j["targets"]]' \
    >"$T/two-t.txt"
[ "$(cat "$T/two-t.txt")" = "[($k, 3), ($k, 3)]" ] ||
	fail "targets: $(cat "$T/two-t.txt")"
ok "two ranks, --steps 3: both record steps [$k, $((k + 3)))"

# Four ranks at four speeds: the same steps everywhere; the skew of the
# window's start is reported.
start_ranks four 4 2000
$CTL --json start --job four --steps 4 --output "$T/four.mspti" >"$T/four.json" ||
	fail "start: $(cat "$T/four.json")"
sid=$(json "$T/four.json" 'j["session"]')
k=$(json "$T/four.json" 'j["step_from"]')
timeout 60 $CTL --json wait "$sid" >"$T/four-wait.json" || fail "wait"
stop_ranks four
got=$(step_window "$T/four.mspti" 4 "$k") || exit 1
[ "$(json "$T/four-wait.json" 'j["step_from"]')" = "$k" ] || fail "sessions: step_from"
json "$T/four-wait.json" 'j["step_skew_ns"]' | grep -Eq '^[0-9]+$' ||
	fail "no skew: $(cat "$T/four-wait.json")"
"$DUMP" "$T/four.mspti" | grep -q "steps \[$k, $((k + 4))) on 4 rank(s) from MSTX, start skew" ||
	fail "the trace does not record the window"
# The report numbers each rank's steps as the window does: k to k+3.
"$MSPTICTL" report --json --section steps "$T/four.mspti" >"$T/four-rep.json" ||
	fail "report: $(cat "$T/four-rep.json")"
python3 - "$T/four-rep.json" "$k" <<'PY' || fail "report's step numbers: $(cat "$T/four-rep.json")"
import json, sys
k = int(sys.argv[2])
rows = json.load(open(sys.argv[1]))["steps"]
by = {}
for r in rows:
    if r["Rank"] >= 0:
        by.setdefault(r["Rank"], []).append(r["Step"])
assert sorted(by) == [0, 1, 2, 3], by
for rank, steps in by.items():
    assert sorted(steps) == list(range(k, k + 4)), (rank, steps, k)
PY
"$MSPTICTL" report --section summary "$T/four.mspti" | grep -q "^step source *MSTX ranges 'step'" ||
	fail "report's summary: no step source"
ok "four ranks at four speeds: steps [$k, $((k + 4))) on every rank, skew stated"

# --start-step K: that window, on every rank (they wait for the go file
# before their first step, so none has passed K at the start).
start_ranks forced 3 2000 "$T/go"
$CTL --json start --job forced --steps 3 --start-step 40 \
    --output "$T/forced.mspti" >"$T/forced.json" || fail "start: $(cat "$T/forced.json")"
[ "$(json "$T/forced.json" 'j["step_from"]')" = 40 ] || fail "reply: $(cat "$T/forced.json")"
: >"$T/go"
sid=$(json "$T/forced.json" 'j["session"]')
timeout 60 $CTL --json wait "$sid" >/dev/null || fail "wait"
got=$(step_window "$T/forced.mspti" 3 40) || exit 1
ok "--start-step 40: steps [40, 43) on every rank"

# A forced window that every rank has passed: said per target, and the
# session of these pids ends instead of waiting for steps that will not
# come.
$CTL --json start --pid "$(echo $RANK_PIDS | tr ' ' ,)" --steps 3 --start-step 2 \
    --output "$T/past.mspti" >"$T/past.json" || fail "start: $(cat "$T/past.json")"
sid=$(json "$T/past.json" 'j["session"]')
timeout 30 $CTL --json wait "$sid" >"$T/past-wait.json" || fail "wait past"
# The start says so: no target will record a step (pids: the session
# ends; a job's: it waits for processes that join later).
grep -q 'no target will record a step' "$T/past.json" &&
	fail "the warning went to stdout: $(cat "$T/past.json")"
$CTL start --job forced --steps 3 --start-step 2 --output "$T/past-job.mspti" \
    >"$T/past-job.out" 2>"$T/past-job.err" || fail "start: $(cat "$T/past-job.out" "$T/past-job.err")"
grep -q '^msptictl start: no target will record a step: all 3 are past step 2 already (the session waits for processes that join later; msptictl stop ends it)$' "$T/past-job.err" ||
	fail "no warning for a job's window every rank has passed: $(cat "$T/past-job.out" "$T/past-job.err")"
sid=$(sed -n 's/^session \([0-9]*\) started.*/\1/p' "$T/past-job.out")
$CTL stop "$sid" >/dev/null 2>&1 || fail "stop $sid"
stop_ranks forced
[ "$(json "$T/past-wait.json" 'len([t for t in j["targets"] if "none captured" in t["message"] and t["first_step"] == -1])')" = 3 ] ||
	fail "late ranks not stated: $(cat "$T/past-wait.json")"
ok "a window every rank has passed: each target says so, and the start warns"

# Simulated training processes (npusim-train) at two speeds: each records
# exactly three steps, from the same step the daemon chose, with its
# kernels inside its window.
r=0
for scale in 1 2; do
	MSPTI_JOB_ID=sim RANK=$r NPUSIM_TIME_SCALE=$scale $WITH_AGENT "$TRAIN" \
	    --steps 0 >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	SIM_PIDS="${SIM_PIDS:-} $!"
	r=$((r + 1))
done
wait_until 20 job_agents_ge sim 2 || fail "npusim-train ranks did not register"
$CTL --json start --job sim --steps 3 --output "$T/sim.mspti" >"$T/sim.json" ||
	fail "start: $(cat "$T/sim.json")"
sid=$(json "$T/sim.json" 'j["session"]')
k=$(json "$T/sim.json" 'j["step_from"]')
timeout 60 $CTL --json wait "$sid" >"$T/sim-wait.json" || fail "wait sim"
for p in $SIM_PIDS; do kill "$p"; done
json "$T/sim-wait.json" 'sorted((t["rank"], t["first_step"], t["steps"]) for t in j["targets"] if t["steps"])' >"$T/sim-t.txt"
[ "$(cat "$T/sim-t.txt")" = "[(0, $k, 3), (1, $k, 3)]" ] ||
	fail "npusim targets: $(cat "$T/sim-t.txt"), k $k"
"$DUMP" "$T/sim.mspti" | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin][:-1]
ranks = {r["pid"]: r["rank"] for r in recs if r["type"] == "process" and r["rank"] >= 0}
assert len(ranks) == 2, ranks
for p in ranks:
    st = sorted(r["ts"] for r in recs if r["pid"] == p and r["type"] == "marker"
        and r["name"] == "step" and r["source"] == 0 and r["flag"] in (2, 16))
    en = [r for r in recs if r["pid"] == p and r["type"] == "marker"
        and r["name"] == "step" and r["source"] == 0 and r["flag"] in (4, 32)]
    assert len(st) == 3 and len(en) == 3, (p, len(st), len(en))
    kern = [r for r in recs if r["pid"] == p and r["type"] == "kernel"]
    assert kern, p
    # Joined kernels were launched inside the window; none ran before it.
    assert min(r["ts"] for r in kern) >= st[0] - 1000000, p
' || fail "npusim ranks: steps or kernels outside the window"
ok "two npusim-train ranks at two speeds: steps [$k, $((k + 3))) each, kernels inside"

# Usage: --start-step needs --steps.
$CTL start --all --start-step 3 2>"$T/usage.err"; [ $? -eq 2 ] ||
	fail "--start-step without --steps: not a usage error"
echo "session-steps: all passed"

#!/bin/sh
# Step indices from the synchronize pattern: processes that mark no MSTX
# step (tests/integ/sync-ranks: one or two synchronizes per iteration,
# from one or two call sites, a warm-up iteration that differs, setup
# synchronizes before the loop) still get step indices, so `msptictl start
# --steps N` (real msptid, real agents, the real msptictl) captures exactly
# N whole iterations [k, k+N), the same k on every rank, and says the
# steps come from the synchronize pattern; report's step breakdown reads
# them.  A process that marks MSTX steps keeps them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

SYNC="$top_builddir/tests/integ/sync-ranks"
start_daemon
cd "$T" || fail "cd"

# sync_agents JOB N: N agents of JOB run sync-ranks itself.
sync_agents() {
	[ "$($CTL --json list 2>/dev/null | python3 -c '
import json, sys
print(len([a for a in json.load(sys.stdin)
    if a["job"] == sys.argv[1] and "sync-ranks" in a["exe"]]))' "$1")" -ge "$2" ]
}

# check_window TRACE N K: every ranked process of TRACE recorded exactly
# the iterations [K, K+N): N synchronize step ranges with those indices,
# the tag kernels it<i % 256> of those iterations once each, and every
# other kernel of exactly N iterations (no warm-up, no partial one).
check_window() {
	"$DUMP" "$1" >"$T/w.jsonl" 2>"$T/w.err" || fail "trace: $(cat "$T/w.err")"
	python3 - "$T/w.jsonl" "$2" "$3" <<'PY' >"$T/w.out" 2>&1 ||
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][:-1]
n, k = int(sys.argv[2]), int(sys.argv[3])
ranks = {r["pid"]: r["rank"] for r in recs if r["type"] == "process"}
pids = sorted(p for p in ranks if any(r["pid"] == p and r["type"] == "kernel"
    for r in recs))
assert pids, "no kernel in the trace"
for p in pids:
    mk = [r for r in recs if r["pid"] == p and r["type"] == "marker"
        and r["source"] == 0 and r["name"] == "step"]
    assert all(r["domain"] == "mspti.sync" for r in mk), mk
    st = sorted(r["id"] - (1 << 62) for r in mk if r["flag"] == 2)
    en = sorted(r["id"] - (1 << 62) for r in mk if r["flag"] == 4)
    want = list(range(k, k + n))
    assert st == want and en == want, (p, st, en, want)
    names = {}
    for r in recs:
        if r["pid"] == p and r["type"] == "kernel":
            names[r["name"]] = names.get(r["name"], 0) + 1
    tags = {t: c for t, c in names.items() if t.startswith("it")}
    assert tags == {"it%d" % (i % 256): 1 for i in want}, (p, tags, want)
    rest = {t: c for t, c in names.items() if not t.startswith("it")}
    assert rest == {"fwd": 3 * n, "bwd": 5 * n, "opt": n}, (p, rest)
print("ok")
PY
	fail "window of $1: $(tail -3 "$T/w.out")"
}

# forced NAME K N [SYNC-RANKS OPTIONS]: a --mode one process of job NAME
# that waits for $T/go-NAME before its loop gets a window of N steps
# from K (--start-step K), then goes; waits for the session's end:
# $T/NAME.mspti and $T/NAME-wait.json.  Its loop stops at $T/stop-NAME.
forced() {
	name=$1 fk=$2 fn=$3
	shift 3
	MSPTI_JOB_ID=$name $WITH_AGENT "$SYNC" --mode one --go "$T/go-$name" \
	    --until "$T/stop-$name" "$@" >/dev/null 2>&1 &
	fp=$!
	PIDS="$PIDS $fp"
	wait_until 20 sync_agents "$name" 1 || fail "$name did not register"
	$CTL --json start --pid "$fp" --steps "$fn" --start-step "$fk" \
	    --output "$T/$name.mspti" >"$T/$name.json" || fail "start $name"
	: >"$T/go-$name"
	sid=$(json "$T/$name.json" 'j["session"]')
	timeout 60 $CTL --json wait "$sid" >"$T/$name-wait.json" ||
		fail "wait $name"
}

# One process, two synchronizes per step from two call sites: --pid with
# --steps 3, the daemon choosing k.
MSPTI_JOB_ID=one $WITH_AGENT "$SYNC" --mode two --period-us 3000 \
    --until "$T/stop-one" >/dev/null 2>&1 &
P1=$!
PIDS="$PIDS $P1"
wait_until 20 sync_agents one 1 || fail "sync-ranks did not register"
sleep 0.3
$CTL --json start --pid "$P1" --steps 3 --output "$T/one.mspti" >"$T/one.json" ||
	fail "start: $(cat "$T/one.json")"
sid=$(json "$T/one.json" 'j["session"]')
k=$(json "$T/one.json" 'j["step_from"]')
[ "$k" -gt 0 ] || fail "no window: $(cat "$T/one.json")"
timeout 60 $CTL --json wait "$sid" >"$T/one-wait.json" || fail "wait"
[ "$(json "$T/one-wait.json" 'j["stop_reason"]')" = steps ] ||
	fail "did not stop by steps: $(cat "$T/one-wait.json")"
[ "$(json "$T/one-wait.json" '[(t["first_step"], t["steps"], t["step_source"]) for t in j["targets"]]')" = \
    "[($k, 3, 'synchronize')]" ] || fail "targets: $(cat "$T/one-wait.json")"
check_window "$T/one.mspti" 3 "$k"
"$DUMP" "$T/one.mspti" | grep -q "steps \[$k, $((k + 3))) on 1 rank(s) from synchronize" ||
	fail "the trace does not say where the steps came from"
$CTL sessions >"$T/sessions.txt" || fail "sessions"
grep -q "steps from synchronize" "$T/sessions.txt" ||
	fail "sessions does not say where the steps came from: $(cat "$T/sessions.txt")"
$CTL report --json "$T/one.mspti" >"$T/one-report.json" || fail "report"
# Each step of the breakdown holds one iteration's ten 20 us kernels (to
# the ns the device-to-host clock mapping may round), numbered as the
# window's iterations; the summary says where the steps came from.
[ "$(json "$T/one-report.json" '[round(r["Computing(us)"], 2) for r in j["steps"]]')" = \
    "[200.0, 200.0, 200.0]" ] ||
	fail "report's steps: $(json "$T/one-report.json" 'j["steps"]')"
[ "$(json "$T/one-report.json" '[r["Step"] for r in j["steps"]]')" = \
    "[$k, $((k + 1)), $((k + 2))]" ] ||
	fail "report's step numbers, window at $k: $(json "$T/one-report.json" 'j["steps"]')"
json "$T/one-report.json" '[r["Value"] for r in j["summary"] if r["Item"] == "step source"]' |
	grep -q "the synchronize pattern" ||
	fail "report's summary: $(json "$T/one-report.json" 'j["summary"]')"
ok "--pid --steps 3, two syncs a step: iterations [$k, $((k + 3))) exactly, from synchronize"

# Two ranks at two speeds, both synchronizes through one helper (one call
# site): the same k on both, each recording those 3 iterations.
for r in 0 1; do
	RANK=$r WORLD_SIZE=2 MSPTI_JOB_ID=two $WITH_AGENT "$SYNC" --mode helper \
	    --period-us $((2000 + 3000 * r)) --until "$T/stop-two" >/dev/null 2>&1 &
	PIDS="$PIDS $!"
done
wait_until 20 sync_agents two 2 || fail "ranks of two did not register"
sleep 0.4
$CTL --json start --job two --steps 3 --output "$T/two.mspti" >"$T/two.json" ||
	fail "start: $(cat "$T/two.json")"
sid=$(json "$T/two.json" 'j["session"]')
k=$(json "$T/two.json" 'j["step_from"]')
timeout 60 $CTL --json wait "$sid" >"$T/two-wait.json" || fail "wait two"
[ "$(json "$T/two-wait.json" 'sorted((t["rank"], t["first_step"], t["steps"], t["step_source"]) for t in j["targets"])')" = \
    "[(0, $k, 3, 'synchronize'), (1, $k, 3, 'synchronize')]" ] ||
	fail "targets: $(cat "$T/two-wait.json")"
check_window "$T/two.mspti" 3 "$k"
ok "two ranks at two speeds, one sync site: iterations [$k, $((k + 3))) on both"

# --start-step: a forced window on a process that is not stepping yet
# (waits for a go file): exactly those iterations.
forced forced 9 2
check_window "$T/forced.mspti" 2 9
ok "--start-step 9 --steps 2 before the loop: iterations [9, 11)"

# A k the process passes before its steps are known: --start-step 2
# --steps 8 before the loop of a process whose pattern is found a few
# iterations in.  The window stays [2, 10), as on any other rank: the
# process records from the first step it knows, F, to 9, tells msptid
# so (wait, the trace and report say F, and the steps before it missed),
# and the session ends by steps.  Before, its window moved to [F, F+8).
forced late 2 8
[ "$(json "$T/late-wait.json" 'j["stop_reason"]')" = steps ] ||
	fail "late did not stop by steps: $(cat "$T/late-wait.json")"
f=$(json "$T/late-wait.json" 'j["targets"][0]["first_step"]')
[ "$f" -gt 2 ] && [ "$f" -lt 10 ] ||
	fail "late: first step $f: $(cat "$T/late-wait.json")"
[ "$(json "$T/late-wait.json" 'j["targets"][0]["steps"]')" = $((10 - f)) ] ||
	fail "late: steps: $(cat "$T/late-wait.json")"
check_window "$T/late.mspti" $((10 - f)) "$f"
"$DUMP" "$T/late.mspti" | grep -q "steps $f\.\.9 (joined at step $f: steps \[2, $f) missed)" ||
	fail "late: the trace does not say which steps were missed"
$CTL report --json "$T/late.mspti" >"$T/late-report.json" || fail "report late"
[ "$(json "$T/late-report.json" '[r["Step"] for r in j["steps"]]')" = \
    "$(python3 -c "print(list(range($f, 10)))")" ] ||
	fail "late report's steps: $(json "$T/late-report.json" 'j["steps"]')"
ok "--start-step 2 --steps 8, steps known from $f: iterations [$f, 10), the rest said missed"

# MSTX takes over in the middle of the window: a process that steps by
# the synchronize pattern starts marking MSTX steps at iteration 11 of the
# window [9, 13).  The count goes on (the first MSTX step is iteration
# 11), so exactly those 4 iterations are recorded, the synchronize range
# of iteration 11 is withdrawn, and report's breakdown holds the 4 whole
# iterations, numbered 9 to 12, with nothing left open.
forced take 9 4 --mstx-from 11
[ "$(json "$T/take-wait.json" '[(t["first_step"], t["steps"]) for t in j["targets"]]')" = \
    "[(9, 4)]" ] || fail "take targets: $(cat "$T/take-wait.json")"
"$DUMP" "$T/take.mspti" >"$T/take.jsonl" 2>"$T/take.err" ||
	fail "take trace: $(cat "$T/take.err")"
python3 - "$T/take.jsonl" <<'PY' >"$T/take.out" 2>&1 ||
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][:-1]
mk = [r for r in recs if r["type"] == "marker" and r["source"] == 0
    and r["name"] == "step"]
sync = sorted((r["id"] - (1 << 62), r["flag"], r["domain"]) for r in mk
    if r["id"] >= 1 << 62)
assert sync == [(9, 2, "mspti.sync"), (9, 4, "mspti.sync"),
    (10, 2, "mspti.sync"), (10, 4, "mspti.sync"), (11, 2, "mspti.sync"),
    (11, 4, "mspti.sync.withdrawn")], sync
mstx = [r["flag"] for r in mk if r["id"] < 1 << 62]
assert mstx == [2, 4, 2, 4], mstx
names = {}
for r in recs:
    if r["type"] == "kernel":
        names[r["name"]] = names.get(r["name"], 0) + 1
tags = {t: c for t, c in names.items() if t.startswith("it")}
assert tags == {"it9": 1, "it10": 1, "it11": 1, "it12": 1}, tags
print("ok")
PY
	fail "take window: $(tail -3 "$T/take.out")"
$CTL report --json "$T/take.mspti" >"$T/take-report.json" 2>"$T/take-report.err" ||
	fail "report take"
# (Compute to within 50 ns: the device-to-host clock mapping's rate.)
[ "$(json "$T/take-report.json" '[(r["Step"], abs(r["Computing(us)"] - 200) < 0.05) for r in j["steps"]]')" = \
    "[(9, True), (10, True), (11, True), (12, True)]" ] ||
	fail "take report's steps: $(json "$T/take-report.json" 'j["steps"]')"
! grep -q approximate "$T/take-report.err" ||
	fail "take report: $(cat "$T/take-report.err")"
$CTL export "$T/take.mspti" --format chrome -o "$T/take-chrome.json" ||
	fail "export take"
[ "$(json "$T/take-chrome.json" 'len([e for e in j["traceEvents"] if e.get("name") == "step" and e.get("ph") == "X"])')" = 4 ] ||
	fail "take export: not 4 step slices"
ok "MSTX steps from iteration 11 of the window [9, 13): those 4 iterations, one step each"

# msptictl run --steps 2: the window is set (k 0) before the process has
# shown any step; it starts with the first whole step after the pattern
# is found (in iteration 3 of --mode two: the sync of its forward pass
# completes three periods), so iterations [4, 6), and the session ends by
# steps.
$CTL --json run --steps 2 --output "$T/run.mspti" -- "$SYNC" --mode two \
    --iters 40 >"$T/run.json" 2>"$T/run.err" || fail "run: $(cat "$T/run.err")"
[ "$(json "$T/run.json" 'j["session"]["stop_reason"]')" = steps ] ||
	fail "run did not stop by steps: $(cat "$T/run.json")"
check_window "$T/run.mspti" 2 4
ok "run --steps 2 from the first call: iterations [4, 6), the first whole ones after the pattern"

# MSTX steps win: npusim-train marks its steps and also synchronizes.
$WITH_AGENT "$TRAIN" --steps 0 >/dev/null 2>&1 &
P4=$!
PIDS="$PIDS $P4"
wait_until 20 is_registered "$P4" || fail "npusim-train did not register"
sleep 0.3
$CTL --json start --pid "$P4" --steps 2 --output "$T/mstx.mspti" >"$T/mstx.json" ||
	fail "start mstx"
sid=$(json "$T/mstx.json" 'j["session"]')
timeout 60 $CTL --json wait "$sid" >"$T/mstx-wait.json" || fail "wait mstx"
[ "$(json "$T/mstx-wait.json" '[(t["steps"], t["step_source"]) for t in j["targets"]]')" = \
    "[(2, 'mstx')]" ] || fail "npusim-train: $(cat "$T/mstx-wait.json")"
! "$DUMP" "$T/mstx.mspti" | grep -q '"domain":"mspti.sync"' ||
	fail "synchronize steps written beside MSTX ones"
ok "a process with MSTX steps: steps from MSTX, none from synchronize"

: >"$T/stop-one"; : >"$T/stop-two"; : >"$T/stop-forced"; : >"$T/stop-take"; : >"$T/stop-late"
kill "$P4" 2>/dev/null
for p in $PIDS; do wait "$p" 2>/dev/null; done
PIDS=""
echo "sync-steps: all passed"

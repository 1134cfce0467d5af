# Helpers for the session tests (sourced after lib.sh): simulated
# workloads with the agent, trace-dump, and small JSON helpers.
TRAIN="$top_builddir/tests/integ/npusim-train"
DIST="$top_builddir/tests/integ/npusim-dist"
DUMP="$top_builddir/tests/integ/trace-dump"
NPUSIM_SHM_PREFIX="mspti-sess-$$"
export NPUSIM_SHM_PREFIX
unset NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK NPUSIM_TIME_SCALE || true
session_cleanup() {
	cleanup
	rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-* 2>/dev/null
}
trap session_cleanup EXIT
CTL="$MSPTICTL -r $RT"

# is_registered PID: the daemon lists an agent with that pid, running the
# real program (not the libtool wrapper script that execs it).
is_registered() {
	$CTL --json list 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(a["pid"] == int(sys.argv[1]) and "npusim" in a["exe"]
    for a in json.load(sys.stdin)) else 1)' "$1"
}

# json FILE EXPR: evaluates a Python expression over the JSON in FILE (j).
json() {
	python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# capture_start PID KINDS FILE [OPTION...]: a session on PID writing FILE;
# its id in SID (the test fails when it did not start).
capture_start() {
	cs_pid=$1 cs_kinds=$2 cs_out=$3
	shift 3
	$CTL --json start --pid "$cs_pid" --kinds "$cs_kinds" "$@" \
	    --output "$cs_out" >"$T/start.json" ||
		fail "start failed: $(cat "$T/start.json")"
	SID=$(json "$T/start.json" 'j["session"]')
}

# now_ns: CLOCK_REALTIME in ns.
now_ns() {
	python3 -c 'import time; print(time.time_ns())'
}

# job_agents_ge JOB N: at least N agents of JOB run the real program.
job_agents_ge() {
	[ "$($CTL --json list 2>/dev/null | python3 -c '
import json, sys
print(len([a for a in json.load(sys.stdin)
    if a["job"] == sys.argv[1] and "npusim" in a["exe"]]))' "$1")" -ge "$2" ]
}

# STEPS: tests/integ/step-ranks, whose ranks mark each step with "idx K".
STEPS="$top_builddir/tests/integ/step-ranks"

# step_window TRACE N [K]: every rank (a process record with a rank) in
# TRACE recorded exactly N steps, all under its own pid, and the same step
# indices [k, k+N) (its "idx" marks), k = K when given; no process without
# a rank recorded a step.  Prints k.
step_window() {
	"$DUMP" "$1" >"$T/win.jsonl" 2>"$T/win.err" ||
		fail "trace unreadable: $(cat "$T/win.err")"
	python3 - "$T/win.jsonl" "$2" "${3:--1}" <<'PY' >"$T/win.out" 2>&1 ||
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
recs = lines[:-1]
n, want_k = int(sys.argv[2]), int(sys.argv[3])
ranks = {r["pid"]: r["rank"] for r in recs if r["type"] == "process"}
starts, ends, idx = {}, {}, {}
for r in recs:
    if r["type"] != "marker" or r["source"] != 0:
        continue
    p = r["pid"]
    if r["name"] == "step" and r["flag"] in (2, 16):
        starts[p] = starts.get(p, 0) + 1
    elif r["name"] == "step" and r["flag"] in (4, 32):
        ends[p] = ends.get(p, 0) + 1
    elif r["name"].startswith("idx "):
        idx.setdefault(p, []).append(int(r["name"][4:]))
ranked = sorted(p for p, k in ranks.items() if k >= 0)
assert ranked, "no rank in the trace: %s" % ranks
for p in starts:
    assert p in ranked, "pid %d (rank %s) recorded steps" % (p, ranks.get(p))
ks = set()
for p in ranked:
    got = sorted(idx.get(p, []))
    assert starts.get(p, 0) == n and ends.get(p, 0) == n, \
        "rank %d (pid %d): %d step starts, %d ends, steps %s" % (
        ranks[p], p, starts.get(p, 0), ends.get(p, 0), got)
    assert got == list(range(got[0], got[0] + n)), \
        "rank %d: steps %s" % (ranks[p], got)
    ks.add(got[0])
assert len(ks) == 1, "ranks recorded different steps: %s" % {
    ranks[p]: sorted(idx.get(p, []))[:1] for p in ranked}
k = ks.pop()
assert want_k < 0 or k == want_k, "window starts at %d, not %d" % (k, want_k)
print(k)
PY
	fail "step window: $(tail -2 "$T/win.out")"
	cat "$T/win.out"
}

# step_agents JOB N: N agents of JOB run step-ranks itself (not its
# libtool wrapper).
step_agents() {
	[ "$($CTL --json list 2>/dev/null | python3 -c '
import json, sys
print(len([a for a in json.load(sys.stdin)
    if a["job"] == sys.argv[1] and "step-ranks" in a["exe"]]))' "$1")" -ge "$2" ]
}

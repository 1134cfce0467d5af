#!/bin/sh
# Clock skew recovered from collective ends on a 2-node minicluster, 2
# ranks per node of npusim-dist --launched, all-reducing across both
# nodes.  node2's host clock is SKEW ns ahead (minicluster --skew: its
# msptid, its ranks' agents and the simulator's clock samples all read the
# skewed clock); one cluster capture records both nodes on their own
# clocks; report and export estimate node2's offset (within 20 us of
# -SKEW, the stated uncertainty covering the true error), apply it (the
# same all-reduce ends together on the merged timeline) and, with
# --align never, show it without applying it.  Then the same without skew
# (offsets about 0), and one rank with a per-process skew of its own (its
# host's ranks disagree: that rank gets its own offset).  Last, node2's
# clock also runs fast by DRIFT_PPB (minicluster --drift) over a capture
# of DRIFT_STEPS steps (1-2 s): the report recovers the drift (negative:
# the offset added to node2's times shrinks), the offset at the capture's
# middle, and export lines up every all-reduce of the capture; the first
# skew capture, as long and not drifting, is the control (no drift).
. "$(dirname "$0")/cluster-lib.sh"

DIST="$top_builddir/tests/integ/npusim-dist"
SKEW=3000000
ERR_NS=20000
# 100 ppm over 1-2 s (128 steps, the model 20 times slower: ~10 ms a
# step): node2's offset moves 100-200 us across the capture, 50 times the
# 2 us a trend must stand out by (lib/clockalign.c) or more.
DRIFT_PPB=100000
DRIFT_STEPS=128
DRIFT_SCALE=20
STEPS=8
SCALE=1

# full_window NAME: every one of the 4 ranks recorded all STEPS steps (a
# rank the start reached after its window opened records fewer).
full_window() {
	"$MSPTICTL" report --json --section steps "$T/$1/node1.mspti" \
	    "$T/$1/node2.mspti" 2>/dev/null | python3 -c '
import json, sys
n = {}
for r in json.load(sys.stdin)["steps"]:
    n[r["Rank"]] = n.get(r["Rank"], 0) + 1
sys.exit(0 if sorted(n.items()) == [(r, int(sys.argv[1])) for r in range(4)] else 1)' "$STEPS"
}

# run_job NAME [ENV...]: 4 ranks of npusim-dist on 2 nodes, their model's
# times SCALE times longer, captured for STEPS steps from the controller;
# the traces land in $T/NAME.
run_job() {
	name=$1; shift
	$MC exec ctl env NPUSIM_ROCE_BW_GBS=8 NPUSIM_ROCE_LAT_US=10 \
	    NPUSIM_TIME_SCALE="$SCALE" \
	    srun -N2 --ntasks-per-node=2 -J "mc$name" \
	    env LD_PRELOAD="$AGENT_PRELOAD" "$@" "$DIST" --launched --steps 0 \
	    >"$T/$name.job" 2>&1 &
	JOB_PID=$!
	wait_until 30 sh -c "grep -q '^rank 3 step 3:' '$T/$name.job'" ||
		fail "$name: the ranks did not run: $(cat "$T/$name.job")"
	JOB=$($MC exec ctl squeue -h -t R -n "mc$name" -o %i)
	[ -n "$JOB" ] || fail "$name: no job: $(cat "$T/$name.job")"
	# A common window a little ahead of every rank (~7 ms a step).  On a
	# loaded machine the start may take longer than the ranks take to
	# get there: ranks past k miss steps (the reply says so) and a job
	# session whose ranks all passed it waits for ever; then try again
	# further ahead.
	done_=""
	for m in 150 600 2400; do
		k=$(sed -n 's/^rank [0-9]* step \([0-9]*\):.*/\1/p' "$T/$name.job" | sort -n | tail -1)
		# PICK=1: each node's daemon picks its own k (the windows
		# may start at different collectives).
		ks="--start-step $((k + m))"
		[ -n "${PICK:-}" ] && ks=""
		ctl "$MSPTICTL" start --cluster slurm --job "$JOB" --steps "$STEPS" \
		    $ks --output-dir "$T/$name" >"$T/$name.start" 2>&1 ||
			fail "$name: start: $(cat "$T/$name.start")"
		if ! grep -q 'missed\|none captured' "$T/$name.start" &&
		    ctl timeout $(((m + STEPS) / 40 + 20)) "$MSPTICTL" wait --cluster slurm \
		    --job "$JOB" --output-dir "$T/$name" >"$T/$name.wait" 2>&1 &&
		    full_window "$name"; then
			done_=1
			break
		fi
		echo "# $name: no full window at step $((k + m)), trying further ahead: $(tail -1 "$T/$name.job")"
		ctl "$MSPTICTL" stop --cluster slurm --job "$JOB" \
		    --output-dir "$T/$name" >/dev/null 2>&1
		rm -rf "$T/$name"
	done
	[ -n "$done_" ] || fail "$name: the window never opened: $(cat "$T/$name.start")"
	$MC exec ctl scancel "$JOB"
	wait "$JOB_PID" 2>/dev/null
	JOB_PID=""
	for i in 1 2; do
		[ -s "$T/$name/node$i.mspti" ] || fail "$name: no trace of node$i"
	done
}

# check_clocks NAME WANT_NODE2_NS: the clocks section of the report.
check_clocks() {
	"$MSPTICTL" report --json --section clocks "$T/$1/node1.mspti" \
	    "$T/$1/node2.mspti" >"$T/$1.clocks" 2>"$T/$1.err" ||
		fail "$1: report: $(cat "$T/$1.err")"
	python3 - "$T/$1.clocks" "$2" "$ERR_NS" <<'PY' || fail "$1: clocks: $(cat "$T/$1.clocks")"
import json, sys
c = json.load(open(sys.argv[1]))["clocks"]
want, tol = int(sys.argv[2]), int(sys.argv[3])
host = {r["Host"]: r for r in c if r["Kind"] == "host"}
ranks = {r["Rank"]: r for r in c if r["Kind"] == "rank"}
assert host["node1"]["Status"] == "reference", host
h = host["node2"]
assert h["Status"] == "estimated", h
err = abs(h["Offset(us)"] * 1e3 - want)
unc = h["Uncertainty(us)"] * 1e3
print("node2 offset %.3f us, injected %.3f us: error %.3f us, stated +- %.3f us, %d collectives"
      % (h["Offset(us)"], want / 1e3, err / 1e3, unc / 1e3, h["Collectives"]))
assert err <= tol, ("not within 20 us", err)
assert err <= unc, ("the stated uncertainty does not cover the error", err, unc)
assert h["Collectives"] >= 8, h
assert sorted(ranks) == [0, 1, 2, 3], ranks
for r in (2, 3):
    assert abs(ranks[r]["Applied(us)"] * 1e3 - want) <= tol, ranks[r]
for r in (0, 1):
    assert ranks[r]["Applied(us)"] == 0, ranks[r]
PY
}

# check_drift NAME SKEW_NS DRIFT_PPB: node2's clock runs ahead by SKEW_NS
# at the minicluster's start and fast by DRIFT_PPB from then on.  The
# clocks section states the drift (-DRIFT_PPB within 10 % or 2 ppm; 0
# exactly for none) and the offset at the capture's middle (the upper
# median all-reduce end of node1's ranks, on the reference clock) within
# 20 us and its uncertainty.  Without alignment, node2's all-reduce ends
# move away from node1's at DRIFT_PPB too (the hook reached the traces).
check_drift() {
	"$MSPTICTL" report --json --section clocks "$T/$1/node1.mspti" \
	    "$T/$1/node2.mspti" >"$T/$1.clocks" 2>"$T/$1.err" ||
		fail "$1: report: $(cat "$T/$1.err")"
	"$MSPTICTL" export "$T/$1/node1.mspti" "$T/$1/node2.mspti" \
	    --format chrome --align never -o "$T/$1.raw.json" >"$T/$1.export" 2>&1 ||
		fail "$1: export --align never: $(cat "$T/$1.export")"
	t0=0
	[ "$3" = 0 ] || t0=$($MC exec node2 printenv MSPTI_TEST_CLOCK_DRIFT_T0_NS)
	python3 - "$T/$1.clocks" "$T/$1.raw.json" "$2" "$3" "$t0" "$ERR_NS" <<'PY' || fail "$1: clocks: $(cat "$T/$1.clocks")"
import json, re, statistics, sys
c = json.load(open(sys.argv[1]))["clocks"]
raw = json.load(open(sys.argv[2]))
skew, ppb, t0, tol = (int(a) for a in sys.argv[3:7])
ends = {}
for e in raw["traceEvents"]:
    if e.get("ph") == "X" and e.get("name") == "HcclAllReduce" and e.get("cat") == "communication":
        ends.setdefault(e["pid"], []).append(
            raw["baseTimeNanoseconds"] + round((e["ts"] + e["dur"]) * 1e3))
assert len(ends) == 4, ("want the all-reduces of 4 ranks", list(ends))
rank = {}
for e in raw["traceEvents"]:
    if e.get("ph") == "M" and e.get("name") == "process_name":
        m = re.match(r"Rank (\d+) ", e["args"]["name"])
        if m:
            rank[e["pid"]] = int(m.group(1))
# Ranks 0 and 1 run on node1, 2 and 3 on node2 (srun's block placement).
n1 = [sorted(v) for p, v in ends.items() if rank[p] < 2]
n2 = [sorted(v) for p, v in ends.items() if rank[p] >= 2]
assert len(n1) == 2 and len(n2) == 2, rank
n = min(len(v) for v in n1 + n2)
assert n >= 16, n
e1 = [statistics.median(v[i] for v in n1) for i in range(n)]
e2 = [statistics.median(v[i] for v in n2) for i in range(n)]
span = e1[-1] - e1[0]
# The instant the offset is stated at: the upper median, as
# lib/clockalign.c takes it (the plain median is half a step earlier:
# ~0.7 us of drift here).
mid = sorted(e1)[n // 2]
# The raw trend of node2's ends against node1's (least squares).
d = [b - a for a, b in zip(e1, e2)]
ma, md = statistics.fmean(e1), statistics.fmean(d)
raw_ppb = sum((a - ma) * (b - md) for a, b in zip(e1, d)) / sum((a - ma) ** 2 for a in e1) * 1e9
h = {r["Host"]: r for r in c if r["Kind"] == "host"}["node2"]
want = -(skew + (mid - t0) * ppb / 1e9) if ppb else -skew
err = abs(h["Offset(us)"] * 1e3 - want)
unc = h["Uncertainty(us)"] * 1e3
print("node2: %d collectives over %.3f s; raw trend %+.3f ppm; drift %+.3f ppm, injected %+.3f ppm; "
      "offset at the middle %.3f us, injected %.3f us: error %.3f us, stated +- %.3f us"
      % (n, span / 1e9, raw_ppb / 1e3, h["Drift(ppm)"], -ppb / 1e3, h["Offset(us)"],
         want / 1e3, err / 1e3, unc / 1e3))
assert h["Status"] == "estimated", h
assert span >= 0.5e9, ("a capture too short to show a drift", span)
if ppb:
    got = h["Drift(ppm)"] * 1e3
    assert abs(got + ppb) <= max(0.1 * abs(ppb), 2000), ("drift not within 10 % of the injected",
                                                         got, -ppb)
    assert (got < 0) == (ppb > 0), ("drift of the wrong sign", got, -ppb)
    assert "drifts" in h["Note"], h
else:
    assert h["Drift(ppm)"] == 0 and "drifts" not in h["Note"], ("a drift where there is none", h)
assert err <= tol, ("offset at the middle not within 20 us", err)
assert err <= unc, ("the stated uncertainty does not cover the error", err, unc)
assert abs(raw_ppb - ppb) <= max(0.1 * abs(ppb), 2000), ("node2's ends do not drift as injected",
                                                         raw_ppb, ppb)
PY
}

# check_export NAME ALIGN_OPTION MAX_SPREAD_US MIN_SPREAD_US: the spread of
# one all-reduce's end times over the four ranks on the merged timeline.
check_export() {
	"$MSPTICTL" export "$T/$1/node1.mspti" "$T/$1/node2.mspti" \
	    --format chrome $2 -o "$T/$1.json" >"$T/$1.export" 2>&1 ||
		fail "$1: export $2: $(cat "$T/$1.export")"
	python3 - "$T/$1.json" "$3" "$4" <<'PY' || fail "$1: export $2: all-reduce ends"
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
lim, low = float(sys.argv[2]), float(sys.argv[3])
ar = {}
for e in ev:
    if e.get("ph") == "X" and e.get("name") == "HcclAllReduce" and e.get("cat") == "communication":
        ar.setdefault(e["pid"], []).append(e["ts"] + e["dur"])
assert len(ar) == 4, ("want the all-reduces of 4 ranks", list(ar))
n = min(len(v) for v in ar.values())
assert n >= 8, n
ends = [sorted(v) for v in ar.values()]
# The same steps on every rank (--start-step): the i-th all-reduce of
# each rank is one collective.
assert all(len(e) == len(ends[0]) for e in ends), [len(e) for e in ends]
worst = max(max(e[i] for e in ends) - min(e[i] for e in ends)
            for i in range(len(ends[0])))
print("all-reduce end spread across ranks: worst %.3f us" % worst)
assert worst <= lim and worst >= low, (worst, lim, low)
PY
}

mc_up 2 --skew node2=$SKEW
STEPS=$DRIFT_STEPS SCALE=$DRIFT_SCALE
run_job skew
STEPS=8 SCALE=1
check_clocks skew "-$SKEW"
ok "node2's +3 ms clock is recovered within 20 us, inside its stated uncertainty"
check_drift skew "$SKEW" 0
ok "over $DRIFT_STEPS steps without drift, node2's clock is said not to drift"
# Two independent measures agree: the fan-out's clock bracket for node2
# in the manifest (its clock minus the controller's, read through the
# same hook, tens of ms wide through srun) holds the estimate, which an
# offset off by whole steps would leave.
python3 - "$T/skew/manifest.json" "$T/skew.clocks" <<'PY' || fail "manifest clock bracket: $(cat "$T/skew/manifest.json")"
import json, sys
m = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))["clocks"]
b = {n["node"]: n["clock"] for n in m["nodes"]}["node2"]
est = -[r for r in c if r["Kind"] == "host" and r["Host"] == "node2"][0]["Offset(us)"] * 1e3
print("fan-out bracket node2 [%.3f, %.3f] ms, estimate %.3f ms" % (
    b["offset_min_ns"] / 1e6, b["offset_max_ns"] / 1e6, est / 1e6))
assert b["offset_min_ns"] <= est <= b["offset_max_ns"], (est, b)
PY
ok "the estimate lies in the manifest's fan-out clock bracket"
check_export skew "" 20 0
ok "export applies it: one all-reduce ends together on all ranks of both nodes"
check_export skew "--align never" 1e9 2900
ok "export --align never keeps each node's clock (ends ~3 ms apart)"
"$MSPTICTL" report --section clocks "$T/skew/node1.mspti" "$T/skew/node2.mspti" \
    --align never >"$T/never.txt" 2>&1 || fail "report --align never: $(cat "$T/never.txt")"
grep -q 'node2 .*estimated' "$T/never.txt" || fail "no estimate with --align never: $(cat "$T/never.txt")"
ok "report --align never still states the estimate"
# Windows the start picks by itself (no --start-step): one k for every
# node, else windows that start at different steps (k was chosen again
# after a node's window opened).  Windows that share 3
# steps or more are renumbered onto each other and recovered as well;
# windows with no step in common are "not estimable", never given an
# offset (check_clockalign's windows_disjoint covers that case for sure).
PICK=1
run_job pick
PICK=""
"$MSPTICTL" report --json --section clocks "$T/pick/node1.mspti" \
    "$T/pick/node2.mspti" >"$T/pick.clocks" 2>"$T/pick.err" || fail "pick: report"
python3 - "$T/pick.start" "$T/pick.clocks" "$SKEW" <<'PY' || fail "pick: $(cat "$T/pick.start" "$T/pick.clocks")"
import json, re, sys
start = open(sys.argv[1]).read()
c = json.load(open(sys.argv[2]))["clocks"]
skew = int(sys.argv[3])
m = re.search(r"steps \[(\d+), \d+\) on every node", start)
if m:
    apart = 0
else:
    f = dict(re.findall(r"(node\d) from (-?\d+)", start))
    apart = abs(int(f["node1"]) - int(f["node2"]))
h = [r for r in c if r["Kind"] == "host" and r["Host"] == "node2"][0]
print("windows %d steps apart: node2 %s %s" % (apart, h["Status"], h["Offset(us)"] or h["Note"]))
if apart <= 5:
    assert h["Status"] == "estimated", h
    assert abs(h["Offset(us)"] * 1e3 + skew) <= 20000, h
elif apart >= 8:
    # Ends of different collectives paired (ordinals from each window's
    # start) disagree; with the records' own seq, none is shared.
    assert h["Status"] == "not estimable" and ("do not agree" in h["Note"] or
                                               "no collective shared" in h["Note"]), h
    r2 = [r for r in c if r["Kind"] == "rank" and r["Rank"] == 2][0]
    assert r2["Applied(us)"] == "", r2
PY
ok "windows each node picked: recovered where they share steps, else not estimable"

$MC down
mc_up 2
run_job noskew
check_clocks noskew 0
ok "without skew node2's offset is about 0"

# Rank 1 alone has a clock 2 ms behind: node1's ranks disagree, so each
# of its ranks gets its own offset.
run_job rankskew sh -c '[ "$SLURM_PROCID" = 1 ] && export MSPTI_TEST_CLOCK_SKEW_NS=-2000000; exec "$@"' sh
"$MSPTICTL" report --json --section clocks "$T/rankskew/node1.mspti" \
    "$T/rankskew/node2.mspti" >"$T/rankskew.clocks" 2>&1 || fail "rankskew report"
python3 - "$T/rankskew.clocks" <<'PY' || fail "rank skew: $(cat "$T/rankskew.clocks")"
import json, sys
c = json.load(open(sys.argv[1]))["clocks"]
ranks = {r["Rank"]: r for r in c if r["Kind"] == "rank"}
host = {r["Host"]: r for r in c if r["Kind"] == "host"}
assert "disagree" in host["node1"]["Note"], host
r1 = ranks[1]
err = abs(r1["Applied(us)"] * 1e3 - 2000000)
print("rank 1 offset %.3f us, injected 2000 us: error %.3f us, stated +- %.3f us"
      % (r1["Applied(us)"], err / 1e3, r1["Uncertainty(us)"]))
assert err <= 20000 and err <= r1["Uncertainty(us)"] * 1e3, r1
for r in (0, 2, 3):
    assert abs(ranks[r]["Applied(us)"]) <= 20, ranks[r]
PY
ok "a rank with a clock of its own gets its own offset"

$MC down
mc_up 2 --skew node2=$SKEW --drift node2=$DRIFT_PPB
STEPS=$DRIFT_STEPS SCALE=$DRIFT_SCALE
run_job drift
check_drift drift "$SKEW" "$DRIFT_PPB"
ok "node2's clock 100 ppm fast: the drift and the offset at the middle are recovered"
check_export drift "" 20 0
ok "export applies it with the drift: every all-reduce ends together on both nodes"
echo "cluster-skew: all passed"

#!/bin/sh
# The real msprof-analyze on an ascend-pt export of a 4-rank capture:
# cluster -m all merges the ranks (steps, groups, links mapped to global
# ranks), the advisor writes its report, compare reads two ranks.  Runs
# only where the tool is: `msprof-analyze` on PATH, or MSPROF_ANALYZE set
# to a command that runs it; skipped (77) otherwise (Debian has no
# package).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
RANKS=4
STEPS=4

MSPROF=${MSPROF_ANALYZE:-}
if [ -z "$MSPROF" ]; then
	command -v msprof-analyze >/dev/null 2>&1 || {
		echo "SKIP: msprof-analyze not installed (set MSPROF_ANALYZE)"
		exit 77
	}
	MSPROF=msprof-analyze
fi

start_daemon
cd "$T" || fail "cd"
$CTL run --output "$T/dist.mspti" -- "$DIST" --ranks $RANKS --steps $STEPS \
    >"$T/dist.out" 2>"$T/dist.err" || fail "run dist: $(cat "$T/dist.err")"
$CTL export "$T/dist.mspti" --format ascend-pt -o "$T/apt" ||
	fail "export"

# shellcheck disable=SC2086 # MSPROF may be a command with arguments
$MSPROF cluster -d "$T/apt" -m all >"$T/cluster.log" 2>&1 ||
	fail "cluster: $(tail -3 "$T/cluster.log")"
python3 - "$T/apt" $RANKS $STEPS <<'PY' >"$T/cl.out" 2>&1 ||
import csv, glob, json, os, sys
root, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = os.path.join(root, "cluster_analysis_output")
# Per rank and step, the values of our step_trace_time.csv.
ours = {}
for f in glob.glob(root + "/*_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                   "step_trace_time.csv"):
    r = int(glob.glob(os.path.dirname(os.path.dirname(f)) +
                      "/profiler_info_*.json")[0].rsplit("_", 1)[1][:-5])
    for row in csv.DictReader(open(f)):
        ours[(r, int(row["Step"]))] = row
rows = [x for x in csv.DictReader(open(out + "/cluster_step_trace_time.csv"))
        if x["Type"] == "rank"]
assert len(rows) == n * steps, len(rows)
for x in rows:
    o = ours[(int(x["Index"]), int(x["Step"]))]
    for k in ("Computing", "Communication(Not Overlapped)", "Free",
              "Bubble", "Preparing"):
        assert abs(float(x[k]) - float(o[k])) < 0.002, (k, x, o)
    assert x["DP Index"] == x["Index"], x
grp = json.load(open(out + "/communication_group.json"))
assert grp["collective"] == [list(range(n))], grp
assert [g["pg_name"] for g in grp["comm_group_parallel_info"]] == ["dp"], grp
cc = json.load(open(out + "/cluster_communication.json"))
key = str(tuple(range(n)))
assert sorted(cc[key]) == sorted("step%d" % i for i in range(1, steps + 1))
for sk, ops in cc[key].items():
    real = [k for k in ops if not k.startswith("Total")]
    assert real, sk
    for k in real:
        assert sorted(ops[k]) == [str(i) for i in range(n)], (sk, k)
cm = json.load(open(out + "/cluster_communication_matrix.json"))
for sk, ops in cm[key].items():
    tot = [v for k, v in ops.items() if k.startswith("allreduce-total@")]
    assert len(tot) == 1, ops.keys()
    ring = {"%d-%d" % (i, (i + 1) % n) for i in range(n)}
    self_ = {"%d-%d" % (i, i) for i in range(n)}
    assert set(tot[0]) == ring | self_, (sk, sorted(tot[0]))
    for link in ring:
        assert tot[0][link]["Transport Type"] == "HCCS", tot[0][link]
        assert tot[0][link]["Bandwidth(GB/s)"] > 0, tot[0][link]
print("cluster: %d rank rows, group %s, ring links global" % (len(rows), key))
PY
	fail "cluster output: $(tail -5 "$T/cl.out")"
ok "$(cat "$T/cl.out")"

mkdir "$T/adv"
# shellcheck disable=SC2086
$MSPROF advisor all -d "$T/apt" -o "$T/adv" >"$T/adv.log" 2>&1 ||
	fail "advisor: $(tail -3 "$T/adv.log")"
html=$(ls "$T"/adv/mstt_advisor_*.html 2>/dev/null | head -1)
[ -n "$html" ] || fail "advisor wrote no report: $(tail -3 "$T/adv.log")"
grep -q "slow rank" "$html" || fail "advisor report has no slow rank table"
grep -q "SDMA" "$html" || fail "advisor report has no slow link table"
ok "advisor: $(basename "$html") with slow rank and slow link tables"

set -- "$T"/apt/*_ascend_pt
mkdir "$T/cmp"
# shellcheck disable=SC2086
$MSPROF compare -d "$1" -bp "$2" -o "$T/cmp" >"$T/cmp.log" 2>&1 ||
	fail "compare: $(tail -3 "$T/cmp.log")"
ls "$T"/cmp/performance_comparison_result_*.xlsx >/dev/null 2>&1 ||
	fail "compare wrote nothing: $(tail -3 "$T/cmp.log")"
grep -q "Computing Time" "$T/cmp.log" || fail "compare printed no summary"
ok "compare: two ranks compared"
echo "export-ascendpt-msprof: all passed"

#!/bin/sh
# report/export against ground truth from the simulator: a known op mix
# (exact counts), an injected slow rank (found, cause compute), exports
# that parse (JSON) and decode (protoc), and a truncated file reported.
set -eu
b=${top_builddir:-.}
s=${top_srcdir:-..}
t=$(mktemp -d)
trap 'rm -rf "$t" /dev/shm/"$NPUSIM_SHM_PREFIX"*' EXIT
export NPUSIM_SHM_PREFIX="${NPUSIM_SHM_PREFIX:-mspti}-rep$$" MSPTID_RUNTIME_DIR="$t"
ctl="$b/client/msptictl"
fail() { echo "FAIL: $*"; exit 1; }

# Known op mix, one rank, 5 steps.
"$b/tests/integ/capture-inproc" -n 1 -s 5 -o "$t/one" || fail capture
"$ctl" report --json "$t/one.rank0.trace" > "$t/one.json" || fail report
python3 - "$t/one.json" <<'PY' || fail "op mix"
import json, sys
r = json.load(open(sys.argv[1]))
ops = {o["OP Type"]: o for o in r["ops"]}
assert ops["MatMul"]["Count"] == 20, ops
assert ops["Add"]["Count"] == 15 and ops["TopK"]["Count"] == 5, ops
assert abs(ops["MatMul"]["Total Time(us)"] - 20 * 200) < 20 * 200 * 0.02, ops
steps = [x for x in r["steps"] if x["Rank"] == 0]
assert len(steps) == 5, steps
PY

# Slow rank: 4 ranks, rank 2 computes 4x slower.
NPUSIM_TIME_SCALE=10 NPUSIM_SLOW_RANK=2 "$b/tests/integ/capture-inproc" -n 4 -s 4 -o "$t/slow" \
	|| fail capture4
"$ctl" report --json "$t"/slow.rank*.trace > "$t/slow.json" || fail report4
python3 - "$t/slow.json" <<'PY' || fail "slow rank"
import json, sys
r = json.load(open(sys.argv[1]))
v = r["slow_rank"][0]
assert v["Rank"] == 2 and v["Cause"] == "compute", v
PY

# Exports.
"$ctl" export "$t"/slow.rank*.trace --format chrome -o "$t/x.json" || fail chrome
python3 - "$t/x.json" <<'PY' || fail "chrome json"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
assert d["distributedInfo"]["world_size"] == 4
assert any(e["ph"] == "X" and e.get("cat") == "kernel" for e in ev)
assert any(e["ph"] == "s" for e in ev) and any(e["ph"] == "f" for e in ev)
assert any(e["ph"] == "C" for e in ev)
assert any(e.get("cat") == "overlap" for e in ev)
PY
"$ctl" export "$t"/slow.rank*.trace --format perfetto -o "$t/x.pb" || fail pf
python3 "$s/tests/integ/perfetto_resolve.py" inflate "$t/x.pb" "$t/x.raw" ||
	fail "inflate"
protoc --decode perfetto.protos.Trace -I"$s/proto/perfetto" \
	"$s/proto/perfetto/trace.proto" < "$t/x.raw" > "$t/x.txt" || fail protoc
grep -q "TYPE_SLICE_BEGIN" "$t/x.txt" || fail "perfetto slices"
"$ctl" export "$t"/slow.rank*.trace --format csv -o "$t/csv" || fail csv
head -1 "$t/csv/op_statistic.csv" | grep -q "OP Type,Core Type,Count" || fail csvhdr
test -s "$t/csv/op_summary.csv" || fail op_summary

# Missing rank and truncated file: loud.
"$ctl" report "$t/slow.rank0.trace" "$t/slow.rank1.trace" \
	>/dev/null 2>"$t/err" || fail report-missing
grep -q "MISSING RANKS" "$t/err" || fail "missing rank not reported"
grep -q "INCOMPLETE INPUT" "$t/err" || fail "no partial banner"
if "$ctl" report --strict "$t/slow.rank0.trace" >/dev/null 2>&1; then
	fail "--strict exits 0 on partial input"
fi
"$ctl" report --strict "$t"/slow.rank*.trace >/dev/null 2>&1 \
	|| fail "--strict fails on complete input"
sz=$(wc -c < "$t/slow.rank3.trace")
head -c $((sz / 2)) "$t/slow.rank3.trace" > "$t/trunc.trace"
"$ctl" report "$t/trunc.trace" >/dev/null 2>"$t/err2" || true
grep -qi "truncated\|cannot read" "$t/err2" || fail "truncation not reported"
echo ok

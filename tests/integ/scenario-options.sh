#!/bin/sh
# The scenario options of npusim-dist and npusim-train: every scenario
# prints its truth as JSON on both programs, a scenario file sets the same
# things as the flags, and bad input gets one clear line and exit 2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
TRAIN="$top_builddir/tests/integ/npusim-train"

"$DIST" --list-scenarios >"$T/list" || fail "--list-scenarios"
names=$(awk '{ print $1 }' "$T/list")
[ "$(echo $names)" = "balanced slow-compute slow-link host-bound launch-bound aicpu memory-bound rotating jitter" ] ||
	fail "scenario list: $names"
for s in $names; do
	"$DIST" --scenario "$s" --ranks 3 --steps 4 --truth >"$T/d.json" ||
		fail "dist --truth $s"
	"$TRAIN" --scenario "$s" --steps 4 --truth >"$T/t.json" ||
		fail "train --truth $s"
	python3 - "$T/d.json" "$T/t.json" "$s" <<'PY' || fail "truth of $s"
import json, sys
d, t, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
for j, n in ((d, 3), (t, 1)):
    assert j["scenario"] == s and j["ranks"] == n and j["steps"] == 4, j
    assert j["distinct_kernels"] >= 20, j
    assert j["compute_ns_per_step"] > 0, j
assert t["slow_ranks"] == [] and t["collectives"] == [], t
assert set(d["collectives"]) >= {"HcclAllReduce", "HcclAllGather",
    "HcclReduceScatter", "HcclBroadcast", "HcclAlltoAll", "HcclSend",
    "HcclRecv"}, d
if s in ("slow-compute", "slow-link", "host-bound", "launch-bound", "aicpu",
         "memory-bound"):
    assert d["slow_ranks"] == [1] and d["cause"], d
    assert d["extra_ns_per_step"] > 0, d
else:
    assert d["slow_ranks"] == [] and d["cause"] is None, d
PY
done
ok "every scenario's truth on npusim-dist and npusim-train"

# The fault size and rank are the truth's.
"$DIST" --scenario slow-compute --ranks 8 --fault-pct 3 --slow-rank 5 \
    --truth >"$T/a.json" || fail "slow-compute truth"
[ "$(json "$T/a.json" 'j["slow_ranks"], j["fault_pct"], j["cause"]')" = "[5] 3 compute" ] ||
	fail "slow-compute truth: $(cat "$T/a.json")"
[ "$(json "$T/a.json" 'round(j["extra_ns_per_step"] / j["compute_ns_per_step"], 4)')" = "0.03" ] ||
	fail "3% of the step's compute: $(cat "$T/a.json")"
ok "fault size and rank in the truth"

# A scenario file sets the same as the flags; flags after it win.
cat >"$T/s.conf" <<'CONF'
# a slow rank
scenario = slow-compute
ranks = 8
fault-pct = 3
slow-rank = 5   # the sixth
seed 9
CONF
"$DIST" --scenario-file "$T/s.conf" --seed 1 --truth >"$T/b.json" ||
	fail "scenario file"
cmp -s "$T/a.json" "$T/b.json" || fail "file != flags: $(cat "$T/b.json")"
ok "a scenario file sets what the flags set"

# Bad input: one line on stderr, exit 2, nothing run.
bad() {
	"$@" >"$T/bad.out" 2>"$T/bad.err"
	rc=$?
	[ $rc -eq 2 ] || fail "$*: exit $rc"
	[ ! -s "$T/bad.out" ] || fail "$*: printed $(cat "$T/bad.out")"
	grep -q . "$T/bad.err" || fail "$*: no message"
}
bad "$DIST" --scenario nope --truth
grep -q "unknown scenario 'nope'" "$T/bad.err" || fail "unknown: $(cat "$T/bad.err")"
bad "$DIST" --scenario slow-compute --fault-pct 60 --truth
bad "$DIST" --scenario slow-compute --fault-pct abc --truth
bad "$DIST" --scenario slow-link --ranks 2 --slow-rank 2 --truth
bad "$DIST" --truth
bad "$DIST" --scenario-file "$T/none.conf"
# A FIFO nobody writes to: refused after a few seconds, not waited on.
mkfifo "$T/fifo.conf"
rc=0
timeout 60 "$DIST" --scenario-file "$T/fifo.conf" --truth >"$T/bad.out" \
    2>"$T/bad.err" || rc=$?
[ $rc -eq 2 ] || fail "a FIFO scenario file: exit $rc: $(cat "$T/bad.err")"
grep -q "fifo.conf: a FIFO that no writer" "$T/bad.err" ||
	fail "a FIFO scenario file: $(cat "$T/bad.err")"
printf 'scenario = balanced\nranks\n' >"$T/bad.conf"
bad "$DIST" --scenario-file "$T/bad.conf" --truth
grep -q "bad.conf:2: 'ranks' has no value" "$T/bad.err" || fail "file line: $(cat "$T/bad.err")"
printf 'scenario = balanced\nranks = 2\n' >"$T/two.conf"
bad "$TRAIN" --scenario-file "$T/two.conf" --truth
grep -q "one rank" "$T/bad.err" || fail "train ranks: $(cat "$T/bad.err")"
ok "bad scenario input: one clear line, exit 2"

# Without --scenario the programs run their own workload, as before.
"$DIST" --ranks 2 --steps 1 >"$T/legacy.out" 2>&1 || fail "legacy dist"
[ "$(grep -c '^rank [01] step 1: ' "$T/legacy.out")" -eq 2 ] || fail "legacy output"
ok "no --scenario: the legacy workload"

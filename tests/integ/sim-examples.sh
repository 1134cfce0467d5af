#!/bin/sh
# sim-examples.sh - the npusim example workloads run, report their steps,
# catch a failing rank, and stop cleanly on SIGTERM with --steps 0.
set -u
: "${top_builddir:=.}"
bin="$top_builddir/sim"
NPUSIM_SHM_PREFIX="npusimtest-ex-$$"
export NPUSIM_SHM_PREFIX
unset NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK NPUSIM_TIME_SCALE || true
out=$(mktemp)
fail() { echo "FAIL: $*"; cat "$out"; rm -f "$out" /dev/shm/"$NPUSIM_SHM_PREFIX"-*; exit 1; }

"$bin/npusim-train" --steps 3 >"$out" 2>&1 || fail "npusim-train exit"
[ "$(grep -c '^step [0-9]*: ' "$out")" -eq 3 ] || fail "train steps"

"$bin/npusim-dist" --ranks 3 --steps 2 --slow-rank 1 >"$out" 2>&1 ||
	fail "npusim-dist exit"
[ "$(grep -c '^rank [0-9] step [0-9]*: ' "$out")" -eq 6 ] || fail "dist steps"

"$bin/npusim-dist" --ranks 2 --steps 1 --slow-rank 5 >"$out" 2>&1 &&
	fail "bad --slow-rank accepted"

# --grads N: the ranks all-reduce N elements (each checks the sum); a
# bad count or one beside a scenario is one line on stderr and exit 2.
"$bin/npusim-dist" --ranks 3 --grads 5000 --steps 2 >"$out" 2>&1 ||
	fail "npusim-dist --grads 5000 exit"
[ "$(grep -c '^rank [0-9] step [0-9]*: ' "$out")" -eq 6 ] ||
	fail "dist --grads steps"
for bad in 0 -3 12x 67108865 99999999999999999999; do
	"$bin/npusim-dist" --grads "$bad" --steps 1 >"$out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "--grads $bad: exit $rc"
	[ "$(wc -l <"$out")" -eq 1 ] &&
	    grep -q "^npusim-dist: --grads $bad: not a count" "$out" ||
		fail "--grads $bad: message"
done
"$bin/npusim-dist" --scenario balanced --grads 100 --steps 1 >"$out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "does not apply to a scenario" "$out" ||
	fail "--grads beside --scenario: exit $rc"

# --steps 0 runs until signalled and then exits 0.
"$bin/npusim-train" --steps 0 >"$out" 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid" || fail "npusim-train --steps 0 did not exit 0"
grep -q '^step 1: ' "$out" || fail "train ran no step"
# Step times to 0.1 us: bench-overhead compares medians of them, and at
# 1 us a 0.7 ms step moved in steps of 0.14 %.
grep -q '^step 1: [0-9]*\.[0-9][0-9][0-9][0-9] ms$' "$out" ||
	fail "train's step time not to 0.1 us: $(grep -m1 '^step 1: ' "$out")"

"$bin/npusim-dist" --ranks 2 --steps 0 >"$out" 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid" || fail "npusim-dist --steps 0 did not exit 0"
grep -q '^rank 1 step 1: [0-9]*\.[0-9][0-9][0-9][0-9] ms$' "$out" ||
	fail "dist ran no step, or not to 0.1 us: $(grep -m1 '^rank 1 step 1: ' "$out")"

rm -f "$out" /dev/shm/"$NPUSIM_SHM_PREFIX"-*
exit 0

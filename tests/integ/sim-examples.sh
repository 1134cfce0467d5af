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

# --steps 0 runs until signalled and then exits 0.
"$bin/npusim-train" --steps 0 >"$out" 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid" || fail "npusim-train --steps 0 did not exit 0"
grep -q '^step 1: ' "$out" || fail "train ran no step"

"$bin/npusim-dist" --ranks 2 --steps 0 >"$out" 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid" || fail "npusim-dist --steps 0 did not exit 0"
grep -q '^rank 1 step 1: ' "$out" || fail "dist ran no step"

rm -f "$out" /dev/shm/"$NPUSIM_SHM_PREFIX"-*
exit 0

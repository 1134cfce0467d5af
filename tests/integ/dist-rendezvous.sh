#!/bin/sh
# npusim-dist --launched: the ranks meet through a root-info file in
# NPUSIM_COMM_DIR.  A FIFO left (or planted) at that name must not stop a
# rank in open(2) for ever: it keeps polling until rank 0 publishes the
# file (rename over the FIFO), and the job runs.
. "$(dirname "$0")/lib.sh"
DIST="$top_builddir/sim/npusim-dist"
export NPUSIM_SHM_PREFIX="${NPUSIM_SHM_PREFIX:-mspti}-rdv$$"
trap 'cleanup; rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"*' EXIT
mkdir -p "$T/comm"
mkfifo "$T/comm/rootinfo-rdv$$"
# rank R of 2, its output in $T/rR.out
rank() {
	env RANK="$1" WORLD_SIZE=2 LOCAL_RANK="$1" MSPTI_JOB_ID="rdv$$" \
	    NPUSIM_COMM_DIR="$T/comm" timeout 60 "$DIST" --launched \
	    --steps 3 >"$T/r$1.out" 2>&1
}
rank 1 &
R1=$!
PIDS="$PIDS $R1"
sleep 0.5
rank 0 &
R0=$!
PIDS="$PIDS $R0"
rc0=0 rc1=0
wait "$R0" || rc0=$?
wait "$R1" || rc1=$?
[ "$rc1" -ne 124 ] || fail "rank 1 waited for ever on the FIFO: $(cat "$T/r1.out")"
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] ||
	fail "exit $rc0/$rc1: $(cat "$T/r0.out" "$T/r1.out")"
grep -q '^rank 1 step 3:' "$T/r1.out" ||
	fail "rank 1 did not run its steps: $(cat "$T/r1.out")"
ok "a FIFO at the root info's name: the rank polls past it, the job runs"
echo "dist-rendezvous: all passed"

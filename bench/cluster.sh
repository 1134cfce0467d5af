#!/bin/sh
# Cluster fan-out figures on scripts/minicluster: minicluster start-up, and
# the latency from `msptictl start --cluster slurm` to every rank capturing
# (the reply comes once all nodes acked), for 2 and 4 nodes with 2 ranks
# each.  Prints figures only; without root or slurm-wlm it says why and
# prints none.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "cluster: skipped (needs root)"; exit 0; }
command -v slurmctld >/dev/null 2>&1 || { echo "cluster: skipped (slurm-wlm not installed)"; exit 0; }
MSPTICTL="$top_builddir/client/msptictl"
AGENT="$top_builddir/agent/.libs/libmspti.so"
APP="$top_builddir/tests/integ/agent-app"
export MSPTID="$top_builddir/daemon/msptid"
T=$(mktemp -d /tmp/mspti-bench-cluster.XXXXXX)
MC="$top_srcdir/scripts/minicluster --dir $T/mc"
JOB_PID=""
trap '[ -n "$JOB_PID" ] && { kill -9 $JOB_PID; wait $JOB_PID; } 2>/dev/null; $MC down; rm -rf "$T"' EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }

for n in 2 4; do
	t0=$(ms)
	$MC up "$n" >"$T/up.log" 2>&1 || { echo "cluster: minicluster up $n failed"; cat "$T/up.log"; exit 1; }
	t1=$(ms)
	$MC exec ctl srun -N"$n" --ntasks-per-node=2 -J bench env LD_PRELOAD="$AGENT" \
	    "$APP" --until "$T/go" >"$T/job.out" 2>&1 &
	JOB_PID=$!
	for _ in $(seq 1 200); do
		job=$($MC exec ctl squeue -h -t R -n bench -o %i)
		[ -n "$job" ] && break; sleep 0.05
	done
	for i in $(seq 1 "$n"); do
		for _ in $(seq 1 200); do
			[ "$($MC exec node$i "$MSPTICTL" --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 2 ] && break
			sleep 0.05
		done
	done
	best=""; all=""
	for k in 1 2 3; do
		s=$(ms)
		$MC exec ctl "$MSPTICTL" start --cluster slurm --job "$job" \
		    --output-dir "$T/cap$k" >"$T/start.out" 2>&1 || { echo "cluster: start failed:"; cat "$T/start.out"; exit 1; }
		e=$(ms)
		grep -q "^$n of $n nodes, $((2 * n)) of $((2 * n)) ranks capturing" "$T/start.out" ||
			{ echo "cluster: not all ranks capturing:"; cat "$T/start.out"; exit 1; }
		$MC exec ctl "$MSPTICTL" stop --cluster slurm --job "$job" --output-dir "$T/cap$k" >/dev/null 2>&1
		d=$((e - s)); all="$all $d"
		[ -z "$best" ] || [ "$d" -lt "$best" ] && best=$d
	done
	echo "cluster: $n nodes x 2 ranks: minicluster up $((t1 - t0)) ms; start -> all ranks capturing: best $best ms (runs:$all ms; target <= 1000 ms for 4 nodes)"
	touch "$T/go"
	{ kill -9 $JOB_PID; wait $JOB_PID; } 2>/dev/null; JOB_PID=""
	rm -f "$T/go"
	$MC down
done

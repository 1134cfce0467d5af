#!/bin/sh
# Cluster fan-out figures on scripts/minicluster: minicluster start-up, and
# the latency from `msptictl start --cluster slurm` to every rank capturing
# (the reply comes once all nodes acked), for 2 and 4 nodes with 2 ranks
# each; a --steps start (one k for all nodes: two fan-outs) and the
# window-start skew it achieved; a --duration start at one wall-clock
# instant and the spread of the nodes' starts.  Prints figures only;
# without root or slurm-wlm it says why and prints none.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "cluster: skipped (needs root)"; exit 0; }
command -v slurmctld >/dev/null 2>&1 || { echo "cluster: skipped (slurm-wlm not installed)"; exit 0; }
MSPTICTL="$top_builddir/client/msptictl"
AGENT="$top_builddir/agent/.libs/libmspti.so"
DIST="$top_builddir/sim/npusim-dist"
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
	    "$DIST" --launched --steps 0 >"$T/job.out" 2>&1 &
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
	s=$(ms)
	$MC exec ctl "$MSPTICTL" start --cluster slurm --job "$job" --steps 5 \
	    --output-dir "$T/caps" >"$T/start.out" 2>&1 || { echo "cluster: steps start failed:"; cat "$T/start.out"; exit 1; }
	e=$(ms)
	$MC exec ctl timeout 60 "$MSPTICTL" --json wait --cluster slurm --job "$job" \
	    --output-dir "$T/caps" >"$T/wait.json" 2>&1
	skew=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f ms over %d ranks" % (d.get("window_start_skew_ns", -1e6) / 1e6, d.get("window_ranks", 0)))' "$T/wait.json" 2>/dev/null || echo "?")
	echo "cluster: $n nodes: start --steps 5 (ask every node, then one k for all) $((e - s)) ms; window-start skew $skew ($(sed -n 's/^  steps \(.*\) on every node.*/\1/p' "$T/start.out"))"
	s=$(ms)
	$MC exec ctl "$MSPTICTL" --json start --cluster slurm --job "$job" --duration 1s \
	    --output-dir "$T/capd" >"$T/startd.json" 2>&1 || { echo "cluster: duration start failed:"; cat "$T/startd.json"; exit 1; }
	e=$(ms)
	python3 - "$T/startd.json" "$n" "$((e - s))" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
at = d["start_at_ns"]
per = ", ".join("%s sent +%.3f started +%.3f" % (n["node"], (n["reply"]["sent_ns"] - at) / 1e6,
                (n["reply"]["start_ns"] - at) / 1e6) for n in d["nodes"] if n["reply"])
print("cluster: %s nodes: start --duration 1s at one instant: start %s ms (probe %d ms); ranks' captures began %.3f ms apart, the last %.3f ms after the instant (ms after it: %s)"
      % (sys.argv[2], sys.argv[3], d["probe_ms"], d["start_skew_ns"] / 1e6, d["start_late_ns"] / 1e6, per))
PY
	$MC exec ctl timeout 30 "$MSPTICTL" wait --cluster slurm --job "$job" --output-dir "$T/capd" >/dev/null 2>&1
	{ kill -9 $JOB_PID; wait $JOB_PID; } 2>/dev/null; JOB_PID=""
	$MC down
done

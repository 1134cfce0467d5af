#!/bin/sh
# Distributed report figures on scripts/minicluster: a 2-node job of
# step-marking ranks (2 per node) captured node-local for 2 s, then the
# time of `report --cluster slurm` (the nodes analyse their own files, the
# summaries merge here) against gathering the traces and `report DIR`
# centrally, and the summary bytes moved per rank against the trace bytes
# per rank.  Best of 3; prints figures only; without root or slurm-wlm it
# says why and prints none.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "cluster-report: skipped (needs root)"; exit 0; }
command -v slurmctld >/dev/null 2>&1 || { echo "cluster-report: skipped (slurm-wlm not installed)"; exit 0; }
MSPTICTL="$top_builddir/client/msptictl"
AGENT="$top_builddir/agent/.libs/libmspti.so"
STEPS="$top_builddir/tests/integ/step-ranks"
export MSPTID="$top_builddir/daemon/msptid"
T=$(mktemp -d /tmp/mspti-bench-crep.XXXXXX)
MC="$top_srcdir/scripts/minicluster --dir $T/mc"
JOB_PID=""
trap '[ -n "$JOB_PID" ] && { kill -9 $JOB_PID; wait $JOB_PID; } 2>/dev/null; $MC down; rm -rf "$T"' EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }
ctl() { $MC exec ctl sh -c 'cd "$0" && exec "$@"' "$T" "$@"; }

$MC up 2 >"$T/up.log" 2>&1 || { echo "cluster-report: minicluster up failed"; cat "$T/up.log"; exit 1; }
$MC exec ctl srun -N2 --ntasks-per-node=2 -J bench env LD_PRELOAD="$AGENT" \
    "$STEPS" --steps 0 --period-us 500 --until "$T/go" >"$T/job.out" 2>&1 &
JOB_PID=$!
job=""
for _ in $(seq 1 200); do
	job=$($MC exec ctl squeue -h -t R -n bench -o %i)
	[ -n "$job" ] && break; sleep 0.05
done
for i in 1 2; do
	for _ in $(seq 1 200); do
		[ "$($MC exec node$i "$MSPTICTL" --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 2 ] && break
		sleep 0.05
	done
done
ctl "$MSPTICTL" start --cluster slurm --job "$job" --output-dir /run/cap >"$T/s.out" 2>&1 ||
	{ echo "cluster-report: start failed: $(cat "$T/s.out")"; exit 1; }
sleep 2
ctl "$MSPTICTL" stop --cluster slurm --job "$job" --output-dir /run/cap >"$T/s.out" 2>&1 ||
	{ echo "cluster-report: stop failed: $(cat "$T/s.out")"; exit 1; }

dbest=""
for _ in 1 2 3; do
	t0=$(ms)
	ctl "$MSPTICTL" report --cluster slurm --job "$job" /run/cap >"$T/d.out" 2>"$T/d.err" ||
		{ echo "cluster-report: distributed report failed: $(cat "$T/d.err")"; exit 1; }
	t=$(( $(ms) - t0 ))
	[ -z "$dbest" ] || [ "$t" -lt "$dbest" ] && dbest=$t
done
gbest=""; cbest=""
for _ in 1 2 3; do
	t0=$(ms)
	for i in 1 2; do $MC exec node$i cat /run/cap/node$i.mspti >"$T/node$i.mspti"; done
	ctl sh -c "cp '$T/node1.mspti' '$T/node2.mspti' /run/cap/"
	t1=$(ms)
	ctl "$MSPTICTL" report /run/cap >"$T/c.out" 2>"$T/c.err" ||
		{ echo "cluster-report: central report failed: $(cat "$T/c.err")"; exit 1; }
	t2=$(ms)
	[ -z "$gbest" ] || [ $((t1 - t0)) -lt "$gbest" ] && gbest=$((t1 - t0))
	[ -z "$cbest" ] || [ $((t2 - t1)) -lt "$cbest" ] && cbest=$((t2 - t1))
	ctl sh -c 'rm -f /run/cap/node1.mspti /run/cap/node2.mspti'
done
touch "$T/go"
tb=$(( $(stat -c %s "$T/node1.mspti") + $(stat -c %s "$T/node2.mspti") ))
same=no; cmp -s "$T/d.out" "$T/c.out" && same=yes
sed -n 's/^msptictl report: \(.*\)/distributed report, 2 nodes x 2 ranks: \1/p' "$T/d.err"
echo "distributed report, 2 nodes x 2 ranks: trace bytes $tb ($(( tb / 4 )) per rank) stay on the nodes"
echo "distributed report, 2 nodes x 2 ranks: $dbest ms (srun fan-out, per-node analysis, merge) against central: gather $gbest ms + report $cbest ms = $((gbest + cbest)) ms; same report: $same"

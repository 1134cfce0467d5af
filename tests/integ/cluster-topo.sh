#!/bin/sh
# The minicluster's --skew and --drift, then the simulator's topology on a 2-node
# minicluster: srun starts 4 ranks of
# npusim-dist --launched (2 per node, rank/world/device from SLURM_PROCID,
# SLURM_NTASKS, SLURM_LOCALID); the ranks of both nodes, each node with its
# own /dev/shm, form one communicator through the shared NPUSIM_COMM_DIR
# the minicluster sets, and their all-reduce results are right.  One
# cluster capture records it on both nodes, and every all-reduce lasts
# (less its wait) the ring model at the configured RoCE link, not the
# node's HCCS link.
. "$(dirname "$0")/cluster-lib.sh"

DIST="$top_builddir/tests/integ/npusim-dist"
# OPT BAD...: each bad value is one line of error and leaves nothing.
for bads in "--skew bogus node3=1 node2=1x node0=5" \
    "--drift bogus node3=1 node2=1x node0=5 node2=500001 node2=-99999999999"; do
	set -- $bads
	opt=$1
	shift
	for bad; do
		$MC up 2 $opt "$bad" >"$T/bad.out" 2>&1 && fail "up $opt $bad worked"
		[ "$(wc -l <"$T/bad.out")" = 1 ] && grep -q "^minicluster: $opt" "$T/bad.out" ||
			fail "up $opt $bad: $(cat "$T/bad.out")"
		[ -e "$T/mc" ] && fail "up $opt $bad left $T/mc behind"
	done
	ok "a bad $opt is one line of error and leaves nothing behind"
done

# node2's clock runs 5 ms ahead for our programs, and 20 ppm slow from
# the cluster's start on: its msptid, exec and every Slurm task there see
# the skew and one drift with one anchor, node1 none.
mc_up 2 --skew node2=5000000 --drift node2=-20000
clk='$(hostname)=${MSPTI_TEST_CLOCK_SKEW_NS:-none},${MSPTI_TEST_CLOCK_DRIFT_PPB:-none},${MSPTI_TEST_CLOCK_DRIFT_T0_NS:-none}'
t0=$($MC exec node2 printenv MSPTI_TEST_CLOCK_DRIFT_T0_NS)
case $t0 in ''|*[!0-9]*) fail "exec node2: drift anchor '$t0'" ;; esac
want="node1=none,none,none node1=none,none,none node2=5000000,-20000,$t0 node2=5000000,-20000,$t0 "
got=$($MC exec ctl srun -N2 --ntasks-per-node=2 -l sh -c "echo \"$clk\"" | sed 's/^[0-9]*: //' | sort | tr '\n' ' ')
[ "$got" = "$want" ] || fail "srun tasks' clock hooks: $got, want $want"
got=$($MC exec node2 sh -c 'echo $MSPTI_TEST_CLOCK_SKEW_NS $MSPTI_TEST_CLOCK_DRIFT_PPB')
[ "$got" = "5000000 -20000" ] || fail "exec node2: skew and drift '$got'"
for v in MSPTI_TEST_CLOCK_SKEW_NS=5000000 MSPTI_TEST_CLOCK_DRIFT_PPB=-20000 \
    MSPTI_TEST_CLOCK_DRIFT_T0_NS="$t0"; do
	tr '\0' '\n' </proc/"$($MC pid node2 msptid)"/environ | grep -qx "$v" ||
		fail "node2's msptid has no $v"
done
tr '\0' '\n' </proc/"$($MC pid node1 msptid)"/environ | grep -q MSPTI_TEST_CLOCK_ &&
	fail "node1's msptid has a skew or drift"
ok "--skew node2=5000000 --drift node2=-20000 reach node2's msptid, exec and Slurm tasks (one anchor), not node1's"
$MC exec ctl env NPUSIM_ROCE_BW_GBS=4 NPUSIM_ROCE_LAT_US=25 \
    NPUSIM_LINK_BW_GBS=40 NPUSIM_LINK_LAT_US=2 \
    srun -N2 --ntasks-per-node=2 -J mctopo \
    env LD_PRELOAD="$AGENT_PRELOAD" "$DIST" --launched --steps 0 \
    >"$T/job.out" 2>&1 &
JOB_PID=$!
wait_until 30 sh -c "grep -q '^rank 3 step 3:' '$T/job.out'" ||
	fail "the 4 ranks did not run collectives across the nodes: $(cat "$T/job.out")"
grep -q 'wrong all-reduce' "$T/job.out" && fail "wrong result: $(cat "$T/job.out")"
JOB=$($MC exec ctl squeue -h -t R -n mctopo -o %i)
[ -n "$JOB" ] || fail "no job: $(cat "$T/job.out")"
ok "4 srun ranks on 2 nodes form one communicator; all-reduce results right"

ctl "$MSPTICTL" start --cluster slurm --job "$JOB" --steps 3 \
    --output-dir "$T/cap" >"$T/start.out" 2>&1 || fail "start: $(cat "$T/start.out")"
ctl timeout 60 "$MSPTICTL" wait --cluster slurm --job "$JOB" \
    --output-dir "$T/cap" >"$T/wait.out" 2>&1 || fail "wait: $(cat "$T/wait.out")"
"$MSPTICTL" export "$T/cap/node1.mspti" "$T/cap/node2.mspti" --format chrome \
    -o "$T/trace.json" >"$T/export.out" 2>&1 || fail "export: $(cat "$T/export.out")"
python3 - "$T/trace.json" <<'PY' || fail "all-reduce times do not follow the RoCE link"
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
ar = [e for e in ev if e.get("ph") == "X" and e.get("name") == "HcclAllReduce"
      and e.get("cat") == "communication"]
assert len(ar) >= 12, ("want 3 steps x 4 ranks of all-reduces", len(ar))
# npusim-dist reduces 256K fp32 a step.  The rank that arrives last in an
# all-reduce waits for nobody, so the shortest one lasts exactly the ring
# model over 4 ranks crossing RoCE: 2*3/4 * B / 4 GB/s + 6 hops * 25 us.
b = 256 * 1024 * 4
roce_us = 1.5 * b / 4e9 * 1e6 + 6 * 25
hccs_us = 1.5 * b / 40e9 * 1e6 + 6 * 2
got = min(e["dur"] for e in ar)
print("shortest all-reduce %.3f us, RoCE model %.3f us, HCCS %.3f us" % (got, roce_us, hccs_us))
assert abs(got - roce_us) < 0.005 * roce_us + 1, (got, roce_us)
print("effective bus bandwidth %.3f GB/s (link 4 GB/s less 6 x 25 us of hops)" % (1.5 * b / got / 1e3))
PY
ok "captured on both nodes: every all-reduce lasts the ring model at the RoCE link"
echo "cluster-topo: all passed"

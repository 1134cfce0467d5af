#!/bin/sh
# The distributed report: a 2-node minicluster job (npusim-dist, 2 ranks
# per node all-reducing across both; node2's clock 3 ms ahead) captured
# node-local (each node writes /run/cap, its own tmpfs); `report --cluster slurm` and `report --hosts` analyse each
# node's file on its node and merge the partial results.  Gathered in one
# place, the central `report /run/cap` prints the same bytes (text and
# --json, the same warnings, so the same clock offsets estimated from the
# shipped collectives); the summaries moved are bounded per
# rank; a node whose trace is gone is named and fails the report unless
# --allow-partial.
. "$(dirname "$0")/cluster-lib.sh"
command -v /usr/sbin/sshd >/dev/null 2>&1 || skip "openssh-server not installed"
DIST="$top_builddir/tests/integ/npusim-dist"

mc_up 2 --ssh --skew node2=3000000
$MC exec ctl srun -N2 --ntasks-per-node=2 -J mcrep \
    env LD_PRELOAD="$AGENT_PRELOAD" "$DIST" --launched --steps 0 \
    >"$T/job.out" 2>&1 &
JOB_PID=$!
wait_until 30 sh -c "grep -q '^rank 3 step 3:' '$T/job.out'" ||
	fail "the ranks did not run: $(cat "$T/job.out")"
JOB=$($MC exec ctl squeue -h -t R -n mcrep -o %i)
[ -n "$JOB" ] || fail "no job: $(cat "$T/job.out")"
for i in 1 2; do
	wait_until 20 sh -c "[ \"\$($MC exec node$i '$MSPTICTL' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 2 ]" ||
		fail "node$i: ranks did not register"
done

ctl "$MSPTICTL" start --cluster slurm --job "$JOB" --output-dir /run/cap \
    >"$T/start.out" 2>&1 || fail "start: $(cat "$T/start.out")"
sleep 1
ctl "$MSPTICTL" stop --cluster slurm --job "$JOB" --output-dir /run/cap \
    >"$T/stop.out" 2>&1 || fail "stop: $(cat "$T/stop.out")"
for i in 1 2; do
	got=$($MC exec node$i ls /run/cap)
	[ "$got" = "node$i.mspti" ] || fail "node$i's /run/cap holds '$got'"
done
ok "a node-local capture: each node's trace only in its own /run/cap"

printf 'node1\nnode2\n' >"$T/hosts"
SSHC="ssh -F $T/mc/ssh/ssh_config"
dist() {	# dist NAME ARGS...: a distributed report, its output in $T/NAME.*
	n=$1; shift
	ctl env MSPTI_SSH="$SSHC" "$MSPTICTL" report "$@" >"$T/$n.out" 2>"$T/$n.err"
	echo $? >"$T/$n.rc"
}
dist slurm --cluster slurm --job "$JOB" /run/cap
dist slurm-json --json --cluster slurm --job "$JOB" /run/cap
dist ssh --hosts "$T/hosts" /run/cap
dist ssh-json --hosts "$T/hosts" /run/cap --json
for n in slurm slurm-json ssh ssh-json; do
	[ "$(cat "$T/$n.rc")" = 0 ] || fail "report $n exited $(cat "$T/$n.rc"): $(cat "$T/$n.err")"
	grep -q '^msptictl report: 2 of 2 nodes, 4 ranks; summaries moved ' "$T/$n.err" ||
		fail "report $n: no summary line: $(cat "$T/$n.err")"
done
python3 - "$T/slurm-json.out" <<'PY' || fail "report content: $(head -c 800 "$T/slurm-json.out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert sorted({s["Rank"] for s in r["steps"]}) == [0, 1, 2, 3], r["steps"][:2]
assert r["communication"], "no collectives"
# node2's offset estimated from the shipped collectives (about -3 ms).
h = [c for c in r["clocks"] if c["Host"] == "node2" and c["Status"] == "estimated"]
assert h and abs(h[0]["Offset(us)"] + 3000) < 100, r["clocks"]
PY
ok "report --cluster slurm and --hosts merge the partial results of both nodes"

# Gathered in one place: the same path on the controller.
for i in 1 2; do
	$MC exec node$i cat /run/cap/node$i.mspti >"$T/node$i.mspti" || fail "copy node$i"
done
ctl sh -c "cp '$T/node1.mspti' '$T/node2.mspti' /run/cap/"
ctl "$MSPTICTL" report /run/cap >"$T/central.out" 2>"$T/central.err" ||
	fail "central report: $(cat "$T/central.err")"
ctl "$MSPTICTL" report --json /run/cap >"$T/central-json.out" 2>"$T/central-json.err" ||
	fail "central --json report: $(cat "$T/central-json.err")"
[ -s "$T/central.out" ] || fail "empty central report"
for n in slurm ssh; do
	cmp -s "$T/central.out" "$T/$n.out" || fail "report $n differs from the central one: $(diff "$T/central.out" "$T/$n.out" | head -20)"
	cmp -s "$T/central-json.out" "$T/$n-json.out" || fail "report $n --json differs from the central one: $(diff "$T/central-json.out" "$T/$n-json.out" | head -20)"
	grep -v '^msptictl report: 2 of 2 nodes' "$T/$n.err" >"$T/$n.warn"
	cmp -s "$T/central.err" "$T/$n.warn" || fail "report $n warnings differ: $(diff "$T/central.err" "$T/$n.warn" | head)"
done
ok "distributed reports (slurm, ssh) = the central report on the gathered files (text, --json, warnings)"

per=$(sed -n 's/.*(\([0-9]*\) per rank, at most \([0-9]*\);.*/\2/p' "$T/slurm.err")
[ -n "$per" ] && [ "$per" -gt 0 ] && [ "$per" -le 1048576 ] ||
	fail "summary bytes per rank '$per': $(cat "$T/slurm.err")"
ok "summaries moved: $per bytes per rank at most (bound 1 MB)"

# node2's trace is gone: node2 is named, the report fails; --allow-partial
# merges node1's.
$MC exec node2 rm /run/cap/node2.mspti
dist gone --cluster slurm --job "$JOB" /run/cap
[ "$(cat "$T/gone.rc")" != 0 ] || fail "a report with a failed node exited 0"
grep -q '^msptictl report: 1 of 2 nodes, 2 ranks' "$T/gone.err" || fail "gone: $(cat "$T/gone.err")"
grep -q '^  node2: FAILED: .*no trace' "$T/gone.err" || fail "node2 not named: $(cat "$T/gone.err")"
[ ! -s "$T/gone.out" ] || fail "a failed distributed report printed a report"
dist part --cluster slurm --job "$JOB" --allow-partial /run/cap
[ "$(cat "$T/part.rc")" = 0 ] || fail "--allow-partial exited $(cat "$T/part.rc"): $(cat "$T/part.err")"
grep -q '^  node2: FAILED: ' "$T/part.err" || fail "node2 not named: $(cat "$T/part.err")"
grep -q 'MISSING RANKS' "$T/part.err" || fail "no missing-rank warning: $(cat "$T/part.err")"
ok "a node without its trace is named; nonzero exit unless --allow-partial"
$MC exec ctl scancel "$JOB"
echo "cluster-report: all passed"

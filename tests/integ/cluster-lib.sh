# Shared by the cluster tests: a minicluster of its own (scripts/minicluster)
# in $T/mc, brought down on exit whatever happens.  Needs root and Debian's
# slurm-wlm and munge; without them the test is skipped (exit 77).
. "$(dirname "$0")/lib.sh"

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "cluster tests need root (namespaces, slurmd)"
for p in slurmctld slurmd munged srun ip nsenter unshare; do
	command -v $p >/dev/null 2>&1 || skip "$p not installed (slurm-wlm, munge, iproute2)"
done
MC="$top_srcdir/scripts/minicluster --dir $T/mc"
export MSPTID="$top_builddir/daemon/msptid"
JOB_PID=""
mc_cleanup() {
	[ -n "$JOB_PID" ] && { kill -9 "$JOB_PID"; wait "$JOB_PID"; } 2>/dev/null
	$MC down
	cleanup
}
trap mc_cleanup EXIT

# mc_up N [--ssh]
mc_up() {
	$MC up "$@" >"$T/mc-up.log" 2>&1 || fail "minicluster up: $(cat "$T/mc-up.log")"
}

# mc_job NODES RANKS_PER_NODE: a Slurm job of agent-app ranks (the agent
# preloaded), launched by srun from ctl; sets JOB (its id).
mc_job() {
	$MC exec ctl srun -N"$1" --ntasks-per-node="$2" -J mctest \
	    env LD_PRELOAD="$AGENT" "$APP" --until "$T/go" >"$T/job.out" 2>&1 &
	JOB_PID=$!
	want=$(( $1 * $2 ))
	wait_until 20 sh -c "[ \"\$($MC exec ctl squeue -h -t R -n mctest -o %i)\" != '' ]" ||
		fail "job did not start: $(cat "$T/job.out")"
	JOB=$($MC exec ctl squeue -h -t R -n mctest -o %i)
	for i in $(seq 1 "$1"); do
		wait_until 20 sh -c "[ \"\$($MC exec node$i '$MSPTICTL' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = $2 ]" ||
			fail "node$i: ranks did not register: $($MC exec node$i "$MSPTICTL" list)"
	done
}

# ctl CMD...: on the controller (the login node), in $T.
ctl() { $MC exec ctl sh -c 'cd "$0" && exec "$@"' "$T" "$@"; }

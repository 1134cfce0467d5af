# Helpers for the session tests (sourced after lib.sh): simulated
# workloads with the agent, trace-dump, and small JSON helpers.
TRAIN="$top_builddir/sim/npusim-train"
DIST="$top_builddir/sim/npusim-dist"
DUMP="$top_builddir/tests/integ/trace-dump"
NPUSIM_SHM_PREFIX="mspti-sess-$$"
export NPUSIM_SHM_PREFIX
unset NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK NPUSIM_TIME_SCALE || true
session_cleanup() {
	cleanup
	rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-* 2>/dev/null
}
trap session_cleanup EXIT
CTL="$MSPTICTL -r $RT"

# is_registered PID: the daemon lists an agent with that pid, running the
# real program (not the libtool wrapper script that execs it).
is_registered() {
	$CTL --json list 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(a["pid"] == int(sys.argv[1]) and "npusim" in a["exe"]
    for a in json.load(sys.stdin)) else 1)' "$1"
}

# json FILE EXPR: evaluates a Python expression over the JSON in FILE (j).
json() {
	python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# now_ns: CLOCK_REALTIME in ns.
now_ns() {
	python3 -c 'import time; print(time.time_ns())'
}

# job_agents_ge JOB N: at least N agents of JOB run the real program.
job_agents_ge() {
	[ "$($CTL --json list 2>/dev/null | python3 -c '
import json, sys
print(len([a for a in json.load(sys.stdin)
    if a["job"] == sys.argv[1] and "npusim" in a["exe"]]))' "$1")" -ge "$2" ]
}

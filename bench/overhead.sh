#!/bin/sh
# Step-time inflation of the simulated training workloads under the agent
# (run by bench-overhead; doc/benchmarks.md).  A real msptid on a
# temporary runtime dir; npusim-train and npusim-dist run without the
# agent, with the agent and no session, and under `msptictl run --kinds K`
# for each kind alone and for all of them.  Each repetition runs every
# configuration once, in an order rotated from one repetition to the next,
# so a busy spell of the machine falls on all of them; a run's step time
# is the median of its step times (the first two steps and the last
# skipped: start-up, and npusim-dist's final barrier).  Per repetition the
# ratio to the run without the agent and to the run with the agent and no
# session; printed are the medians of those ratios.  Never fails on
# timing; exits 1 only when something is broken.
#
# Knobs: BENCH_OVERHEAD_REPS (5), BENCH_TRAIN_STEPS (60),
# BENCH_DIST_STEPS (30), BENCH_DIST_RANKS (2).
set -u
: "${top_builddir:?top_builddir not set}"
MSPTID="$top_builddir/daemon/msptid"
CTLBIN="$top_builddir/client/msptictl"
AGENT="$top_builddir/agent/.libs/libmspti.so"
TRAIN="$top_builddir/sim/npusim-train"
DIST="$top_builddir/sim/npusim-dist"
REPS=${BENCH_OVERHEAD_REPS:-5}
TSTEPS=${BENCH_TRAIN_STEPS:-60}
DSTEPS=${BENCH_DIST_STEPS:-30}
DRANKS=${BENCH_DIST_RANKS:-2}
for f in "$MSPTID" "$CTLBIN" "$AGENT" "$TRAIN" "$DIST"; do
	[ -e "$f" ] || { echo "bench-overhead: BROKEN: $f not built"; exit 1; }
done
command -v python3 >/dev/null 2>&1 ||
	{ echo "bench-overhead: SKIP (python3 needed for the medians)"; exit 0; }

T=$(mktemp -d /tmp/mspti-bench-ov.XXXXXX) || exit 1
RT="$T/run"
DAEMON_PID=""
NPUSIM_SHM_PREFIX="mspti-bench-ov-$$"
export NPUSIM_SHM_PREFIX
unset MSPTI_DISABLE MSPTI_DEBUG MSPTI_JOB_ID NPUSIM_TIME_SCALE \
    NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK LD_PRELOAD || true

cleanup() {
	[ -n "$DAEMON_PID" ] && kill -TERM "$DAEMON_PID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
	rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-* 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir -p "$RT"
"$MSPTID" --foreground --runtime-dir "$RT" >"$T/daemon.log" 2>&1 &
DAEMON_PID=$!
i=0
while [ ! -S "$RT/ctl.sock" ]; do
	i=$((i + 1))
	[ $i -gt 200 ] && { echo "bench-overhead: BROKEN: msptid did not start"; exit 1; }
	sleep 0.05
done
CTL="$CTLBIN -r $RT"

# run_cfg CFG OUT CMD...: one run of CMD in configuration CFG, its stdout
# (the step lines) in OUT.
run_cfg() {
	cfg=$1 out=$2
	shift 2
	case $cfg in
	none) "$@" >"$out" 2>"$out.err" ;;
	nosession) env MSPTID_RUNTIME_DIR="$RT" LD_PRELOAD="$AGENT" "$@" \
	    >"$out" 2>"$out.err" ;;
	all-rt) env MSPTI_CLOCK=realtime $CTL run \
		    --kinds api,kernel,memcpy,communication,marker \
		    --output "$T/cap.mspti" -- "$@" >"$out" 2>"$out.err"
		rm -f "$T/cap.mspti" ;;
	*) kinds=$cfg
		[ "$cfg" = all ] && kinds=api,kernel,memcpy,communication,marker
		$CTL run --kinds "$kinds" --output "$T/cap.mspti" -- "$@" \
		    >"$out" 2>"$out.err"
		rm -f "$T/cap.mspti" ;;
	esac
}

CFGS="none nosession api kernel memcpy communication marker all all-rt"

# bench NAME CMD...: REPS rotated rounds of every configuration.
bench() {
	name=$1
	shift
	: >"$T/$name.runs"
	r=0
	while [ $r -lt "$REPS" ]; do
		# Rotate the order by r.
		set -- "$@"
		order=$(echo $CFGS | python3 -c 'import sys
c = sys.stdin.read().split(); r = int(sys.argv[1]) % len(c)
print(" ".join(c[r:] + c[:r]))' "$r")
		for cfg in $order; do
			run_cfg "$cfg" "$T/out" "$@" || {
				echo "bench-overhead: BROKEN: $name ($cfg) failed: $(tail -3 "$T/out.err")"
				exit 1; }
			echo "$r $cfg $(python3 - "$T/out" <<'PY'
import re, statistics, sys
steps = {}
for l in open(sys.argv[1]):
    m = re.match(r"(?:rank (\d+) )?step (\d+): ([\d.]+) ms", l)
    if m:
        steps.setdefault(m.group(1), []).append((int(m.group(2)),
                                                 float(m.group(3))))
t = []
for v in steps.values():
    last = max(s for s, _ in v)
    t += [ms for s, ms in v if 2 < s < last]
print(statistics.median(t) if t else "nan")
PY
)" >>"$T/$name.runs"
		done
		r=$((r + 1))
	done
	python3 - "$T/$name.runs" "$name" "$REPS" <<'PY'
import collections, math, statistics, sys
runs = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    r, cfg, ms = l.split()
    runs[int(r)][cfg] = float(ms)
name = sys.argv[2]
base = statistics.median(v["none"] for v in runs.values())
print("%s: step time without the agent %.3f ms (median of %s runs)" %
      (name, base, sys.argv[3]))
def infl(cfg, ref):
    x = [v[cfg] / v[ref] - 1 for v in runs.values()
         if not math.isnan(v[cfg]) and not math.isnan(v[ref])]
    return 100 * statistics.median(x), 100 * min(x), 100 * max(x)
for cfg in ["nosession", "api", "kernel", "memcpy", "communication",
            "marker", "all", "all-rt"]:
    a = infl(cfg, "none")
    label = {"nosession": "agent, no session",
             "all-rt": "all, MSPTI_CLOCK=realtime"}.get(cfg, cfg)
    line = "  %-14s %+6.2f %% vs no agent (runs %+.1f..%+.1f)" % (label, *a)
    if cfg != "nosession":
        b = infl(cfg, "nosession")
        line += ", %+6.2f %% vs agent without session" % b[0]
    if cfg == "all":
        line += "  [target <= 1 %]"
    print(line)
PY
}

echo "step-time inflation, medians of paired ratios (one round = every configuration once, order rotated; $REPS rounds)"
echo "  'all' = --kinds api,kernel,memcpy,communication,marker; 'all, MSPTI_CLOCK=realtime' = the same with the agent's clock_gettime clock (before the TSC mapping)"
bench "npusim-train --steps $TSTEPS" "$TRAIN" --steps "$TSTEPS"
bench "npusim-dist --ranks $DRANKS --steps $DSTEPS" "$DIST" --ranks "$DRANKS" --steps "$DSTEPS"
exit 0

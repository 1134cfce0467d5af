#!/bin/sh
# Step-time inflation of the simulated training workloads under the agent
# (run by bench-overhead; doc/benchmarks.md).  A real msptid on a
# temporary runtime dir; npusim-train and npusim-dist run without the
# agent, with the agent and no session, and under `msptictl run --kinds K`
# for each kind alone and for all of them.  Each repetition runs every
# configuration once, in an order rotated from one repetition to the next,
# so a busy spell of the machine falls on all of them; a run's step time
# is the median of its steps after the 30th (the last skipped:
# npusim-dist's final barrier), and its start-up the median of steps 3 to
# 30 (a session's first records fault in ring pages and intern strings).
# Per repetition the ratio to the run without the agent and to the run
# with the agent and no session; printed are the medians of those ratios.
# Never fails on timing; exits 1 only when something is broken.
#
# Then the same process with and without a session (inproc below), and
# last the launch call with cold caches (bench-launch-cold), the same way.
#
# Knobs: BENCH_OVERHEAD_REPS (10), BENCH_TRAIN_STEPS (300),
# BENCH_DIST_STEPS (150), BENCH_DIST_RANKS (2), BENCH_OVERHEAD_PHASES (32),
# BENCH_OVERHEAD_PHASE_S (0.5), BENCH_DIST_GRADS (16384: npusim-dist's
# gradient elements in the last, model-bound, in-process run),
# BENCH_AGENT_SO (another build's libmspti.so, for side-by-side runs),
# BENCH_MSPTID (another build's msptid, the same),
# BENCH_OVERHEAD_ONLY=inproc (the in-process runs alone) or =cold (the
# launch calls with cold caches alone), BENCH_COLD_EVICT_KIB (1024: what
# bench-launch-cold writes over before each launch call),
# BENCH_COLD_CODE_KIB (4096: the code it runs through before each call in
# the second of those runs).
set -u
: "${top_builddir:?top_builddir not set}"
src=$(cd "$(dirname "$0")" && pwd)
MSPTID="${BENCH_MSPTID:-$top_builddir/daemon/msptid}"
CTLBIN="$top_builddir/client/msptictl"
AGENT="${BENCH_AGENT_SO:-$top_builddir/agent/.libs/libmspti.so}"
TRAIN="$top_builddir/sim/npusim-train"
DIST="$top_builddir/sim/npusim-dist"
COLD="$top_builddir/bench/bench-launch-cold"
REPS=${BENCH_OVERHEAD_REPS:-10}
TSTEPS=${BENCH_TRAIN_STEPS:-300}
DSTEPS=${BENCH_DIST_STEPS:-150}
DRANKS=${BENCH_DIST_RANKS:-2}
DGRADS=${BENCH_DIST_GRADS:-16384}
PHASES=${BENCH_OVERHEAD_PHASES:-32}
PHASE_S=${BENCH_OVERHEAD_PHASE_S:-0.5}
for f in "$MSPTID" "$CTLBIN" "$AGENT" "$TRAIN" "$DIST" "$COLD"; do
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
		c0=$(cut -d' ' -f1 /proc/"$DAEMON_PID"/schedstat)
		$CTL run --kinds "$kinds" --output "$T/cap.mspti" -- "$@" \
		    >"$out" 2>"$out.err"
		c1=$(cut -d' ' -f1 /proc/"$DAEMON_PID"/schedstat)
		# msptid's CPU (ns, schedstat) for the records of the capture.
		[ "$cfg" = all ] && echo "$((c1 - c0)) $(sed -n \
		    's/.*finalized: .*[^0-9]\([0-9][0-9]*\) records.*/\1/p' \
		    "$out.err" | head -1)" >>"$T/daemon.cpu"
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
t, early = [], []
for v in steps.values():
    last = max(s for s, _ in v)
    t += [ms for s, ms in v if 30 < s < last]
    early += [ms for s, ms in v if 2 < s <= 30 and s < last]
print(statistics.median(t) if t else "nan",
      statistics.median(early) if early else "nan")
PY
)" >>"$T/$name.runs"
		done
		r=$((r + 1))
	done
	: >"$T/daemon.cpu.$name"
	[ -s "$T/daemon.cpu" ] && mv "$T/daemon.cpu" "$T/daemon.cpu.$name"
	python3 - "$T/$name.runs" "$name" "$REPS" "$T/daemon.cpu.$name" "$src" \
	    <<'PY'
import collections, math, statistics, sys
sys.path.insert(0, sys.argv[5])
import medianci
runs = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    r, cfg, ms, early = l.split()
    runs[int(r)][cfg] = float(ms)
    runs[int(r)][cfg + "/early"] = float(early)
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
    line += "; steps 3-30 %+.2f %%" % infl(cfg + "/early", "none/early")[0]
    if cfg == "all":
        x = [v["all"] / v["nosession"] - 1 for v in runs.values()
             if not math.isnan(v["all"]) and not math.isnan(v["nosession"])]
        c = medianci.interval(x)
        if c:
            line += "; 95 %% interval of the median vs agent without " \
                "session %+.2f..%+.2f %%" % (100 * c[0], 100 * c[1])
        line += "  [target <= 1 %]"
    print(line)
cpu = [l.split() for l in open(sys.argv[4]) if len(l.split()) == 2]
ns, recs = sum(int(c) for c, _ in cpu), sum(int(r) for _, r in cpu)
if recs:
    print("  msptid: %.0f ns of CPU per record captured (all five kinds, "
          "each capture's start and finalizing included: %d records in "
          "%d runs, from its schedstat)" %
          (ns / recs, recs, len(cpu)))
PY
}

# inproc NAME CMD...: one process (its ranks: job ovjob) under the agent,
# and a session with every kind started and stopped on it in turn, PHASES
# times, PHASE_S seconds on and off.  The process-to-process spread of a
# run's median step (where the scheduler puts its threads: +-2-3 % here)
# drops out; what is left is the session's own cost.  A phase's steps are
# those its ranks printed between its two marks, less the first 30 (the
# start itself, or the tail of the stop) and the last 5; the steps while
# `msptictl stop` runs belong to neither.  Each on-phase's median is
# compared with the mean of the off-phases before and after it.
inproc() {
	name=$1
	shift
	out="$T/ip.out"
	env MSPTID_RUNTIME_DIR="$RT" LD_PRELOAD="$AGENT" MSPTI_JOB_ID=ovjob \
	    "$@" >"$out" 2>"$out.err" &
	app=$!
	i=0
	while ! $CTL --json list 2>/dev/null | grep -q '"job":"ovjob"'; do
		i=$((i + 1))
		[ $i -gt 200 ] && { echo "bench-overhead: BROKEN: $name did not register"
			kill "$app" 2>/dev/null; exit 1; }
		sleep 0.05
	done
	sleep "$PHASE_S"
	: >"$T/phases"
	p=0
	while [ $p -lt "$PHASES" ]; do
		echo "off $(wc -l <"$out")" >>"$T/phases"
		sleep "$PHASE_S"
		echo "on $(wc -l <"$out")" >>"$T/phases"
		$CTL --json start --job ovjob --kinds \
		    api,kernel,memcpy,communication,marker \
		    --output "$T/ip.mspti" >"$T/ip.json" 2>&1 || {
			echo "bench-overhead: BROKEN: $name: start: $(cat "$T/ip.json")"
			kill "$app" 2>/dev/null; exit 1; }
		sleep "$PHASE_S"
		echo "stopping $(wc -l <"$out")" >>"$T/phases"
		# No python here: its start-up would compete with the steps.
		$CTL stop "$(grep -o '"session":[0-9]*' "$T/ip.json" |
		    head -1 | cut -d: -f2)" >/dev/null 2>&1 || {
			echo "bench-overhead: BROKEN: $name: stop failed"
			kill "$app" 2>/dev/null; exit 1; }
		rm -f "$T/ip.mspti"
		p=$((p + 1))
	done
	echo "end $(wc -l <"$out")" >>"$T/phases"
	kill -TERM "$app" 2>/dev/null
	wait "$app" 2>/dev/null
	python3 - "$out" "$T/phases" "$name" "$PHASE_S" "$src" "${PER_CALLS:-0}" <<'PY'
import re, statistics, sys
sys.path.insert(0, sys.argv[5])
import medianci
lines = open(sys.argv[1]).read().split("\n")
marks = [l.split() for l in open(sys.argv[2])]
seg, raw = [], []
for (lab, a), (_, b) in zip(marks, marks[1:]):
    t = [float(m.group(1)) for l in lines[int(a):int(b)]
         for m in [re.match(r"(?:rank \d+ )?step \d+: ([\d.]+) ms", l)] if m]
    raw.append((lab, t))
    t = t[30:-5]
    seg.append((lab, statistics.median(t) if t else float("nan")))
# Start and stop: the step time the first 30 step lines of an on-phase,
# and the lines printed while `msptictl stop` ran, took beyond the
# median of the off-phase before them.
start_ms, stop_ms, stop_n = [], [], []
for i in range(1, len(raw)):
    lab, t = raw[i]
    base = seg[i - 1][1]
    if lab == "on" and seg[i - 1][0] == "off" and base == base and \
            len(t) > 30:
        start_ms.append(sum(t[:30]) - 30 * base)
    if lab == "stopping" and i >= 2 and seg[i - 2][0] == "off" and \
            seg[i - 2][1] == seg[i - 2][1]:
        base = seg[i - 2][1]
        stop_ms.append(sum(t) - len(t) * base)
        stop_n.append(len(t))
seg = [x for x in seg if x[0] != "stopping"]
rat = []
for i, (lab, ms) in enumerate(seg):
    if lab != "on":
        continue
    nb = [seg[j][1] for j in (i - 1, i + 1) if 0 <= j < len(seg) and
          seg[j][0] == "off" and seg[j][1] == seg[j][1]]
    if nb and ms == ms:
        rat.append(ms / statistics.mean(nb) - 1)
if not rat:
    print("%s: in one process: no phase had steps" % sys.argv[3])
    sys.exit(0)
c = medianci.interval(rat)
iv = ("; 95 %% interval of the median %+.2f..%+.2f %%" %
      (100 * c[0], 100 * c[1])) if c else ""
per = int(sys.argv[6])
print("%s, in one process: all kinds on vs the agent without session "
      "%+6.2f %% (phases %+.1f..%+.1f; %d pairs of %s s%s)%s" %
      (sys.argv[3], 100 * statistics.median(rat), 100 * min(rat),
       100 * max(rat), len(rat), sys.argv[4], iv,
       "" if per else "  [target <= 1 %]"))
if per:
    # Calls, not steps: what one call costs, on and off.
    on = statistics.median([ms for lab, ms in seg if lab == "on" and ms == ms])
    off = statistics.median([ms for lab, ms in seg if lab == "off" and ms == ms])
    print("  one call: %.2f us without a session, %.2f us with one "
          "(%+.2f us)" % (off * 1e3 / per, on * 1e3 / per,
                          (on - off) * 1e3 / per))
if start_ms and stop_ms:
    print("  start: the first 30 step lines took %+.2f ms in all beyond "
          "the steady step (median); stop: %.0f step lines printed while "
          "it ran, %+.2f ms in all" % (statistics.median(start_ms),
          statistics.median(stop_n), statistics.median(stop_ms)))
PY
}

echo "step-time inflation, medians of paired ratios (one round = every configuration once, order rotated; $REPS rounds)"
echo "  'all' = --kinds api,kernel,memcpy,communication,marker; 'all, MSPTI_CLOCK=realtime' = the same with the agent's clock_gettime clock (before the TSC mapping)"
if [ -z "${BENCH_OVERHEAD_ONLY:-}" ]; then
	bench "npusim-train --steps $TSTEPS" "$TRAIN" --steps "$TSTEPS"
	bench "npusim-dist --ranks $DRANKS --steps $DSTEPS" "$DIST" --ranks "$DRANKS" --steps "$DSTEPS"
fi
echo "step-time inflation of one running process, a session started and stopped on it in turn ($PHASES times, $PHASE_S s each way): median of each on-phase against the off-phases beside it"
if [ "${BENCH_OVERHEAD_ONLY:-}" != cold ]; then
	inproc "npusim-train" "$TRAIN" --steps 0
	[ "${BENCH_OVERHEAD_ONLY:-}" = inproc ] ||
		inproc "npusim-dist --ranks $DRANKS" "$DIST" --ranks "$DRANKS" --steps 0
	# The same job with a small gradient: at 1 MiB the simulator's
	# host-side copies keep both CPUs busy and the step follows the
	# scheduler (phases -25..+13 %); at 64 KiB it follows the model
	# (doc/benchmarks.md).
	inproc "npusim-dist --ranks $DRANKS --grads $DGRADS" "$DIST" \
	    --ranks "$DRANKS" --grads "$DGRADS" --steps 0
fi
# A launch call with cold caches (a framework's calls come between
# stretches of its own work): the per-call part of a model's overhead.
# Then with its code cold too: an interpreter's own code between two
# calls takes the instruction caches and TLB from the agent's.
PER_CALLS=64 inproc "aclrtLaunchKernel, caches evicted before each call (64 calls a line)" \
    "$COLD" "${BENCH_COLD_EVICT_KIB:-1024}"
CODE_KIB=${BENCH_COLD_CODE_KIB:-4096}
if "$COLD" 1 1 "$CODE_KIB" >/dev/null 2>"$T/code.err"; then
	PER_CALLS=64 inproc "aclrtLaunchKernel, caches and $CODE_KIB KiB of code run through before each call" \
	    "$COLD" "${BENCH_COLD_EVICT_KIB:-1024}" 0 "$CODE_KIB"
else
	echo "aclrtLaunchKernel with its code cold: skipped ($(head -1 "$T/code.err"))"
fi
exit 0

#!/bin/sh
# The demo: a daemon, a simulated training job that is already running, an
# on-demand capture of it, and a report.  Everything runs from the build
# tree on a private runtime dir and is stopped at the end.
set -eu
b=${top_builddir:-$(pwd)}
MSPTID="$b/daemon/msptid"
MSPTICTL="$b/client/msptictl"
AGENT="$b/agent/.libs/libmspti.so"
TRAIN="$b/sim/npusim-train"
T=$(mktemp -d /tmp/mspti-demo.XXXXXX)
RT="$T/run"
# The simulated devices' shared memory, private to this demo; the daemon
# reads the device channels there too.
export NPUSIM_SHM_PREFIX="mspti-demo-$$"
DPID=""
JPID=""
cleanup() {
	[ -n "$JPID" ] && kill "$JPID" 2>/dev/null
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null
	wait 2>/dev/null || :
	rm -rf "$T" /dev/shm/"$NPUSIM_SHM_PREFIX"*
}
trap cleanup EXIT INT TERM
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. start the daemon (msptid --runtime-dir $RT)"
"$MSPTID" --foreground --runtime-dir "$RT" 2>"$T/msptid.log" &
DPID=$!
for _ in $(seq 1 100); do [ -S "$RT/ctl.sock" ] && break; sleep 0.05; done
"$MSPTICTL" -r "$RT" status

say "2. a training job is running (npusim-train on the simulated NPU, agent preloaded)"
# The scenario library's balanced op mix (26 kernels a step, ~4 ms of
# modelled compute): a compute-bound loop, so the report should show the
# device busy almost all of each step.
MSPTID_RUNTIME_DIR="$RT" LD_PRELOAD="$AGENT" MSPTI_JOB_ID=demo-job RANK=0 \
    "$TRAIN" --scenario balanced --steps 0 >"$T/train.log" 2>&1 &
JPID=$!
for _ in $(seq 1 100); do
	# (in the build tree the job starts as a libtool wrapper, then execs)
	"$MSPTICTL" -r "$RT" list | grep -q "^$JPID .*demo-job  *0  *0  .*npusim-train" && break
	sleep 0.05
done
"$MSPTICTL" -r "$RT" list

if "$MSPTICTL" --help 2>&1 | grep -q '^  start'; then
	say "3. capture it on demand for 2 seconds, without restarting it"
	"$MSPTICTL" -r "$RT" start --pid "$JPID" --duration 2s \
	    --output "$T/capture.mspti" --wait
	say "4. the report"
	"$MSPTICTL" -r "$RT" report "$T/capture.mspti"
	if command -v python3 >/dev/null 2>&1 &&
	    "$MSPTICTL" report --json --section ranks,steps,advice \
	    "$T/capture.mspti" >"$T/report.json" 2>/dev/null; then
		say "in short"
		python3 - "$T/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["ranks"]:
    if x["Rank"] < 0 or not x["Step Time Avg(us)"]:
        continue
    step, free = x["Step Time Avg(us)"], x["Free Avg(us)"]
    shares = sorted(s["Free(us)"] / s["Step Time(us)"] for s in r["steps"]
                    if s["Rank"] == x["Rank"] and s["Step Time(us)"] > 0)
    print("rank %d: step %.2f ms on average, computing %.1f%%, free %.1f%% "
          "of the step (median step: %.1f%% free)" % (x["Rank"], step / 1e3,
          100 * x["Computing Avg(us)"] / step, 100 * free / step,
          100 * shares[len(shares) // 2] if shares else 0))
rules = sorted({a["Rule"] for a in r["advice"]})
print("advice: %s" % (", ".join(rules) if rules else "none"))
PY
	fi
fi
say "the job is still running, untouched: $(ps -o etime= -p "$JPID" | tr -d ' ') elapsed"

if [ -f "$T/capture.mspti" ]; then
	say "5. the timeline, for a trace viewer"
	"$MSPTICTL" -r "$RT" export "$T/capture.mspti" --format chrome \
	    -o "$T/trace.json"
	# $T goes away at exit: keep the timeline where the demo ran.
	out=${DEMO_TRACE:-$(pwd)/mspti-demo-trace.json}
	cp "$T/trace.json" "$out"
	echo "$out: $(wc -c < "$out" | awk '{ printf "%.1f MB", $1 / 1e6 }') Chrome trace JSON; open it in the Perfetto UI (https://ui.perfetto.dev, \"Open trace file\") or chrome://tracing"
fi

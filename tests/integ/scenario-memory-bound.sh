#!/bin/sh
# Scenario "memory-bound": one rank's vector kernels move more bytes and
# take 25% of a step's compute longer; the report names it, cause compute.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/scenario-lib.sh"
start_daemon

scenario_run memory-bound --ranks 4 --steps 8 --fault-pct 25 --slow-rank 3
scenario_check memory-bound '
c = {x["Rank"]: x["Computing Avg(us)"] for x in r["ranks"] if x["Rank"] >= 0}
extra = t["extra_ns_per_step"] / 1e3
assert abs(c[3] - c[0] - extra) < 0.02 * extra, (c, extra)
'
ok "memory-bound 25%: rank 3, compute"

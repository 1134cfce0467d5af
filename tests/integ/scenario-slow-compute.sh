#!/bin/sh
# Scenario "slow-compute": one rank's kernels 25% longer; the report names
# that rank, cause compute, and its computing time is 25% over the others'.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/scenario-lib.sh"
start_daemon

scenario_run slow-compute --ranks 4 --steps 8 --fault-pct 25 --slow-rank 2
scenario_check slow-compute '
c = {x["Rank"]: x["Computing Avg(us)"] for x in r["ranks"] if x["Rank"] >= 0}
base = t["compute_ns_per_step"] / 1e3
assert abs(c[2] / c[0] - 1.25) < 0.01, c
assert abs(c[0] - base) < 0.01 * base, (c, base)
'
ok "slow-compute 25%: rank 2, compute"

#!/bin/sh
# Scenario "host-bound": one rank loads data (a "dataload" MSTX range) for
# 30% of a step's compute before each step; the report names it, cause
# data loading.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/scenario-lib.sh"
start_daemon

scenario_run host-bound --ranks 4 --steps 8 --fault-pct 30 --slow-rank 3
scenario_check host-bound '
d = sorted(x["Data Loading(us)"] for x in r["steps"] if x["Rank"] == 3)
# A sleep never returns early: every step at least the injected time.
assert d[0] >= t["extra_ns_per_step"] / 1e3, (d, t["extra_ns_per_step"])
'
ok "host-bound 30%: rank 3, data loading"

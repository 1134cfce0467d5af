#!/bin/sh
# Scenario "slow-link": one rank's link (NPUSIM_SLOW_LINK) makes its
# send/recv take 30% of a step's compute longer; the report names it,
# cause link.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/scenario-lib.sh"
start_daemon

scenario_run slow-link --ranks 4 --steps 8 --fault-pct 30 --slow-rank 1
scenario_check slow-link '
assert t["slow_link_gbs"] < 25, t
'
ok "slow-link 30%: rank 1, link"

#!/bin/sh
# Scenario "launch-bound": one rank's host is late with each of its tiny
# kernels, so its device idles for 50% of a step's compute; the report
# names it, cause host/launch.  Host/launch is where every scheduling
# delay lands (tens of ms per step on a loaded 2-core machine), so the
# modelled work is stretched 8x to keep the fault above that noise.
SCN_SCALE=8
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/scenario-lib.sh"
start_daemon

scenario_run launch-bound --ranks 4 --steps 6 --fault-pct 50 --slow-rank 0
scenario_check launch-bound
ok "launch-bound 50%: rank 0, host/launch"

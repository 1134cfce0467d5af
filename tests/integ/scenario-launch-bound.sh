#!/bin/sh
# Scenario "launch-bound": one rank's host works before each of its tiny
# kernels, so its device idles for 40% of a step's compute; the report
# names it, cause host/launch.  Host noise on a loaded machine is large
# against a few ms of spinning, so the modelled work is stretched 4x.
SCN_SCALE=4
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/scenario-lib.sh"
start_daemon

scenario_run launch-bound --ranks 4 --steps 8 --fault-pct 40 --slow-rank 0
scenario_check launch-bound
ok "launch-bound 40%: rank 0, host/launch"

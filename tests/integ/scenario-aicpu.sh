#!/bin/sh
# Scenario "aicpu": one rank runs three ops on AI_CPU (fallback), 25% of a
# step's compute longer; the report names it, cause compute, and the
# advisor flags AI_CPU ops.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/scenario-lib.sh"
start_daemon

scenario_run aicpu --ranks 4 --steps 8 --fault-pct 25 --slow-rank 1
scenario_check aicpu '
assert any(a["Rule"] == "aicpu_ops" for a in r["advice"]), r["advice"]
'
ok "aicpu 25%: rank 1, compute, aicpu_ops advice"

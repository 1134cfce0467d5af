#!/bin/sh
# Ranks started by srun carry no RANK/WORLD_SIZE/LOCAL_RANK, only
# SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID: the agent maps those the way
# torchrun-style launchers do.  A launcher's own RANK (torchrun under srun)
# still wins.
. "$(dirname "$0")/lib.sh"

start_daemon
idents() {
	"$MSPTICTL" -r "$RT" --json list | python3 -c 'import json, sys; print(sorted((a["job"], a["rank"], a["local_rank"], a["world_size"]) for a in json.load(sys.stdin)))'
}
env -u RANK -u LOCAL_RANK -u WORLD_SIZE -u MSPTI_JOB_ID SLURM_JOB_ID=77 \
    SLURM_PROCID=3 SLURM_NTASKS=4 SLURM_LOCALID=1 \
    $WITH_AGENT "$APP" --until "$T/go" >"$T/out1" 2>&1 &
A1=$!; PIDS="$PIDS $A1"
env -u MSPTI_JOB_ID SLURM_JOB_ID=77 SLURM_PROCID=0 SLURM_NTASKS=2 \
    SLURM_LOCALID=0 RANK=5 LOCAL_RANK=2 WORLD_SIZE=8 \
    $WITH_AGENT "$APP" --until "$T/go" >"$T/out2" 2>&1 &
A2=$!; PIDS="$PIDS $A2"
want="[('77', 3, 1, 4), ('77', 5, 2, 8)]"
wait_until 15 sh -c "[ \"\$('$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(sorted((a[\"job\"], a[\"rank\"], a[\"local_rank\"], a[\"world_size\"]) for a in json.load(sys.stdin)))')\" = \"$want\" ]" ||
	fail "identities: $(idents), want $want"
ok "SLURM_PROCID/NTASKS/LOCALID give rank, world size, local rank; RANK wins"
touch "$T/go"
wait "$A1" "$A2" || fail "apps failed"
echo "registration-slurm: all passed"

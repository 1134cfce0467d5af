#!/bin/sh
# Step windows across "nodes" without root: two real msptid on their own
# runtime dirs reached through MSPTI_SSH (a local stand-in for ssh, as in
# cluster-cli.sh), step-ranks ranks on each.  start --hosts --steps N
# --start-step K reaches every node with K: all four ranks record exactly
# steps [K, K+N); the reply says so.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

cat >"$T/fakessh" <<EOS
#!/bin/sh
while [ "\$1" = -o ]; do shift 2; done
host=\$1; shift
[ -d "$T/\$host" ] || { echo "ssh: Could not resolve hostname \$host" >&2; exit 255; }
MSPTID_RUNTIME_DIR="$T/\$host" exec sh -c "\$*"
EOS
chmod +x "$T/fakessh"
export MSPTI_SSH="$T/fakessh"
for h in hA hB; do
	mkdir -p "$T/$h"
	"$MSPTID" --foreground --runtime-dir "$T/$h" >>"$T/daemon.log" 2>&1 &
	PIDS="$PIDS $!"
done
r=0
for h in hA hB; do
	wait_until 10 "$MSPTICTL" -r "$T/$h" status >/dev/null 2>&1 ||
		fail "msptid $h did not start"
	for _ in 0 1; do
		MSPTID_RUNTIME_DIR="$T/$h" MSPTI_JOB_ID=sj RANK=$r WORLD_SIZE=4 \
		    LD_PRELOAD="$AGENT_PRELOAD" "$STEPS" --steps 0 --spread 30 \
		    --until "$T/stop" --go "$T/go" >/dev/null 2>&1 &
		PIDS="$PIDS $!"
		r=$((r + 1))
	done
	wait_until 10 sh -c "[ \"\$('$MSPTICTL' -r '$T/$h' --json list | python3 -c 'import json,sys; print(len([a for a in json.load(sys.stdin) if \"step-ranks\" in a[\"exe\"]]))')\" = 2 ]" ||
		fail "$h: ranks did not register"
done
printf 'hA\nhB\n' >"$T/hosts"
cd "$T" || exit 1

"$MSPTICTL" start --hosts hosts --job sj --steps 3 --start-step 25 \
    --output-dir cap >start.out 2>&1 || fail "start: $(cat start.out)"
grep -q '^  steps \[25, 28) on every node$' start.out || fail "start reply: $(cat start.out)"
: >"$T/go"
timeout 60 "$MSPTICTL" wait --hosts hosts --output-dir cap >wait.out 2>&1 ||
	fail "wait: $(cat wait.out)"
for h in hA hB; do
	step_window "cap/$h.mspti" 3 25 >/dev/null || exit 1
done
: >"$T/stop"
ok "start --hosts --steps 3 --start-step 25: steps [25, 28) on all 4 ranks of both nodes"
echo "cluster-steps: all passed"

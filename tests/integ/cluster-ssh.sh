#!/bin/sh
# Fan-out over ssh (--hosts FILE) for clusters without Slurm: sshd runs in
# each minicluster node; ranks are started on the nodes directly.  start,
# snapshot (ring mode), stop and wait reach every host; an unknown host
# is named and fails the start.  node2's clock hooks (minicluster --skew,
# --drift) reach its ssh sessions.
. "$(dirname "$0")/cluster-lib.sh"
command -v /usr/sbin/sshd >/dev/null 2>&1 || skip "openssh-server not installed"

mc_up 2 --ssh --skew node2=1000 --drift node2=1000
APPS=""
for i in 1 2; do
	for r in 0 1; do
		$MC exec node$i env MSPTI_JOB_ID=sshjob RANK=$(( (i - 1) * 2 + r )) \
		    WORLD_SIZE=4 LD_PRELOAD="$AGENT" "$APP" --until "$T/go" \
		    >>"$T/apps.out" 2>&1 &
		APPS="$APPS $!"; PIDS="$PIDS $!"
	done
	wait_until 20 sh -c "[ \"\$($MC exec node$i '$MSPTICTL' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 2 ]" ||
		fail "node$i: ranks did not register"
done
printf '# the job'"'"'s hosts\nnode1\nnode2   # second\n\n' >"$T/hosts"
export MSPTI_SSH="ssh -F $T/mc/ssh/ssh_config"
x() { ctl env MSPTI_SSH="$MSPTI_SSH" "$MSPTICTL" "$@"; }

hooks='echo "${MSPTI_TEST_CLOCK_SKEW_NS:-none} ${MSPTI_TEST_CLOCK_DRIFT_PPB:-none} ${MSPTI_TEST_CLOCK_DRIFT_T0_NS:-none}"'
got="$(ctl $MSPTI_SSH node1 "$hooks") / $(ctl $MSPTI_SSH node2 "$hooks")"
want="none none none / 1000 1000 $($MC exec node2 printenv MSPTI_TEST_CLOCK_DRIFT_T0_NS)"
[ "$got" = "$want" ] || fail "ssh sessions' clock hooks: '$got', want '$want'"
ok "node2's skew and drift reach its ssh sessions, not node1's"

x start --hosts "$T/hosts" --job sshjob --mode ring --output-dir "$T/cap" >"$T/start.out" 2>&1 ||
	fail "ssh start: $(cat "$T/start.out")"
grep -q '^2 of 2 nodes, 4 of 4 ranks capturing$' "$T/start.out" || fail "start reply: $(cat "$T/start.out")"
ok "start --hosts captures 4 ranks on 2 hosts over ssh"
x snapshot --hosts "$T/hosts" --output-dir "$T/cap" >"$T/snap.out" 2>&1 || fail "snapshot: $(cat "$T/snap.out")"
for i in 1 2; do [ -s "$T/cap/node$i-snapshot.mspti" ] || fail "no snapshot from node$i: $(cat "$T/snap.out")"; done
ok "snapshot --hosts writes one flight-recorder file per host"
x stop --hosts "$T/hosts" --output-dir "$T/cap" >"$T/stop.out" 2>&1 || fail "stop: $(cat "$T/stop.out")"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["via"] == "ssh" and [(n["node"], n["state"]) for n in m["nodes"]] == [("node1", "finalized"), ("node2", "finalized")], m' "$T/cap/manifest.json" ||
	fail "manifest after stop: $(cat "$T/cap/manifest.json")"
ok "stop --hosts finalizes each host's trace"

x start --hosts "$T/hosts" --job sshjob --duration 300ms --output-dir "$T/w" >"$T/w.out" 2>&1 || fail "timed start: $(cat "$T/w.out")"
x wait --hosts "$T/hosts" --output-dir "$T/w" >"$T/wait.out" 2>&1 || fail "wait: $(cat "$T/wait.out")"
grep -q '^wait: 2 of 2 nodes' "$T/wait.out" || fail "wait reply: $(cat "$T/wait.out")"
ok "wait --hosts returns once every host's timed session finalized"

echo nosuchnode >>"$T/hosts"
x start --hosts "$T/hosts" --job sshjob --output-dir "$T/bad" >"$T/bad.out" 2>&1 &&
	fail "a start with an unreachable host exited 0"
grep -q '^2 of 3 nodes, 4 of 4 ranks capturing' "$T/bad.out" || fail "reply: $(cat "$T/bad.out")"
grep -q '^  nosuchnode: FAILED: ssh: ' "$T/bad.out" || fail "host not named: $(cat "$T/bad.out")"
ok "an unreachable host is named with ssh's reason; exit nonzero"
touch "$T/go"
for p in $APPS; do wait "$p"; done
echo "cluster-ssh: all passed"

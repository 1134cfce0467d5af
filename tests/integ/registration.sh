#!/bin/sh
# Three real agents register with a real msptid; list shows exactly them;
# one exits and leaves; the daemon is killed -9 and restarted and the
# survivors come back, their output and exit codes untouched.
. "$(dirname "$0")/lib.sh"

start_daemon
for r in 0 1 2; do
	MSPTI_JOB_ID=jobA RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 \
	    $WITH_AGENT "$APP" --until "$T/go.$r" --exit $((r + 3)) \
	    >"$T/out.$r" 2>"$T/err.$r" &
	eval "P$r=\$!"
	PIDS="$PIDS $!"
done
wait_until 10 sh -c "[ \"\$(cd $T && '$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 3 ]" ||
	fail "three agents did not register"

"$MSPTICTL" -r "$RT" --json list >"$T/list.json" || fail "list failed"
python3 - "$T/list.json" "$P0" "$P1" "$P2" <<'PY' || fail "list contents wrong"
import json, sys
agents = json.load(open(sys.argv[1]))
want = {int(sys.argv[2]): 0, int(sys.argv[3]): 1, int(sys.argv[4]): 2}
got = {a["pid"]: a for a in agents}
assert set(got) == set(want), (sorted(got), sorted(want))
for pid, rank in want.items():
    a = got[pid]
    assert a["job"] == "jobA", a
    assert a["rank"] == rank and a["local_rank"] == rank and a["world_size"] == 3, a
    assert a["exe"].endswith("agent-app"), a
    assert "--until" in a["cmdline"], a
PY
ok "msptictl --json list shows exactly the three agents with pid, job, rank"

"$MSPTICTL" -r "$RT" list | grep -q "^$P1 .*jobA .* 1 " || fail "table view lacks rank 1"
ok "table view"

# Rank 1 exits: gone from the list at once.
touch "$T/go.1"
wait "$P1"; rc=$?
[ $rc -eq 4 ] || fail "rank 1 exit code $rc, want 4"
wait_until 2 sh -c "! '$MSPTICTL' -r '$RT' --json list | grep -q '\"pid\":$P1,'" ||
	fail "exited agent still listed"
[ "$(agent_count)" = 2 ] || fail "want 2 agents after exit"
ok "an exited agent leaves the list"

# kill -9 the daemon, start a new one: survivors re-register.
kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
[ -S "$RT/agent.sock" ] || fail "expected a stale socket after kill -9"
start_daemon
wait_until 8 sh -c "[ \"\$('$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 2 ]" ||
	fail "survivors did not re-register after daemon restart"
"$MSPTICTL" -r "$RT" --json list | grep -q "\"pid\":$P0," || fail "rank 0 missing after restart"
"$MSPTICTL" -r "$RT" --json list | grep -q "\"pid\":$P2," || fail "rank 2 missing after restart"
ok "survivors re-register after kill -9 and restart"

touch "$T/go.0" "$T/go.2"
wait "$P0"; rc0=$?
wait "$P2"; rc2=$?
[ $rc0 -eq 3 ] && [ $rc2 -eq 5 ] || fail "exit codes $rc0 $rc2, want 3 5"
for r in 0 1 2; do
	printf 'agent-app: started\nagent-app: done, exit %d\n' $((r + 3)) | cmp -s - "$T/out.$r" ||
		fail "rank $r stdout changed: $(cat "$T/out.$r")"
	echo "agent-app: a line on stderr" | cmp -s - "$T/err.$r" ||
		fail "rank $r stderr changed: $(cat "$T/err.$r")"
done
ok "application output and exit codes unchanged"

# A forked child registers as its own agent.
$WITH_AGENT "$APP" --fork --until "$T/go.fork" >"$T/out.fork" 2>&1 &
FP=$!; PIDS="$PIDS $FP"
wait_until 10 sh -c "[ \"\$('$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 2 ]" ||
	fail "forked child did not register"
"$MSPTICTL" -r "$RT" --json list | grep -q "\"pid\":$FP," || fail "fork parent missing"
touch "$T/go.fork"
wait "$FP" || fail "fork app failed"
wait_until 3 sh -c "[ \"\$('$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 0 ]" ||
	fail "fork agents did not leave"
ok "fork() child registers as its own agent"

# A second daemon on the same runtime dir refuses, clearly.
"$MSPTID" --foreground --runtime-dir "$RT" >"$T/second.log" 2>&1 &&
	fail "second msptid started"
grep -q "another msptid (pid $DAEMON_PID) is running" "$T/second.log" ||
	fail "second msptid message: $(cat "$T/second.log")"
ok "second daemon refused"

stop_daemon
[ ! -e "$RT/ctl.sock" ] && [ ! -e "$RT/agent.sock" ] || fail "sockets left after SIGTERM"
ok "SIGTERM removes the sockets"
echo "registration: all passed"

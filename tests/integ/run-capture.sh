#!/bin/sh
# msptictl run against a running msptid: a 4-rank npusim-dist is captured
# from each rank's first runtime call; the exit code of the command passes
# through; a command that cannot be executed gets 127 (126) and one line.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/run-lib.sh"

start_daemon
cd "$T" || fail "cd"

# Every rank, from its first call; the launcher's wrappers are in too.
$CTL run --output "$T/dist.mspti" -- "$DIST" --ranks 4 --steps 3 \
    >"$T/dist.out" 2>"$T/dist.err" || fail "run dist: $(cat "$T/dist.err")"
[ "$(grep -c '^rank .* step 3:' "$T/dist.out")" -eq 4 ] ||
	fail "the command's own output: $(cat "$T/dist.out")"
grep -q "private" "$T/dist.err" && fail "started a private daemon with one running"
grep -q "session .* finalized" "$T/dist.err" || fail "no summary: $(cat "$T/dist.err")"
check_dist "$T/dist.mspti" 4 3
ok "run npusim-dist --ranks 4: every rank from its first call"

# The session is over and no agent of the job is left in it.
$CTL --json sessions >"$T/sess.json" || fail "sessions"
[ "$(json "$T/sess.json" 'len([s for s in j if s["state"] not in ("finalized", "failed")])')" = 0 ] ||
	fail "a session is still live: $(cat "$T/sess.json")"
ok "run stops its session when the command exits"

# --report prints the report's summary of the capture.
$CTL run --report --output "$T/rep.mspti" -- "$DIST" --ranks 2 --steps 2 \
    >"$T/rep.out" 2>"$T/rep.err" || fail "run --report: $(cat "$T/rep.err")"
grep -q "Capture summary" "$T/rep.out" || fail "no report: $(cat "$T/rep.out")"
grep -Eq "ranks seen +2" "$T/rep.out" || fail "report ranks: $(cat "$T/rep.out")"
ok "run --report prints the report summary"

# Exit codes pass through, a signal as 128 + N.
$CTL run --output "$T/e7.mspti" -- sh -c 'exit 7' 2>"$T/e7.err"
rc=$?; [ $rc -eq 7 ] || fail "exit 7 came back as $rc: $(cat "$T/e7.err")"
$CTL run --output "$T/e9.mspti" -- sh -c 'kill -9 $$' 2>"$T/e9.err"
rc=$?; [ $rc -eq 137 ] || fail "kill -9 came back as $rc"
$CTL run --output "$T/e0.mspti" -- true 2>/dev/null || fail "true failed"
ok "the command's exit code passes through (7, 137, 0)"

# A command that cannot be executed: 127 or 126, one clear line, no file.
mkdir "$T/empty" && cd "$T/empty" || fail "cd empty"
$CTL run -- no-such-command-here >"$T/nf.out" 2>"$T/nf.err"
rc=$?; [ $rc -eq 127 ] || fail "missing command: exit $rc"
[ "$(wc -l <"$T/nf.err")" -eq 1 ] && grep -q "no-such-command-here: command not found" "$T/nf.err" ||
	fail "missing command message: $(cat "$T/nf.err")"
printf 'echo hi\n' >"$T/noexec.sh"; chmod 644 "$T/noexec.sh"
$CTL run -- "$T/noexec.sh" >/dev/null 2>"$T/na.err"
rc=$?; [ $rc -eq 126 ] || fail "non-executable: exit $rc"
grep -q "Permission denied" "$T/na.err" || fail "non-executable message: $(cat "$T/na.err")"
[ -z "$(ls "$T/empty")" ] || fail "files left behind: $(ls "$T/empty")"
cd "$T" || fail "cd"
ok "a command that cannot run: 127/126, one line, no trace file"

# Without --, the command and its options are still the command's.
$CTL run --output "$T/nodash.mspti" sh -c 'exit 3' 2>/dev/null
rc=$?; [ $rc -eq 3 ] || fail "without --: exit $rc"
$CTL run 2>"$T/usage.err"; [ $? -eq 2 ] || fail "no command: not a usage error"
ok "run without -- and without a command"
# The start gate never hangs: with the daemon frozen (agent.sock accepts,
# nothing answers) and with no daemon at all, a process under the gate
# still runs to its end.
kill -STOP "$DAEMON_PID"
MSPTI_RUN_GATE_MS=300 MSPTI_JOB_ID=gated $WITH_AGENT "$TRAIN" --steps 2 \
    >"$T/gate1.out" 2>&1 || { kill -CONT "$DAEMON_PID"; fail "gated app, frozen daemon"; }
kill -CONT "$DAEMON_PID"
MSPTI_RUN_GATE_MS=300 MSPTID_RUNTIME_DIR="$T/nodaemon" LD_PRELOAD="$AGENT_PRELOAD" \
    "$TRAIN" --steps 2 >"$T/gate2.out" 2>&1 || fail "gated app, no daemon"
ok "the start gate is bounded: frozen daemon, no daemon"
echo "run-capture: all passed"

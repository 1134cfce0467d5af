#!/bin/sh
# With the agent and no daemon, a program runs and exits normally and the
# agent prints nothing.  Also: msptictl says clearly that no daemon runs.
. "$(dirname "$0")/lib.sh"

"$APP" --exit 7 >"$T/plain.out" 2>"$T/plain.err"; rc_plain=$?
MSPTID_RUNTIME_DIR="$T/nonexistent" LD_PRELOAD="$AGENT_PRELOAD" "$APP" --exit 7 \
    >"$T/agent.out" 2>"$T/agent.err"; rc_agent=$?
[ $rc_plain -eq 7 ] && [ $rc_agent -eq 7 ] || fail "exit codes $rc_plain $rc_agent"
cmp -s "$T/plain.out" "$T/agent.out" || fail "stdout differs with the agent"
cmp -s "$T/plain.err" "$T/agent.err" || fail "stderr differs with the agent: $(cat "$T/agent.err")"
ok "no daemon: same output and exit code, agent silent"

# A stale socket with nobody listening behaves the same.
mkdir -p "$RT"
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$RT/agent.sock"
MSPTID_RUNTIME_DIR="$RT" LD_PRELOAD="$AGENT_PRELOAD" "$APP" --exit 0 >"$T/stale.out" 2>"$T/stale.err" ||
	fail "app failed with stale socket"
cmp -s "$T/plain.err" "$T/stale.err" || fail "stderr differs with a stale socket"
ok "stale socket: app unaffected"

out=$("$MSPTICTL" -r "$T/nonexistent" status 2>&1); rc=$?
[ $rc -eq 1 ] || fail "msptictl status rc $rc without daemon"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "want one line, got: $out"
echo "$out" | grep -q "msptid is not running" || fail "unclear message: $out"
ok "msptictl: one clear line when no daemon runs"

"$MSPTICTL" -r "$RT" bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown verb must exit 2"
"$MSPTICTL" -r "$RT" list --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad flag must exit 2"
ok "usage errors exit 2"
echo "no-daemon: all passed"

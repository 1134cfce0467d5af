#!/bin/sh
# msptid as an unprivileged user, as msptid.service runs it: a user made
# for this test (useradd, removed at the end) runs the real daemon with no
# capabilities.  Agents of root and of that user register and a capture of
# root's agent works; what it cannot do (read another user's
# /proc/<pid>/exe) is said in status, and the agent's executable stays as
# it reported it (exe_checked false).  A root daemon checks every agent.
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (creates a user; CI runs as root)"
	exit 77
fi
for c in useradd userdel setpriv; do
	command -v $c >/dev/null 2>&1 ||
		{ echo "SKIP: $c not installed"; exit 77; }
done

U="msptit$$"
useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$U" || fail "useradd $U"
trap 'cleanup; userdel "$U" 2>/dev/null' EXIT
UID_U=$(id -u "$U")
# The user must reach the build tree and our runtime dir.
chmod 755 "$T"
mkdir -p "$RT" && chown "$U:" "$RT"
AS_USER="setpriv --reuid=$U --regid=$U --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs"

json_get() {
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
}

# 1. The unprivileged daemon.
$AS_USER "$MSPTID" --foreground --runtime-dir "$RT" -v >>"$T/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_until 20 "$MSPTICTL" -r "$RT" status >/dev/null 2>&1 ||
	fail "msptid did not come up as $U"
[ "$(stat -c %u /proc/$DAEMON_PID)" = "$UID_U" ] || fail "daemon not running as $U"

MSPTI_JOB_ID=unpriv RANK=0 $WITH_AGENT "$APP" --until "$T/go.root" \
    >"$T/out.root" 2>&1 &
PROOT=$!
PIDS="$PIDS $!"
MSPTI_JOB_ID=unpriv RANK=1 $AS_USER $WITH_AGENT "$APP" --until "$T/go.user" \
    >"$T/out.user" 2>&1 &
PUSER=$!
PIDS="$PIDS $!"
wait_until 20 sh -c "[ \"\$('$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 2 ]" ||
	fail "both agents did not register with the unprivileged daemon"

"$MSPTICTL" -r "$RT" --json status >"$T/status.json" || fail "status --json"
[ "$(json_get 'd["uid"]' <"$T/status.json")" = "$UID_U" ] ||
	fail "status does not say the uid: $(cat "$T/status.json")"
json_get 'd["limits"][0]' <"$T/status.json" | grep -q "CAP_SYS_PTRACE" ||
	fail "status --json does not say what is limited: $(cat "$T/status.json")"
json_get 'd["limits"][0]' <"$T/status.json" | grep -q "(1 now)" ||
	fail "one agent (root's) is unchecked: $(cat "$T/status.json")"
"$MSPTICTL" -r "$RT" status >"$T/status.txt" || fail "status"
grep -q "^runs as: *uid $UID_U$" "$T/status.txt" || fail "status text: $(cat "$T/status.txt")"
grep -q "^limited: .*other users' agents" "$T/status.txt" ||
	fail "status text does not say what is limited: $(cat "$T/status.txt")"
ok "unprivileged daemon says in status what it cannot do"

"$MSPTICTL" -r "$RT" --json list >"$T/list.json" || fail "list"
python3 - "$T/list.json" "$PROOT" "$PUSER" <<'PY' || fail "list: $(cat "$T/list.json")"
import json, sys
got = {a["pid"]: a for a in json.load(open(sys.argv[1]))}
root, user = got[int(sys.argv[2])], got[int(sys.argv[3])]
assert root["exe"].endswith("agent-app") and not root["exe_checked"], root
assert user["exe"].endswith("agent-app") and user["exe_checked"], user
PY
ok "other users' executables are as reported, its own user's checked"

# A capture of root's agent by root still works: the output and the ring
# are descriptors, nothing the daemon opens itself.
"$MSPTICTL" -r "$RT" start --pid "$PROOT" --kinds api --duration 300ms \
    --output "$T/root.mspti" --wait >"$T/start.out" 2>&1 ||
	fail "capture through the unprivileged daemon: $(cat "$T/start.out")"
[ -s "$T/root.mspti" ] || fail "empty trace"
ok "capture works through the unprivileged daemon"
stop_daemon

# 2. A root daemon reads every /proc/<pid>/exe and reports no limit.
start_daemon
wait_until 20 sh -c "[ \"\$('$MSPTICTL' -r '$RT' --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')\" = 2 ]" ||
	fail "agents did not come back to the root daemon"
"$MSPTICTL" -r "$RT" --json status >"$T/status2.json" || fail "status --json"
[ "$(json_get 'len(d["limits"])' <"$T/status2.json")" = 0 ] ||
	fail "root daemon reports limits: $(cat "$T/status2.json")"
"$MSPTICTL" -r "$RT" --json list >"$T/list2.json" || fail "list"
json_get 'all(a["exe_checked"] for a in d)' <"$T/list2.json" | grep -q True ||
	fail "root daemon did not check every agent: $(cat "$T/list2.json")"
ok "root daemon checks every agent's executable"
touch "$T/go.root" "$T/go.user"
stop_daemon

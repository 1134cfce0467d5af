#!/bin/sh
# Authorization: a user captures its own processes, not root's; root
# captures anyone's; files belong to the requester.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
AS_NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
chmod 755 "$T"
mkdir -p "$T/nobody" && chown 65534:65534 "$T/nobody"
start_daemon
chmod 755 "$RT"

$WITH_AGENT "$TRAIN" --steps 0 >"$T/root.out" 2>&1 &
RP=$!; PIDS="$PIDS $RP"
$AS_NOBODY $WITH_AGENT "$TRAIN" --steps 0 >"$T/nobody.out" 2>&1 &
NP=$!; PIDS="$PIDS $NP"
wait_until 20 is_registered $RP || fail "root app did not register"
wait_until 20 is_registered $NP || fail "nobody's app did not register"

# nobody on root's process: refused, exit 3, no file.
(cd "$T/nobody" && $AS_NOBODY $CTL start --pid $RP --kinds kernel >"$T/o1" 2>&1); rc=$?
[ $rc -eq 3 ] || fail "refused start exit $rc: $(cat "$T/o1")"
grep -q "permission denied" "$T/o1" || fail "message: $(cat "$T/o1")"
[ -z "$(ls "$T/nobody")" ] || fail "file left after a refused start"
ok "a user cannot capture another user's process"

# nobody on its own process: allowed; the file is nobody's.
(cd "$T/nobody" && $AS_NOBODY $CTL --json start --pid $NP --kinds kernel \
    --duration 500ms --wait >"$T/o2" 2>&1) || fail "own start: $(cat "$T/o2")"
f=$(ls "$T"/nobody/*.mspti)
[ "$(stat -c %u "$f")" = 65534 ] || fail "file owner $(stat -c %u "$f")"
"$DUMP" "$f" | grep -q '"type":"kernel"' || fail "no kernels in nobody's trace"
ok "a user captures its own process; the file is the user's"

# nobody cannot stop root's session; root can capture nobody's process.
$CTL --json start --pid $NP --kinds kernel --output "$T/root.mspti" >"$T/o3" || fail "root start"
SID=$(json "$T/o3" 'j["session"]')
$AS_NOBODY $CTL stop "$SID" >"$T/o4" 2>&1; rc=$?
[ $rc -eq 3 ] || fail "nobody stopped root's session: $rc $(cat "$T/o4")"
$CTL stop "$SID" >/dev/null || fail "root stop"
ok "root captures any process; others cannot stop root's session"

# --all as nobody captures only nobody's agents.
(cd "$T/nobody" && $AS_NOBODY $CTL --json start --all --kinds kernel \
    --output "$T/nobody/all.mspti" --duration 300ms --wait >"$T/o5" 2>&1) || fail "all: $(cat "$T/o5")"
head -1 "$T/o5" | grep -q "\"pid\":$RP," && fail "--all took root's process"
ok "--all means the caller's own processes"
kill -TERM $RP $NP; wait $RP; wait $NP
echo "session-auth: all passed"

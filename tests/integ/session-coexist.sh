#!/bin/sh
# The in-process msPTI API and a daemon session on one process at the same
# time: each gets its own records.  session-coexist enables KERNEL with
# the activity API while `msptictl start --pid` captures it; the kernels
# its buffers received and the kernels in the trace (joined in msptid)
# both equal what it launched, by name.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
COEXIST="$top_builddir/tests/integ/session-coexist"

start_daemon
mkdir "$T/sync"
$WITH_AGENT "$COEXIST" "$T/sync" >"$T/app.out" 2>"$T/app.err" &
APP=$!; PIDS="$PIDS $APP"
registered() {
	$CTL --json list 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(a["pid"] == int(sys.argv[1]) and 0 in a["devices"]
    for a in json.load(sys.stdin)) else 1)' "$1"
}
wait_until 20 registered $APP || fail "session-coexist did not register with its device"
$CTL --json start --pid $APP --kinds kernel --output "$T/co.mspti" >"$T/start.json" ||
	fail "start: $(cat "$T/start.json")"
[ "$(json "$T/start.json" 'j["acks"][0]["ok"]')" = True ] || fail "no ack: $(cat "$T/start.json")"
SID=$(json "$T/start.json" 'j["session"]')
touch "$T/sync/go"
wait_until 60 test -e "$T/sync/launched" || fail "the app did not finish launching"
$CTL stop "$SID" --json >"$T/stop.json" || fail "stop: $(cat "$T/stop.json")"
touch "$T/sync/done"
wait $APP || fail "app exit status: $(cat "$T/app.err")"
"$DUMP" "$T/co.mspti" >"$T/co.jsonl" || fail "trace unreadable"
python3 - "$T/app.out" "$T/co.jsonl" <<'PY' >"$T/py.out" 2>&1 || fail "records differ: $(tail -3 "$T/py.out")"
import json, sys, collections
app = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
recs = [json.loads(l) for l in open(sys.argv[2])][:-1]
assert app["api"] == app["launched"], app
assert app["other"] == 0, app
k = collections.Counter(r["name"] for r in recs if r["type"] == "kernel" and r["flags"] & 8)
assert dict(k) == app["launched"], (dict(k), app["launched"])
print("api", app["api"], "session", dict(k))
PY
ok "in-process API and daemon session each got every launched kernel"
echo "session-coexist: all passed"

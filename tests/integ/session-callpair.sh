#!/bin/sh
# A call's records are in a capture together or not at all.  Each call of
# npusim-train sleeps 3 ms between its launch and its API record
# (MSPTI_TEST_CALL_EXIT_DELAY_US), so a capture stopped by its duration
# lands between the two; every KERNEL and MEMCPY record in the trace must
# still belong to an API record the trace holds, and the calls before the
# stop must have their device records.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
MSPTI_TEST_CALL_EXIT_DELAY_US=3000 $WITH_AGENT "$TRAIN" --steps 0 \
    >"$T/train.out" 2>&1 &
APP=$!; PIDS="$PIDS $APP"
wait_until 30 is_registered "$APP" || fail "npusim-train did not register"
for i in 1 2; do
	$CTL start --pid "$APP" --kinds api,kernel,memcpy --duration 1s \
	    --wait --output "$T/p$i.mspti" >"$T/start$i.out" 2>&1 ||
		fail "start: $(cat "$T/start$i.out")"
	"$DUMP" "$T/p$i.mspti" >"$T/p$i.jsonl" || fail "trace $i unreadable"
	python3 - "$T/p$i.jsonl" <<'PY' >"$T/py.out" 2>&1 || fail "capture $i: $(tail -3 "$T/py.out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][:-1]
api = {r["corr"]: r for r in recs if r["type"] == "api"}
work = [r for r in recs if r["type"] in ("kernel", "memcpy")]
assert len(api) > 50 and len(work) > 50, (len(api), len(work))
orphans = [r for r in work if r["corr"] not in api]
assert not orphans, "%d device records of calls the trace does not " \
    "hold: %s" % (len(orphans), orphans[:2])
# Launch calls without their device record: only the last ones (still
# queued when the capture ended).
got = {r["corr"] for r in work}
launch = sorted((a["ts"], c) for c, a in api.items()
                if a["name"] in ("aclrtLaunchKernel", "aclrtMemcpyAsync"))
missing = [i for i, (_, c) in enumerate(launch) if c not in got]
assert not missing or missing[0] >= len(launch) - 40, \
    "call %d of %d has no device record" % (missing[0], len(launch))
PY
done
kill "$APP"
ok "a stop between a call's launch and its API record takes both or neither"

# A call that ends while a stop has taken the session's kinds away but
# not yet the session (MSPTI_TEST_STOP_DELAY_US holds the stop there):
# its launch is not written without its API record.  Every call sleeps
# 3 ms before its API record, so many end in that 200 ms.
MSPTI_TEST_CALL_EXIT_DELAY_US=3000 MSPTI_TEST_STOP_DELAY_US=200000 \
    $WITH_AGENT "$TRAIN" --steps 0 >"$T/train3.out" 2>&1 &
APP3=$!; PIDS="$PIDS $APP3"
wait_until 30 is_registered "$APP3" || fail "third npusim-train did not register"
$CTL start --pid "$APP3" --kinds api,kernel,memcpy --duration 1s --wait \
    --output "$T/c.mspti" >"$T/c.out" 2>&1 || fail "start c: $(cat "$T/c.out")"
"$DUMP" "$T/c.mspti" >"$T/c.jsonl" || fail "trace c unreadable"
python3 - "$T/c.jsonl" <<'PY' >"$T/pyc.out" 2>&1 || fail "stop delayed: $(tail -3 "$T/pyc.out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][:-1]
api = {r["corr"] for r in recs if r["type"] == "api"}
work = [r for r in recs if r["type"] in ("kernel", "memcpy")]
assert len(api) > 50 and len(work) > 50, (len(api), len(work))
orphans = [r for r in work if r["corr"] not in api]
assert not orphans, "%d device records of calls the trace does not " \
    "hold: %s" % (len(orphans), orphans[:2])
PY
kill "$APP3"
ok "a call ending while a stop takes the session away: its launch goes with its API record"

# A stop and a new start between a call's launch and its API record: the
# launch was the stopped capture's, so the new one (no device kinds) has
# neither it nor any other device record.  Each call sleeps 300 ms
# between the two here, so a call straddles every stop.
MSPTI_TEST_CALL_EXIT_DELAY_US=300000 $WITH_AGENT "$TRAIN" --steps 0 \
    >"$T/train2.out" 2>&1 &
APP2=$!; PIDS="$PIDS $APP2"
wait_until 30 is_registered "$APP2" || fail "second npusim-train did not register"
for i in 1 2 3; do
	$CTL --json start --pid "$APP2" --kinds api,kernel,memcpy \
	    --output "$T/a$i.mspti" >"$T/a$i.json" 2>&1 ||
		fail "start a$i: $(cat "$T/a$i.json")"
	sleep 1
	$CTL stop "$(json "$T/a$i.json" 'j["session"]')" >/dev/null 2>&1 ||
		fail "stop a$i"
	$CTL start --pid "$APP2" --kinds api --duration 1s --wait \
	    --output "$T/b$i.mspti" >"$T/b$i.out" 2>&1 ||
		fail "start b$i: $(cat "$T/b$i.out")"
	"$DUMP" "$T/b$i.mspti" >"$T/b$i.jsonl" || fail "trace b$i unreadable"
	python3 - "$T/b$i.jsonl" <<'PY' >"$T/py.out" 2>&1 || fail "capture b$i: $(tail -3 "$T/py.out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
end = recs.pop()
assert any(r["type"] == "api" for r in recs), "no API record"
work = [r for r in recs if r["type"] in ("kernel", "memcpy", "memset")]
assert not work, "a capture of api only holds %d device records: %s" % (
    len(work), work[:2])
# Nor a launch waiting for a device task it will never have
# (device_unmatched, [5]), nor any other loss.
assert end["footer"]["losses"][1:] == [0, 0, 0, 0, 0], end["footer"]
PY
done
kill "$APP2"
ok "a launch of a stopped capture does not go into the next one"
echo "session-callpair: all passed"

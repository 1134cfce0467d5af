#!/bin/sh
# A job whose device channel msptid cannot see (it runs on a simulator
# with another NPUSIM_SHM_PREFIX than the daemon): its launches never get
# device timing.  That is a loss, not silence: stop --json counts it as
# device_unmatched, the trace footer has it, and report prints the
# INCOMPLETE banner, and msptictl run's summary names the stage.  The same
# daemon capturing a job it can see reports none.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
# A prefix session_cleanup removes too.
NPUSIM_SHM_PREFIX="$NPUSIM_SHM_PREFIX-hidden" $WITH_AGENT "$TRAIN" --steps 0 \
    >"$T/hidden.out" 2>&1 &
HID=$!; PIDS="$PIDS $HID"
$WITH_AGENT "$TRAIN" --steps 0 >"$T/seen.out" 2>&1 &
SEEN=$!; PIDS="$PIDS $SEEN"
wait_until 20 is_registered $HID || fail "hidden job did not register"
wait_until 20 is_registered $SEEN || fail "visible job did not register"

$CTL --json start --pid $HID --kinds api,kernel,marker --duration 1s \
    --output "$T/hidden.mspti" --wait >"$T/hidden.start" 2>&1 ||
	fail "start: $(cat "$T/hidden.start")"
tail -1 "$T/hidden.start" >"$T/hidden.json"
[ "$(json "$T/hidden.json" 'j["state"]')" = finalized ] ||
	fail "not finalized: $(cat "$T/hidden.start")"
[ "$(json "$T/hidden.json" 'j["losses"]["device_unmatched"] > 0')" = True ] ||
	fail "launches without device timing not counted: $(cat "$T/hidden.json")"
ok "stop --json counts launches without device timing (device_unmatched)"

"$DUMP" "$T/hidden.mspti" | tail -1 >"$T/hidden.end" || fail "trace unreadable"
[ "$(json "$T/hidden.end" 'j["footer"]["losses"][5] > 0')" = True ] ||
	fail "footer: $(cat "$T/hidden.end")"
ok "the trace footer has the device_unmatched loss"

$CTL report "$T/hidden.mspti" >"$T/hidden.rep" 2>"$T/hidden.err" ||
	fail "report: $(cat "$T/hidden.err")"
grep -q "INCOMPLETE INPUT" "$T/hidden.err" ||
	fail "no INCOMPLETE banner: $(cat "$T/hidden.err")"
grep -q "launches have no device timing" "$T/hidden.err" ||
	fail "no device_unmatched warning: $(cat "$T/hidden.err")"
if $CTL report --strict "$T/hidden.mspti" >/dev/null 2>&1; then
	fail "report --strict exits 0 on a capture without device timing"
fi
ok "report prints the INCOMPLETE banner and the device_unmatched warning"

# msptictl run of a job msptid cannot see: its summary says which stage
# lost the records, not only how many, and what device_unmatched means.
NPUSIM_SHM_PREFIX="$NPUSIM_SHM_PREFIX-hidden" $CTL run --kinds api,kernel \
    --output "$T/run.mspti" -- "$TRAIN" --steps 3 >"$T/run.out" 2>"$T/run.err" ||
	fail "run: $(cat "$T/run.err")"
grep -Eq "^msptictl run: losses: device_unmatched=[1-9][0-9]* \(launches whose device tasks never reached msptid" "$T/run.err" ||
	fail "run's summary does not name the stage: $(cat "$T/run.err")"
ok "run's summary names the stage that lost records"

# The job the daemon can see: no such loss (launches still queued on the
# device at the stop are not lost), no banner.
$CTL --json start --pid $SEEN --kinds api,kernel,marker --duration 1s \
    --output "$T/seen.mspti" --wait >"$T/seen.start" 2>&1 ||
	fail "start: $(cat "$T/seen.start")"
tail -1 "$T/seen.start" >"$T/seen.json"
[ "$(json "$T/seen.json" 'j["losses"]["device_unmatched"]')" = 0 ] ||
	fail "visible device: $(cat "$T/seen.json")"
$CTL report "$T/seen.mspti" >/dev/null 2>"$T/seen.err" || fail "report"
grep -q "INCOMPLETE" "$T/seen.err" && fail "banner on a complete capture: $(cat "$T/seen.err")"
ok "a job the daemon can see: no device_unmatched loss, no banner"

kill -TERM $HID $SEEN
echo "session-nodevice: all passed"

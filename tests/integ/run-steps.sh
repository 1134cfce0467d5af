#!/bin/sh
# msptictl run and ranks: forked ranks whose registration comes late (as
# on a loaded machine), some forked without the atfork handlers, each
# record their own steps under their own pid, all from step 0; a rank that
# joins after steps it should have recorded says which it missed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/run-lib.sh"

start_daemon
cd "$T" || fail "cd"

# Four forked ranks (one by _Fork), registration delayed 300 ms in every
# process: no rank's steps land in the launcher, none is short.
for i in 1 2; do
	MSPTI_TEST_REGISTER_DELAY_MS=300 $CTL run --steps 6 \
	    --output "$T/fork$i.mspti" -- "$STEPS" --ranks 4 --raw 1 --steps 6 \
	    >"$T/fork$i.out" 2>"$T/fork$i.err" || fail "run: $(cat "$T/fork$i.err")"
	got=$(step_window "$T/fork$i.mspti" 6 0) || exit 1
	"$DUMP" "$T/fork$i.mspti" | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin][:-1]
ranks = {r["pid"]: r["rank"] for r in recs if r["type"] == "process"}
assert sorted(v for v in ranks.values() if v >= 0) == [0, 1, 2, 3], ranks
bad = [r for r in recs if r["type"] == "session" and "another pid" in r["detail"]]
assert not bad, bad' || fail "run $i: ranks or pids: $(cat "$T/fork$i.err")"
done
grep -q "writes records naming" "$T/daemon.log" &&
	fail "a process wrote records in another's name"
ok "forked ranks, late registration, _Fork: steps [0, 6) on each rank, under its own pid"

# Ranks whose start gate gives up (100 ms) long before they register
# (800 ms): they step uncaptured first, and the session says what they
# missed instead of showing short ranks.
# The ranks step until both are in the session (or 30 s).
late_stated() {
	[ "$($CTL --json sessions 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin) for t in s["targets"]
    if t["rank"] >= 0 and t["ok"] and t["first_step"] != 0))')" -ge 2 ]
}
( wait_until 30 late_stated; : >"$T/late-stop" ) &
PIDS="$PIDS $!"
MSPTI_RUN_GATE_MS=100 MSPTI_TEST_REGISTER_DELAY_MS=800 $CTL --json run \
    --steps 3 --output "$T/late.mspti" -- "$STEPS" --ranks 2 --steps 0 \
    --until "$T/late-stop" \
    >"$T/late.json" 2>"$T/late.err" || fail "run late: $(cat "$T/late.err")"
[ "$(json "$T/late.json" 'len([t for t in j["session"]["targets"] if t["rank"] >= 0 and (t["first_step"] > 0 or t["first_step"] == -1) and ("missed" in t["message"] or "none captured" in t["message"])])')" = 2 ] ||
	fail "late ranks not stated: $(cat "$T/late.json")"
"$DUMP" "$T/late.mspti" | grep -Eq '"detail":"[^"]*(missed|none captured)' ||
	fail "the trace does not say what the late ranks missed"
ok "ranks that join late: the steps they missed are stated"
echo "run-steps: all passed"

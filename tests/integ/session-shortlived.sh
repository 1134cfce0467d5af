#!/bin/sh
# Issue 11, found on the way: processes that register and exit at once
# (npusim-dist's launcher and ranks, the shells of a libtool wrapper)
# while a job session takes every new agent.  A process that exits before
# reading the daemon's reply is an ordinary close: msptid must not log
# "write failed" or count it as a dropped peer.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
$CTL start --job short --kinds marker --output "$T/s.mspti" >/dev/null || fail "start"
for i in 1 2 3 4; do
	MSPTI_JOB_ID=short $WITH_AGENT "$DIST" --ranks 4 --steps 2 >>"$T/dist.out" 2>&1 ||
		fail "npusim-dist: $(tail -3 "$T/dist.out")"
done
dropped=$($CTL --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["peers_dropped"])')
[ "$dropped" = 0 ] || fail "peers dropped: $dropped"
! grep -q "write failed" "$T/daemon.log" || fail "msptid logged 'write failed'"
ok "short-lived agents are ordinary closes, not dropped peers"

#!/bin/sh
# Per-thread ring segments in a real capture: 12 threads of a program
# built against the MSTX header (inline disabled check) mark at full speed
# into one session.  8 get their own segment, the rest share segment 0.
# Every record is accounted for (written + agent_ring lost = offered), no
# marker lost its name (each segment defines its strings before use), and
# with no loss every thread's count is exact.  Run with the default ring
# and with 64 KiB segments, which lose records for sure: a STRING_DEF that
# finds its segment full loses its record once, not twice.  No marking
# thread populates its segment's pages itself (mark-threads counts the
# madvise calls of its threads).  A thread that records little gets
# little of its segment's memory: the agent populates ahead of the
# thread's writes, not all 8 MiB at once (which took ~5 ms of CPU, and
# its freeing more in msptid, in every session); a segment starts a
# session with what it took in the process's session before.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

MT="$top_builddir/tests/integ/mark-threads"
N=12 PER=20000
start_daemon
registered() {
	$CTL --json list 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if any(a["pid"] == int(sys.argv[1]) and "mark-threads" in a["exe"]
    for a in json.load(sys.stdin)) else 1)' "$1"
}
for buf in default 64K; do
rm -f "$T/go"
$WITH_AGENT "$MT" $N $PER "$T/go" >"$T/mt.out" 2>&1 &
APP=$!; PIDS="$PIDS $APP"
wait_until 20 registered $APP || fail "mark-threads did not register"
opt=; [ $buf = default ] || opt="--buffer $buf"
capture_start $APP marker "$T/t$buf.mspti" $opt
touch "$T/go"
wait "$APP" || fail "mark-threads failed: $(cat "$T/mt.out")"
$CTL --json wait "$SID" >"$T/wait.json" 2>&1 || $CTL --json stop "$SID" >"$T/wait.json" 2>&1
"$DUMP" "$T/t$buf.mspti" >"$T/t.jsonl" || fail "trace unreadable"
python3 - "$T/t.jsonl" $N $PER <<'PY' >"$T/py.out" 2>&1 || fail "$(tail -5 "$T/py.out")"
import json, sys, collections
recs = [json.loads(l) for l in open(sys.argv[1])]
n, per = int(sys.argv[2]), int(sys.argv[3])
end = recs.pop()
assert end["end"] and not end["truncated"], end
lost = end["footer"]["losses"][1]
assert end["footer"]["losses"][2] == 0, end["footer"]
marks = [r for r in recs if r["type"] == "marker"]
names = collections.Counter(r["name"] for r in marks)
offered = n * (per + 1)
assert len(marks) + lost == offered, (len(marks), lost, offered, names, end["footer"])
assert set(names) <= {"common"} | {"t%d" % i for i in range(n)}, names
tids = {r["tid"] for r in marks}
assert len(tids) >= 2, tids
if lost == 0:
    assert names["common"] == n, names
    for i in range(n):
        assert names["t%d" % i] == per, names
print("markers", len(marks), "lost", lost, "threads", len(tids))
PY
ok "$N threads, ring $buf: $(cat "$T/py.out")"
# A thread's first record in its own segment does not wait for the
# segment's megabytes to be populated: the agent's own thread does it.
grep -qx "populates on marking threads: 0" "$T/mt.out" ||
	fail "ring $buf: a marking thread populated its segment: $(cat "$T/mt.out")"
done
ok "no marking thread waited for its segment's pages"

# One thread, 2000 markers (~110 KiB), then the process waits: once the
# agent's thread had time to populate, the ring's pages in the process
# are what the thread wrote and a chunk or two ahead, not its 8 MiB.
rm -f "$T/go" "$T/hold"
$WITH_AGENT "$MT" 1 2000 "$T/go" "$T/hold" >"$T/mt1.out" 2>&1 &
APP=$!; PIDS="$PIDS $APP"
wait_until 20 registered $APP || fail "mark-threads (1) did not register"
capture_start $APP marker "$T/t1.mspti"
touch "$T/go"
marked() { grep -q "populates on marking threads" "$T/mt1.out"; }
wait_until 20 marked || fail "mark-threads (1) did not mark"
sleep 1
ring_rss() {
	awk '/^[0-9a-f]+-[0-9a-f]+ / { ring = ($0 ~ /mspti-ring/) }
	    ring && /^Rss:/ { kb += $2 } END { print kb + 0 }' \
	    "/proc/$APP/smaps"
}
RSS=$(ring_rss)
[ "$RSS" -gt 0 ] || fail "no ring mapping found in /proc/$APP/smaps"
[ "$RSS" -le 2048 ] ||
	fail "the ring holds $RSS KiB in a process that wrote ~110 KiB"
$CTL --json stop "$SID" >"$T/stop.json" 2>&1 || fail "stop: $(cat "$T/stop.json")"
touch "$T/hold"
wait "$APP" || fail "mark-threads (1) failed: $(cat "$T/mt1.out")"
"$DUMP" "$T/t1.mspti" >"$T/t1.jsonl" || fail "trace unreadable"
[ "$(grep -c '"type":"marker"' "$T/t1.jsonl")" -eq 2001 ] ||
	fail "markers: $(grep -c '"type":"marker"' "$T/t1.jsonl") of 2001"
ok "one thread, 2000 markers: the ring holds $RSS KiB of its pages, every marker written"

# A thread that wrote 60000 markers (~3.3 MiB) in one session finds that
# much of its next session's segment populated at the start (the agent
# remembers what each segment took), not 1 MiB nor the whole 8 MiB.
rm -f "$T/go" "$T/hold" "$T/mt1.out"
$WITH_AGENT "$MT" 1 60000 "$T/go" "$T/hold" >"$T/mt1.out" 2>&1 &
APP=$!; PIDS="$PIDS $APP"
wait_until 20 registered $APP || fail "mark-threads (60000) did not register"
capture_start $APP marker "$T/t2.mspti"
touch "$T/go"
wait_until 20 marked || fail "mark-threads (60000) did not mark"
$CTL --json stop "$SID" >"$T/stop.json" 2>&1 || fail "stop: $(cat "$T/stop.json")"
capture_start $APP marker "$T/t3.mspti"
sleep 1
RSS=$(ring_rss)
[ "$RSS" -ge 2560 ] && [ "$RSS" -le 5120 ] ||
	fail "the next session's ring holds $RSS KiB after a session that wrote ~3.3 MiB"
$CTL --json stop "$SID" >"$T/stop.json" 2>&1 || fail "stop: $(cat "$T/stop.json")"
touch "$T/hold"
wait "$APP" || fail "mark-threads (60000) failed: $(cat "$T/mt1.out")"
ok "after a session that wrote ~3.3 MiB, the next one starts with $RSS KiB of its ring"

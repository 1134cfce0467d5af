#!/bin/sh
# Faults: an agent killed mid-session, garbage in a ring, disk full, and
# msptid killed -9 mid-session.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
$WITH_AGENT "$TRAIN" --steps 0 >"$T/a.out" 2>&1 &
A=$!; PIDS="$PIDS $A"
$WITH_AGENT "$TRAIN" --steps 0 >"$T/b.out" 2>&1 &
B=$!; PIDS="$PIDS $B"
wait_until 20 is_registered $A || fail "A did not register"
wait_until 20 is_registered $B || fail "B did not register"

# An agent killed mid-session: its records up to the kill are in, the
# session still finalizes.
$CTL --json start --pid $A,$B --kinds kernel --output "$T/k.mspti" >"$T/s.json" || fail "start"
SID=$(json "$T/s.json" 'j["session"]')
sleep 1
kill -9 $B; wait $B 2>/dev/null
TK=$(now_ns)
sleep 0.5
$CTL --json stop "$SID" >"$T/stop.json" || fail "stop after kill: $(cat "$T/stop.json")"
[ "$(json "$T/stop.json" 'j["state"]')" = finalized ] || fail "not finalized"
"$DUMP" "$T/k.mspti" >"$T/k.jsonl" || fail "unreadable"
python3 - "$T/k.jsonl" $B $TK <<'PY' >"$T/py.out" 2>&1 || fail "killed agent: $(tail -3 "$T/py.out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][:-1]
b, tk = int(sys.argv[2]), int(sys.argv[3])
kb = [r for r in recs if r["type"] == "kernel" and r["pid"] == b]
assert len(kb) > 100, len(kb)
assert all(r["ts"] < tk for r in kb)
assert any(r["type"] == "session" and r["event"] == 5 and r["pid"] == b for r in recs)
PY
ok "killed agent: its records up to the kill are in; the session finalizes"

# Garbage written into a ring: rejected and counted, the daemon stays up.
$CTL --json start --pid $A --kinds kernel --output "$T/g.mspti" >"$T/s.json" || fail "start g"
SID=$(json "$T/s.json" 'j["session"]')
sleep 0.5
python3 - $A <<'PY' >"$T/g.out" 2>&1 || fail "cannot scribble on the ring: $(cat "$T/g.out")"
import mmap, os, struct, sys, random
pid = sys.argv[1]
for line in open("/proc/%s/maps" % pid):
    if "memfd:mspti-ring" in line:
        rng = line.split()[0]
        break
else:
    sys.exit("no ring mapping")
fd = os.open("/proc/%s/map_files/%s" % (pid, rng), os.O_RDWR)
size = os.fstat(fd).st_size
m = mmap.mmap(fd, size)
cap = struct.unpack_from("<Q", m, 16)[0]
random.seed(7)
for _ in range(200):
    head = struct.unpack_from("<Q", m, 128)[0]
    off = 4096 + (head % cap)
    n = 64
    if off + n > 4096 + cap:
        continue
    # A plausible header with garbage after it, then publish it.
    m[off + 8:off + n] = bytes(random.getrandbits(8) for _ in range(n - 8))
    struct.pack_into("<HHI", m, off, 2, 64, 0xdead)
    struct.pack_into("<Q", m, 128, head + n)
PY
sleep 1
kill -0 $DAEMON_PID || fail "daemon died from ring garbage"
kill -0 $A || fail "app died"
$CTL --json sessions >"$T/ss.json" || fail "sessions"
rej=$(json "$T/ss.json" '[s for s in j if s["session"] == '"$SID"'][0]["losses"]["daemon_reject"]')
[ "$rej" -gt 0 ] || fail "no rejects counted: $(cat "$T/ss.json")"
# Attributed to the target that wrote them, in --json and in text.
trej=$(json "$T/ss.json" '[t for s in j if s["session"] == '"$SID"' for t in s["targets"] if t["pid"] == '"$A"'][0]["losses"]["daemon_reject"]')
[ "$trej" = "$rej" ] || fail "target's daemon_reject $trej, session's $rej"
$CTL sessions | grep -q "pid $A rank .*daemon_reject=$rej" ||
	fail "sessions does not show the target's losses: $($CTL sessions)"
$CTL stop "$SID" >/dev/null 2>&1
ok "garbage in a ring is rejected and counted ($rej), per target too, the daemon stays up"

# Disk full: the session fails with a clear error, the app runs on.
mkdir -p "$T/small"
if mount -t tmpfs -o size=256k tmpfs "$T/small" 2>/dev/null; then
	$CTL --json start --pid $A --kinds api,kernel,marker --output "$T/small/full.mspti" \
	    >"$T/s.json" || fail "start full"
	SID=$(json "$T/s.json" 'j["session"]')
	$CTL --json wait "$SID" >"$T/w.json"; rc=$?
	umount "$T/small"
	[ $rc -eq 1 ] || fail "wait on a full disk: exit $rc $(cat "$T/w.json")"
	[ "$(json "$T/w.json" 'j["state"]')" = failed ] || fail "state $(cat "$T/w.json")"
	json "$T/w.json" 'j["error"]' | grep -q "No space left on device" ||
		fail "error: $(cat "$T/w.json")"
	kill -0 $A || fail "app died on disk full"
	ok "disk full: the session fails with a clear error; the app runs on"
else
	echo "# skipped disk-full (cannot mount tmpfs here)"
fi

# msptid killed -9 mid-session: the app goes on, the partial trace reads,
# a new daemon sees the agent again.
$CTL --json start --pid $A --kinds kernel --output "$T/p.mspti" >"$T/s.json" || fail "start p"
sleep 2.5
kill -9 $DAEMON_PID; wait $DAEMON_PID 2>/dev/null
n0=$(wc -l <"$T/a.out")
sleep 1
[ "$(wc -l <"$T/a.out")" -gt "$n0" ] || fail "app stalled after the daemon died"
"$DUMP" "$T/p.mspti" >"$T/p.jsonl" || fail "partial trace unreadable"
tail -1 "$T/p.jsonl" | grep -q '"truncated":true' || fail "not reported truncated"
grep -q '"type":"kernel"' "$T/p.jsonl" || fail "partial trace has no kernels"
ok "kill -9 msptid: the app runs on; the partial trace is readable"
start_daemon
wait_until 20 is_registered $A || fail "agent did not re-register"
$CTL --json start --pid $A --kinds kernel --duration 300ms --output "$T/r.mspti" --wait >"$T/r.out" 2>&1 ||
	fail "capture after restart: $(cat "$T/r.out")"
ok "a restarted daemon sees the agent again and captures it"
kill -TERM $A; wait $A || fail "app exit status"
echo "session-faults: all passed"

#!/bin/sh
# Deferred starts (StartSession.start_at_ns) whose requester cannot take
# the reply at the instant: the daemon drops that requester, frees the
# deferred start once, and keeps serving.  Raw frames, so the requester
# can shut its read side (the reply then fails with EPIPE) while the
# daemon still sees its connection open.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon -v -v
# Protobuf by hand, for both parts: the frames are built here, not by
# msptictl, so a requester can misbehave at will.
cat >"$T/rawpb.py" <<'PY'
def varint(v):
    out = b""
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def field(n, wt, payload):
    tag = varint(n << 3 | wt)
    if wt == 2:
        return tag + varint(len(payload)) + payload
    return tag + varint(payload)
PY
python3 - "$RT" "$T" <<'PY' || fail "raw deferred starts"
import os, socket, struct, sys, time
rt, tmp = sys.argv[1], sys.argv[2]
sys.path.insert(0, tmp)
MAGIC, VER, START = 0x5450534d, 1, 20

from rawpb import varint, field

def start_req(job, at):
    tgt = field(2, 2, job.encode())
    return field(1, 2, tgt) + field(3, 2, b"x.mspti") + field(4, 0, at)

def send_start(job, at, name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(rt, "ctl.sock"))
    body = start_req(job, at)
    fd = os.open(os.path.join(tmp, name), os.O_RDWR | os.O_CREAT, 0o600)
    socket.send_fds(s, [struct.pack("<IHHI", MAGIC, VER, START, len(body)) + body], [fd])
    os.close(fd)
    return s

log = os.path.join(tmp, "daemon.log")
# 1: the reply fails at the instant (read side shut); the connection
# stays open until the daemon has tried it.
at = time.time_ns() + 400_000_000
s1 = send_start("nobody", at, "a.mspti")
s1.shutdown(socket.SHUT_RD)
for _ in range(400):
    if "closed before reading our reply" in open(log).read():
        break
    time.sleep(0.05)
else:
    sys.exit("the failed reply was not seen")
s1.close()
# 2: the requester closes right at the instant (either comes first).
at2 = time.time_ns() + 300_000_000
s2 = send_start("nobody", at2, "b.mspti")
time.sleep(max(0, (at2 - time.time_ns()) / 1e9))
s2.close()
time.sleep(0.2)
PY
kill -0 "$DAEMON_PID" 2>/dev/null || fail "msptid died"
"$MSPTICTL" -r "$RT" status >/dev/null || fail "msptid does not answer"
"$MSPTICTL" -r "$RT" --json sessions >/dev/null || fail "msptid does not answer sessions"
! grep -q "Sanitizer\|double free\|corrupted" "$T/daemon.log" || fail "memory error"
ok "deferred starts whose requester fails or goes away at the instant: freed once, daemon serves"

# (Part 1's second start is dropped or fails its reply, by the race.)
n0=$(grep -c 'deferred start by uid [0-9]* dropped' "$T/daemon.log")
# A client cannot queue deferred starts without bound: a few per
# connection, SESS_AT_MAX in all; beyond, one clear error each.
python3 - "$RT" "$T" <<'PY' || fail "deferred start caps"
import os, socket, struct, sys, time
rt, tmp = sys.argv[1], sys.argv[2]
sys.path.insert(0, tmp)
MAGIC, VER, START, ERROR, STATUS = 0x5450534d, 1, 20, 3, 16
PER_PEER, TOTAL = 4, 64

from rawpb import varint, field

fd = os.open(os.path.join(tmp, "cap.mspti"), os.O_RDWR | os.O_CREAT, 0o600)

def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(rt, "ctl.sock"))
    return s

def send(s, at):
    body = field(1, 2, field(2, 2, b"nobody")) + field(4, 0, at)
    socket.send_fds(s, [struct.pack("<IHHI", MAGIC, VER, START, len(body)) + body], [fd])

def recv_frame(s):
    s.settimeout(10)
    buf = b""
    while len(buf) < 12:
        c = s.recv(12 - len(buf))
        assert c, "closed"
        buf += c
    magic, ver, typ, n = struct.unpack("<IHHI", buf)
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        assert c, "closed"
        body += c
    return typ, body

far = time.time_ns() + 300_000_000_000
first = conn()
for _ in range(PER_PEER + 1):
    send(first, far)
typ, body = recv_frame(first)
assert typ == ERROR and b"too many deferred starts" in body, (typ, body)
assert b"\n" not in body, body
conns = [first]
for _ in range(TOTAL // PER_PEER - 1):
    s = conn()
    for _ in range(PER_PEER):
        send(s, far)
    # Frames of one connection are handled in order: once its status
    # comes back, its starts are all in (the next connection's come after).
    s.sendall(struct.pack("<IHHI", MAGIC, VER, STATUS, 0))
    typ, body = recv_frame(s)
    assert typ == STATUS + 1, (typ, body)
    conns.append(s)
extra = conn()
send(extra, far)
typ, body = recv_frame(extra)
assert typ == ERROR and b"too many deferred starts" in body, (typ, body)
for s in conns:
    s.close()
print("refused", flush=True)
PY
wait_until 20 sh -c "[ \$(grep -c 'deferred start by uid [0-9]* dropped' '$T/daemon.log') -ge $((n0 + 64)) ]" ||
	fail "the capped deferred starts were not dropped with their requesters"
kill -0 "$DAEMON_PID" 2>/dev/null || fail "msptid died"
grep -q "too many deferred starts" "$T/daemon.log" || fail "no log line for a refused deferred start"
ok "deferred starts are capped per connection and in all, with a one-line error"

# A start held for an instant says it was; an msptid that predates held
# starts (here one told to act so) starts at once, and msptictl says so.
# held_start RUNDIR NAME LEAD_NS: a start LEAD_NS ahead into NAME.mspti,
# its reply in NAME.json, its stderr in NAME.err; start_held in $held.
held_start() {
	at=$(( $(now_ns) + $3 ))
	"$MSPTICTL" -r "$1" --json start --job heldjob --start-at "$at" \
	    --output "$T/$2.mspti" >"$T/$2.json" 2>"$T/$2.err" ||
		fail "start $2: $(cat "$T/$2.err")"
	held=$(json "$T/$2.json" 'j["start_held"]')
}
held_start "$RT" held 400000000
[ "$held" = True ] || fail "a held start not said held: $(cat "$T/held.json")"
! grep -q "does not hold starts" "$T/held.err" || fail "held start warned: $(cat "$T/held.err")"
RT2="$T/run-old"
MSPTID_TEST_NO_START_AT=1 "$MSPTID" --foreground --runtime-dir "$RT2" \
    >>"$T/daemon-old.log" 2>&1 &
PIDS="$PIDS $!"
wait_until 20 "$MSPTICTL" -r "$RT2" status >/dev/null 2>&1 || fail "second msptid"
held_start "$RT2" old 2000000000
[ "$held" = False ] || fail "a start at once said held: $(cat "$T/old.json")"
[ "$(wc -l <"$T/old.err")" -eq 1 ] && grep -q "^msptictl start: msptid started the session .* ms before --start-at: it does not hold starts" "$T/old.err" ||
	fail "no one-line warning: $(cat "$T/old.err")"
ok "a held start says so; one an old msptid started at once is told"

# A start held for an instant a minute away is checked in full at once:
# a ring over msptid's memory cap, or a buffer over 1G, is refused now
# (20 s is far less than the wait), with the start's own one-line error.
at=$(( $(now_ns) + 60000000000 ))
for opt in "--mode ring --buffer 1G" "--buffer 2G"; do
	timeout 20 "$MSPTICTL" -r "$RT" start --job heldjob --start-at "$at" \
	    $opt --output "$T/bad.mspti" >"$T/bad.out" 2>"$T/bad.err"
	rc=$?
	[ $rc -eq 2 ] || fail "deferred start $opt: exit $rc, not 2 at once: $(cat "$T/bad.err")"
	grep -q "^msptictl start: \(a 1048576 KiB ring buffer exceeds\|buffer size must be\)" "$T/bad.err" ||
		fail "deferred start $opt: $(cat "$T/bad.err")"
done
ok "a deferred start is checked in full at once"

# One user cannot take the deferred starts from the others: a uid other
# than root holds at most 16, and root's start is taken while they wait.
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null 2>&1 &&
    command -v setpriv >/dev/null 2>&1 && [ -x /usr/bin/python3 ]; then
	U="msptia$$"
	useradd --system --no-create-home --home-dir /nonexistent \
	    --shell /usr/sbin/nologin "$U" || fail "useradd $U"
	trap 'cleanup; userdel "$U" 2>/dev/null' EXIT
	chmod 755 "$T"
	mkdir "$T/u" && chown "$U:" "$T/u"
	# defer.py SOCK OUT AT_NS N: N deferred starts on one connection (4 per
	# connection at most), then the reply to a status: "ok" when all
	# were taken, else the first error's text.
	cat >"$T/u/defer.py" <<'PY'
import os, socket, struct, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rawpb import field
MAGIC, VER, START, ERROR, STATUS = 0x5450534d, 1, 20, 3, 16
path, out, at, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def recv_frame(s):
    s.settimeout(10)
    buf = b""
    while len(buf) < 12:
        c = s.recv(12 - len(buf)); assert c, "closed"; buf += c
    typ, ln = struct.unpack("<IHHI", buf)[2:]
    body = b""
    while len(body) < ln:
        c = s.recv(ln - len(body)); assert c, "closed"; body += c
    return typ, body
fd = os.open(out, os.O_RDWR | os.O_CREAT, 0o600)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
body = field(1, 2, field(2, 2, b"nobody")) + field(4, 0, at)
for _ in range(n):
    socket.send_fds(s, [struct.pack("<IHHI", MAGIC, VER, START, len(body)) + body], [fd])
s.sendall(struct.pack("<IHHI", MAGIC, VER, STATUS, 0))
typ, body = recv_frame(s)
print("ok" if typ == STATUS + 1 else body.decode(errors="replace"), flush=True)
# Held open (the starts wait with it) until the file "release" exists.
import time
rel = os.path.join(os.path.dirname(os.path.abspath(__file__)), "release")
for _ in range(1200):
    if os.path.exists(rel):
        break
    time.sleep(0.05)
PY
	AS_U="setpriv --reuid=$U --regid=$U --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs"
	far=$(( $(date +%s) * 1000000000 + 300000000000 ))
	for i in 1 2 3 4 5; do
		$AS_U /usr/bin/python3 "$T/u/defer.py" "$RT/ctl.sock" "$T/u/o.mspti" \
		    "$far" 4 </dev/null >"$T/u/r$i" 2>&1 &
		PIDS="$PIDS $!"
		wait_until 20 test -s "$T/u/r$i" || fail "user's connection $i: no reply"
	done
	for i in 1 2 3 4; do
		[ "$(cat "$T/u/r$i")" = ok ] || fail "user's start $i refused: $(cat "$T/u/r$i")"
	done
	grep -q "too many deferred starts waiting .*16 per user" "$T/u/r5" ||
		fail "a user's 17th deferred start was taken: $(cat "$T/u/r5")"
	python3 "$T/u/defer.py" "$RT/ctl.sock" "$T/root.mspti" "$far" 1 \
	    </dev/null >"$T/root.r" 2>&1 &
	PIDS="$PIDS $!"
	wait_until 20 test -s "$T/root.r" || fail "root's connection: no reply"
	[ "$(cat "$T/root.r")" = ok ] || fail "root's deferred start refused: $(cat "$T/root.r")"
	: >"$T/u/release"
	ok "one user holds at most 16 deferred starts; root's is still taken"
fi

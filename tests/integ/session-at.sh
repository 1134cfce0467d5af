#!/bin/sh
# Deferred starts (StartSession.start_at_ns) whose requester cannot take
# the reply at the instant: the daemon drops that requester, frees the
# deferred start once, and keeps serving.  Raw frames, so the requester
# can shut its read side (the reply then fails with EPIPE) while the
# daemon still sees its connection open.
. "$(dirname "$0")/lib.sh"

start_daemon -v -v
python3 - "$RT" "$T" <<'PY' || fail "raw deferred starts"
import os, socket, struct, sys, time
rt, tmp = sys.argv[1], sys.argv[2]
MAGIC, VER, START = 0x5450534d, 1, 20

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

# 1: the reply fails at the instant (read side shut).
at = time.time_ns() + 400_000_000
s1 = send_start("nobody", at, "a.mspti")
s1.shutdown(socket.SHUT_RD)
# 2: the requester closes right at the instant.
at2 = time.time_ns() + 700_000_000
s2 = send_start("nobody", at2, "b.mspti")
time.sleep(max(0, (at2 - time.time_ns()) / 1e9))
s2.close()
time.sleep(0.3)
s1.close()
PY
wait_until 20 grep -q "closed before reading our reply" "$T/daemon.log" ||
	fail "the failed reply was not seen"
kill -0 "$DAEMON_PID" 2>/dev/null || fail "msptid died"
"$MSPTICTL" -r "$RT" status >/dev/null || fail "msptid does not answer"
"$MSPTICTL" -r "$RT" --json sessions >/dev/null || fail "msptid does not answer sessions"
! grep -q "Sanitizer\|double free\|corrupted" "$T/daemon.log" || fail "memory error"
ok "deferred starts whose requester fails or goes away at the instant: freed once, daemon serves"

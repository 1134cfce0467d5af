#!/bin/sh
# Truncated, oversized, wrong-version, unknown-type and garbage frames sent
# to a real msptid: it drops that peer and keeps serving the others.
. "$(dirname "$0")/lib.sh"

start_daemon
MSPTI_JOB_ID=good RANK=0 $WITH_AGENT "$APP" --until "$T/go" >/dev/null 2>&1 &
GP=$!; PIDS="$PIDS $GP"
wait_until 10 sh -c "'$MSPTICTL' -r '$RT' --json list | grep -q '\"pid\":$GP,'" ||
	fail "good agent did not register"

python3 - "$RT" "$MSPTICTL" "$GP" <<'PY' || fail "bad-frame checks failed"
import json, os, socket, struct, subprocess, sys, time
rt, ctl, good = sys.argv[1], sys.argv[2], int(sys.argv[3])
MAGIC, VER = 0x5450534d, 1
HELLO, STATUS_REQ, LIST_REQ = 1, 16, 18

def hdr(t, n, magic=MAGIC, ver=VER):
    return struct.pack("<IHHI", magic, ver, t, n)

def status():
    out = subprocess.run([ctl, "-r", rt, "--json", "status"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)

def listed():
    out = subprocess.run([ctl, "-r", rt, "--json", "list"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    return [a["pid"] for a in json.loads(out.stdout)]

def closed_by_daemon(s):
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True

cases = [
    ("agent", "garbage", os.urandom(64) + b"\xff" * 16),
    ("agent", "wrong version", hdr(HELLO, 4, ver=7) + b"abcd"),
    ("agent", "bad magic", hdr(HELLO, 4, magic=0xdeadbeef) + b"abcd"),
    ("agent", "unknown type", hdr(55, 0)),
    ("agent", "oversized", hdr(HELLO, 50 << 20)),
    ("agent", "ctl message on agent socket", hdr(STATUS_REQ, 0)),
    ("agent", "malformed protobuf", hdr(HELLO, 8) + b"\xff" * 8),
    ("ctl", "Hello on ctl socket", hdr(HELLO, 0)),
    ("ctl", "garbage", b"\x00" * 40),
    ("ctl", "oversized request", hdr(LIST_REQ, 1 << 20)),
]
before = status()["frames_rejected"]
for sock, name, data in cases:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(rt, sock + ".sock"))
    s.sendall(data)
    assert closed_by_daemon(s), "daemon kept peer after " + name
    s.close()
    assert good in listed(), "good agent lost after " + name
after = status()["frames_rejected"]
assert after - before == len(cases), (before, after)

# Truncated frame then close: nothing to reject, the daemon just forgets it.
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.path.join(rt, "agent.sock"))
s.sendall(hdr(HELLO, 100) + b"short")
s.close()
# A message before Hello is refused.
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.path.join(rt, "agent.sock"))
s.sendall(hdr(4, 0))  # AgentUpdate before Hello
assert closed_by_daemon(s), "update before Hello accepted"
# Many idle connections do not block anyone.
idle = []
for _ in range(20):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(os.path.join(rt, "ctl.sock"))
    idle.append(c)
assert good in listed()
st = status()
assert st["agents"] == 1, st
print("bad frames: %d rejected, %d peers dropped" % (st["frames_rejected"], st["peers_dropped"]))
PY
kill -0 "$DAEMON_PID" || fail "daemon died"
ok "bad frames drop only the sender; the daemon and the good agent stay"
touch "$T/go"; wait "$GP"
stop_daemon
echo "bad-frames: all passed"

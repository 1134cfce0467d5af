#!/bin/sh
# Idle and stalled connections (issue 13): one user opens 3,000 agent
# connections and never says Hello, and stops in the middle of frames.
# msptid holds at most its per-uid bound (256) of silent agent connections,
# closes them after the Hello timeout, and serves everyone meanwhile.
. "$(dirname "$0")/lib.sh"

start_daemon
python3 - "$RT" "$MSPTICTL" "$DAEMON_PID" <<'PY' || fail "idle connection checks failed"
import os, resource, socket, struct, subprocess, sys, time
rt, ctl, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))

def fds():
    return len(os.listdir("/proc/%d/fd" % pid))

def served():
    out = subprocess.run([ctl, "-r", rt, "status"], capture_output=True, text=True, timeout=30)
    return out.returncode == 0

base = fds()
conns = []
for i in range(3000):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(os.path.join(rt, "agent.sock"))
    except (BlockingIOError, ConnectionRefusedError, OSError):
        pass
    if i % 2 == 0:
        try:	# half a header
            s.send(struct.pack("<IHH", 0x5450534d, 1, 1))
        except OSError:
            pass
    conns.append(s)
time.sleep(0.5)
held = fds() - base
print("3000 silent connections: msptid holds %d descriptors for them" % held)
assert held <= 256 + 8, "msptid holds %d silent connections" % held
assert served(), "status not served during the flood"
# The Hello timeout (5 s) closes what it holds.
for _ in range(100):
    time.sleep(0.1)
    if fds() - base <= 2:
        break
left = fds() - base
print("after the Hello timeout: %d" % left)
assert left <= 2, "%d silent connections still held" % left
for s in conns:
    s.close()
assert served()
PY
ok "silent agent connections are bounded per uid and time out"

#!/bin/sh
# Descriptor exhaustion (issue 13): msptid under `ulimit -n 64` gets 300
# connections.  accept's EMFILE must pause the listeners, not spin: few
# log lines and little CPU over the window, and service resumes once the
# connections close.
. "$(dirname "$0")/lib.sh"

(ulimit -n 64 && exec "$MSPTID" --foreground --runtime-dir "$RT" -v \
	>>"$T/daemon.log" 2>&1) &
DAEMON_PID=$!
wait_until 10 sh -c "[ -S '$RT/ctl.sock' ] && '$MSPTICTL' -r '$RT' status >/dev/null 2>&1" ||
	fail "msptid did not come up"
lines0=$(wc -l <"$T/daemon.log")

python3 - "$RT" "$MSPTICTL" "$DAEMON_PID" "$T/daemon.log" "$lines0" <<'PY' || fail "descriptor exhaustion checks failed"
import os, socket, subprocess, sys, time
rt, ctl, pid, log, lines0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])

def ticks():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])	# utime + stime

conns = []
for _ in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(os.path.join(rt, "agent.sock"))
    except BlockingIOError:
        pass
    conns.append(s)
t0 = ticks()
time.sleep(3)
spent = ticks() - t0
lines = sum(1 for _ in open(log)) - lines0
hz = os.sysconf("SC_CLK_TCK")
print("over 3 s: %d CPU ticks (%d/s), %d log lines" % (spent, hz, lines))
# A spinning accept loop burns every tick and logs per try.
assert lines < 100, "%d log lines while descriptors were exhausted" % lines
assert spent < 1.5 * hz, "%d CPU ticks in 3 s: accept is spinning" % spent
for s in conns:
    s.close()
out = None
for _ in range(100):
    out = subprocess.run([ctl, "-r", rt, "status"], capture_output=True, text=True, timeout=10)
    if out.returncode == 0:
        break
    time.sleep(0.1)
assert out.returncode == 0, "no service after the connections closed: " + out.stderr
PY
ok "EMFILE pauses accept; service resumes"
grep -q "paus" "$T/daemon.log" || fail "no log line says accept paused"
ok "the pause is logged"

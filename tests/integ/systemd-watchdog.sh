#!/bin/sh
# msptid under a (fake) systemd: a real daemon with NOTIFY_SOCKET pointing
# at a datagram socket of ours.  With WATCHDOG_USEC set it says READY=1
# and then keeps sending WATCHDOG=1 from its event loop; without it, it
# sends none.
. "$(dirname "$0")/lib.sh"

if ! grep -q '^#define ENABLE_SYSTEMD 1' "$top_builddir/config.h"; then
	echo "SKIP: built without libsystemd (no sd_notify)"
	exit 77
fi

# listen SOCKET OUT SECONDS WANT: records datagrams on SOCKET into OUT,
# one per line, until WANT WATCHDOG=1 pings came or SECONDS passed.
listen() {
	python3 - "$@" <<'PY' &
import socket, sys, time
path, out, secs, want = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
open(out + ".up", "w").close()
end = time.monotonic() + secs
pings = 0
with open(out, "w") as f:
    while time.monotonic() < end and (want == 0 or pings < want):
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            break
        for line in msg.split("\n"):
            f.write(line + "\n")
            f.flush()
            pings += line == "WATCHDOG=1"
PY
	PIDS="$PIDS $!"
	LISTENER=$!
	wait_until 10 test -e "$2.up" || fail "notify listener did not start"
}

# 1. A watchdog of 0.4 s: pings every 0.2 s, after READY=1.
listen "$T/notify" "$T/msgs" 30 3
export NOTIFY_SOCKET="$T/notify" WATCHDOG_USEC=400000
start_daemon
unset NOTIFY_SOCKET WATCHDOG_USEC
wait "$LISTENER"
grep -q '^READY=1$' "$T/msgs" || fail "no READY=1: $(cat "$T/msgs")"
n=$(grep -c '^WATCHDOG=1$' "$T/msgs")
[ "$n" -ge 3 ] || fail "only $n WATCHDOG=1 pings: $(cat "$T/msgs")"
ready=$(grep -n '^READY=1$' "$T/msgs" | head -1 | cut -d: -f1)
first=$(grep -n '^WATCHDOG=1$' "$T/msgs" | head -1 | cut -d: -f1)
[ "$first" -gt "$ready" ] || fail "WATCHDOG=1 before READY=1"
grep -q 'watchdog: pinging systemd every 200 ms' "$T/daemon.log" ||
	fail "daemon did not log its watchdog period"
"$MSPTICTL" -r "$RT" status >/dev/null || fail "status with the watchdog on"
stop_daemon
ok "watchdog pings from the event loop"

# 2. No WATCHDOG_USEC: READY=1 and no pings.
rm -f "$T/notify" "$T/msgs2.up"
listen "$T/notify" "$T/msgs2" 2 0
export NOTIFY_SOCKET="$T/notify"
start_daemon
unset NOTIFY_SOCKET
wait "$LISTENER"
grep -q '^READY=1$' "$T/msgs2" || fail "no READY=1 without a watchdog"
! grep -q '^WATCHDOG=1$' "$T/msgs2" || fail "pings without WATCHDOG_USEC"
stop_daemon
ok "no watchdog asked, none sent"

#!/bin/sh
# Run by scripts/ci-debian.sh inside the throw-away copy of the system
# (chroot, fresh /run and /tmp): installs the .debs in /tmp/debs and
# checks them as a new user would use them, then purges them.  Every
# process started is killed by pid.
set -eu
cd /tmp/debs
PIDS=""
cleanup() {
	for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f /tmp/msptid.log ] && sed 's/^/  msptid: /' /tmp/msptid.log >&2; exit 1; }
ok() { echo "ok - $*"; }
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
unset MSPTID_RUNTIME_DIR LD_PRELOAD PYTHONPATH 2>/dev/null || true

dpkg -i ./*.deb >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -i"; }
dpkg-query -W -f='${Package} ${Version} ${Status}\n' msptid msptictl \
    libmspti0 libmspti-dev libnpusim0 libnpusim-dev npusim python3-mspti |
    sed 's/^/  /'
ok "all packages install (maintainer scripts ran)"

getent group mspti >/dev/null || fail "no group mspti after install"
sock=/lib/systemd/system/msptid.socket
svc=/lib/systemd/system/msptid.service
[ -f "$sock" ] && [ -f "$svc" ] || fail "units not in /lib/systemd/system"
rundir=$(sed -n 's|^ListenStream=\(.*\)/ctl\.sock$|\1|p' "$sock")
[ -d "$rundir" ] || fail "postinst did not create $rundir (tmpfiles.d)"
user=$(sed -n 's/^User=//p' "$svc")
if [ -n "$user" ]; then
	getent passwd "$user" >/dev/null || fail "no user $user (sysusers.d)"
	[ "$(stat -c %U "$rundir")" = "$user" ] || fail "$rundir not owned by $user"
fi
[ -L /etc/systemd/system/sockets.target.wants/msptid.socket ] ||
	fail "msptid.socket not enabled"
ok "group mspti${user:+, user $user}, $rundir, msptid.socket enabled"
systemd-analyze verify --man=no "$sock" "$svc" >/tmp/verify.out 2>&1 ||
	{ cat /tmp/verify.out; fail "systemd-analyze verify"; }
ok "systemd-analyze verify accepts msptid.socket and msptid.service"

# What systemd does: bind the socket unit's ListenStream= paths, start the
# service's ExecStart= (as its User=) on the first connection with them.
exec_start=$(sed -n 's/^ExecStart=//p' "$svc")
listen=""
for a in $(sed -n 's/^ListenStream=//p' "$sock"); do listen="$listen -l $a"; done
as_user=""
[ -z "$user" ] || as_user="setpriv --reuid=$user --regid=$user --init-groups"
# shellcheck disable=SC2086
systemd-socket-activate $listen $as_user $exec_start >/tmp/msptid.log 2>&1 &
PIDS="$PIDS $!"
n=0
until [ -S "$rundir/ctl.sock" ] && [ -S "$rundir/agent.sock" ]; do
	n=$((n + 1)); [ $n -lt 200 ] || fail "sockets not bound"; sleep 0.05
done

# The agent by name, as README says; its connection starts the daemon.
MSPTI_JOB_ID=debjob LD_PRELOAD=libmspti.so npusim-train --steps 1000000 \
    >/tmp/train.out 2>&1 &
TP=$!
PIDS="$PIDS $TP"
n=0
until msptictl --json list 2>/dev/null | grep -q "\"pid\":$TP,"; do
	kill -0 "$TP" 2>/dev/null || fail "npusim-train exited: $(cat /tmp/train.out)"
	n=$((n + 1)); [ $n -lt 400 ] || fail "npusim-train did not register"
	sleep 0.05
done
msptictl status | sed 's/^/  /'
ok "socket-activated msptid; LD_PRELOAD=libmspti.so npusim-train registers"

msptictl start --pid "$TP" --duration 1s --output /tmp/cap.mspti --wait \
    >/tmp/start.out 2>&1 || { cat /tmp/start.out; fail "capture"; }
msptictl report /tmp/cap.mspti >/tmp/report.out 2>&1 || { cat /tmp/report.out; fail "report"; }
grep -q . /tmp/report.out || fail "empty report"
ok "capture and report with the installed msptictl"

# msptictl run finds the agent (libmspti.so) and the daemon in the
# installed layout.
msptictl run --output /tmp/run.mspti -- npusim-train --steps 20 \
    >/tmp/run.out 2>&1 || { cat /tmp/run.out; fail "msptictl run"; }
msptictl report /tmp/run.mspti >/tmp/report2.out 2>&1 ||
	{ cat /tmp/report2.out; fail "report of msptictl run's capture"; }
ok "msptictl run -- npusim-train captures from the first call"

LD_PRELOAD=libmspti.so /usr/bin/python3 -c '
import mspti, sys
assert mspti.__file__.startswith("/usr/lib/python3/dist-packages/"), mspti.__file__
' || fail "python3 -c 'import mspti'"
ok "python3 imports mspti from /usr/lib/python3/dist-packages"

cat >/tmp/cann.c <<'EOF'
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <mspti/mspti.h>
#include <stdio.h>
int main(void)
{
	uint32_t n = 0;
	if (aclInit(NULL) != ACL_SUCCESS || aclrtGetDeviceCount(&n) != ACL_SUCCESS)
		return 1;
	printf("%u devices\n", n);
	return aclFinalize() == ACL_SUCCESS ? 0 : 1;
}
EOF
# shellcheck disable=SC2046
cc -o /tmp/cann /tmp/cann.c $(pkg-config --cflags --libs npusim libmspti) \
    -lascendcl -lhccl >/tmp/cc.out 2>&1 || { cat /tmp/cc.out; fail "build against the -dev packages"; }
/tmp/cann >/tmp/cann.out || fail "CANN-style program: $(cat /tmp/cann.out)"
ok "a CANN-style program builds with pkg-config npusim libmspti and runs"

bash -c '. /usr/share/bash-completion/bash_completion && __load_completion msptictl &&
    complete -p msptictl' >/dev/null 2>&1 || fail "bash completion not loaded"
ok "bash completion for msptictl loads"

cleanup
PIDS=""
dpkg --purge msptid msptictl libmspti-dev libmspti0 libnpusim-dev npusim \
    python3-mspti libnpusim0 >/tmp/purge.log 2>&1 || { cat /tmp/purge.log; fail "purge"; }
left=""
while read -r f; do
	[ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done <files
[ -z "$left" ] || fail "left after purge:$left"
ok "purge removes every packaged file"

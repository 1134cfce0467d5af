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
DP=$!
PIDS="$PIDS $DP"
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

# doc/export.md: a two-rank job exported for msprof-analyze, one
# <name>_ascend_pt tree per rank with the files cluster analysis reads.
msptictl run --output /tmp/dist.mspti -- npusim-dist --ranks 2 --steps 3 \
    >/tmp/dist.out 2>&1 || { cat /tmp/dist.out; fail "msptictl run -- npusim-dist"; }
msptictl export /tmp/dist.mspti --format ascend-pt -o /tmp/apt \
    >/tmp/apt.out 2>&1 || { cat /tmp/apt.out; fail "export --format ascend-pt"; }
for r in 0 1; do
	d=$(ls -d /tmp/apt/*_ascend_pt/profiler_info_$r.json 2>/dev/null) ||
		fail "no rank $r in the ascend-pt tree: $(ls /tmp/apt)"
	d=${d%/*}
	for f in step_trace_time.csv communication.json communication_matrix.json \
	    kernel_details.csv trace_view.json op_statistic.csv; do
		[ -s "$d/ASCEND_PROFILER_OUTPUT/$f" ] || fail "rank $r: no $f"
	done
	[ -s "$d/profiler_metadata.json" ] || fail "rank $r: no profiler_metadata.json"
done
ok "export --format ascend-pt writes a tree per rank for msprof-analyze"

# doc/metrics.md: the package's drop-in turns the Prometheus endpoint on.
# Start the service as its unit and the drop-in say (the drop-in's
# ExecStart=), and scrape it: with Debian's prometheus where installed.
dropin=/usr/share/doc/msptid/examples/msptid-metrics.conf
[ -f "$dropin" ] || fail "no $dropin (doc/metrics.md)"
mkdir -p /etc/systemd/system/msptid.service.d
cp "$dropin" /etc/systemd/system/msptid.service.d/metrics.conf
systemd-analyze security --offline=true --no-pager msptid.service \
    >/tmp/sec.out 2>&1 || { cat /tmp/sec.out; fail "systemd-analyze security"; }
grep -q '^✗ RestrictAddressFamilies=~AF_(INET|INET6) ' /tmp/sec.out ||
	fail "with the drop-in msptid.service still cannot open inet sockets"
grep -q '^✗ PrivateNetwork= ' /tmp/sec.out ||
	fail "with the drop-in msptid.service is still off the host network"
kill "$DP" 2>/dev/null; wait "$DP" 2>/dev/null || true
rm -f "$rundir"/*.sock
mexec=$(sed -n 's/^ExecStart=\(..*\)$/\1/p' "$dropin")
# shellcheck disable=SC2086
systemd-socket-activate $listen $as_user $mexec >/tmp/msptid.log 2>&1 &
DP=$!
PIDS="$PIDS $DP"
n=0
until [ -S "$rundir/ctl.sock" ]; do
	n=$((n + 1)); [ $n -lt 200 ] || fail "sockets not bound again"; sleep 0.05
done
msptictl status >/dev/null 2>&1 || fail "msptid with the drop-in did not start"
scrape() {
	/usr/bin/python3 - "$@" <<'PY'
import sys, time, urllib.request
want = sys.argv[1:]
deadline = time.time() + 30
while True:
    try:
        with urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=5) as r:
            body = r.read().decode()
        if all(any(l.startswith(w) and not l.endswith(" 0") for l in body.splitlines())
               for w in want):
            sys.exit(0)
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("metrics: %s not all there" % " ".join(want))
    time.sleep(0.2)
PY
}
# The training job registers again with the restarted daemon.
scrape "mspti_agents " 'mspti_device_utilization_ratio{device="0"}' ||
	fail "scrape of http://127.0.0.1:9464/metrics"
ok "the drop-in's msptid serves http://127.0.0.1:9464/metrics (agents, device utilization)"
if [ -x /usr/bin/prometheus ]; then
	cat >/tmp/prometheus.yml <<'YML'
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: msptid
    static_configs:
      - targets: ['127.0.0.1:9464']
YML
	/usr/bin/prometheus --config.file=/tmp/prometheus.yml \
	    --storage.tsdb.path=/tmp/tsdb --web.listen-address=127.0.0.1:9090 \
	    >/tmp/prom.log 2>&1 &
	PIDS="$PIDS $!"
	/usr/bin/python3 - <<'PY' || { tail -n 20 /tmp/prom.log; fail "prometheus query"; }
import json, sys, time, urllib.parse, urllib.request
deadline = time.time() + 60
q = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode(
    {"query": 'mspti_device_utilization_ratio{device="0"}'})
while True:
    try:
        with urllib.request.urlopen(q, timeout=5) as r:
            if json.load(r)["data"]["result"]:
                sys.exit(0)
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("no mspti_device_utilization_ratio series in prometheus")
    time.sleep(0.5)
PY
	ok "Debian's prometheus scrapes it: mspti_device_utilization_ratio{device=\"0\"}"
fi
rm -rf /etc/systemd/system/msptid.service.d

LD_PRELOAD=libmspti.so /usr/bin/python3 -c '
import mspti, sys
assert mspti.__file__.startswith("/usr/lib/python3/dist-packages/"), mspti.__file__
' || fail "python3 -c 'import mspti'"
ok "python3 imports mspti from /usr/lib/python3/dist-packages"

# doc/torch.md: the packaged ResNet-50 example on Debian's PyTorch, run and
# reported as README says; Conv2D is the top kernel.
ex=/usr/share/doc/python3-mspti/examples/resnet50_infer.py
[ -f "$ex" ] || fail "no $ex"
if /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
	(cd /tmp && msptictl run --output /tmp/torch.mspti --report -- \
	    /usr/bin/python3 "$ex" --steps 2) >/tmp/torch.out 2>&1 ||
		{ cat /tmp/torch.out; fail "msptictl run --report -- python3 $ex"; }
	top=$(sed -n '/^== Top kernels/{n;n;p;}' /tmp/torch.out | awk '{print $2}')
	[ "$top" = Conv2D ] || { cat /tmp/torch.out; fail "top kernel '$top', not Conv2D"; }
	ok "msptictl run --report -- python3 resnet50_infer.py: Conv2D on top"
else
	echo "skip - python3-torch/python3-torchvision not installed: no ResNet-50 run"
fi

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

#!/bin/sh
# Debian's real prometheus server scrapes a real msptid (--metrics-listen)
# while a real npusim-train runs with the agent preloaded and a session
# captures it; its HTTP API then has a device utilization series and the
# loss counters, with plausible values.
. "$(dirname "$0")/lib.sh"

PROM=$(command -v prometheus || true)
[ -x /usr/bin/prometheus ] && PROM=/usr/bin/prometheus
if [ -z "$PROM" ]; then
	echo "SKIP: no prometheus binary (apt-get install prometheus)"
	exit 77
fi

NPUSIM_SHM_PREFIX="mspti-prom-$$"
export NPUSIM_SHM_PREFIX
unset NPUSIM_TIME_SCALE NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK || true
PROM_PID=""
prom_cleanup() {
	[ -n "$PROM_PID" ] && kill -9 "$PROM_PID" 2>/dev/null
	rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-*
	cleanup
}
trap prom_cleanup EXIT
TRAIN="$top_builddir/sim/.libs/npusim-train"
LIBDIR="$top_builddir/sim/.libs"

start_daemon --metrics-listen 127.0.0.1:0
wait_until 10 grep -q "metrics: listening on 127.0.0.1 port" "$T/daemon.log" ||
	fail "no metrics port logged"
MPORT=$(sed -n 's/.*metrics: listening on 127.0.0.1 port \([0-9]*\).*/\1/p' "$T/daemon.log" | head -1)

LD_LIBRARY_PATH="$LIBDIR" $WITH_AGENT "$TRAIN" --steps 0 >"$T/train.out" 2>&1 &
TP=$!
PIDS="$PIDS $TP"
wait_until 20 sh -c "[ \$($MSPTICTL -r $RT --json list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') -ge 1 ]" ||
	fail "agent did not register"
"$MSPTICTL" -r "$RT" --json start --pid "$TP" --output "$T/cap.mspti" \
    >"$T/start.json" 2>&1 || fail "start: $(cat "$T/start.json")"
SID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session"])' "$T/start.json")

cat >"$T/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: msptid
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
YML

# prometheus cannot report a port it chose: try random high ports.
for _ in 1 2 3 4 5 6 7 8; do
	PPORT=$(python3 -c 'import random; print(random.randint(20000, 60000))')
	"$PROM" --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	    --web.listen-address="127.0.0.1:$PPORT" >"$T/prom.log" 2>&1 &
	PROM_PID=$!
	if wait_until 30 python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PPORT/-/ready', timeout=2)" 2>/dev/null; then
		break
	fi
	kill -9 "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null; PROM_PID=""
done
[ -n "$PROM_PID" ] || { cat "$T/prom.log" >&2; fail "prometheus never became ready"; }
ok "prometheus up on port $PPORT scraping msptid on $MPORT"

python3 - "$PPORT" "$TP" <<'PY' || { tail -20 "$T/prom.log" >&2; fail "prometheus queries wrong"; }
import json, sys, time, urllib.parse, urllib.request
port, pid = sys.argv[1], sys.argv[2]
def q(expr):
    u = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(u, timeout=10) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    return d["data"]["result"]
deadline = time.time() + 60
while True:
    util = q('mspti_device_utilization_ratio{device="0"}')
    rec = q('mspti_session_records_written_total')
    if util and rec and float(rec[0]["value"][1]) > 0:
        break
    assert time.time() < deadline, "no series scraped: util=%r rec=%r" % (util, rec)
    time.sleep(0.5)
up = q('up{job="msptid"}')
assert up and up[0]["value"][1] == "1", up
u = float(util[0]["value"][1])
assert 0 <= u <= 1, util
assert util[0]["metric"]["job"] == "msptid"   # the scrape job's label
lost = q('mspti_records_lost_total')
stages = {r["metric"]["stage"]: float(r["value"][1]) for r in lost}
assert "agent_ring" in stages and "device_channel" in stages, stages
assert all(v >= 0 for v in stages.values()), stages
# A counter: rate() over it is defined and not negative.
r = q('rate(mspti_records_lost_total{stage="agent_ring"}[5s])')
assert all(float(x["value"][1]) >= 0 for x in r), r
rss = q('mspti_process_resident_memory_bytes{pid="%s"}' % pid)
assert rss and float(rss[0]["value"][1]) > 1 << 20, rss
print("util", u, "losses", stages)
PY
ok "prometheus has the device utilization series and the loss counters"

"$MSPTICTL" -r "$RT" stop "$SID" >/dev/null 2>&1 || fail "stop failed"
kill -TERM "$PROM_PID"; wait "$PROM_PID" 2>/dev/null; PROM_PID=""

#!/bin/sh
# msptid --metrics-listen against a real daemon and a real npusim-train
# with the agent preloaded: GET /metrics (python3 urllib) is Prometheus text
# format 0.0.4 (every sample has a TYPE, names are legal, values parse),
# carries the device, process and loss series; anything but GET /metrics is
# refused; a bad address is a one-line error.
. "$(dirname "$0")/lib.sh"

NPUSIM_SHM_PREFIX="mspti-promfmt-$$"
export NPUSIM_SHM_PREFIX
unset NPUSIM_TIME_SCALE NPUSIM_SLOW_RANK NPUSIM_SLOW_LINK || true
shm_cleanup() { rm -f /dev/shm/"$NPUSIM_SHM_PREFIX"-*; cleanup; }
trap shm_cleanup EXIT
TRAIN="$top_builddir/sim/.libs/npusim-train"
LIBDIR="$top_builddir/sim/.libs"

"$MSPTID" --foreground --runtime-dir "$RT.bad" --metrics-listen nonsense \
    >"$T/bad.out" 2>&1
[ $? -ne 0 ] && grep -q "metrics-listen" "$T/bad.out" ||
	fail "bad --metrics-listen accepted: $(cat "$T/bad.out")"
ok "bad --metrics-listen is an error"

start_daemon --metrics-listen 127.0.0.1:0
wait_until 10 grep -q "metrics: listening on 127.0.0.1 port" "$T/daemon.log" ||
	fail "no metrics port logged"
PORT=$(sed -n 's/.*metrics: listening on 127.0.0.1 port \([0-9]*\).*/\1/p' "$T/daemon.log" | head -1)
[ -n "$PORT" ] && [ "$PORT" -gt 0 ] || fail "bad port '$PORT'"

LD_LIBRARY_PATH="$LIBDIR" $WITH_AGENT "$TRAIN" --steps 0 >"$T/train.out" 2>&1 &
TP=$!
PIDS="$PIDS $TP"

python3 - "$PORT" "$TP" <<'PY' || fail "metrics endpoint wrong"
import re, sys, time, urllib.request, urllib.error
port, pid = sys.argv[1], sys.argv[2]
url = "http://127.0.0.1:%s" % port
name_re = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
sample_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')

def scrape():
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        assert r.status == 200
        ct = r.headers["Content-Type"]
        assert ct.startswith("text/plain; version=0.0.4"), ct
        return r.read().decode()

def parse(text):
    types, samples = {}, []
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, n, t = line.split(" ", 3)
            assert name_re.match(n), line
            assert t in ("gauge", "counter"), line
            assert n not in types, "TYPE twice: " + line
            types[n] = t
            continue
        if line.startswith("# HELP "):
            assert name_re.match(line.split(" ")[2]), line
            continue
        assert not line.startswith("#"), line
        m = sample_re.match(line)
        assert m, "bad sample line: %r" % line
        n, labels, v = m.group(1), m.group(3), m.group(4)
        assert n in types, "sample without TYPE: " + line
        lab = {}
        if labels:
            pos = 0
            for lm in label_re.finditer(labels):
                assert lm.start() == pos, line
                lab[lm.group(1)] = lm.group(2)
                pos = lm.end()
            assert pos == len(labels), line
        val = float(v)
        if types[n] == "counter":
            assert n.endswith("_total") and val >= 0, line
        samples.append((n, lab, val))
    return types, samples

# Wait (bounded) for the device and the process to be sampled.
deadline = time.time() + 30
while True:
    types, s = parse(scrape())
    util = [x for x in s if x[0] == "mspti_device_utilization_ratio" and x[1].get("device") == "0"]
    cpu = [x for x in s if x[0] == "mspti_process_cpu_usage_ratio" and x[1].get("pid") == pid]
    if util and cpu:
        break
    assert time.time() < deadline, "device 0 / pid %s never appeared" % pid
    time.sleep(0.2)

get = lambda n, **kw: [v for (m, l, v) in s if m == n and all(l.get(k) == x for k, x in kw.items())]
assert 0 <= util[0][2] <= 1, util
tot = get("mspti_device_memory_total_bytes", device="0")
used = get("mspti_device_memory_used_bytes", device="0")
assert tot and used and 0 <= used[0] <= tot[0] and tot[0] > 1 << 20, (tot, used)
assert get("mspti_device_power_watts", device="0")[0] > 0
assert get("mspti_device_temperature_celsius", device="0")[0] > 0
assert get("mspti_process_resident_memory_bytes", pid=pid)[0] > 1 << 20
info = [l for (m, l, v) in s if m == "mspti_agent_info" and l.get("pid") == pid]
assert info and "rank" in info[0] and "job" in info[0], info
assert get("mspti_agents")[0] >= 1
stages = {l["stage"] for (m, l, v) in s if m == "mspti_records_lost_total"}
assert {"agent_ring", "device_channel", "disk", "daemon_reject"} <= stages, stages
assert types["mspti_records_lost_total"] == "counter"
assert get("mspti_daemon_uptime_seconds")[0] >= 0
assert get("mspti_daemon_resident_memory_bytes")[0] > 0
assert len(get("mspti_sessions")) == 5
# Nothing a local user could not see already: no command lines or paths.
text = scrape()
assert "npusim-train" not in text and "/tmp/" not in text, "leaks exe or path"

# Read-only: other paths 404, other methods 405.
for path, method, code in (("/", "GET", 404), ("/metrics/x", "GET", 404),
                           ("/metrics", "POST", 405), ("/metrics", "PUT", 405)):
    req = urllib.request.Request(url + path, method=method,
                                 data=b"x" if method != "GET" else None)
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("%s %s answered 200" % (method, path))
    except urllib.error.HTTPError as e:
        assert e.code == code, (method, path, e.code)
print("scraped %d samples" % len(s))
PY
ok "GET /metrics is valid exposition format with device, process and loss series"
ok "other paths and methods refused"
kill -0 "$DAEMON_PID" || fail "msptid died"

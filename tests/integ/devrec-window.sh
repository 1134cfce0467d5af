#!/bin/sh
# Device records of a session started and stopped while the job runs
# (LD_PRELOAD, npusim-dist, msptictl start --job --duration): every
# KERNEL, MEMCPY, MEMSET and HCCL record in the trace belongs to a call
# the trace holds (its correlation id, once).  Work the ranks queued
# before their capture began, and ran after, is not in the window; nor is
# work queued after it ended.  Every captured call has its device record,
# except the last ones of a rank, still queued on the device at the stop.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"

start_daemon
MSPTI_JOB_ID=winjob $WITH_AGENT "$DIST" --ranks 2 --steps 0 \
    >"$T/dist.out" 2>&1 &
APP=$!; PIDS="$PIDS $APP"
wait_until 30 job_agents_ge winjob 3 || fail "ranks did not register"
# Let the ranks run ahead: their device queues are busy when the
# capture starts.
sleep 0.3
$CTL start --job winjob --duration 1s --wait \
    --kinds api,kernel,memcpy,memset,hccl --output "$T/w.mspti" \
    >"$T/start.out" 2>&1 || fail "start: $(cat "$T/start.out")"
kill "$APP"
cat "$T/start.out"
"$DUMP" "$T/w.mspti" >"$T/w.jsonl" || fail "trace unreadable"
python3 - "$T/w.jsonl" <<'PY' >"$T/py.out" 2>&1 || fail "device records: $(tail -4 "$T/py.out")"
import collections, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
end, recs = lines[-1], lines[:-1]
assert end["end"] and not end["truncated"], end
# The ranks: the processes that launched work in the window (on a busy
# machine a rank may start capturing late; one is enough here).
ranks = sorted({r["pid"] for r in recs if r["type"] == "api" and
                r["name"] == "aclrtLaunchKernel"})
assert 1 <= len(ranks) <= 2, ranks
calls = {"memcpy": "aclrtMemcpy", "memset": "aclrtMemset",
         "kernel": "aclrtLaunchKernel", "hccl": "Hccl"}
total = 0
for pid in ranks:
    mine = [r for r in recs if r["pid"] == pid]
    api = {r["corr"]: r for r in mine if r["type"] == "api"}
    last_joined = 0
    for kind, prefix in calls.items():
        want = {c for c, a in api.items() if a["name"].startswith(prefix)}
        got = collections.Counter(r["corr"] for r in mine
                                  if r["type"] == kind)
        assert not set(got) - want, "rank pid %d: %d %s records without a "\
            "call in the trace (corr %s)" % (pid, sum(got[c] for c in
            set(got) - want), kind, sorted(set(got) - want)[:3])
        twice = [c for c, n in got.items() if n > 1]
        assert not twice, "pid %d: %s corr %s twice" % (pid, kind, twice[:3])
        total += len(got)
        if got:
            last_joined = max(last_joined, max(api[c]["ts"] for c in got))
    # A call without its device record: only after the last one that has
    # its record (queued on the device when the capture stopped).
    for kind, prefix in calls.items():
        got = {r["corr"] for r in mine if r["type"] == kind}
        for c, a in api.items():
            if a["name"].startswith(prefix) and c not in got:
                assert a["ts"] > last_joined, "pid %d: %s call corr %d "\
                    "lost in the middle of the window" % (pid, kind, c)
assert total > 50, total
print("ok", total, "device records, each of its own call")
PY
ok "$(cat "$T/py.out")"

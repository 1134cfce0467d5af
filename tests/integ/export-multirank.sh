#!/bin/sh
# Timeline exports of a real multi-rank capture (msptid, the agent in a
# 4-rank npusim-dist, msptictl run): correlation ids collide across ranks
# (each process counts from 1), so every check is against the ground truth
# of the trace file itself (trace-dump).  Chrome JSON is parsed with
# python3, Perfetto protobuf decoded with protoc and proto/perfetto.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
. "$(dirname "$0")/run-lib.sh"
s=${top_srcdir:-..}

start_daemon
cd "$T" || fail "cd"

# A capture shorter than the metrics tick (200 ms) still has each used
# device's metrics: a point when the session starts using the device and
# one at its end (it once had none when the run was quick).  Also when
# the device's page has no snapshot yet as the agent names the device
# (its process's sampler had not run; NPUSIM_TEST_METRICS_DELAY_MS holds
# back all but the last, at the device's close): the first point is
# taken once the page has one, at the latest when the trace closes (the
# daemon once took none then, and only the end point).
short_capture() {	# short_capture NAME STEPS [ENV...]
	n=$1 steps=$2; shift 2
	env "$@" $CTL run --output "$T/$n.mspti" -- "$DIST" --ranks 2 \
	    --steps "$steps" >"$T/$n.out" 2>"$T/$n.err" ||
		fail "run $n: $(cat "$T/$n.err")"
	"$DUMP" "$T/$n.mspti" >"$T/$n.jsonl" || fail "trace-dump $n"
	python3 - "$T/$n.jsonl" <<'PY' >"$T/$n.py" 2>&1 ||
import json, sys
dump = [json.loads(l) for l in open(sys.argv[1])][:-1]
used = {k["device"] for k in dump if k["type"] == "kernel"}
pts = {}
for c in dump:
    if c["type"] == "counter" and c["pid"] == 0:
        pts.setdefault(c["device"], set()).add(c["ts"])
assert used, "no kernels"
assert all(len(pts.get(d, ())) >= 2 for d in used), (used, pts)
PY
		fail "$n capture: $(cat "$T/$n.py")"
}
# First, while no device's page has a snapshot yet (the pages are this
# test's own, NPUSIM_SHM_PREFIX).
short_capture late 40 NPUSIM_TEST_METRICS_DELAY_MS=60000

$CTL run --output "$T/dist.mspti" -- "$DIST" --ranks 4 --steps 50 \
    >"$T/dist.out" 2>"$T/dist.err" || fail "run dist: $(cat "$T/dist.err")"
"$DUMP" "$T/dist.mspti" >"$T/dump.jsonl" || fail "trace-dump"

# Report: 4 ranks x 50 steps, and nothing for the launcher (no steps).
$CTL report --json "$T/dist.mspti" >"$T/rep.json" 2>"$T/rep.err" ||
	fail "report: $(cat "$T/rep.err")"
python3 - "$T/rep.json" <<'PY' || fail "report steps"
import json, sys
r = json.load(open(sys.argv[1]))
steps = r["steps"]
assert len(steps) == 200, "%d step rows" % len(steps)
assert sorted({x["Rank"] for x in steps}) == [0, 1, 2, 3], \
    sorted({x["Rank"] for x in steps})
PY
ok "report: 200 step rows for 4 ranks x 50 steps, none for the launcher"

# Each collective record carries its ordinal on the communicator, counted
# from the communicator's creation: every rank holds the same seqs, each
# once, and a rank's seqs rise with its collectives' start.
python3 - "$T/dump.jsonl" <<'PY' || fail "collective seq"
import collections, json, sys
dump = [json.loads(l) for l in open(sys.argv[1])][:-1]
for kind in ("hccl", "communication"):
    by = collections.defaultdict(list)
    for c in dump:
        if c["type"] == kind:
            by[(c["pid"], c["comm"])].append((c["ts"], c["seq"]))
    assert len(by) == 4, (kind, sorted(by))
    sets = set()
    for key, v in by.items():
        seqs = [q for _, q in sorted(v)]
        assert 0 not in seqs, (kind, key, seqs[:5])
        assert seqs == sorted(set(seqs)), (kind, key, seqs[:10])
        sets.add(tuple(seqs))
    assert len(sets) == 1, (kind, [s[:3] for s in sets])
PY
ok "collective records: the same seqs on every rank, in order"

# Launches are joined within their process: each worst-delay row's CPU
# runtime is that of its own rank's API call with that correlation id.
python3 - "$T/rep.json" "$T/dump.jsonl" <<'PY' || fail "launch join"
import json, sys
r = json.load(open(sys.argv[1]))
dump = [json.loads(l) for l in open(sys.argv[2])][:-1]
pid_of = {p["rank"]: p["pid"] for p in dump
          if p["type"] == "process" and p["rank"] >= 0}
api = {(a["pid"], a["corr"]): a["end"] - a["ts"] for a in dump
       if a["type"] == "api"}
rows = r["launch_outliers"]
assert rows
bad = [x for x in rows if abs(api[(pid_of[x["Rank"]], x["Correlation ID"])]
                              / 1e3 - x["CPU Runtime(us)"]) > 0.002]
assert not bad, "%d of %d rows joined to another process's API: %s" % (
    len(bad), len(rows), bad[:2])
PY
ok "report: launches joined by (process, correlation id)"

$CTL export "$T/dist.mspti" --format chrome -o "$T/x.json" ||
	fail "export chrome"
python3 - "$T/x.json" "$T/dump.jsonl" <<'PY' >"$T/chrome.out" 2>&1 ||
import collections, json, re, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
dump = [json.loads(l) for l in open(sys.argv[2])][:-1]
pname = {e["pid"]: e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "process_name"}
# The rank of each exported process, from its name.
def rank_of(pid):
    m = re.match(r"Rank (\d+) ", pname.get(pid, ""))
    return int(m.group(1)) if m else None
ranks = {p["pid"]: p["rank"] for p in dump if p["type"] == "process"}

# Tracks: no fake NPU for pinned host memory, no "Rank -1" anything.
for pid, n in pname.items():
    assert "4294967295" not in n, n
    assert "Rank -1" not in n, n
# Pinned host memory: a counter on each rank's host process.
host_mem = {e["pid"] for e in ev if e["ph"] == "C" and
            "Pinned Host Memory" in e["name"]}
assert {ranks[p] for p in host_mem} == {0, 1, 2, 3}, \
    [pname[p] for p in host_mem]
# Device metrics (pid 0 in the trace) on their device's track, not a rank's.
metric_devs = {c["device"] for c in dump if c["type"] == "counter" and
               c["pid"] == 0}
assert metric_devs, "no device metrics in the capture"
seen = collections.defaultdict(set)
for e in ev:
    if e["ph"] == "C" and e["name"].startswith("npu."):
        seen[pname[e["pid"]]].add(e["name"])
assert sorted(seen) == sorted("NPU %d" % dv for dv in metric_devs), \
    sorted(seen)
# No step slice at timestamp 0 for a process without steps, and nothing
# of the launcher (no rank) clamped to 0: the capture's first record is a
# rank's aclrtSetDevice.
assert not [e for e in ev if e["ph"] == "X" and e.get("cat") == "step" and
            e["name"].startswith("Step -1")]
norank = {pid for pid, n in pname.items() if n.startswith("Process ")}
# The launcher is exported when it has records of its own (its pid's
# metrics, when a tick fell in its life: not every run).
launcher = {p["pid"] for p in dump if p["type"] == "process" and p["rank"] < 0}
if [r for r in dump if r.get("pid") in launcher and
    r["type"] not in ("process", "session")]:
    assert norank, pname
assert not [e for e in ev if e.get("pid") in norank and e["ph"] != "M" and
            e["ts"] == 0], [e for e in ev if e.get("pid") in norank][:3]

# Flows: one start and one finish per id, each bound to a slice enclosing
# it on its own pid/tid, both ends in one rank and one correlation id.
slices = collections.defaultdict(list)
for e in ev:
    if e["ph"] == "X":
        slices[(e["pid"], e["tid"])].append(e)
def enclosing(f):
    for x in slices[(f["pid"], f["tid"])]:
        if x["ts"] <= f["ts"] <= x["ts"] + x["dur"]:
            return x
    return None
starts, ends = collections.defaultdict(list), collections.defaultdict(list)
for e in ev:
    if e["ph"] in "sf":
        assert e.get("cat"), e
        (starts if e["ph"] == "s" else ends)[e["id"]].append(e)
        if e["ph"] == "f":
            assert e.get("bp") == "e", e
assert len(starts) >= 4 * 50 * 9, len(starts)
bad_rank = 0
# Every launch of the run has its device record: one finish per start;
# no id finishes twice or without a start.
assert len(ends) == len(starts), (len(ends), len(starts))
for fid, ss in starts.items():
    assert len(ss) == 1, "flow id %s starts %d times" % (fid, len(ss))
    assert len(ends.get(fid, [])) <= 1, "flow id %s: %d finishes" % (
        fid, len(ends.get(fid, [])))
    if fid not in ends:
        continue
    sx, fx = enclosing(ss[0]), enclosing(ends[fid][0])
    assert sx is not None and fx is not None, (ss, ends[fid])
    assert sx["args"]["correlation_id"] == fx["args"]["correlation_id"], \
        (sx, fx)
    if rank_of(sx["pid"]) != rank_of(fx["pid"]):
        bad_rank += 1
assert bad_rank == 0, "%d flows link two ranks" % bad_rank
assert set(ends) <= set(starts)

# MSTX ranges paired within their process: per process, the durations of
# the exported step slices are those of the trace's own START/END pairs.
truth = collections.defaultdict(list)
open_ = {}
for m in dump:
    if m["type"] != "marker" or m["source"] != 0:
        continue
    key = (m["pid"], m["id"], m["source"])
    if m["flag"] == 2:
        open_[key] = m["ts"]
    elif m["flag"] == 4 and key in open_:
        truth[m["pid"]].append(m["ts"] - open_.pop(key))
got = collections.defaultdict(list)
for e in ev:
    if e["ph"] == "X" and e.get("cat") == "marker" and e["name"] == "step":
        got[e["pid"]].append(round(e["dur"] * 1000))
assert sorted(truth) == sorted(got), (sorted(truth), sorted(got))
for pid in truth:
    assert len(truth[pid]) == 50, len(truth[pid])
    assert sorted(truth[pid]) == sorted(got[pid]), pid
print("ok", len(starts), "flows")
PY
	fail "chrome: $(tail -5 "$T/chrome.out")"
ok "chrome: $(cat "$T/chrome.out")"

$CTL export "$T/dist.mspti" --format perfetto -o "$T/x.pb" ||
	fail "export perfetto"
python3 "$s/tests/integ/perfetto_resolve.py" inflate "$T/x.pb" "$T/x.raw" ||
	fail "inflate"
protoc --decode perfetto.protos.Trace -I"$s/proto/perfetto" \
	"$s/proto/perfetto/trace.proto" <"$T/x.raw" >"$T/x.txt" ||
	fail "protoc --decode"
python3 - "$T/x.txt" "$T/dump.jsonl" "$T/x.pb" "$s" <<'PY' >"$T/pf.out" 2>&1 ||
import collections, json, re, sys
sys.path.insert(0, sys.argv[4] + "/tests/integ")
import perfetto_resolve as pr

t = pr.parse(open(sys.argv[1]))
dump = [json.loads(l) for l in open(sys.argv[2])][:-1]
ranks = {p["pid"]: p["rank"] for p in dump if p["type"] == "process"}
pk = t["packet"]
one = pr.one

# Timestamps are declared CLOCK_REALTIME; each track's sequence maps its
# incremental clock to it (perfetto_resolve checks every event's).
snaps = [p["clock_snapshot"][0] for p in pk if "clock_snapshot" in p]
assert snaps and one(snaps[0], "primary_trace_clock") == \
    "BUILTIN_CLOCK_REALTIME", snaps[:1]
tracks, resolved = pr.events(sys.argv[3], sys.argv[4])
tracks = {}
for p in pk:
    for td in p.get("track_descriptor", []):
        tracks[one(td, "uuid")] = td
proc_of = {}
for u, td in tracks.items():
    if "process" in td:
        proc_of[u] = td["process"][0]
by_pid = {one(d, "pid"): d for d in proc_of.values()}
def process(td):
    # A thread track belongs to its process by pid, others by parent.
    while "process" not in td:
        if "thread" in td:
            return by_pid[one(td["thread"][0], "pid")]
        td = tracks[one(td, "parent_uuid")]
    return td["process"][0]
def rank_of(td):
    m = re.match(r"Rank (\d+) ", one(process(td), "process_name", ""))
    return int(m.group(1)) if m else None

events = [(None, e) for e in resolved]
# Thread tracks of host work carry their thread (pid, tid).
api_tracks = {e["track_uuid"] for p, e in events
              if e["name"] == "aclrtLaunchKernel"}
assert api_tracks
for u in api_tracks:
    th = tracks[u].get("thread", [None])[0]
    assert th is not None, tracks[u]
    assert one(th, "pid") in ranks and one(th, "tid") > 0, th
    assert one(th, "pid") == one(process(tracks[u]), "pid"), th
# Counter units in the unit fields, not the name.
counters = [td for td in tracks.values() if "counter" in td]
assert counters
for td in counters:
    assert "(" not in one(td, "name"), one(td, "name")
mem = [td for td in counters if "Memory" in one(td, "name")]
assert mem and all(one(td["counter"][0], "unit") == "UNIT_SIZE_BYTES"
                   for td in mem), mem[:1]
# Flow ids: unique, each start has its one end in the same rank.
fstart, fend = {}, {}
for p, e in events:
    for f in e.get("flow_ids", []):
        assert f not in fstart, "flow %d starts twice" % f
        fstart[f] = e
    for f in e.get("terminating_flow_ids", []):
        assert f not in fend, "flow %d ends twice" % f
        fend[f] = e
assert len(fstart) >= 4 * 50 * 9 and set(fend) <= set(fstart) and \
    len(fend) == len(fstart), (len(fstart), len(fend))
cross = sum(1 for f in fend
            if rank_of(tracks[fstart[f]["track_uuid"]]) !=
            rank_of(tracks[fend[f]["track_uuid"]]))
assert cross == 0, "%d flows link two ranks" % cross
# Slices carry the args of the Chrome export as debug annotations: both
# ends of a flow have the same correlation id.
def corr(e):
    return [e["args"]["correlation_id"]] if "correlation_id" in e["args"] \
        else []
for f in fend:
    assert corr(fstart[f]) == corr(fend[f]) and corr(fend[f]), \
        (fstart[f], fend[f])
print("ok", len(fstart), "flows,", len(tracks), "tracks")
PY
	fail "perfetto: $(tail -5 "$T/pf.out")"
ok "perfetto: $(cat "$T/pf.out")"
$CTL export "$T/dist.mspti" --format csv -o "$T/csv" || fail "export csv"
python3 - "$T/csv/op_summary.csv" "$T/dump.jsonl" <<'PY' || fail "op_summary.csv"
import collections, csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
dump = [json.loads(l) for l in open(sys.argv[2])][:-1]
kernels = [k for k in dump if k["type"] == "kernel"]
assert len(rows) == len(kernels), (len(rows), len(kernels))
assert sorted({int(r["Rank"]) for r in rows}) == [0, 1, 2, 3]
# Task Wait Time: the gap since the previous task of the same stream of the
# same rank, never another rank's.
from decimal import Decimal as D   # absolute us do not fit a double
last = {}
for r in rows:
    key = (r["Rank"], r["Device_id"], r["Stream ID"])
    s, d = D(r["Task Start Time(us)"]), D(r["Task Duration(us)"])
    want = max(D(0), s - last[key]) if key in last else D(0)
    assert abs(D(r["Task Wait Time(us)"]) - want) <= D("0.002"), (r, want)
    last[key] = s + d
PY
ok "csv: op_summary has every kernel, waits per (rank, stream)"

short_capture short 2
ok "a short capture has its devices' metrics (start and end points), also when a device's page fills late"
echo "export-multirank: all passed"

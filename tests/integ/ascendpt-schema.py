#!/usr/bin/env python3
"""Checks an `msptictl export --format ascend-pt` tree against the format
msprof-analyze reads (names, columns, keys, types, units from
shared/docs/ASCEND_PT.md, restated in doc/export.md), and against the
capture it came from (trace-dump's JSON lines and `report --json`).

usage: ascendpt-schema.py ROOT DUMP.jsonl REPORT.json RANKS STEPS
Prints one summary line; any failed check raises AssertionError.
"""
import collections
import csv
import json
import os
import re
import stat
import sys
from decimal import Decimal as D

root, dump_path, report_path = sys.argv[1:4]
NRANKS, NSTEPS = int(sys.argv[4]), int(sys.argv[5])

# ---- the format, as documented ----
KERNEL_COLS = [
    "Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type",
    "OP State", "Accelerator Core", "Start Time(us)", "Duration(us)",
    "Wait Time(us)", "Block Dim", "Mix Block Dim", "HF32 Eligible",
    "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
    "Output Data Types", "Output Formats", "Context ID"]
STEP_COLS = [
    "Device_id", "Step", "Computing", "Communication(Not Overlapped)",
    "Overlapped", "Communication", "Free", "Stage", "Bubble",
    "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
OPSTAT_COLS = ["OP Type", "Core Type", "Count", "Total Time(us)",
               "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
API_COLS = ["Device_id", "Level", "API Name", "Time(us)", "Count",
            "Avg(us)", "Min(us)", "Max(us)", "Variance"]
TASK_TYPES = {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU",
              "FFTS_PLUS"}
API_LEVELS = {"AscendCL", "Runtime", "Communication", "Node"}
TIME_INFO = ["Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)",
             "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)",
             "Wait Time Ratio", "Synchronization Time Ratio"]
BW_KEYS = ["Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)",
           "Large Packet Ratio", "Size Distribution"]
TRANSPORTS = {"HCCS", "PCIE", "SIO", "SDMA", "RDMA"}
LINK_TRANSPORTS = {"LOCAL", "HCCS", "PCIE", "SIO", "RDMA"}
LINK_KEYS = ["Transport Type", "Transit Size(MB)", "Transit Time(ms)",
             "Bandwidth(GB/s)"]
META_EVENTS = {"process_name", "process_labels", "process_sort_index",
               "thread_name", "thread_sort_index"}
OVERLAP = ["Computing", "Communication", "Communication(Not Overlapped)",
           "Free"]
DIST_INT = ["tensor_model_parallel_size", "pipeline_model_parallel_size",
            "data_parallel_size", "context_parallel_size",
            "expert_model_parallel_size", "world_size", "rank"]
OUT_FILES = {"kernel_details.csv", "step_trace_time.csv",
             "communication.json", "communication_matrix.json",
             "trace_view.json", "op_statistic.csv", "api_statistic.csv"}
PATH_OK = re.compile(r"^[A-Za-z0-9 _.\-:/~]+$")
DTYPE_SIZE = {0: 1, 1: 2, 2: 4, 3: 2, 4: 4, 5: 8, 6: 8, 7: 1, 8: 2, 9: 4,
              10: 8, 11: 2, 12: 16}


def double_hash(s):
    h1 = h2 = 0
    for c in s:
        h1 = (h1 * 29 + ord(c)) % 2**32
        h2 = (h2 * 131 + ord(c)) % 2**32
    return (h1 << 32) | h2


# The documented example, so the hash read from the doc is the right one.
assert double_hash("10.0.0.1%eth0_60000_0_1735689600000000") == \
    1511087755395048716


def near(a, b, tol):
    return abs(float(a) - float(b)) <= tol


def us(ns):
    return "%d.%03d" % (ns // 1000, ns % 1000)


# ---- the capture ----
dump = [json.loads(line) for line in open(dump_path)]
footer, dump = dump[-1], dump[:-1]
report = json.load(open(report_path))
pid_of = {p["rank"]: p["pid"] for p in dump
          if p["type"] == "process" and p["rank"] >= 0}
assert sorted(pid_of) == list(range(NRANKS)), pid_of
kernels = collections.defaultdict(list)
for k in dump:
    if k["type"] == "kernel" and not k["flags"] & 1:
        assert not k["flags"] & 2, "device-clock kernel: %s" % k
        kernels[k["pid"]].append(k)
comms = collections.defaultdict(list)
for c in dump:
    if c["type"] == "communication" and not c["flags"] & 1:
        comms[c["pid"]].append(c)
apis = collections.defaultdict(collections.Counter)
for a in dump:
    if a["type"] == "api":
        apis[a["pid"]][a["name"]] += 1
steps = collections.defaultdict(list)       # pid -> [(start, end)]
open_ = {}
for m in dump:
    if m["type"] != "marker" or m["source"] != 0 or m["name"] != "step":
        continue
    if m["flag"] == 2:
        open_[(m["pid"], m["id"])] = m["ts"]
    elif m["flag"] == 4 and (m["pid"], m["id"]) in open_:
        steps[m["pid"]].append((open_.pop((m["pid"], m["id"])), m["ts"]))
for v in steps.values():
    v.sort()


def step_of(pid, ts):
    for i, (s, e) in enumerate(steps[pid]):
        if s <= ts < e:
            return i + 1
    return None


# ---- the tree ----
uid = os.getuid()


def check_path(path):
    st = os.lstat(path)
    assert not stat.S_ISLNK(st.st_mode), "symlink: " + path
    assert st.st_uid == uid, "owner: " + path
    assert st.st_mode & 0o022 == 0, "group/other writable: %s %o" % (
        path, st.st_mode)
    assert PATH_OK.match(os.path.relpath(path, root)), "name: " + path
    if stat.S_ISDIR(st.st_mode):
        assert stat.S_IMODE(st.st_mode) == 0o755, "%s %o" % (path,
                                                             st.st_mode)
    else:
        assert stat.S_ISREG(st.st_mode) and \
            stat.S_IMODE(st.st_mode) == 0o644, "%s %o" % (path, st.st_mode)


for dp, dn, fn in os.walk(root):
    for n in dn + fn:
        check_path(os.path.join(dp, n))
        # DB mode would make msprof-analyze ignore every text file.
        assert not n.endswith(".db"), os.path.join(dp, n)

rankdirs = {}
for n in sorted(os.listdir(root)):
    m = re.match(r"^([A-Za-z0-9.\-]+)_(\d+)_(\d{17})_ascend_pt$", n)
    assert m, "rank directory name: " + n
    d = os.path.join(root, n)
    infos = [f for f in os.listdir(d) if f.startswith("profiler_info")]
    assert len(infos) == 1, infos
    im = re.match(r"^profiler_info_(\d+)\.json$", infos[0])
    assert im, infos[0]
    r = int(im.group(1))
    assert r not in rankdirs, "rank %d twice" % r
    assert m.group(1) == re.sub(r"[^A-Za-z0-9_.\-]", "-", footer["host"]), \
        (m.group(1), footer["host"])
    assert int(m.group(2)) == pid_of[r], (n, pid_of)
    assert sorted(os.listdir(d)) == sorted(
        [infos[0], "profiler_metadata.json", "ASCEND_PROFILER_OUTPUT"]), \
        os.listdir(d)
    assert set(os.listdir(os.path.join(d, "ASCEND_PROFILER_OUTPUT"))) == \
        OUT_FILES, os.listdir(os.path.join(d, "ASCEND_PROFILER_OUTPUT"))
    rankdirs[r] = d
assert sorted(rankdirs) == list(range(NRANKS)), sorted(rankdirs)


def rows(path, cols):
    with open(path, newline="") as f:
        rd = csv.reader(f)
        head = next(rd)
        assert head == cols, "%s header: %s" % (path, head)
        out = [dict(zip(head, row)) for row in rd]
    for row in out:
        assert None not in row and len(row) == len(cols), (path, row)
    return out


groups = {}          # gid -> (name, global ranks)
per_rank = {}
for r, d in sorted(rankdirs.items()):
    pid = pid_of[r]
    out = os.path.join(d, "ASCEND_PROFILER_OUTPUT")
    info = json.load(open(os.path.join(d, "profiler_info_%d.json" % r)))
    assert isinstance(info, dict) and info["rank_id"] == r, info
    assert info["config"]["experimental_config"]["_profiler_level"] == \
        "Level1", info
    meta = json.load(open(os.path.join(d, "profiler_metadata.json")))
    da = meta["distributed_args"]
    for k in DIST_INT:
        assert type(da[k]) is int, (k, da)
    assert da["world_size"] == NRANKS and da["rank"] == r, da
    local = {}
    for name, g in meta["parallel_group_info"].items():
        assert isinstance(g["group_name"], str), g
        assert type(g["group_rank"]) is int, g
        assert all(type(x) is int for x in g["global_ranks"]), g
        assert g["global_ranks"] == sorted(g["global_ranks"]), g
        assert g["global_ranks"][g["group_rank"]] == r, g
        gid = str(double_hash(name))
        assert groups.setdefault(gid, (name, g["global_ranks"])) == \
            (name, g["global_ranks"]), (groups[gid], g)
        local[gid] = g["group_rank"]
    # The comm names our metadata uses are the capture's communicators.
    assert set(n for n, _ in groups.values()) >= {
        c["comm"] for c in comms[pid]}, (groups, comms[pid][:1])

    # step_trace_time.csv: one row a step, in us.
    st = rows(os.path.join(out, "step_trace_time.csv"), STEP_COLS)
    assert [int(x["Step"]) for x in st] == list(range(1, NSTEPS + 1)), \
        [x["Step"] for x in st]
    assert len(steps[pid]) == NSTEPS, len(steps[pid])
    dev = {k["device"] for k in kernels[pid]}
    assert len(dev) == 1, dev
    for x, (s, e) in zip(st, steps[pid]):
        assert int(x["Device_id"]) == dev.copy().pop(), x
        v = {k: float(x[k]) for k in STEP_COLS[2:]}
        assert all(val >= 0 for val in v.values()), x
        assert near(v["Communication(Not Overlapped)"],
                    v["Communication"] - v["Overlapped"], 0.002), x
        assert near(v["Communication(Not Overlapped and Exclude Receive)"],
                    v["Communication(Not Overlapped)"] - v["Bubble"],
                    0.002), x
        # The step's span on the device: the capture's step marker range.
        assert near(v["Stage"] + v["Bubble"], (e - s) / 1e3, 0.002), \
            (x, e - s)
        assert near(v["Computing"] + v["Communication(Not Overlapped)"] +
                    v["Free"], (e - s) / 1e3, 0.005), (x, e - s)
        # Preparing: the step start to its first device task.
        first = min(k["ts"] for k in kernels[pid] if s <= k["ts"] < e)
        assert v["Preparing"] <= (first - s) / 1e3 + 0.002, (x, first - s)
        assert v["Computing"] > 0, x
        # Bubble: the step's receive ops, as the capture has them.
        recv = sum(c["end"] - c["ts"] for c in comms[pid]
                   if c["name"] == "HcclRecv" and s <= c["ts"] < e)
        assert near(v["Bubble"], recv / 1e3, 0.002), (x, recv)

    # kernel_details.csv: every KERNEL record of the rank, as it was.
    kd = rows(os.path.join(out, "kernel_details.csv"), KERNEL_COLS)
    assert len(kd) == len(kernels[pid]), (r, len(kd), len(kernels[pid]))
    for x in kd:
        assert x["Start Time(us)"].endswith("\t"), repr(x["Start Time(us)"])
        assert re.match(r"^\d+\.\d{3}\t$", x["Start Time(us)"]), x
        assert x["Accelerator Core"] in TASK_TYPES, x
        assert x["Model ID"] == "4294967295", x
        assert re.match(r"^\d+\.\d{3}$", x["Duration(us)"]), x
        assert re.match(r"^\d+\.\d{3}$", x["Wait Time(us)"]), x
        int(x["Task ID"]), int(x["Stream ID"]), int(x["Block Dim"])
        # Shapes are quoted lists the advisor strips with [1:-1] and
        # splits, or empty (it skips those): never a word such as N/A.
        for k in ("Input Shapes", "Output Shapes"):
            assert x[k] == "" or re.match(r'^"[0-9,;]*"$', x[k]), (k, x)
    want = collections.Counter(
        (k["name"], us(k["ts"]), us(k["end"] - k["ts"]), str(k["task"]),
         str(k["stream"]), str(step_of(pid, k["ts"]) or ""))
        for k in kernels[pid])
    got = collections.Counter(
        (x["Name"], x["Start Time(us)"][:-1], x["Duration(us)"],
         x["Task ID"], x["Stream ID"], x["Step Id"]) for x in kd)
    assert want == got, (r, list((want - got).items())[:3],
                         list((got - want).items())[:3])
    core_of = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE",
               "KERNEL_AICPU": "AI_CPU"}
    want_core = {k["name"]: core_of[k["ktype"]] for k in kernels[pid]}
    for x in kd:
        assert x["Accelerator Core"] == want_core[x["Name"]], x
    # Wait Time: the gap since the previous task of the same stream.
    last = {}
    for x in sorted(kd, key=lambda x: D(x["Start Time(us)"][:-1])):
        s, du = D(x["Start Time(us)"][:-1]), D(x["Duration(us)"])
        w = max(D(0), s - last[x["Stream ID"]]) if x["Stream ID"] in last \
            else D(0)
        assert abs(D(x["Wait Time(us)"]) - w) <= D("0.001"), (x, w)
        last[x["Stream ID"]] = s + du

    # op_statistic.csv: kernel_details summed per (type, core).
    os_ = rows(os.path.join(out, "op_statistic.csv"), OPSTAT_COLS)
    agg = collections.defaultdict(list)
    for x in kd:
        agg[(x["Type"], x["Accelerator Core"])].append(D(x["Duration(us)"]))
    assert len(os_) == len(agg), (os_, agg.keys())
    tot = sum(sum(v) for v in agg.values())
    for x in os_:
        v = agg[(x["OP Type"], x["Core Type"])]
        assert int(x["Count"]) == len(v), x
        assert abs(D(x["Total Time(us)"]) - sum(v)) <= D("0.001") * len(v), x
        assert D(x["Min Time(us)"]) == min(v) and \
            D(x["Max Time(us)"]) == max(v), x
        assert near(x["Ratio(%)"], 100 * sum(v) / tot, 0.01), x
    assert [D(x["Total Time(us)"]) for x in os_] == sorted(
        (D(x["Total Time(us)"]) for x in os_), reverse=True)

    # api_statistic.csv: every API record, with its level.
    ap = rows(os.path.join(out, "api_statistic.csv"), API_COLS)
    assert {x["API Name"]: int(x["Count"]) for x in ap} == apis[pid], ap
    for x in ap:
        assert x["Level"] in API_LEVELS, x
        assert x["Level"] == ("Communication" if x["API Name"].startswith(
            "Hccl") else "AscendCL" if x["API Name"].startswith("acl")
            else x["Level"]), x
        assert D(x["Min(us)"]) <= D(x["Avg(us)"]) + D("0.001") and \
            D(x["Avg(us)"]) <= D(x["Max(us)"]) + D("0.001"), x
    per_rank[r] = dict(pid=pid, out=out, local=local, steps=st, kd=kd)

# ---- communication.json ----
op_re = re.compile(r"^(hcom_([A-Za-z]+)__(\d{3})_(\d+)_1)@(\d+)$")
p2p_types = ("send", "receive", "batchsendrecv")
ops_by = collections.defaultdict(dict)        # (step, key) -> rank -> info
rep_comm = {x["OP Type"]: x for x in report["communication"]}
step_keys = ["step%d" % i for i in range(1, NSTEPS + 1)]
n_ops = 0
moved = collections.Counter()


def check_ci(ci, start):
    ti, bw = ci["Communication Time Info"], ci["Communication Bandwidth Info"]
    assert sorted(ci) == ["Communication Bandwidth Info",
                          "Communication Time Info"], ci.keys()
    assert list(ti) == (TIME_INFO if start else TIME_INFO[1:]), list(ti)
    for k, v in ti.items():
        assert type(v) is float, (k, v)
    el, tr, wa = ti["Elapse Time(ms)"], ti["Transit Time(ms)"], \
        ti["Wait Time(ms)"]
    assert near(ti["Idle Time(ms)"], el - tr - wa, 2e-6), ti
    assert near(ti["Wait Time Ratio"],
                round(wa / (wa + tr), 4) if wa + tr else 0, 1e-4), ti
    sy = ti["Synchronization Time(ms)"]
    assert near(ti["Synchronization Time Ratio"],
                round(sy / (sy + tr), 4) if sy + tr else 0, 1e-4), ti
    assert set(bw) <= TRANSPORTS and {"SDMA", "RDMA"} <= set(bw), bw.keys()
    for t, b in bw.items():
        assert list(b) == BW_KEYS, (t, list(b))
        for k in BW_KEYS[:4]:
            assert type(b[k]) is float, (t, k, b[k])
        if b["Transit Time(ms)"] > 0:
            assert near(b["Bandwidth(GB/s)"],
                        b["Transit Size(MB)"] / b["Transit Time(ms)"],
                        1e-4 * max(1, b["Bandwidth(GB/s)"])), (t, b)
        for size, (cnt, ms) in b["Size Distribution"].items():
            float(size)
            assert type(cnt) is int and type(ms) is float, b
    sdma = sum(bw[t]["Transit Size(MB)"] for t in ("HCCS", "PCIE", "SIO")
               if t in bw)
    assert near(bw["SDMA"]["Transit Size(MB)"], sdma, 1e-5), bw
    return ti, bw


for r, pr in per_rank.items():
    cj = json.load(open(os.path.join(pr["out"], "communication.json")))
    assert list(cj) == step_keys, list(cj)
    seen = []
    for sk, sv in cj.items():
        assert sorted(sv) == ["collective", "p2p"], sv.keys()
        assert "Total Op Info" in sv["collective"], sv["collective"].keys()
        for kind, ops in sv.items():
            tot = collections.defaultdict(float)
            for key, ci in ops.items():
                if key == "Total Op Info":
                    continue
                m = op_re.match(key)
                assert m, key
                assert (m.group(2) in p2p_types) == (kind == "p2p"), key
                gid = m.group(5)
                assert gid in groups and gid in pr["local"], (key, groups)
                assert gid.endswith(m.group(3)), key
                ti, bw = check_ci(ci, True)
                for k in TIME_INFO[1:6]:
                    tot[k] += ti[k]
                seen.append((ti["Start Timestamp(us)"],
                             ti["Elapse Time(ms)"], bw, m.group(2), gid))
                ops_by[(sk, key)][r] = ci
            tti, _ = check_ci(ops["Total Op Info"], False) \
                if "Total Op Info" in ops else (None, None)
            for k, v in tot.items():
                assert near(tti[k], v, 1e-5), (sk, kind, k, tti[k], v)
    # Each op is one COMMUNICATION record of the rank, inside its step.
    assert len(seen) == len(comms[pr["pid"]]), (r, len(seen),
                                                 len(comms[pr["pid"]]))
    n_ops += len(seen)
    for (start, el, bw, typ, gid), c in zip(
            sorted(seen, key=lambda x: x[0]),
            sorted(comms[pr["pid"]], key=lambda c: c["ts"])):
        assert abs(start - c["ts"] / 1e3) < 0.5, (start, c["ts"])
        assert near(el, (c["end"] - c["ts"]) / 1e6, 2e-6), (el, c)
        # What a rank of n moves in a ring all-reduce: 2(n-1)/n of it.
        n = len(groups[gid][1])
        size = c["count"] * DTYPE_SIZE[c["dtype"]] / 1048576
        moved[c["name"]] += size
        if typ == "allReduce":
            assert near(bw["HCCS"]["Transit Size(MB)"],
                        2 * (n - 1) / n * size, 1e-5), (bw, size)
        elif typ in p2p_types:
            assert near(bw["HCCS"]["Transit Size(MB)"], size, 1e-5), \
                (bw, size)
# The message sizes are the report's (3 decimals there).
for name, mb in moved.items():
    assert near(mb, float(rep_comm[name]["Transit Size(MB)"]), 6e-4), \
        (name, mb, rep_comm[name])
# The cluster merges ranks by step and op key: every rank of the group
# files each collective under the same step with the same name.
for (sk, key), by_rank in ops_by.items():
    gid = key.rsplit("@", 1)[1]
    if op_re.match(key).group(2) in p2p_types:
        continue        # a send's peer receives: other names
    assert sorted(by_rank) == groups[gid][1], (sk, key, sorted(by_rank))

# ---- communication_matrix.json ----
mkey_re = re.compile(r"^([a-z]+)-(top1|middle|bottom[123]|total)@(\d+)$")
links = collections.defaultdict(dict)     # (step, key) -> link -> rank
for r, pr in per_rank.items():
    cm = json.load(open(os.path.join(pr["out"],
                                     "communication_matrix.json")))
    assert list(cm) == step_keys, list(cm)
    cj = json.load(open(os.path.join(pr["out"], "communication.json")))
    for sk, sv in cm.items():
        assert sorted(sv) == ["collective", "p2p"], sv.keys()
        sizes = collections.defaultdict(float)
        for kind in sv:
            for key, ci in cj[sk][kind].items():
                m = op_re.match(key)
                if m:
                    sizes[(m.group(2).lower(), m.group(5))] += sum(
                        b["Transit Size(MB)"] for t, b in
                        ci["Communication Bandwidth Info"].items()
                        if t != "SDMA")
            stats = collections.defaultdict(set)
            for key, lk in sv[kind].items():
                m = mkey_re.match(key)
                assert m, key
                gid = m.group(3)
                i = pr["local"][gid]
                stats[(m.group(1), gid)].add(m.group(2))
                # Its own self link: how the cluster maps local ranks.
                assert lk["%d-%d" % (i, i)]["Transport Type"] == "LOCAL", lk
                for link, v in lk.items():
                    s, d = map(int, link.split("-"))
                    assert s == i, (key, link)
                    want = LINK_KEYS + ([] if m.group(2) == "total"
                                        else ["Op Name"])
                    assert list(v) == want, (key, list(v))
                    assert v["Transport Type"] in LINK_TRANSPORTS, v
                    for k in LINK_KEYS[1:]:
                        assert type(v[k]) is float, v
                    if v["Transit Time(ms)"] > 0:
                        assert near(v["Bandwidth(GB/s)"],
                                    v["Transit Size(MB)"] /
                                    v["Transit Time(ms)"],
                                    1e-4 * max(1, v["Bandwidth(GB/s)"])), v
                    if "Op Name" in v:
                        assert "%s@%s" % (v["Op Name"], gid) in \
                            cj[sk][kind], (v, cj[sk][kind].keys())
                    if s != d:
                        assert (s, d) not in links[(sk, key)], link
                        links[(sk, key)][(s, d)] = r
                if m.group(2) == "total" and len(lk) > 1:
                    # total = the step's ops of that type summed.
                    mb = sum(v["Transit Size(MB)"] for v in lk.values())
                    assert near(mb, sizes[(m.group(1), gid)], 1e-4), (
                        sk, key, mb, sizes)
                elif m.group(2) == "total":
                    # Only a p2p op without a known peer has no link.
                    assert kind == "p2p", (sk, key, lk)
            for (t, gid), have in stats.items():
                assert {"top1", "middle", "bottom1", "total"} <= have, have
# Over all ranks, a ring: each local rank sends to the next one.
for (sk, key), lk in links.items():
    gid = key.rsplit("@", 1)[1]
    n = len(groups[gid][1])
    if key.startswith("allreduce"):
        assert sorted(lk) == [(i, (i + 1) % n) for i in range(n)], (key, lk)

# ---- trace_view.json ----
n_events = 0
for r, pr in per_rank.items():
    tv = json.load(open(os.path.join(pr["out"], "trace_view.json")))
    assert isinstance(tv, list), type(tv)
    pname, plabel, tname, tsort = {}, {}, {}, set()
    for e in tv:
        assert e["ph"] in ("M", "X"), e
        if e["ph"] == "M":
            assert e["name"] in META_EVENTS, e
            a = e["args"]
            if e["name"] == "process_name":
                pname[e["pid"]] = a["name"]
            elif e["name"] == "process_labels":
                plabel[e["pid"]] = a["labels"]
            elif e["name"] == "thread_name":
                tname[(e["pid"], e["tid"])] = a["name"]
            elif e["name"] == "thread_sort_index":
                assert type(a["sort_index"]) is int, e
                tsort.add((e["pid"], e["tid"]))
            else:
                assert type(a["sort_index"]) is int, e
            continue
        assert sorted(e) == ["args", "dur", "name", "ph", "pid", "tid",
                             "ts"], e
        assert isinstance(e["ts"], str) and \
            re.match(r"^\d+\.\d{3}$", e["ts"]), e
        assert type(e["dur"]) in (int, float) and e["dur"] >= 0, e
        assert isinstance(e["args"], dict), e
    by = collections.defaultdict(list)
    for e in tv:
        if e["ph"] == "X":
            by[pname[e["pid"]]].append(e)
    dev = {k["device"] for k in kernels[pr["pid"]]}.pop()
    assert plabel[pr["pid"]] == "CPU" and pname[pr["pid"]] == "Python"
    hw = [p for p, n in pname.items() if n == "Ascend Hardware"]
    assert len(hw) == 1 and plabel[hw[0]] == "NPU %d" % dev, (hw, plabel)
    # Python: ProfilerStep#N defines the steps.
    ps = sorted((e for e in by["Python"]
                 if e["name"].startswith("ProfilerStep#")),
                key=lambda e: D(e["ts"]))
    assert [e["name"] for e in ps] == ["ProfilerStep#%d" % i for i in
                                       range(1, NSTEPS + 1)], ps[:2]
    for e, (s, en) in zip(ps, steps[pr["pid"]]):
        assert e["ts"] == us(s) and near(e["dur"], (en - s) / 1e3, 0.0011)
    # Ascend Hardware: the kernels, with their task types.
    hwk = by["Ascend Hardware"]
    assert len(hwk) == len(pr["kd"]), (len(hwk), len(pr["kd"]))
    assert all(e["args"]["Task Type"] in TASK_TYPES for e in hwk)
    assert collections.Counter((e["name"], e["ts"]) for e in hwk) == \
        collections.Counter((x["Name"], x["Start Time(us)"][:-1])
                            for x in pr["kd"])
    # Communication: a thread named for it holds the hcom ops.
    comm_ev = [e for e in tv if e["ph"] == "X" and
               "Communication" in tname.get((e["pid"], e["tid"]), "") and
               pname[e["pid"]] in ("HCCL", "Communication")]
    assert len(comm_ev) == len(comms[pr["pid"]]), len(comm_ev)
    assert all(e["name"].startswith("hcom_") for e in comm_ev)
    assert all((e["pid"], e["tid"]) in tsort for e in comm_ev)
    # Overlap Analysis: per step, what step_trace_time.csv says.
    ov = by["Overlap Analysis"]
    assert {e["name"] for e in ov} <= set(OVERLAP), {e["name"] for e in ov}
    for row, (s, en) in zip(pr["steps"], steps[pr["pid"]]):
        for name, col in (("Computing", "Computing"),
                          ("Communication(Not Overlapped)",
                           "Communication(Not Overlapped)"),
                          ("Free", "Free")):
            tot = sum(max(0, min(D(e["ts"]) + D(str(e["dur"])),
                                 D(us(en))) - max(D(e["ts"]), D(us(s))))
                      for e in ov if e["name"] == name)
            assert near(tot, row[col], 0.01), (r, row["Step"], name, tot,
                                               row[col])
    n_events += len(tv)

print("ok %d ranks, %d kernels, %d collectives, %d trace events" % (
    len(per_rank), sum(len(p["kd"]) for p in per_rank.values()), n_ops,
    n_events))

"""mspti.Profile's torch.profiler-style API: framework ops (CPU activity)
linked to the device activity they launch, key_averages, the decorator
and module-level start/stop, the profiling-suite summaries, Kineto traces
per rank and the new advice rules.

Plain-CPU-torch checks run in a child (the bridge, once imported,
patches torch for the whole process); bridge checks run here and compare
with what a KernelMonitor sees of the same launches."""

import collections
import glob
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import mspti
from conftest import run_python

try:
    import torch
except ImportError:
    torch = None

pytestmark = pytest.mark.skipif(
    torch is None, reason="PyTorch is not importable (Debian: apt-get "
    "install python3-torch)")

CPU, NPU = (mspti.ProfilerActivity.CPU, mspti.ProfilerActivity.NPU) \
    if hasattr(mspti, "ProfilerActivity") else (None, None)


def child(code, env=None, timeout=180):
    p = run_python(textwrap.dedent(code), timeout=timeout, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_profile_is_a_callable_factory():
    # mspti.profile used to be a submodule: calling it raised TypeError.
    assert callable(mspti.profile)
    p = mspti.profile(activities=[NPU])
    assert isinstance(p, mspti.Profile)


def test_cpu_ops_match_torch_profiler_counts():
    # The same workload under torch.profiler and mspti.profile: the ops
    # both observe have the same counts; times are consistent.
    out = child("""
        import json, time, torch, mspti
        from torch.profiler import profile, ProfilerActivity

        def work():
            x = torch.randn(16, 16)
            w = torch.randn(16, 16, requires_grad=True)
            for _ in range(5):
                s = torch.relu(torch.mm(x, w)).sum()
            s.backward()

        with profile(activities=[ProfilerActivity.CPU]) as tp:
            work()
        t0 = time.time_ns()
        with mspti.profile(activities=[mspti.ProfilerActivity.CPU]) as mp:
            work()
        wall = (time.time_ns() - t0) / 1e3
        ka = mp.key_averages()
        ev = mp.events()
        print(json.dumps({
            "torch": {e.key: e.count for e in tp.key_averages()},
            "ours": {r.key: r.count for r in ka},
            "total": {r.key: r.cpu_time_total for r in ka},
            "self": {r.key: r.self_cpu_time_total for r in ka},
            "sum": {n: sum(e.end - e.start for e in ev if e.name == n) / 1e3
                    for n in {e.name for e in ev}},
            "selftotal": ka.self_cpu_time_total, "wall": wall,
            "seq": [(e.name, e.seq, e.fwd) for e in ev],
            "torch_imported": "torch" in __import__("sys").modules}))
    """)
    d = json.loads(out.splitlines()[-1])
    keys = ["aten::mm", "aten::relu", "aten::threshold_backward",
            "autograd::engine::evaluate_function: ReluBackward0",
            "autograd::engine::evaluate_function: MmBackward0",
            "autograd::engine::evaluate_function: SumBackward0"]
    for k in keys:
        assert d["ours"].get(k) == d["torch"][k], (k, d["ours"], d["torch"])
    assert d["ours"]["aten::relu"] == 5 and d["ours"]["aten::mm"] == 6
    for k, total in d["total"].items():
        assert abs(total - d["sum"][k]) < 1e-6 * max(1.0, total)
        assert 0 <= d["self"][k] <= total + 1e-9
    # A backward range's self time excludes its ops.
    k = "autograd::engine::evaluate_function: ReluBackward0"
    assert d["self"][k] < d["total"][k]
    assert 0 < d["selftotal"] <= d["wall"]
    # Backward ops carry the sequence number of their forward op.
    seq = d["seq"]
    fwd_relu = [s for n, s, f in seq if n == "aten::relu" and not f]
    bwd = [s for n, s, f in seq if n == "aten::threshold_backward"]
    assert bwd == [fwd_relu[-1]] and bwd[0] >= 0
    fwd_mm = [s for n, s, f in seq if n == "aten::mm" and not f and s >= 0]
    assert fwd_mm[-1] in [s for n, s, f in seq
                          if n == "aten::mm" and f]


def test_observer_only_while_profiling():
    out = child("""
        import torch, mspti
        from torch.utils._python_dispatch import \\
            _get_current_dispatch_mode_stack as stack
        import torch.nn.modules.module as mm
        before = (len(stack()), len(mm._global_forward_pre_hooks))
        p = mspti.Profile(activities=[mspti.ProfilerActivity.CPU],
                          with_stack=True)
        p.start()
        during = (len(stack()), len(mm._global_forward_pre_hooks))
        torch.relu(torch.ones(3))
        p.stop()
        after = (len(stack()), len(mm._global_forward_pre_hooks))
        torch.relu(torch.ones(3))
        import json
        print(json.dumps([before, during, after,
                          [e.name for e in p.events()]]))
    """)
    before, during, after, names = json.loads(out.splitlines()[-1])
    assert before == [0, 0] and during == [1, 1] and after == [0, 0]
    assert names.count("aten::relu") == 1


def test_shapes_stack_module_memory():
    out = child("""
        import json, torch, mspti
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = torch.nn.Conv2d(3, 4, 3)
            def forward(self, x):
                return self.conv1(x)
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer1 = torch.nn.Sequential(Block())
            def forward(self, x):
                return self.layer1(x).relu()
        net = Net()
        x = torch.randn(2, 3, 8, 8)
        with mspti.profile(activities=[mspti.ProfilerActivity.CPU],
                           record_shapes=True, with_stack=True,
                           profile_memory=True) as p:
            y = net(x)
            big = torch.zeros(1000)
            del big
        conv = [e for e in p.events() if e.name == "aten::convolution"][0]
        relu = [e for e in p.events() if e.name == "aten::relu"][0]
        zeros = [e for e in p.events() if e.name == "aten::zeros"]
        mem = [(m.bytes, m.device) for m in p._ops[2]]
        ka = p.key_averages(group_by_input_shape=True)
        print(json.dumps({"shapes": conv.shapes, "dtypes": conv.dtypes,
                          "module": conv.module, "relu": relu.module,
                          "stack": conv.stack, "mem": mem,
                          "zeros": len(zeros),
                          "rows": ka.rows, "table": ka.table(
                              sort_by="cpu_time_total", row_limit=3)}))
    """)
    d = json.loads(out.splitlines()[-1])
    assert d["shapes"][:3] == [[2, 3, 8, 8], [4, 3, 3, 3], [4]]
    assert d["dtypes"][:3] == ["float32"] * 3
    assert d["module"] == "layer1.0.conv1" and d["relu"] == "Net"
    assert any("forward" in f for f in d["stack"]) and \
        all("/torch/" not in f for f in d["stack"])
    # zeros(1000) floats: allocated and, after del, freed.
    assert [4000, "cpu"] in d["mem"] and [-4000, "cpu"] in d["mem"]
    conv_rows = [r for r in d["rows"] if r["Name"] == "aten::convolution"]
    assert conv_rows[0]["Input Shapes"].startswith("[[2, 3, 8, 8], "
                                                   "[4, 3, 3, 3], [4]")
    head = d["table"].splitlines()[1]
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %",
                "CPU total", "CPU time avg", "CPU Mem", "Self CPU Mem",
                "# of Calls", "Input Shapes"):
        assert col in head


# -- the bridge: kernels linked to the ops that launched them -------------

@pytest.fixture(scope="module")
def npu():
    import mspti.npusim.torch as npu
    return npu


def small_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))


@pytest.fixture(scope="module")
def trained(npu):
    model = small_cnn().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(2, 3, 8, 8)
    seen = []
    mon = mspti.KernelMonitor()
    assert mon.start(seen.append) == mspti.MsptiResult.SUCCESS
    with mspti.Profile(activities=[CPU, NPU], record_shapes=True,
                       with_stack=True) as prof:
        for _ in range(2):
            opt.zero_grad()
            loss = model(x.npu()).sum()
            loss.backward()
            opt.step()
        npu.synchronize()
    mon.stop()
    return prof, seen


def test_every_kernel_links_to_its_op(trained):
    prof, seen = trained
    kernels = [d for d in prof.device_activities()
               if d.type.startswith("KERNEL")]
    # The Profile saw what the monitor saw, kernel for kernel.
    assert collections.Counter(k.name for k in kernels) == \
        collections.Counter(k.name for k in seen)
    byid = {e.id: e for e in prof.events()}
    for k in kernels:
        assert k.op in byid, k.name
    ops_of = collections.defaultdict(set)
    for k in kernels:
        ops_of[k.name].add(byid[k.op].name)
    assert ops_of["Conv2D"] == {"aten::convolution"}
    assert ops_of["Conv2DBackpropInput"] == {"aten::convolution_backward"}
    assert ops_of["ReluGrad"] == {"aten::threshold_backward"}
    assert ops_of["MatMul"] <= {"aten::addmm", "aten::mm"}
    # The fused optimizer's kernels belong to torch's own step range.
    assert ops_of["ApplyMomentum"] == {"Optimizer.step#SGD.step"}


def test_key_averages_device_time_is_the_kernels(trained):
    prof, seen = trained
    ka = prof.key_averages()
    rows = {r.key: r for r in ka}
    conv = rows["aten::convolution"]
    assert conv.count == 4                  # 2 convs x 2 steps
    byid = {e.id: e for e in prof.events()}
    linked = sum(d.duration for d in prof.device_activities()
                 if d.op and byid[d.op].name == "aten::convolution")
    assert abs(conv.self_npu_time_total - linked / 1e3) < 1e-6
    assert rows["Conv2D"].count == 4 and rows["Conv2D"].is_device
    total_dev = sum(d.duration for d in prof.device_activities()) / 1e3
    assert abs(ka.self_npu_time_total - total_dev) < 1e-6
    # A kernel's row and its op's: device time counted once.
    assert abs(sum(r.self_npu_time_total for r in ka if r.is_device) -
               total_dev) < 1e-6
    # Launch calls are children of the op: its self CPU excludes them.
    assert conv.self_cpu_time_total < conv.cpu_time_total
    # Sorting and limits, torch's keys.
    t = ka.table(sort_by="npu_time_total", row_limit=4)
    lines = t.splitlines()
    assert "Self NPU" in lines[1] and "NPU total" in lines[1] and \
        "# of Calls" in lines[1]
    assert len(lines) == 4 + 4 + 2
    top = ka.sorted("npu_time_total")[0]
    assert lines[3].strip().startswith(top.key[:40])
    assert ka.sorted("count")[0].count == max(r.count for r in ka)
    for key in ("cpu_time_total", "self_cpu_time_total", "cpu_time",
                "self_npu_time_total", "device_time_total",
                "cuda_time_total", "count"):
        ka.table(sort_by=key, row_limit=2)
    with pytest.raises(KeyError):
        ka.table(sort_by="no_such_key")
    assert "Self CPU time total" in t and "Self NPU time total" in t


def test_kineto_trace_flows(trained, tmp_path):
    prof, _ = trained
    path = prof.export_chrome_trace(str(tmp_path / "t.json"))
    d = json.load(open(path))
    assert set(d["distributedInfo"]) == {"backend", "rank", "world_size"}
    assert d["deviceProperties"][0]["totalGlobalMem"] > 0
    ev = d["traceEvents"]
    ops = {e["args"]["External id"]: e for e in ev
           if e.get("cat") == "cpu_op"}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert kernels and len(starts) == len(ends) >= len(kernels)
    for k in kernels:
        c = k["args"]["correlation"]
        s, f = starts[c], ends[c]
        assert f["ts"] == k["ts"] and f["pid"] == k["pid"] and \
            f["tid"] == k["tid"]
        op = ops.get(k["args"]["External id"])
        if op is None:      # a range (record_function), not an aten op
            continue
        assert s["tid"] == op["tid"]
        assert op["ts"] <= s["ts"] <= op["ts"] + op["dur"]
    assert any(e["name"] == "aten::convolution" and
               "Input Dims" in e["args"] and "Call stack" in e["args"]
               for e in ev if e.get("cat") == "cpu_op")


def test_suite_summaries_layout(trained):
    prof, _ = trained
    ops = prof.op_summary()
    assert ops.columns[:2] == ["Op Type", "Core Type"] and \
        ops.columns[2:7] == ["Calls", "Total(ms)", "Avg(ms)", "Min(ms)",
                             "Max(ms)"]
    eng = {r["OP Type"]: r for r in prof.summary("ops").rows}
    for r in ops.rows:
        e = eng[r["Op Type"]]
        assert r["Calls"] == e["Count"]
        assert abs(r["Total(ms)"] - e["Total Time(us)"] / 1e3) < 1e-3
    assert str(ops).splitlines()[1].startswith("Op Type")
    mem = prof.memory_summary()
    assert "Peak(MB)" in mem.columns and "Capacity(MB)" in mem.columns
    comm = prof.communication_summary()
    assert comm.columns[:3] == ["Op Type", "Calls", "Total(ms)"]


def test_decorator_and_module_start_stop(npu):
    model = small_cnn().eval().npu()
    x = torch.randn(1, 3, 8, 8)

    @mspti.profile(activities=[CPU, NPU])
    def infer():
        with torch.no_grad():
            model(x.npu())
        npu.synchronize()
    infer()
    infer()
    prof = infer.profile
    assert prof.windows == 2
    assert {r.key: r.count for r in prof.key_averages()}[
        "aten::convolution"] == 2
    p = mspti.start(activities=[CPU, NPU])
    with pytest.raises(RuntimeError):
        mspti.start()
    with torch.no_grad():
        model(x.npu())
    npu.synchronize()
    assert mspti.stop() is p
    assert {r.key: r.count for r in p.key_averages()}[
        "Conv2D"] == 2


def test_op_share_advice_names_the_op(trained):
    prof, _ = trained
    ops = prof.op_summary().rows
    top = max(ops, key=lambda r: r["Total(ms)"])
    adv = [a for a in prof.optimization_suggestions()
           if a["rule"] == "op_share" and "device time" in a["message"]]
    if top["Ratio(%)"] >= 25.0:
        assert adv and adv[0]["message"].startswith(top["Op Type"] + " ")
        assert ("%.1f%%" % top["Ratio(%)"])[:3] in adv[0]["message"]


def test_memory_peak_advice():
    # A device of 64 MB, 60 MB in use at the peak.
    out = child("""
        import mspti, mspti.npusim as sim
        sim.set_device(0)
        with mspti.Profile() as p:
            b = sim.DeviceBuffer(60 << 20)
            b.free()
        for a in p.optimization_suggestions():
            print(a["severity"], a["rule"], a["message"])
        print(p.memory_summary())
    """, env={"NPUSIM_MEM_MB": "64",
              "NPUSIM_SHM_PREFIX": os.environ.get("NPUSIM_SHM_PREFIX", "t") +
              "-mem"})
    line = [x for x in out.splitlines() if " memory_peak " in x]
    assert line and line[0].startswith("High memory_peak device 0: "
                                       "memory peak 60 MB is 93.8% of its "
                                       "64 MB"), out
    assert "smaller batch" in line[0]


DDP = """
import os, sys, torch, mspti
import mspti.npusim.torch as npu
out = sys.argv[1]
npu.init_process_group("hccl")
model = npu.DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).npu())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
prof = mspti.profile(activities=[mspti.ProfilerActivity.CPU,
                                 mspti.ProfilerActivity.NPU],
                     schedule=mspti.schedule(wait=1, warmup=0, active=1,
                                             repeat=2),
                     on_trace_ready=mspti.tensorboard_trace_handler(out))
prof.start()
for step in range(5):
    opt.zero_grad()
    model(torch.randn(4, 64).npu()).sum().backward()
    opt.step()
    npu.synchronize()
    prof.step()
prof.stop()
crows = prof.communication_summary().rows
orows = prof.op_summary().rows
comm = sum(r["Total(ms)"] for r in crows)
comp = sum(r["Total(ms)"] for r in orows)
# Each row's Total(ms) is rounded to 0.001 ms: the share the rows allow.
e = 0.0005
lo = 100.0 * (comm - len(crows) * e) / (comm + comp + (len(orows) -
    len(crows)) * e)
hi = 100.0 * (comm + len(crows) * e) / (comm + comp + (len(crows) -
    len(orows)) * e)
msgs = [a["message"] for a in prof.optimization_suggestions()
        if a["rule"] == "comm_share"]
# One write per line: both ranks share the parent's stdout, and print()
# on an unbuffered stream writes the text and its newline separately.
sys.stdout.write("RANK %d SHARE %.1f LO %.2f HI %.2f ADVICE %s\\n" % (
    npu.get_rank(), 100.0 * comm / (comm + comp), lo, hi,
    msgs[0] if msgs else "-"))
sys.stdout.flush()
npu.destroy_process_group()
"""


def test_tensorboard_handler_per_rank(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP)
    out_dir = tmp_path / "tb"
    out = child("""
        import sys
        import mspti.npusim.torch as npu
        codes = npu.spawn(2, [%r, %r])
        print("codes", codes)
        assert codes == [0, 0], codes
    """ % (str(script), str(out_dir)), timeout=240)
    files = sorted(glob.glob(str(out_dir / "*")))
    assert len(files) == 4, (files, out)       # 2 ranks x 2 windows
    ranks = collections.Counter()
    for f in files:
        assert re.fullmatch(r".+_\d+\.\d+\.pt\.trace\.json",
                            os.path.basename(f)), f
        d = json.load(open(f))
        di = d["distributedInfo"]
        assert di["world_size"] == 2 and di["backend"] == "hccl"
        ranks[di["rank"]] += 1
        names = {e["name"] for e in d["traceEvents"]}
        assert "aten::addmm" in names and "MatMul" in names
        # The window's step (steps 1 and 3 are recorded).
        assert {n for n in names if n.startswith("ProfilerStep#")} in \
            ({"ProfilerStep#1"}, {"ProfilerStep#3"}), names
        assert any("AllReduce" in n for n in names), names
    assert ranks == {0: 2, 1: 2}
    # comm_share: named with its share whenever collectives take 20% or
    # more of the device time (from the summaries' own totals).
    lines = [l for l in out.splitlines() if l.startswith("RANK ")]
    assert len(lines) == 2, out
    for l in lines:
        share, lo, hi = (float(l.split()[i]) for i in (3, 5, 7))
        advice = l.split(" ADVICE ", 1)[1]
        if lo >= 20.5:
            assert advice.startswith("communication takes "), l
            # The advice's share (exact, printed to 0.1) within what the
            # rounded rows allow.
            adv = float(advice.split()[2].rstrip("%"))
            assert lo - 0.05 <= adv <= hi + 0.05, l
            assert "overlap" in advice
        elif share < 19.5:
            assert advice == "-", l


def doc_snippets(srcdir):
    text = open(os.path.join(srcdir, "doc", "python.md")).read()
    return dict(re.findall(r"<!-- snippet: (\w+) -->\n```python\n(.*?)```",
                           text, re.S))


@pytest.mark.parametrize("name", ["torch_npu", "torch_profiler", "suite"])
def test_doc_snippets_run(srcdir, tmp_path, name):
    # The guides' snippets of doc/python.md, run as they are.
    code = doc_snippets(srcdir)[name]
    was = [l for l in code.splitlines() if "# was:" in l]
    assert len(was) == 1 or name == "suite"
    path = tmp_path / (name + ".py")
    path.write_text(code)
    p = subprocess.run([sys.executable, str(path)], capture_output=True,
                       text=True, timeout=240, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    if name == "torch_npu":
        traces = glob.glob(str(tmp_path / "result" / "*.pt.trace.json"))
        assert len(traces) == 1
        assert "Self CPU time total" in p.stdout
        assert "aten::" in p.stdout and "ProfilerStep#" in p.stdout
    elif name == "torch_profiler":
        assert "model_inference" in p.stdout and "Input Shapes" in p.stdout
        d = json.load(open(tmp_path / "trace.json"))
        assert any(e.get("cat") == "cpu_op" for e in d["traceEvents"])
    else:
        first = [l for l in p.stdout.splitlines()
                 if l.startswith("Op Type")]
        assert first, p.stdout
        body = p.stdout.splitlines()
        top = body[body.index(first[0]) + 1]
        assert top.split()[0] == "Conv2D", p.stdout
        assert "op_share" in p.stdout


def torch_md_blocks(srcdir):
    text = open(os.path.join(srcdir, "doc", "torch.md")).read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("i", [0, 1])
def test_torch_md_snippets_run(srcdir, tmp_path, i):
    # doc/torch.md's code, copied as a new user copies it, runs as it is.
    blocks = torch_md_blocks(srcdir)
    assert len(blocks) == 2, "doc/torch.md: %d python blocks" % len(blocks)
    path = tmp_path / ("torch_md_%d.py" % i)
    path.write_text(blocks[i])
    p = subprocess.run([sys.executable, str(path)], capture_output=True,
                       text=True, timeout=240, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    if i == 1:
        ops = [l for l in p.stdout.splitlines() if l.startswith("Op Type")]
        assert ops, p.stdout
        body = p.stdout.splitlines()
        assert body[body.index(ops[0]) + 1].split()[0] == "Conv2D", p.stdout


def test_shapes_never_break_the_op():
    """A daemon session with shapes (--kinds op,shapes): an argument whose
    shape cannot be read or dumped (symbolic sizes, nested tensors) gives
    the op's name alone; the op runs."""
    out = child("""
        import torch
        from mspti._observer import Observer
        class Odd:
            pass
        class Sizes(list):
            pass
        class BadShape(torch.Tensor):
            @property
            def shape(self):
                raise RuntimeError("no shape for this layout")
        o = Observer(record_shapes=True, emit_mstx=False)
        bad = torch.ones(2).as_subclass(BadShape)
        print(o._shapes_message("aten::add", (bad, 1), {}))
        sym = torch.ones(2, 3)
        # sizes json cannot encode by itself
        import mspti._observer as ob
        real = ob._shape_of
        ob._shape_of = lambda a, t: ([Odd()], "float")
        print(o._shapes_message("aten::mul", (sym,), {}).split("\\t")[0])
        ob._shape_of = real
        print(o._shapes_message("aten::sub", (sym,), {}))
    """)
    lines = out.splitlines()[-3:]
    assert lines[0] == "aten::add", lines
    assert lines[1] == "aten::mul", lines
    assert lines[2].startswith("aten::sub\t") and "[2, 3]" in lines[2], lines

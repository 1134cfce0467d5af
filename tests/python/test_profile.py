"""mspti.Profile: tables from the analysis engine of msptictl report."""

import json
import os
import stat
import subprocess

import pytest

from conftest import run_python

import mspti
import mspti.npusim as sim

KERNELS = {"ProfConv": 3, "ProfMatMul": 2, "ProfAdam": 1}


@pytest.fixture(scope="module")
def stream():
    sim.set_device(0)
    s = sim.Stream()
    yield s
    s.destroy()


def workload(stream, prefix="", steps=1):
    ks = {n: sim.Kernel(prefix + n, sim.AI_CORE, fixed_ns=10000 * (i + 1))
          for i, n in enumerate(KERNELS)}
    host = sim.HostBuffer(1 << 16)
    dev = sim.DeviceBuffer(1 << 16)
    for _ in range(steps):
        with mspti.mstx.range("step"):
            sim.memcpy(dev, host, 1 << 16, sim.HOST_TO_DEVICE, stream)
            for n, count in KERNELS.items():
                for _ in range(count):
                    ks[n].launch(stream)
            stream.synchronize()
    dev.free()
    host.free()


@pytest.fixture(scope="module")
def prof(stream):
    with mspti.Profile() as p:
        workload(stream, steps=2)
    return p


def test_op_summary(prof):
    t = prof.op_summary()
    assert isinstance(t, mspti.Table)
    name_col, count_col = t.columns[0], t.columns[2]
    counts = {r[name_col]: r[count_col] for r in t.rows}
    assert counts == {n: 2 * c for n, c in KERNELS.items()}
    assert str(t).startswith("== ")
    assert all(isinstance(r[t.columns[3]], float) for r in t.rows)


def test_key_averages_sort_and_limit(prof):
    # No framework here: the rows are the launch calls and the kernels,
    # as torch.profiler lists runtime calls and kernels.
    ka = prof.key_averages()
    counts = {r.key: r.count for r in ka}
    for n, c in KERNELS.items():
        assert counts[n] == 2 * c
    assert counts["aclrtLaunchKernel"] == 2 * sum(KERNELS.values())
    text = ka.table(sort_by="count", row_limit=1)
    lines = text.splitlines()
    assert lines[1].split()[0] == "Name" and "# of Calls" in lines[1]
    assert lines[3].split()[0] == "aclrtLaunchKernel"
    # Device time: ProfMatMul 4 x 20 us, ProfConv 6 x 10, ProfAdam 2 x 30.
    top = ka.table(sort_by="npu_time_total", row_limit=3).splitlines()[3]
    assert top.split()[0] == "ProfMatMul"
    rows = {r.key: r for r in ka}
    assert rows["ProfMatMul"].self_npu_time_total == pytest.approx(80.0,
                                                                   rel=0.05)
    assert rows["ProfConv"].npu_time == pytest.approx(10.0, rel=0.05)
    assert rows["aclrtLaunchKernel"].cpu_time_total > 0
    assert rows["ProfConv"].cpu_time_total == 0
    with pytest.raises(KeyError):
        ka.table(sort_by="no such column")


def test_other_summaries(prof):
    assert prof.memory_summary().name
    comm = prof.communication_summary()
    assert len(comm) == 0
    steps = prof.step_summary()
    assert len(steps) >= 2
    sugg = prof.optimization_suggestions()
    assert isinstance(sugg, list)
    for s in sugg:
        assert set(s) == {"severity", "rule", "message"}


def msptictl(builddir):
    path = os.path.join(builddir, "client", "msptictl")
    if not os.access(path, os.X_OK):
        pytest.skip("msptictl not built")
    p = subprocess.run([path, "report", "--help"], capture_output=True,
                       text=True)
    if "report" not in (p.stdout + p.stderr):
        pytest.skip("msptictl has no report verb")
    return path


def test_tables_match_msptictl_report(prof, builddir):
    tool = msptictl(builddir)
    trace = prof.trace_path
    assert os.path.getsize(trace) > 0
    p = subprocess.run([tool, "report", trace], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == prof.report()
    for section, table in (("ops", prof.summary("ops")),
                           ("memory", prof.summary("memory")),
                           ("communication",
                            prof.summary("communication"))):
        p = subprocess.run([tool, "report", "--section", section, trace],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert p.stdout == table.text
        p = subprocess.run([tool, "report", "--json", "--section", section,
                            trace], capture_output=True, text=True,
                           timeout=120)
        assert json.loads(p.stdout)[section] == table.rows


def test_chrome_trace(prof, tmp_path):
    out = prof.export_chrome_trace(tmp_path / "trace.json")
    with open(out) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = [e.get("name") for e in events if e.get("ph") == "X"]
    for n, c in KERNELS.items():
        assert names.count(n) == 2 * c
    assert "step" in names
    assert any(n == "aclrtLaunchKernel" for n in names)


def test_exports_into_a_fifo_with_no_reader_fail_at_once(tmp_path):
    # A FIFO nobody reads: an OSError at once, not a wait for ever (the
    # engine's export held the GIL while it waited).  In a child, so that
    # the old behaviour fails by the timeout rather than hangs the suite.
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    code = r"""
import sys, mspti, mspti.npusim as sim
sim.set_device(0)
s = sim.Stream()
k = sim.Kernel("FifoK", sim.AI_CORE, fixed_ns=1000)
with mspti.Profile() as p:
    k.launch(s)
    s.synchronize()
for name, f in (("chrome", lambda: p.export_chrome_trace(sys.argv[1],
                                                         kineto=False)),
                ("trace", lambda: p.export_trace(sys.argv[1]))):
    try:
        f()
        print(name, "written")
    except OSError as e:
        print(name, "OSError", e)
"""
    try:
        # TMPDIR: a child killed by the timeout leaves its Profile's
        # temporary directory in tmp_path, not in /tmp.
        r = run_python(["-c", code, str(fifo)], timeout=60,
                       env={"TMPDIR": str(tmp_path)})
    except subprocess.TimeoutExpired:
        pytest.fail("an export into a FIFO with no reader waits for ever")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [l.split()[:2] for l in lines] == [["chrome", "OSError"],
                                              ["trace", "OSError"]], lines
    assert all("out.fifo" in l for l in lines), lines
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_schedule(stream):
    prof = mspti.Profile(schedule=mspti.schedule(wait=1, warmup=1, active=2,
                                                 repeat=1))
    ready = []
    prof.on_trace_ready = ready.append
    prof.start()
    for step in range(6):
        k = sim.Kernel("Sched%d" % step, sim.AI_CORE, fixed_ns=5000)
        k.launch(stream)
        stream.synchronize()
        prof.step()
    prof.stop()
    t = prof.op_summary()
    assert sorted(r[t.columns[0]] for r in t.rows) == ["Sched2", "Sched3"]
    assert ready == [prof]


def test_schedule_method_and_actions():
    s = mspti.schedule(wait=1, warmup=1, active=2, repeat=2)
    A = mspti.ProfilerAction
    assert [s(i) for i in range(9)] == [
        A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
        A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE]
    p = mspti.Profile().schedule(wait=0, warmup=0, active=1)
    assert p._schedule(0) == A.RECORD_AND_SAVE


def test_decorator_and_start_stop(stream):
    prof = mspti.Profile()

    @prof
    def work():
        sim.Kernel("Decorated", sim.AI_VECTOR, fixed_ns=2000).launch(stream)
        stream.synchronize()
        return 42

    assert work() == 42
    t = prof.op_summary()
    assert [r[t.columns[0]] for r in t.rows] == ["Decorated"]

    prof2 = mspti.Profile()
    prof2.start()
    sim.Kernel("StartStop", sim.AI_VECTOR, fixed_ns=2000).launch(stream)
    stream.synchronize()
    prof2.stop()
    t = prof2.op_summary()
    assert [r[t.columns[0]] for r in t.rows] == ["StartStop"]


def test_profile_beside_a_monitor(stream):
    got = []
    mon = mspti.KernelMonitor()
    mon.start(got.append)
    with mspti.Profile() as prof:
        sim.Kernel("Both", sim.AI_CORE, fixed_ns=1000).launch(stream)
        stream.synchronize()
    sim.Kernel("MonitorOnly", sim.AI_CORE, fixed_ns=1000).launch(stream)
    stream.synchronize()
    mon.stop()
    assert [k.name for k in got] == ["Both", "MonitorOnly"]
    t = prof.op_summary()
    assert [r[t.columns[0]] for r in t.rows] == ["Both"]


def kernel_names(prof):
    t = prof.op_summary()
    return sorted(r[t.columns[0]] for r in t.rows)


def chrome_kernels(prof, path):
    with open(prof.export_chrome_trace(path)) as f:
        doc = json.load(f)
    return sorted({e["name"] for e in doc["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") == "kernel"})


def test_reused_profile_reports_each_window(stream, tmp_path):
    prof = mspti.Profile()
    for i, name in enumerate(("WindowA", "WindowB", "WindowC")):
        prof.start()
        sim.Kernel(name, sim.AI_CORE, fixed_ns=3000).launch(stream)
        stream.synchronize()
        prof.stop()
        assert kernel_names(prof) == [name]
        assert chrome_kernels(prof, tmp_path / ("w%d.json" % i)) == [name]
        p = subprocess.run([os.path.join(os.environ.get(
            "MSPTI_TEST_BUILDDIR", "."), "client", "msptictl"), "report",
            "--json", "--section", "ops", prof.trace_path],
            capture_output=True, text=True, timeout=120)
        if p.returncode == 0:
            assert [r["OP Type"] for r in json.loads(p.stdout)["ops"]] == \
                [name]


def test_reused_profile_with_trace_path(stream, tmp_path):
    path = tmp_path / "fixed.trace"
    prof = mspti.Profile(trace_path=str(path))
    for name in ("FixedA", "FixedB"):
        with prof:
            sim.Kernel(name, sim.AI_CORE, fixed_ns=3000).launch(stream)
            stream.synchronize()
        assert kernel_names(prof) == [name]
        assert prof.trace_path == str(path)


def test_decorator_reports_each_call(stream):
    prof = mspti.Profile()

    @prof
    def work(name):
        sim.Kernel(name, sim.AI_VECTOR, fixed_ns=2000).launch(stream)
        stream.synchronize()

    work("CallOne")
    assert kernel_names(prof) == ["CallOne"]
    work("CallTwo")
    assert kernel_names(prof) == ["CallTwo"]


def test_on_trace_ready_reads_every_output(stream, tmp_path):
    seen = []

    def ready(p):
        n = len(seen)
        seen.append({
            "ops": kernel_names(p),
            "chrome": chrome_kernels(p, tmp_path / ("c%d.json" % n)),
            "keyavg": p.key_averages().table(sort_by="count", row_limit=5),
            "report": p.report(),
            "steps": len(p.step_summary()),
            "csv": os.listdir(p.export_csv(tmp_path / ("csv%d" % n))),
            "trace": os.path.getsize(p.export_trace(
                tmp_path / ("t%d.trace" % n))),
        })

    prof = mspti.Profile(schedule=mspti.schedule(wait=1, warmup=0, active=2,
                                                 repeat=2),
                         on_trace_ready=ready)
    prof.start()
    for step in range(7):
        sim.Kernel("Cycle%d" % step, sim.AI_CORE, fixed_ns=4000).launch(
            stream)
        stream.synchronize()
        prof.step()
    prof.stop()
    assert [s["ops"] for s in seen] == [["Cycle1", "Cycle2"],
                                        ["Cycle4", "Cycle5"]]
    assert [s["chrome"] for s in seen] == [s["ops"] for s in seen]
    for s in seen:
        assert "# of Calls" in s["keyavg"]
        assert "Capture summary" in s["report"]
        assert "op_summary.csv" in s["csv"] and s["trace"] > 0
    # After stop, the outputs describe the last window.
    assert kernel_names(prof) == ["Cycle4", "Cycle5"]


def test_key_averages_torch_sort_keys(prof):
    ka = prof.key_averages()
    for key, attr in (("cpu_time_total", "cpu_time_total"),
                      ("self_cpu_time_total", "self_cpu_time_total"),
                      ("cpu_time", "cpu_time"),
                      ("device_time_total", "npu_time_total"),
                      ("self_device_time_total", "self_npu_time_total"),
                      ("cuda_time_total", "npu_time_total"),
                      ("npu_time_total", "npu_time_total"),
                      ("count", "count"), ("Self CPU", "self_cpu_time_total"),
                      ("# of Calls", "count")):
        lines = ka.table(sort_by=key, row_limit=2).splitlines()
        assert len(lines) == 3 + 2 + 1 + 2, key
        best = max(getattr(r, attr) for r in ka)
        assert getattr(ka.sorted(key)[0], attr) == best
        assert lines[3].split()[0] == ka.sorted(key)[0].key


LOSS_CHILD = r"""
import resource, sys
import mspti, mspti.npusim as sim
from mspti import MsptiActivityKind as K
sim.set_device(0)
s = sim.Stream()
k = sim.Kernel("LossK", sim.AI_CORE, fixed_ns=1000)
mspti.KernelMonitor.set_buffer_size(256)
prof = mspti.Profile(kinds=[K.KERNEL, K.API])
prof.start()
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
vm = int(open("/proc/self/statm").read().split()[0]) * \
    resource.getpagesize()
# No room for a 256 MB activity buffer: libmspti must drop records.
resource.setrlimit(resource.RLIMIT_AS, (vm + (96 << 20), hard))
for _ in range(20):
    k.launch(s)
s.synchronize()
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
prof.stop()
t = prof.summary("summary")
items = {r["Item"]: r["Value"] for r in t.rows}
print("LOST", items["records lost"], "COMPLETE", items["complete"])
print("WARN", len(prof.warnings()))
"""


def test_profile_never_hides_a_loss():
    # A sanitizer build's allocator aborts on a failed malloc unless told
    # to return NULL, as libc's does.
    asan = os.environ.get("ASAN_OPTIONS")
    env = {"ASAN_OPTIONS": asan + ":allocator_may_return_null=1"} \
        if asan else None
    p = run_python(LOSS_CHILD, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(l for l in p.stdout.splitlines() if l.startswith("LOST"))
    lost = int(line.split()[1])
    assert lost > 0, p.stdout
    assert "COMPLETE yes" not in line, line
    warn = next(l for l in p.stdout.splitlines() if l.startswith("WARN"))
    assert int(warn.split()[1]) > 0

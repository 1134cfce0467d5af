"""mspti.Profile: tables from the analysis engine of msptictl report."""

import json
import os
import subprocess

import pytest

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
    ka = prof.key_averages()
    text = ka.table(sort_by="count", row_limit=1)
    lines = text.splitlines()
    assert lines[0].startswith("== ") and len(lines) == 3
    assert lines[2].startswith("ProfConv")
    full = ka.table()
    assert full == str(prof.op_summary())
    by_total = ka.table(sort_by="total_time").splitlines()[2:]
    assert by_total[0].startswith("ProfAdam") or \
        by_total[0].startswith("ProfMatMul") or \
        by_total[0].startswith("ProfConv")
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
    for section, table in (("ops", prof.op_summary()),
                           ("memory", prof.memory_summary()),
                           ("communication", prof.communication_summary())):
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

"""Each monitor receives the right records from a simulator workload."""

import collections
import json
import threading

import pytest

import mspti
import mspti.npusim as sim
from conftest import run_python


@pytest.fixture(scope="module")
def stream():
    sim.set_device(0)
    s = sim.Stream()
    yield s
    s.destroy()


def test_enums_match_c():
    assert mspti.MsptiResult.ERROR_WITHOUT_LD_PRELOAD == 6
    assert mspti.MsptiResult.ERROR_INNER == 999
    assert mspti.MsptiActivityKind.COMMUNICATION == 9
    assert mspti.MsptiActivityKind.RUNTIME_API == 12
    assert mspti.MsptiActivityFlag.MARKER_END_WITH_DEVICE == 32
    assert mspti.MsptiActivitySourceKind.DEVICE == 1
    assert mspti.MsptiCommunicationDataType.HIF8 == 14
    assert mspti.MsptiCommunicationDataType.INVALID_TYPE == 0xFFFF


def test_kernel_monitor(stream):
    got = []
    threads = set()

    def cb(k):
        threads.add(threading.current_thread().name)
        got.append(k)

    mm = sim.Kernel("PyMatMul", sim.AI_CORE, flops=1e9, bytes=1e6)
    relu = sim.Kernel("PyRelu", sim.AI_VECTOR, fixed_ns=3000)
    mon = mspti.KernelMonitor()
    assert mon.start(cb) == mspti.MsptiResult.SUCCESS
    for _ in range(5):
        mm.launch(stream, 8)
    for _ in range(3):
        relu.launch(stream)
    stream.synchronize()
    assert mon.stop() == mspti.MsptiResult.SUCCESS
    # stop() flushed: everything is there without waiting.
    names = collections.Counter(k.name for k in got)
    assert names == {"PyMatMul": 5, "PyRelu": 3}
    assert threads == {"mspti-delivery"}
    sid = stream.id
    for k in got:
        assert isinstance(k, mspti.KernelData)
        assert k.kind == mspti.MsptiActivityKind.KERNEL
        assert k.device_id == 0 and k.stream_id == sid
        assert 0 < k.start <= k.end
        assert k.correlation_id > 0
    relus = [k for k in got if k.name == "PyRelu"]
    assert all(k.type == "KERNEL_AIVEC" for k in relus)
    # Modelled as exactly 3000 ns of device time; mapped to host time through
    # the fitted clock model, so allow its drift error (ppm, i.e. < 1 ns)
    # plus rounding.
    assert all(abs((k.end - k.start) - 3000) <= 3 for k in relus), \
        [k.end - k.start for k in relus]
    # After stop nothing more arrives.
    relu.launch(stream)
    stream.synchronize()
    mspti.KernelMonitor.flush_all()
    assert len(got) == 8


def test_two_monitors_same_kind(stream):
    a, b = [], []
    k = sim.Kernel("PyTwice", sim.AI_CORE, fixed_ns=1000)
    m1, m2 = mspti.KernelMonitor(), mspti.KernelMonitor()
    m1.start(a.append)
    m2.start(b.append)
    k.launch(stream)
    stream.synchronize()
    m1.stop()
    k.launch(stream)
    stream.synchronize()
    m2.stop()
    assert [x.name for x in a] == ["PyTwice"]
    assert [x.name for x in b] == ["PyTwice", "PyTwice"]


def test_buffer_size_limits(stream):
    R = mspti.MsptiResult
    for bad in (0, -1, 257, 1.5, "8", None, True):
        assert mspti.KernelMonitor.set_buffer_size(bad) == \
            R.ERROR_INVALID_PARAMETER
    assert mspti.KernelMonitor.set_buffer_size(256) == R.SUCCESS
    assert mspti.KernelMonitor.set_buffer_size(1) == R.SUCCESS
    # A 1 MB buffer (applies at this start) still delivers everything.
    got = []
    k = sim.Kernel("PySmallBuf", sim.AI_VECTOR, fixed_ns=500)
    mon = mspti.KernelMonitor()
    mon.start(got.append)
    for _ in range(200):
        k.launch(stream)
    stream.synchronize()
    mon.stop()
    assert mspti.KernelMonitor.set_buffer_size(8) == R.SUCCESS
    assert len(got) == 200


def test_flush_period_and_flush_all(stream):
    R = mspti.MsptiResult
    assert mspti.KernelMonitor.flush_period(-1) == R.ERROR_INVALID_PARAMETER
    got = []
    k = sim.Kernel("PyFlushed", sim.AI_CORE, fixed_ns=1000)
    mon = mspti.KernelMonitor()
    mon.start(got.append)
    assert mspti.KernelMonitor.flush_period(10) == R.SUCCESS
    k.launch(stream)
    stream.synchronize()
    # flush_all returns once the callback has seen the record.
    assert mspti.KernelMonitor.flush_all() == R.SUCCESS
    assert [x.name for x in got] == ["PyFlushed"]
    assert mspti.KernelMonitor.flush_period(0) == R.SUCCESS
    mon.stop()


def test_start_stop_monitor_classmethods(stream):
    got = []
    mon = mspti.KernelMonitor()
    assert mspti.KernelMonitor.start_monitor() == mspti.MsptiResult.SUCCESS
    mon.start(got.append)
    k = sim.Kernel("PyStopAll", sim.AI_CORE, fixed_ns=1000)
    k.launch(stream)
    stream.synchronize()
    assert mspti.KernelMonitor.stop_monitor() == mspti.MsptiResult.SUCCESS
    assert not mon.started
    assert [x.name for x in got] == ["PyStopAll"]


# HCCL needs several processes, forked before any device is opened: run
# them in a fresh interpreter.
HCCL_SCRIPT = r"""
import json, multiprocessing as mp, sys
import mspti, mspti.npusim as sim

def rank(r, n, root, q):
    hccl, comm = [], []
    hm, cm = mspti.HcclMonitor(), mspti.CommunicationMonitor()
    res = [int(hm.start(hccl.append)), int(cm.start(comm.append))]
    sim.set_device(r)
    c = sim.Communicator(n, r, root)
    s = sim.Stream()
    buf = sim.DeviceBuffer(4096 * 4)
    for _ in range(3):
        c.all_reduce(buf, buf, 4096, sim.FP32, sim.SUM, s)
    c.broadcast(buf, 1024, sim.FP32, 0, s)
    s.synchronize()
    hm.stop(); cm.stop()
    q.put({"rank": r, "res": res, "comm_name": c.name, "stream": s.id,
           "hccl": [(h.name, h.device_id, h.stream_id, h.comm_name,
                     h.bandwidth, h.end >= h.start) for h in hccl],
           "comm": [(x.name, int(x.data_type), x.count, x.device_id,
                     x.alg_type, x.comm_name, x.correlation_id)
                    for x in comm]})

root = sim.get_root_info()
ctx = mp.get_context("fork")
q = ctx.Queue()
ps = [ctx.Process(target=rank, args=(i, 2, root, q)) for i in range(2)]
for p in ps: p.start()
out = [q.get(timeout=120) for _ in ps]
for p in ps: p.join()
print(json.dumps(sorted(out, key=lambda o: o["rank"])))
sys.exit(max(p.exitcode for p in ps))
"""


def test_hccl_and_communication_monitors():
    p = run_python(HCCL_SCRIPT, timeout=240)
    assert p.returncode == 0, p.stderr
    ranks = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(ranks) == 2
    for r in ranks:
        assert r["res"] == [0, 0]
        names = collections.Counter(h[0] for h in r["hccl"])
        assert names == {"HcclAllReduce": 3, "HcclBroadcast": 1}, names
        for name, dev, sid, comm_name, bw, ordered in r["hccl"]:
            assert dev == r["rank"] and sid == r["stream"] and ordered
            assert comm_name and r["comm_name"].lstrip("/").startswith(
                comm_name.lstrip("/")[:8])
            assert bw >= 0
        comm = r["comm"]
        assert collections.Counter(c[0] for c in comm) == names
        for name, dtype, count, dev, alg, comm_name, corr in comm:
            assert dtype == int(mspti.MsptiCommunicationDataType.FP32)
            assert count == (4096 if name == "HcclAllReduce" else 1024)
            assert dev == r["rank"] and corr > 0 and alg


def test_stats_per_kind(stream):
    k = sim.Kernel("PyCounted", sim.AI_CORE, fixed_ns=1000)
    before = mspti.stats()
    got = []
    mon = mspti.KernelMonitor()
    assert mon.start(got.append) == mspti.MsptiResult.SUCCESS
    for _ in range(7):
        k.launch(stream)
    stream.synchronize()
    mon.stop()
    after = mspti.stats()
    kind = mspti.MsptiActivityKind.KERNEL
    assert len(got) == 7
    assert after["delivered"].get(kind, 0) - \
        before["delivered"].get(kind, 0) == 7
    assert after["dropped"].get(kind, 0) == before["dropped"].get(kind, 0)
    assert isinstance(after["dropped_total"], int)
    assert all(isinstance(x, mspti.MsptiActivityKind)
               for x in after["delivered"])


FORK_SCRIPT = r"""
import os, threading, time
import mspti

gate = threading.Event()
seen = []

def slow(m):
    seen.append(m.name)
    gate.wait(5)           # holds the delivery thread while we fork

mon = mspti.MstxMonitor()
mon.start(mark_cb=slow)
mspti.mstx.mark("parent-1")
t1 = threading.Thread(target=mspti.MstxMonitor.flush_all); t1.start()
while not seen:
    time.sleep(0.01)
mspti.mstx.mark("parent-2")
t2 = threading.Thread(target=mspti.MstxMonitor.flush_all); t2.start()
time.sleep(0.2)            # parent-2's buffer queued, not delivered
pid = os.fork()
if pid == 0:
    got = []
    child = mspti.MstxMonitor()
    r = child.start(mark_cb=lambda m: got.append(m.name))
    mspti.mstx.mark("child")
    s = child.stop()
    # The parent's monitor object, inherited, stops too.
    s2 = mon.stop()
    print("child", int(r), int(s), int(s2), got, flush=True)
    os._exit(0)
gate.set()
_, status = os.waitpid(pid, 0)
t1.join(); t2.join()
mon.stop()
print("parent", os.WEXITSTATUS(status), sorted(seen), flush=True)
"""


def test_fork_child_monitors():
    # A child of a process with running monitors can start and stop its
    # own without hanging, and delivers none of its parent's records.
    p = run_python(FORK_SCRIPT, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert "child 0 0 0 ['child']" in lines, p.stdout
    assert "parent 0 ['parent-1', 'parent-2']" in lines, p.stdout


def test_stats_count_channel_losses():
    # A device channel far too small for the run: whatever is lost shows
    # in stats()["dropped"][KERNEL], so delivered + dropped == launched.
    code = r"""
import mspti, mspti.npusim as sim
sim.set_device(0)
s = sim.Stream()
k = sim.Kernel("Burst", sim.AI_CORE, fixed_ns=1000)
KERNEL = mspti.MsptiActivityKind.KERNEL
before = mspti.stats()
got = []
mon = mspti.KernelMonitor()
mon.start(got.append)
for _ in range(20000):
    k.launch(s)
s.synchronize()
mon.stop()
after = mspti.stats()
dropped = after["dropped"].get(KERNEL, 0) - before["dropped"].get(KERNEL, 0)
print(len(got) + dropped, after["dropped_total"] >= dropped)
"""
    p = run_python(code, env={"NPUSIM_CHANNEL_RECORDS": "16"}, timeout=240)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["20000", "True"], p.stdout

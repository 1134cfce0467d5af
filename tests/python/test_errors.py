"""A callback that raises does not kill the process and is reported;
kinds that need LD_PRELOAD say so clearly without it."""

import os
import sys

import mspti
import mspti.npusim as sim
from conftest import run_python


def test_raising_callback_is_reported_and_counted(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    before = mspti.callback_errors()
    calls = []

    def bad(k):
        calls.append(k.name)
        raise ValueError("boom %s" % k.name)

    sim.set_device(0)
    s = sim.Stream()
    k = sim.Kernel("PyRaises", sim.AI_CORE, fixed_ns=1000)
    mon = mspti.KernelMonitor()
    mon.start(bad)
    for _ in range(4):
        k.launch(s)
    s.synchronize()
    mon.stop()
    s.destroy()
    assert calls == ["PyRaises"] * 4        # delivery went on
    assert mspti.callback_errors() - before == 4
    assert len(seen) == 4
    assert all(isinstance(u.exc_value, ValueError) for u in seen)
    assert seen[0].object is bad


def test_raising_callback_in_child_process_prints_and_exits_0():
    code = r"""
import mspti, mspti.npusim as sim
def bad(m): raise RuntimeError("callback failed on purpose")
mon = mspti.MstxMonitor(); mon.start(mark_cb=bad)
mspti.mstx.mark("x"); mspti.mstx.mark("y")
mon.stop()
print("alive", mspti.callback_errors())
"""
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "alive 2"
    assert "callback failed on purpose" in p.stderr
    assert "Exception ignored" in p.stderr


def test_without_preload_hccl_is_refused_with_a_warning():
    code = r"""
import warnings
import mspti, mspti.npusim as sim
sim.set_device(0)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = mspti.HcclMonitor().start(print)
print(int(r), [x.category.__name__ for x in w])
print(str(w[0].message) if w else "")
# KERNEL and COMMUNICATION would record nothing: refused, with a warning
# naming the kind, rather than SUCCESS and silence.
for cls in (mspti.KernelMonitor, mspti.CommunicationMonitor):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = cls().start(print)
    print(int(r), [x.category.__name__ for x in w])
    print(str(w[0].message) if w else "")
mspti.KernelMonitor.stop_monitor()
# MSTX host markers need no interposition.
got = []
m = mspti.MstxMonitor(); m.start(mark_cb=got.append)
mspti.mstx.mark("no preload"); m.stop()
print([x.name for x in got])
"""
    p = run_python(code, env={"LD_PRELOAD": ""})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "6 ['MsptiPreloadWarning']"
    assert "LD_PRELOAD=libmspti.so" in lines[1] and "HCCL" in lines[1]
    assert lines[2] == "6 ['MsptiPreloadWarning']"
    assert "KERNEL" in lines[3]
    assert lines[4] == "6 ['MsptiPreloadWarning']"
    assert "COMMUNICATION" in lines[5]
    # Only true advice: importing mspti first does not interpose.
    for line in (lines[1], lines[3], lines[5]):
        assert "import mspti" not in line and "before the runtime" not in line
    assert lines[6] == "['no preload']"


def test_monitor_before_the_runtime_is_loaded():
    # Without LD_PRELOAD, a monitor started before the runtime is loaded
    # is refused too (it could never see a launch).
    code = r"""
import sys, warnings
import mspti
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = mspti.KernelMonitor().start(print)
print(int(r), len(w), "_npusim" in " ".join(sys.modules))
"""
    p = run_python(code, env={"LD_PRELOAD": ""})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:2] == ["6", "1"], p.stdout

    # With it, the same monitor works once the runtime comes.
    code = r"""
import mspti
got = []
mon = mspti.KernelMonitor()
r = mon.start(got.append)
import mspti.npusim as sim
sim.set_device(0)
s = sim.Stream()
k = sim.Kernel("Later", sim.AI_CORE, fixed_ns=1000)
for _ in range(3):
    k.launch(s)
s.synchronize()
mon.stop()
print(int(r), sorted(x.name for x in got))
"""
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "0 ['Later', 'Later', 'Later']"

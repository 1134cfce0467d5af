"""`msptictl start --pid N --kinds op` on a running PyTorch job: a real
msptid on a private runtime dir, the job under the agent (the bridge), the
real msptictl.  The job's framework ops reach the session's trace as MSTX
ranges of domain "framework", each kernel linked to its op by external
correlation; before and after the session the job has no observer
installed."""

import collections
import json
import os
import signal
import subprocess
import sys
import time

import pytest

try:
    import torch  # noqa: F401
except ImportError:
    torch = None

pytestmark = pytest.mark.skipif(
    torch is None, reason="PyTorch is not importable (Debian: apt-get "
    "install python3-torch)")

JOB = r"""
import json, os, sys, time
import torch
import mspti
import mspti.npusim.torch as npu
from mspti import _session
import torch.nn.modules.module as mm
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

d = sys.argv[1]
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).npu()
x = torch.randn(1, 3, 8, 8)

def step():
    with torch.no_grad():
        model(x.npu())
    npu.synchronize()

def state():
    return [len(mm._global_forward_pre_hooks),
            len(_get_current_dispatch_mode_stack())]

def wait(path):
    for _ in range(2400):
        if os.path.exists(os.path.join(d, path)):
            return
        time.sleep(0.05)
    sys.exit("no " + path)

step()
out = {"before": state()}
open(os.path.join(d, "ready"), "w").close()
wait("go")
for _ in range(200):            # the watcher's next poll
    if _session._st.on:
        break
    time.sleep(0.05)
out["seen"] = _session._st.on
for _ in range(3):
    step()
out["during"] = state()
open(os.path.join(d, "done"), "w").close()
wait("after")
for _ in range(200):
    if not _session._st.on:
        break
    time.sleep(0.05)
step()                          # drops the observer on this thread
time.sleep(3 * _session.POLL_S)  # and the watcher removes the hook
step()
out["after"] = state()
print(json.dumps(out))
"""


def wait_for(pred, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("kinds", ["op,kernel,api", "op,shapes,kernel,api"])
def test_session_records_framework_ops(builddir, tmp_path, kinds):
    msptid = os.path.join(builddir, "daemon", "msptid")
    ctl = os.path.join(builddir, "client", "msptictl")
    dump = os.path.join(builddir, "tests", "integ", "trace-dump")
    for p in (msptid, ctl, dump):
        if not os.access(p, os.X_OK):
            pytest.skip("%s not built" % p)
    rt = tmp_path / "rt"
    env = dict(os.environ, MSPTID_RUNTIME_DIR=str(rt))
    log = open(tmp_path / "daemon.log", "w")
    daemon = subprocess.Popen([msptid, "--foreground", "--runtime-dir",
                               str(rt)], stdout=log, stderr=log,
                              env=env)
    job = None
    try:
        assert wait_for(lambda: (rt / "ctl.sock").exists() and
                        subprocess.run([ctl, "-r", str(rt), "status"],
                                       capture_output=True).returncode == 0)
        (tmp_path / "job.py").write_text(JOB)
        job = subprocess.Popen([sys.executable, str(tmp_path / "job.py"),
                                str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)

        def registered():
            p = subprocess.run([ctl, "-r", str(rt), "--json", "list"],
                               capture_output=True, text=True)
            return p.returncode == 0 and any(
                a["pid"] == job.pid for a in json.loads(p.stdout))
        assert wait_for(lambda: (tmp_path / "ready").exists(), 120)
        assert wait_for(registered)
        trace = str(tmp_path / "ops.mspti")
        p = subprocess.run([ctl, "-r", str(rt), "--json", "start", "--pid",
                            str(job.pid), "--kinds", kinds,
                            "--output", trace], capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        sid = json.loads(p.stdout)["session"]
        (tmp_path / "go").touch()
        assert wait_for(lambda: (tmp_path / "done").exists(), 120)
        p = subprocess.run([ctl, "-r", str(rt), "--json", "stop",
                            str(sid)], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        (tmp_path / "after").touch()
        out, err = job.communicate(timeout=120)
        assert job.returncode == 0, out + err
        state = json.loads(out.splitlines()[-1])
    finally:
        if job is not None and job.poll() is None:
            job.kill()
            job.wait()
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()
    # No observer before the session or after it; one while it ran.
    assert state["before"] == [0, 1], state      # the bridge's own mode
    assert state["seen"] and state["during"] == [1, 2], state
    assert state["after"] == [0, 1], state
    p = subprocess.run([dump, trace], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    recs = [json.loads(l) for l in p.stdout.splitlines()]
    ranges = [r for r in recs if r.get("type") == "marker" and
              r.get("domain") == "framework"]
    # With "shapes" a range's message is the op name, a TAB and its input
    # shapes and dtypes as JSON (torch.profiler's "Input Dims", "Input
    # type"); without, the name alone.
    starts, shapes = {}, {}
    for r in ranges:
        if r["flag"] != 2:
            continue
        name, tab, extra = r["name"].partition("\t")
        starts[r["id"]] = name
        if "shapes" in kinds:
            if tab:
                shapes.setdefault(name, json.loads(extra))
        else:
            assert not tab, r
    names = collections.Counter(starts.values())
    assert names["aten::convolution"] == 3 and names["aten::relu"] == 3, \
        names
    ext = {r["corr"]: r["external_id"] for r in recs
           if r.get("type") == "external_correlation"}
    kernels = [r for r in recs if r.get("type") == "kernel"]
    conv = [k for k in kernels if k["name"] == "Conv2D"]
    assert len(conv) == 3
    for k in conv:
        assert starts[ext[k["corr"]]] == "aten::convolution", k
    relu = [k for k in kernels if k["name"] == "Relu"]
    assert relu and all(starts[ext[k["corr"]]] == "aten::relu"
                        for k in relu)
    if "shapes" in kinds:
        conv = shapes["aten::convolution"]
        assert conv["Input Dims"][:3] == [[1, 3, 8, 8], [4, 3, 3, 3], [4]], \
            conv
        assert conv["Input type"][:3] == ["float32"] * 3, conv
        assert shapes["aten::relu"]["Input Dims"] == [[1, 4, 6, 6]], shapes

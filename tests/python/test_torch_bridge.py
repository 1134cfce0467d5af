"""mspti.npusim.torch: torch modules on the simulated NPU, seen by msPTI.

In-process tests run the bridge under the test's LD_PRELOAD=libmspti.so
and check the KERNEL records a KernelMonitor receives; the examples run as
real processes, two of them under a real `msptictl run` capture (a private
msptid) whose report is checked."""

import collections
import json
import os
import subprocess
import sys
import time

import pytest

import mspti
from conftest import run_python

try:
    import torch
except ImportError:
    torch = None
else:
    import mspti.npusim.torch as npu
    from mspti.npusim.torch import _ops

# Skipped tests, not an empty module: run.sh counts "no tests" as failure.
pytestmark = pytest.mark.skipif(
    torch is None, reason="PyTorch is not importable (Debian: apt-get "
    "install python3-torch python3-torchvision)")


def capture(fn):
    """Runs fn() and returns the KERNEL records of what it launched."""
    got = []
    mon = mspti.KernelMonitor()
    assert mon.start(got.append) == mspti.MsptiResult.SUCCESS
    try:
        fn()
        npu.synchronize()
    finally:
        mon.stop()
    return got


def small_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1, bias=True),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(16, 10))


def names(records):
    return collections.Counter(k.name for k in records)


def test_inference_launches_ascend_kernels():
    model = small_cnn().eval().npu()
    npu.synchronize()
    x = torch.randn(2, 3, 16, 16)
    before = npu.stats().get("kernels", 0)

    def run():
        with torch.no_grad():
            y = model(x.npu())
        assert y.shape == (2, 10) and y.is_meta and y.is_npu
    got = capture(run)
    n = names(got)
    assert n["Conv2D"] == 2 and n["BNInfer"] == 1 and n["Relu"] == 1
    assert n["MaxPoolWithArgmaxV1"] == 1 and n["MatMul"] == 1
    # The input goes 5HD before the first conv, back to ND before Linear.
    assert n["TransData"] == 2
    # Every kernel the bridge launched arrived as a KERNEL record.
    assert len(got) == npu.stats()["kernels"] - before
    types = {k.name: k.type for k in got}
    assert types["Conv2D"] == "KERNEL_AICORE"
    assert types["MatMul"] == "KERNEL_AICORE"
    assert types["Relu"] == "KERNEL_AIVEC"
    assert all(k.end > k.start for k in got)


def test_cost_follows_shapes():
    # The same conv on 64x the pixels moves ~50x the bytes: it lasts longer.
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).npu()
    npu.synchronize()
    with torch.no_grad():
        small = capture(lambda: conv(torch.randn(1, 64, 32, 32).npu()))
        big = capture(lambda: conv(torch.randn(1, 64, 256, 256).npu()))
    d = {}
    for tag, recs in (("small", small), ("big", big)):
        d[tag] = [k.end - k.start for k in recs if k.name == "Conv2D"][0]
    assert d["big"] > 3 * d["small"], d


def test_backward_and_fused_optimizer():
    model = small_cnn().npu()
    params = [p for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, t = torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))
    derived = npu.stats().get("derived_shapes", 0)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x.npu()), t.npu())
        loss.backward()
        opt.step()
        assert loss.item() == 0.0   # values are not computed
    got = capture(step)
    n = names(got)
    # torch 1.13 has no meta kernel for convolution_backward: the bridge
    # derived its outputs, and every gradient has its parameter's shape.
    assert npu.stats()["derived_shapes"] >= derived + 2
    for p in params:
        assert p.grad is not None and p.grad.is_meta
        assert p.grad.shape == p.shape
    assert n["Conv2DBackpropFilter"] == 2
    assert n["Conv2DBackpropInput"] == 1     # the input needs no gradient
    assert n["BiasAddGrad"] == 2
    assert n["BNTrainingReduce"] == 1 and n["BNTrainingUpdate"] == 1
    assert n["BNTrainingUpdateGrad"] == 1 and n["BNTrainingReduceGrad"] == 1
    assert n["ReluGrad"] == 1 and n["MaxPoolGradWithArgmaxV1"] == 1
    assert n["LogSoftmaxV2"] == 1 and n["NLLLossGrad"] == 1
    # One fused update per parameter instead of its elementwise ops.
    assert n["ApplyMomentum"] == len(params)
    assert not n["Mul"] and not n["Addcmul"]

    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    got = capture(step)
    assert names(got)["ApplyAdam"] == len(params)


def test_transformer_ops():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(50, 32)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1,
                                             activation="gelu",
                                             batch_first=True)
    head = torch.nn.Linear(32, 50)
    model = torch.nn.ModuleDict(dict(emb=emb, layer=layer, head=head)).npu()
    opt = torch.optim.AdamW(model.parameters())
    tok = torch.randint(0, 50, (2, 8))

    def step():
        h = model["layer"](model["emb"](tok.npu()))
        loss = torch.nn.functional.cross_entropy(
            model["head"](h).reshape(-1, 50), tok.npu().reshape(-1))
        loss.backward()
        opt.step()
    n = names(capture(step))
    for k in ("GatherV2", "MatMul", "BatchMatMul", "SoftmaxV2",
              "SoftmaxGrad", "LayerNorm", "LayerNormGrad", "Gelu", "GeluGrad",
              "DropOutGenMaskV3", "DropOutDoMask", "EmbeddingDenseGrad",
              "ApplyAdamW"):
        assert n[k] > 0, (k, n)
    assert n["ApplyAdamW"] == len(list(model.parameters()))
    assert npu.stats()["unmapped"] == {}


def test_npu_copies_are_memcpys():
    x = torch.arange(1000, dtype=torch.float32)
    h2d = npu.stats().get("memcpy_h2d", 0)
    d2h = npu.stats().get("memcpy_d2h", 0)
    y = x.npu()
    z = x.to("npu")
    w = x.to(npu.device())
    assert y.is_meta and z.is_meta and w.is_meta and y.shape == x.shape
    assert npu.stats()["memcpy_h2d"] == h2d + 3
    back = (y * 2).cpu()
    assert back.device.type == "cpu" and back.shape == x.shape
    assert npu.stats()["memcpy_d2h"] == d2h + 1
    # torch_npu's namespace, for scripts that call torch.npu.*.
    assert torch.npu is npu and torch.npu.current_device() == 0
    # Host-only work is untouched by the bridge.
    assert (x + 1)[5].item() == 6.0


def test_dataloader_work_is_a_host_range():
    data = torch.utils.data.TensorDataset(torch.randn(6, 3))
    ranges = []
    mon = mspti.MstxMonitor()
    assert mon.start(range_cb=ranges.append) == mspti.MsptiResult.SUCCESS
    for (batch,) in torch.utils.data.DataLoader(data, batch_size=2):
        batch.npu()
    mon.stop()
    host = [r for r in ranges if r.name == "DataLoader" and
            r.source_kind == mspti.MsptiActivitySourceKind.HOST]
    # Three batches, and the call that ends the iteration.
    assert len(host) == 4, [(r.name, r.source_kind) for r in ranges]
    assert all(r.end >= r.start for r in host)


def test_ddp_buckets_as_torch():
    mb = 1 << 20
    ps = [torch.empty(n // 4, device="meta") for n in
          (2 * mb, 20 * mb, 10 * mb, 512 * 1024, 4096)]
    got = npu.compute_buckets(ps, 25 * mb)
    sizes = [[_ops.nbytes(p) for p in b] for b in got]
    # Reverse order; the first bucket closes at >= 1 MB, later at 25 MB.
    assert sizes == [[4096, 512 * 1024, 10 * mb], [20 * mb, 2 * mb]]
    mixed = [torch.empty(10, device="meta"),
             torch.empty(10, dtype=torch.float16, device="meta")]
    assert [len(b) for b in npu.compute_buckets(mixed, 25 * mb)] == [1, 1]


def test_ddp_overlaps_all_reduce_with_backward(monkeypatch):
    from mspti.npusim import get_root_info, ROOT_INFO_ENV
    monkeypatch.setenv(ROOT_INFO_ENV, get_root_info().hex())
    if not npu.is_initialized():
        npu.init_process_group("hccl", rank=0, world_size=1)
    for overlap in (True, False):
        # Three 1 MB weights: three buckets at bucket_cap_mb=1.
        model = torch.nn.Sequential(
            torch.nn.Linear(512, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 512)).npu()
        ddp = npu.DistributedDataParallel(model, bucket_cap_mb=1,
                                          overlap=overlap)
        assert [len(b.params) for b in ddp.buckets] == [2, 2, 2]
        x = torch.randn(8, 512).npu()
        # Once unrecorded: the communicator's first collective sets up.
        ddp(x).sum().backward()
        npu.synchronize()
        ks, hs = [], []
        km, hm = mspti.KernelMonitor(), mspti.HcclMonitor()
        assert km.start(ks.append) == mspti.MsptiResult.SUCCESS
        assert hm.start(hs.append) == mspti.MsptiResult.SUCCESS
        t0 = time.time_ns()
        ddp(x).sum().backward()
        npu.synchronize()
        km.stop()
        hm.stop()
        # Only this pass's records (host clock, as the records' times).
        ks = [k for k in ks if k.start >= t0]
        starts = sorted(h.start for h in hs if h.name == "HcclAllReduce" and
                        h.start >= t0)
        assert len(starts) == 3, [h.name for h in hs]
        backward_end = max(k.end for k in ks if k.name in
                           ("MatMul", "ReluGrad", "ReduceSum"))
        # Launched after the first bucket's all-reduce: the other two
        # buckets' Muls (DDP's divide), and with overlap backward kernels.
        after = npu.stats()["kernels"] - ddp.launched_at[0]
        assert len(ddp.launched_at) == 3
        if overlap:
            # The last layer's bucket is reduced while backward goes on.
            assert after > 2 + 4, ddp.launched_at
        else:
            assert after == 2, ddp.launched_at
            # All after backward, on the device too.
            assert starts[0] >= backward_end


def test_unknown_op_is_a_clear_error():
    x = torch.randn(4, 4).npu()
    with pytest.raises(NotImplementedError) as e:
        torch.ops.aten._cholesky_solve_helper(x, x, False)
    msg = str(e.value)
    assert msg.startswith("mspti.npusim.torch: aten::_cholesky_solve_helper "
                          "has no meta kernel in torch 1.13"), msg
    assert "\n" not in msg
    # A user error stays torch's own error.
    with pytest.raises(RuntimeError) as e:
        torch.mm(x, torch.randn(3, 3).npu())
    assert "mspti" not in str(e.value)
    with pytest.raises(ValueError, match="one device per process"):
        npu.set_device(1)
    # The bridge still works afterwards.
    assert (x + x).is_meta


RANK_SCRIPT = """
import json, torch, mspti
import mspti.npusim.torch as npu
got = []
mon = mspti.HcclMonitor()
mon.start(got.append)
npu.init_process_group("hccl")
model = npu.DistributedDataParallel(torch.nn.Linear(16, 4).npu())
model(torch.randn(2, 16).npu()).sum().backward()
npu.synchronize()
mon.stop()
print(json.dumps([npu.get_rank(), npu.get_world_size(), npu.current_device(),
                  sorted(k.name for k in got)]))
"""


def test_torchrun_style_ranks_meet_through_a_file(tmp_path):
    # No root info in the environment (torchrun sets none): rank 0 writes
    # it to a file the others read, and removes it once all joined.
    root_file = tmp_path / "root"
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                   MSPTI_NPUSIM_ROOT_FILE=str(root_file))
        env.pop("MSPTI_NPUSIM_ROOT_INFO", None)
        procs.append(subprocess.Popen([sys.executable, "-c", RANK_SCRIPT],
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for r, (rank, world, dev, names) in enumerate(outs):
        assert (rank, world, dev) == (r, 2, r)
        assert "HcclAllReduce" in names and "HcclBroadcast" in names
    assert not root_file.exists()


# ---------------------------------------------------------------------------
# The examples, as real processes.

def example(srcdir, name):
    return os.path.join(srcdir, "examples", "python", name)


def test_example_resnet50_train(srcdir):
    out = run_python([example(srcdir, "resnet50_train.py"), "--steps", "2",
                      "--batch", "1", "--image", "64"], timeout=300)
    assert out.returncode == 0, out.stderr
    assert "resnet50 training: 2 steps" in out.stdout


def test_example_transformer_train(srcdir):
    out = run_python([example(srcdir, "transformer_train.py"), "--steps",
                      "2", "--batch", "2", "--seq", "8", "--vocab", "100",
                      "--d-model", "32", "--heads", "2", "--layers", "1",
                      "--ff", "64"], timeout=300)
    assert out.returncode == 0, out.stderr
    assert "transformer training: 2 steps" in out.stdout


def msptictl_run(builddir, tmp_path, argv, sections):
    """`msptictl run --report` of python3 argv with a private msptid on an
    empty runtime dir; returns (completed process, report JSON)."""
    ctl = os.path.join(builddir, "client", "msptictl")
    rt = tmp_path / "rt"
    rt.mkdir()
    trace = str(tmp_path / "run.mspti")
    env = dict(os.environ, MSPTID_RUNTIME_DIR=str(rt),
               TMPDIR=str(tmp_path))
    env.pop("LD_PRELOAD", None)     # run sets it, as for a user
    p = subprocess.run([ctl, "run", "--output", trace,
                        "--report=" + sections, "--", sys.executable] +
                       argv, capture_output=True, text=True, timeout=600,
                       env=env)
    assert p.returncode == 0, p.stderr
    r = subprocess.run([ctl, "report", trace, "--json"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return p, json.loads(r.stdout)


def test_msptictl_run_resnet50_infer(builddir, srcdir, tmp_path):
    p, rep = msptictl_run(builddir, tmp_path,
                          [example(srcdir, "resnet50_infer.py"), "--steps",
                           "3"], "top_kernels")
    assert "Top kernels" in p.stdout and "Conv2D" in p.stdout
    top = rep["top_kernels"]
    assert top[0]["Kernel"] == "Conv2D", top[:3]
    assert top[0]["Core Type"] == "KERNEL_AICORE"
    assert top[0]["Count"] == 53 * 3
    # A plausible share of device time (the guide shows about 40%).
    assert 25.0 <= top[0]["Ratio(%)"] <= 60.0, top[0]
    kinds = {t["Kernel"] for t in top}
    assert {"BNInfer", "Relu", "Add", "MatMul"} <= kinds
    # 320 parameters and buffers, then one image per step, copied in.
    htod = [m for m in rep["memcpy"] if m["Direction"] == "HTOD"][0]
    # Exactly: each copy once, joined to its own call.
    assert htod["Count"] == 320 + 3
    assert htod["Size(MB)"] > 90      # ResNet-50's fp32 weights
    assert [s for s in rep["summary"] if s["Item"] == "records lost"][0][
        "Value"] == 0


def test_msptictl_run_ddp_four_ranks(builddir, srcdir, tmp_path):
    steps = 2
    p, rep = msptictl_run(builddir, tmp_path,
                          [example(srcdir, "ddp_train.py"), "--ranks", "4",
                           "--steps", str(steps), "--model", "small",
                           "--batch", "2", "--image", "16",
                           "--slow-rank", "2"], "ranks")
    for r in range(4):
        assert "rank %d/4: %d steps" % (r, steps) in p.stdout, p.stdout
    ranks = {r["Rank"]: r for r in rep["ranks"]}
    assert sorted(ranks) == [0, 1, 2, 3]
    for r in ranks.values():
        assert r["Steps"] == steps
        assert r["Communication Avg(us)"] > 0
    comm = {c["OP Type"]: c for c in rep["communication"]}
    # One bucket (the small model is under 1 MB), all-reduced every step
    # on every rank; parameters and buffers broadcast too.
    assert comm["HcclAllReduce"]["Count"] == 4 * steps
    assert comm["HcclBroadcast"]["Count"] >= 4
    # NPUSIM_SLOW_RANK=2: its kernels are modelled 4x longer.
    others = [ranks[r]["Computing Avg(us)"] for r in (0, 1, 3)]
    slow = ranks[2]["Computing Avg(us)"]
    assert slow > 3 * max(others), (slow, others)

"""PyTorch on the simulated NPU, in the role torch_npu plays on hardware.

    import torch, torchvision
    import mspti.npusim.torch as npu

    model = torchvision.models.resnet50(weights=None).npu()
    x = torch.randn(1, 3, 224, 224).npu()      # an ACL memcpy H2D
    y = model(x)                                # Conv2D, BNInfer, Relu, ...
    npu.synchronize()

Tensors on the NPU are meta tensors (shapes and dtypes, no values), so
the host only dispatches, as it does with an accelerator.  Each aten op
launches the kernels CANN would launch (Ascend op types, AI_CORE /
AI_VECTOR / AI_CPU, cost from the real shapes) through libnpusim's
aclrtLaunchKernel; run under ``LD_PRELOAD=libmspti.so`` (or ``msptictl
run``) and msPTI sees them as on hardware.  Values read back (``.item()``,
``.cpu()``) are zeros.  See doc/torch.md.

Importing this module installs the bridge on the importing thread: the
dispatch mode, ``Tensor.npu()`` / ``Module.npu()``, ``.to("npu")``,
``torch.npu`` (this module: ``torch.npu.synchronize()``...), the
fused optimizers (Adam, AdamW, SGD launch ApplyAdam, ApplyAdamW,
ApplyMomentum / ApplyGradientDescent per parameter) and dropout as
DropOutGenMaskV3 + DropOutDoMask.
"""

import functools
import sys

import torch
import torch.nn.functional as F

from ... import _npusim
from ... import mstx as _mstx
# torch_npu.profiler's role: ``import mspti.npusim.torch as torch_npu``
# and torch_npu.profiler.profile(...) is mspti's profiler.
from ... import profiler
from ... import _session
from .. import AI_VECTOR
from ._mode import bridge, activate, deactivate, META
from ._dist import (init_process_group, destroy_process_group,
                    is_initialized, get_rank, get_world_size, barrier,
                    DistributedDataParallel, compute_buckets, spawn,
                    BUCKET_CAP_MB)
from . import _mode, _ops

__all__ = [
    "device", "is_available", "device_count", "current_device",
    "set_device", "synchronize", "current_stream", "stats", "reset_stats",
    "install", "uninstall", "init_process_group", "destroy_process_group",
    "is_initialized", "get_rank", "get_world_size", "barrier",
    "DistributedDataParallel", "compute_buckets", "spawn", "BUCKET_CAP_MB",
    "profiler",
]


def device(index=None):
    """The NPU as torch sees it: the meta device (tensors there have no
    values).  ``x.to(npu.device())`` copies x to the simulated device."""
    if index is not None:
        bridge().ensure_device(index)
    return META


def is_available():
    return _npusim.device_count() > 0


def device_count():
    return _npusim.device_count()


def current_device():
    return bridge().ensure_device()


def set_device(index):
    if isinstance(index, str):
        index = int(index.split(":", 1)[1]) if ":" in index else 0
    elif isinstance(index, torch.device):
        index = index.index or 0
    bridge().ensure_device(int(index))


def synchronize():
    """Waits for everything queued on the device (torch.npu.synchronize)."""
    bridge().synchronize()


def current_stream():
    """The ACL stream the bridge launches on (an int handle)."""
    b = bridge()
    b.ensure_device()
    return b.stream


def stats():
    """Counters: ops, kernels, memcpy_h2d, memcpy_d2h, transdata, fused,
    derived_shapes; "unmapped": aten ops without a table entry (launched
    under their camel-cased name)."""
    b = bridge()
    d = dict(b.stats)
    d["unmapped"] = dict(b.unmapped)
    d["kernel_shapes"] = len(b.kernels)
    return d


def reset_stats():
    b = bridge()
    b.stats.clear()
    b.unmapped.clear()
    b.op_counts.clear()


# ---------------------------------------------------------------------------
# torch_npu's surface: .npu(), .to("npu"), fused optimizers, dropout.

def _is_npu(d):
    if isinstance(d, str):
        return d == "npu" or d.startswith("npu:")
    return False


def _npu_index(d):
    return int(d.split(":", 1)[1]) if ":" in d else None


def _swap_npu(args, kwargs):
    """Replaces "npu[:N]" in a .to() call by the meta device; returns
    (args, kwargs, npu index or None, whether the target is the NPU)."""
    hit, index = False, None
    a = list(args)
    for i, v in enumerate(a):
        if _is_npu(v):
            a[i], hit, index = META, True, _npu_index(v)
        elif isinstance(v, torch.device) and v.type == "meta":
            hit = True
    d = kwargs.get("device")
    if _is_npu(d):
        kwargs = dict(kwargs, device=META)
        hit, index = True, _npu_index(d)
    elif isinstance(d, torch.device) and d.type == "meta":
        hit = True
    return a, kwargs, index, hit


_orig = {}


def _tensor_to(self, *args, **kwargs):
    a, kw, index, hit = _swap_npu(args, kwargs)
    if hit:
        bridge().ensure_device(index)
    return _orig["tensor_to"](self, *a, **kw)


def _tensor_npu(self, device=None, non_blocking=False, **unused):
    bridge().ensure_device(device if isinstance(device, int) else None)
    return _orig["tensor_to"](self, META, non_blocking=non_blocking)


def _module_to(self, *args, **kwargs):
    a, kw, index, hit = _swap_npu(args, kwargs)
    if not hit:
        return _orig["module_to"](self, *a, **kw)
    b = bridge()
    b.ensure_device(index)
    # Parameters and buffers live on the device for good.
    b.persistent += 1
    try:
        ret = _orig["module_to"](self, *a, **kw)
    finally:
        b.persistent -= 1
        b.flush_pending()
    _cast_weights(self)
    return ret


def _cast_weights(module):
    # torch_npu's Module.npu() casts conv weights to FRACTAL_Z, the cube's
    # layout, once: a TransData each, not one per forward.
    for m in module.modules():
        if isinstance(m, torch.nn.modules.conv._ConvNd):
            w = m.weight
            if w.is_meta and _mode._fmt(w) != _mode.FRACTAL_Z:
                bridge()._transdata(w, _mode.FRACTAL_Z)
                _mode._set_fmt(w, _mode.FRACTAL_Z)


def _module_npu(self, device=None):
    return _module_to(self, "npu" if device is None else
                      "npu:%d" % int(device))


def _dropout(input, p=0.5, training=True, inplace=False):
    # torch_npu's dropout: one mask generation and one masking kernel
    # (aten::native_dropout), not bernoulli_ + mul.
    if isinstance(input, torch.Tensor) and input.is_meta and training and \
            0.0 < p < 1.0 and not inplace:
        return torch.native_dropout(input, p, True)[0]
    return _orig["dropout"](input, p, training, inplace)


def _adam_kernel(opt, group):
    return "ApplyAdamW" if isinstance(opt, torch.optim.AdamW) else \
        "ApplyAdam", 7


def _sgd_kernel(opt, group):
    if group.get("momentum", 0):
        return "ApplyMomentum", 5
    return "ApplyGradientDescent", 3


def _fused_step(orig, kernel):
    @functools.wraps(orig)
    def step(self, *args, **kwargs):
        groups = [(g, [p for p in g["params"] if p.grad is not None and
                       p.is_meta]) for g in self.param_groups]
        if not any(ps for _, ps in groups):
            return orig(self, *args, **kwargs)
        b = bridge()
        b.fused += 1
        try:
            ret = orig(self, *args, **kwargs)
        finally:
            b.fused -= 1
        for g, ps in groups:
            name, tensors = kernel(self, g)
            for p in ps:
                n = _ops.nbytes(p)
                b.launch(name, AI_VECTOR, 12.0 * p.numel(),
                         float(tensors * n), elems=p.numel())
        return ret
    step._mspti_fused = True
    return step


def _loader_next(orig):
    @functools.wraps(orig)
    def next_(self):
        # The loader's host work (reading, decoding, collating) as a
        # range, so it shows up on the host timeline.
        rid = _mstx.range_start("DataLoader")
        try:
            return orig(self)
        finally:
            _mstx.range_end(rid)
    return next_


def install():
    """Installs the bridge on this thread (done at import).  Other threads
    that run NPU ops call it too."""
    activate()
    if _orig:
        return
    import torch.utils.data.dataloader as dl
    _orig["tensor_to"] = torch.Tensor.to
    _orig["module_to"] = torch.nn.Module.to
    _orig["dropout"] = F.dropout
    _orig["loader_next"] = dl._BaseDataLoaderIter.__next__
    torch.Tensor.to = _tensor_to
    torch.Tensor.npu = _tensor_npu
    torch.Tensor.is_npu = property(lambda self: self.is_meta)
    torch.nn.Module.to = _module_to
    torch.nn.Module.npu = _module_npu
    if not hasattr(torch, "npu"):
        # torch.npu.synchronize() etc., as torch_npu registers them.
        torch.npu = sys.modules[__name__]
    F.dropout = _dropout
    dl._BaseDataLoaderIter.__next__ = _loader_next(
        dl._BaseDataLoaderIter.__next__)
    for cls, kernel in ((torch.optim.Adam, _adam_kernel),
                        (torch.optim.AdamW, _adam_kernel),
                        (torch.optim.SGD, _sgd_kernel)):
        if not getattr(cls.step, "_mspti_fused", False):
            _orig[cls] = cls.step
            cls.step = _fused_step(cls.step, kernel)


def uninstall():
    """Removes the mode from this thread and the patches."""
    import torch.utils.data.dataloader as dl
    deactivate()
    if not _orig:
        return
    torch.Tensor.to = _orig.pop("tensor_to")
    torch.nn.Module.to = _orig.pop("module_to")
    F.dropout = _orig.pop("dropout")
    dl._BaseDataLoaderIter.__next__ = _orig.pop("loader_next")
    for attr in ("npu", "is_npu"):
        if hasattr(torch.Tensor, attr):
            delattr(torch.Tensor, attr)
    if hasattr(torch.nn.Module, "npu"):
        delattr(torch.nn.Module, "npu")
    if getattr(torch, "npu", None) is sys.modules[__name__]:
        del torch.npu
    for cls in list(_orig):
        cls.step = _orig.pop(cls)


install()
# msptictl start --kinds op on this job: see mspti/_session.py.
_session.start_watcher()

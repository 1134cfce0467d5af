"""The dispatch mode that runs aten ops "on" the simulated NPU.

Tensors on the NPU are meta tensors: torch computes their shapes and
dtypes, never their values.  For every aten op with a meta operand the
mode runs the op on the meta backend (or derives the outputs itself where
torch 1.13 has no meta kernel), then launches the kernels a CANN stack
would launch for it through libnpusim's ACL entry points, so libmspti's
interposition sees them.  Copies between host and device are real ACL
memcpys of the host tensor's bytes into simulated device memory.
"""

import collections
import os
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ... import _npusim
from .. import (AI_CORE, AI_VECTOR, AI_CPU, HOST_TO_DEVICE, DEVICE_TO_HOST,
                NpusimError)  # noqa: F401
from . import _ops

META = torch.device("meta")
_TYPE_CORES = {AI_CORE: 24, AI_VECTOR: 48, AI_CPU: 1}
# Elements one block (core) of a kernel handles before another is used.
_BLOCK_ELEMS = 16384
# Async host-to-device copies whose host tensor is kept alive until the
# next synchronization; beyond this many the bridge synchronizes.
_MAX_PENDING = 64

# Layout tags (tensor attribute _npu_fmt): the 5HD activation format conv
# nets use on Ascend, FRACTAL_Z for conv weights, or plain ND.
ND, NC1HWC0, FRACTAL_Z = "ND", "NC1HWC0", "FRACTAL_Z"


def _fmt(t):
    return getattr(t, "_npu_fmt", None)


def _set_fmt(t, f):
    try:
        t._npu_fmt = f
    except (AttributeError, RuntimeError):
        pass


class _Allocator:
    """A caching allocator over aclrtMalloc, as torch_npu's: blocks are
    reserved once and reused, never given back to the runtime.  Module
    parameters get a block each for the life of the process; transient
    copies (batches) cycle through a few blocks per size."""

    RING = 4
    SEGMENT = 20 << 20      # the caching allocator's large-block size

    def __init__(self):
        self.reserved = 0
        self._segments = []
        self._seg = None        # (base, size, used) of the open segment
        self._rings = {}
        self._scratch = None

    @staticmethod
    def _round(n):
        return max(512, (n + 511) // 512 * 512)

    def _new(self, size):
        p = _npusim.malloc(size)
        self.reserved += size
        return p

    def block(self, nbytes, persistent):
        size = self._round(nbytes)
        if persistent:
            # Carved from large segments, so a model's hundreds of
            # parameters cost a few aclrtMalloc calls.
            if self._seg is None or self._seg[2] + size > self._seg[1]:
                seg = max(self.SEGMENT, size)
                self._seg = [self._new(seg), seg, 0]
                self._segments.append(self._seg[0])
            p = self._seg[0] + self._seg[2]
            self._seg[2] += size
            return p
        ring = self._rings.setdefault(size, collections.deque())
        if len(ring) < self.RING:
            p = self._new(size)
        else:
            p = ring.popleft()
        ring.append(p)
        return p

    def scratch(self, nbytes):
        """A device buffer of at least nbytes for reads back to the host."""
        size = self._round(nbytes)
        if self._scratch is None or self._scratch[1] < size:
            self._scratch = (self._new(size), size)
        return self._scratch[0]


class Bridge:
    """Process-wide state of the simulated NPU as torch sees it."""

    def __init__(self):
        self.lock = threading.RLock()
        self.tls = threading.local()
        self.device = None
        self.stream = None
        self.kernels = {}
        self.alloc = None
        self.pending = []
        self.persistent = 0
        self.fused = 0
        self.stats = collections.Counter()
        self.unmapped = collections.Counter()
        self.op_counts = collections.Counter()
        self.no_meta = set()     # ops without a meta kernel seen so far
        self.mode = NpuMode(self)

    # -- device -----------------------------------------------------------

    def ensure_device(self, index=None):
        """Opens this process's device the first time: index, else
        $LOCAL_RANK modulo the device count, else 0."""
        if self.device is not None and (index is None or
                                        index == self.device):
            if getattr(self.tls, "device", None) != self.device:
                # A thread's current device is its own (ACL).
                _npusim.set_device(self.device)
                self.tls.device = self.device
            return self.device
        with self.lock:
            if self.device is not None:
                raise ValueError("this process already uses NPU %d; the "
                                 "bridge drives one device per process "
                                 "(LOCAL_RANK)" % self.device)
            if index is None:
                local = os.environ.get("LOCAL_RANK") or \
                    os.environ.get("RANK") or "0"
                try:
                    index = int(local) % max(1, _npusim.device_count())
                except ValueError:
                    raise ValueError("LOCAL_RANK=%r is not a number" %
                                     local) from None
            _npusim.set_device(index)
            self.device = index
            self.tls.device = index
            if self.alloc is None:
                self.alloc = _Allocator()
            if self.stream is None:
                # The current stream all ops and copies go to, in order.
                self.stream = _npusim.create_stream()
            return index

    def synchronize(self):
        if self.device is None:
            return
        _npusim.synchronize_device()
        self.pending.clear()

    def _sync_stream(self):
        _npusim.synchronize_stream(self.stream)
        self.pending.clear()

    def flush_pending(self):
        """Waits for the copies that still read host tensors."""
        if self.pending:
            self._sync_stream()

    def _memcpy(self, dst, src, n, kind, sync):
        _npusim.memcpy(dst, src, n, kind, self.stream)
        if sync:
            self._sync_stream()

    # -- kernels ----------------------------------------------------------

    def _handle(self, name, ktype, flops, nbytes):
        key = (name, ktype, int(flops), int(nbytes))
        h = self.kernels.get(key)
        if h is None:
            h = _npusim.kernel_register(name, int(ktype), float(int(flops)),
                                        float(int(nbytes)), 0)
            self.kernels[key] = h
        return h

    def launch(self, name, ktype, flops, nbytes, stream=None, elems=0):
        """Launches one kernel named name (an Ascend op type) whose cost is
        flops and bytes, on stream (None: the bridge's current stream)."""
        if self.device is None:
            self.ensure_device()
        if stream is None:
            if self.fused:
                # Inside a fused optimizer step: its one kernel per
                # parameter stands for these.
                self.stats["fused"] += 1
                return
            stream = self.stream
        h = self._handle(name, ktype, flops, nbytes)
        if elems <= 0:
            elems = max(1, int(nbytes) // 4)
        dim = max(1, min(_TYPE_CORES[ktype], -(-elems // _BLOCK_ELEMS)))
        _npusim.launch_kernel(h, dim, stream)
        self.stats["kernels"] += 1

    def _launch_all(self, launches, elems):
        for k in launches:
            self.launch(k.name, k.type, k.flops, k.bytes, elems=elems)

    def _transdata(self, t, to):
        n = _ops.nbytes(t)
        self.launch("TransData", AI_VECTOR, 0.0, 2.0 * n, elems=t.numel())
        self.stats["transdata"] += 1
        return to

    # -- host <-> device --------------------------------------------------

    def to_device(self, src, out, non_blocking=False, persistent=None):
        """The H2D copy of host tensor src into the meta tensor out."""
        if self.device is None:
            self.ensure_device()
        if persistent is None:
            persistent = self.persistent > 0
        if not src.is_contiguous():
            src = src.contiguous()
        n = _ops.nbytes(src)
        if n > 0:
            dst = self.alloc.block(n, persistent)
            # A module's parameters go asynchronously, with one wait at
            # the end of Module.npu() (see flush_pending).
            async_ = non_blocking or persistent
            self._memcpy(dst, src.data_ptr(), n, HOST_TO_DEVICE, not async_)
            if async_:
                # The copy reads src when it runs: keep src until then.
                self.pending.append(src)
                if len(self.pending) > _MAX_PENDING and not persistent:
                    self._sync_stream()
            self.stats["memcpy_h2d"] += 1
        if src.dtype != out.dtype:
            self.launch("Cast", AI_VECTOR, float(out.numel()),
                        float(n + _ops.nbytes(out)), elems=out.numel())
        if out.dim() == 4:
            _set_fmt(out, ND)
        return out

    def to_host(self, src, out):
        """The D2H copy of meta tensor src into host tensor out (whose
        values stay zero: the device computed none)."""
        if self.device is None:
            self.ensure_device()
        n = min(_ops.nbytes(src), _ops.nbytes(out))
        if n > 0:
            if out.is_contiguous():
                self._memcpy(out.data_ptr(), self.alloc.scratch(n), n,
                             DEVICE_TO_HOST, True)
            else:
                tmp = torch.zeros(out.shape, dtype=out.dtype)
                self._memcpy(tmp.data_ptr(), self.alloc.scratch(n), n,
                             DEVICE_TO_HOST, True)
                out.copy_(tmp)
        self.stats["memcpy_d2h"] += 1
        return out

    def read_scalar(self, t):
        """.item() of a device tensor: a synchronous 1-element read."""
        if self.device is None:
            self.ensure_device()
        host = torch.zeros((), dtype=t.dtype)
        self._memcpy(host.data_ptr(), self.alloc.scratch(8),
                     t.element_size(), DEVICE_TO_HOST, True)
        self.stats["memcpy_d2h"] += 1
        return host.item()

    # -- the op -----------------------------------------------------------

    def dispatch(self, func, args, kwargs):
        tensors = _tensors(args, kwargs)
        dev = kwargs.get("device")
        to_npu = dev is not None and torch.device(dev).type == "meta"
        on_npu = any(t.is_meta for t in tensors)
        if not on_npu and not to_npu:
            return func(*args, **kwargs)
        base = func._schema.name.split("::", 1)[-1]
        inplace = base.endswith("_") and not base.endswith("__")
        if inplace:
            base = base[:-1]
        if base in ("max", "min"):
            # max.other is elementwise, max() of everything a reduction;
            # max.dim (values and indices) keeps its name.
            ov = func._overloadname
            if ov == "other":
                base = base + "imum"
            elif ov == "default":
                base = "a" + base
        self.op_counts[base] += 1
        with self.lock:
            return self._device_op(func, base, args, kwargs, tensors,
                                   to_npu, on_npu)

    def _device_op(self, func, base, args, kwargs, tensors, to_npu, on_npu):
        if self.device is None:
            self.ensure_device()
        if base == "_to_copy":
            src = args[0]
            if not src.is_meta and to_npu:
                out = func(*args, **kwargs)
                return self.to_device(src, out,
                                      bool(kwargs.get("non_blocking")))
            if src.is_meta and dev_type(kwargs.get("device")) == "cpu":
                out = torch.zeros(src.shape, dtype=kwargs.get("dtype") or
                                  src.dtype)
                return self.to_host(src, out)
        elif base == "copy":
            dst, src = args[0], args[1]
            if dst.is_meta and not src.is_meta:
                self.to_device(src, dst, bool(args[2]) if len(args) > 2
                               else False)
                return dst
            if src.is_meta and not dst.is_meta:
                return self.to_host(src, dst)
        elif base in ("_local_scalar_dense", "is_nonzero"):
            v = self.read_scalar(args[0])
            return bool(v) if base == "is_nonzero" else v
        elif base == "equal":
            self.read_scalar(args[0])
            return True
        try:
            if func in self.no_meta:
                # Known to fail: skip the exception torch would build.
                out = _ops.derive_shapes(base, func, args, kwargs)
                if out is None:
                    self.no_meta.discard(func)
                    out = func(*args, **kwargs)
            else:
                out = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError) as e:
            # A missing meta kernel, not a user error (mixed devices, bad
            # shapes): those propagate as torch raised them.
            if not isinstance(e, NotImplementedError) and \
                    base not in _ops.SHAPES:
                raise
            out = _ops.derive_shapes(base, func, args, kwargs)
            if out is None:
                raise NotImplementedError(
                    "mspti.npusim.torch: aten::%s has no meta kernel in "
                    "torch %s and no shape rule: %s" %
                    (base, torch.__version__, str(e).splitlines()[0])) \
                    from e
            self.no_meta.add(func)
        if func in self.no_meta:
            self.stats["derived_shapes"] += 1
        if base in _ops.NO_KERNEL:
            self._layout_view(base, tensors, out)
            return out
        outs = _tensors(out if isinstance(out, (tuple, list)) else (out,))
        ins = [t for t in tensors if t.is_meta]
        launches, mapped = _ops.kernels(base, args, kwargs, ins, outs)
        if not mapped:
            self.unmapped[base] += 1
        self._layout(base, args, ins, outs)
        elems = max((t.numel() for t in outs), default=0)
        self._launch_all(launches, elems)
        self.stats["ops"] += 1
        return out

    # -- layouts ----------------------------------------------------------

    def _layout_view(self, base, ins, out):
        """A view keeps a 4-D tensor's layout when it keeps its shape; one
        that reshapes a 5HD tensor needs it in ND first (TransData)."""
        outs = _tensors(out if isinstance(out, (tuple, list)) else (out,))
        src = ins[0] if ins and isinstance(ins[0], torch.Tensor) else None
        if src is None or not src.is_meta:
            return
        f = _fmt(src)
        for o in outs:
            if o.dim() == 4 and src.dim() == 4 and o.shape == src.shape:
                if f is not None:
                    _set_fmt(o, f)
            elif f == NC1HWC0 or f == FRACTAL_Z:
                self._transdata(src, ND)
                if o.dim() == 4:
                    _set_fmt(o, ND)
            elif o.dim() == 4:
                _set_fmt(o, ND)

    def _layout(self, base, args, ins, outs):
        """TransData where an op needs its operands in another layout, and
        the layout of its 4-D outputs."""
        if base in _ops.NATIVE_5HD:
            weight = None
            if base == "convolution":
                weight = args[1]
            elif base == "convolution_backward":
                weight = args[2]
            for t in ins:
                if t is weight:
                    if _fmt(t) != FRACTAL_Z:
                        self._transdata(t, FRACTAL_Z)
                        _set_fmt(t, FRACTAL_Z)
                elif t.dim() == 4 and _fmt(t) == ND:
                    self._transdata(t, NC1HWC0)
            for i, o in enumerate(outs):
                if o.dim() == 4:
                    is_w = base == "convolution_backward" and i == 1 and \
                        weight is not None and o.shape == weight.shape
                    _set_fmt(o, FRACTAL_Z if is_w else NC1HWC0)
            return
        fmts = [_fmt(t) for t in ins if t.dim() == 4]
        if base in _ops.ELEMENTWISE and NC1HWC0 in fmts:
            for t in ins:
                if t.dim() == 4 and _fmt(t) == ND:
                    self._transdata(t, NC1HWC0)
            out_fmt = NC1HWC0
        elif base in _ops.ELEMENTWISE:
            out_fmt = ND if ND in fmts else (fmts[0] if fmts else None)
        else:
            # A format-bound op (reshape, matmul, reduction over channels...)
            # wants ND.  Reductions over H and W run on 5HD as they are.
            if base in ("mean", "sum", "amax") and _spatial_reduce(args):
                out_fmt = NC1HWC0 if NC1HWC0 in fmts else None
            else:
                for t in ins:
                    if _fmt(t) in (NC1HWC0, FRACTAL_Z):
                        self._transdata(t, ND)
                out_fmt = ND
        for o in outs:
            if o.dim() == 4 and out_fmt is not None:
                _set_fmt(o, out_fmt)


def _tensors(args, kwargs=None):
    """The tensors among an op's arguments (aten arguments nest one level:
    Tensor[] and Tensor?[]); cheaper than a pytree flatten."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(t for t in a if isinstance(t, torch.Tensor))
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, torch.Tensor):
                out.append(a)
            elif isinstance(a, (list, tuple)):
                out.extend(t for t in a if isinstance(t, torch.Tensor))
    return out


def _spatial_reduce(args):
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or len(args) < 2:
        return False
    dims = args[1]
    if isinstance(dims, int):
        dims = [dims]
    try:
        return sorted(d % 4 for d in dims) == [2, 3]
    except TypeError:
        return False


def dev_type(d):
    if d is None:
        return None
    return torch.device(d).type


class NpuMode(TorchDispatchMode):
    """Sends every aten op to the bridge (host-only ops run as usual)."""

    def __init__(self, bridge):
        super().__init__()
        self.bridge = bridge

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.bridge.dispatch(func, args, kwargs or {})


_bridge = Bridge()
_installed = threading.local()


def bridge():
    return _bridge


def activate():
    """Pushes the mode on this thread's dispatch-mode stack (once)."""
    if getattr(_installed, "on", False):
        return
    _bridge.mode.__enter__()
    _installed.on = True


def deactivate():
    if getattr(_installed, "on", False):
        _bridge.mode.__exit__(None, None, None)
        _installed.on = False


__all__ = ["Bridge", "NpuMode", "bridge", "activate", "deactivate", "META",
           "NpusimError"]

"""Data-parallel training on the simulated NPU: a process group over HCCL
and a DistributedDataParallel that all-reduces gradient buckets as
torch's DDP does (25 MB buckets, the first one 1 MB, filled in reverse
parameter order, all-reduced in order as they become ready during
backward, or after it).

Ranks come from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK);
the device is LOCAL_RANK.  The HCCL root info reaches the ranks through
$MSPTI_NPUSIM_ROOT_INFO (spawn() sets it) or, under another launcher, a
file rank 0 writes (see _rendezvous).
"""

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch

from ... import _npusim
from .. import (FP16, FP32, BFP16, INT32, INT64, INT8, FP64, SUM,
                ROOT_INFO_ENV, get_root_info)
from ._mode import bridge
from . import _ops

HCCL_DTYPES = {torch.float32: FP32, torch.float16: FP16,
               torch.bfloat16: BFP16, torch.int32: INT32,
               torch.int64: INT64, torch.int8: INT8, torch.float64: FP64}
ROOT_FILE_ENV = "MSPTI_NPUSIM_ROOT_FILE"
# DDP's defaults (torch.distributed.constants / DDP's bucket_cap_mb).
BUCKET_CAP_MB = 25
FIRST_BUCKET_BYTES = 1 << 20
BROADCAST_BUCKET_BYTES = 250 << 20
_T0 = time.time()


def env_int(name, default):
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError("%s=%r is not a number" % (name, v)) from None


class ProcessGroup:
    """One HCCL communicator over the job's ranks, with its own stream."""

    def __init__(self, rank, world_size, root):
        b = bridge()
        b.ensure_device()
        self.rank = rank
        self.world_size = world_size
        self.comm = _npusim.comm_init(world_size, root, rank)
        self.stream = _npusim.create_stream()

    def all_reduce_raw(self, buf, count, dtype, stream=None):
        _npusim.all_reduce(buf, buf, count, dtype, SUM, self.comm,
                           stream or self.stream)

    def broadcast_raw(self, buf, count, dtype, root=0, stream=None):
        _npusim.broadcast(buf, count, dtype, root, self.comm,
                          stream or self.stream)

    def barrier(self):
        _npusim.barrier(self.comm, self.stream)
        _npusim.synchronize_stream(self.stream)

    def destroy(self):
        if self.comm:
            try:
                _npusim.synchronize_stream(self.stream)
            finally:
                _npusim.comm_destroy(self.comm)
                self.comm = 0


_group = None


def _root_file():
    path = os.environ.get(ROOT_FILE_ENV)
    if path:
        return path
    tag = "%s-%s-%s" % (os.environ.get("MASTER_PORT", "0"),
                        os.environ.get("TORCHELASTIC_RUN_ID", "none"),
                        os.environ.get("MSPTI_JOB_ID", "job"))
    return os.path.join(tempfile.gettempdir(),
                        "mspti-npusim-root-%d-%s" % (os.getuid(), tag))


def _rendezvous(rank, timeout):
    """The HCCL root info: from the environment, else through a file rank
    0 writes (and removes once every rank joined).  Other ranks take only
    a file written after this process started, not a stale one."""
    v = os.environ.get(ROOT_INFO_ENV)
    if v:
        return bytes.fromhex(v), None
    path = _root_file()
    if rank == 0:
        root = get_root_info()
        tmp = "%s.%d" % (path, os.getpid())
        with open(tmp, "wb") as f:
            f.write(root)
        os.replace(tmp, path)
        return root, path
    deadline = time.monotonic() + timeout
    while True:
        try:
            st = os.stat(path)
            if st.st_mtime >= _T0 - 120:
                with open(path, "rb") as f:
                    data = f.read()
                if data:
                    return data, None
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("rank %d: no HCCL root info in %s after %gs "
                               "(set %s or start rank 0)" %
                               (rank, path, timeout, ROOT_INFO_ENV))
        time.sleep(0.01)


def init_process_group(backend="hccl", rank=None, world_size=None,
                       timeout=30.0, **unused):
    """torch.distributed.init_process_group for the simulated NPU: opens
    device LOCAL_RANK and joins the HCCL communicator of WORLD_SIZE
    ranks."""
    global _group
    if backend not in ("hccl", None):
        raise ValueError("backend %r: only 'hccl' runs on the simulated NPU"
                         % backend)
    if _group is not None:
        raise RuntimeError("init_process_group called twice")
    if rank is None:
        rank = env_int("RANK", 0)
    if world_size is None:
        world_size = env_int("WORLD_SIZE", 1)
    if not 0 <= rank < world_size:
        raise ValueError("rank %d outside world size %d" % (rank, world_size))
    root, path = _rendezvous(rank, timeout)
    try:
        _group = ProcessGroup(rank, world_size, root)
    finally:
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass
    atexit.register(destroy_process_group)
    return _group


def destroy_process_group():
    global _group
    if _group is not None:
        g, _group = _group, None
        g.destroy()


def is_initialized():
    return _group is not None


def get_rank():
    return _group.rank if _group is not None else env_int("RANK", 0)


def get_world_size():
    return _group.world_size if _group is not None else \
        env_int("WORLD_SIZE", 1)


def barrier():
    _need_group().barrier()


def _need_group():
    if _group is None:
        raise RuntimeError("call mspti.npusim.torch.init_process_group() "
                           "first")
    return _group


def _hccl_dtype(dt):
    try:
        return HCCL_DTYPES[dt]
    except KeyError:
        raise TypeError("HCCL has no type for %s" % dt) from None


class _Bucket:
    def __init__(self, index, params):
        self.index = index
        self.params = params
        self.dtype = params[0].dtype
        self.count = sum(p.numel() for p in params)
        self.nbytes = sum(_ops.nbytes(p) for p in params)
        self.buf = _npusim.malloc(max(512, self.nbytes))
        self.pending = len(params)
        self.launched = False


def compute_buckets(params, cap_bytes, first_bytes=FIRST_BUCKET_BYTES):
    """DDP's assignment (_compute_bucket_assignment_by_size): parameters
    in reverse order (roughly the order backward produces their
    gradients), one dtype per bucket; a bucket closes once it holds at
    least its limit, first_bytes for the first and cap_bytes after."""
    buckets, open_ = [], {}
    limit = first_bytes
    for p in reversed(params):
        cur = open_.setdefault(p.dtype, [[], 0])
        cur[0].append(p)
        cur[1] += _ops.nbytes(p)
        if cur[1] >= limit:
            buckets.append(cur[0])
            del open_[p.dtype]
            limit = cap_bytes
    buckets.extend(c[0] for c in open_.values() if c[0])
    return buckets


class DistributedDataParallel(torch.nn.Module):
    """torch.nn.parallel.DistributedDataParallel on the simulated NPU.

    At construction the parameters are broadcast from rank 0 (in 250 MB
    pieces); before each forward the buffers (batch-norm statistics) are,
    when broadcast_buffers.  During backward each bucket is all-reduced on
    the group's stream as soon as all its gradients are accumulated and
    the buckets before it were launched (overlap=True), or all buckets
    after backward (overlap=False); the optimizer's kernels wait for the
    all-reduces.  Gradients are treated as views of the buckets
    (gradient_as_bucket_view): no copies in or out."""

    def __init__(self, module, device_ids=None, bucket_cap_mb=BUCKET_CAP_MB,
                 broadcast_buffers=True, overlap=True, process_group=None,
                 **unused):
        super().__init__()
        self.module = module
        self.group = process_group or _need_group()
        self.overlap = overlap
        self.broadcast_buffers = broadcast_buffers
        self.bucket_cap_mb = bucket_cap_mb
        b = bridge()
        b.ensure_device()
        self._bridge = b
        params = [p for p in module.parameters() if p.requires_grad]
        if any(not p.is_meta for p in params):
            raise ValueError("DistributedDataParallel: move the module to "
                             "the NPU first (module.npu())")
        self.buckets = [
            _Bucket(i, ps) for i, ps in enumerate(compute_buckets(
                params, int(bucket_cap_mb * (1 << 20))))]
        self._bucket_of = {}
        for bk in self.buckets:
            for p in bk.params:
                self._bucket_of[id(p)] = bk
        self._next = 0
        self._queued = False
        # Kernels the bridge had launched when each bucket of the last
        # backward was all-reduced (how much of backward it overlapped).
        self.launched_at = []
        self._ready_ev = _npusim.create_event()
        self._done_ev = _npusim.create_event()
        self._hooks = []
        for p in params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._hooks.append(acc)     # keeps the accumulator alive
        self._sync_params(params)

    # Parameters and buffers from rank 0.
    def _broadcast(self, tensors):
        total = sum(_ops.nbytes(t) for t in tensors)
        if total == 0 or self.group.world_size == 1:
            return
        g, b = self.group, self._bridge
        ev = _npusim.create_event()
        _npusim.record_event(ev, b.stream)
        _wait(g.stream, ev)
        done = 0
        while done < total:
            n = min(BROADCAST_BUCKET_BYTES, total - done)
            buf = b.alloc.block(n, False)
            g.broadcast_raw(buf, n, INT8)
            done += n
        _npusim.record_event(ev, g.stream)
        _wait(b.stream, ev)
        _npusim.destroy_event(ev)

    def _sync_params(self, params):
        self._broadcast(params + [t for t in self.module.buffers()
                                  if t.is_meta])

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers:
            bufs = [t for t in self.module.buffers() if t.is_meta and
                    t.numel() > 1]
            self._broadcast(bufs)
        return self.module(*args, **kwargs)

    # Backward: one hook per parameter, after its gradient is accumulated.
    def _make_hook(self, p):
        key = id(p)

        def hook(*unused):
            self._grad_ready(key)
        return hook

    def _grad_ready(self, key):
        if not self._queued:
            self._queued = True
            self.launched_at = []
            torch.autograd.Variable._execution_engine.queue_callback(
                self._finish)
        bk = self._bucket_of[key]
        bk.pending -= 1
        if self.overlap:
            self._launch_ready()

    def _launch_ready(self):
        while self._next < len(self.buckets) and \
                self.buckets[self._next].pending <= 0:
            self._launch(self.buckets[self._next])
            self._next += 1

    def _launch(self, bk):
        g, b = self.group, self._bridge
        # The comm stream waits for the gradients computed so far.
        _npusim.record_event(self._ready_ev, b.stream)
        _wait(g.stream, self._ready_ev)
        # DDP's default comm hook divides by the world size first.
        b.launch("Muls", 1, float(bk.count), 2.0 * bk.nbytes,
                 stream=g.stream, elems=bk.count)
        g.all_reduce_raw(bk.buf, bk.count, _hccl_dtype(bk.dtype))
        bk.launched = True
        self.launched_at.append(b.stats["kernels"])

    def _finish(self):
        # Unused parameters never fire their hook: reduce what is left.
        while self._next < len(self.buckets):
            self._launch(self.buckets[self._next])
            self._next += 1
        g, b = self.group, self._bridge
        _npusim.record_event(self._done_ev, g.stream)
        _wait(b.stream, self._done_ev)
        for bk in self.buckets:
            bk.pending = len(bk.params)
            bk.launched = False
        self._next = 0
        self._queued = False


def _wait(stream, event):
    if _npusim.has_stream_wait_event():
        _npusim.stream_wait_event(stream, event)
    else:
        _npusim.synchronize_event(event)


def spawn(nprocs, argv, env=None, slow_rank=None, timeout=None):
    """Starts nprocs ranks of `python3 argv...` as torchrun would (RANK,
    LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT) with the
    HCCL root info in the environment; slow_rank sets NPUSIM_SLOW_RANK.
    Returns the exit codes.  If a rank fails the others are stopped."""
    root = get_root_info()
    base = dict(os.environ if env is None else env)
    base[ROOT_INFO_ENV] = root.hex()
    base.setdefault("MASTER_ADDR", "127.0.0.1")
    base.setdefault("MASTER_PORT", "29500")
    if slow_rank is not None:
        base["NPUSIM_SLOW_RANK"] = str(slow_rank)
    procs = []
    for r in range(nprocs):
        e = dict(base)
        e.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nprocs),
                 LOCAL_WORLD_SIZE=str(nprocs), GROUP_RANK="0")
        procs.append(subprocess.Popen([sys.executable] + list(argv), env=e))
    codes = [None] * nprocs
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while None in codes:
            for i, p in enumerate(procs):
                if codes[i] is None:
                    codes[i] = p.poll()
                    if codes[i] not in (None, 0):
                        _stop(procs, codes)
            if deadline is not None and time.monotonic() > deadline:
                _stop(procs, codes)
            time.sleep(0.02)
    finally:
        _stop(procs, codes)
    return codes


def _stop(procs, codes):
    for i, p in enumerate(procs):
        if codes[i] is None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for i, p in enumerate(procs):
        if codes[i] is None:
            try:
                codes[i] = p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[i] = p.wait()

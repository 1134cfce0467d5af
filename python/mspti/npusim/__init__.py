"""A small binding of libnpusim, the simulated NPU, for writing example
workloads in Python: devices, streams, kernels (registered with a cost
model or a fixed duration), device memory, copies and HCCL collectives.

Run with ``LD_PRELOAD=libmspti.so`` so that msPTI sees the calls (Python
loads extensions with RTLD_LOCAL: importing mspti first does not
interpose the runtime).

Multi-process HCCL: one process makes the root info with
``get_root_info()`` and hands it to the others (fork, the environment
variable ``MSPTI_NPUSIM_ROOT_INFO`` via ``root_info_to_env``, or a file via
``write_root_info``/``read_root_info``); every rank then builds
``Communicator(nranks, rank, root)``.  Fork before opening a device.
"""

import os
import struct

from .. import _mspti  # noqa: F401 - libmspti loaded before the runtime
from .. import _npusim

__all__ = [
    "NpusimError", "AI_CORE", "AI_VECTOR", "AI_CPU",
    "HOST_TO_HOST", "HOST_TO_DEVICE", "DEVICE_TO_HOST", "DEVICE_TO_DEVICE",
    "INT8", "INT16", "INT32", "FP16", "FP32", "INT64", "FP64", "BFP16",
    "SUM", "PROD", "MAX", "MIN",
    "init", "finalize", "device_count", "set_device", "reset_device",
    "get_device", "synchronize_device", "Stream", "Event", "Kernel",
    "DeviceBuffer",
    "HostBuffer", "malloc", "free", "memcpy", "memset",
    "get_root_info", "root_info_to_env", "root_info_from_env",
    "write_root_info", "read_root_info", "Communicator",
]

NpusimError = _npusim.Error

# enum npusim_kernel_type
AI_CORE, AI_VECTOR, AI_CPU = 0, 1, 2
# aclrtMemcpyKind
HOST_TO_HOST, HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = 0, 1, 2, 3
# HcclDataType
INT8, INT16, INT32, FP16, FP32, INT64 = 0, 1, 2, 3, 4, 5
FP64, BFP16 = 10, 11
# HcclReduceOp
SUM, PROD, MAX, MIN = 0, 1, 2, 3

ROOT_INFO_ENV = "MSPTI_NPUSIM_ROOT_INFO"

init = _npusim.init
finalize = _npusim.finalize
device_count = _npusim.device_count
set_device = _npusim.set_device
reset_device = _npusim.reset_device
get_device = _npusim.get_device
synchronize_device = _npusim.synchronize_device


class _Handle:
    """Owns an npusim handle, released once by the class's _release (its
    destroy() or free()), also on leaving a with block."""

    def _close(self):
        if self.handle:
            self._release(self.handle)
            self.handle = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._close()
        return False


class Stream(_Handle):
    """An in-order device queue (aclrtCreateStream)."""

    _release = staticmethod(_npusim.destroy_stream)

    def __init__(self):
        self.handle = _npusim.create_stream()

    @property
    def id(self):
        return _npusim.stream_id(self.handle)

    def synchronize(self):
        _npusim.synchronize_stream(self.handle)

    def destroy(self):
        self._close()


class Event(_Handle):
    """A device event (aclrtCreateEvent): record it on a stream, wait for
    it on the host (synchronize) or on another stream (wait_on)."""

    _release = staticmethod(_npusim.destroy_event)

    def __init__(self):
        self.handle = _npusim.create_event()

    def record(self, stream=None):
        _npusim.record_event(self.handle, stream)

    def synchronize(self):
        _npusim.synchronize_event(self.handle)

    def wait_on(self, stream):
        """Makes later work on stream wait for this event's last record
        (aclrtStreamWaitEvent), or waits on the host where the runtime
        lacks that call."""
        if _npusim.has_stream_wait_event():
            _npusim.stream_wait_event(stream, self.handle)
        else:
            _npusim.synchronize_event(self.handle)

    def destroy(self):
        self._close()


class Kernel:
    """A registered kernel.  Its duration is fixed_ns if given, else the
    cost model max(flops / peak(type), bytes / HBM bandwidth) + overhead."""

    def __init__(self, name, type=AI_CORE, flops=0.0, bytes=0.0, fixed_ns=0):
        self.name = name
        self.type = type
        self.handle = _npusim.kernel_register(name, int(type), float(flops),
                                              float(bytes), int(fixed_ns))

    @property
    def duration_ns(self):
        return _npusim.kernel_duration(self.handle)

    def launch(self, stream, block_dim=1):
        _npusim.launch_kernel(self.handle, block_dim, stream)

    __call__ = launch


class DeviceBuffer(_Handle):
    """Device memory (aclrtMalloc)."""

    _release = staticmethod(_npusim.free)

    def __init__(self, size):
        self.size = size
        self.handle = _npusim.malloc(size)

    def free(self):
        self._close()


class HostBuffer(_Handle):
    """Pinned host memory (aclrtMallocHost) with helpers to fill and read
    it."""

    _release = staticmethod(_npusim.free_host)

    def __init__(self, size):
        self.size = size
        self.handle = _npusim.malloc_host(size)

    def write(self, data):
        if len(data) > self.size:
            raise ValueError("data larger than the buffer")
        _npusim.write_host(self.handle, data)

    def read(self, n=None):
        return _npusim.read_host(self.handle, self.size if n is None else n)

    def fill_float(self, value, count=None):
        count = self.size // 4 if count is None else count
        self.write(struct.pack("<f", value) * count)

    def floats(self, count=None):
        count = self.size // 4 if count is None else count
        return struct.unpack("<%df" % count, self.read(count * 4))

    def free(self):
        self._close()


def malloc(size):
    return DeviceBuffer(size)


def free(buf):
    buf.free()


def memcpy(dst, src, count, kind, stream=None):
    """aclrtMemcpy, or aclrtMemcpyAsync on stream."""
    _npusim.memcpy(dst, src, count, kind, stream)


def memset(dst, value, count, stream=None):
    """aclrtMemset, or aclrtMemsetAsync on stream."""
    _npusim.memset(dst, value, count, stream)


def get_root_info():
    """HcclGetRootInfo: the rendezvous token, as bytes."""
    return _npusim.root_info()


def root_info_to_env(root, env=None):
    """Puts root info into the environment (for processes started later)."""
    (os.environ if env is None else env)[ROOT_INFO_ENV] = root.hex()


def root_info_from_env():
    value = os.environ.get(ROOT_INFO_ENV)
    if not value:
        raise KeyError(ROOT_INFO_ENV + " is not set")
    return bytes.fromhex(value)


def write_root_info(path, root):
    with open(path, "wb") as f:
        f.write(root)


def read_root_info(path):
    with open(path, "rb") as f:
        return f.read()


class Communicator(_Handle):
    """An HCCL communicator of nranks ranks (HcclCommInitRootInfo; waits
    for every rank).  root defaults to $MSPTI_NPUSIM_ROOT_INFO."""

    _release = staticmethod(_npusim.comm_destroy)

    def __init__(self, nranks, rank, root=None):
        if root is None:
            root = root_info_from_env()
        self.nranks = nranks
        self.rank = rank
        self.handle = _npusim.comm_init(nranks, root, rank)

    @property
    def name(self):
        return _npusim.comm_name(self.handle)

    def all_reduce(self, send, recv, count, dtype=FP32, op=SUM, stream=None):
        _npusim.all_reduce(send, recv, count, dtype, op, self.handle, stream)

    def broadcast(self, buf, count, dtype=FP32, root=0, stream=None):
        _npusim.broadcast(buf, count, dtype, root, self.handle, stream)

    def all_gather(self, send, recv, count, dtype=FP32, stream=None):
        _npusim.all_gather(send, recv, count, dtype, self.handle, stream)

    def barrier(self, stream=None):
        _npusim.barrier(self.handle, stream)

    def destroy(self):
        self._close()

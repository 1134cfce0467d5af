"""mspti: msPTI monitors, MSTX and a profiler for Python.

Monitors (KernelMonitor, HcclMonitor, CommunicationMonitor, MstxMonitor)
call back with data objects on a delivery thread; ``mspti.mstx`` marks
steps and regions; ``mspti.Profile`` (also ``mspti.profile(...)``, a
context manager and decorator factory, and ``mspti.start()`` /
``mspti.stop()``) captures a block of code, framework ops (PyTorch aten
ops) and device activity, and reports on it with the analysis engine of
``msptictl report`` and in torch.profiler's layouts.

Every kind but MARKER needs libmspti.so to interpose the runtime: run
``LD_PRELOAD=libmspti.so python3 train.py``.  Without it those kinds are
refused (ERROR_WITHOUT_LD_PRELOAD, with an MsptiPreloadWarning naming
them) rather than accepted and silent.  See doc/python.md.
"""

from . import _mspti
from .constants import (MsptiActivityFlag, MsptiActivityKind,
                        MsptiActivitySourceKind, MsptiCommunicationDataType,
                        MsptiResult)
from .data import (CommunicationData, HcclData, KernelData, MarkerData,
                   MsptiObjectId, RangeMarkerData)
from .monitor import (BaseMonitor, CommunicationMonitor, HcclMonitor,
                      KernelMonitor, MsptiError, MsptiPreloadWarning,
                      MstxMonitor, callback_errors)
from . import mstx
from ._profile import (Profile, ProfilerAction, ProfilerActivity, Schedule,
                       Table, profile, record_function, schedule, start,
                       stop, tensorboard_trace_handler)

from ._mspti import version as __version__

# Daemon sessions asking for framework ops (msptictl start --kinds op):
# a watcher polls libmspti's flag; started when PyTorch is in use.
import sys as _sys
from . import _session
if "torch" in _sys.modules:
    _session.start_watcher()

__all__ = [
    "MsptiResult", "MsptiActivityKind", "MsptiActivityFlag",
    "MsptiActivitySourceKind", "MsptiCommunicationDataType",
    "MsptiObjectId", "KernelData", "HcclData", "CommunicationData",
    "MarkerData", "RangeMarkerData",
    "BaseMonitor", "KernelMonitor", "HcclMonitor", "CommunicationMonitor",
    "MstxMonitor", "MsptiError", "MsptiPreloadWarning", "callback_errors",
    "mstx", "Profile", "ProfilerAction", "ProfilerActivity", "Schedule",
    "Table", "schedule", "profile", "start", "stop", "record_function",
    "tensorboard_trace_handler", "stats",
]


def _kinds(d):
    out = {}
    for k, n in d.items():
        try:
            out[MsptiActivityKind(k)] = n
        except ValueError:
            out[k] = n
    return out


def stats():
    """Counters since the process started.

    ``delivered`` and ``dropped`` map each MsptiActivityKind to how many of
    its records reached the delivery thread and how many were lost (no
    buffer, device channel overrun, memory: libmspti's
    msptiActivityGetNumDroppedRecords, plus buffers this package could not
    queue); kinds with none are left out.  ``dropped_total`` also counts
    losses of no known kind.  The rest: ``records``, ``callback_errors``,
    ``lost_buffers``, ``buffers_queued``, ``buffers_delivered``."""
    s = _mspti.stats()
    s["delivered"] = _kinds(s["delivered"])
    s["dropped"] = _kinds(s["dropped"])
    return s

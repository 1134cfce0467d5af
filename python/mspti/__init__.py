"""mspti: msPTI monitors, MSTX and a profiler for Python.

Monitors (KernelMonitor, HcclMonitor, CommunicationMonitor, MstxMonitor)
call back with data objects on a delivery thread; ``mspti.mstx`` marks
steps and regions; ``mspti.Profile`` captures a block of code and reports
on it with the analysis engine of ``msptictl report``.

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
from .profile import Profile, ProfilerAction, Schedule, Table, schedule

__version__ = "0.1"

__all__ = [
    "MsptiResult", "MsptiActivityKind", "MsptiActivityFlag",
    "MsptiActivitySourceKind", "MsptiCommunicationDataType",
    "MsptiObjectId", "KernelData", "HcclData", "CommunicationData",
    "MarkerData", "RangeMarkerData",
    "BaseMonitor", "KernelMonitor", "HcclMonitor", "CommunicationMonitor",
    "MstxMonitor", "MsptiError", "MsptiPreloadWarning", "callback_errors",
    "mstx", "Profile", "ProfilerAction", "Schedule", "Table", "schedule",
    "stats",
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

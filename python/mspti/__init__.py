"""mspti: msPTI monitors, MSTX and a profiler for Python.

Monitors (KernelMonitor, HcclMonitor, CommunicationMonitor, MstxMonitor)
call back with data objects on a delivery thread; ``mspti.mstx`` marks
steps and regions; ``mspti.Profile`` captures a block of code and reports
on it with the analysis engine of ``msptictl report``.

Kinds that need interposition (HCCL, COMMUNICATION, MEMCPY, MEMSET,
MEMORY) work when libmspti.so comes before the runtime in symbol
resolution: run ``LD_PRELOAD=libmspti.so python3 train.py``, or import
mspti before the runtime library is loaded.  See doc/python.md.
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


def stats():
    """Delivery counters: records, callback_errors, lost_buffers, ..."""
    return _mspti.stats()

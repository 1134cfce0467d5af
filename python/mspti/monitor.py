"""msPTI monitors: KernelMonitor, HcclMonitor, CommunicationMonitor and
MstxMonitor.

All monitors share one set of activity buffers and one delivery thread
(``mspti-delivery``).  libmspti hands full or flushed buffers to the
extension, which queues them without taking the GIL; the delivery thread
turns each record into a data object and calls the callbacks with the GIL
held.  A callback that raises is reported through ``sys.unraisablehook``
and counted (``callback_errors()``); delivery goes on.
"""

import atexit
import os
import threading
import warnings

from . import _mspti
from .constants import MsptiActivityFlag, MsptiActivityKind, MsptiResult
from .data import (CommunicationData, HcclData, KernelData, MarkerData,
                   RangeMarkerData)

__all__ = [
    "MsptiError",
    "MsptiPreloadWarning",
    "BaseMonitor",
    "KernelMonitor",
    "HcclMonitor",
    "CommunicationMonitor",
    "MstxMonitor",
    "callback_errors",
]

# One %s: the kinds, comma separated.  Importing mspti first does not
# help: Python loads extensions (and so libmspti) with RTLD_LOCAL.
_PRELOAD_HINT = (
    "msPTI returned MSPTI_ERROR_WITHOUT_LD_PRELOAD for %s: libmspti.so does "
    "not interpose the runtime in this process, so these kinds would record "
    "nothing; run the program as LD_PRELOAD=libmspti.so python3 ...")


class MsptiError(RuntimeError):
    """An msPTI call failed; ``result`` is the MsptiResult."""

    def __init__(self, result, message):
        super().__init__("%s: %s" % (MsptiResult(result).name, message))
        self.result = MsptiResult(result)


class MsptiPreloadWarning(RuntimeWarning):
    """A kind needs LD_PRELOAD interposition that is not in effect."""


def _result(code):
    try:
        return MsptiResult(code)
    except ValueError:
        return MsptiResult.ERROR_INNER


def _warn_preload(kinds, stacklevel=3):
    """One MsptiPreloadWarning naming every kind in kinds (refused with
    MSPTI_ERROR_WITHOUT_LD_PRELOAD)."""
    names = []
    for k in kinds:
        try:
            names.append(MsptiActivityKind(k).name)
        except ValueError:
            names.append(str(k))
    if names:
        warnings.warn(_PRELOAD_HINT % ", ".join(names), MsptiPreloadWarning,
                      stacklevel=stacklevel + 1)


def _warn_enable(kind, code):
    if code == MsptiResult.ERROR_WITHOUT_LD_PRELOAD:
        _warn_preload([kind], stacklevel=4)


class _Core:
    """The shared delivery machinery: consumers per kind, users (started
    monitors and profiles), the delivery thread.  Guarded by ``lock``."""

    lock = threading.RLock()
    thread = None
    users = set()
    consumers = {}
    types = {
        MsptiActivityKind.KERNEL: KernelData,
        MsptiActivityKind.HCCL: HcclData,
        MsptiActivityKind.COMMUNICATION: CommunicationData,
        MsptiActivityKind.MARKER: MarkerData,
    }

    @classmethod
    def consumer_list(cls, kind):
        lst = cls.consumers.get(kind)
        if lst is None:
            lst = cls.consumers[kind] = []
            _mspti.set_consumers(int(kind), cls.types.get(kind), lst)
        return lst

    @classmethod
    def start(cls):
        with cls.lock:
            if cls.thread is not None:
                return MsptiResult.SUCCESS
            r = _result(_mspti.start())
            if r != MsptiResult.SUCCESS:
                return r
            cls.thread = threading.Thread(target=_mspti.delivery_loop,
                                          name="mspti-delivery", daemon=True)
            cls.thread.start()
            return MsptiResult.SUCCESS

    @classmethod
    def stop(cls):
        with cls.lock:
            t = cls.thread
            if t is None:
                return MsptiResult.SUCCESS
            r = _result(_mspti.flush_all())
            _mspti.stop()
            cls.thread = None
        if t is not threading.current_thread():
            t.join()
        return r

    @classmethod
    def add_user(cls, user):
        with cls.lock:
            r = cls.start()
            if r == MsptiResult.SUCCESS:
                cls.users.add(user)
            return r

    @classmethod
    def remove_user(cls, user):
        with cls.lock:
            cls.users.discard(user)
            if not cls.users:
                return cls.stop()
            return MsptiResult.SUCCESS

    @classmethod
    def after_fork(cls):
        # The delivery thread does not exist in a child, and the parent's
        # monitors do not run here: forget them and their kinds, so the
        # child starts (and stops) its own from a clean state.
        cls.lock = threading.RLock()
        cls.thread = None
        users, cls.users = cls.users, set()
        for user in users:
            forget = getattr(user, "_forget", None)
            if forget is not None:
                forget()
        for lst in cls.consumers.values():
            del lst[:]
        _mspti.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Core.after_fork)


class BaseMonitor:
    """What every monitor shares: the buffer size, flushing, and starting
    or stopping the delivery machinery."""

    _kind = None

    def __init__(self):
        self._callback = None
        self._started = False

    # -- class methods shared by all monitors -------------------------
    @classmethod
    def start_monitor(cls):
        """Start the delivery machinery (monitors do this themselves)."""
        return _Core.start()

    @classmethod
    def stop_monitor(cls):
        """Stop every started monitor, flushing first, and the delivery
        thread."""
        with _Core.lock:
            for user in list(_Core.users):
                user.stop()
            return _Core.stop()

    @classmethod
    def flush_all(cls):
        """Deliver every record buffered so far; returns once the
        callbacks have seen them."""
        return _result(_mspti.flush_all())

    @classmethod
    def flush_period(cls, time_ms):
        """Flush every time_ms milliseconds (0 turns it off)."""
        if not isinstance(time_ms, int) or time_ms < 0 or time_ms > 0xFFFFFFFF:
            return MsptiResult.ERROR_INVALID_PARAMETER
        return _result(_mspti.flush_period(time_ms))

    @classmethod
    def set_buffer_size(cls, size):
        """Activity buffer size in MB, 1..256 (default 8); used from the
        next start of the delivery machinery."""
        if isinstance(size, bool) or not isinstance(size, int) or \
                not 1 <= size <= 256:
            return MsptiResult.ERROR_INVALID_PARAMETER
        _mspti.set_buffer_size(size * 1024 * 1024)
        return MsptiResult.SUCCESS

    # -- per monitor ----------------------------------------------------
    def _consumer(self):
        return self._callback

    def _start(self, callback):
        with _Core.lock:
            if self._started:
                self.stop()
            r = _Core.add_user(self)
            if r != MsptiResult.SUCCESS:
                return r
            self._callback = callback
            r = _result(_mspti.enable(int(self._kind)))
            if r != MsptiResult.SUCCESS:
                _Core.remove_user(self)
                self._callback = None
                _warn_enable(self._kind, r)
                return r
            _Core.consumer_list(self._kind).append(self._consumer())
            self._started = True
            return MsptiResult.SUCCESS

    def _forget(self):
        # In a forked child: the parent's monitor is not running here.
        self._started = False
        self._callback = None

    def start(self, callback):
        """Enable this monitor's kind and call callback(data) for each
        record, on the delivery thread."""
        if not callable(callback):
            raise TypeError("callback must be callable")
        return self._start(callback)

    def stop(self):
        """Disable the kind, deliver what is buffered, then stop calling
        back."""
        with _Core.lock:
            if not self._started:
                return MsptiResult.SUCCESS
            # Flush while the kind is on (device records are drained only
            # for wanted kinds), then once more after turning it off.
            _mspti.flush_all()
            _mspti.disable(int(self._kind))
            r = _result(_mspti.flush_all())
            lst = _Core.consumer_list(self._kind)
            consumer = self._consumer()
            for i, c in enumerate(lst):
                if c is consumer or c == consumer:
                    del lst[i]
                    break
            self._started = False
            self._callback = None
            _Core.remove_user(self)
            return r

    @property
    def started(self):
        return self._started

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class KernelMonitor(BaseMonitor):
    """Kernels executed on the device: callback(KernelData).

    KernelMonitor, HcclMonitor and CommunicationMonitor need libmspti.so
    to interpose the runtime (LD_PRELOAD); without it start() returns
    ERROR_WITHOUT_LD_PRELOAD and warns (MsptiPreloadWarning)."""

    _kind = MsptiActivityKind.KERNEL


class HcclMonitor(BaseMonitor):
    """Collectives on the device: callback(HcclData)."""

    _kind = MsptiActivityKind.HCCL


class CommunicationMonitor(BaseMonitor):
    """Collectives with their arguments: callback(CommunicationData)."""

    _kind = MsptiActivityKind.COMMUNICATION


_INSTANT = (MsptiActivityFlag.MARKER_INSTANTANEOUS |
            MsptiActivityFlag.MARKER_INSTANTANEOUS_WITH_DEVICE)
_START = (MsptiActivityFlag.MARKER_START |
          MsptiActivityFlag.MARKER_START_WITH_DEVICE)
_END = (MsptiActivityFlag.MARKER_END |
        MsptiActivityFlag.MARKER_END_WITH_DEVICE)


class MstxMonitor(BaseMonitor):
    """MSTX marks and ranges: mark_cb(MarkerData) for each mark,
    range_cb(RangeMarkerData) for each range once both ends are seen
    (START and END paired by (id, source_kind))."""

    _kind = MsptiActivityKind.MARKER

    def __init__(self):
        super().__init__()
        self._mark_cb = None
        self._range_cb = None
        self._open = {}
        self._orphans = {}
        self._bound = self._on_marker

    def _consumer(self):
        return self._bound

    def start(self, mark_cb=None, range_cb=None):
        """Start delivering marks to mark_cb and ranges to range_cb (either
        may be None)."""
        for cb in (mark_cb, range_cb):
            if cb is not None and not callable(cb):
                raise TypeError("callbacks must be callable or None")
        self._mark_cb = mark_cb
        self._range_cb = range_cb
        self._open = {}
        self._orphans = {}
        return self._start(self._bound)

    def enable_domain(self, name):
        """Record the MSTX domain called name (all are on by default)."""
        return _result(_mspti.enable_domain(name))

    def disable_domain(self, name):
        """Drop the marks and ranges of the MSTX domain called name."""
        return _result(_mspti.disable_domain(name))

    def _forget(self):
        super()._forget()
        self._open = {}
        self._orphans = {}

    @property
    def open_ranges(self):
        """Range starts still waiting for their end."""
        return len(self._open)

    def _on_marker(self, m):
        flag = m.flag
        key = (m.id, m.source_kind)
        if flag & _INSTANT:
            if self._mark_cb is not None:
                self._mark_cb(m)
        elif flag & _START:
            end = self._orphans.pop(key, None)
            if end is None:
                self._open[key] = m
            elif self._range_cb is not None:
                self._range_cb(RangeMarkerData.from_markers(m, end))
        elif flag & _END:
            start = self._open.pop(key, None)
            if start is None:
                # The end came first (another thread's buffer).
                self._orphans[key] = m
            elif self._range_cb is not None:
                self._range_cb(RangeMarkerData.from_markers(start, m))


def callback_errors():
    """How many callback calls raised (each was reported through
    sys.unraisablehook)."""
    return _mspti.stats()["callback_errors"]


def _shutdown():
    # Stop the delivery thread before the interpreter goes away.
    try:
        BaseMonitor.stop_monitor()
    except Exception:  # pragma: no cover - best effort at exit
        pass


atexit.register(_shutdown)

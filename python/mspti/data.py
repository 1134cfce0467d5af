"""Data classes handed to the monitor callbacks.

The extension builds them from the msPTI records, passing the fields
positionally in the order of ``__slots__``.  Times are nanoseconds
(CLOCK_REALTIME); a device or stream id that does not apply is -1.
"""

from .constants import (MsptiActivityFlag, MsptiActivityKind,
                        MsptiActivitySourceKind, MsptiCommunicationDataType)

__all__ = [
    "MsptiObjectId",
    "KernelData",
    "HcclData",
    "CommunicationData",
    "MarkerData",
    "RangeMarkerData",
]


class _Record:
    __slots__ = ()

    def __init__(self, *values):
        for name, value in zip(self.__slots__, values):
            setattr(self, name, value)

    def _asdict(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other):
        return type(self) is type(other) and self._asdict() == other._asdict()

    def __repr__(self):
        fields = ", ".join("%s=%r" % (name, getattr(self, name))
                           for name in self.__slots__)
        return "%s(%s)" % (type(self).__name__, fields)

    __hash__ = None


class MsptiObjectId(_Record):
    """Host thread (process_id, thread_id) or device stream (device_id,
    stream_id) a marker belongs to; the pair that does not apply is -1."""

    __slots__ = ("process_id", "thread_id", "device_id", "stream_id")


class _Work(_Record):
    """A record of device work: kind as MsptiActivityKind, and a duration."""

    __slots__ = ()

    def __init__(self, *values):
        super().__init__(*values)
        self.kind = MsptiActivityKind(self.kind)

    @property
    def duration(self):
        """end - start, in ns."""
        return self.end - self.start


class KernelData(_Work):
    """One kernel executed on a device (MSPTI_ACTIVITY_KIND_KERNEL)."""

    __slots__ = ("kind", "start", "end", "device_id", "stream_id",
                 "correlation_id", "type", "name")


class HcclData(_Work):
    """One collective on a device (MSPTI_ACTIVITY_KIND_HCCL); bandwidth in
    GB/s."""

    __slots__ = ("kind", "start", "end", "device_id", "stream_id",
                 "bandwidth", "name", "comm_name")


class CommunicationData(_Work):
    """One collective with its arguments
    (MSPTI_ACTIVITY_KIND_COMMUNICATION)."""

    __slots__ = ("kind", "data_type", "count", "device_id", "stream_id",
                 "start", "end", "alg_type", "name", "comm_name",
                 "correlation_id")

    def __init__(self, *values):
        super().__init__(*values)
        self.data_type = MsptiCommunicationDataType(self.data_type)


class MarkerData(_Record):
    """One MSTX marker record (MSPTI_ACTIVITY_KIND_MARKER): a mark, or one
    end of a range."""

    __slots__ = ("kind", "flag", "source_kind", "timestamp", "id",
                 "object_id", "name", "domain")

    def __init__(self, *values):
        super().__init__(*values)
        self.kind = MsptiActivityKind(self.kind)
        self.flag = MsptiActivityFlag(self.flag)
        self.source_kind = MsptiActivitySourceKind(self.source_kind)
        if not isinstance(self.object_id, MsptiObjectId):
            self.object_id = MsptiObjectId(*self.object_id)


class RangeMarkerData(_Record):
    """A range: the START and END marker records with the same
    (id, source_kind), joined."""

    __slots__ = ("kind", "source_kind", "id", "object_id", "name", "domain",
                 "start", "end")

    @property
    def duration(self):
        """end - start, in ns."""
        return self.end - self.start

    @classmethod
    def from_markers(cls, start, end):
        """Joins a START MarkerData and its END MarkerData."""
        return cls(start.kind, start.source_kind, start.id, start.object_id,
                   start.name, start.domain, start.timestamp, end.timestamp)

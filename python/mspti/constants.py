"""Enumerations of the msPTI C API, with the same values."""

import enum

__all__ = [
    "MsptiResult",
    "MsptiActivityKind",
    "MsptiActivityFlag",
    "MsptiActivitySourceKind",
    "MsptiCommunicationDataType",
]


class MsptiResult(enum.IntEnum):
    """msptiResult."""

    SUCCESS = 0
    ERROR_INVALID_PARAMETER = 1
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 2
    ERROR_MAX_LIMIT_REACHED = 3
    ERROR_DEVICE_OFFLINE = 4
    ERROR_QUEUE_EMPTY = 5
    ERROR_WITHOUT_LD_PRELOAD = 6
    ERROR_INNER = 999
    ERROR_FORCE_INT = 0x7FFFFFFF


class MsptiActivityKind(enum.IntEnum):
    """msptiActivityKind."""

    INVALID = 0
    MARKER = 1
    KERNEL = 2
    API = 3
    HCCL = 4
    MEMORY = 5
    MEMSET = 6
    MEMCPY = 7
    EXTERNAL_CORRELATION = 8
    COMMUNICATION = 9
    ACL_API = 10
    NODE_API = 11
    RUNTIME_API = 12
    COUNT = 13
    FORCE_INT = 0x7FFFFFFF


class MsptiActivityFlag(enum.IntFlag):
    """msptiActivityFlag (a bitmask)."""

    NONE = 0
    MARKER_INSTANTANEOUS = 1
    MARKER_START = 2
    MARKER_END = 4
    MARKER_INSTANTANEOUS_WITH_DEVICE = 8
    MARKER_START_WITH_DEVICE = 16
    MARKER_END_WITH_DEVICE = 32


class MsptiActivitySourceKind(enum.IntEnum):
    """msptiActivitySourceKind."""

    HOST = 0
    DEVICE = 1


class MsptiCommunicationDataType(enum.IntEnum):
    """msptiCommunicationDataType."""

    INT8 = 0
    INT16 = 1
    INT32 = 2
    FP16 = 3
    FP32 = 4
    INT64 = 5
    UINT64 = 6
    UINT8 = 7
    UINT16 = 8
    UINT32 = 9
    FP64 = 10
    BFP16 = 11
    INT128 = 12
    HIF8 = 14
    FP8E4M3 = 15
    FP8E5M2 = 16
    FP8E8M0 = 17
    INVALID_TYPE = 0xFFFF

    @classmethod
    def _missing_(cls, value):
        return cls.INVALID_TYPE

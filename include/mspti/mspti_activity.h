/**
 * @file mspti_activity.h
 * @brief msPTI activity API: kinds, record layouts and buffer management.
 *
 * Records are written back to back into buffers the tool supplies through
 * the request callback and returned through the complete callback.  Each
 * record is exactly sizeof its struct; every struct is packed and its size
 * rounded up to a multiple of 8.  The layouts are part of the ABI.
 */
#ifndef MSPTI_ACTIVITY_H
#define MSPTI_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mspti_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Device id of a record that has none. */
#define MSPTI_INVALID_DEVICE_ID		((uint32_t)0xFFFFFFFFu)
/** Stream id of a record that has none. */
#define MSPTI_INVALID_STREAM_ID		((uint32_t)0xFFFFFFFFu)
/** Correlation id of a record not caused by an API call. */
#define MSPTI_INVALID_CORRELATION_ID	((uint64_t)0)

/**
 * @brief Kinds of activity record.
 */
typedef enum {
	MSPTI_ACTIVITY_KIND_INVALID = 0,
	MSPTI_ACTIVITY_KIND_MARKER = 1,		/**< msptiActivityMarker */
	MSPTI_ACTIVITY_KIND_KERNEL = 2,		/**< msptiActivityKernel */
	MSPTI_ACTIVITY_KIND_API = 3,		/**< msptiActivityApi */
	MSPTI_ACTIVITY_KIND_HCCL = 4,		/**< msptiActivityHccl */
	MSPTI_ACTIVITY_KIND_MEMORY = 5,		/**< msptiActivityMemory */
	MSPTI_ACTIVITY_KIND_MEMSET = 6,		/**< msptiActivityMemset */
	MSPTI_ACTIVITY_KIND_MEMCPY = 7,		/**< msptiActivityMemcpy */
	MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION = 8, /**< msptiActivityExternalCorrelation */
	MSPTI_ACTIVITY_KIND_COMMUNICATION = 9,	/**< msptiActivityCommunication */
	MSPTI_ACTIVITY_KIND_ACL_API = 10,	/**< msptiActivityApi */
	MSPTI_ACTIVITY_KIND_NODE_API = 11,	/**< msptiActivityApi */
	MSPTI_ACTIVITY_KIND_RUNTIME_API = 12,	/**< msptiActivityApi */
	MSPTI_ACTIVITY_KIND_COUNT = 13,
	MSPTI_ACTIVITY_KIND_FORCE_INT = 0x7fffffff
} msptiActivityKind;

/**
 * @brief Where a record was observed.
 */
typedef enum {
	MSPTI_ACTIVITY_SOURCE_KIND_HOST = 0,
	MSPTI_ACTIVITY_SOURCE_KIND_DEVICE = 1
} msptiActivitySourceKind;

/**
 * @brief Kinds of external correlation id.
 */
typedef enum {
	MSPTI_EXTERNAL_CORRELATION_KIND_INVALID = 0,
	MSPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN = 1,
	MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 = 2,
	MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 = 3,
	MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 = 4,
	MSPTI_EXTERNAL_CORRELATION_KIND_SIZE = 5,
	MSPTI_EXTERNAL_CORRELATION_KIND_FORCE_INT = 0x7fffffff
} msptiExternalCorrelationKind;

/**
 * @brief Marker flags (a bitmask).
 */
typedef enum {
	MSPTI_ACTIVITY_FLAG_NONE = 0,
	MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS = 1 << 0,
	MSPTI_ACTIVITY_FLAG_MARKER_START = 1 << 1,
	MSPTI_ACTIVITY_FLAG_MARKER_END = 1 << 2,
	MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE = 1 << 3,
	MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE = 1 << 4,
	MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE = 1 << 5,
	MSPTI_ACTIVITY_FLAG_FORCE_INT = 0x7fffffff
} msptiActivityFlag;

/**
 * @brief Memory record operation.
 */
typedef enum {
	MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION = 0,
	MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE = 1
} msptiActivityMemoryOperationType;

/**
 * @brief Kind of memory a memory record refers to.
 */
typedef enum {
	MSPTI_ACTIVITY_MEMORY_UNKNOWN = 0,
	MSPTI_ACTIVITY_MEMORY_DEVICE = 1
} msptiActivityMemoryKind;

/**
 * @brief Direction of a copy.
 */
typedef enum {
	MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN = 0,
	MSPTI_ACTIVITY_MEMCPY_KIND_HTOH = 1,
	MSPTI_ACTIVITY_MEMCPY_KIND_HTOD = 2,
	MSPTI_ACTIVITY_MEMCPY_KIND_DTOH = 3,
	MSPTI_ACTIVITY_MEMCPY_KIND_DTOD = 4,
	MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT = 5
} msptiActivityMemcpyKind;

/**
 * @brief Element type of a collective communication.
 */
typedef enum {
	MSPTI_ACTIVITY_COMMUNICATION_INT8 = 0,
	MSPTI_ACTIVITY_COMMUNICATION_INT16 = 1,
	MSPTI_ACTIVITY_COMMUNICATION_INT32 = 2,
	MSPTI_ACTIVITY_COMMUNICATION_FP16 = 3,
	MSPTI_ACTIVITY_COMMUNICATION_FP32 = 4,
	MSPTI_ACTIVITY_COMMUNICATION_INT64 = 5,
	MSPTI_ACTIVITY_COMMUNICATION_UINT64 = 6,
	MSPTI_ACTIVITY_COMMUNICATION_UINT8 = 7,
	MSPTI_ACTIVITY_COMMUNICATION_UINT16 = 8,
	MSPTI_ACTIVITY_COMMUNICATION_UINT32 = 9,
	MSPTI_ACTIVITY_COMMUNICATION_FP64 = 10,
	MSPTI_ACTIVITY_COMMUNICATION_BFP16 = 11,
	MSPTI_ACTIVITY_COMMUNICATION_INT128 = 12,
	MSPTI_ACTIVITY_COMMUNICATION_HIF8 = 14,
	MSPTI_ACTIVITY_COMMUNICATION_FP8E4M3 = 15,
	MSPTI_ACTIVITY_COMMUNICATION_FP8E5M2 = 16,
	MSPTI_ACTIVITY_COMMUNICATION_FP8E8M0 = 17,
	MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE = 0xFFFF
} msptiCommunicationDataType;

/**
 * @brief Identifies a host thread or a device stream.
 */
typedef union {
	/** For host records. */
	struct {
		uint32_t processId;
		uint32_t threadId;
	} pt;
	/** For device records. */
	struct {
		uint32_t deviceId;
		uint32_t streamId;
	} ds;
} msptiObjectId;

/**
 * @brief Header common to every record: read kind, then cast.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
} msptiActivity;

/**
 * @brief MSPTI_ACTIVITY_KIND_MARKER: an MSTX mark or range end point.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	msptiActivityFlag flag;			/**< INSTANTANEOUS, START or END (maybe _WITH_DEVICE) */
	msptiActivitySourceKind sourceKind;	/**< HOST or DEVICE */
	uint64_t timestamp;			/**< ns, CLOCK_REALTIME */
	uint64_t id;				/**< mark or range id, shared by host and device records */
	msptiObjectId objectId;			/**< pt for host records, ds for device records */
	const char *name;			/**< the message */
	const char *domain;			/**< the domain name ("default" for the default domain) */
} msptiActivityMarker;

/**
 * @brief MSPTI_ACTIVITY_KIND_API, _ACL_API, _NODE_API and _RUNTIME_API.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	uint64_t start;				/**< ns, CLOCK_REALTIME */
	uint64_t end;				/**< ns, CLOCK_REALTIME */
	struct {
		uint32_t processId;
		uint32_t threadId;
	} pt;
	uint64_t correlationId;
	const char *name;			/**< API function name */
} msptiActivityApi;

/**
 * @brief MSPTI_ACTIVITY_KIND_KERNEL: one kernel executed on a device.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	uint64_t start;				/**< ns, CLOCK_REALTIME (converted from device time) */
	uint64_t end;
	struct {
		uint32_t deviceId;
		uint32_t streamId;
	} ds;
	uint64_t correlationId;			/**< that of the launching API call */
	const char *type;			/**< e.g. "KERNEL_AICORE" */
	const char *name;			/**< kernel name */
} msptiActivityKernel;

/**
 * @brief MSPTI_ACTIVITY_KIND_HCCL: one collective on a device.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	uint64_t start;
	uint64_t end;
	struct {
		uint32_t deviceId;
		uint32_t streamId;
	} ds;
	double bandWidth;			/**< bytes / duration in ns = GB/s */
	const char *name;			/**< operation name, e.g. "hcclAllReduce" */
	const char *commName;			/**< communicator name */
} msptiActivityHccl;

/**
 * @brief MSPTI_ACTIVITY_KIND_MEMORY: a device allocation or release.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	msptiActivityMemoryOperationType memoryOperationType;
	msptiActivityMemoryKind memoryKind;
	uint64_t correlationId;
	uint64_t start;
	uint64_t end;
	uint64_t address;
	uint64_t bytes;
	uint32_t processId;
	uint32_t deviceId;
	uint32_t streamId;
} msptiActivityMemory;

/**
 * @brief MSPTI_ACTIVITY_KIND_MEMSET.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	uint32_t value;
	uint64_t bytes;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t streamId;
	uint64_t correlationId;
	uint8_t isAsync;
} msptiActivityMemset;

/**
 * @brief MSPTI_ACTIVITY_KIND_MEMCPY.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	msptiActivityMemcpyKind copyKind;
	uint64_t bytes;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t streamId;
	uint64_t correlationId;
	uint8_t isAsync;
} msptiActivityMemcpy;

/**
 * @brief MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: ties an API call's
 * correlation id to the id on top of an external correlation stack.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	msptiExternalCorrelationKind externalKind;
	uint64_t externalId;
	uint64_t correlationId;
} msptiActivityExternalCorrelation;

/**
 * @brief MSPTI_ACTIVITY_KIND_COMMUNICATION: one collective, with its arguments.
 */
typedef struct MSPTI_PACKED_ALIGNMENT {
	msptiActivityKind kind;
	msptiCommunicationDataType dataType;
	uint64_t count;
	struct {
		uint32_t deviceId;
		uint32_t streamId;
	} ds;
	uint64_t start;
	uint64_t end;
	const char *algType;
	const char *name;
	const char *commName;
	uint64_t correlationId;
} msptiActivityCommunication;

/**
 * @brief Called (lazily, from a producing thread) when the library needs a
 * buffer.  Set *buffer (8-byte aligned) and *size; *maxNumRecords 0 means no
 * limit.  Setting *buffer to NULL drops records, which are counted.
 */
typedef void (*msptiBuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size,
    size_t *maxNumRecords);

/**
 * @brief Called when a buffer is full or flushed; validSize bytes hold records.
 * The buffer belongs to the tool again.
 */
typedef void (*msptiBuffersCallbackCompleteFunc)(uint8_t *buffer, size_t size,
    size_t validSize);

/** @brief Registers the buffer callbacks; both are required. */
MSPTI_API msptiResult msptiActivityRegisterCallbacks(
    msptiBuffersCallbackRequestFunc funcBufferRequested,
    msptiBuffersCallbackCompleteFunc funcBufferCompleted);

/** @brief Enables a kind.  INVALID, COUNT or out of range → INVALID_PARAMETER. */
MSPTI_API msptiResult msptiActivityEnable(msptiActivityKind kind);

/** @brief Disables a kind. */
MSPTI_API msptiResult msptiActivityDisable(msptiActivityKind kind);

/** @brief Whether a kind is enabled through this API. */
MSPTI_API bool msptiActivityIsEnabled(msptiActivityKind kind);

/** @brief Enables an MSTX domain by name (before or after it is created). */
MSPTI_API msptiResult msptiActivityEnableMarkerDomain(const char *name);

/** @brief Disables an MSTX domain by name; its marks and ranges are dropped. */
MSPTI_API msptiResult msptiActivityDisableMarkerDomain(const char *name);

/**
 * @brief Iterates the records of a completed buffer.  *record NULL starts at
 * the head, otherwise advances past *record.  Returns MAX_LIMIT_REACHED at the
 * end and INVALID_PARAMETER for a bad buffer or record.
 */
MSPTI_API msptiResult msptiActivityGetNextRecord(uint8_t *buffer,
    size_t validBufferSizeBytes, msptiActivity **record);

/** @brief Delivers every buffer holding records before returning. */
MSPTI_API msptiResult msptiActivityFlushAll(uint32_t flag);

/** @brief Flushes every time_ms milliseconds from a worker thread; 0 turns it off. */
MSPTI_API msptiResult msptiActivityFlushPeriod(uint32_t time_ms);

/** @brief Pushes an external id on the calling thread's stack for kind. */
MSPTI_API msptiResult msptiActivityPushExternalCorrelationId(
    msptiExternalCorrelationKind kind, uint64_t id);

/**
 * @brief Pops the calling thread's stack for kind into *lastId.  Empty stack →
 * QUEUE_EMPTY; NULL lastId → INVALID_PARAMETER.
 */
MSPTI_API msptiResult msptiActivityPopExternalCorrelationId(
    msptiExternalCorrelationKind kind, uint64_t *lastId);

/**
 * @brief Extension (named after CUPTI's cuptiActivityGetNumDroppedRecords):
 * *dropped gets how many records of kind the library could not keep since
 * the process started (the request callback gave no buffer, the device
 * channel overran, memory ran out); MSPTI_ACTIVITY_KIND_INVALID gives the
 * total over all kinds.  The count only grows.  Kind out of range or NULL
 * dropped → INVALID_PARAMETER.
 */
MSPTI_API msptiResult msptiActivityGetNumDroppedRecords(
    msptiActivityKind kind, size_t *dropped);

#ifdef __cplusplus
}
#endif

#endif /* MSPTI_ACTIVITY_H */

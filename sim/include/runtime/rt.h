/*
 * runtime/rt.h - low-level runtime calls of the simulated NPU (libnpusim).
 *
 * Signatures follow the CANN runtime (rt.h) entry points profilers use.
 */
#ifndef RUNTIME_RT_H
#define RUNTIME_RT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef RTS_API
#define RTS_API __attribute__((visibility("default")))
#endif

typedef int32_t rtError_t;
typedef void *rtStream_t;	/* same object as aclrtStream; NULL = default */

#define RT_ERROR_NONE 0

/**
 * Task id and device-wide stream id of the last task the calling thread
 * submitted (kernel, memcpy, memset, event record, collective, marker).
 * A profiler joins a host launch to its device record by
 * (device, streamId, taskId).  ACL_ERROR_RT_PARAM_INVALID on NULL
 * arguments; ids are 0xFFFFFFFF if the thread has submitted nothing.
 */
RTS_API rtError_t rtGetTaskIdAndStreamID(uint32_t *taskId, uint32_t *streamId);

/**
 * Queue a zero-length marker task on stm.  When the device reaches it a
 * MARKER record (marker_id = indexId, model_id = modelId, tag_id = tagId)
 * is written to the device's profiling channel.  Used for MSTX device-side
 * markers.
 */
RTS_API rtError_t rtProfilerTraceEx(uint64_t indexId, uint64_t modelId,
    uint16_t tagId, rtStream_t stm);

#ifdef __cplusplus
}
#endif

#endif /* RUNTIME_RT_H */

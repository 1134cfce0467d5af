/*
 * acl/acl.h - ACL runtime API of the simulated NPU (libnpusim).
 *
 * Names, types, values and signatures follow the public CANN ACL headers
 * (acl_base.h, acl_rt.h, rt_error_codes.h) so that code written against
 * this header, and an interposer built against it, also works on a real
 * CANN install.  Only the subset that libnpusim implements is declared.
 */
#ifndef ACL_ACL_H
#define ACL_ACL_H

#include <stddef.h>
#include <stdint.h>

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

/** Every ACL call returns an aclError; ACL_SUCCESS (0) on success. */
typedef int aclError;

typedef void *aclrtStream;	/**< NULL means the current device's default stream. */
typedef void *aclrtEvent;
typedef void *aclrtContext;
typedef void *aclrtFuncHandle;	/**< npusimKernelRegister() makes these. */

/* acl_base.h error codes. */
#define ACL_SUCCESS				0
#define ACL_ERROR_NONE				0
#define ACL_ERROR_INVALID_PARAM			100000
#define ACL_ERROR_UNINITIALIZE			100001
#define ACL_ERROR_REPEAT_INITIALIZE		100002
#define ACL_ERROR_INVALID_FILE			100003
#define ACL_ERROR_BAD_ALLOC			200000
#define ACL_ERROR_API_NOT_SUPPORT		200001
#define ACL_ERROR_INVALID_DEVICE		200002
#define ACL_ERROR_MEMORY_ADDRESS_UNALIGNED	200003
#define ACL_ERROR_RESOURCE_NOT_MATCH		200004
#define ACL_ERROR_INVALID_RESOURCE_HANDLE	200005
#define ACL_ERROR_FEATURE_UNSUPPORTED		200006
#define ACL_ERROR_STORAGE_OVER_LIMIT		300000
#define ACL_ERROR_INTERNAL_ERROR		500000
#define ACL_ERROR_FAILURE			500001
#define ACL_ERROR_RT_FAILURE			500003
#define ACL_ERROR_DRV_FAILURE			500004
#define ACL_ERROR_PROFILING_FAILURE		500005

/* rt_error_codes.h (the subset libnpusim returns). */
#define ACL_RT_SUCCESS				0
#define ACL_ERROR_RT_PARAM_INVALID		107000
#define ACL_ERROR_RT_INVALID_DEVICEID		107001
#define ACL_ERROR_RT_CONTEXT_NULL		107002
#define ACL_ERROR_RT_STREAM_CONTEXT		107003
#define ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID	107006
#define ACL_ERROR_RT_INVALID_MEMORY_TYPE	107016
#define ACL_ERROR_RT_INVALID_HANDLE		107017
#define ACL_ERROR_RT_INVALID_MALLOC_TYPE	107018
#define ACL_ERROR_RT_WAIT_TIMEOUT		107019
#define ACL_ERROR_RT_TASK_TIMEOUT		107020
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT	207000
#define ACL_ERROR_RT_MEMORY_ALLOCATION		207001
#define ACL_ERROR_RT_MEMORY_FREE		207002
#define ACL_ERROR_RT_NO_DEVICE			207004
#define ACL_ERROR_RT_RESOURCE_ALLOC_FAIL	207005
#define ACL_ERROR_RT_NO_EVENT_RESOURCE		207007
#define ACL_ERROR_RT_NO_STREAM_RESOURCE		207008
#define ACL_ERROR_RT_DEVICE_OOM			207018
#define ACL_ERROR_RT_INTERNAL_ERROR		507000
#define ACL_ERROR_RT_STREAM_NOT_COMPLETE	507004
#define ACL_ERROR_RT_EVENT_NOT_COMPLETE		507006
#define ACL_ERROR_RT_PROFILING_ERROR		507021
#define ACL_ERROR_RT_STREAM_SYNC_TIMEOUT	507046
#define ACL_ERROR_RT_EVENT_SYNC_TIMEOUT		507047
#define ACL_ERROR_RT_LINK_ERROR			507056
#define ACL_ERROR_RT_SUSPECT_REMOTE_ERROR	507057
#define ACL_ERROR_RT_COMM_OP_RETRY_FAIL		507904

typedef enum aclrtMemcpyKind {
	ACL_MEMCPY_HOST_TO_HOST = 0,
	ACL_MEMCPY_HOST_TO_DEVICE = 1,
	ACL_MEMCPY_DEVICE_TO_HOST = 2,
	ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
	ACL_MEMCPY_DEFAULT = 4,		/* direction inferred from the pointers */
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
	ACL_MEM_MALLOC_HUGE_FIRST = 0,
	ACL_MEM_MALLOC_HUGE_ONLY = 1,
	ACL_MEM_MALLOC_NORMAL_ONLY = 2,
	ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
	ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
	ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
} aclrtMemMallocPolicy;

typedef enum aclrtMemAttr {
	ACL_DDR_MEM = 0,
	ACL_HBM_MEM = 1,
	ACL_DDR_MEM_HUGE = 2,
	ACL_DDR_MEM_NORMAL = 3,
	ACL_HBM_MEM_HUGE = 4,
	ACL_HBM_MEM_NORMAL = 5,
	ACL_DDR_MEM_P2P_HUGE = 6,
	ACL_DDR_MEM_P2P_NORMAL = 7,
	ACL_HBM_MEM_P2P_HUGE = 8,
	ACL_HBM_MEM_P2P_NORMAL = 9,
} aclrtMemAttr;

typedef enum aclrtRunMode {
	ACL_DEVICE = 0,
	ACL_HOST = 1,
} aclrtRunMode;

/* Setup and devices. */
/** Initialise the runtime; configPath may be NULL.  Optional in libnpusim. */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
/** Make deviceId current for the calling thread (opens it on first use). */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode *runMode);

/* Contexts. */
ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext *context,
    int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext *context);

/* Streams. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);
/** Device-wide stream id (unique per device across processes). */
ACL_FUNC_VISIBILITY aclError aclrtStreamGetId(aclrtStream stream,
    int32_t *streamId);

/* Events. */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent *event);
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event,
    aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
/** Later work on stream starts after event's latest record completes. */
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream,
    aclrtEvent event);
/** Time between two completed records, in milliseconds (device clock). */
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float *ms,
    aclrtEvent startEvent, aclrtEvent endEvent);

/* Memory. */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size,
    aclrtMemMallocPolicy policy);
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free,
    size_t *total);
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax,
    const void *src, size_t count, aclrtMemcpyKind kind);
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void *dst, size_t destMax,
    const void *src, size_t count, aclrtMemcpyKind kind, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount,
    int32_t value, size_t count);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void *devPtr, size_t maxCount,
    int32_t value, size_t count, aclrtStream stream);

/* Kernels. */
/**
 * Launch a kernel (asynchronous).  funcHandle comes from
 * npusimKernelRegister(); argsData/argsSize are accepted and ignored
 * (may be NULL/0); blockDim must be > 0.
 */
ACL_FUNC_VISIBILITY aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle,
    uint32_t blockDim, const void *argsData, size_t argsSize,
    aclrtStream stream);

/** Text of the calling thread's most recent error (never NULL). */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif

#endif /* ACL_ACL_H */

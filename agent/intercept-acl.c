/*
 * ACL runtime interposers.  Each is defined here with the runtime's exact
 * signature, so with LD_PRELOAD (or libmspti linked ahead of the runtime)
 * the application calls us; we forward to dlsym(RTLD_NEXT).  Nothing here
 * allocates, locks or makes a syscall on the fast path.
 *
 * functionParams of a callback points at a struct <function>_params whose
 * fields are the call's arguments, in order (declared below).
 */
#include "config.h"

#include <string.h>

#include <acl/acl.h>

#include "api.h"

#define REAL(fn)							\
	static _Atomic(void *) real_slot;				\
	__typeof__(&fn) real = (__typeof__(&fn))api_real(&real_slot, #fn); \
	if (API_UNLIKELY(real == NULL))					\
		return ACL_ERROR_API_NOT_SUPPORT

#define RT	MSPTI_CB_DOMAIN_RUNTIME

struct aclrtSetDevice_params { int32_t deviceId; };
struct aclrtResetDevice_params { int32_t deviceId; };
struct aclrtCreateContext_params { aclrtContext *context; int32_t deviceId; };
struct aclrtDestroyContext_params { aclrtContext context; };
struct aclrtCreateStream_params { aclrtStream *stream; };
struct aclrtDestroyStream_params { aclrtStream stream; };
struct aclrtSynchronizeStream_params { aclrtStream stream; };
struct aclrtLaunchKernel_params {
	aclrtFuncHandle funcHandle; uint32_t blockDim; const void *argsData;
	size_t argsSize; aclrtStream stream;
};
struct aclrtMalloc_params {
	void **devPtr; size_t size; aclrtMemMallocPolicy policy;
};
struct aclrtFree_params { void *devPtr; };
struct aclrtMallocHost_params { void **hostPtr; size_t size; };
struct aclrtFreeHost_params { void *hostPtr; };
struct aclrtGetMemInfo_params { aclrtMemAttr attr; size_t *free; size_t *total; };
struct aclrtMemcpy_params {
	void *dst; size_t destMax; const void *src; size_t count;
	aclrtMemcpyKind kind;
};
struct aclrtMemcpyAsync_params {
	void *dst; size_t destMax; const void *src; size_t count;
	aclrtMemcpyKind kind; aclrtStream stream;
};
struct aclrtMemset_params {
	void *devPtr; size_t maxCount; int32_t value; size_t count;
};
struct aclrtMemsetAsync_params {
	void *devPtr; size_t maxCount; int32_t value; size_t count;
	aclrtStream stream;
};

/*
 * Sizes of live device and host allocations, for the RELEASE record: a lock-free
 * open-addressing map (address → bytes) with tombstones, used only while
 * MEMORY is wanted.  A full probe window just loses the size (0).
 */
#define MEM_SLOTS	(1u << 16)
#define MEM_PROBES	64
#define MEM_TOMB	((uint64_t)1)
static struct {
	_Atomic uint64_t addr;
	_Atomic uint64_t bytes;
} mem_map[MEM_SLOTS];

static size_t
mem_hash(uint64_t a)
{
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return (size_t)a;
}

static void
mem_put(uint64_t addr, uint64_t bytes)
{
	size_t h = mem_hash(addr), i, j;
	uint64_t cur;

	for (i = 0; i < MEM_PROBES; i++) {
		j = (h + i) & (MEM_SLOTS - 1);
		cur = atomic_load_explicit(&mem_map[j].addr, memory_order_relaxed);
		if ((cur == 0 || cur == MEM_TOMB) &&
		    atomic_compare_exchange_strong(&mem_map[j].addr, &cur, addr)) {
			atomic_store_explicit(&mem_map[j].bytes, bytes,
			    memory_order_release);
			return;
		}
	}
}

static uint64_t
mem_take(uint64_t addr)
{
	size_t h = mem_hash(addr), i, j;
	uint64_t cur, bytes;

	for (i = 0; i < MEM_PROBES; i++) {
		j = (h + i) & (MEM_SLOTS - 1);
		cur = atomic_load_explicit(&mem_map[j].addr, memory_order_acquire);
		if (cur == 0)
			return 0;
		if (cur == addr) {
			bytes = atomic_load_explicit(&mem_map[j].bytes,
			    memory_order_acquire);
			if (atomic_compare_exchange_strong(&mem_map[j].addr, &cur,
			    MEM_TOMB))
				return bytes;
			return 0;
		}
	}
	return 0;
}

/*
 * One MEMORY record.  Device memory (aclrtMalloc/Free) is kind DEVICE on
 * the current device; pinned host memory (aclrtMallocHost/FreeHost) is
 * kind UNKNOWN, msPTI having no host memory kind, with no device.
 */
static void
memory_record(const struct icall *c, msptiActivityMemoryOperationType op,
    void *addr, uint64_t bytes, bool host)
{
	msptiActivityMemory r;

	memset(&r, 0, sizeof(r));
	r.kind = MSPTI_ACTIVITY_KIND_MEMORY;
	r.memoryOperationType = op;
	r.memoryKind = host ? MSPTI_ACTIVITY_MEMORY_UNKNOWN :
	    MSPTI_ACTIVITY_MEMORY_DEVICE;
	r.correlationId = c->corr;
	r.start = c->start;
	r.end = c->end;
	r.address = (uint64_t)(uintptr_t)addr;
	r.bytes = bytes;
	r.processId = api_pid();
	r.deviceId = host ? MSPTI_INVALID_DEVICE_ID : icall_current_device();
	r.streamId = MSPTI_INVALID_STREAM_ID;
	activity_emit(&r, sizeof(r));
}

static msptiActivityMemcpyKind
memcpy_kind(aclrtMemcpyKind k)
{
	switch (k) {
	case ACL_MEMCPY_HOST_TO_HOST:	return MSPTI_ACTIVITY_MEMCPY_KIND_HTOH;
	case ACL_MEMCPY_HOST_TO_DEVICE:	return MSPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	case ACL_MEMCPY_DEVICE_TO_HOST:	return MSPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	case ACL_MEMCPY_DEVICE_TO_DEVICE: return MSPTI_ACTIVITY_MEMCPY_KIND_DTOD;
	case ACL_MEMCPY_DEFAULT:	return MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT;
	}
	return MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
}

/* Queues the device-side join for a copy, or emits a host-timed record
 * when the runtime cannot tell us the task. */
static void
memcpy_submit(const struct icall *c, aclrtMemcpyKind kind, size_t count,
    void *stream, bool async)
{
	struct pending p;
	msptiActivityMemcpy r;

	memset(&p, 0, sizeof(p));
	p.kind = MSPTI_ACTIVITY_KIND_MEMCPY;
	p.device = icall_stream_device(stream);
	p.corr = c->corr;
	p.start = c->start;
	p.end = c->end;
	p.bytes = count;
	p.copy_kind = memcpy_kind(kind);
	p.is_async = async;
	if (devtime_submit(&p))
		return;
	memset(&r, 0, sizeof(r));
	r.kind = MSPTI_ACTIVITY_KIND_MEMCPY;
	r.copyKind = (msptiActivityMemcpyKind)p.copy_kind;
	r.bytes = count;
	r.start = c->start;
	r.end = c->end;
	r.deviceId = p.device;
	r.streamId = MSPTI_INVALID_STREAM_ID;
	r.correlationId = c->corr;
	r.isAsync = async;
	activity_emit(&r, sizeof(r));
}

static void
memset_submit(const struct icall *c, int32_t value, size_t count,
    void *stream, bool async)
{
	struct pending p;
	msptiActivityMemset r;

	memset(&p, 0, sizeof(p));
	p.kind = MSPTI_ACTIVITY_KIND_MEMSET;
	p.device = icall_stream_device(stream);
	p.corr = c->corr;
	p.start = c->start;
	p.end = c->end;
	p.bytes = count;
	p.value = (uint32_t)value;
	p.is_async = async;
	if (devtime_submit(&p))
		return;
	memset(&r, 0, sizeof(r));
	r.kind = MSPTI_ACTIVITY_KIND_MEMSET;
	r.value = (uint32_t)value;
	r.bytes = count;
	r.start = c->start;
	r.end = c->end;
	r.deviceId = p.device;
	r.streamId = MSPTI_INVALID_STREAM_ID;
	r.correlationId = c->corr;
	r.isAsync = async;
	activity_emit(&r, sizeof(r));
}

static const char *
kernel_name(aclrtFuncHandle f)
{
	static _Atomic(void *) helper;
	const char *(*get)(aclrtFuncHandle);

	get = (const char *(*)(aclrtFuncHandle))api_optional(&helper,
	    "npusimKernelName");
	return get != NULL ? get(f) : NULL;
}

/* A call with no record of its own beyond API/callbacks. */
#define SIMPLE_CALL(fn, cbid, call, ...)				\
	REAL(fn);							\
	struct fn##_params p = { __VA_ARGS__ };				\
	struct icall c;							\
	aclError ret;							\
									\
	if (API_LIKELY(!icall_enter(&c, RT, cbid, #fn, &p, NULL)))	\
		return real call;					\
	ret = real call;						\
	icall_done(&c);							\
	icall_exit(&c, &ret);						\
	return ret

ACL_FUNC_VISIBILITY aclError
aclrtSetDevice(int32_t deviceId)
{
	REAL(aclrtSetDevice);
	struct aclrtSetDevice_params p = { deviceId };
	struct icall c;
	aclError ret;
	bool on;

	on = icall_enter(&c, RT, MSPTI_CBID_RUNTIME_DEVICE_SET,
	    "aclrtSetDevice", &p, NULL);
	ret = real(deviceId);
	if (ret == ACL_SUCCESS)
		icall_set_current_device(deviceId);
	if (on) {
		icall_done(&c);
		icall_exit(&c, &ret);
	}
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtResetDevice(int32_t deviceId)
{
	SIMPLE_CALL(aclrtResetDevice, MSPTI_CBID_RUNTIME_DEVICE_RESET,
	    (deviceId), deviceId);
}

ACL_FUNC_VISIBILITY aclError
aclrtCreateContext(aclrtContext *context, int32_t deviceId)
{
	SIMPLE_CALL(aclrtCreateContext, MSPTI_CBID_RUNTIME_CONTEXT_CREATED,
	    (context, deviceId), context, deviceId);
}

ACL_FUNC_VISIBILITY aclError
aclrtDestroyContext(aclrtContext context)
{
	SIMPLE_CALL(aclrtDestroyContext, MSPTI_CBID_RUNTIME_CONTEXT_DESTROY,
	    (context), context);
}

ACL_FUNC_VISIBILITY aclError
aclrtCreateStream(aclrtStream *stream)
{
	SIMPLE_CALL(aclrtCreateStream, MSPTI_CBID_RUNTIME_STREAM_CREATED,
	    (stream), stream);
}

ACL_FUNC_VISIBILITY aclError
aclrtDestroyStream(aclrtStream stream)
{
	SIMPLE_CALL(aclrtDestroyStream, MSPTI_CBID_RUNTIME_STREAM_DESTROY,
	    (stream), stream);
}

ACL_FUNC_VISIBILITY aclError
aclrtSynchronizeStream(aclrtStream stream)
{
	SIMPLE_CALL(aclrtSynchronizeStream,
	    MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED, (stream), stream);
}

ACL_FUNC_VISIBILITY aclError
aclrtSynchronizeDevice(void)
{
	REAL(aclrtSynchronizeDevice);
	struct icall c;
	aclError ret;

	/* No callback id of its own; API record only. */
	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_INVALID,
	    "aclrtSynchronizeDevice", NULL, NULL)))
		return real();
	ret = real();
	icall_done(&c);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)
{
	SIMPLE_CALL(aclrtGetMemInfo, MSPTI_CBID_RUNTIME_MEM_GET_INFO,
	    (attr, free, total), attr, free, total);
}

ACL_FUNC_VISIBILITY aclError
aclrtMallocHost(void **hostPtr, size_t size)
{
	REAL(aclrtMallocHost);
	struct aclrtMallocHost_params p = { hostPtr, size };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_MALLOC_HOST,
	    "aclrtMallocHost", &p, NULL)))
		return real(hostPtr, size);
	ret = real(hostPtr, size);
	icall_done(&c);
	icall_exit(&c, &ret);
	if (ret == ACL_SUCCESS && hostPtr != NULL &&
	    (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMORY))) {
		mem_put((uint64_t)(uintptr_t)*hostPtr, size);
		memory_record(&c, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
		    *hostPtr, size, true);
	}
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtFreeHost(void *hostPtr)
{
	REAL(aclrtFreeHost);
	struct aclrtFreeHost_params p = { hostPtr };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_FREE_HOST,
	    "aclrtFreeHost", &p, NULL)))
		return real(hostPtr);
	ret = real(hostPtr);
	icall_done(&c);
	icall_exit(&c, &ret);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMORY)))
		memory_record(&c, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
		    hostPtr, mem_take((uint64_t)(uintptr_t)hostPtr), true);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
	REAL(aclrtMalloc);
	struct aclrtMalloc_params p = { devPtr, size, policy };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_MALLOC,
	    "aclrtMalloc", &p, NULL)))
		return real(devPtr, size, policy);
	ret = real(devPtr, size, policy);
	icall_done(&c);
	icall_exit(&c, &ret);
	if (ret == ACL_SUCCESS && devPtr != NULL &&
	    (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMORY))) {
		mem_put((uint64_t)(uintptr_t)*devPtr, size);
		memory_record(&c, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
		    *devPtr, size, false);
	}
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtFree(void *devPtr)
{
	REAL(aclrtFree);
	struct aclrtFree_params p = { devPtr };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_FREE,
	    "aclrtFree", &p, NULL)))
		return real(devPtr);
	ret = real(devPtr);
	icall_done(&c);
	icall_exit(&c, &ret);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMORY)))
		memory_record(&c, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
		    devPtr, mem_take((uint64_t)(uintptr_t)devPtr), false);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
    aclrtMemcpyKind kind)
{
	REAL(aclrtMemcpy);
	struct aclrtMemcpy_params p = { dst, destMax, src, count, kind };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_MEMCPY,
	    "aclrtMemcpy", &p, NULL)))
		return real(dst, destMax, src, count, kind);
	ret = real(dst, destMax, src, count, kind);
	icall_done(&c);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMCPY)))
		memcpy_submit(&c, kind, count, NULL, false);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
    aclrtMemcpyKind kind, aclrtStream stream)
{
	REAL(aclrtMemcpyAsync);
	struct aclrtMemcpyAsync_params p = { dst, destMax, src, count, kind,
	    stream };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_MEMCPY_ASYNC,
	    "aclrtMemcpyAsync", &p, NULL)))
		return real(dst, destMax, src, count, kind, stream);
	ret = real(dst, destMax, src, count, kind, stream);
	icall_done(&c);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMCPY)))
		memcpy_submit(&c, kind, count, stream, true);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
	REAL(aclrtMemset);
	struct aclrtMemset_params p = { devPtr, maxCount, value, count };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_MEM_SET,
	    "aclrtMemset", &p, NULL)))
		return real(devPtr, maxCount, value, count);
	ret = real(devPtr, maxCount, value, count);
	icall_done(&c);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMSET)))
		memset_submit(&c, value, count, NULL, false);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
    aclrtStream stream)
{
	REAL(aclrtMemsetAsync);
	struct aclrtMemsetAsync_params p = { devPtr, maxCount, value, count,
	    stream };
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_MEM_SET_ASYNC,
	    "aclrtMemsetAsync", &p, NULL)))
		return real(devPtr, maxCount, value, count, stream);
	ret = real(devPtr, maxCount, value, count, stream);
	icall_done(&c);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_MEMSET)))
		memset_submit(&c, value, count, stream, true);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim,
    const void *argsData, size_t argsSize, aclrtStream stream)
{
	REAL(aclrtLaunchKernel);
	struct aclrtLaunchKernel_params p = { funcHandle, blockDim, argsData,
	    argsSize, stream };
	struct pending pd;
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_LAUNCH,
	    "aclrtLaunchKernel", &p,
	    callback_wanted(RT, MSPTI_CBID_RUNTIME_LAUNCH) ?
	    kernel_name(funcHandle) : NULL)))
		return real(funcHandle, blockDim, argsData, argsSize, stream);
	ret = real(funcHandle, blockDim, argsData, argsSize, stream);
	icall_done(&c);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_KERNEL))) {
		memset(&pd, 0, sizeof(pd));
		pd.kind = MSPTI_ACTIVITY_KIND_KERNEL;
		pd.device = icall_stream_device(stream);
		pd.corr = c.corr;
		pd.start = c.start;
		pd.end = c.end;
		devtime_submit(&pd);
	}
	icall_exit(&c, &ret);
	return ret;
}

/*
 * ACL runtime interposers.  Each is defined here with the runtime's exact
 * signature, so with LD_PRELOAD (or libmspti linked ahead of the runtime)
 * the application calls us; we forward to dlsym(RTLD_NEXT).  The fast
 * path does not allocate; the synchronize hooks do take steps_mtx (step
 * detection) and call dladdr when their call site is not yet cached.
 *
 * functionParams of a callback points at a struct <function>_params whose
 * fields are the call's arguments, in order (declared below).
 */
#include "config.h"

#include <string.h>

#include <acl/acl.h>

#include "api.h"

/* The real fn, for the interposers that cannot use ACL_BEGIN. */
#define REAL(fn)							\
	static _Atomic(void *) real_slot;				\
	__typeof__(&fn) real = (__typeof__(&fn))api_real(&real_slot, #fn); \
	if (API_UNLIKELY(real == NULL))					\
		return ACL_ERROR_API_NOT_SUPPORT

#define RT	MSPTI_CB_DOMAIN_RUNTIME

/* ICALL_BEGIN (api.h) for an ACL call; symbol names the kernel, if any. */
#define ACL_BEGIN(fn, cbid, symbol, call, ...)				\
	ICALL_BEGIN(fn, ACL_ERROR_API_NOT_SUPPORT, RT, cbid, symbol, call, \
	    __VA_ARGS__)

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

/*
 * After a successful allocation (the ALLOCATION record) or release (the
 * RELEASE record, with the size remembered at allocation); ptr is the
 * call's out-pointer or the pointer freed.
 */
static void
memory_alloc_done(const struct icall *c, aclError ret, void **ptr,
    size_t size, bool host)
{
	if (ret == ACL_SUCCESS && ptr != NULL &&
	    (c->wanted & (1u << MSPTI_ACTIVITY_KIND_MEMORY))) {
		mem_put((uint64_t)(uintptr_t)*ptr, size);
		memory_record(c, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
		    *ptr, size, host);
	}
}

static void
memory_free_done(const struct icall *c, aclError ret, void *ptr, bool host)
{
	if (ret == ACL_SUCCESS && (c->wanted & (1u << MSPTI_ACTIVITY_KIND_MEMORY)))
		memory_record(c, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
		    ptr, mem_take((uint64_t)(uintptr_t)ptr), host);
}

/* A host-timed record to the consumers (devtime_submit's mask) no
 * device record will come to. */
static void
host_emit(unsigned host, const void *r, size_t len)
{
	if (host & DEVTIME_HOST_API)
		activity_emit_api(r, len);
	if (host & DEVTIME_HOST_SESSION)
		activity_emit_session(r, len);
}

/* After a successful copy: queues the device-side join, or emits a
 * host-timed record when the runtime cannot tell us the task. */
static void
memcpy_done(const struct icall *c, aclError ret, aclrtMemcpyKind kind,
    size_t count, void *stream, bool async)
{
	struct pending p;
	msptiActivityMemcpy r;
	unsigned host;

	if (ret != ACL_SUCCESS ||
	    !(c->wanted & (1u << MSPTI_ACTIVITY_KIND_MEMCPY)))
		return;
	icall_pending(&p, c, MSPTI_ACTIVITY_KIND_MEMCPY, stream);
	p.bytes = count;
	p.copy_kind = icall_memcpy_kind(kind);
	p.is_async = async;
	if ((host = devtime_submit(&p)) == 0)
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
	host_emit(host, &r, sizeof(r));
}

static void
memset_done(const struct icall *c, aclError ret, int32_t value, size_t count,
    void *stream, bool async)
{
	struct pending p;
	msptiActivityMemset r;
	unsigned host;

	if (ret != ACL_SUCCESS ||
	    !(c->wanted & (1u << MSPTI_ACTIVITY_KIND_MEMSET)))
		return;
	icall_pending(&p, c, MSPTI_ACTIVITY_KIND_MEMSET, stream);
	p.bytes = count;
	p.value = (uint32_t)value;
	p.is_async = async;
	if ((host = devtime_submit(&p)) == 0)
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
	host_emit(host, &r, sizeof(r));
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
	ACL_BEGIN(fn, cbid, NULL, call, __VA_ARGS__);			\
	icall_exit(&c, &ret);						\
	return ret

/* Not ACL_BEGIN: the current device is noted even when nothing is
 * captured. */
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

/* Synchronizes also feed the step detector (steps.c), after their
 * record: a step's closing synchronize belongs to that step. */
ACL_FUNC_VISIBILITY aclError
aclrtSynchronizeStream(aclrtStream stream)
{
	const void *site = __builtin_return_address(0);
	struct aclrtSynchronizeStream_params p = { stream };
	REAL(aclrtSynchronizeStream);
	struct icall c;
	aclError ret;

	if (API_LIKELY(!icall_enter(&c, RT,
	    MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED, "aclrtSynchronizeStream",
	    &p, NULL)))
		ret = real(stream);
	else {
		ret = real(stream);
		icall_done(&c);
		icall_exit(&c, &ret);
	}
	steps_sync(site, STEPS_SYNC_STREAM);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtSynchronizeDevice(void)
{
	const void *site = __builtin_return_address(0);
	REAL(aclrtSynchronizeDevice);
	struct icall c;
	aclError ret;

	/* No callback id of its own; API record only. */
	if (API_LIKELY(!icall_enter(&c, RT, MSPTI_CBID_RUNTIME_INVALID,
	    "aclrtSynchronizeDevice", NULL, NULL)))
		ret = real();
	else {
		ret = real();
		icall_done(&c);
		icall_exit(&c, &ret);
	}
	steps_sync(site, STEPS_SYNC_DEVICE);
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
	ACL_BEGIN(aclrtMallocHost, MSPTI_CBID_RUNTIME_MALLOC_HOST, NULL,
	    (hostPtr, size), hostPtr, size);
	icall_exit(&c, &ret);
	memory_alloc_done(&c, ret, hostPtr, size, true);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtFreeHost(void *hostPtr)
{
	ACL_BEGIN(aclrtFreeHost, MSPTI_CBID_RUNTIME_FREE_HOST, NULL,
	    (hostPtr), hostPtr);
	icall_exit(&c, &ret);
	memory_free_done(&c, ret, hostPtr, true);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
	ACL_BEGIN(aclrtMalloc, MSPTI_CBID_RUNTIME_MALLOC, NULL,
	    (devPtr, size, policy), devPtr, size, policy);
	icall_exit(&c, &ret);
	memory_alloc_done(&c, ret, devPtr, size, false);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtFree(void *devPtr)
{
	ACL_BEGIN(aclrtFree, MSPTI_CBID_RUNTIME_FREE, NULL, (devPtr), devPtr);
	icall_exit(&c, &ret);
	memory_free_done(&c, ret, devPtr, false);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
    aclrtMemcpyKind kind)
{
	ACL_BEGIN(aclrtMemcpy, MSPTI_CBID_RUNTIME_MEMCPY, NULL,
	    (dst, destMax, src, count, kind), dst, destMax, src, count, kind);
	memcpy_done(&c, ret, kind, count, NULL, false);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
    aclrtMemcpyKind kind, aclrtStream stream)
{
	steps_launch();
	ACL_BEGIN(aclrtMemcpyAsync, MSPTI_CBID_RUNTIME_MEMCPY_ASYNC, NULL,
	    (dst, destMax, src, count, kind, stream),
	    dst, destMax, src, count, kind, stream);
	memcpy_done(&c, ret, kind, count, stream, true);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
	ACL_BEGIN(aclrtMemset, MSPTI_CBID_RUNTIME_MEM_SET, NULL,
	    (devPtr, maxCount, value, count), devPtr, maxCount, value, count);
	memset_done(&c, ret, value, count, NULL, false);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
    aclrtStream stream)
{
	steps_launch();
	ACL_BEGIN(aclrtMemsetAsync, MSPTI_CBID_RUNTIME_MEM_SET_ASYNC, NULL,
	    (devPtr, maxCount, value, count, stream),
	    devPtr, maxCount, value, count, stream);
	memset_done(&c, ret, value, count, stream, true);
	icall_exit(&c, &ret);
	return ret;
}

ACL_FUNC_VISIBILITY aclError
aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim,
    const void *argsData, size_t argsSize, aclrtStream stream)
{
	struct pending pd;

	steps_launch();
	ACL_BEGIN(aclrtLaunchKernel, MSPTI_CBID_RUNTIME_LAUNCH,
	    callback_wanted(RT, MSPTI_CBID_RUNTIME_LAUNCH) ?
	    kernel_name(funcHandle) : NULL,
	    (funcHandle, blockDim, argsData, argsSize, stream),
	    funcHandle, blockDim, argsData, argsSize, stream);
	if (ret == ACL_SUCCESS && (c.wanted & (1u << MSPTI_ACTIVITY_KIND_KERNEL))) {
		icall_pending(&pd, &c, MSPTI_ACTIVITY_KIND_KERNEL, stream);
		/* No device record will come: the API gets the launch's host
		 * span (a session keeps its own launch-only record). */
		if (devtime_submit(&pd) & DEVTIME_HOST_API) {
			msptiActivityKernel k;

			memset(&k, 0, sizeof(k));
			k.kind = MSPTI_ACTIVITY_KIND_KERNEL;
			k.start = c.start;
			k.end = c.end;
			k.ds.deviceId = pd.device;
			k.ds.streamId = MSPTI_INVALID_STREAM_ID;
			k.correlationId = c.corr;
			k.type = "KERNEL_UNKNOWN";
			k.name = api_intern(kernel_name(funcHandle));
			activity_emit_api(&k, sizeof(k));
		}
	}
	icall_exit(&c, &ret);
	return ret;
}

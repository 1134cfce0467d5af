/*
 * sim-memory.c - device and host memory, memcpy and memset.
 *
 * Device memory is host memory (anonymous mappings, so untouched pages
 * cost nothing) that the runtime tracks: each device has a capacity of
 * NPUSIM_MEM_MB per process, and copies check that their device side lies
 * inside a live allocation.  Copies are performed by the stream worker
 * when the task runs, so they are really asynchronous.
 */
#include <sys/mman.h>

#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define SIM_MEMORY_ALIGN	32

/*
 * Is [p, p + len) inside one live allocation?  0 if so, with its device
 * (-1 for host memory from aclrtMallocHost) in *dev; -1 if not.
 */
int
sim_memory_find(const void *p, size_t len, int *dev)
{
	struct sim_alloc	*a;
	const char		*c = p;
	int			 rc = -1;

	pthread_mutex_lock(&sim_rt.lock);
	LIST_FOREACH(a, &sim_rt.allocs, entry) {
		if (c >= a->base && c < a->base + a->size &&
		    len <= (size_t)(a->base + a->size - c)) {
			if (dev != NULL)
				*dev = a->dev;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&sim_rt.lock);
	return (rc);
}

/* Release everything (aclFinalize); streams are already stopped. */
void
sim_memory_free_all(void)
{
	struct sim_alloc	*a;
	int			 i;

	pthread_mutex_lock(&sim_rt.lock);
	while ((a = LIST_FIRST(&sim_rt.allocs)) != NULL) {
		LIST_REMOVE(a, entry);
		munmap(a->base, a->size);
		free(a);
	}
	for (i = 0; i < SIM_MAX_DEVICES; i++)
		sim_rt.devices[i].mem_used = 0;
	pthread_mutex_unlock(&sim_rt.lock);
}

static aclError
sim_memory_alloc(void **out, size_t size, int dev)
{
	struct sim_device	*d = NULL;
	struct sim_alloc	*a;
	void			*p;

	if (out == NULL || size == 0 || size > ((size_t)1 << 48))
		return (ACL_ERROR_INVALID_PARAM);
	size = (size + SIM_MEMORY_ALIGN - 1) & ~(size_t)(SIM_MEMORY_ALIGN - 1);
	if (dev >= 0) {
		if ((d = sim_runtime_device(dev)) == NULL)
			return (ACL_ERROR_RT_CONTEXT_NULL);
		pthread_mutex_lock(&sim_rt.lock);
		if (d->mem_used + size > sim_cfg.mem_bytes) {
			pthread_mutex_unlock(&sim_rt.lock);
			sim_runtime_set_error(ACL_ERROR_BAD_ALLOC,
			    "device %d: %zu bytes requested, %llu of %llu used",
			    dev, size, (unsigned long long)d->mem_used,
			    (unsigned long long)sim_cfg.mem_bytes);
			return (ACL_ERROR_BAD_ALLOC);
		}
		d->mem_used += size;
		pthread_mutex_unlock(&sim_rt.lock);
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	a = calloc(1, sizeof *a);
	if (p == MAP_FAILED || a == NULL) {
		if (p != MAP_FAILED)
			munmap(p, size);
		free(a);
		if (d != NULL) {
			pthread_mutex_lock(&sim_rt.lock);
			d->mem_used -= size;
			pthread_mutex_unlock(&sim_rt.lock);
		}
		return (ACL_ERROR_BAD_ALLOC);
	}
	a->base = p;
	a->size = size;
	a->dev = dev;
	pthread_mutex_lock(&sim_rt.lock);
	LIST_INSERT_HEAD(&sim_rt.allocs, a, entry);
	pthread_mutex_unlock(&sim_rt.lock);
	if (d != NULL && d->metrics != NULL)
		__atomic_fetch_add(&d->metrics->mem_used, size,
		    __ATOMIC_RELAXED);
	*out = p;
	return (ACL_SUCCESS);
}

static aclError
sim_memory_release(void *p, int host)
{
	struct sim_alloc	*a;
	struct sim_device	*d = NULL;

	pthread_mutex_lock(&sim_rt.lock);
	LIST_FOREACH(a, &sim_rt.allocs, entry) {
		if (a->base == p && (a->dev < 0) == host)
			break;
	}
	if (a != NULL) {
		LIST_REMOVE(a, entry);
		if (a->dev >= 0) {
			d = &sim_rt.devices[a->dev];
			d->mem_used -= a->size;
		}
	}
	pthread_mutex_unlock(&sim_rt.lock);
	if (a == NULL) {
		sim_runtime_set_error(ACL_ERROR_INVALID_PARAM,
		    "%p is not a live allocation", p);
		return (ACL_ERROR_INVALID_PARAM);
	}
	/* Queued copies may still touch it: let the device drain first. */
	if (d != NULL && sim_runtime_device(d->id) != NULL) {
		sim_stream_sync_device(d);
		if (d->metrics != NULL)
			__atomic_fetch_sub(&d->metrics->mem_used, a->size,
			    __ATOMIC_RELAXED);
	}
	munmap(a->base, a->size);
	free(a);
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
	int	dev;

	sim_runtime_init();
	if ((unsigned)policy > ACL_MEM_MALLOC_NORMAL_ONLY_P2P)
		return (ACL_ERROR_INVALID_PARAM);
	if ((dev = sim_runtime_current_device()) < 0) {
		sim_runtime_set_error(ACL_ERROR_RT_CONTEXT_NULL,
		    "aclrtMalloc: no device set");
		return (ACL_ERROR_RT_CONTEXT_NULL);
	}
	return (sim_memory_alloc(devPtr, size, dev));
}

SIM_EXPORT aclError
aclrtFree(void *devPtr)
{
	sim_runtime_init();
	if (devPtr == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	return (sim_memory_release(devPtr, 0));
}

SIM_EXPORT aclError
aclrtMallocHost(void **hostPtr, size_t size)
{
	sim_runtime_init();
	return (sim_memory_alloc(hostPtr, size, -1));
}

SIM_EXPORT aclError
aclrtFreeHost(void *hostPtr)
{
	sim_runtime_init();
	if (hostPtr == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	return (sim_memory_release(hostPtr, 1));
}

SIM_EXPORT aclError
aclrtGetMemInfo(aclrtMemAttr attr, size_t *freep, size_t *total)
{
	struct sim_device	*d;
	int			 dev;

	sim_runtime_init();
	if (freep == NULL || total == NULL ||
	    (unsigned)attr > ACL_HBM_MEM_P2P_NORMAL)
		return (ACL_ERROR_INVALID_PARAM);
	dev = sim_runtime_current_device();
	if (dev < 0 || (d = sim_runtime_device(dev)) == NULL)
		return (ACL_ERROR_RT_CONTEXT_NULL);
	pthread_mutex_lock(&sim_rt.lock);
	*total = sim_cfg.mem_bytes;
	*freep = sim_cfg.mem_bytes - d->mem_used;
	pthread_mutex_unlock(&sim_rt.lock);
	return (ACL_SUCCESS);
}

/* Modelled copy time: per-direction bandwidth plus a fixed overhead. */
static uint64_t
sim_memory_copy_ns(int kind, size_t count)
{
	double	bw;

	switch (kind) {
	case ACL_MEMCPY_HOST_TO_DEVICE:
	case ACL_MEMCPY_DEVICE_TO_HOST:
		bw = 20e9;
		break;
	case ACL_MEMCPY_DEVICE_TO_DEVICE:
		bw = 800e9;
		break;
	default:
		bw = 10e9;
		break;
	}
	return ((uint64_t)((2000.0 + (double)count / bw * 1e9) *
	    sim_cfg.time_scale));
}

/* Validate a copy and queue it on stream; sync waits for it. */
static aclError
sim_memory_copy(void *dst, size_t destMax, const void *src, size_t count,
    aclrtMemcpyKind kind, aclrtStream stream, int sync)
{
	struct sim_stream	*s;
	struct sim_task		*t;
	aclError		 e = ACL_SUCCESS;
	int			 dd = -1, sd = -1, dok, sok;

	sim_runtime_init();
	if (dst == NULL || src == NULL || count > destMax) {
		sim_runtime_set_error(ACL_ERROR_INVALID_PARAM,
		    "memcpy dst %p src %p count %zu destMax %zu", dst, src,
		    count, destMax);
		return (ACL_ERROR_INVALID_PARAM);
	}
	dok = sim_memory_find(dst, count, &dd) == 0 && dd >= 0;
	sok = sim_memory_find(src, count, &sd) == 0 && sd >= 0;
	switch (kind) {
	case ACL_MEMCPY_HOST_TO_HOST:
		break;
	case ACL_MEMCPY_HOST_TO_DEVICE:
		e = dok ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
		break;
	case ACL_MEMCPY_DEVICE_TO_HOST:
		e = sok ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
		break;
	case ACL_MEMCPY_DEVICE_TO_DEVICE:
		e = dok && sok ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
		break;
	case ACL_MEMCPY_DEFAULT:
		kind = dok ? (sok ? ACL_MEMCPY_DEVICE_TO_DEVICE :
		    ACL_MEMCPY_HOST_TO_DEVICE) : (sok ?
		    ACL_MEMCPY_DEVICE_TO_HOST : ACL_MEMCPY_HOST_TO_HOST);
		break;
	default:
		sim_runtime_set_error(ACL_ERROR_INVALID_PARAM,
		    "memcpy kind %d", (int)kind);
		return (ACL_ERROR_INVALID_PARAM);
	}
	if (kind != ACL_MEMCPY_HOST_TO_HOST && kind != ACL_MEMCPY_DEFAULT &&
	    e != ACL_SUCCESS) {
		sim_runtime_set_error(e, "memcpy: device side is not inside "
		    "a device allocation (kind %d, %zu bytes)", (int)kind,
		    count);
		return (e);
	}
	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS)
		return (e);
	if ((t = sim_stream_task(NPUSIM_TASK_MEMCPY, "MEMCPY")) == NULL) {
		sim_handle_put(&s->obj);
		return (ACL_ERROR_BAD_ALLOC);
	}
	t->u.memcpy.dst = dst;
	t->u.memcpy.src = src;
	t->u.memcpy.count = count;
	t->u.memcpy.kind = kind;
	t->dur_ns = sim_memory_copy_ns(kind, count);
	if ((e = sim_stream_submit(s, t)) != ACL_SUCCESS)
		sim_stream_free_task(t);
	else if (sync)
		e = sim_stream_sync(s);
	sim_handle_put(&s->obj);
	return (e);
}

SIM_EXPORT aclError
aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
    aclrtMemcpyKind kind)
{
	return (sim_memory_copy(dst, destMax, src, count, kind, NULL, 1));
}

SIM_EXPORT aclError
aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
    aclrtMemcpyKind kind, aclrtStream stream)
{
	return (sim_memory_copy(dst, destMax, src, count, kind, stream, 0));
}

static aclError
sim_memory_set(void *devPtr, size_t maxCount, int32_t value, size_t count,
    aclrtStream stream, int sync)
{
	struct sim_stream	*s;
	struct sim_task		*t;
	aclError		 e;
	int			 dev;

	sim_runtime_init();
	if (devPtr == NULL || count > maxCount ||
	    sim_memory_find(devPtr, count, &dev) != 0 || dev < 0) {
		sim_runtime_set_error(ACL_ERROR_INVALID_PARAM,
		    "memset %p count %zu maxCount %zu", devPtr, count,
		    maxCount);
		return (ACL_ERROR_INVALID_PARAM);
	}
	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS)
		return (e);
	if ((t = sim_stream_task(NPUSIM_TASK_MEMSET, "MEMSET")) == NULL) {
		sim_handle_put(&s->obj);
		return (ACL_ERROR_BAD_ALLOC);
	}
	t->u.memset.dst = devPtr;
	t->u.memset.value = value;
	t->u.memset.count = count;
	t->dur_ns = (uint64_t)((1000.0 + (double)count / 1000e9 * 1e9) *
	    sim_cfg.time_scale);
	if ((e = sim_stream_submit(s, t)) != ACL_SUCCESS)
		sim_stream_free_task(t);
	else if (sync)
		e = sim_stream_sync(s);
	sim_handle_put(&s->obj);
	return (e);
}

SIM_EXPORT aclError
aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
	return (sim_memory_set(devPtr, maxCount, value, count, NULL, 1));
}

SIM_EXPORT aclError
aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
    aclrtStream stream)
{
	return (sim_memory_set(devPtr, maxCount, value, count, stream, 0));
}

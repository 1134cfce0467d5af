/*
 * sim-memory.c - device and host memory, memcpy and memset.
 *
 * Device memory is host memory (anonymous mappings, so untouched pages
 * cost nothing) that the runtime tracks, and copies check that their
 * device side lies inside a live allocation.  Copies are performed by the
 * stream worker when the task runs, so they are really asynchronous.
 *
 * Capacity is node-wide, as on hardware: every process using a device
 * reserves its bytes in the device metrics page's mem_used with
 * compare-and-swap before an allocation succeeds (the limit is
 * NPUSIM_MEM_MB as the allocating process sees it), and gives them back on
 * aclrtFree, aclFinalize and exit.  Each process also counts its bytes in
 * an owner entry of the page, so that the space of a process that died
 * without freeing is reclaimed by the next allocation that would fail (and
 * by aclrtGetMemInfo).  Without a metrics page (shm unavailable) the limit
 * falls back to per process.
 */
#include <sys/mman.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

#define SIM_MEMORY_ALIGN	32

/* Start time of pid in clock ticks since boot (/proc/<pid>/stat field
 * 22), 0 if unknown: tells a live process from a reuse of its pid. */
static uint64_t
sim_memory_start_time(pid_t pid)
{
	char			 path[64], buf[1024], *p;
	unsigned long long	 v = 0;
	FILE			*f;
	size_t			 n;
	int			 i;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return (0);
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses. */
	if ((p = strrchr(buf, ')')) == NULL)
		return (0);
	p++;
	/* After ") " comes field 3; field 22 is 19 fields further. */
	for (i = 3; i < 22 && p != NULL; i++)
		if ((p = strchr(p + 1, ' ')) == NULL)
			return (0);
	if (p == NULL || sscanf(p, " %llu", &v) != 1)
		return (0);
	return ((uint64_t)v);
}

/* Has the process that owns an entry (pid, start time st) gone? */
static int
sim_memory_pid_gone(pid_t pid, uint64_t st)
{
	uint64_t	now;

	if (kill(pid, 0) == -1 && errno == ESRCH)
		return (1);
	if (st == 0 || (now = sim_memory_start_time(pid)) == 0)
		return (0);
	return (now != st);
}

/* Subtract b from *v without going below zero. */
static void
sim_memory_sub(uint64_t *v, uint64_t b)
{
	uint64_t	cur = __atomic_load_n(v, __ATOMIC_RELAXED);

	while (!__atomic_compare_exchange_n(v, &cur, cur > b ? cur - b : 0,
	    0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		;
}

/*
 * Give back the bytes of every owner entry whose process is gone; returns
 * how many.  Any process may run it at any time: the compare-and-swap on
 * pid makes exactly one reclaimer settle an entry.
 */
static uint64_t
sim_memory_reclaim(struct npusim_metrics_page *m)
{
	struct npusim_mem_owner	*o;
	uint64_t		 got = 0, b;
	int32_t			 pid;
	int			 i;

	for (i = 0; i < NPUSIM_MEM_OWNERS; i++) {
		o = &m->mem_owners[i];
		pid = __atomic_load_n(&o->pid, __ATOMIC_ACQUIRE);
		if (pid <= 0 || pid == (int32_t)getpid() ||
		    !sim_memory_pid_gone(pid, __atomic_load_n(&o->start_time,
		    __ATOMIC_RELAXED)))
			continue;
		if (!__atomic_compare_exchange_n(&o->pid, &pid,
		    NPUSIM_MEM_OWNER_RECLAIMING, 0, __ATOMIC_ACQ_REL,
		    __ATOMIC_RELAXED))
			continue;
		b = __atomic_exchange_n(&o->bytes, 0, __ATOMIC_ACQ_REL);
		sim_memory_sub(&m->mem_used, b);
		__atomic_store_n(&o->start_time, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&o->pid, 0, __ATOMIC_RELEASE);
		got += b;
	}
	return (got);
}

/* Claim a free owner entry for this process, NULL if the table is full. */
static struct npusim_mem_owner *
sim_memory_owner_claim(struct npusim_metrics_page *m, pid_t me)
{
	struct npusim_mem_owner	*o;
	int32_t			 zero;
	int			 i, pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < NPUSIM_MEM_OWNERS; i++) {
			o = &m->mem_owners[i];
			zero = 0;
			if (!__atomic_compare_exchange_n(&o->pid, &zero,
			    (int32_t)me, 0, __ATOMIC_ACQ_REL,
			    __ATOMIC_RELAXED))
				continue;
			__atomic_store_n(&o->bytes, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&o->start_time,
			    sim_memory_start_time(me), __ATOMIC_RELEASE);
			return (o);
		}
		if (pass == 0)
			sim_memory_reclaim(m);
	}
	return (NULL);
}

/* The device was opened (caller holds sim_rt.lock): count this
 * process's allocations node-wide from now on. */
void
sim_memory_share_open(struct sim_device *d)
{
	if (d->metrics == NULL)
		return;
	d->mem_pid = getpid();
	d->mem_owner = sim_memory_owner_claim(d->metrics, d->mem_pid);
	__atomic_store_n(&d->mem_shared, 1, __ATOMIC_RELEASE);
}

/*
 * Give back every byte this process still holds on d and free its owner
 * entry: the device is being closed (aclFinalize) or the process exits.
 * Allocations freed later no longer touch the shared counter.
 */
void
sim_memory_share_close(struct sim_device *d)
{
	struct npusim_mem_owner	*o;
	uint64_t		 b;

	if (d->metrics == NULL || d->mem_pid != getpid() ||
	    !__atomic_exchange_n(&d->mem_shared, 0, __ATOMIC_ACQ_REL))
		return;
	if ((o = d->mem_owner) != NULL) {
		b = __atomic_exchange_n(&o->bytes, 0, __ATOMIC_ACQ_REL);
		__atomic_store_n(&o->start_time, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&o->pid, 0, __ATOMIC_RELEASE);
		d->mem_owner = NULL;
	} else
		b = d->mem_used;	/* counted without an entry */
	sim_memory_sub(&d->metrics->mem_used, b);
}

/* At exit (without aclFinalize) the space goes back at once; a process
 * that dies without running this is reclaimed by pid later. */
__attribute__((destructor)) static void
sim_memory_exit(void)
{
	int	i;

	for (i = 0; i < SIM_MAX_DEVICES; i++)
		sim_memory_share_close(&sim_rt.devices[i]);
}

/*
 * Reserve size bytes on d node-wide; 0 or -1 (over capacity even after
 * reclaiming the space of dead processes).  *used gets what was in use.
 */
static int
sim_memory_reserve(struct sim_device *d, size_t size, uint64_t *used)
{
	struct npusim_metrics_page	*m = d->metrics;
	uint64_t			 cur;
	int				 reclaimed = 0;

	cur = __atomic_load_n(&m->mem_used, __ATOMIC_RELAXED);
	for (;;) {
		*used = cur;
		if (cur > sim_cfg.mem_bytes || size > sim_cfg.mem_bytes - cur) {
			if (reclaimed || sim_memory_reclaim(m) == 0)
				return (-1);
			reclaimed = 1;
			cur = __atomic_load_n(&m->mem_used, __ATOMIC_RELAXED);
			continue;
		}
		if (__atomic_compare_exchange_n(&m->mem_used, &cur,
		    cur + size, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	if (d->mem_owner != NULL)
		__atomic_fetch_add(&d->mem_owner->bytes, size,
		    __ATOMIC_RELEASE);
	return (0);
}

/* Undo sim_memory_reserve (or a per-process count) for size bytes. */
static void
sim_memory_unreserve(struct sim_device *d, size_t size)
{
	if (d->metrics == NULL ||
	    !__atomic_load_n(&d->mem_shared, __ATOMIC_ACQUIRE) ||
	    d->mem_pid != getpid())
		return;
	if (d->mem_owner != NULL)
		sim_memory_sub(&d->mem_owner->bytes, size);
	sim_memory_sub(&d->metrics->mem_used, size);
}

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
	uint64_t		 used;
	void			*p;
	int			 shared, full;

	if (out == NULL || size == 0 || size > ((size_t)1 << 48))
		return (ACL_ERROR_INVALID_PARAM);
	size = (size + SIM_MEMORY_ALIGN - 1) & ~(size_t)(SIM_MEMORY_ALIGN - 1);
	if (dev >= 0) {
		if ((d = sim_runtime_device(dev)) == NULL)
			return (ACL_ERROR_RT_CONTEXT_NULL);
		pthread_mutex_lock(&sim_rt.lock);
		shared = d->metrics != NULL &&
		    __atomic_load_n(&d->mem_shared, __ATOMIC_ACQUIRE) &&
		    d->mem_pid == getpid();
		if (shared)
			full = sim_memory_reserve(d, size, &used) != 0;
		else {
			used = d->mem_used;
			full = d->mem_used + size > sim_cfg.mem_bytes;
		}
		if (full) {
			pthread_mutex_unlock(&sim_rt.lock);
			sim_runtime_set_error(ACL_ERROR_BAD_ALLOC,
			    "device %d: %zu bytes requested, %llu of %llu used "
			    "%s", dev, size, (unsigned long long)used,
			    (unsigned long long)sim_cfg.mem_bytes,
			    shared ? "on the node" : "by this process");
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
			sim_memory_unreserve(d, size);
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
		sim_memory_unreserve(d, a->size);
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
	uint64_t		 used;
	int			 dev;

	sim_runtime_init();
	if (freep == NULL || total == NULL ||
	    (unsigned)attr > ACL_HBM_MEM_P2P_NORMAL)
		return (ACL_ERROR_INVALID_PARAM);
	dev = sim_runtime_current_device();
	if (dev < 0 || (d = sim_runtime_device(dev)) == NULL)
		return (ACL_ERROR_RT_CONTEXT_NULL);
	/* Node-wide, like the device: what every process holds. */
	if (d->metrics != NULL) {
		sim_memory_reclaim(d->metrics);
		used = __atomic_load_n(&d->metrics->mem_used,
		    __ATOMIC_RELAXED);
	} else {
		pthread_mutex_lock(&sim_rt.lock);
		used = d->mem_used;
		pthread_mutex_unlock(&sim_rt.lock);
	}
	*total = sim_cfg.mem_bytes;
	*freep = used < sim_cfg.mem_bytes ? sim_cfg.mem_bytes - used : 0;
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

/* Resolves stream and makes a task of kind for it; on success the caller
 * holds the stream and the task and ends with sim_memory_run. */
static aclError
sim_memory_task(aclrtStream stream, int kind, const char *name,
    struct sim_stream **sp, struct sim_task **tp)
{
	aclError	 e;

	if ((e = sim_stream_resolve(stream, sp)) != ACL_SUCCESS)
		return (e);
	if ((*tp = sim_stream_task(kind, name)) == NULL) {
		sim_handle_put(&(*sp)->obj);
		return (ACL_ERROR_BAD_ALLOC);
	}
	return (ACL_SUCCESS);
}

/* Queues t on s (sync: and waits for it), then lets go of s. */
static aclError
sim_memory_run(struct sim_stream *s, struct sim_task *t, int sync)
{
	aclError	 e;

	if ((e = sim_stream_submit(s, t)) != ACL_SUCCESS)
		sim_stream_free_task(t);
	else if (sync)
		e = sim_stream_sync(s);
	sim_handle_put(&s->obj);
	return (e);
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
	if ((e = sim_memory_task(stream, NPUSIM_TASK_MEMCPY, "MEMCPY", &s,
	    &t)) != ACL_SUCCESS)
		return (e);
	t->u.memcpy.dst = dst;
	t->u.memcpy.src = src;
	t->u.memcpy.count = count;
	t->u.memcpy.kind = kind;
	t->dur_ns = sim_memory_copy_ns(kind, count);
	return (sim_memory_run(s, t, sync));
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
	if ((e = sim_memory_task(stream, NPUSIM_TASK_MEMSET, "MEMSET", &s,
	    &t)) != ACL_SUCCESS)
		return (e);
	t->u.memset.dst = devPtr;
	t->u.memset.value = value;
	t->u.memset.count = count;
	t->dur_ns = (uint64_t)((1000.0 + (double)count / 1000e9 * 1e9) *
	    sim_cfg.time_scale);
	return (sim_memory_run(s, t, sync));
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

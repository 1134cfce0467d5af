/*
 * sim-runtime.c - process-wide state: init/finalize, devices, contexts.
 *
 * The library initialises itself on first use, so aclInit is optional
 * (a second aclInit still reports ACL_ERROR_REPEAT_INITIALIZE).  The
 * current device is per thread; a thread that never set one uses the
 * device the process set first.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_runtime sim_rt = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.default_dev = -1,
	.rank = -1,
};

static __thread int	 sim_runtime_cur_dev = -1;
static __thread char	 sim_runtime_errbuf[256];

static pthread_once_t	 sim_runtime_once = PTHREAD_ONCE_INIT;

static void
sim_runtime_do_init(void)
{
	int	i;

	sim_env_load();
	for (i = 0; i < SIM_MAX_DEVICES; i++) {
		sim_rt.devices[i].id = i;
		LIST_INIT(&sim_rt.devices[i].streams);
	}
	LIST_INIT(&sim_rt.allocs);
	sim_rt.rank = sim_cfg.env_rank;
}

void
sim_runtime_init(void)
{
	pthread_once(&sim_runtime_once, sim_runtime_do_init);
}

/* Remember why the last call failed, for aclGetRecentErrMsg. */
void
sim_runtime_set_error(aclError e, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	n = snprintf(sim_runtime_errbuf, sizeof sim_runtime_errbuf,
	    "EE%06d: %s: ", e, sim_env_errmsg(e));
	if (n < 0 || (size_t)n >= sizeof sim_runtime_errbuf)
		return;
	va_start(ap, fmt);
	vsnprintf(sim_runtime_errbuf + n, sizeof sim_runtime_errbuf -
	    (size_t)n, fmt, ap);
	va_end(ap);
}

SIM_EXPORT const char *
aclGetRecentErrMsg(void)
{
	return (sim_runtime_errbuf);
}

/* The calling thread's device, or -1. */
int
sim_runtime_current_device(void)
{
	int	dev;

	if (sim_runtime_cur_dev >= 0)
		return (sim_runtime_cur_dev);
	pthread_mutex_lock(&sim_rt.lock);
	dev = sim_rt.default_dev;
	pthread_mutex_unlock(&sim_rt.lock);
	return (dev);
}

/* An open device by id, or NULL. */
struct sim_device *
sim_runtime_device(int dev)
{
	struct sim_device	*d;

	if (dev < 0 || dev >= sim_cfg.ndevices)
		return (NULL);
	d = &sim_rt.devices[dev];
	return (__atomic_load_n(&d->open, __ATOMIC_ACQUIRE) ? d : NULL);
}

/* Open a device in this process: shm objects, sampler, default stream. */
aclError
sim_runtime_open_device(int dev)
{
	struct sim_device	*d;
	aclError		 e = ACL_SUCCESS;

	sim_runtime_init();
	if (dev < 0 || dev >= sim_cfg.ndevices) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_DEVICEID,
		    "device %d (have %d)", dev, sim_cfg.ndevices);
		return (ACL_ERROR_RT_INVALID_DEVICEID);
	}
	d = &sim_rt.devices[dev];
	pthread_mutex_lock(&sim_rt.lock);
	if (!d->open) {
		sim_shm_device_open(d);
		d->default_stream = sim_stream_create(d, 1);
		if (d->default_stream == NULL) {
			sim_shm_device_close(d);
			e = ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
		} else
			__atomic_store_n(&d->open, 1, __ATOMIC_RELEASE);
	}
	if (e == ACL_SUCCESS && sim_rt.default_dev < 0)
		sim_rt.default_dev = dev;
	pthread_mutex_unlock(&sim_rt.lock);
	return (e);
}

/* Stop every stream and unmap every device; caller holds no locks. */
static void
sim_runtime_close_all(void)
{
	struct sim_device	*d;
	struct sim_stream	*s;
	int			 i;

	for (i = 0; i < sim_cfg.ndevices; i++) {
		d = &sim_rt.devices[i];
		pthread_mutex_lock(&sim_rt.lock);
		if (!d->open) {
			pthread_mutex_unlock(&sim_rt.lock);
			continue;
		}
		__atomic_store_n(&d->open, 0, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&sim_rt.lock);
		while ((s = LIST_FIRST(&d->streams)) != NULL)
			sim_stream_shutdown(s);
		d->default_stream = NULL;
		sim_shm_device_close(d);
		if (d->metrics == NULL)
			d->mem_used = 0;
	}
	sim_memory_free_all();
	pthread_mutex_lock(&sim_rt.lock);
	sim_rt.default_dev = -1;
	sim_rt.inited = 0;
	pthread_mutex_unlock(&sim_rt.lock);
	sim_runtime_cur_dev = -1;
}

SIM_EXPORT aclError
aclInit(const char *configPath)
{
	sim_runtime_init();
	pthread_mutex_lock(&sim_rt.lock);
	if (sim_rt.inited) {
		pthread_mutex_unlock(&sim_rt.lock);
		sim_runtime_set_error(ACL_ERROR_REPEAT_INITIALIZE, "aclInit");
		return (ACL_ERROR_REPEAT_INITIALIZE);
	}
	sim_rt.inited = 1;
	pthread_mutex_unlock(&sim_rt.lock);
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclFinalize(void)
{
	sim_runtime_init();
	sim_runtime_close_all();
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtSetDevice(int32_t deviceId)
{
	aclError	e;

	if ((e = sim_runtime_open_device(deviceId)) != ACL_SUCCESS)
		return (e);
	sim_runtime_cur_dev = deviceId;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtResetDevice(int32_t deviceId)
{
	struct sim_device	*d;

	sim_runtime_init();
	if ((d = sim_runtime_device(deviceId)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_DEVICEID,
		    "device %d is not set", deviceId);
		return (ACL_ERROR_RT_INVALID_DEVICEID);
	}
	/* Keep the device mapped (cheap); just drain its work. */
	sim_stream_sync_device(d);
	if (sim_runtime_cur_dev == deviceId)
		sim_runtime_cur_dev = -1;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtGetDevice(int32_t *deviceId)
{
	int	dev;

	sim_runtime_init();
	if (deviceId == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	if ((dev = sim_runtime_current_device()) < 0) {
		sim_runtime_set_error(ACL_ERROR_RT_CONTEXT_NULL,
		    "no device set");
		return (ACL_ERROR_RT_CONTEXT_NULL);
	}
	*deviceId = dev;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtGetDeviceCount(uint32_t *count)
{
	sim_runtime_init();
	if (count == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	*count = (uint32_t)sim_cfg.ndevices;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtGetRunMode(aclrtRunMode *runMode)
{
	if (runMode == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	*runMode = ACL_HOST;
	return (ACL_SUCCESS);
}

static void
sim_runtime_context_free(struct sim_obj *obj)
{
	free(obj);
}

SIM_EXPORT aclError
aclrtCreateContext(aclrtContext *context, int32_t deviceId)
{
	struct sim_context	*c;
	aclError		 e;

	if (context == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	if ((e = sim_runtime_open_device(deviceId)) != ACL_SUCCESS)
		return (e);
	if ((c = calloc(1, sizeof *c)) == NULL)
		return (ACL_ERROR_BAD_ALLOC);
	c->dev = deviceId;
	sim_handle_add(&c->obj, SIM_MAGIC_CONTEXT, sim_runtime_context_free);
	/* As in ACL, a new context becomes the thread's current one. */
	sim_runtime_cur_dev = deviceId;
	*context = c;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtDestroyContext(aclrtContext context)
{
	if (sim_handle_remove(context, SIM_MAGIC_CONTEXT) != 0) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "context %p", context);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtSetCurrentContext(aclrtContext context)
{
	struct sim_context	*c;

	if ((c = sim_handle_get(context, SIM_MAGIC_CONTEXT)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "context %p", context);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	sim_runtime_cur_dev = c->dev;
	sim_handle_put(&c->obj);
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtGetCurrentContext(aclrtContext *context)
{
	if (context == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	/* Contexts carry no state beyond their device; report none. */
	*context = NULL;
	return (sim_runtime_current_device() < 0 ?
	    ACL_ERROR_RT_CONTEXT_NULL : ACL_SUCCESS);
}

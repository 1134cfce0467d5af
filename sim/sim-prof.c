/*
 * sim-prof.c - the acl/acl_prof.h state machine: init, configurations,
 * start/stop per device, msproftx stamps.  No msprof data is written
 * (the header says why).
 */
#include <stdlib.h>
#include <string.h>

#include <acl/acl_prof.h>

#include "sim.h"

#define SIM_MAGIC_PROFCFG	0x50524f46U
#define SIM_MAGIC_STAMP		0x5354414dU

/* Every data type bit acl_prof.h defines. */
#define SIM_PROF_TYPES	(ACL_PROF_ACL_API | ACL_PROF_TASK_TIME |	\
	ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU | ACL_PROF_L2CACHE |	\
	ACL_PROF_HCCL_TRACE | ACL_PROF_TRAINING_TRACE | ACL_PROF_MSPROFTX | \
	ACL_PROF_RUNTIME_API | ACL_PROF_FWK_SCHEDULE_L0 |		\
	ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_MEMORY |			\
	ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR)

struct sim_prof_config {
	struct sim_obj	 obj;
	uint64_t	 types;
	int		 metrics;
	uint32_t	 ndev;
	uint32_t	 devs[SIM_MAX_DEVICES];
	int		 started;	/* under sim_prof_lock */
};

struct sim_prof_stamp {
	struct sim_obj	 obj;
};

static pthread_mutex_t	 sim_prof_lock = PTHREAD_MUTEX_INITIALIZER;
static int		 sim_prof_inited;
static uint64_t		 sim_prof_running;	/* device bit set */
static uint32_t		 sim_prof_next_range = 1;

static void
sim_prof_free(struct sim_obj *obj)
{
	free(obj);
}

static uint64_t
sim_prof_devmask(const struct sim_prof_config *c)
{
	uint64_t	m = 0;
	uint32_t	i;

	for (i = 0; i < c->ndev; i++)
		m |= 1ULL << c->devs[i];
	return (m);
}

SIM_EXPORT aclError
aclprofInit(const char *profilerResultPath, size_t length)
{
	aclError	e = ACL_SUCCESS;

	sim_runtime_init();
	if (profilerResultPath == NULL || length == 0 ||
	    length > ACL_PROF_MAX_PATH ||
	    memchr(profilerResultPath, '\0', length) != NULL) {
		sim_runtime_set_error(ACL_ERROR_INVALID_PARAM,
		    "profiler result path");
		return (ACL_ERROR_INVALID_PARAM);
	}
	pthread_mutex_lock(&sim_prof_lock);
	if (sim_prof_inited)
		e = ACL_ERROR_REPEAT_INITIALIZE;
	sim_prof_inited = 1;
	pthread_mutex_unlock(&sim_prof_lock);
	return (e);
}

SIM_EXPORT aclError
aclprofFinalize(void)
{
	aclError	e = ACL_SUCCESS;

	pthread_mutex_lock(&sim_prof_lock);
	if (!sim_prof_inited)
		e = ACL_ERROR_PROF_NOT_RUN;
	sim_prof_inited = 0;
	sim_prof_running = 0;
	pthread_mutex_unlock(&sim_prof_lock);
	return (e);
}

SIM_EXPORT aclprofConfig *
aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
    aclprofAicoreMetrics aicoreMetrics, const aclprofAicoreEvents *aicoreEvents,
    uint64_t dataTypeConfig)
{
	struct sim_prof_config	*c;
	uint32_t		 i, j;

	(void)aicoreEvents;	/* reserved: NULL in CANN too */
	sim_runtime_init();
	if (deviceIdList == NULL || deviceNums == 0 ||
	    deviceNums > (uint32_t)sim_cfg.ndevices ||
	    (dataTypeConfig & ~(uint64_t)SIM_PROF_TYPES) != 0 ||
	    ((unsigned)aicoreMetrics > ACL_AICORE_L2_CACHE &&
	    aicoreMetrics != ACL_AICORE_NONE))
		return (NULL);
	for (i = 0; i < deviceNums; i++) {
		if (deviceIdList[i] >= (uint32_t)sim_cfg.ndevices)
			return (NULL);
		for (j = 0; j < i; j++)
			if (deviceIdList[j] == deviceIdList[i])
				return (NULL);
	}
	if ((c = calloc(1, sizeof *c)) == NULL)
		return (NULL);
	c->types = dataTypeConfig;
	c->metrics = aicoreMetrics;
	c->ndev = deviceNums;
	memcpy(c->devs, deviceIdList, deviceNums * sizeof c->devs[0]);
	sim_handle_add(&c->obj, SIM_MAGIC_PROFCFG, sim_prof_free);
	return ((aclprofConfig *)(void *)c);
}

SIM_EXPORT aclError
aclprofDestroyConfig(const aclprofConfig *profilerConfig)
{
	if (profilerConfig == NULL ||
	    sim_handle_remove(profilerConfig, SIM_MAGIC_PROFCFG) != 0)
		return (ACL_ERROR_INVALID_PARAM);
	return (ACL_SUCCESS);
}

/* Start (on) or stop a configuration. */
static aclError
sim_prof_switch(const aclprofConfig *cfg, int on)
{
	struct sim_prof_config	*c;
	uint64_t		 m;
	aclError		 e = ACL_SUCCESS;

	if (cfg == NULL || (c = sim_handle_get(cfg, SIM_MAGIC_PROFCFG)) ==
	    NULL)
		return (ACL_ERROR_INVALID_PARAM);
	m = sim_prof_devmask(c);
	pthread_mutex_lock(&sim_prof_lock);
	if (!sim_prof_inited || (!on && !c->started))
		e = ACL_ERROR_PROF_NOT_RUN;
	else if (on && (c->started || (sim_prof_running & m) != 0))
		e = ACL_ERROR_PROF_ALREADY_RUN;
	else if (on) {
		sim_prof_running |= m;
		c->started = 1;
	} else {
		sim_prof_running &= ~m;
		c->started = 0;
	}
	pthread_mutex_unlock(&sim_prof_lock);
	sim_handle_put(&c->obj);
	return (e);
}

SIM_EXPORT aclError
aclprofStart(const aclprofConfig *profilerConfig)
{
	return (sim_prof_switch(profilerConfig, 1));
}

SIM_EXPORT aclError
aclprofStop(const aclprofConfig *profilerConfig)
{
	return (sim_prof_switch(profilerConfig, 0));
}

SIM_EXPORT void *
aclprofCreateStamp(void)
{
	struct sim_prof_stamp	*s;

	if ((s = calloc(1, sizeof *s)) == NULL)
		return (NULL);
	sim_handle_add(&s->obj, SIM_MAGIC_STAMP, sim_prof_free);
	return (s);
}

SIM_EXPORT void
aclprofDestroyStamp(void *stamp)
{
	if (stamp != NULL)
		(void)sim_handle_remove(stamp, SIM_MAGIC_STAMP);
}

/* A live stamp, or ACL_ERROR_INVALID_PARAM. */
static aclError
sim_prof_stamp_check(void *stamp)
{
	struct sim_prof_stamp	*s;

	if (stamp == NULL || (s = sim_handle_get(stamp, SIM_MAGIC_STAMP)) ==
	    NULL)
		return (ACL_ERROR_INVALID_PARAM);
	sim_handle_put(&s->obj);
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclprofSetStampTraceMessage(void *stamp, const char *msg, uint32_t msgLen)
{
	if (msg == NULL || msgLen == 0 || msgLen > 128)
		return (ACL_ERROR_INVALID_PARAM);
	return (sim_prof_stamp_check(stamp));
}

SIM_EXPORT aclError
aclprofMark(void *stamp)
{
	return (sim_prof_stamp_check(stamp));
}

SIM_EXPORT aclError
aclprofRangeStart(void *stamp, uint32_t *rangeId)
{
	aclError	e;

	if (rangeId == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	if ((e = sim_prof_stamp_check(stamp)) != ACL_SUCCESS)
		return (e);
	*rangeId = __atomic_fetch_add(&sim_prof_next_range, 1,
	    __ATOMIC_RELAXED);
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclprofRangeStop(uint32_t rangeId)
{
	return (rangeId == 0 ? ACL_ERROR_INVALID_PARAM : ACL_SUCCESS);
}

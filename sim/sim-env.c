/*
 * sim-env.c - simulator configuration from the environment, read once.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

struct sim_config sim_cfg;

static pthread_once_t sim_env_once = PTHREAD_ONCE_INIT;

static double
sim_env_double(const char *name, double def, double min, double max)
{
	const char	*s = getenv(name);
	char		*end;
	double		 v;

	if (s == NULL || *s == '\0')
		return (def);
	v = strtod(s, &end);
	if (*end != '\0' || v < min || v > max)
		return (def);
	return (v);
}

static long long
sim_env_ll(const char *name, long long def, long long min, long long max)
{
	const char	*s = getenv(name);
	char		*end;
	long long	 v;

	if (s == NULL || *s == '\0')
		return (def);
	v = strtoll(s, &end, 0);
	if (*end != '\0' || v < min || v > max)
		return (def);
	return (v);
}

static void
sim_env_do_load(void)
{
	const char	*s;
	uint32_t	 n;

	sim_cfg.ndevices = (int)sim_env_ll("NPUSIM_DEVICES", 8, 1,
	    SIM_MAX_DEVICES);
	sim_cfg.mem_bytes = (uint64_t)sim_env_ll("NPUSIM_MEM_MB", 16384, 1,
	    1LL << 24) << 20;
	sim_cfg.time_scale = sim_env_double("NPUSIM_TIME_SCALE", 1.0, 0.0,
	    1e6);
	s = getenv("NPUSIM_SHM_PREFIX");
	if (s == NULL || *s == '\0' || strchr(s, '/') != NULL ||
	    strlen(s) >= sizeof sim_cfg.prefix)
		s = "npusim";
	strcpy(sim_cfg.prefix, s);
	sim_cfg.clock_offset_ns = sim_env_ll("NPUSIM_CLOCK_OFFSET_NS",
	    1500000000LL, -(1LL << 62), 1LL << 62);
	sim_cfg.clock_drift_ppb = (int64_t)(sim_env_double(
	    "NPUSIM_CLOCK_DRIFT_PPM", 25.0, -1e5, 1e5) * 1000.0);
	sim_cfg.slow_rank = (int)sim_env_ll("NPUSIM_SLOW_RANK", -1, -1,
	    SIM_MAX_RANKS);
	sim_cfg.slow_factor = sim_env_double("NPUSIM_SLOW_FACTOR", 4.0, 1.0,
	    1e4);
	sim_cfg.slow_link = (int)sim_env_ll("NPUSIM_SLOW_LINK", -1, -1,
	    SIM_MAX_RANKS);
	sim_cfg.link_bw = sim_env_double("NPUSIM_LINK_BW_GBS", 25.0, 1e-3,
	    1e6) * 1e9;
	sim_cfg.link_lat_ns = sim_env_double("NPUSIM_LINK_LAT_US", 2.0, 0.0,
	    1e6) * 1e3;
	sim_cfg.roce_bw = sim_env_double("NPUSIM_ROCE_BW_GBS", 12.5, 1e-3,
	    1e6) * 1e9;
	sim_cfg.roce_lat_ns = sim_env_double("NPUSIM_ROCE_LAT_US", 10.0, 0.0,
	    1e6) * 1e3;
	/* The node a rank runs on: ranks whose node differs talk over RoCE.
	 * The hostname by default, so a minicluster node is a node. */
	s = getenv("NPUSIM_NODE");
	if (s != NULL && *s != '\0')
		snprintf(sim_cfg.node, sizeof sim_cfg.node, "%s", s);
	else if (gethostname(sim_cfg.node, sizeof sim_cfg.node) != 0)
		strcpy(sim_cfg.node, "localhost");
	sim_cfg.node[sizeof sim_cfg.node - 1] = '\0';
	sim_cfg.node_id = sim_topo_hash(sim_cfg.node);
	/* A directory every rank of a multi-node job sees (a shared
	 * filesystem): the communicators' rendezvous files live there. */
	s = getenv("NPUSIM_COMM_DIR");
	if (s != NULL && s[0] == '/' && strlen(s) < sizeof sim_cfg.comm_dir)
		strcpy(sim_cfg.comm_dir, s);
	sim_cfg.slow_link_bw = sim_env_double("NPUSIM_SLOW_LINK_BW_GBS", 2.5,
	    1e-3, 1e6) * 1e9;
	sim_cfg.hccl_timeout_s = sim_env_double("NPUSIM_HCCL_TIMEOUT_S", 30.0,
	    0.1, 1e6);
	n = (uint32_t)sim_env_ll("NPUSIM_CHANNEL_RECORDS", 16384, 16,
	    1 << 22);
	/* The ring index is masked, so round down to a power of two. */
	while (n & (n - 1))
		n &= n - 1;
	sim_cfg.channel_records = n;
	sim_cfg.metrics_ms = (int)sim_env_ll("NPUSIM_METRICS_MS", 20, 1,
	    10000);
	/* Test hook: the metrics page gets its first snapshot this late (a
	 * sampler that has not run yet when the device is named). */
	sim_cfg.test_metrics_delay_ms = (int)sim_env_ll(
	    "NPUSIM_TEST_METRICS_DELAY_MS", 0, 0, 60000);
	/* Test hook: a stream's worker wakes this late from its sleep to a
	 * copy into host memory (a worker thread the kernel descheduled). */
	sim_cfg.test_worker_lag_ms = (int)sim_env_ll(
	    "NPUSIM_TEST_WORKER_LAG_MS", 0, 0, 60000);
	/* Test hook: every Nth clock pair's host read is taken as if the
	 * thread was preempted for 2 ms after the device read (its host time
	 * 1 ms off, its bracket saying so). */
	sim_cfg.test_clock_preempt = (int)sim_env_ll(
	    "NPUSIM_TEST_CLOCK_PREEMPT", 0, 0, 1 << 20);
	sim_cfg.env_rank = (int)sim_env_ll("RANK", -1, 0, 1 << 20);
}

/* Read the configuration once per process; every entry point calls it. */
void
sim_env_load(void)
{
	pthread_once(&sim_env_once, sim_env_do_load);
}

/* A fixed description of an error code, for aclGetRecentErrMsg. */
const char *
sim_env_errmsg(aclError e)
{
	switch (e) {
	case ACL_SUCCESS:
		return ("success");
	case ACL_ERROR_INVALID_PARAM:
		return ("invalid parameter");
	case ACL_ERROR_REPEAT_INITIALIZE:
		return ("repeated initialization");
	case ACL_ERROR_BAD_ALLOC:
		return ("out of memory");
	case ACL_ERROR_INVALID_DEVICE:
		return ("invalid device");
	case ACL_ERROR_RT_INVALID_HANDLE:
		return ("invalid handle");
	case ACL_ERROR_RT_CONTEXT_NULL:
		return ("no current device");
	case ACL_ERROR_RT_TASK_TIMEOUT:
		return ("task timeout");
	case ACL_ERROR_RT_SUSPECT_REMOTE_ERROR:
		return ("remote rank failed");
	}
	return ("error");
}

/*
 * sim-clock.c - host clocks and the per-device clocks.
 *
 * A device clock is a pure function of CLOCK_MONOTONIC so that every
 * process on the node computes the same device time:
 *   device_ns = mono + mono * drift_ppb / 1e9 + offset_ns
 * with offset = NPUSIM_CLOCK_OFFSET_NS + dev * 137 us and drift =
 * NPUSIM_CLOCK_DRIFT_PPM + dev * 1 ppm.  The host realtime side of the
 * clock samples honours the test hooks MSPTI_TEST_CLOCK_SKEW_NS and
 * MSPTI_TEST_CLOCK_DRIFT_PPB.
 */
#include <sys/prctl.h>

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "sim.h"
#include "util.h"

/* Every real sleep the runtime takes (npusimHostSleeps, a test hook). */
static uint64_t	sim_clock_sleeps;

uint64_t
sim_clock_mono(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/*
 * The host clock as this node's programs see it: the host side of every
 * clock sample (npusimReadClock, the channel header, the metrics page), so
 * that device times map onto the node's clock including the test skew
 * and drift (MSPTI_TEST_CLOCK_SKEW_NS, MSPTI_TEST_CLOCK_DRIFT_PPB,
 * lib/util.h).  The device model and the cross-rank coordination run on
 * sim_clock_mono(), which neither touches.
 */
uint64_t
sim_clock_realtime(void)
{
	return (util_realtime_ns());
}

/*
 * One (host realtime, monotonic) pair taken together: the realtime is the
 * midpoint of two reads around the monotonic one.  A thread preempted
 * between them (ms on a loaded machine) would put the midpoint far off,
 * so of up to four tries the tightest bracket is kept.  Returns its width
 * (the midpoint is off by at most half of it).
 */
uint64_t
sim_clock_pair(uint64_t *real, uint64_t *mono)
{
	static unsigned	pairs;
	uint64_t	best = UINT64_MAX, r0, m, r1, late = 0;

	sim_env_load();
	if (sim_cfg.test_clock_preempt > 0 && __atomic_add_fetch(&pairs, 1,
	    __ATOMIC_RELAXED) % (unsigned)sim_cfg.test_clock_preempt == 0)
		late = 2000000;		/* NPUSIM_TEST_CLOCK_PREEMPT */
	for (int i = 0; i < 4 && best > 500; i++) {
		r0 = sim_clock_realtime();
		m = sim_clock_mono();
		r1 = sim_clock_realtime() + late;
		if (r1 - r0 < best) {
			best = r1 - r0;
			*real = r0 + (r1 - r0) / 2;
			*mono = m;
		}
	}
	return (best);
}

int64_t
sim_clock_offset(int dev)
{
	sim_env_load();
	return (sim_cfg.clock_offset_ns + (int64_t)dev * 137000);
}

int64_t
sim_clock_drift(int dev)
{
	sim_env_load();
	return (sim_cfg.clock_drift_ppb + (int64_t)dev * 1000);
}

/* Device time of monotonic instant mono. */
uint64_t
sim_clock_device(int dev, uint64_t mono)
{
	int64_t		drift = sim_clock_drift(dev), skew;

	/* mono * drift / 1e9 without 128-bit division: whole seconds, then
	 * the rest (|drift| < 1e9 keeps it in range; same truncation). */
	skew = (int64_t)(mono / 1000000000ULL) * drift +
	    (int64_t)(mono % 1000000000ULL) * drift / 1000000000;
	return (mono + (uint64_t)skew + (uint64_t)sim_clock_offset(dev));
}

/* Sleep until a CLOCK_MONOTONIC deadline, surviving signals. */
void
sim_clock_sleep_until(uint64_t deadline)
{
	struct timespec	ts;

	int		slack;

	__atomic_fetch_add(&sim_clock_sleeps, 1, __ATOMIC_RELAXED);
	ts.tv_sec = (time_t)(deadline / 1000000000ULL);
	ts.tv_nsec = (long)(deadline % 1000000000ULL);
	/* The default 50 us timer slack would show as idle device time
	 * after every host wait: 1 us while we sleep, then the caller's. */
	slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (slack > 1000)
		prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
	    NULL) == EINTR)
		;
	if (slack > 1000)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
}

/*
 * A host-visible wait for a modelled instant: return once the host clock
 * has passed it, sleeping at most once.
 */
void
sim_clock_wait_until(uint64_t deadline)
{
	if (sim_clock_mono() < deadline)
		sim_clock_sleep_until(deadline);
}

SIM_EXPORT uint64_t
npusimHostSleeps(void)
{
	return (__atomic_load_n(&sim_clock_sleeps, __ATOMIC_RELAXED));
}

SIM_EXPORT aclError
npusimReadClock(int32_t dev, uint64_t *host_realtime_ns, uint64_t *device_ns)
{
	uint32_t	br;

	return (npusimReadClockPair(dev, host_realtime_ns, device_ns, &br));
}

SIM_EXPORT aclError
npusimReadClockPair(int32_t dev, uint64_t *host_realtime_ns,
    uint64_t *device_ns, uint32_t *bracket_ns)
{
	uint64_t	m, br;

	sim_env_load();
	if (host_realtime_ns == NULL || device_ns == NULL ||
	    bracket_ns == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	if (dev < 0 || dev >= sim_cfg.ndevices)
		return (ACL_ERROR_INVALID_DEVICE);
	br = sim_clock_pair(host_realtime_ns, &m);
	*device_ns = sim_clock_device(dev, m);
	*bracket_ns = br > UINT32_MAX ? UINT32_MAX : (uint32_t)br;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
npusimClockParams(int32_t dev, int64_t *offset_ns, int64_t *drift_ppb)
{
	sim_env_load();
	if (dev < 0 || dev >= sim_cfg.ndevices)
		return (ACL_ERROR_INVALID_DEVICE);
	if (offset_ns != NULL)
		*offset_ns = sim_clock_offset(dev);
	if (drift_ppb != NULL)
		*drift_ppb = sim_clock_drift(dev);
	return (ACL_SUCCESS);
}

SIM_EXPORT int
npusimShmName(char *buf, size_t len, int32_t dev, const char *what)
{
	sim_env_load();
	if (buf == NULL || what == NULL || dev < 0 ||
	    dev >= sim_cfg.ndevices)
		return (-1);
	return (snprintf(buf, len, "/%s-dev%d-%s", sim_cfg.prefix, (int)dev,
	    what));
}

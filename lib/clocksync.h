/*
 * Clock synchronisation: maps a device clock to host CLOCK_REALTIME with a
 * least-squares line (offset and drift) over recent (host, device) sample
 * pairs.  Pure computation, no I/O: the daemon feeds it samples from the
 * device channel header (or npusimReadClock), tests feed it numbers.
 *
 * The model is the one a trace records (struct rec_clock_sync):
 *   host_ns = host_ref_ns + (device_ns - device_ref_ns) * (1 + drift)
 */
#ifndef MSPTI_CLOCKSYNC_H
#define MSPTI_CLOCKSYNC_H

#include <stdbool.h>
#include <stdint.h>

#define CLOCKSYNC_SAMPLES	64		/* ring of recent pairs */
#define CLOCKSYNC_MIN_SPAN_NS	200000000ull	/* fit drift only beyond 200 ms */
#define CLOCKSYNC_MAX_DRIFT	1e-3		/* |drift| above: rejected (0) */
/* Pairs of known quality give a slope before CLOCKSYNC_MIN_SPAN_NS once its
 * standard error is at most this (2 ppm: 80 ns over the 40 ms a drain
 * converts past the newest pair). */
#define CLOCKSYNC_SLOPE_SE	2e-6
/* A pair's host read is never taken as better than this. */
#define CLOCKSYNC_PAIR_FLOOR_NS	20

struct clock_model {
	uint64_t	host_ref_ns;	/* CLOCK_REALTIME at device_ref_ns */
	uint64_t	device_ref_ns;
	double		drift;		/* slope - 1 (25 ppm = 25e-6) */
	double		error_ns;	/* RMS residual of the fit (weighted) */
	uint32_t	samples;	/* pairs the fit used; 0: no model */
	uint32_t	reserved;
};

/* Sample ring and the current fit.  Zero-initialised (or clocksync_init)
 * means "no samples". */
struct clocksync {
	uint64_t		host[CLOCKSYNC_SAMPLES];
	uint64_t		dev[CLOCKSYNC_SAMPLES];
	uint32_t		bracket[CLOCKSYNC_SAMPLES];	/* ns, 0: unknown */
	unsigned		n;		/* valid entries */
	unsigned		next;		/* slot the next sample goes to */
	uint64_t		last_dev;	/* newest device time added */
	uint64_t		rejected;	/* samples refused (stale, zero) */
	struct clock_model	model;
};

void	clocksync_init(struct clocksync *);

/*
 * Adds one (host realtime, device) pair taken at the same instant and
 * refits.  bracket_ns is how far apart the two host reads around the
 * device read were (the host time, their midpoint, is off by at most half
 * of it); 0 when unknown.  A pair with a zero time, or a device time not
 * newer than the last one (the same header sample read twice), is
 * ignored; an older one means the device clock was reset and restarts the
 * fit.  Returns true when the pair was used.
 *
 * The fit: least squares, each pair weighted by its bracket when every
 * pair has one.  The slope (drift) is used once the pairs span
 * CLOCKSYNC_MIN_SPAN_NS, or sooner when every pair's bracket is known and
 * the slope's standard error is at most CLOCKSYNC_SLOPE_SE.  Until then
 * the model is offset only, anchored at the newest pair (a device that
 * drifts is off by the drift times the time since it, not since the
 * pairs' mean).
 */
bool	clocksync_add(struct clocksync *, uint64_t host_ns, uint64_t device_ns,
	    uint32_t bracket_ns);

/* Refits the model from the ring; clocksync_add already does this. */
void	clocksync_fit(struct clocksync *);

/* True once at least one pair was added. */
static inline bool
clocksync_ready(const struct clocksync *cs)
{
	return cs->model.samples > 0;
}

/* Maps device_ns to host ns with m; returns device_ns unchanged when m has
 * no samples. */
uint64_t	clock_model_to_host(const struct clock_model *m, uint64_t device_ns);

/* llround(y), halves away from zero, inline (msptid converts every device
 * time): y - trunc(y) is exact below 2^52, and y an integer above. */
static inline int64_t
clock_round(double y)
{
	int64_t r = (int64_t)y;
	double f = y - (double)r;

	if (f >= 0.5)
		r++;
	else if (f <= -0.5)
		r--;
	return r;
}

#endif

/*
 * Least-squares clock fit: host = a + b * device over the sample ring,
 * computed relative to the newest sample so that doubles keep ns precision
 * (offsets within the ring span are at most seconds).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "clocksync.h"

void
clocksync_init(struct clocksync *cs)
{
	memset(cs, 0, sizeof(*cs));
}

/* Fits slope and intercept; a span too short for a meaningful slope (or a
 * slope beyond any real oscillator) keeps drift 0, i.e. offset only. */
void
clocksync_fit(struct clocksync *cs)
{
	uint64_t bh, bd, dmin = UINT64_MAX, dmax = 0;
	double mx = 0, my = 0, sxx = 0, sxy = 0, slope = 1.0, err = 0, x, y, r;
	unsigned i, n = cs->n, newest;

	if (n == 0) {
		memset(&cs->model, 0, sizeof(cs->model));
		return;
	}
	newest = (cs->next + CLOCKSYNC_SAMPLES - 1) % CLOCKSYNC_SAMPLES;
	bh = cs->host[newest];
	bd = cs->dev[newest];
	for (i = 0; i < n; i++) {
		mx += (double)(int64_t)(cs->dev[i] - bd);
		my += (double)(int64_t)(cs->host[i] - bh);
		if (cs->dev[i] < dmin)
			dmin = cs->dev[i];
		if (cs->dev[i] > dmax)
			dmax = cs->dev[i];
	}
	mx /= n;
	my /= n;
	for (i = 0; i < n; i++) {
		x = (double)(int64_t)(cs->dev[i] - bd) - mx;
		y = (double)(int64_t)(cs->host[i] - bh) - my;
		sxx += x * x;
		sxy += x * y;
	}
	if (n >= 3 && dmax - dmin >= CLOCKSYNC_MIN_SPAN_NS && sxx > 0) {
		slope = sxy / sxx;
		if (!isfinite(slope) || fabs(slope - 1.0) > CLOCKSYNC_MAX_DRIFT)
			slope = 1.0;
	}
	/* The line passes through the means; anchor it at the newest device
	 * sample: host(bd) = bh + my + (0 - mx) * slope. */
	cs->model.device_ref_ns = bd;
	cs->model.host_ref_ns = bh + (uint64_t)(int64_t)llround(my - mx * slope);
	cs->model.drift = slope - 1.0;
	for (i = 0; i < n; i++) {
		x = (double)(int64_t)(cs->dev[i] - bd);
		y = (double)(int64_t)(cs->host[i] - bh);
		r = y - (my - mx * slope + x * slope);
		err += r * r;
	}
	cs->model.error_ns = sqrt(err / n);
	cs->model.samples = n;
}

bool
clocksync_add(struct clocksync *cs, uint64_t host_ns, uint64_t device_ns)
{
	if (host_ns == 0 || device_ns == 0 ||
	    (cs->n > 0 && device_ns == cs->last_dev)) {
		cs->rejected++;
		return false;
	}
	/* A device clock that went back was reset: start a new fit. */
	if (cs->n > 0 && device_ns < cs->last_dev) {
		cs->n = 0;
		cs->next = 0;
	}
	cs->host[cs->next] = host_ns;
	cs->dev[cs->next] = device_ns;
	cs->next = (cs->next + 1) % CLOCKSYNC_SAMPLES;
	if (cs->n < CLOCKSYNC_SAMPLES)
		cs->n++;
	cs->last_dev = device_ns;
	clocksync_fit(cs);
	return true;
}

uint64_t
clock_model_to_host(const struct clock_model *m, uint64_t device_ns)
{
	int64_t dx;

	if (m->samples == 0)
		return device_ns;
	dx = (int64_t)(device_ns - m->device_ref_ns);
	return m->host_ref_ns + (uint64_t)(dx + llround((double)dx * m->drift));
}

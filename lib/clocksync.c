/*
 * Least-squares clock fit: host = a + b * device over the sample ring,
 * computed relative to the newest sample so that doubles keep ns precision
 * (offsets within the ring span are at most seconds).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clocksync.h"

void
clocksync_init(struct clocksync *cs)
{
	memset(cs, 0, sizeof(*cs));
}

/* A pair further from the line than both of these is an outlier: a host
 * read preempted between the brackets of its device read (ms on a loaded
 * machine), never a clock's own motion. */
#define CLOCKSYNC_OUTLIER_NS		10000.0
#define CLOCKSYNC_OUTLIER_SIGMAS	6.0

struct cs_line {
	double		mx, my, slope;	/* relative to the newest pair */
	unsigned	n;		/* pairs used */
};

/* Least squares over the pairs not in out[]; a span too short for a
 * meaningful slope (or a slope beyond any real oscillator) keeps drift 0,
 * i.e. offset only. */
static void
cs_fit_line(const struct clocksync *cs, const bool *out, uint64_t bh,
    uint64_t bd, struct cs_line *l)
{
	uint64_t dmin = UINT64_MAX, dmax = 0;
	double sxx = 0, sxy = 0, x, y;

	l->mx = l->my = 0;
	l->slope = 1.0;
	l->n = 0;
	for (unsigned i = 0; i < cs->n; i++) {
		if (out[i])
			continue;
		l->mx += (double)(int64_t)(cs->dev[i] - bd);
		l->my += (double)(int64_t)(cs->host[i] - bh);
		if (cs->dev[i] < dmin)
			dmin = cs->dev[i];
		if (cs->dev[i] > dmax)
			dmax = cs->dev[i];
		l->n++;
	}
	l->mx /= l->n;
	l->my /= l->n;
	for (unsigned i = 0; i < cs->n; i++) {
		if (out[i])
			continue;
		x = (double)(int64_t)(cs->dev[i] - bd) - l->mx;
		y = (double)(int64_t)(cs->host[i] - bh) - l->my;
		sxx += x * x;
		sxy += x * y;
	}
	if (l->n >= 3 && dmax - dmin >= CLOCKSYNC_MIN_SPAN_NS && sxx > 0) {
		l->slope = sxy / sxx;
		if (!isfinite(l->slope) ||
		    fabs(l->slope - 1.0) > CLOCKSYNC_MAX_DRIFT)
			l->slope = 1.0;
	}
}

static double
cs_resid(const struct clocksync *cs, const struct cs_line *l, unsigned i,
    uint64_t bh, uint64_t bd)
{
	double x = (double)(int64_t)(cs->dev[i] - bd);
	double y = (double)(int64_t)(cs->host[i] - bh);

	return y - (l->my + (x - l->mx) * l->slope);
}

static int
cs_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static double
cs_median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cs_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Fits the line, then leaves out the pairs far off it (beyond
 * CLOCKSYNC_OUTLIER_SIGMAS robust deviations of the residuals and
 * CLOCKSYNC_OUTLIER_NS) and fits again, twice at most; never more than a
 * quarter of the pairs.
 */
void
clocksync_fit(struct clocksync *cs)
{
	bool out[CLOCKSYNC_SAMPLES] = { false };
	double r[CLOCKSYNC_SAMPLES], a[CLOCKSYNC_SAMPLES], err = 0, med, thr;
	unsigned n = cs->n, newest, nout = 0;
	uint64_t bh, bd;
	struct cs_line l;

	if (n == 0) {
		memset(&cs->model, 0, sizeof(cs->model));
		return;
	}
	newest = (cs->next + CLOCKSYNC_SAMPLES - 1) % CLOCKSYNC_SAMPLES;
	bh = cs->host[newest];
	bd = cs->dev[newest];
	cs_fit_line(cs, out, bh, bd, &l);
	for (int pass = 0; pass < 2 && n >= 8; pass++) {
		unsigned m = 0, add = 0;

		for (unsigned i = 0; i < n; i++) {
			r[i] = cs_resid(cs, &l, i, bh, bd);
			if (!out[i])
				a[m++] = r[i];
		}
		med = cs_median(a, m);
		for (unsigned i = 0, k = 0; i < n; i++)
			if (!out[i])
				a[k++] = fabs(r[i] - med);
		thr = CLOCKSYNC_OUTLIER_SIGMAS * 1.4826 * cs_median(a, m);
		if (thr < CLOCKSYNC_OUTLIER_NS)
			thr = CLOCKSYNC_OUTLIER_NS;
		for (unsigned i = 0; i < n; i++)
			if (!out[i] && fabs(r[i] - med) > thr &&
			    (nout + add + 1) * 4 <= n) {
				out[i] = true;
				add++;
			}
		if (add == 0)
			break;
		nout += add;
		cs_fit_line(cs, out, bh, bd, &l);
	}
	/* The line passes through the means; anchor it at the newest device
	 * sample: host(bd) = bh + my + (0 - mx) * slope. */
	cs->model.device_ref_ns = bd;
	cs->model.host_ref_ns = bh + (uint64_t)(int64_t)llround(l.my -
	    l.mx * l.slope);
	cs->model.drift = l.slope - 1.0;
	for (unsigned i = 0; i < n; i++) {
		double e;

		if (out[i])
			continue;
		e = cs_resid(cs, &l, i, bh, bd);
		err += e * e;
	}
	cs->model.error_ns = sqrt(err / l.n);
	cs->model.samples = l.n;
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
	return m->host_ref_ns + (uint64_t)(dx + clock_round((double)dx *
	    m->drift));
}

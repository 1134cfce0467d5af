/*
 * Least-squares clock fit: host = a + b * device over the sample ring,
 * weighted by each pair's bracket when all have one, computed relative to
 * the newest sample so that doubles keep ns precision (offsets within the
 * ring span are at most seconds); offset only, at the newest pair, until
 * the slope is known well enough (clocksync.h).
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
	double		mx, my;		/* weighted means, relative to the newest */
	double		slope;		/* least squares (1 when not sane) */
	bool		use_slope;	/* else offset only, at the newest pair */
	unsigned	n;		/* pairs used */
};

/* True when every pair not in out[] says how good its host read is. */
static bool
cs_known(const struct clocksync *cs, const bool *out)
{
	for (unsigned i = 0; i < cs->n; i++)
		if (!out[i] && cs->bracket[i] == 0)
			return false;
	return true;
}

/* A pair's weight: 1 / its host read's error bound squared (half its
 * bracket, at least CLOCKSYNC_PAIR_FLOOR_NS); 1 for all when unknown. */
static double
cs_weight(const struct clocksync *cs, unsigned i, bool known)
{
	double e = cs->bracket[i] / 2.0;

	if (!known)
		return 1.0;
	if (e < CLOCKSYNC_PAIR_FLOOR_NS)
		e = CLOCKSYNC_PAIR_FLOOR_NS;
	return 1.0 / (e * e);
}

/*
 * Least squares over the pairs not in out[].  The slope is used when the
 * pairs span CLOCKSYNC_MIN_SPAN_NS, or, every pair's bracket known, when
 * its standard error (1 / sqrt(sum w (x - mx)^2) with w the weights) is
 * at most CLOCKSYNC_SLOPE_SE; never a slope beyond any real oscillator.
 */
static void
cs_fit_line(const struct clocksync *cs, const bool *out, uint64_t bh,
    uint64_t bd, struct cs_line *l)
{
	uint64_t dmin = UINT64_MAX, dmax = 0;
	double sw = 0, sxx = 0, sxy = 0, x, y, w;
	bool known = cs_known(cs, out), span;

	l->mx = l->my = 0;
	l->slope = 1.0;
	l->use_slope = false;
	l->n = 0;
	for (unsigned i = 0; i < cs->n; i++) {
		if (out[i])
			continue;
		w = cs_weight(cs, i, known);
		sw += w;
		l->mx += w * (double)(int64_t)(cs->dev[i] - bd);
		l->my += w * (double)(int64_t)(cs->host[i] - bh);
		if (cs->dev[i] < dmin)
			dmin = cs->dev[i];
		if (cs->dev[i] > dmax)
			dmax = cs->dev[i];
		l->n++;
	}
	l->mx /= sw;
	l->my /= sw;
	for (unsigned i = 0; i < cs->n; i++) {
		if (out[i])
			continue;
		w = cs_weight(cs, i, known);
		x = (double)(int64_t)(cs->dev[i] - bd) - l->mx;
		y = (double)(int64_t)(cs->host[i] - bh) - l->my;
		sxx += w * x * x;
		sxy += w * x * y;
	}
	if (l->n < 2 || !(sxx > 0))
		return;
	l->slope = sxy / sxx;
	if (!isfinite(l->slope) || fabs(l->slope - 1.0) > CLOCKSYNC_MAX_DRIFT) {
		l->slope = 1.0;
		return;
	}
	span = l->n >= 3 && dmax - dmin >= CLOCKSYNC_MIN_SPAN_NS;
	l->use_slope = span || (known && 1.0 / sqrt(sxx) <= CLOCKSYNC_SLOPE_SE);
}

/* Pair i's distance from the least-squares line. */
static double
cs_resid(const struct clocksync *cs, const struct cs_line *l, unsigned i,
    uint64_t bh, uint64_t bd)
{
	double x = (double)(int64_t)(cs->dev[i] - bd);
	double y = (double)(int64_t)(cs->host[i] - bh);

	return y - (l->my + (x - l->mx) * l->slope);
}

/* Pair i's offset, host - device, relative to the newest pair's. */
static double
cs_offset(const struct clocksync *cs, unsigned i, uint64_t bh, uint64_t bd)
{
	return (double)(int64_t)(cs->host[i] - bh) -
	    (double)(int64_t)(cs->dev[i] - bd);
}

/*
 * The pair an offset-only model keeps: the newest not in out[], unless it
 * is a bad read (its bracket, or without brackets its distance from the
 * median offset of the newest three, beyond CLOCKSYNC_OUTLIER_NS); then the
 * best of the newest three (the narrowest bracket, or the median).
 */
static unsigned
cs_anchor(const struct clocksync *cs, const bool *out, uint64_t bh,
    uint64_t bd)
{
	unsigned c[3] = { 0, 0, 0 }, m = 0, best;
	bool known = cs_known(cs, out);
	double o[3], t;

	for (unsigned k = 0; k < cs->n && m < 3; k++) {
		unsigned i = (cs->next + 2 * CLOCKSYNC_SAMPLES - 1 - k) %
		    CLOCKSYNC_SAMPLES;

		if (!out[i])
			c[m++] = i;
	}
	if (known) {
		if (cs->bracket[c[0]] <= CLOCKSYNC_OUTLIER_NS)
			return c[0];
		best = c[0];
		for (unsigned k = 1; k < m; k++)
			if (cs->bracket[c[k]] < cs->bracket[best])
				best = c[k];
		return best;
	}
	if (m < 3)
		return c[0];
	for (unsigned k = 0; k < 3; k++)
		o[k] = cs_offset(cs, c[k], bh, bd);
	/* The median of three: the one between the other two. */
	best = 0;
	for (unsigned k = 1; k < 3; k++)
		if ((o[k] - o[(k + 1) % 3]) * (o[k] - o[(k + 2) % 3]) <= 0)
			best = k;
	t = o[0] - o[best];
	return fabs(t) > CLOCKSYNC_OUTLIER_NS ? c[best] : c[0];
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
	double slope, off, sw = 0;
	bool known;
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
	/* Anchor the model at the newest device sample: the line through
	 * the means (host(bd) = bh + my - mx * slope), or offset only at the
	 * pair cs_anchor keeps. */
	if (l.use_slope) {
		slope = l.slope;
		off = l.my - l.mx * slope;
	} else {
		slope = 1.0;
		off = cs_offset(cs, cs_anchor(cs, out, bh, bd), bh, bd);
	}
	cs->model.device_ref_ns = bd;
	cs->model.host_ref_ns = bh + (uint64_t)(int64_t)llround(off);
	cs->model.drift = slope - 1.0;
	/* Weighted like the fit: pairs that say they are poor count less. */
	known = cs_known(cs, out);
	for (unsigned i = 0; i < n; i++) {
		double e, w;

		if (out[i])
			continue;
		e = (double)(int64_t)(cs->host[i] - bh) - (off +
		    (double)(int64_t)(cs->dev[i] - bd) * slope);
		w = cs_weight(cs, i, known);
		err += w * e * e;
		sw += w;
	}
	cs->model.error_ns = sqrt(err / sw);
	cs->model.samples = l.n;
}

bool
clocksync_add(struct clocksync *cs, uint64_t host_ns, uint64_t device_ns,
    uint32_t bracket_ns)
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
	cs->bracket[cs->next] = bracket_ns;
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

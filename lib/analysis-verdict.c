/*
 * The slow-rank verdict, after the per-step breakdown (analysis-steps.c).
 *
 * Each rank's step time is split into categories that have one cause
 * each: device compute, link transit (collective time after the last
 * rank arrived; a send/recv's after its peers did, analysis-steps.c),
 * host/launch (device idle outside data ranges) and data
 * loading ("data*" ranges).  Time spent waiting for other ranks is no
 * rank's own and is left out.  A rank is slow in a category when its
 * median over its steps exceeds the median of the other ranks by more
 * than that category's threshold, and the threshold comes from the
 * noise measured in the same capture:
 *
 *   step noise   robust spread (1.4826 x MAD) of the category's per-step
 *                values within each rank, the median over ranks; the
 *                difference of two medians of n steps has a spread of
 *                about 1.2533 x sqrt(2 / n) of it;
 *   rank noise   robust spread of the other ranks' medians (with three
 *                or more of them): differences that balanced ranks show;
 *   threshold    rank_sigmas (5) x the larger of the two, and at least
 *                rank_imbalance (1%) of the median rank's device work
 *                (compute + transit) plus a tenth of the mean step (the
 *                smallest effect worth a verdict).  Host/launch, the residue where every
 *                scheduling delay of a shared machine lands, needs at
 *                least rank_host_floor (3%) of the mean step: with few
 *                ranks, step noise cannot see that the scheduler favours
 *                one process.  Host/launch and data loading are judged
 *                only with three or more steps per rank; without a
 *                noise estimate at all (two ranks, under three steps)
 *                the floor is 5% of the step.  Link is not judged when
 *                the ranks hold different numbers of collectives (their
 *                matching by sequence number is off; a warning says so).
 *
 * Compute on a quiet device is exact, so a small compute slowdown is
 * found; host time that jitters by milliseconds raises only the host
 * threshold.  Of the (rank, category) pairs over their threshold, the one
 * with the largest excess is the verdict: that rank, that cause, and the
 * excess over its step time as its share.  Without one, the threshold
 * and noise shown are those of the rank most ahead in compute.  Medians
 * keep a warm-up step from deciding.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"

enum { V_T, V_C, V_X, V_H, V_D, V_W, V_NF };

/* Categories that name a cause, and the names. */
static const int vd_cat[] = { V_C, V_X, V_H, V_D };
static const char *const vd_cause[V_NF] = { [V_C] = "compute",
    [V_X] = "link", [V_H] = "host/launch", [V_D] = "data loading" };

#define VD_MAD_SIGMA	1.4826	/* MAD to standard deviation (normal) */
#define VD_MEDIAN_SE	1.2533	/* median's spread over the mean's */
#define VD_BLIND_FLOOR	0.05	/* no noise estimate: the old 5% */
#define VD_STEP_SHARE	0.1	/* of the step, added to a category's
				   level for its floor */

static void *
vd_alloc(size_t n)
{
	void *p = calloc(n ? n : 1, 1);

	if (p == NULL)
		abort();
	return p;
}

/* The k-th smallest of v[0..n) (0-based; v reordered so that v[0..k)
 * are no larger and v(k..n) no smaller): Hoare's selection, linear on
 * average where the sort was n log n. */
static double
vd_select(double *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	while (lo < hi) {
		double p = v[lo + (hi - lo) / 2], t;
		size_t i = lo, j = hi;

		for (;;) {
			while (v[i] < p)
				i++;
			while (v[j] > p)
				j--;
			if (i >= j)
				break;
			t = v[i];
			v[i] = v[j];
			v[j] = t;
			i++;
			j--;
		}
		/* v[lo..j] <= p <= v[j+1..hi] */
		if (k <= j)
			hi = j;
		else
			lo = j + 1;
	}
	return v[k];
}

/* Median of v[0..n) (reordered). */
static double
vd_median(double *v, size_t n)
{
	double hi, lo;

	if (n == 0)
		return 0;
	hi = vd_select(v, n, n / 2);
	if (n % 2)
		return hi;
	/* The lower middle: the largest of the half below. */
	lo = v[0];
	for (size_t i = 1; i < n / 2; i++)
		if (v[i] > lo)
			lo = v[i];
	return (lo + hi) / 2;
}

/* Robust spread (sigma) of v[0..n) around its median m; v reordered. */
static double
vd_spread(double *v, size_t n, double m)
{
	for (size_t i = 0; i < n; i++)
		v[i] = fabs(v[i] - m);
	return VD_MAD_SIGMA * vd_median(v, n);
}

/* A value and where it came from, sorted by value (then place). */
struct vd_at {
	double		v;
	size_t		i;
};

static int
vd_cmp_at(const void *x, const void *y)
{
	const struct vd_at *a = x, *b = y;

	if (a->v != b->v)
		return a->v < b->v ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* Sorts v[0..n) into s with each value's place; rank[i]: where v[i] went. */
static void
vd_rank(const double *v, size_t n, struct vd_at *s, size_t *rank)
{
	for (size_t i = 0; i < n; i++)
		s[i] = (struct vd_at){ v[i], i };
	qsort(s, n, sizeof(*s), vd_cmp_at);
	for (size_t p = 0; p < n; p++)
		rank[s[p].i] = p;
}

/* vd_median of the n - 1 values of sorted s[0..n) other than s[r]: the
 * p-th of them is s[p] below r, s[p + 1] from r on. */
static double
vd_median_but(const struct vd_at *s, size_t n, size_t r)
{
	size_t m = n - 1, k = m / 2;
	double hi = s[k < r ? k : k + 1].v, lo;

	if (m % 2)
		return hi;
	lo = s[k - 1 < r ? k - 1 : k].v;
	return (lo + hi) / 2;
}

/*
 * For each i of x[0..n) (n >= 2), what vd_median (ref[i]) and, with 3 or
 * more of them, vd_spread around it (cross[i], else 0) give on the other
 * n - 1 values, for all i at once: a median of the others is one of
 * all n's order statistics, or the next one, as i's own value comes
 * before it or not; and the others' median takes at most three values,
 * so their distances to it are sorted at most three times.  A thousand
 * ranks' verdict was O(n^2) with a median and a spread per rank.
 * s, s2 hold n; rank, rank2 n.
 */
static void
vd_loo(const double *x, size_t n, double *ref, double *cross,
    struct vd_at *s, struct vd_at *s2, size_t *rank, size_t *rank2,
    double *d)
{
	double seen[3];
	size_t nseen = 0;

	vd_rank(x, n, s, rank);
	for (size_t i = 0; i < n; i++) {
		ref[i] = vd_median_but(s, n, rank[i]);
		cross[i] = 0;
	}
	if (n - 1 < 3)
		return;
	/* Per distinct median of the others (three at most: i's value
	 * below, inside or above the middle), the distances to it. */
	for (size_t i = 0; i < n; i++) {
		double r = ref[i];
		size_t k = 0;

		while (k < nseen && seen[k] != r)
			k++;
		if (k < nseen)
			continue;
		if (nseen < 3)
			seen[nseen++] = r;
		for (size_t j = 0; j < n; j++)
			d[j] = fabs(x[j] - r);
		vd_rank(d, n, s2, rank2);
		for (size_t j = i; j < n; j++)
			if (ref[j] == r)
				cross[j] = VD_MAD_SIGMA *
				    vd_median_but(s2, n, rank2[j]);
	}
}

/* Whether p's steps are compared with the other ranks'. */
static bool
vd_compared(const struct an_proc *p, bool stepped)
{
	return p->rank >= 0 && p->nres > 0 && !(stepped && p->nsteps == 0);
}

static double
vd_value(const struct an_stepres *r, int f)
{
	double len = (double)(r->end - r->start);
	double fr = (double)r->free - (double)r->data;

	switch (f) {
	case V_T: return len;
	case V_C: return (double)r->compute;
	case V_X: return (double)r->transit;
	case V_W: return (double)r->wait;
	case V_H: return fr > 0 ? fr : 0;
	case V_D: return (double)r->data;
	}
	return 0;
}

void
an_verdict(struct analysis *a)
{
	size_t n = 0, maxres = 1, minsteps = SIZE_MAX;
	double (*med)[V_NF], (*sd)[V_NF], *col, *tmp, *lref, *lcross, *d;
	struct vd_at *s1, *s2;
	size_t *rk1, *rk2;
	double maxo = -1, mino = 1e300, sumt = 0, tmean, best = 0;
	double thr_c = -1, noise_c = 0, ex_c = -1e300;
	struct an_proc **rp;
	struct analysis_verdict *v = &a->verdict;
	double floor = a->o.rank_imbalance > 0 ? a->o.rank_imbalance : 0;
	double k = a->o.rank_sigmas > 0 ? a->o.rank_sigmas : 5;
	size_t mincoll = 0, maxcoll = 0;
	double hfloor = a->o.rank_host_floor > 0 ? a->o.rank_host_floor : 0;
	bool stepped = false;

	memset(v, 0, sizeof(*v));
	v->rank = -1;
	for (size_t i = 0; i < a->nproc; i++) {
		if (a->proc[i]->nres > maxres)
			maxres = a->proc[i]->nres;
		if (a->proc[i]->rank >= 0 && a->proc[i]->nsteps > 0)
			stepped = true;
	}
	rp = vd_alloc(a->nproc * sizeof(*rp));
	med = vd_alloc(a->nproc * sizeof(*med));
	sd = vd_alloc(a->nproc * sizeof(*sd));
	col = vd_alloc(maxres * sizeof(double));
	tmp = vd_alloc(a->nproc * sizeof(double) + 8);
	lref = vd_alloc(a->nproc * sizeof(double));
	lcross = vd_alloc(a->nproc * sizeof(double));
	d = vd_alloc(a->nproc * sizeof(double));
	s1 = vd_alloc(a->nproc * sizeof(*s1));
	s2 = vd_alloc(a->nproc * sizeof(*s2));
	rk1 = vd_alloc(a->nproc * sizeof(*rk1));
	rk2 = vd_alloc(a->nproc * sizeof(*rk2));
	/* A whole capture is no step: with step markers on some ranks,
	 * ranks without them are not compared.  Fewer than two to compare
	 * (one rank's report): no verdict, and no statistics for it. */
	for (size_t i = 0; i < a->nproc; i++)
		n += vd_compared(a->proc[i], stepped);
	if (n < 2)
		goto out;
	n = 0;
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];

		if (!vd_compared(p, stepped))
			continue;
		for (int f = 0; f < V_NF; f++) {
			for (size_t j = 0; j < p->nres; j++)
				col[j] = vd_value(&p->res[j], f);
			med[n][f] = vd_median(col, p->nres);
			sd[n][f] = vd_spread(col, p->nres, med[n][f]);
		}
		if (p->nres < minsteps)
			minsteps = p->nres;
		if (n == 0 || p->ncoll[p->cw] < mincoll)
			mincoll = p->ncoll[p->cw];
		if (p->ncoll[p->cw] > maxcoll)
			maxcoll = p->ncoll[p->cw];
		rp[n++] = p;
	}
	if (n < 2)
		goto out;
	for (size_t i = 0; i < n; i++) {
		double own = med[i][V_T] - med[i][V_W];

		sumt += med[i][V_T];
		if (own > maxo)
			maxo = own;
		if (own < mino)
			mino = own;
	}
	tmean = sumt / (double)n;
	/* Collectives are matched across ranks by their sequence number; a
	 * rank whose capture began or ended elsewhere shifts it, and every
	 * transit is then wrong. */
	if (mincoll != maxcoll)
		an_warn(a, "slow rank: the ranks' captures hold %zu to %zu "
		    "collectives, so collectives cannot be matched across ranks "
		    "(a rank was captured from later or to earlier than the "
		    "others): the link cause is not judged", mincoll, maxcoll);
	v->imbalance = tmean > 0 ? (maxo - mino) / tmean : 0;
	for (size_t c = 0; c < sizeof(vd_cat) / sizeof(vd_cat[0]); c++) {
		int f = vd_cat[c];
		double step_sd, base_step, level;

		/* Host-measured causes need step-to-step noise to judge. */
		if ((f == V_H || f == V_D) && minsteps < 3)
			continue;
		if (f == V_X && mincoll != maxcoll)
			continue;
		for (size_t i = 0; i < n; i++)
			tmp[i] = sd[i][f];
		step_sd = vd_median(tmp, n);
		base_step = minsteps >= 3 ? VD_MEDIAN_SE * step_sd *
		    sqrt(2.0 / (double)minsteps) : 0;
		for (size_t i = 0; i < n; i++)
			tmp[i] = med[i][V_C] + med[i][V_X];
		level = vd_median(tmp, n);
		for (size_t i = 0; i < n; i++)
			tmp[i] = med[i][f];
		vd_loo(tmp, n, lref, lcross, s1, s2, rk1, rk2, d);
		for (size_t i = 0; i < n; i++) {
			size_t m = n - 1;
			/* The others' median and spread around it. */
			double ref = lref[i], ex, cross = lcross[i], noise, thr;

			noise = base_step > cross ? base_step : cross;
			thr = k * noise;
			/* The smallest effect worth a verdict: a share of the
			 * ranks' device work (plus a little of the step), so a
			 * few percent more compute counts even in a step that
			 * host delays make long. */
			if (thr < floor * (level + VD_STEP_SHARE * tmean))
				thr = floor * (level + VD_STEP_SHARE * tmean);
			if (f == V_H && thr < hfloor * tmean)
				thr = hfloor * tmean;
			if (minsteps < 3 && m < 3 && thr < VD_BLIND_FLOOR * tmean)
				thr = VD_BLIND_FLOOR * tmean;
			ex = med[i][f] - ref;
			if (f == V_C && ex > ex_c) {
				ex_c = ex;
				thr_c = thr;
				noise_c = noise;
			}
			if (ex > thr && ex > best) {
				best = ex;
				v->rank = rp[i]->rank;
				v->cause = vd_cause[f];
				v->share = med[i][V_T] > 0 ? ex / med[i][V_T] : 0;
				v->threshold = tmean > 0 ? thr / tmean : 0;
				v->noise = tmean > 0 ? noise / tmean : 0;
			}
		}
	}
	if (v->rank < 0 && tmean > 0 && thr_c >= 0) {
		/* No verdict: what the rank most ahead in compute needed. */
		v->threshold = thr_c / tmean;
		v->noise = noise_c / tmean;
	}
out:
	free(rk2);
	free(rk1);
	free(s2);
	free(s1);
	free(d);
	free(lcross);
	free(lref);
	free(tmp);
	free(col);
	free(sd);
	free(med);
	free(rp);
}

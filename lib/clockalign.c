/*
 * Clock offsets between hosts (and ranks) from collective completions
 * (clockalign.h).
 *
 * The unknowns are one offset per clock ("unit": a host, or a rank for
 * the per-rank check); the reference unit's is 0.  A collective instance
 * (comm, seq) seen by several units gives, for each unit u in it, one
 * observation of u's offset: the median of the other units' aligned end
 * times minus u's own end.  The offset is the median of those over the
 * instances (leave-one-out, so two hosts give exactly the median of their
 * end differences), iterated until no offset moves, since the others'
 * offsets enter the observation.  The uncertainty is the distribution-free
 * 95% confidence interval of that median (order statistics n/2 +- 0.98
 * sqrt(n)), never less than half the observations' interquartile range,
 * the spread of the ranks of one host within a collective (how well "ends
 * together" holds) or CLOCKALIGN_FLOOR_NS, plus the uncertainty of the
 * unit it was linked through; and it is cut to the hard
 * bracket that causality gives against the reference: a unit cannot end
 * before the reference's last rank started, nor the reference before the
 * unit's last rank started.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clockalign-int.h"

#define CA_MAX_ITER	50
/* Offsets that move less than this in a round have settled (a hundredth
 * of the floor). */
#define CA_SETTLED_NS	10

/* One unit's view of one instance. */
struct ca_ent {
	uint32_t	inst;
	uint32_t	unit;
	int64_t		end;		/* its ranks' median end */
	int64_t		smax;		/* latest start of its ranks */
	int64_t		emin;		/* earliest end of its ranks */
	int64_t		spread;		/* max - min end of its ranks */
};

static int
ca_cmp_rank(const void *x, const void *y)
{
	const struct clockalign_rank *a = x, *b = y;

	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* By rank, then host: a rank seen on two hosts (bad input) always keeps
 * the lower one, whatever the order of the samples. */
static int
ca_cmp_rank_host(const void *x, const void *y)
{
	const struct clockalign_rank *a = x, *b = y;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return a->host < b->host ? -1 : a->host > b->host;
}

/* Sorts r[n] by rank and host and drops repeated pairs; the count left. */
static size_t
ca_rank_unique(struct clockalign_rank *r, size_t n)
{
	size_t w = 0;

	qsort(r, n, sizeof(*r), ca_cmp_rank_host);
	for (size_t i = 0; i < n; i++)
		if (w == 0 || r[w - 1].rank != r[i].rank ||
		    r[w - 1].host != r[i].host)
			r[w++] = r[i];
	return w;
}

/*
 * The distinct (rank, host) pairs of s[m], sorted by rank then host, in
 * *rp (malloc'd); their count, or -1 out of memory.  The samples name the
 * same few ranks instance after instance: each is looked up among the
 * pairs found so far, and only the ones not there are sorted in, in
 * batches at least as large as what is found (so any input costs
 * O(m log m)).  The array grows with what is found: room for a pair a
 * sample was megabytes of zeroed pages on a long capture.
 */
static ptrdiff_t
ca_rank_pairs(const struct clockalign_sample *s, size_t m,
    struct clockalign_rank **rp)
{
	size_t nr = 0, np = 0, cap = 64;	/* r[0, nr) sorted; np new */
	struct clockalign_rank *r = calloc(cap, sizeof(*r)), *nrp;

	if (r == NULL)
		return -1;
	for (size_t i = 0; i < m; i++) {
		struct clockalign_rank key = { .rank = s[i].rank,
		    .host = s[i].host };

		if (nr > 0 && bsearch(&key, r, nr, sizeof(*r),
		    ca_cmp_rank_host) != NULL)
			continue;
		if (nr + np == cap) {
			if ((nrp = realloc(r, 2 * cap * sizeof(*r))) == NULL) {
				free(r);
				return -1;
			}
			r = nrp;
			memset(r + cap, 0, cap * sizeof(*r));
			cap *= 2;
		}
		r[nr + np++] = key;
		if (np >= 64 && np >= nr) {
			nr = ca_rank_unique(r, nr + np);
			np = 0;
		}
	}
	*rp = r;
	return (ptrdiff_t)ca_rank_unique(r, nr + np);
}

static uint32_t
ca_find(uint32_t *uf, uint32_t x)
{
	while (uf[x] != x) {
		uf[x] = uf[uf[x]];
		x = uf[x];
	}
	return x;
}

static void
ca_disagree(struct clockalign_est *x)
{
	x->status = CLOCKALIGN_NOT_ESTIMABLE;
	x->reason = "collective ends do not agree (captures of different "
	    "steps?)";
}

/* Observations a trend is looked for in: at least this many per half. */
#define CA_DRIFT_MIN	8

/*
 * A clock that drifts against the reference: its n observations v (at
 * reference times tm) move over the capture.  The medians of its first
 * and second half in time differ by more than their two intervals and
 * twice the floor: then the drift is their difference over the time
 * between the halves, the offset (at the median time, mid_ns) is the
 * median of the detrended observations, and the uncertainty is the
 * detrended one plus what the drift's own error (the halves' intervals
 * over the time between them) makes out to the first or last
 * collective.  Fills *x (drift_ppb, mid_ns, uncertainty_ns, matched),
 * *off and *iqr (of the detrended values) and returns true; false
 * (nothing changed) when no trend stands out.  tv and tmp are scratch of
 * n entries.
 */
static bool
ca_drift(const int64_t *v, const int64_t *tm, size_t n, struct ca_av *tv,
    int64_t *tmp, struct clockalign_est *x, int64_t *off, int64_t *iqr)
{
	size_t h = n / 2;
	int64_t m[2], t[2], ci[2], tmid, tlo, thi, reach;
	double slope;

	if (h < CA_DRIFT_MIN)
		return false;
	for (size_t i = 0; i < n; i++) {
		tv[i].v = tm[i];
		tv[i].unit = (uint32_t)i;
	}
	qsort(tv, n, sizeof(*tv), ca_stat_cmp_av);
	for (int k = 0; k < 2; k++) {
		const struct ca_av *p = tv + (k ? n - h : 0);

		for (size_t i = 0; i < h; i++)
			tmp[i] = v[p[i].unit];
		ca_stat_order(tmp, h);
		m[k] = ca_stat_median_sorted(tmp, h);
		ci[k] = ca_stat_ci(tmp, h, m[k]);
		t[k] = p[h / 2].v;
	}
	if (t[1] <= t[0] || llabs(m[1] - m[0]) <= ci[0] + ci[1] +
	    2 * CLOCKALIGN_FLOOR_NS)
		return false;
	slope = (double)(m[1] - m[0]) / (double)(t[1] - t[0]);
	tlo = tv[0].v;
	thi = tv[n - 1].v;
	tmid = tv[n / 2].v;
	for (size_t i = 0; i < n; i++)
		tmp[i] = v[i] - (int64_t)llround(slope * (double)(tm[i] - tmid));
	ca_stat_order(tmp, n);
	*off = ca_stat_median_sorted(tmp, n);
	*iqr = (tmp[(3 * n) / 4] - tmp[n / 4]) / 2;
	reach = (int64_t)llround((double)(ci[0] + ci[1]) /
	    (double)(t[1] - t[0]) * (double)(thi - tmid > tmid - tlo ?
	    thi - tmid : tmid - tlo));
	x->uncertainty_ns = ca_stat_ci(tmp, n, *off);
	if (x->uncertainty_ns < *iqr)
		x->uncertainty_ns = *iqr;
	x->uncertainty_ns += reach;
	x->drift_ppb = (int64_t)llround(slope * 1e9);
	x->mid_ns = (uint64_t)tmid;
	x->matched = (uint32_t)n;
	return true;
}

/*
 * Solves for nunits offsets from ne entries sorted by instance, ref the
 * reference unit.  Fills est[nunits] (via: the unit each was placed
 * through).
 * Returns 0 or -ENOMEM.
 */
static int
ca_solve(const struct ca_ent *e, size_t ne, uint32_t ninst, uint32_t nunits,
    uint32_t ref, struct clockalign_est *est)
{
	size_t *ioff = calloc((size_t)ninst + 1, sizeof(*ioff));
	size_t *uoff = calloc((size_t)nunits + 1, sizeof(*uoff));
	size_t *ufill = calloc((size_t)nunits, sizeof(*ufill));
	uint32_t *uf = calloc((size_t)nunits, sizeof(*uf));
	int64_t *o = calloc((size_t)nunits, sizeof(*o));
	int64_t *onew = calloc((size_t)nunits, sizeof(*onew));
	int64_t *d = calloc(ne + 1, sizeof(*d));
	int64_t *spread = calloc((size_t)nunits, sizeof(*spread));
	struct ca_av *av = calloc(ne + 1, sizeof(*av));
	int64_t *tmp = calloc(ne + 1, sizeof(*tmp));
	int64_t *dtm = calloc(ne + 1, sizeof(*dtm));
	struct ca_av *tv = calloc(ne + 1, sizeof(*tv));
	int *level = malloc(((size_t)nunits + 1) * sizeof(*level));
	int64_t *iq = calloc((size_t)nunits + 1, sizeof(*iq));
	int rc = -ENOMEM, maxlevel = 0, rounds = 0;

	if (ioff == NULL || uoff == NULL || ufill == NULL || uf == NULL ||
	    o == NULL || onew == NULL || d == NULL || spread == NULL ||
	    av == NULL || tmp == NULL || dtm == NULL || tv == NULL ||
	    level == NULL || iq == NULL)
		goto out;
	for (uint32_t u = 0; u < nunits; u++)
		level[u] = -1;
	for (size_t i = 0; i < ne; i++)
		ioff[e[i].inst + 1]++;
	for (uint32_t c = 0; c < ninst; c++)
		ioff[c + 1] += ioff[c];
	for (uint32_t u = 0; u < nunits; u++)
		uf[u] = u;
	/* Matched instances (two units or more) link their units and count
	 * toward each unit's observations. */
	for (uint32_t c = 0; c < ninst; c++) {
		size_t a = ioff[c], b = ioff[c + 1];

		if (b - a < 2)
			continue;
		for (size_t i = a; i < b; i++) {
			uint32_t x = ca_find(uf, e[a].unit),
			    y = ca_find(uf, e[i].unit);

			uf[y] = x;
			uoff[e[i].unit + 1]++;
		}
	}
	for (uint32_t u = 0; u < nunits; u++)
		uoff[u + 1] += uoff[u];
	/* The typical spread of a unit's own ranks' ends in a collective. */
	for (uint32_t c = 0; c < ninst; c++)
		if (ioff[c + 1] - ioff[c] >= 2)
			for (size_t i = ioff[c]; i < ioff[c + 1]; i++)
				d[uoff[e[i].unit] + ufill[e[i].unit]++] =
				    e[i].spread;
	for (uint32_t u = 0; u < nunits; u++)
		if (ufill[u] > 0)
			spread[u] = ca_stat_median(d + uoff[u], ufill[u]);
	for (uint32_t u = 0; u < nunits; u++) {
		struct clockalign_est *x = &est[u];
		size_t m = uoff[u + 1] - uoff[u];

		memset(x, 0, sizeof(*x));
		x->bound_lo_ns = INT64_MIN;
		x->bound_hi_ns = INT64_MAX;
		x->matched = (uint32_t)m;
		x->via = u;
		if (u == ref) {
			/* Its own clock is the reference, shared or not. */
			x->status = CLOCKALIGN_REFERENCE;
			continue;
		}
		x->status = CLOCKALIGN_NOT_ESTIMABLE;
		if (m == 0)
			x->reason = "no collective shared with another clock";
		else if (uoff[ref + 1] == uoff[ref] ||
		    ca_find(uf, u) != ca_find(uf, ref))
			x->reason = "no chain of collectives to the reference "
			    "clock";
		else if (m < CLOCKALIGN_MIN_MATCHED)
			x->reason = "too few collectives matched";
		else
			x->status = CLOCKALIGN_ESTIMATED;
	}
	if (uoff[ref + 1] == uoff[ref]) {
		rc = 0;		/* nothing to align to */
		goto out;
	}
	/* Start from the reference outward: a unit's first offset is the
	 * median over its instances of the already-placed units' median
	 * aligned end minus its own, and it is linked through the placed
	 * unit nearest the reference.  Starting there keeps the refinement
	 * below from settling on a consensus of the others that is not the
	 * reference's clock. */
	level[ref] = 0;
	for (int pass = 1;; pass++) {
		int placed = 0;

		memset(ufill, 0, (size_t)nunits * sizeof(*ufill));
		for (uint32_t c = 0; c < ninst; c++) {
			size_t a = ioff[c], b = ioff[c + 1], k = 0;
			uint32_t kv = UINT32_MAX;
			int64_t med;

			if (b - a < 2)
				continue;
			for (size_t i = a; i < b; i++) {
				uint32_t v = e[i].unit;

				if (level[v] < 0 || level[v] >= pass)
					continue;
				tmp[k++] = e[i].end + o[v];
				if (kv == UINT32_MAX || level[v] < level[kv])
					kv = v;
			}
			if (k == 0)
				continue;
			med = ca_stat_median(tmp, k);
			for (size_t i = a; i < b; i++) {
				uint32_t u = e[i].unit;

				if (level[u] >= 0 || est[u].status ==
				    CLOCKALIGN_NOT_ESTIMABLE)
					continue;
				d[uoff[u] + ufill[u]++] = med - e[i].end;
				if (est[u].via == u ||
				    level[kv] < level[est[u].via])
					est[u].via = kv;
			}
		}
		for (uint32_t u = 0; u < nunits; u++) {
			if (level[u] >= 0 || ufill[u] == 0)
				continue;
			o[u] = ca_stat_median(d + uoff[u], ufill[u]);
			level[u] = pass;
			placed++;
		}
		if (placed == 0)
			break;
		maxlevel = pass;
	}
	for (uint32_t u = 0; u < nunits; u++)
		if (level[u] < 0 && est[u].status == CLOCKALIGN_ESTIMATED) {
			/* Linked only through a unit that is not. */
			est[u].status = CLOCKALIGN_NOT_ESTIMABLE;
			est[u].reason = "no chain of collectives to the "
			    "reference clock";
		}
	/* Refine: observations from the current offsets (the others'
	 * median aligned end, leaving the unit out), new offsets their
	 * medians; the reference stays at 0.  A unit found not to agree
	 * at the end is left out and the rest refined again. */
again:
	for (int it = 0; it <= CA_MAX_ITER; it++) {
		int64_t moved = 0;
		bool last = it == CA_MAX_ITER;

		memset(ufill, 0, (size_t)nunits * sizeof(*ufill));
		for (uint32_t c = 0; c < ninst; c++) {
			size_t a = ioff[c], b = ioff[c + 1], k = 0;

			if (b - a < 2)
				continue;
			for (size_t i = a; i < b; i++) {
				if (est[e[i].unit].status ==
				    CLOCKALIGN_NOT_ESTIMABLE)
					continue;
				av[k].v = e[i].end + o[e[i].unit];
				av[k++].unit = e[i].unit;
			}
			if (k < 2)
				continue;
			ca_stat_loo(av, k, tmp);
			for (size_t p = 0; p < k; p++) {
				int64_t t = tmp[p];
				uint32_t u = av[p].unit;

				dtm[uoff[u] + ufill[u]] = t;
				d[uoff[u] + ufill[u]++] = t - (av[p].v - o[u]);
			}
		}
		for (uint32_t u = 0; u < nunits; u++) {
			int64_t *v = d + uoff[u], iqr;
			size_t n = ufill[u];

			if (est[u].status == CLOCKALIGN_NOT_ESTIMABLE ||
			    n == 0) {
				onew[u] = 0;
				continue;
			}
			if (last && u != ref &&
			    ca_drift(v, dtm + uoff[u], n, tv, tmp, &est[u],
			    &onew[u], &iq[u]))
				continue;
			if (!last) {
				/* Only the median: no need to sort. */
				onew[u] = ca_stat_median(v, n);
				continue;
			}
			ca_stat_order(v, n);
			onew[u] = ca_stat_median_sorted(v, n);
			{
				est[u].drift_ppb = 0;
				est[u].mid_ns = 0;
				est[u].uncertainty_ns = ca_stat_ci(v, n,
				    onew[u]);
				est[u].matched = (uint32_t)n;
				/* Half the interquartile range: what one
				 * collective's ends disagree by, a floor for
				 * biases the interval cannot see. */
				iqr = (v[(3 * n) / 4] - v[n / 4]) / 2;
				if (est[u].uncertainty_ns < iqr)
					est[u].uncertainty_ns = iqr;
				iq[u] = iqr;
			}
		}
		if (last) {
			for (uint32_t u = 0; u < nunits; u++)
				est[u].offset_ns = u == ref ? 0 : onew[u];
			break;
		}
		for (uint32_t u = 0; u < nunits; u++) {
			int64_t nv = onew[u], dd = nv - o[u];

			if (est[u].status == CLOCKALIGN_NOT_ESTIMABLE ||
			    u == ref)
				continue;
			if (dd < 0)
				dd = -dd;
			if (dd > moved)
				moved = dd;
			o[u] = nv;
		}
		if (moved <= CA_SETTLED_NS)
			it = CA_MAX_ITER - 1;	/* one more pass: the result */
	}
	/* Ends that disagree by far more than any transit are not one
	 * collective's: the captures hold different steps.  The worst such
	 * unit is left out (it spoils the others' observations too) and the
	 * rest refined again; after 16 rounds all that remain go at once. */
	{
		uint32_t worst = UINT32_MAX;

		for (uint32_t u = 0; u < nunits; u++) {
			if (u == ref || est[u].status ==
			    CLOCKALIGN_NOT_ESTIMABLE ||
			    iq[u] <= CLOCKALIGN_MAX_SPREAD_NS)
				continue;
			if (rounds >= 16 || worst == UINT32_MAX ||
			    iq[u] > iq[worst]) {
				if (rounds >= 16)
					ca_disagree(&est[u]);
				worst = u;
			}
		}
		if (worst != UINT32_MAX && rounds < 16) {
			ca_disagree(&est[worst]);
			rounds++;
			goto again;
		}
	}
	/* Causality against the reference, instance by instance. */
	for (uint32_t c = 0; c < ninst; c++) {
		const struct ca_ent *er = NULL;

		for (size_t i = ioff[c]; i < ioff[c + 1]; i++)
			if (e[i].unit == ref)
				er = &e[i];
		if (er == NULL)
			continue;
		for (size_t i = ioff[c]; i < ioff[c + 1]; i++) {
			struct clockalign_est *x = &est[e[i].unit];
			/* A drifting clock's bounds hold at this instance:
			 * moved to its middle offset. */
			int64_t dm = clockalign_at(x, (uint64_t)er->emin) -
			    x->offset_ns;

			if (e[i].unit == ref)
				continue;
			if (er->smax - e[i].emin - dm > x->bound_lo_ns)
				x->bound_lo_ns = er->smax - e[i].emin - dm;
			if (er->emin - e[i].smax - dm < x->bound_hi_ns)
				x->bound_hi_ns = er->emin - e[i].smax - dm;
		}
	}
	for (uint32_t u = 0; u < nunits; u++) {
		struct clockalign_est *x = &est[u];

		if (x->status == CLOCKALIGN_NOT_ESTIMABLE)
			continue;
		if (u == ref) {
			x->offset_ns = 0;
			x->uncertainty_ns = 0;
			x->bound_lo_ns = x->bound_hi_ns = 0;
			continue;
		}
		/* How well "ends together" holds inside one clock bounds
		 * how well it holds between two. */
		if (x->uncertainty_ns < spread[u])
			x->uncertainty_ns = spread[u];
		if (x->uncertainty_ns < spread[ref])
			x->uncertainty_ns = spread[ref];
		if (x->uncertainty_ns < CLOCKALIGN_FLOOR_NS)
			x->uncertainty_ns = CLOCKALIGN_FLOOR_NS;
	}
	/* Linked through another unit: its uncertainty adds (in placing
	 * order, so the chain's whole length counts). */
	for (int lv = 2; lv <= maxlevel; lv++)
		for (uint32_t u = 0; u < nunits; u++)
			if (level[u] == lv && est[u].status ==
			    CLOCKALIGN_ESTIMATED && est[u].via != ref &&
			    est[u].via != u)
				est[u].uncertainty_ns +=
				    est[est[u].via].uncertainty_ns;
	for (uint32_t u = 0; u < nunits; u++) {
		struct clockalign_est *x = &est[u];
		int64_t lo, hi;

		if (x->status == CLOCKALIGN_NOT_ESTIMABLE || u == ref)
			continue;
		if (x->bound_lo_ns > x->bound_hi_ns)
			continue;	/* contradictory: noise, no bracket */
		/* Keep the interval inside the bracket, and the estimate
		 * inside the interval. */
		lo = x->offset_ns - x->uncertainty_ns;
		hi = x->offset_ns + x->uncertainty_ns;
		if (lo < x->bound_lo_ns)
			lo = x->bound_lo_ns;
		if (hi > x->bound_hi_ns)
			hi = x->bound_hi_ns;
		if (lo > hi)
			lo = hi = x->offset_ns < x->bound_lo_ns ?
			    x->bound_lo_ns : x->bound_hi_ns;
		if (x->offset_ns < lo)
			x->offset_ns = lo;
		if (x->offset_ns > hi)
			x->offset_ns = hi;
		x->uncertainty_ns = x->offset_ns - lo > hi - x->offset_ns ?
		    x->offset_ns - lo : hi - x->offset_ns;
		if (x->uncertainty_ns < 1)
			x->uncertainty_ns = 1;
	}
	rc = 0;
out:
	free(ioff);
	free(uoff);
	free(ufill);
	free(uf);
	free(o);
	free(onew);
	free(d);
	free(spread);
	free(av);
	free(tmp);
	free(dtm);
	free(tv);
	free(level);
	free(iq);
	return rc;
}

/*
 * Entries per (instance, host) (byrank false) or (instance, rank) from the
 * sorted samples; units are host indexes or rank slots (rix maps a rank
 * to its slot).  Returns the count, *ninst the instances.
 */
static size_t
ca_entries(const struct clockalign_sample *s, size_t n, bool byrank,
    const struct clockalign_rank *ranks, size_t nranks, struct ca_ent *e,
    int64_t *tmp, uint32_t *ninst)
{
	size_t ne = 0, i = 0;
	uint32_t inst = 0;

	while (i < n) {
		size_t j = i;

		while (j < n && s[j].comm == s[i].comm && s[j].seq == s[i].seq)
			j++;
		for (size_t a = i; a < j;) {
			size_t b = a, k = 0;
			uint32_t unit;
			struct ca_ent *x = &e[ne];

			if (byrank) {
				struct clockalign_rank key = { .rank =
				    s[a].rank };
				const struct clockalign_rank *r = bsearch(&key,
				    ranks, nranks, sizeof(*ranks), ca_cmp_rank);

				unit = (uint32_t)(r - ranks);
				/* A rank twice in one instance: its first. */
				b = a + 1;
				while (b < j && s[b].rank == s[a].rank)
					b++;
				x->end = (int64_t)s[a].end_ns;
				x->smax = (int64_t)s[a].start_ns;
				x->emin = x->end;
				x->spread = 0;
			} else {
				unit = s[a].host;
				while (b < j && s[b].host == s[a].host)
					b++;
				x->smax = INT64_MIN;
				x->emin = INT64_MAX;
				for (size_t q = a; q < b; q++) {
					/* Each rank once. */
					if (q > a && s[q].rank == s[q - 1].rank)
						continue;
					tmp[k++] = (int64_t)s[q].end_ns;
					if ((int64_t)s[q].start_ns > x->smax)
						x->smax = (int64_t)s[q].start_ns;
					if ((int64_t)s[q].end_ns < x->emin)
						x->emin = (int64_t)s[q].end_ns;
				}
				ca_stat_sort_i64(tmp, k);
				x->end = ca_stat_median_sorted(tmp, k);
				x->spread = tmp[k - 1] - tmp[0];
			}
			x->inst = inst;
			x->unit = unit;
			ne++;
			a = b;
		}
		inst++;
		i = j;
	}
	*ninst = inst;
	return ne;
}

int
clockalign_estimate(const struct clockalign_sample *in, size_t n,
    uint32_t nhosts, int reference, struct clockalign *out)
{
	struct clockalign_sample *s = NULL;
	struct ca_ent *e = NULL;
	struct clockalign_est *rest = NULL;
	int64_t *tmp = NULL;
	uint32_t ninst, ref, rref;
	size_t ne, nr = 0, m = 0;
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	out->nhosts = nhosts;
	out->reference = reference >= 0 ? (uint32_t)reference : 0;
	if (nhosts == 0)
		return 0;
	out->host = calloc(nhosts, sizeof(*out->host));
	out->host_split = calloc(nhosts, sizeof(*out->host_split));
	if (out->host == NULL || out->host_split == NULL)
		goto fail;
	for (uint32_t h = 0; h < nhosts; h++) {
		out->host[h].status = CLOCKALIGN_NOT_ESTIMABLE;
		out->host[h].reason = "no collectives";
		out->host[h].bound_lo_ns = INT64_MIN;
		out->host[h].bound_hi_ns = INT64_MAX;
		out->host[h].via = h;
	}
	s = malloc((n + 1) * sizeof(*s));
	e = malloc((n + 1) * sizeof(*e));
	tmp = malloc((n + 1) * sizeof(*tmp));
	if (s == NULL || e == NULL || tmp == NULL)
		goto fail;
	/* Samples of hosts out of range, or with end before start, are
	 * bad input: left out. */
	for (size_t i = 0; i < n; i++)
		if (in[i].host < nhosts && in[i].end_ns >= in[i].start_ns &&
		    in[i].end_ns <= INT64_MAX)
			s[m++] = in[i];
	out->nsamples = m;
	ca_sample_sort(s, m, ca_sample_cmp);
	/* The ranks, each on one host. */
	{
		ptrdiff_t k = ca_rank_pairs(s, m, &out->ranks);

		if (k < 0)
			goto fail;
		nr = (size_t)k;
	}
	{
		size_t w = 0;

		for (size_t i = 0; i < nr; i++)
			if (w == 0 || out->ranks[w - 1].rank !=
			    out->ranks[i].rank)
				out->ranks[w++] = out->ranks[i];
		nr = w;
	}
	out->nranks = nr;
	if (nr == 0) {
		free(s);
		free(e);
		free(tmp);
		return 0;
	}
	/* Per rank first: the lowest rank that shares a collective is the
	 * rank-level reference, and its host the default reference host. */
	ne = ca_entries(s, m, true, out->ranks, nr, e, tmp, &ninst);
	{
		unsigned char *shared = calloc(nr, 1);

		if (shared == NULL)
			goto fail;
		for (size_t i = 0; i + 1 < ne; i++)
			if (e[i].inst == e[i + 1].inst)
				shared[e[i].unit] = shared[e[i + 1].unit] = 1;
		rref = 0;
		if (reference >= 0) {
			for (size_t i = 0; i < nr; i++)
				if (out->ranks[i].host == (uint32_t)reference &&
				    shared[i]) {
					rref = (uint32_t)i;
					break;
				}
		} else
			for (size_t i = 0; i < nr; i++)
				if (shared[i]) {
					rref = (uint32_t)i;
					break;
				}
		free(shared);
	}
	ref = reference >= 0 ? (uint32_t)reference : out->ranks[rref].host;
	out->reference = ref;
	ca_sample_repair(s, m, out->ranks[rref].rank, tmp);
	ne = ca_entries(s, m, true, out->ranks, nr, e, tmp, &ninst);
	rest = calloc(nr, sizeof(*rest));
	if (rest == NULL)
		goto fail;
	if ((rc = ca_solve(e, ne, ninst, (uint32_t)nr, rref, rest)) != 0)
		goto fail;
	ne = ca_entries(s, m, false, NULL, 0, e, tmp, &ninst);
	if ((rc = ca_solve(e, ne, ninst, nhosts, ref, out->host)) != 0)
		goto fail;
	rc = -ENOMEM;
	/* A host none of whose ranks has a sample keeps "no collectives". */
	for (uint32_t h = 0; h < nhosts; h++) {
		bool any = false;

		for (size_t i = 0; i < nr; i++)
			any |= out->ranks[i].host == h;
		if (!any) {
			out->host[h].status = CLOCKALIGN_NOT_ESTIMABLE;
			out->host[h].reason = "no collectives";
		}
	}
	/* The ranks of a host should share its offset; where two are
	 * apart by more than their uncertainties, the host's clock is not
	 * one (a per-process skew) and its ranks get their own. */
	for (size_t i = 0; i < nr; i++) {
		struct clockalign_rank *r = &out->ranks[i];

		r->est = rest[i];
		if (r->est.status == CLOCKALIGN_NOT_ESTIMABLE)
			continue;
		for (size_t j = 0; j < i; j++) {
			const struct clockalign_rank *q = &out->ranks[j];

			if (q->host != r->host ||
			    q->est.status == CLOCKALIGN_NOT_ESTIMABLE)
				continue;
			if (llabs(r->est.offset_ns - q->est.offset_ns) >
			    3 * (r->est.uncertainty_ns +
			    q->est.uncertainty_ns) + CLOCKALIGN_SPLIT_NS)
				out->host_split[r->host] = 1;
		}
	}
	for (size_t i = 0; i < nr; i++) {
		struct clockalign_rank *r = &out->ranks[i];
		const struct clockalign_est *h = &out->host[r->host];
		bool own = out->host_split[r->host] || out->host_split[ref] ||
		    h->status == CLOCKALIGN_NOT_ESTIMABLE;

		if (own && r->est.status != CLOCKALIGN_NOT_ESTIMABLE) {
			r->applied = 1;
			r->own = 1;
			r->applied_ns = r->est.offset_ns;
			r->applied_unc_ns = r->est.uncertainty_ns;
		} else if (!own) {
			r->applied = 1;
			r->applied_ns = h->offset_ns;
			r->applied_unc_ns = h->uncertainty_ns;
		}
	}
	free(rest);
	free(s);
	free(e);
	free(tmp);
	return 0;
fail:
	free(rest);
	free(s);
	free(e);
	free(tmp);
	clockalign_free(out);
	return rc;
}

void
clockalign_free(struct clockalign *ca)
{
	free(ca->host);
	free(ca->host_split);
	free(ca->ranks);
	memset(ca, 0, sizeof(*ca));
}

const struct clockalign_rank *
clockalign_rank(const struct clockalign *ca, uint32_t rank)
{
	struct clockalign_rank key = { .rank = rank };

	if (ca->nranks == 0)
		return NULL;
	return bsearch(&key, ca->ranks, ca->nranks, sizeof(*ca->ranks),
	    ca_cmp_rank);
}

const char *
clockalign_status_name(enum clockalign_status s)
{
	switch (s) {
	case CLOCKALIGN_REFERENCE:
		return "reference";
	case CLOCKALIGN_ESTIMATED:
		return "estimated";
	case CLOCKALIGN_NOT_ESTIMABLE:
		return "not estimable";
	}
	return "?";
}

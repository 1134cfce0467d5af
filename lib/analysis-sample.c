/*
 * Each rank's collectives before the cross-rank work (analysis-steps.c):
 * their key on the communicator, which pairs one instance across ranks,
 * and, past the caps a report sets (analysis_opts.step_cap, .coll_cap),
 * the sample of steps and collectives that the analysis keeps.
 *
 * The sample is of whole steps: a rank over a cap keeps the steps whose
 * index is a multiple of a power of two S (the least that brings its
 * steps under step_cap and the collectives inside them under coll_cap),
 * with every collective and data-loading range inside them.  So a kept
 * step's figures (wait and transit included: every rank keeps the same
 * steps, so each instance in it meets its peers) are exact, and the step
 * tables, averages and verdict are those of a sample of steps.  Outside
 * every step (a rank that marks none, or before its first), collectives
 * are sampled by key at S', the least power of two that brings them under
 * a share of coll_cap, so an instance kept on one rank is kept on all.
 * The analysis takes the largest S and S' of its ranks, and each kept
 * collective counts S or S' times in the sums over collectives (an_coll.w).
 *
 * A partial result (analysis-partial.c) carries each rank's sample at its
 * own S and S', with the keys, so it stays bounded whatever the capture's
 * length.  The multiples of a larger power of two are among a smaller
 * one's, so sampling merged partials again at the analysis's S and S'
 * keeps what sampling the whole keeps: a distributed report equals the
 * central one.
 */
#include "config.h"

#include <sys/types.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"

/* Sequence numbers that count from the capture's first instance (the
 * records carried none) are kept apart from the records' own. */
#define SA_ORDINAL	0x80000000u
#define SA_MAX		(1u << 30)	/* the largest stride */

static int
sa_cmp_start(const void *x, const void *y)
{
	const struct an_coll *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* Whether the collectives of p carry their seq (or did before a sample
 * of them was taken). */
static bool
sa_has_rseq(const struct an_proc *p)
{
	int w = p->ncoll[0] > 0 ? 0 : 1;

	if (p->seq_from == AN_SEQ_RECORDS)
		return true;
	for (size_t k = 0; k < p->ncoll[w]; k++)
		if (p->coll[w][k].rseq != 0)
			return true;
	return false;
}

/*
 * Collectives pair across ranks by their ordinal on the communicator.
 * Where the records carry their seq (counted from the communicator's
 * creation) that is the ordinal, and ranks whose captures began at
 * different collectives still pair right; the records without one
 * (send/recv) count apart, from each capture's first, in the top half so
 * they never meet a seq.  With no seq at all (older traces, msPTI
 * activity records) every ordinal counts from the capture's first
 * collective.  A rank whose keys a partial result brought keeps them; an
 * ordinal there gets the top bit when another input carried seqs.
 * Leaves p's collectives in start order.
 */
static void
sa_order(struct an_proc *p, bool abs)
{
	struct an_coll *cl;
	uint32_t *seq = NULL, *comms = NULL;
	size_t ncomms = 0, n;

	p->cw = p->ncoll[0] > 0 ? 0 : 1;
	cl = p->coll[p->cw];
	n = p->ncoll[p->cw];
	an_sort(cl, n, sizeof(*cl), sa_cmp_start);
	if (p->seq_from != AN_SEQ_NONE) {
		if (abs && p->seq_from == AN_SEQ_ORDINAL)
			for (size_t k = 0; k < n; k++)
				cl[k].seq |= SA_ORDINAL;
		p->seq_from = abs ? AN_SEQ_RECORDS : AN_SEQ_ORDINAL;
		return;
	}
	for (size_t k = 0; k < n; k++) {
		struct an_coll *c = &cl[k];
		size_t j;

		for (j = 0; j < ncomms && comms[j] != c->comm; j++)
			;
		if (j == ncomms) {
			comms = an_realloc(comms, (ncomms + 1) * sizeof(*comms));
			seq = an_realloc(seq, (ncomms + 1) * sizeof(*seq));
			comms[ncomms] = c->comm;
			seq[ncomms++] = 0;
		}
		if (abs && c->rseq != 0)
			c->seq = c->rseq;
		else
			c->seq = (abs ? SA_ORDINAL : 0) | seq[j]++;
	}
	free(comms);
	free(seq);
	p->seq_from = abs ? AN_SEQ_RECORDS : AN_SEQ_ORDINAL;
}

/* The least power of two S with n <= cap * S. */
static uint32_t
sa_stride(size_t n, size_t cap)
{
	uint32_t s = 1;

	while (s < SA_MAX && n > cap * s)
		s *= 2;
	return s;
}

/* Step i of p's index: its own, else counted from the window's first
 * step (or from 1), as the breakdown numbers it. */
static int64_t
sa_step_index(const struct an_proc *p, size_t i)
{
	const struct an_step *st = &p->steps[i];

	return st->step >= 0 ? st->step : p->step_base >= 0 ?
	    p->step_base + (int64_t)i : (int64_t)i + 1;
}

/* The step of p (in start order, disjoint) that time t falls in, from
 * *k on (times come in order); -1: none. */
static ssize_t
sa_step_at(const struct an_proc *p, size_t *k, uint64_t t)
{
	while (*k < p->nsteps && p->steps[*k].end <= t)
		(*k)++;
	return *k < p->nsteps && p->steps[*k].start <= t ? (ssize_t)*k : -1;
}

/*
 * The strides rank p asks for: s for its steps, o for its collectives
 * outside every step.  A rank sampled already (a partial's) keeps what it
 * was sampled at, which a later look at its sample would only lower.
 */
static void
sa_want(const struct analysis *a, const struct an_proc *p, uint32_t *s,
    uint32_t *o)
{
	const struct an_coll *cl = p->coll[p->cw];
	size_t n = p->ncoll[p->cw], in = 0, k = 0;

	*s = *o = 1;
	if (p->step_w != 0) {
		*s = p->step_w;
		for (size_t j = 0; j < n; j++)
			if (sa_step_at(p, &k, cl[j].start) < 0 && cl[j].w > *o)
				*o = cl[j].w;
		return;
	}
	if (a->o.coll_cap == 0 && a->o.step_cap == 0)
		return;
	for (size_t j = 0; j < n; j++)
		if (sa_step_at(p, &k, cl[j].start) >= 0)
			in++;
	if (a->o.step_cap != 0)
		*s = sa_stride(p->nsteps, a->o.step_cap);
	if (a->o.coll_cap != 0) {
		uint32_t c = sa_stride(in, a->o.coll_cap);

		if (c > *s)
			*s = c;
		/* Outside steps: a quarter of the cap beside steps. */
		*o = sa_stride(n - in, p->nsteps > 0 ? a->o.coll_cap / 4 :
		    a->o.coll_cap);
	}
}

/* Keeps p's steps whose index is a multiple of s (numbered), what lies
 * in them, and its collectives outside every step whose key is a
 * multiple of o; each kept collective counts s or o times. */
static void
sa_thin(struct an_proc *p, uint32_t s, uint32_t o)
{
	struct an_coll *cl = p->coll[p->cw];
	size_t n = p->ncoll[p->cw], m = 0, k = 0, md = 0;
	bool *keep = an_realloc(NULL, (p->nsteps + 1) * sizeof(*keep));

	if (p->step_w == 0) {
		p->step_w = 1;
		p->steps_seen = p->nsteps;
	}
	for (size_t i = 0; i < p->nsteps; i++)
		keep[i] = (uint64_t)sa_step_index(p, i) % s == 0;
	for (size_t j = 0; j < n; j++) {
		ssize_t i = sa_step_at(p, &k, cl[j].start);
		uint32_t w = i >= 0 ? s : o;

		if (i >= 0 ? !keep[i] :
		    ((cl[j].seq & ~SA_ORDINAL) & (o - 1)) != 0)
			continue;
		cl[m] = cl[j];
		cl[m++].w = w;
	}
	p->ncoll[p->cw] = m;
	if (s > p->step_w) {
		an_sort(p->data, p->ndata, sizeof(*p->data), an_cmp_ival);
		k = 0;
		for (size_t d = 0; d < p->ndata; d++) {
			uint64_t ds = p->data[d].start;
			uint64_t de = ds + p->data[d].dur;

			while (k < p->nsteps && p->steps[k].end <= ds)
				k++;
			/* A range is kept while it meets a kept step. */
			for (size_t q = k; q < p->nsteps &&
			    p->steps[q].start < de; q++)
				if (keep[q]) {
					p->data[md++] = p->data[d];
					break;
				}
		}
		p->ndata = md;
		m = 0;
		for (size_t i = 0; i < p->nsteps; i++) {
			if (!keep[i])
				continue;
			p->steps[m] = p->steps[i];
			p->steps[m++].step = sa_step_index(p, i);
		}
		p->nsteps = m;
		p->step_w = s;
	}
	free(keep);
}

void
an_sample(struct analysis *a, bool alike)
{
	bool abs = false;
	uint32_t s = 1, o = 1;

	for (size_t i = 0; i < a->nproc && !abs; i++)
		abs = sa_has_rseq(a->proc[i]);
	a->coll_abs = abs;
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];
		uint32_t ps, po;

		sa_order(p, abs);
		sa_want(a, p, &ps, &po);
		if (!alike)
			sa_thin(p, ps, po);	/* each rank at its own */
		if (ps > s)
			s = ps;
		if (po > o)
			o = po;
	}
	if (!alike)
		return;
	for (size_t i = 0; i < a->nproc; i++)
		sa_thin(a->proc[i], s, o);
	if (s > 1)
		an_warn(a, "steps sampled (a rank has over %zu steps or %zu "
		    "collectives in them): the step tables, averages, "
		    "wait and transit, the slow-rank verdict and the "
		    "communication tables come from the steps whose index is "
		    "a multiple of %" PRIu32 " (the same on every rank), each "
		    "counted %" PRIu32 " times; the ranks table counts every "
		    "step", a->o.step_cap, a->o.coll_cap, s, s);
	if (o > 1)
		an_warn(a, "collectives outside steps sampled: 1 in %" PRIu32
		    " instances of each communicator (the same on every rank), "
		    "each counted %" PRIu32 " times", o, o);
}

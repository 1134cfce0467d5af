/*
 * The step breakdown in bounded memory.  Device intervals of one rank go
 * through a reorder ring (they arrive roughly in start order: records are
 * written as work completes), are released in start order once they are
 * the source's reorder window (src->reorder_ns: 5 s, or what the trace
 * header promises) older than the newest start seen, and are swept into
 * unions per group (analysis-int.h).  A closed union segment is added to
 * the steps it overlaps as soon as those steps are known: no step marker
 * opened before its end is still open and the host records have moved
 * AN_HOST_WINDOW_NS past it.  Until then it waits in a pending queue.
 * Both queues have a hard cap; past it the oldest entry is processed
 * anyway.  That is exact while the input is in order: an interval that
 * then comes in earlier than one released is counted late, and a step
 * found after device time over it was attributed is counted forced; a
 * warning says the breakdown is approximate only when one of them is.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"

/* Groups fed by each class. */
static const unsigned sw_mask[] = {
	[AN_COMPUTE] = 1u << AN_G_COMP | 1u << AN_G_CC | 1u << AN_G_CH,
	[AN_COMM_C] = 1u << AN_G_COMMC | 1u << AN_G_CC,
	[AN_COMM_H] = 1u << AN_G_COMMH | 1u << AN_G_CH,
	[AN_MEMCPY] = 1u << AN_G_MEM,
};

static void *
sw_realloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL) {
		fputs("analysis: out of memory\n", stderr);
		abort();
	}
	return p;
}

/* The time up to which every step overlapping a segment is known. */
static uint64_t
sw_safe(const struct an_proc *p)
{
	uint64_t h = p->host_ts > AN_HOST_WINDOW_NS ?
	    p->host_ts - AN_HOST_WINDOW_NS : 0;

	return h < p->safe_static ? h : p->safe_static;
}

/* Adds segment [s, e) of the groups in gm to every step it overlaps.
 * Steps are sorted by start and do not overlap each other. */
static void
sw_attribute(struct an_proc *p, uint32_t gm, uint64_t s, uint64_t e)
{
	size_t n = p->nsteps, lo, hi, d = 1;
	uint32_t g = (uint32_t)__builtin_ctz(gm);

	/* The first step starting at or after e, searched outwards from
	 * the group's last answer: a group's segments come in about time
	 * order, so it is mostly there or a step or two on. */
	lo = p->step_hint[g] < n ? p->step_hint[g] : n;
	if (lo > 0 && p->steps[lo - 1].start >= e) {
		hi = lo - 1;	/* the answer is at most hi */
		for (;;) {
			if (hi < d) {
				lo = 0;
				break;
			}
			if (p->steps[hi - d].start < e) {
				lo = hi - d + 1;
				break;
			}
			hi -= d;
			d *= 2;
		}
	} else {
		for (;;) {	/* every step before lo starts before e */
			if (lo + d > n) {
				hi = n;
				break;
			}
			if (p->steps[lo + d - 1].start >= e) {
				hi = lo + d - 1;
				break;
			}
			lo += d;
			d *= 2;
		}
	}
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->steps[mid].start < e)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t m = gm; m != 0; m &= m - 1)
		p->step_hint[__builtin_ctz(m)] = lo;
	for (size_t j = lo; j-- > 0;) {
		struct an_step *st = &p->steps[j];
		uint64_t a = s > st->start ? s : st->start;
		uint64_t b = e < st->end ? e : st->end;

		if (st->end <= s)
			break;
		if (a < b) {
			for (uint32_t m = gm; m != 0; m &= m - 1)
				st->acc[__builtin_ctz(m)] += b - a;
			if (st->first == 0 || a < st->first)
				st->first = a;
		}
	}
}

static void
sw_drain(struct an_proc *p, bool force)
{
	uint64_t safe = sw_safe(p);

	while (p->pq_n > 0) {
		struct an_seg *q = &p->pq[p->pq_head];

		if (!force && q->e > safe)
			break;
		sw_attribute(p, q->gm, q->s, q->e);
		p->pq_head++;
		p->pq_n--;
	}
	if (p->pq_n == 0)
		p->pq_head = 0;
}

/* A union segment of the groups in gm closed. */
static void
sw_emit(struct analysis *a, struct an_proc *p, uint32_t gm, uint64_t s,
    uint64_t e)
{
	for (uint32_t m = gm; m != 0; m &= m - 1) {
		uint32_t g = (uint32_t)__builtin_ctz(m);

		p->whole[g] += e - s;
		if (p->gap_last[g] != 0 && s - p->gap_last[g] >
		    p->gap_max[g]) {
			p->gap_max[g] = s - p->gap_last[g];
			p->gap_from[g] = p->gap_last[g];
		}
		p->gap_last[g] = e;
		if (a->o.keep_segments && g < 3) {
			struct an_union *u = &p->seg[g];

			if (u->n == 0 || (u->n >= 64 &&
			    (u->n & (u->n - 1)) == 0)) {
				size_t c = u->n ? u->n * 2 : 64;

				u->s = sw_realloc(u->s, c * sizeof(uint64_t));
				u->e = sw_realloc(u->e, c * sizeof(uint64_t));
			}
			u->s[u->n] = s;
			u->e[u->n++] = e;
		}
	}
	if (p->pq_n == 0 && e <= sw_safe(p)) {
		sw_attribute(p, gm, s, e);
		return;
	}
	if (p->pq_n == AN_PENDING_MAX) {
		/* Exact unless a step over it is found later (counted in
		 * an_sweep_step). */
		if (p->pq[p->pq_head].e > p->forced_hi)
			p->forced_hi = p->pq[p->pq_head].e;
		sw_attribute(p, p->pq[p->pq_head].gm, p->pq[p->pq_head].s,
		    p->pq[p->pq_head].e);
		p->pq_head++;
		p->pq_n--;
	}
	if (p->pq_head + p->pq_n == p->pq_cap) {
		/* Compact only when that frees at least as much as it moves
		 * (amortized O(1) a push), else grow: at most 2 x
		 * AN_PENDING_MAX.  Moving a full queue for each push made a
		 * long step quadratic. */
		if (p->pq_head > 0 && p->pq_head >= p->pq_n) {
			memmove(p->pq, p->pq + p->pq_head,
			    p->pq_n * sizeof(*p->pq));
			p->pq_moved += p->pq_n;
			p->pq_head = 0;
		}
		if (p->pq_head + p->pq_n == p->pq_cap) {
			p->pq_cap = p->pq_cap ? p->pq_cap * 2 : 256;
			p->pq = sw_realloc(p->pq, p->pq_cap * sizeof(*p->pq));
		}
	}
	p->pq[p->pq_head + p->pq_n++] = (struct an_seg){ s, e, gm };
	sw_drain(p, false);
}

/* Closes the open segments of the groups in gm, those with the same
 * bounds as one (a kernel's compute, compute u COMMUNICATION and
 * compute u HCCL segments mostly are). */
static void
sw_close(struct analysis *a, struct an_proc *p, uint32_t gm)
{
	while (gm != 0) {
		uint32_t g = (uint32_t)__builtin_ctz(gm), same = 0;

		for (uint32_t m = gm; m != 0; m &= m - 1) {
			uint32_t h = (uint32_t)__builtin_ctz(m);

			if (p->sw_s[h] == p->sw_s[g] && p->sw_e[h] == p->sw_e[g])
				same |= 1u << h;
		}
		sw_emit(a, p, same, p->sw_s[g], p->sw_e[g]);
		gm &= ~same;
	}
}

/* Interval [s, e) into the segments of groups m (sw_release's way for
 * all but a kernel that extends or follows the compute segment). */
static __attribute__((noinline)) void
sw_release_groups(struct analysis *a, struct an_proc *p, uint32_t m,
    uint64_t s, uint64_t e)
{
	uint32_t open = 0, close = 0;

	for (; m != 0; m &= m - 1) {	/* its groups */
		uint32_t g = (uint32_t)__builtin_ctz(m);

		if (p->sw_e[g] != 0 && s <= p->sw_e[g]) {
			if (e > p->sw_e[g])
				p->sw_e[g] = e;
			continue;
		}
		if (p->sw_e[g] != 0)
			close |= 1u << g;
		open |= 1u << g;
	}
	if (close != 0)
		sw_close(a, p, close);
	for (; open != 0; open &= open - 1) {
		uint32_t g = (uint32_t)__builtin_ctz(open);

		p->sw_s[g] = s;
		p->sw_e[g] = e;
	}
}

/* One interval leaves the reorder ring, in start order.  Inline in
 * sw_pop: once an interval in and one out. */
static inline __attribute__((always_inline)) void
sw_release(struct analysis *a, struct an_proc *p, const struct an_ival *iv)
{
	uint64_t s = iv->start, e = s + iv->dur;
	uint32_t m = sw_mask[iv->cls];

	if (s < p->lo) {		/* beyond the reorder window */
		p->late++;
		if (e <= p->lo)
			return;
		s = p->lo;
	}
	p->lo = s;
	/* A kernel while no communication is open apart from the compute
	 * segment (its three groups' segments end together): one test for
	 * all three.  Overlapping or touching the segment, it extends them;
	 * after a gap, and when they also start together, they close as one
	 * segment and it opens them again. */
	if (iv->cls == AN_COMPUTE) {
		uint64_t x = p->sw_e[AN_G_COMP], x0 = p->sw_s[AN_G_COMP];

		if (x != 0 && x == p->sw_e[AN_G_CC] && x == p->sw_e[AN_G_CH]) {
			if (s <= x) {
				if (e > x)
					p->sw_e[AN_G_COMP] = p->sw_e[AN_G_CC] =
					    p->sw_e[AN_G_CH] = e;
				return;
			}
			if (x0 == p->sw_s[AN_G_CC] && x0 == p->sw_s[AN_G_CH]) {
				sw_emit(a, p, m, x0, x);
				p->sw_s[AN_G_COMP] = p->sw_s[AN_G_CC] =
				    p->sw_s[AN_G_CH] = s;
				p->sw_e[AN_G_COMP] = p->sw_e[AN_G_CC] =
				    p->sw_e[AN_G_CH] = e;
				return;
			}
		}
	}
	sw_release_groups(a, p, m, s, e);
}

/* Makes the ring contiguous from index 0 with capacity cap, sorted. */
static void
sw_linearize(struct an_proc *p, size_t cap, bool sort)
{
	struct an_ival *n = sw_realloc(NULL, cap * sizeof(*n));

	for (size_t i = 0; i < p->rb_n; i++)
		n[i] = p->rb[(p->rb_head + i) & (p->rb_cap - 1)];
	free(p->rb);
	p->rb = n;
	p->rb_cap = cap;
	p->rb_head = 0;
	if (sort && p->rb_unsorted) {
		an_sort(p->rb, p->rb_n, sizeof(*p->rb), an_cmp_ival);
		p->rb_unsorted = false;
		if (p->rb_n > 0)	/* order is checked against the tail */
			p->rb_last = p->rb[p->rb_n - 1].start;
	}
}

static inline __attribute__((always_inline)) void
sw_pop(struct analysis *a, struct an_proc *p)
{
	struct an_ival iv = p->rb[p->rb_head];

	p->rb_head = (p->rb_head + 1) & (p->rb_cap - 1);
	p->rb_n--;
	sw_release(a, p, &iv);
}

void
an_sweep_add(struct analysis *a, struct an_proc *p, uint64_t s, uint64_t e,
    enum an_cls cls)
{
	uint64_t d = e > s ? e - s : 0;
	struct an_ival *iv;

	if (d == 0)
		return;
	if (p->rb_n == p->rb_cap) {
		if (p->rb_cap < AN_REORDER_MAX)
			sw_linearize(p, p->rb_cap ? p->rb_cap * 2 : 1024,
			    false);
		else {
			/* The earliest goes now: exact unless a later
			 * interval starts before it (counted late). */
			if (p->rb_unsorted)
				sw_linearize(p, p->rb_cap, true);
			sw_pop(a, p);
		}
	}
	if (p->rb_n > 0 && s < p->rb_last)
		p->rb_unsorted = true;
	iv = &p->rb[(p->rb_head + p->rb_n++) & (p->rb_cap - 1)];
	iv->start = s;
	iv->dur = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
	iv->cls = cls;
	p->rb_last = s;
	if (s > p->rb_max)
		p->rb_max = s;
	if (p->rb_unsorted) {
		if (p->rb_n < p->rb_next_sort)
			return;
		sw_linearize(p, p->rb_cap, true);
		p->rb_next_sort = p->rb_n + 4096;
	}
	while (p->rb_n > 0 &&
	    p->rb[p->rb_head].start + p->src->reorder_ns < p->rb_max)
		sw_pop(a, p);
}

/* Recomputes the earliest start of an open step marker range. */
void
an_sweep_markers(struct analysis *a, struct an_proc *p)
{
	uint64_t safe = UINT64_MAX;

	for (size_t i = 0; i < p->nopen; i++)
		if (p->open[i].name == a->step_gid && p->open[i].ts < safe)
			safe = p->open[i].ts;
	/* STEP records arrive when their step ends: what follows the last
	 * one may belong to the next. */
	if (p->step_recs && p->nsteps > 0 &&
	    p->steps[p->nsteps - 1].end < safe)
		safe = p->steps[p->nsteps - 1].end;
	p->safe_static = safe;
	sw_drain(p, false);
}

/* A step became known: insert it in start order. */
void
an_sweep_step(struct analysis *a, struct an_proc *p, uint64_t s, uint64_t e,
    int64_t step)
{
	size_t i = p->nsteps;

	if (p->nsteps == p->csteps) {
		p->csteps = p->csteps ? p->csteps * 2 : 64;
		p->steps = sw_realloc(p->steps, p->csteps * sizeof(*p->steps));
	}
	while (i > 0 && p->steps[i - 1].start > s) {
		p->steps[i] = p->steps[i - 1];
		i--;
	}
	if (s < p->forced_hi)
		p->forced++;	/* may have missed device time of it */
	memset(&p->steps[i], 0, sizeof(p->steps[i]));
	p->steps[i].start = s;
	p->steps[i].end = e;
	p->steps[i].step = step;
	p->nsteps++;
	an_sweep_markers(a, p);
}

/* End of input: release, close and attribute everything. */
void
an_sweep_finish(struct analysis *a, struct an_proc *p)
{
	if (p->rb_unsorted)
		sw_linearize(p, p->rb_cap, true);
	while (p->rb_n > 0)
		sw_pop(a, p);
	{
		uint32_t gm = 0;

		for (uint32_t g = 0; g < AN_G_MAX; g++)
			if (p->sw_e[g] != 0)
				gm |= 1u << g;
		sw_close(a, p, gm);
		memset(p->sw_e, 0, sizeof(p->sw_e));
	}
	sw_drain(p, true);
	free(p->rb);
	p->rb = NULL;
	p->rb_cap = 0;
	free(p->pq);
	p->pq = NULL;
	p->pq_cap = 0;
	p->finished = true;
}

void
an_sweep_free(struct an_proc *p)
{
	free(p->rb);
	free(p->pq);
	free(p->data);
	for (int i = 0; i < 3; i++) {
		free(p->seg[i].s);
		free(p->seg[i].e);
		free(p->seg[i].pre);
	}
}

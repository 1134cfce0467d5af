/*
 * Cross-record analysis, run once after ingestion: completeness checks,
 * clock alignment across ranks (collective end times are a shared event),
 * matching of collective instances across ranks (wait/transit split and
 * slow-rank votes), interval unions and the per-step breakdown; then the
 * slow-rank verdict (analysis-verdict.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis-int.h"

static int
st_cmp_pcoll(const void *x, const void *y)
{
	const struct an_coll *a = *(struct an_coll *const *)x;
	const struct an_coll *b = *(struct an_coll *const *)y;

	return a->start < b->start ? -1 : a->start > b->start;
}

static int
st_cmp_coll_key(const void *x, const void *y)
{
	const struct an_coll *a = x, *b = y;

	if (a->comm != b->comm)
		return a->comm < b->comm ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void *
st_alloc(size_t n)
{
	void *p = calloc(n ? n : 1, 1);

	if (p == NULL)
		abort();
	return p;
}

/* Builds the union of n intervals (sorted here). */
static void
st_union(struct an_ival *iv, size_t niv, struct an_union *u)
{
	size_t n = 0;

	an_sort(iv, niv, sizeof(*iv), an_cmp_ival);
	u->s = st_alloc((niv + 1) * sizeof(uint64_t));
	u->e = st_alloc((niv + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < niv; i++) {
		uint64_t s = iv[i].start, e = s + iv[i].dur;

		if (e <= s)
			continue;
		if (n > 0 && s <= u->e[n - 1]) {
			if (e > u->e[n - 1])
				u->e[n - 1] = e;
			continue;
		}
		u->s[n] = s;
		u->e[n] = e;
		n++;
	}
	u->n = n;
	u->pre = st_alloc((n + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++)
		u->pre[i + 1] = u->pre[i] + (u->e[i] - u->s[i]);
}

/* Moves the swept segments of group g (sorted, disjoint) into u, with
 * prefix sums. */
static void
st_take(struct an_union *from, struct an_union *u)
{
	*u = *from;
	memset(from, 0, sizeof(*from));
	u->pre = st_alloc((u->n + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < u->n; i++)
		u->pre[i + 1] = u->pre[i] + (u->e[i] - u->s[i]);
}

/* Covered length of u before t. */
static uint64_t
st_cover(const struct an_union *u, uint64_t t)
{
	size_t lo = 0, hi = u->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (u->e[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < u->n && t > u->s[lo])
		return u->pre[lo] + (t - u->s[lo]);
	return u->pre[lo];
}

/* Covered length of u within [a, b). */
uint64_t
an_union_measure(const struct an_union *u, uint64_t a, uint64_t b)
{
	if (b <= a || u->n == 0)
		return 0;
	return st_cover(u, b) - st_cover(u, a);
}

static void
st_union_free(struct an_union *u)
{
	free(u->s);
	free(u->e);
	free(u->pre);
	memset(u, 0, sizeof(*u));
}

/* Every stored time of p onto the reference timeline. */
static void
st_shift(struct an_proc *p, const struct an_clk *c)
{
#define ST_MOVE(x)	((x) = an_clk_ts(c, (x)))
	for (size_t i = 0; i < p->ndata; i++)
		ST_MOVE(p->data[i].start);
	for (int g = 0; g < AN_G_MAX; g++)
		if (p->gap_from[g])
			ST_MOVE(p->gap_from[g]);
	for (int g = 0; g < 3; g++)
		for (size_t i = 0; i < p->seg[g].n; i++) {
			ST_MOVE(p->seg[g].s[i]);
			ST_MOVE(p->seg[g].e[i]);
		}
	for (size_t i = 0; i < p->ncoll[p->cw]; i++) {
		ST_MOVE(p->coll[p->cw][i].start);
		ST_MOVE(p->coll[p->cw][i].end);
	}
	for (size_t i = 0; i < p->nsteps; i++) {
		ST_MOVE(p->steps[i].start);
		ST_MOVE(p->steps[i].end);
		if (p->steps[i].first)
			ST_MOVE(p->steps[i].first);
	}
	if (p->first_ts)
		ST_MOVE(p->first_ts);
	if (p->last_ts)
		ST_MOVE(p->last_ts);
#undef ST_MOVE
	p->clk = *c;
}

/* Loud completeness checks: losses, truncation, missing ranks. */
static void
st_check(struct analysis *a)
{
	int ws = a->o.world_size, maxrank = -1;
	unsigned char *seen;

	for (size_t i = 0; i < a->nsrc; i++) {
		struct analysis_source *s = a->src[i];
		uint64_t lost = 0;

		for (int j = 0; j < LOSS_STAGE_MAX; j++) {
			uint64_t n = s->losses[j] ? s->losses[j] :
			    s->loss_records[j];

			if (n == 0)
				continue;
			lost += n;
			if (j == LOSS_DEVICE_UNMATCHED)
				an_warn(a, "%s: %" PRIu64 " launches have no "
				    "device timing (device_unmatched: their "
				    "device tasks never reached the daemon): "
				    "kernel, step and launch figures miss "
				    "them", s->name, n);
			else
				an_warn(a, "%s: %" PRIu64 " records lost at %s",
				    s->name, n,
				    record_loss_stage_name((unsigned)j));
		}
		if (s->truncated)
			an_warn(a, "%s: truncated trace (no footer): the "
			    "capture was cut short, results are partial",
			    s->name);
		if (s->corrupt)
			an_warn(a, "%s: %" PRIu64 " corrupt chunks skipped",
			    s->name, s->corrupt);
		if (lost || s->truncated || s->corrupt)
			a->partial = true;
	}
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];

		if (p->open_evicted)
			an_warn(a, "rank %d (pid %u): %" PRIu64 " MSTX ranges "
			    "were still open when %u more opened: their ENDs "
			    "were not paired", p->rank, p->pid,
			    p->open_evicted, AN_OPEN_MAX);
		if (p->late || p->forced)
			an_warn(a, "rank %d (pid %u): %" PRIu64 " device "
			    "intervals out of order beyond the %.1f s reorder "
			    "window, %" PRIu64 " steps found after the memory "
			    "cap attributed device time over them: the step "
			    "breakdown is approximate", p->rank, p->pid,
			    p->late, (double)p->src->reorder_ns / 1e9,
			    p->forced);
	}
	for (size_t i = 0; i < a->nproc; i++) {
		if (ws <= 0 && a->proc[i]->world_size > 0)
			ws = a->proc[i]->world_size;
		if (a->proc[i]->world_size > ws && a->o.world_size <= 0)
			ws = a->proc[i]->world_size;
		if (a->proc[i]->rank > maxrank)
			maxrank = a->proc[i]->rank;
	}
	if (ws <= 0)
		ws = maxrank + 1;
	a->world_size = ws;
	if (ws <= 0)
		return;
	seen = st_alloc((size_t)ws + (size_t)maxrank + 2);
	for (size_t i = 0; i < a->nproc; i++) {
		int r = a->proc[i]->rank;

		if (r < 0)
			continue;
		if (r >= ws) {
			an_warn(a, "rank %d is outside the world size %d", r, ws);
			continue;
		}
		if (seen[r])
			an_warn(a, "rank %d appears in more than one process",
			    r);
		seen[r] = 1;
	}
	{
		char buf[512];
		size_t off = 0;
		int missing = 0;

		buf[0] = '\0';
		for (int r = 0; r < ws; r++) {
			if (seen[r])
				continue;
			missing++;
			if (off < sizeof(buf) - 16)
				off += (size_t)snprintf(buf + off,
				    sizeof(buf) - off, "%s%d", missing > 1 ?
				    "," : "", r);
		}
		if (missing) {
			an_warn(a, "MISSING RANKS: %d of %d ranks have no "
			    "trace (rank %s); cross-rank results are partial",
			    missing, ws, buf);
			a->partial = true;
		}
	}
	free(seen);
}

/* Order procs by rank (unknown ranks last, by pid). */
static int
st_cmp_proc(const void *x, const void *y)
{
	const struct an_proc *a = *(struct an_proc *const *)x;
	const struct an_proc *b = *(struct an_proc *const *)y;
	int ra = a->rank < 0 ? 1 << 30 : a->rank;
	int rb = b->rank < 0 ? 1 << 30 : b->rank;

	if (ra != rb)
		return ra < rb ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* Clock offsets from collective ends (analysis-clock.c), applied to
 * every stored time of each process before the breakdown and matching. */
static void
st_align(struct analysis *a)
{
	struct an_clk *off = an_clock(a);

	for (size_t i = 0; i < a->nproc; i++)
		if (off[i].off != 0 || off[i].drift_ppb != 0)
			st_shift(a->proc[i], &off[i]);
	free(off);
}

/*
 * The procs' cursors merged by collective instance (comm, seq): a heap
 * of the procs that have collectives left, by their cursor's key and
 * then their order.  A scan of every proc for every instance was
 * O(instances x procs), most of a thousand-rank report's final pass.
 */
struct st_merge {
	struct analysis	*a;
	/* A proc with collectives left: its cursor's key, and its index
	 * (the order among equal keys), compared as one number. */
	struct st_mkey {
		uint64_t key;		/* comm << 32 | seq */
		uint32_t q;
	}		*h;		/* a heap */
	size_t		 n;
	uint32_t	*last;		/* the last group's, to put back */
	size_t		 nlast;
};

static const struct an_coll *
st_head(const struct an_proc *p)
{
	return p->cur < p->ncoll[p->cw] ? &p->coll[p->cw][p->cur] : NULL;
}

/* st_cmp_coll_key's order, then the procs' order. */
static inline bool
st_before(struct st_mkey x, struct st_mkey y)
{
	return x.key < y.key || (x.key == y.key && x.q < y.q);
}

static void
st_push(struct st_merge *m, uint32_t q)
{
	const struct an_coll *c = st_head(m->a->proc[q]);
	struct st_mkey x = { (uint64_t)c->comm << 32 | c->seq, q };
	size_t i = m->n++;

	while (i > 0 && st_before(x, m->h[(i - 1) / 2])) {
		m->h[i] = m->h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	m->h[i] = x;
}

static struct st_mkey
st_pop(struct st_merge *m)
{
	struct st_mkey top = m->h[0], x = m->h[--m->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= m->n)
			break;
		if (c + 1 < m->n && st_before(m->h[c + 1], m->h[c]))
			c++;
		if (!st_before(m->h[c], x))
			break;
		m->h[i] = m->h[c];
		i = c;
	}
	if (m->n > 0)
		m->h[i] = x;
	return top;
}

/* Starts a merge of a's procs from their cursors. */
static void
st_merge_init(struct st_merge *m, struct analysis *a)
{
	m->a = a;
	m->n = m->nlast = 0;
	for (size_t i = 0; i < a->nproc; i++)
		if (st_head(a->proc[i]) != NULL)
			st_push(m, (uint32_t)i);
}

/* The next collective instance at the procs' cursors: its records in
 * grp[], their procs in gp[] (in proc order); 0 once none is left.  The
 * caller advances the cursors of gp[] before the next call. */
static size_t
st_group(struct st_merge *m, struct an_coll **grp, struct an_proc **gp)
{
	uint64_t key;
	size_t ng = 0;

	for (size_t i = 0; i < m->nlast; i++)
		if (st_head(m->a->proc[m->last[i]]) != NULL)
			st_push(m, m->last[i]);
	m->nlast = 0;
	if (m->n == 0)
		return 0;
	key = m->h[0].key;
	while (m->n > 0 && m->h[0].key == key) {
		uint32_t x = st_pop(m).q;

		m->last[m->nlast++] = x;
		gp[ng] = m->a->proc[x];
		grp[ng] = (struct an_coll *)(uintptr_t)st_head(gp[ng]);
		ng++;
	}
	return ng;
}

/*
 * Whether instance c is a send or receive, by its algorithm ("P2P") or
 * its name; kind caches the answer per name id (0 not asked, 1 no, 2
 * yes).
 */
static bool
st_p2p(const struct analysis *a, uint8_t **kind, const struct an_coll *c)
{
	const char *n;

	if (strcasecmp(an_str_get(a, c->alg), "P2P") == 0)
		return true;
	if (*kind == NULL)
		*kind = st_alloc(a->str.n + 1);
	if (c->name > a->str.n)
		return false;
	if ((*kind)[c->name] == 0) {
		n = an_str_get(a, c->name);
		(*kind)[c->name] = strcasestr(n, "send") != NULL ||
		    strcasestr(n, "recv") != NULL ||
		    strcasestr(n, "receive") != NULL ? 2 : 1;
	}
	return (*kind)[c->name] == 2;
}

/* 1/this of a send/recv's length is allowed for transfers that differ. */
#define ST_P2P_SHARE	64

/*
 * The last arrival that a send or receive c can have waited for, with the
 * group's arrivals sorted in starts[0..n) and its shortest op mind long.
 * A send/recv waits only for its peers, which the records do not name,
 * so the last arrival of the whole communicator is no rank's wait: in a
 * ring, a rank whose neighbour arrived early is done before a late rank
 * elsewhere arrives.  A peer must have arrived at least the transfer's
 * length before c ended, and the group's shortest op (the last arrival's,
 * which waited for no one) is taken as that length: the latest arrival
 * no later than c's end less it.  The ranks' times sit apart by their
 * clocks' mapping errors (slack: their uncertainties), and transfers
 * differ a little, so a peer's arrival may appear somewhat later: slack
 * and 1/64 of the length are allowed for it.  Exact when every rank's
 * transfer takes as long (to within that allowance, were another rank
 * to arrive just after the peer); with one slow link, its rank's transit
 * is found between the others' and its own.
 */
static uint64_t
st_p2p_last(const uint64_t *starts, size_t n, const struct an_coll *c,
    uint64_t mind, uint64_t slack)
{
	uint64_t by = c->end - mind + mind / ST_P2P_SHARE + slack;
	size_t lo = 0, hi = n;

	if (by > c->end)
		by = c->end;
	/* The first arrival after by; c's own is never after it. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (starts[mid] <= by)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && starts[lo - 1] > c->start ? starts[lo - 1] :
	    c->start;
}

/*
 * Walks collective instances (comm, seq) across procs: wait/transit (a
 * send/recv's against its peers' arrival, st_p2p_last) and votes (the
 * rank with the shortest time is the one the others waited for).  An instance is split only when every rank its communicator has
 * in other instances holds it: with one missing (the capture's edges, a
 * rank whose capture began late) the last arrival is not known, so its
 * wait and transit stay unsplit and it casts no vote.  Instances come in
 * (comm, seq) order, so a first pass notes each communicator's ranks.
 */
static void
st_match(struct analysis *a)
{
	struct an_coll **grp = st_alloc(a->nproc * sizeof(*grp));
	struct an_proc **gp = st_alloc(a->nproc * sizeof(*gp));
	struct { uint32_t comm; size_t n; } *full = NULL;
	size_t nfull = 0, cfull = 0, fi = 0, ng;
	uint64_t unsplit = 0, unsplit_ns = 0;
	uint64_t *starts = st_alloc(a->nproc * sizeof(*starts));
	uint8_t *kind = NULL;
	int64_t unc = 0;
	bool p2p;
	struct st_merge m = { .h = st_alloc(a->nproc * sizeof(*m.h)),
	    .last = st_alloc(a->nproc * sizeof(uint32_t)) };

	for (size_t i = 0; i < a->nproc; i++)
		a->proc[i]->cur = 0;
	st_merge_init(&m, a);
	while ((ng = st_group(&m, grp, gp)) > 0) {
		if (nfull == 0 || full[nfull - 1].comm != grp[0]->comm) {
			an_grow(&full, &cfull, nfull, sizeof(*full));
			full[nfull].comm = grp[0]->comm;
			full[nfull++].n = 0;
		}
		if (ng > full[nfull - 1].n)
			full[nfull - 1].n = ng;
		for (size_t i = 0; i < ng; i++)
			gp[i]->cur++;
	}
	for (size_t i = 0; i < a->nproc; i++)
		a->proc[i]->cur = 0;
	st_merge_init(&m, a);
	while ((ng = st_group(&m, grp, gp)) > 0) {
		uint64_t last = 0, mind = UINT64_MAX;
		size_t vote = 0;
		bool whole;

		while (full[fi].comm != grp[0]->comm)
			fi++;
		whole = ng >= full[fi].n;
		for (size_t i = 0; i < ng; i++) {
			if (grp[i]->start > last)
				last = grp[i]->start;
			if (grp[i]->end - grp[i]->start < mind) {
				mind = grp[i]->end - grp[i]->start;
				vote = i;
			}
		}
		p2p = ng > 1 && st_p2p(a, &kind, grp[0]);
		if (p2p) {
			unc = 0;
			for (size_t i = 0; i < ng; i++) {
				starts[i] = grp[i]->start;
				if (gp[i]->clk_unc > unc)
					unc = gp[i]->clk_unc;
			}
			an_sort(starts, ng, sizeof(*starts), an_cmp_u64);
		}
		for (size_t i = 0; i < ng; i++) {
			struct an_coll *c = grp[i];
			uint64_t dur = c->end - c->start;
			uint64_t w, t;

			if (p2p)
				last = st_p2p_last(starts, ng, c, mind,
				    (uint64_t)(gp[i]->clk_unc + unc));
			w = last > c->start ? last - c->start : 0;
			t = c->end > last ? c->end - last : 0;

			if (w > dur)
				w = dur;
			if (t > dur - w)
				t = dur - w;
			if (ng == 1) {
				w = 0;
				t = dur;
			}
			c->unmatched = !whole;
			if (!whole) {
				w = t = 0;
				unsplit_ns += dur * c->w;
			}
			c->wait = w;
			c->transit = t;
			gp[i]->cur++;
		}
		/* An instance kept stands for as many as its stride
		 * (analysis-sample.c). */
		if (!whole)
			unsplit += grp[0]->w;
		else if (ng > 1)
			gp[vote]->votes += grp[0]->w;
	}
	if (unsplit > 0)
		an_warn(a, "%" PRIu64 " collective instance(s) (%.3f ms in all "
		    "ranks) were captured on only some of their communicator's "
		    "ranks (the capture's edges, a rank captured late): their "
		    "wait and transit are not split (Unmatched Time) and they "
		    "cast no slow-rank vote", unsplit, (double)unsplit_ns / 1e6);
	free(kind);
	free(starts);
	free(m.h);
	free(m.last);
	free(full);
	free(grp);
	free(gp);
}

/* Per-step rows from the swept group totals (analysis-sweep.c), the
 * data-loading ranges and the matched collectives. */
static void
st_breakdown(struct analysis *a, struct an_proc *p)
{
	uint32_t gm = p->cw == 0 ? AN_G_COMMC : AN_G_COMMH;
	uint32_t gu = p->cw == 0 ? AN_G_CC : AN_G_CH;
	struct an_union u_data;
	struct an_coll *cl = p->coll[p->cw];
	size_t ncl = p->ncoll[p->cw], nsteps, k = 0;
	struct an_coll **by_start;

	/* Collectives are sorted by (comm, seq); index them by start. */
	by_start = st_alloc((ncl + 1) * sizeof(*by_start));
	for (size_t j = 0; j < ncl; j++)
		by_start[j] = &cl[j];
	an_sort(by_start, ncl, sizeof(*by_start), st_cmp_pcoll);
	st_union(p->data, p->ndata, &u_data);
	if (a->o.keep_segments) {
		st_take(&p->seg[AN_G_COMP], &p->u_comp);
		st_take(&p->seg[gm], &p->u_comm);
	}
	p->gap = p->gap_max[gu];
	p->gap_at = p->gap_from[gu];
	nsteps = p->nsteps ? p->nsteps : 1;
	/* No step markers and no device work (a launcher): no step at all,
	 * not an empty whole-capture one. */
	if (p->nsteps == 0 && p->whole[AN_G_COMP] == 0 &&
	    p->whole[AN_G_COMMC] == 0 && p->whole[AN_G_COMMH] == 0 &&
	    p->whole[AN_G_MEM] == 0)
		nsteps = 0;
	p->res = st_alloc((nsteps ? nsteps : 1) * sizeof(*p->res));
	p->nres = nsteps;
	for (size_t i = 0; i < nsteps; i++) {
		struct an_stepres *r = &p->res[i];
		const uint64_t *acc;
		uint64_t s, e, busy;

		if (p->nsteps) {
			s = p->steps[i].start;
			e = p->steps[i].end;
			acc = p->steps[i].acc;
			/* Indexed steps keep their index; marked ones are
			 * counted from the window's first step (or from 1). */
			r->step = p->steps[i].step >= 0 ? p->steps[i].step :
			    p->step_base >= 0 ? p->step_base + (int64_t)i :
			    (int64_t)i + 1;
		} else {
			s = p->first_ts;
			e = p->last_ts;
			acc = p->whole;
			r->step = -1;	/* no step markers: the whole capture */
		}
		r->start = s;
		r->end = e;
		r->compute = acc[AN_G_COMP];
		r->comm = acc[gm];
		busy = acc[gu];
		r->overlap = r->compute + r->comm > busy ?
		    r->compute + r->comm - busy : 0;
		r->free = e - s > busy ? e - s - busy : 0;
		r->memcpy = acc[AN_G_MEM];
		r->data = an_union_measure(&u_data, s, e);
		if (p->nsteps && p->steps[i].first > s) {
			uint64_t lead = p->steps[i].first - s;

			p->lead_total += lead;
			if (lead > p->lead_max)
				p->lead_max = lead;
		}
		/* Steps are sorted by start and do not overlap: one pass
		 * over the collectives in start order. */
		while (k < ncl && by_start[k]->start < s)
			k++;
		/* A step's own collectives once each; the whole capture
		 * (no steps) counts each for those it stands for. */
		for (size_t j = k; j < ncl && by_start[j]->start < e; j++) {
			uint64_t w = p->nsteps ? 1 : by_start[j]->w;

			r->wait += by_start[j]->wait * w;
			r->transit += by_start[j]->transit * w;
		}
	}
	st_union_free(&u_data);
	free(by_start);
}

int
an_steps(struct analysis *a)
{
	an_sort(a->proc, a->nproc, sizeof(*a->proc), st_cmp_proc);
	for (size_t i = 0; i < a->nproc; i++)
		if (!a->proc[i]->finished)
			an_sweep_finish(a, a->proc[i]);
	an_orphans_settle(a);
	st_check(a);
	/* Each rank's collectives keyed, steps and collectives sampled
	 * past the caps (analysis-sample.c), then the collectives in
	 * (comm, seq) order for the matching. */
	an_sample(a, true);
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];

		an_sort(p->coll[p->cw], p->ncoll[p->cw], sizeof(struct an_coll),
		    st_cmp_coll_key);
	}
	st_align(a);
	st_match(a);
	a->base_ts = 0;
	for (size_t i = 0; i < a->nproc; i++) {
		st_breakdown(a, a->proc[i]);
		if (a->proc[i]->first_ts && (a->base_ts == 0 ||
		    a->proc[i]->first_ts < a->base_ts))
			a->base_ts = a->proc[i]->first_ts;
	}
	an_verdict(a);
	return 0;
}

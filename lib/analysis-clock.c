/*
 * Clock offsets between the hosts of a capture, for the report and the
 * exporters (which read each process's offset): every rank's all-member
 * collectives (device-side times) go to lib/clockalign, and each process
 * gets the offset of its host (or its own, where a host's ranks disagree;
 * per rank with --align always; none with --align never).  The "clocks"
 * table states each host's and rank's offset and uncertainty, and why one
 * could not be estimated.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "clockalign.h"

/* Collectives that every member enters before any leaves. */
static bool
ac_all_member(const char *name)
{
	static const char *const kinds[] = { "allreduce", "allgather",
	    "reducescatter", "alltoall", "barrier" };
	char low[128];
	size_t n = 0;

	if (name == NULL)
		return false;
	for (; *name && n + 1 < sizeof(low); name++)
		if (isalnum((unsigned char)*name))
			low[n++] = (char)tolower((unsigned char)*name);
	low[n] = '\0';
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strstr(low, kinds[i]) != NULL)
			return true;
	return false;
}

static int
ac_cmp_step(const void *x, const void *y)
{
	const struct an_step *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* The indexed step holding t, or -1. */
static int64_t
ac_step_of(const struct an_step *st, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st[mid].start <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || t > st[lo - 1].end)
		return -1;
	return st[lo - 1].step;
}

/* The rank id a process has in the samples. */
static uint32_t
ac_rank_id(const struct an_proc *p, size_t i)
{
	return p->rank >= 0 ? (uint32_t)p->rank : 0x40000000u + (uint32_t)i;
}

/*
 * Appends p's samples.  A collective's ordinal is the one an_steps gave
 * it where the records carry seq (a->coll_abs); else it counts from the
 * start of the indexed step it lies in, when the rank has step indexes
 * (so windows that begin at different collectives still match), else
 * from the start of the capture.
 */
static void
ac_samples(struct analysis *a, struct an_proc *p, uint32_t rid,
    uint32_t host, struct clockalign_sample **s, size_t *n, size_t *cap)
{
	const struct an_coll *c = p->coll[p->cw];
	size_t nc = p->ncoll[p->cw], ns = 0;
	struct an_step *st = calloc(p->nsteps + 1, sizeof(*st));
	uint64_t ord = 0, comm = 0;
	uint32_t last_comm = 0, last_name = 0;
	int64_t last_step = -2;
	bool first = true, member = false;

	if (st == NULL)
		abort();
	for (size_t i = 0; i < p->nsteps; i++)
		if (p->steps[i].step >= 0)
			st[ns++] = p->steps[i];
	an_sort(st, ns, sizeof(*st), ac_cmp_step);
	/* coll[] is sorted by (comm, seq): start order per communicator. */
	for (size_t i = 0; i < nc; i++) {
		int64_t step = -1;

		/* The name repeats: classified once a run. */
		if (i == 0 || c[i].name != last_name) {
			last_name = c[i].name;
			member = ac_all_member(an_str_get(a, c[i].name));
		}
		if (!member)
			continue;
		if (ns > 0 && (step = ac_step_of(st, ns, c[i].start)) < 0)
			continue;	/* outside the indexed steps */
		if (first || c[i].comm != last_comm || step != last_step) {
			if (first || c[i].comm != last_comm)
				comm = clockalign_comm_id(an_str_get(a,
				    c[i].comm));
			first = false;
			last_comm = c[i].comm;
			last_step = step;
			ord = 0;
		}
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 4096;
			if ((*s = realloc(*s, *cap * sizeof(**s))) == NULL)
				abort();
		}
		(*s)[(*n)++] = (struct clockalign_sample){ rid, host, comm,
		    a->coll_abs ? c[i].seq : ((uint64_t)(step + 1) << 32) |
		    ord, c[i].start, c[i].end };
		ord++;
	}
	free(st);
}

/* The correction an estimate gives (its offset, with its drift). */
static struct an_clk
ac_clk(const struct clockalign_est *e)
{
	struct an_clk c = { e->offset_ns, e->drift_ppb, e->mid_ns };

	return c;
}

static void
ac_us(struct table *t, int64_t ns)
{
	table_num(t, (double)ns / 1e3, 3);
}

static void
ac_row(struct table *t, const char *kind, const char *host, int64_t rank,
    const struct clockalign_est *e, bool applied, int64_t app,
    const char *note)
{
	table_row(t);
	table_str(t, kind);
	table_str(t, host);
	if (rank >= 0)
		table_i64(t, rank);
	else
		table_str(t, "");
	table_str(t, clockalign_status_name(e->status));
	if (e->status == CLOCKALIGN_NOT_ESTIMABLE) {
		for (int i = 0; i < 5; i++)
			table_str(t, "");
	} else {
		ac_us(t, e->offset_ns);
		ac_us(t, e->uncertainty_ns);
		/* The offset's trend (0: none): with one, the offset holds
		 * at the capture's middle and moves by it. */
		table_num(t, (double)e->drift_ppb / 1e3, 3);
		if (e->bound_lo_ns == INT64_MIN)
			table_str(t, "");
		else
			ac_us(t, e->bound_lo_ns);
		if (e->bound_hi_ns == INT64_MAX)
			table_str(t, "");
		else
			ac_us(t, e->bound_hi_ns);
	}
	table_u64(t, e->matched);
	if (applied)
		ac_us(t, app);
	else
		table_str(t, "");
	table_str(t, note);
}

/*
 * Estimates the offsets, fills each process's skew/aligned, builds the
 * clocks table and returns the offset to add to each process (a->proc
 * order; freed by the caller).
 */
AN_HIDDEN struct an_clk *
an_clock(struct analysis *a)
{
	static const char *const cols[] = { "Kind", "Host", "Rank", "Status",
	    "Offset(us)", "Uncertainty(us)", "Drift(ppm)", "Bound Low(us)",
	    "Bound High(us)", "Collectives", "Applied(us)", "Note" };
	struct table *t = table_new("clocks", "Clocks (offset to the "
	    "reference host, from collective ends)", 12, cols);
	struct an_clk *off = calloc(a->nproc + 1, sizeof(*off));
	const char **hosts = calloc(a->nproc + 1, sizeof(*hosts));
	uint32_t *hostof = calloc(a->nproc + 1, sizeof(*hostof));
	struct clockalign_sample *s = NULL;
	size_t n = 0, cap = 0;
	uint32_t nh = 0;
	struct clockalign ca;

	if (off == NULL || hosts == NULL || hostof == NULL)
		abort();
	/* Hosts in rank order: the lowest rank's is the reference. */
	for (size_t i = 0; i < a->nproc; i++) {
		const char *h = a->proc[i]->src->host ?
		    a->proc[i]->src->host : "";
		uint32_t k;

		for (k = 0; k < nh && strcmp(hosts[k], h) != 0; k++)
			;
		if (k == nh)
			hosts[nh++] = h;
		hostof[i] = k;
		ac_samples(a, a->proc[i], ac_rank_id(a->proc[i], i), k, &s,
		    &n, &cap);
	}
	if (clockalign_estimate(s, n, nh, -1, &ca) != 0)
		abort();
	free(s);
	for (uint32_t h = 0; h < ca.nhosts; h++) {
		const struct clockalign_est *e = &ca.host[h];
		char note[256];

		note[0] = '\0';
		if (e->status == CLOCKALIGN_NOT_ESTIMABLE)
			snprintf(note, sizeof(note), "%s", e->reason);
		else if (ca.host_split[h])
			snprintf(note, sizeof(note), "its ranks' clocks "
			    "disagree: each rank gets its own offset");
		else if (e->via != h && e->via != ca.reference)
			snprintf(note, sizeof(note), "through %s",
			    hosts[e->via]);
		if (e->status == CLOCKALIGN_ESTIMATED && e->drift_ppb != 0) {
			size_t k = strlen(note);

			snprintf(note + k, sizeof(note) - k, "%sits clock "
			    "drifts: the offset holds at the capture's middle "
			    "and is applied with the drift", k ? "; " : "");
		}
		ac_row(t, "host", hosts[h], -1, e, e->status !=
		    CLOCKALIGN_NOT_ESTIMABLE && !ca.host_split[h] &&
		    a->o.align == ANALYSIS_ALIGN_AUTO, e->offset_ns, note);
	}
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];
		const struct clockalign_rank *r = clockalign_rank(&ca,
		    ac_rank_id(p, i));
		const struct clockalign_est *he = nh ? &ca.host[hostof[i]] :
		    NULL;
		struct clockalign_est none = { .status =
		    CLOCKALIGN_NOT_ESTIMABLE, .reason = "no collectives",
		    .bound_lo_ns = INT64_MIN, .bound_hi_ns = INT64_MAX };
		bool same = hostof[i] == ca.reference &&
		    !ca.host_split[ca.reference];
		bool have = false;
		const struct clockalign_est *used = NULL;
		char note[256];

		note[0] = '\0';
		if (r != NULL && a->o.align == ANALYSIS_ALIGN_ALWAYS &&
		    r->est.status != CLOCKALIGN_NOT_ESTIMABLE) {
			have = true;
			used = &r->est;
		} else if (r != NULL && r->applied) {
			have = true;
			used = r->own ? &r->est : he;
			if (r->own)
				snprintf(note, sizeof(note), "own offset");
		} else if (he != NULL && he->status !=
		    CLOCKALIGN_NOT_ESTIMABLE && !ca.host_split[hostof[i]]) {
			/* No collectives of its own: its host's clock. */
			have = true;
			used = he;
			snprintf(note, sizeof(note), "its host's offset");
		} else if (same) {
			have = true;	/* the reference clock itself */
		}
		if (!have && nh > 1) {
			const char *why = r != NULL &&
			    r->est.status == CLOCKALIGN_NOT_ESTIMABLE ?
			    r->est.reason : he != NULL && he->reason ?
			    he->reason : "no collectives";

			char who[64];

			if (p->rank >= 0)
				snprintf(who, sizeof(who), "rank %d (pid %u",
				    p->rank, p->pid);
			else
				snprintf(who, sizeof(who), "process %u (no "
				    "rank", p->pid);
			snprintf(note, sizeof(note), "not aligned: %s", why);
			an_warn(a, "%s, host %s): clock offset not estimable "
			    "(%s): its times stay on its host's clock, not "
			    "aligned with the others", who, hosts[hostof[i]],
			    why);
		}
		if (used != NULL)
			off[i] = ac_clk(used);
		p->skew = off[i].off;
		/* Its own estimate says how far its ends sit from the
		 * others' (half their interquartile range at least), also
		 * on the reference host where nothing is applied. */
		p->clk_unc = r != NULL && r->est.status ==
		    CLOCKALIGN_ESTIMATED ? r->est.uncertainty_ns :
		    used != NULL ? used->uncertainty_ns : 0;
		if (p->clk_unc < CLOCKALIGN_FLOOR_NS)
			p->clk_unc = CLOCKALIGN_FLOOR_NS;
		p->aligned = have && (r != NULL || he != NULL);
		if (!have || a->o.align == ANALYSIS_ALIGN_NEVER)
			memset(&off[i], 0, sizeof(off[i]));
		ac_row(t, "rank", hosts[hostof[i]], p->rank, r != NULL ?
		    &r->est : &none, have && a->o.align !=
		    ANALYSIS_ALIGN_NEVER, off[i].off, note);
	}
	/* One clock (one host, its ranks agreeing): nothing to state. */
	if (nh <= 1 && !(nh == 1 && ca.host_split[0])) {
		table_free(t);
		t = NULL;
	}
	/* Records of no process (device metrics) move with their host. */
	for (size_t i = 0; i < a->nsrc; i++) {
		const char *h = a->src[i]->host ? a->src[i]->host : "";

		memset(&a->src[i]->clk, 0, sizeof(a->src[i]->clk));
		for (uint32_t k = 0; k < nh; k++)
			if (strcmp(hosts[k], h) == 0 && a->o.align !=
			    ANALYSIS_ALIGN_NEVER && ca.host[k].status !=
			    CLOCKALIGN_NOT_ESTIMABLE)
				a->src[i]->clk = ac_clk(&ca.host[k]);
	}
	clockalign_free(&ca);
	free(hosts);
	free(hostof);
	a->tables[ANALYSIS_CLOCKS] = t;
	return off;
}

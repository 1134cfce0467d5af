/* Report tables and advisor rules, built from the aggregates. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"

#define US(ns)	((double)(ns) / 1e3)

static const char *const sec_memcpy_kind[6] = { "UNKNOWN", "HTOH", "HTOD",
    "DTOH", "DTOD", "DEFAULT" };

static int
sec_cmp_op(const void *x, const void *y)
{
	const struct an_op *a = x, *b = y;

	return a->st.total > b->st.total ? -1 : a->st.total < b->st.total;
}

static void
sec_advise(struct analysis *a, const char *sev, const char *rule,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
sec_advise(struct analysis *a, const char *sev, const char *rule,
    const char *fmt, ...)
{
	va_list ap;
	char *m;

	va_start(ap, fmt);
	if (vasprintf(&m, fmt, ap) < 0)
		abort();
	va_end(ap);
	a->adv = realloc(a->adv, (a->nadv + 1) * sizeof(*a->adv));
	if (a->adv == NULL)
		abort();
	a->adv[a->nadv++] = (struct analysis_advice){ sev, rule, m };
}

static int
sec_sev_rank(const char *s)
{
	return s[0] == 'H' ? 0 : s[0] == 'M' ? 1 : 2;
}

static int
sec_cmp_adv(const void *x, const void *y)
{
	const struct analysis_advice *a = x, *b = y;

	return sec_sev_rank(a->severity) - sec_sev_rank(b->severity);
}

static void
sec_stat_cols(struct table *t, const struct an_stat *s)
{
	table_num(t, US(s->total), 3);
	table_num(t, US(an_stat_min(s)), 3);
	table_num(t, s->count ? US(s->total) / (double)s->count : 0, 3);
	table_num(t, US(s->max), 3);
}

/* Per-op communication aggregate over ranks and instances. */
struct sec_comm {
	uint32_t	name;
	struct an_stat	st;
	uint64_t	bytes, wait, transit, small, misaligned, retrans;
	uint64_t	remote;
	uint64_t	unmatched;	/* time of instances not split */
};

struct sec_link {
	uint32_t	name, comm;
	int		src, dst;
	uint64_t	bytes, time;
	bool		remote;
};

static double
sec_ring_factor(const char *op, int n)
{
	if (n < 2)
		return 0;
	if (strcasestr(op, "allreduce"))
		return 2.0 * (n - 1) / n;
	if (strcasestr(op, "broadcast") || strcasestr(op, "reduce") ==
	    op + strlen(op) - 6)
		return 1.0;
	if (strcasestr(op, "send") || strcasestr(op, "recv"))
		return 0;
	return (double)(n - 1) / n;
}

/* Communicators and whether their ranks span hosts (RDMA) or not. */
struct sec_cinfo {
	uint32_t	 comm;
	const char	*host;
	bool		 remote;
};

static struct sec_cinfo *
sec_comm_hosts(struct analysis *a, size_t *np)
{
	struct sec_cinfo *ci = NULL;
	size_t n = 0;

	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];
		uint32_t last = 0;

		for (size_t k = 0; k < p->ncoll[p->cw]; k++) {
			uint32_t cm = p->coll[p->cw][k].comm;
			size_t j;

			if (k > 0 && cm == last)
				continue;
			last = cm;
			for (j = 0; j < n && ci[j].comm != cm; j++)
				;
			if (j == n) {
				ci = realloc(ci, (n + 1) * sizeof(*ci));
				if (ci == NULL)
					abort();
				ci[n++] = (struct sec_cinfo){ cm, p->src->host,
				    false };
			} else if (strcmp(ci[j].host, p->src->host) != 0)
				ci[j].remote = true;
		}
	}
	*np = n;
	return ci;
}

/* A communicator's member: a ranked process with a collective in it. */
struct sec_member {
	uint32_t	comm;
	uint32_t	q;		/* its index in a->proc */
};

static int
sec_cmp_member(const void *x, const void *y)
{
	const struct sec_member *a = x, *b = y;

	if (a->comm != b->comm)
		return a->comm < b->comm ? -1 : 1;
	return a->q < b->q ? -1 : a->q > b->q;
}

/* Every communicator's members, by communicator then process order; *np
 * their count. */
static struct sec_member *
sec_members(const struct analysis *a, size_t *np)
{
	struct sec_member *m = NULL;
	size_t n = 0, cap = 0, w = 0;

	for (size_t q = 0; q < a->nproc; q++) {
		const struct an_proc *o = a->proc[q];

		if (o->rank < 0)
			continue;
		for (size_t k = 0; k < o->ncoll[o->cw]; k++) {
			uint32_t cm = o->coll[o->cw][k].comm;

			if (k > 0 && cm == o->coll[o->cw][k - 1].comm)
				continue;
			an_grow(&m, &cap, n, sizeof(*m));
			m[n++] = (struct sec_member){ cm, (uint32_t)q };
		}
	}
	an_sort(m, n, sizeof(*m), sec_cmp_member);
	for (size_t i = 0; i < n; i++)
		if (w == 0 || sec_cmp_member(&m[w - 1], &m[i]) != 0)
			m[w++] = m[i];
	*np = w;
	return m;
}

/* The index of the first of the n sorted elements of size sz at base
 * that cmp does not order before key (n when none). */
static size_t
sec_lower_bound(const void *base, size_t n, size_t sz, const void *key,
    int (*cmp)(const void *, const void *))
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp((const char *)base + mid * sz, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first of mem[n] at or after (comm, q): with q 0, comm's first
 * member; with q UINT32_MAX, the end of its members. */
static size_t
sec_member_at(const struct sec_member *mem, size_t n, uint32_t comm,
    uint32_t q)
{
	struct sec_member key = { comm, q };

	return sec_lower_bound(mem, n, sizeof(*mem), &key, sec_cmp_member);
}

/*
 * The rank after p (a->proc[pq]) among the ranks of communicator comm (in
 * rank order, the first after the last), and in *n how many ranks it
 * has; mem[nmem] from sec_members.  As a walk of the members in order
 * would find it, where the member just after p gets it if its rank is
 * higher (so does the second member, before p is seen), but from p's
 * place, found by binary search: a walk of every process and its
 * collectives for each rank and communicator was cubic in a large job's
 * ranks.
 */
static int
sec_ring_next(const struct analysis *a, const struct sec_member *mem,
    size_t nmem, size_t pq, uint32_t comm, int *n)
{
	const struct an_proc *p = a->proc[pq];
	size_t first = sec_member_at(mem, nmem, comm, 0);
	size_t end = sec_member_at(mem, nmem, comm, UINT32_MAX);
	size_t at = sec_member_at(mem, nmem, comm, (uint32_t)pq) - first;

	*n = (int)(end - first);
	if (end == first)
		return -1;
	if (at >= 2 && a->proc[mem[first + 1].q]->rank > p->rank)
		return a->proc[mem[first + 1].q]->rank;
	if (first + at + 1 < end &&
	    a->proc[mem[first + at + 1].q]->rank > p->rank)
		return a->proc[mem[first + at + 1].q]->rank;
	return a->proc[mem[first].q]->rank;
}

/* A process's rank and index, sorted by rank then index. */
struct sec_rankq {
	int32_t		rank;
	uint32_t	q;
};

static int
sec_cmp_rankq(const void *x, const void *y)
{
	const struct sec_rankq *a = x, *b = y;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return a->q < b->q ? -1 : a->q > b->q;
}

/* The first entry of rq[n] at or after (rank, q). */
static size_t
sec_rankq_at(const struct sec_rankq *rq, size_t n, int32_t rank, uint32_t q)
{
	struct sec_rankq key = { rank, q };

	return sec_lower_bound(rq, n, sizeof(*rq), &key, sec_cmp_rankq);
}

static void
sec_comm(struct analysis *a, uint64_t *comm_total)
{
	static const char *const cols[] = { "OP Type", "Count",
	    "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
	    "Ratio(%)", "Transit Size(MB)", "Bandwidth(GB/s)",
	    "Wait Time(us)", "Transit Time(us)", "Idle Time(us)",
	    "Wait Ratio", "Unmatched Time(us)" };
	static const char *const mcols[] = { "OP Type", "Group", "Src Rank",
	    "Dst Rank", "Transport", "Transit Size(MB)", "Transit Time(us)",
	    "Bandwidth(GB/s)" };
	struct sec_comm *v = NULL;
	struct sec_link *l = NULL;
	struct sec_member *mem;
	struct sec_rankq *rq;
	size_t nv = 0, nl = 0, cl = 0, nci, nmem;
	struct sec_cinfo *ci = sec_comm_hosts(a, &nci);
	uint64_t total = 0;
	struct table *t;

	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];
		uint32_t rc = 0;
		bool remote = false;

		for (size_t k = 0; k < p->ncoll[p->cw]; k++) {
			struct an_coll *c = &p->coll[p->cw][k];
			uint64_t dur = c->end - c->start, w = c->w;
			size_t j;

			/* Looked up once a run of one communicator (p's
			 * collectives are in (comm, seq) order): a scan of
			 * every communicator a collective was quadratic in
			 * the ranks of a large job. */
			if (k == 0 || c->comm != rc) {
				rc = c->comm;
				remote = false;
				for (j = 0; j < nci; j++)
					if (ci[j].comm == c->comm)
						remote = ci[j].remote;
			}
			for (j = 0; j < nv && v[j].name != c->name; j++)
				;
			if (j == nv) {
				v = realloc(v, (nv + 1) * sizeof(*v));
				if (v == NULL)
					abort();
				memset(&v[nv++], 0, sizeof(*v));
				v[j].name = c->name;
			}
			/* Each one kept stands for w (analysis-sample.c). */
			an_stat_addn(&v[j].st, dur, w);
			v[j].bytes += c->bytes * w;
			v[j].wait += c->wait * w;
			v[j].transit += c->transit * w;
			if (c->unmatched)
				v[j].unmatched += dur * w;
			/* msprof-analyze: SDMA under 16 MB, RDMA under 1 MB. */
			if (c->bytes < (remote ? 1u << 20 : 16u << 20))
				v[j].small += w;
			if (remote)
				v[j].remote += w;
			if (c->bytes % 512)
				v[j].misaligned += w;
			if ((double)dur > a->o.comm_retrans_s * 1e9)
				v[j].retrans += w;
			total += dur * w;
		}
	}
	*comm_total = total;
	t = table_new("communication", "Communication (per op type, all "
	    "ranks)", sizeof(cols) / sizeof(cols[0]), cols);
	for (size_t j = 0; j < nv; j++) {
		struct sec_comm *c = &v[j];
		/* Idle: what neither waits nor transfers, of the instances
		 * split; the others' time is Unmatched. */
		uint64_t idle = c->st.total - c->wait - c->transit -
		    c->unmatched;

		table_row(t);
		table_str(t, an_str_get(a, c->name));
		table_u64(t, c->st.count);
		sec_stat_cols(t, &c->st);
		table_num(t, total ? 100.0 * (double)c->st.total /
		    (double)total : 0, 2);
		table_num(t, (double)c->bytes / 1048576.0, 3);
		table_num(t, c->transit ? (double)c->bytes /
		    (double)c->transit : 0, 3);
		table_num(t, US(c->wait), 3);
		table_num(t, US(c->transit), 3);
		table_num(t, US(idle), 3);
		table_num(t, c->wait + c->transit ? (double)c->wait /
		    (double)(c->wait + c->transit) : 0, 4);
		table_num(t, US(c->unmatched), 3);
		if ((double)c->small > a->o.small_packet_ratio *
		    (double)c->st.count)
			sec_advise(a, c->small * 2 > c->st.count ? "Medium" :
			    "Low", "small_packets", "%s: %" PRIu64 " of %"
			    PRIu64 " transfers (%.0f%% > %.0f%%) are under %s "
			    "(avg %.3f MB): fuse gradients into larger buckets",
			    an_str_get(a, c->name), c->small, c->st.count,
			    100.0 * (double)c->small / (double)c->st.count,
			    100.0 * a->o.small_packet_ratio, c->remote ?
			    "1 MB (RDMA)" : "16 MB (SDMA)",
			    (double)c->bytes / (double)c->st.count / 1048576.0);
		if (c->misaligned)
			sec_advise(a, c->misaligned * 2 > c->st.count ?
			    "Medium" : "Low", "byte_alignment", "%s: %" PRIu64
			    " of %" PRIu64 " transfers are not a multiple of "
			    "512 bytes: pad buffers to 512 bytes",
			    an_str_get(a, c->name), c->misaligned,
			    c->st.count);
		if (c->retrans)
			sec_advise(a, "High", "retransmission", "%s: %" PRIu64
			    " ops took over %.0f s (max %.3f s): suspect link "
			    "retransmission", an_str_get(a, c->name),
			    c->retrans, a->o.comm_retrans_s,
			    (double)c->st.max / 1e9);
	}
	a->tables[ANALYSIS_COMM] = t;

	/* Communication matrix: ring algorithms, rank r -> next rank. */
	mem = sec_members(a, &nmem);
	rq = an_realloc(NULL, (a->nproc + 1) * sizeof(*rq));
	for (size_t i = 0; i < a->nproc; i++)
		rq[i] = (struct sec_rankq){ a->proc[i]->rank, (uint32_t)i };
	an_sort(rq, a->nproc, sizeof(*rq), sec_cmp_rankq);
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];
		uint32_t lc = 0, lname = 0;
		int n = 0, dst = -1, ln = -1;
		double f = 0;
		size_t from = nl, at;

		if (p->rank < 0)
			continue;
		/* A link's source is its process's rank: only a process
		 * before p with the same rank (bad input) made links p can
		 * find before its own. */
		at = sec_rankq_at(rq, a->nproc, p->rank, 0);
		if (rq[at].q < (uint32_t)i)
			from = 0;
		for (size_t k = 0; k < p->ncoll[p->cw]; k++) {
			struct an_coll *c = &p->coll[p->cw][k];
			const char *op = an_str_get(a, c->name);
			uint64_t w = c->w;
			size_t j;

			/* Once a run of one communicator: p's collectives
			 * are in (comm, seq) order. */
			if (k == 0 || c->comm != lc) {
				dst = sec_ring_next(a, mem, nmem, i, c->comm,
				    &n);
				lc = c->comm;
			}
			if (n != ln || c->name != lname) {
				f = sec_ring_factor(op, n);
				ln = n;
				lname = c->name;
			}
			if (f == 0 || dst == p->rank)
				continue;
			/* From the last: p's links are the newest (there is
			 * one a name, communicator and source rank). */
			for (j = nl; j-- > from;)
				if (l[j].name == c->name && l[j].comm ==
				    c->comm && l[j].src == p->rank)
					break;
			if (j == from - 1) {
				an_grow(&l, &cl, nl, sizeof(*l));
				j = nl;
				memset(&l[nl++], 0, sizeof(*l));
				l[j].name = c->name;
				l[j].comm = c->comm;
				l[j].src = p->rank;
				l[j].dst = dst;
				/* The transport: where dst's last process is. */
				at = sec_rankq_at(rq, a->nproc, dst, UINT32_MAX);
				if (at > 0 && rq[at - 1].rank == dst)
					l[j].remote = strcmp(
					    a->proc[rq[at - 1].q]->src->host,
					    p->src->host) != 0;
			}
			l[j].bytes += (uint64_t)((double)c->bytes * f) * w;
			l[j].time += c->transit * w;
		}
	}
	t = table_new("communication_matrix", "Communication matrix "
	    "(ring algorithms: rank -> next rank)",
	    sizeof(mcols) / sizeof(mcols[0]), mcols);
	for (size_t j = 0; j < nl; j++) {
		table_row(t);
		table_str(t, an_str_get(a, l[j].name));
		table_str(t, an_str_get(a, l[j].comm));
		table_i64(t, l[j].src);
		table_i64(t, l[j].dst);
		table_str(t, l[j].remote ? "RDMA" : "HCCS");
		table_num(t, (double)l[j].bytes / 1048576.0, 3);
		table_num(t, US(l[j].time), 3);
		table_num(t, l[j].time ? (double)l[j].bytes /
		    (double)l[j].time : 0, 3);
	}
	a->tables[ANALYSIS_COMM_MATRIX] = t;
	free(rq);
	free(mem);
	free(v);
	free(l);
	free(ci);
}

/* Where the ranks' steps came from, e.g. "MSTX ranges 'step'", or "none
 * (the whole capture is one step)". */
static const char *
sec_step_source(const struct analysis *a, char *buf, size_t len)
{
	uint32_t src = 0;
	size_t n = 0;

	for (size_t i = 0; i < a->nproc; i++)
		src |= a->proc[i]->step_src;
	*buf = '\0';
	if (src & AN_STEPS_MSTX)
		n += (size_t)snprintf(buf + n, len - n, "MSTX ranges '%.64s'",
		    a->o.step_marker);
	if ((src & AN_STEPS_SYNC) && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%sthe synchronize "
		    "pattern", n ? ", " : "");
	if ((src & AN_STEPS_RECS) && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%sstep records",
		    n ? ", " : "");
	return src ? buf : "none (the whole capture is one step)";
}

static void
sec_summary(struct analysis *a)
{
	static const char *const cols[] = { "Item", "Value" };
	struct table *t = table_new("summary", "Capture summary", 2, cols);
	struct analysis_totals tot;
	char buf[160];

	analysis_get_totals(a, &tot);
	table_row(t); table_str(t, "files"); table_u64(t, a->files);
	table_row(t); table_str(t, "records"); table_u64(t, a->records);
	table_row(t); table_str(t, "processes"); table_u64(t, a->nproc);
	table_row(t); table_str(t, "ranks seen"); table_u64(t, tot.ranks_seen);
	table_row(t); table_str(t, "world size");
	table_i64(t, a->world_size);
	table_row(t); table_str(t, "records lost"); table_u64(t, tot.lost);
	table_row(t); table_str(t, "complete");
	table_str(t, a->partial ? "NO (see warnings)" : "yes");
	table_row(t); table_str(t, "step source");
	table_str(t, sec_step_source(a, buf, sizeof(buf)));
	for (size_t i = 0; i < a->nwarn; i++) {
		snprintf(buf, sizeof(buf), "warning %zu", i + 1);
		table_row(t);
		table_str(t, buf);
		table_str(t, a->warn[i]);
	}
	a->tables[ANALYSIS_SUMMARY] = t;
}

static void
sec_ops(struct analysis *a)
{
	static const char *const cols[] = { "OP Type", "Core Type", "Count",
	    "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
	    "Ratio(%)", "Host Launch Total(us)", "Host Launch Avg(us)" };
	static const char *const tcols[] = { "Rank", "Kernel", "Core Type",
	    "Count", "Total Time(us)", "Avg Time(us)", "Ratio(%)" };
	struct table *t;
	uint64_t total = 0;

	an_sort(a->ops, a->nops, sizeof(*a->ops), sec_cmp_op);
	for (size_t i = 0; i < a->nops; i++)
		total += a->ops[i].st.total;
	t = table_new("op_statistic", "Operators (op statistic, all ranks)",
	    10, cols);
	for (size_t i = 0; i < a->nops; i++) {
		struct an_op *o = &a->ops[i];

		table_row(t);
		table_str(t, an_str_get(a, o->name));
		table_str(t, an_str_get(a, o->type));
		table_u64(t, o->st.count);
		sec_stat_cols(t, &o->st);
		table_num(t, total ? 100.0 * (double)o->st.total /
		    (double)total : 0, 2);
		table_num(t, US(o->host_total), 3);
		table_num(t, o->host_count ? US(o->host_total) /
		    (double)o->host_count : 0, 3);
	}
	a->tables[ANALYSIS_OPS] = t;
	t = table_new("top_kernels", "Top kernels by total device time", 7,
	    tcols);
	for (size_t i = 0; i < a->nops && i < a->o.top_n; i++) {
		struct an_op *o = &a->ops[i];

		table_row(t);
		table_u64(t, i + 1);
		table_str(t, an_str_get(a, o->name));
		table_str(t, an_str_get(a, o->type));
		table_u64(t, o->st.count);
		table_num(t, US(o->st.total), 3);
		table_num(t, o->st.count ? US(o->st.total) /
		    (double)o->st.count : 0, 3);
		table_num(t, total ? 100.0 * (double)o->st.total /
		    (double)total : 0, 2);
	}
	/* "Rank" here is the position in the list. */
	free(t->cols[0]);
	t->cols[0] = strdup("#");
	a->tables[ANALYSIS_TOP_KERNELS] = t;
	if (a->aicpu_count > 0)
		sec_advise(a, a->kernel_time && a->aicpu_time * 10 >
		    a->kernel_time ? "High" : "Medium", "aicpu_ops",
		    "%" PRIu64 " AI_CPU kernels took %.3f ms (%.1f%% of device "
		    "kernel time): replace them with AI_CORE/AI_VECTOR ops",
		    a->aicpu_count, (double)a->aicpu_time / 1e6,
		    a->kernel_time ? 100.0 * (double)a->aicpu_time /
		    (double)a->kernel_time : 0);
}

static void
sec_apis(struct analysis *a)
{
	static const char *const cols[] = { "Level", "API Name", "Time(us)",
	    "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance" };
	struct table *t = table_new("api_statistic", "APIs (api statistic)",
	    8, cols);
	uint64_t mall = 0, sync = 0;

	an_sort(a->apis, a->napis, sizeof(*a->apis), sec_cmp_op);
	for (size_t i = 0; i < a->napis; i++) {
		struct an_op *o = &a->apis[i];
		const char *n = an_str_get(a, o->name);
		double avg = o->st.count ? US(o->st.total) /
		    (double)o->st.count : 0;
		double var = o->st.count ? an_stat_sumsq_us(&o->st) /
		    (double)o->st.count - avg * avg : 0;

		table_row(t);
		table_str(t, strncmp(n, "Hccl", 4) == 0 ? "hccl" : "acl");
		table_str(t, n);
		table_num(t, US(o->st.total), 3);
		table_u64(t, o->st.count);
		table_num(t, avg, 3);
		table_num(t, US(an_stat_min(&o->st)), 3);
		table_num(t, US(o->st.max), 3);
		table_num(t, var > 0 ? var : 0, 3);
		if (strstr(n, "Malloc") || strstr(n, "Free"))
			mall += o->st.total;
		if (strstr(n, "Synchronize"))
			sync += o->st.count;
	}
	a->tables[ANALYSIS_APIS] = t;
	if ((double)mall > a->o.malloc_ms * 1e6)
		sec_advise(a, "Medium", "malloc_free", "memory allocation APIs "
		    "(aclrtMalloc/Free) took %.3f ms in total (> %.0f ms): "
		    "use a caching allocator", (double)mall / 1e6,
		    a->o.malloc_ms);
	if (sync > 0 && a->launches > 0 && sync * 20 > a->launches)
		sec_advise(a, "Low", "sync_stream", "%" PRIu64 " stream "
		    "synchronizations for %" PRIu64 " launches: each stalls the "
		    "host until the device drains", sync, a->launches);
}

static void
sec_launch(struct analysis *a)
{
	static const char *const cols[] = { "Launches",
	    "CPU Runtime Avg(us)", "CPU Runtime Max(us)",
	    "Device Duration Avg(us)", "Launch Delay Avg(us)",
	    "Launch Delay Max(us)", "Runtime > thr", "Delay > thr",
	    "Short Kernels" };
	static const char *const ocols[] = { "Correlation ID", "Rank", "API",
	    "Kernel", "CPU Runtime(us)", "Device Duration(us)",
	    "Launch Delay(us)" };
	struct table *t = table_new("launch", "Launch statistics "
	    "(by correlation id)", 9, cols);
	double n = (double)(a->launches ? a->launches : 1);

	table_row(t);
	table_u64(t, a->launches);
	table_num(t, US(a->l_runtime.total) / n, 3);
	table_num(t, US(a->l_runtime.max), 3);
	table_num(t, US(a->l_dur.total) / n, 3);
	table_num(t, US(a->l_delay.total) / n, 3);
	table_num(t, US(a->l_delay.max), 3);
	table_u64(t, a->l_slow_runtime);
	table_u64(t, a->l_slow_delay);
	table_u64(t, a->l_short);
	a->tables[ANALYSIS_LAUNCH] = t;
	t = table_new("launch_outliers", "Worst launch delays", 7, ocols);
	for (size_t i = 0; i < a->nl_top && i < a->o.top_n; i++) {
		struct an_launch_out *o = &a->l_top[i];

		table_row(t);
		table_u64(t, o->corr);
		table_i64(t, o->rank);
		table_str(t, an_str_get(a, o->api));
		table_str(t, an_str_get(a, o->kernel));
		table_num(t, US(o->runtime), 3);
		table_num(t, US(o->dur), 3);
		table_num(t, US(o->delay), 3);
	}
	a->tables[ANALYSIS_LAUNCH_OUTLIERS] = t;
	if (a->l_slow_runtime > 0)
		sec_advise(a, a->l_slow_runtime * 10 > a->launches ? "Medium" :
		    "Low", "launch_runtime", "%" PRIu64 " of %" PRIu64
		    " launches spent over %.0f us in the runtime (max %.1f us)",
		    a->l_slow_runtime, a->launches, a->o.launch_runtime_us,
		    US(a->l_runtime.max));
	if (a->l_slow_delay > 0)
		sec_advise(a, a->l_slow_delay * 10 > a->launches ? "Medium" :
		    "Low", "launch_delay", "%" PRIu64 " of %" PRIu64
		    " launches started over %.0f us after the launch call "
		    "returned while the device had nothing else to run (max "
		    "delay %.1f us): the device waited for the host",
		    a->l_slow_delay, a->launches,
		    a->o.launch_delay_us, US(a->l_delay.max));
}

static void
sec_memory(struct analysis *a)
{
	static const char *const cols[] = { "Direction", "Count",
	    "Size(MB)", "Total Time(us)", "Avg Time(us)", "Bandwidth(GB/s)" };
	static const char *const mcols[] = { "Device_id", "Allocations",
	    "Frees", "Allocated(MB)", "Freed(MB)", "In Use at End(MB)",
	    "Peak(MB)", "Peak Time(us)" };
	struct table *t = table_new("memcpy", "Memcpy by direction", 6, cols);

	for (int k = 0; k < 6; k++) {
		struct an_stat *s = &a->memcpy_st[k];

		if (s->count == 0)
			continue;
		table_row(t);
		table_str(t, sec_memcpy_kind[k]);
		table_u64(t, s->count);
		table_num(t, (double)a->memcpy_bytes[k] / 1048576.0, 3);
		table_num(t, US(s->total), 3);
		table_num(t, US(s->total) / (double)s->count, 3);
		table_num(t, s->total ? (double)a->memcpy_bytes[k] /
		    (double)s->total : 0, 3);
	}
	a->tables[ANALYSIS_MEMCPY] = t;
	for (int k = 0; k < 6; k++)
		if (a->memcpy_misaligned[k] > 0)
			sec_advise(a, a->memcpy_misaligned[k] * 2 >
			    a->memcpy_st[k].count ? "Medium" : "Low",
			    "byte_alignment", "memcpy %s: %" PRIu64 " of %" PRIu64
			    " copies are not a multiple of 512 bytes: align "
			    "buffers and sizes to 512 bytes",
			    sec_memcpy_kind[k], a->memcpy_misaligned[k],
			    a->memcpy_st[k].count);
	t = table_new("memory", "Device memory (allocations, peak)", 8, mcols);
	for (size_t i = 0; i < a->ndevs; i++) {
		struct an_dev *d = &a->devs[i];

		table_row(t);
		table_i64(t, d->device == REC_NONE ? -1 : (int64_t)d->device);
		table_u64(t, d->allocs);
		table_u64(t, d->frees);
		table_num(t, (double)d->alloc_bytes / 1048576.0, 3);
		table_num(t, (double)d->free_bytes / 1048576.0, 3);
		table_num(t, (double)d->cur / 1048576.0, 3);
		table_num(t, (double)d->peak / 1048576.0, 3);
		table_num(t, d->peak_ts > a->base_ts ?
		    US(d->peak_ts - a->base_ts) : 0, 3);
	}
	a->tables[ANALYSIS_MEMORY] = t;
}

static void	sec_step_row(struct table *, int32_t,
		    const struct an_stepres *);

static void
sec_steps(struct analysis *a)
{
	static const char *const cols[] = { "Rank", "Step", "Step Time(us)",
	    "Computing(us)", "Communication(Not Overlapped)(us)",
	    "Overlapped(us)", "Communication(us)", "Free(us)", "Wait(us)",
	    "Transit(us)", "Memcpy(us)", "Data Loading(us)" };
	static const char *const rcols[] = { "Rank", "Pid", "Host",
	    "Clock Skew(us)", "Aligned", "Steps", "Step Time Avg(us)",
	    "Computing Avg(us)", "Communication Avg(us)", "Wait Avg(us)",
	    "Free Avg(us)", "Slow Votes" };
	struct table *t = table_new("steps", "Steps (per rank and step)", 12,
	    cols);
	struct table *r = table_new("ranks", "Ranks", 12, rcols);
	uint64_t gap_max = 0, gap_at = 0, dl_total = 0, dl_steps = 0;
	uint64_t lead_total = 0, lead_max = 0;
	int gap_rank = -1;
	double nov = 0, stept = 0;
	size_t ranked = 0, nrows = 0;

	for (size_t i = 0; i < a->nproc; i++) {
		if (a->proc[i]->rank >= 0)
			ranked++;
		nrows += a->proc[i]->nres;
	}
	table_reserve(t, nrows);
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];
		double sum[6] = { 0 };

		for (size_t j = 0; j < p->nres; j++) {
			struct an_stepres *s = &p->res[j];
			uint64_t len = s->end - s->start;

			sec_step_row(t, p->rank, s);
			sum[0] += (double)len;
			sum[1] += (double)s->compute;
			sum[2] += (double)s->comm;
			sum[3] += (double)s->wait;
			sum[4] += (double)s->free;
			nov += (double)(s->comm - s->overlap);
			stept += (double)len;
			if (s->step >= 0) {
				dl_total += s->data;
				dl_steps++;
			}
		}
		if (p->gap > gap_max) {
			gap_max = p->gap;
			gap_at = p->gap_at;
			gap_rank = p->rank;
		}
		lead_total += p->lead_total;
		if (p->lead_max > lead_max)
			lead_max = p->lead_max;
		/* A launcher (no rank, no steps) beside ranked processes is
		 * not a rank: leave it out of the ranks table. */
		if (p->rank < 0 && p->nsteps == 0 && ranked > 0)
			continue;
		table_row(r);
		table_i64(r, p->rank);
		table_u64(r, p->pid);
		table_str(r, p->src->host);
		table_num(r, (double)p->skew / 1e3, 3);
		/* On the common timeline: moved by its offset, or on the
		 * reference host's clock (moved by 0). */
		table_str(r, p->aligned && a->o.align != ANALYSIS_ALIGN_NEVER ?
		    "yes" : "no");
		/* Every step, when a sample of them is shown. */
		table_u64(r, p->step_w > 1 ? p->steps_seen : p->nsteps);
		for (int k = 0; k < 5; k++)
			table_num(r, p->nres ? sum[k] / 1e3 /
			    (double)p->nres : 0, 3);
		table_u64(r, p->votes);
	}
	a->tables[ANALYSIS_STEPS] = t;
	a->tables[ANALYSIS_RANKS] = r;
	if (stept > 0 && nov / stept > 0.2)
		sec_advise(a, nov / stept > 0.4 ? "High" : "Medium",
		    "comm_not_overlapped", "communication not overlapped with "
		    "computation is %.1f%% of step time: overlap gradient "
		    "all-reduce with backward compute", 100.0 * nov / stept);
	if ((double)gap_max > a->o.host_gap_ms * 1e6)
		sec_advise(a, (double)gap_max > 5 * a->o.host_gap_ms * 1e6 ?
		    "High" : "Medium", "host_gap", "rank %d: the device was "
		    "idle for %.1f ms at %.3f ms into the capture (> %.0f ms): "
		    "host-side stall (GC pause, I/O, Python)", gap_rank,
		    (double)gap_max / 1e6, gap_at > a->base_ts ?
		    (double)(gap_at - a->base_ts) / 1e6 : 0,
		    a->o.host_gap_ms);
	/* Data loading per step: the "data*" ranges, or else the time from
	 * the step's start to its first device work, whichever is larger. */
	if (dl_steps) {
		double dl = (double)dl_total / (double)dl_steps;
		double lead = (double)lead_total / (double)dl_steps;
		double v = dl > lead ? dl : lead;

		if (v > a->o.dataloader_ms * 1e6)
			sec_advise(a, v > 5 * a->o.dataloader_ms * 1e6 ?
			    "High" : "Medium", "dataloader", "data loading "
			    "takes %.2f ms per step (> %.0f ms; data ranges "
			    "%.2f ms, step start to first device work %.2f ms, "
			    "max %.2f ms): add dataloader workers or prefetch",
			    v / 1e6, a->o.dataloader_ms, dl / 1e6, lead / 1e6,
			    (double)lead_max / 1e6);
	}
}

static void
sec_slow(struct analysis *a)
{
	static const char *const cols[] = { "Verdict", "Rank", "Cause",
	    "Share of Step(%)", "Imbalance(%)", "Threshold(%)", "Noise(%)",
	    "Votes", "Detail" };
	struct table *t = table_new("slow_rank", "Slow rank", 9, cols);
	struct analysis_verdict *v = &a->verdict;
	uint64_t votes = 0, all = 0;
	char detail[320], vb[64];

	for (size_t i = 0; i < a->nproc; i++) {
		all += a->proc[i]->votes;
		if (a->proc[i]->rank == v->rank)
			votes = a->proc[i]->votes;
	}
	table_row(t);
	if (v->rank >= 0) {
		snprintf(detail, sizeof(detail), "rank %d is slow: %s "
		    "accounts for %.1f%% of its step time more than the "
		    "median rank (threshold %.2f%% from noise %.2f%% measured "
		    "across steps and ranks); the others wait for it in "
		    "collectives", v->rank, v->cause ? v->cause : "?",
		    100.0 * v->share, 100.0 * v->threshold,
		    100.0 * v->noise);
		table_str(t, "slow rank");
		table_i64(t, v->rank);
		table_str(t, v->cause ? v->cause : "");
		table_num(t, 100.0 * v->share, 2);
	} else {
		if (a->nproc > 1)
			snprintf(detail, sizeof(detail), "ranks are balanced: "
			    "no rank exceeds the others by more than the "
			    "threshold (%.2f%% of the step in compute, from "
			    "noise %.2f%%)", 100.0 * v->threshold,
			    100.0 * v->noise);
		else
			snprintf(detail, sizeof(detail), "needs two or more "
			    "ranks");
		table_str(t, "none");
		table_i64(t, -1);
		table_str(t, "");
		table_num(t, 0, 2);
	}
	table_num(t, 100.0 * v->imbalance, 2);
	table_num(t, 100.0 * v->threshold, 2);
	table_num(t, 100.0 * v->noise, 2);
	snprintf(vb, sizeof(vb), "%" PRIu64 "/%" PRIu64, votes, all);
	table_str(t, vb);
	table_str(t, detail);
	a->tables[ANALYSIS_SLOW_RANK] = t;
	if (v->rank >= 0)
		sec_advise(a, "High", "slow_rank", "rank %d is slow (%s, "
		    "%.1f%% of its step time more than the median rank; the "
		    "threshold from measured noise was %.2f%%)", v->rank,
		    v->cause ? v->cause : "?", 100.0 * v->share,
		    100.0 * v->threshold);
}

int
an_sections(struct analysis *a)
{
	static const char *const acols[] = { "Severity", "Rule", "Finding" };
	uint64_t comm_total;
	struct table *t;

	if (a->partial)
		sec_advise(a, "High", "partial_input", "the input is "
		    "incomplete (%zu warnings): numbers below cover only "
		    "what was captured", a->nwarn);
	sec_summary(a);
	sec_ops(a);
	sec_apis(a);
	sec_launch(a);
	sec_memory(a);
	sec_comm(a, &comm_total);
	sec_steps(a);
	sec_slow(a);
	an_sort(a->adv, a->nadv, sizeof(*a->adv), sec_cmp_adv);
	t = table_new("advice", "Advisor", 3, acols);
	for (size_t i = 0; i < a->nadv; i++) {
		table_row(t);
		table_str(t, a->adv[i].severity);
		table_str(t, a->adv[i].rule);
		table_str(t, a->adv[i].message);
	}
	a->tables[ANALYSIS_ADVICE] = t;
	return 0;
}

/* ---- text view of the sections that grow with the capture ---- */

/* Nearest-rank percentile of sorted v[n], n > 0. */
static uint64_t
sec_pct(const uint64_t *v, size_t n, unsigned pct)
{
	size_t k = (n * pct + 99) / 100;

	return v[k > 0 ? k - 1 : 0];
}

static const struct an_stepres *sec_sort_res;

/* Indexes into sec_sort_res: longest step first, then by step. */
static int
sec_cmp_slow(const void *x, const void *y)
{
	const struct an_stepres *a = &sec_sort_res[*(const size_t *)x];
	const struct an_stepres *b = &sec_sort_res[*(const size_t *)y];
	uint64_t la = a->end - a->start, lb = b->end - b->start;

	if (la != lb)
		return la > lb ? -1 : 1;
	return a->step < b->step ? -1 : a->step > b->step;
}

/* One row of the steps table's columns for step s of rank. */
static void
sec_step_row(struct table *t, int32_t rank, const struct an_stepres *s)
{
	table_row(t);
	table_i64(t, rank);
	if (s->step < 0)
		table_str(t, "all");
	else
		table_i64(t, s->step);
	table_num(t, US(s->end - s->start), 3);
	table_num(t, US(s->compute), 3);
	table_num(t, US(s->comm - s->overlap), 3);
	table_num(t, US(s->overlap), 3);
	table_num(t, US(s->comm), 3);
	table_num(t, US(s->free), 3);
	table_num(t, US(s->wait), 3);
	table_num(t, US(s->transit), 3);
	table_num(t, US(s->memcpy), 3);
	table_num(t, US(s->data), 3);
}

/*
 * The steps section for a terminal: per rank, a summary (count, step
 * time avg/p50/p90/max, average breakdown), then each rank's n slowest
 * steps, then one line saying how many were left out and where they are.
 */
static int
sec_steps_text(struct analysis *a, FILE *f)
{
	static const char *const scols[] = { "Rank", "Steps",
	    "Step Avg(us)", "Step P50(us)", "Step P90(us)", "Step Max(us)",
	    "Computing Avg(us)", "Comm Not Overlapped Avg(us)",
	    "Overlapped Avg(us)", "Comm Avg(us)", "Free Avg(us)",
	    "Wait Avg(us)", "Transit Avg(us)", "Memcpy Avg(us)",
	    "Data Loading Avg(us)" };
	const struct table *full = a->tables[ANALYSIS_STEPS];
	unsigned n = a->o.top_n;
	size_t total = 0, shown = 0, maxres = 0;
	struct table *sum, *slow;
	char title[128];
	int rc;

	for (size_t i = 0; i < a->nproc; i++) {
		total += a->proc[i]->nres;
		if (a->proc[i]->nres > maxres)
			maxres = a->proc[i]->nres;
	}
	if (maxres <= n)		/* short: the table itself */
		return table_print(full, TABLE_TEXT, f);
	snprintf(title, sizeof(title), "Steps (per rank: %zu steps in all)",
	    total);
	sum = table_new("steps_summary", title, sizeof(scols) /
	    sizeof(scols[0]), scols);
	snprintf(title, sizeof(title), "Slowest steps (%u per rank)", n);
	slow = table_new("steps_slowest", title, table_ncols(full),
	    (const char *const *)full->cols);
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];
		uint64_t *len;
		size_t *idx;
		double avg[9] = { 0 }, tot = 0, m;

		if (p->nres == 0)
			continue;
		len = malloc(p->nres * sizeof(*len));
		idx = malloc(p->nres * sizeof(*idx));
		if (len == NULL || idx == NULL)
			abort();
		for (size_t j = 0; j < p->nres; j++) {
			const struct an_stepres *s = &p->res[j];

			len[j] = s->end - s->start;
			idx[j] = j;
			tot += (double)len[j];
			avg[0] += (double)s->compute;
			avg[1] += (double)(s->comm - s->overlap);
			avg[2] += (double)s->overlap;
			avg[3] += (double)s->comm;
			avg[4] += (double)s->free;
			avg[5] += (double)s->wait;
			avg[6] += (double)s->transit;
			avg[7] += (double)s->memcpy;
			avg[8] += (double)s->data;
		}
		an_sort(len, p->nres, sizeof(*len), an_cmp_u64);
		m = (double)p->nres;
		table_row(sum);
		table_i64(sum, p->rank);
		table_u64(sum, p->nres);
		table_num(sum, tot / 1e3 / m, 3);
		table_num(sum, US(sec_pct(len, p->nres, 50)), 3);
		table_num(sum, US(sec_pct(len, p->nres, 90)), 3);
		table_num(sum, US(len[p->nres - 1]), 3);
		for (int k = 0; k < 9; k++)
			table_num(sum, avg[k] / 1e3 / m, 3);
		sec_sort_res = p->res;
		an_sort(idx, p->nres, sizeof(*idx), sec_cmp_slow);
		for (size_t j = 0; j < p->nres && j < n; j++, shown++)
			sec_step_row(slow, p->rank, &p->res[idx[j]]);
		free(len);
		free(idx);
	}
	rc = table_print(sum, TABLE_TEXT, f);
	fputc('\n', f);
	rc |= table_print(slow, TABLE_TEXT, f);
	fprintf(f, "(%zu of %zu steps not shown: `msptictl report "
	    "--steps-all` prints every step, --top N the N slowest per rank; "
	    "--json and --csv always list every step)\n", total - shown,
	    total);
	table_free(sum);
	table_free(slow);
	return rc != 0 || ferror(f) ? -EIO : 0;
}

__attribute__((visibility("default"))) int
analysis_print_text(struct analysis *a, enum analysis_section s, FILE *f)
{
	const struct table *t = analysis_table(a, s);

	if (t == NULL)
		return -EINVAL;
	if (s == ANALYSIS_STEPS)
		return sec_steps_text(a, f);
	return table_print(t, TABLE_TEXT, f);
}

/*
 * The analysis engine: ingestion.  Every record is folded into running
 * aggregates as it is read (per-name statistics through per-source arrays
 * indexed by the source's string ids, so the hot path does no hashing);
 * only compact device intervals, steps and collectives are kept for the
 * cross-record work done by analysis_run (analysis-sections.c).
 */
#include "config.h"

#include <sys/mman.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "trace.h"

#define AN_ATTR	__attribute__((visibility("default")))

void *
an_realloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL) {
		fputs("analysis: out of memory\n", stderr);
		abort();
	}
	return p;
}

/* Grows *v (elements of sz bytes, *cap of them) to hold n + 1. */
void
an_grow(void *vp, size_t *cap, size_t n, size_t sz)
{
	void **v = vp;

	if (n < *cap)
		return;
	*cap = *cap ? *cap * 2 : 64;
	*v = an_realloc(*v, *cap * sz);
}

void
analysis_opts_init(struct analysis_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->top_n = 10;
	o->step_marker = "step";
	o->data_marker = "data";
	o->launch_runtime_us = 50;
	o->launch_delay_us = 100;
	o->rank_imbalance = 0.01;
	o->rank_sigmas = 5;
	o->rank_host_floor = 0.03;
	o->dataloader_ms = 10;
	o->malloc_ms = 10;
	o->host_gap_ms = 200;
	o->comm_retrans_s = 4;
}

static uint32_t
an_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

const char *
an_str_get(const struct analysis *a, uint32_t id)
{
	return id < a->str.n ? a->str.v[id] : "";
}

/* The global id of s (interned on first use); 0 for "". */
uint32_t
an_str_intern(struct analysis *a, const char *s)
{
	struct an_str *t = &a->str;
	size_t i;

	if (s == NULL || *s == '\0')
		return 0;
	if (t->n * 2 >= t->htcap) {
		size_t ncap = t->htcap ? t->htcap * 2 : 1024;
		uint32_t *nh = an_realloc(NULL, ncap * sizeof(uint32_t));

		memset(nh, 0, ncap * sizeof(uint32_t));
		for (uint32_t id = 1; id < t->n; id++) {
			i = an_hash(t->v[id]) & (ncap - 1);
			while (nh[i] != 0)
				i = (i + 1) & (ncap - 1);
			nh[i] = id;
		}
		free(t->ht);
		t->ht = nh;
		t->htcap = ncap;
	}
	i = an_hash(s) & (t->htcap - 1);
	while (t->ht[i] != 0) {
		if (strcmp(t->v[t->ht[i]], s) == 0)
			return t->ht[i];
		i = (i + 1) & (t->htcap - 1);
	}
	an_grow(&t->v, &t->cap, t->n, sizeof(char *));
	t->v[t->n] = strdup(s);
	if (t->v[t->n] == NULL)
		abort();
	t->ht[i] = (uint32_t)t->n;
	return (uint32_t)t->n++;
}

void
an_warn(struct analysis *a, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	for (size_t i = 0; i < a->nwarn; i++)
		if (strcmp(a->warn[i], s) == 0) {
			free(s);
			return;
		}
	/* Bounded (a partial result carries at most as many): the last
	 * one says that more were left out. */
	if (a->nwarn >= AN_MAX_WARN - 1) {
		free(s);
		if (a->nwarn == AN_MAX_WARN)
			return;
		if ((s = strdup("more warnings left out")) == NULL)
			abort();
	}
	a->warn = an_realloc(a->warn, (a->nwarn + 2) * sizeof(char *));
	a->warn[a->nwarn++] = s;
	a->warn[a->nwarn] = NULL;
}

AN_ATTR struct analysis *
analysis_new(const struct analysis_opts *opts)
{
	struct analysis *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return NULL;
	if (opts != NULL)
		a->o = *opts;
	else
		analysis_opts_init(&a->o);
	if (a->o.top_n == 0)
		a->o.top_n = 10;
	if (a->o.step_marker == NULL)
		a->o.step_marker = "step";
	if (a->o.data_marker == NULL)
		a->o.data_marker = "data";
	if (a->o.small_packet_ratio <= 0)
		a->o.small_packet_ratio = 0.2;
	a->l_runtime_ns = a->o.launch_runtime_us * 1e3;
	a->l_delay_ns = a->o.launch_delay_us * 1e3;
	an_grow(&a->str.v, &a->str.cap, 0, sizeof(char *));
	a->str.v[0] = strdup("");
	a->str.n = 1;
	a->step_gid = an_str_intern(a, a->o.step_marker);
	return a;
}

static void
an_union_free(struct an_union *u)
{
	free(u->s);
	free(u->e);
	free(u->pre);
}

AN_ATTR void
analysis_free(struct analysis *a)
{
	if (a == NULL)
		return;
	for (size_t i = 0; i < a->nsrc; i++) {
		struct analysis_source *s = a->src[i];

		free(s->name);
		free(s->path);
		free(s->host);
		free(s->map);
		free(s->op_of);
		free(s->api_of);
		free(s);
	}
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];

		free(p->coll[0]);
		free(p->coll[1]);
		free(p->steps);
		free(p->open);
		free(p->res);
		an_pend_free(p);
		an_sweep_free(p);
		an_union_free(&p->u_comp);
		an_union_free(&p->u_comm);
		free(p);
	}
	for (size_t i = 0; i < a->str.n; i++)
		free(a->str.v[i]);
	free(a->str.v);
	free(a->str.ht);
	for (size_t i = 0; i < a->nwarn; i++)
		free(a->warn[i]);
	free(a->warn);
	for (size_t i = 0; i < a->nadv; i++)
		free((char *)a->adv[i].message);
	free(a->adv);
	for (int i = 0; i < ANALYSIS_SECTION_MAX; i++)
		table_free(a->tables[i]);
	free(a->src);
	free(a->proc);
	free(a->ops);
	free(a->op_first);
	free(a->orph);
	free(a->apis);
	free(a);
}

AN_ATTR struct analysis_source *
analysis_source_new(struct analysis *a, const char *name, const char *host)
{
	struct analysis_source *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->a = a;
	s->name = strdup(name ? name : "-");
	s->host = strdup(host ? host : "");
	s->reorder_ns = a->o.reorder_ns ? a->o.reorder_ns :
	    ANALYSIS_REORDER_NS;
	if (s->name == NULL || s->host == NULL) {
		free(s->name);
		free(s->host);
		free(s);
		return NULL;
	}
	a->src = an_realloc(a->src, (a->nsrc + 1) * sizeof(*a->src));
	a->src[a->nsrc++] = s;
	return s;
}

AN_ATTR int
analysis_source_string(struct analysis_source *src, uint32_t id,
    const char *str)
{
	uint32_t g;

	if (id == 0)
		return 0;
	if (id >= src->nmap) {
		size_t n = src->nmap ? src->nmap : 256;

		while (n <= id)
			n *= 2;
		src->map = an_realloc(src->map, n * sizeof(uint32_t));
		memset(src->map + src->nmap, 0,
		    (n - src->nmap) * sizeof(uint32_t));
		src->nmap = n;
	}
	g = an_str_intern(src->a, str);
	/* An id given another string (a direct feed may; a file may not):
	 * the op and API caches by local id no longer hold. */
	if (src->map[id] != 0 && src->map[id] != g) {
		memset(src->op_of, 0, src->nop_of * sizeof(*src->op_of));
		memset(src->api_of, 0, src->napi_of * sizeof(*src->api_of));
	}
	src->map[id] = g;
	return 0;
}

static inline uint32_t
an_gid(const struct analysis_source *src, uint32_t id)
{
	return id < src->nmap ? src->map[id] : 0;
}

AN_ATTR void
analysis_source_losses(struct analysis_source *src,
    const uint64_t losses[LOSS_STAGE_MAX])
{
	for (int i = 0; i < LOSS_STAGE_MAX; i++)
		src->losses[i] += losses[i];
}

struct an_proc *
an_proc_lookup(struct analysis_source *src, uint32_t pid)
{
	struct analysis *a = src->a;
	struct an_proc *p;

	for (size_t i = 0; i < a->nproc; i++)
		if (a->proc[i]->src == src && a->proc[i]->pid == pid) {
			src->last = a->proc[i];
			return src->last;
		}
	p = an_realloc(NULL, sizeof(*p));
	memset(p, 0, sizeof(*p));
	p->src = src;
	p->pid = pid;
	p->idx = (uint32_t)a->nproc;
	p->seq = a->seq;
	p->rank = p->local_rank = p->world_size = -1;
	p->step_base = -1;
	p->safe_static = UINT64_MAX;
	a->proc = an_realloc(a->proc, (a->nproc + 1) * sizeof(*a->proc));
	a->proc[a->nproc++] = p;
	src->last = p;
	return p;
}

/*
 * The daemon's record of a process leaving a steps window says which
 * steps it recorded ("...; steps K..M ..."): its steps are K onwards
 * (K bounded as in partial results).  Only a process already seen (a
 * leave names no new one).
 */
static void
an_session_leave(struct analysis_source *src, const struct rec_session *r)
{
	struct analysis *a = src->a;
	const char *d, *at;
	long long k, m;

	if (r->pid == 0 || r->detail_id == 0 ||
	    (d = an_str_get(a, an_gid(src, r->detail_id))) == NULL)
		return;
	for (at = d; (at = strstr(at, "steps ")) != NULL; at++)
		if ((at == d || (at >= d + 2 && at[-2] == ';' &&
		    at[-1] == ' ')) &&
		    sscanf(at, "steps %lld..%lld", &k, &m) == 2 && k >= 0 &&
		    m >= k && k <= (1ll << 53))
			break;
	if (at == NULL)
		return;
	for (size_t i = 0; i < a->nproc; i++)
		if (a->proc[i]->src == src && a->proc[i]->pid == r->pid) {
			a->proc[i]->step_base = k;
			return;
		}
}

/* Converts device time t of device to host time with the source's model. */
uint64_t
an_dev_time(const struct analysis_source *src, uint32_t device, uint64_t t)
{
	for (size_t i = src->nclocks; i-- > 0;) {
		const struct rec_clock_sync *c = &src->clocks[i];

		if (c->device != device)
			continue;
		return (uint64_t)((double)c->host_ref_ns + ((double)t -
		    (double)c->device_ref_ns) * (1.0 + c->drift));
	}
	return t;
}

static void
an_proc_ts(struct an_proc *p, uint64_t s, uint64_t e)
{
	if (p->first_ts == 0 || s < p->first_ts)
		p->first_ts = s;
	if (e > p->last_ts)
		p->last_ts = e;
}

static inline void
an_host_ts(struct an_proc *p, uint64_t t)
{
	if (t > p->host_ts)
		p->host_ts = t;
}

/* Makes a source's cache by local name id (*v, *n entries of sz bytes,
 * zeros: not cached) hold id. */
static void
an_id_cache_fit(void *v, size_t *n, uint32_t id, size_t sz)
{
	char **vp = v;
	size_t c;

	if (id < *n)
		return;
	c = *n ? *n : 256;
	while (c <= id)
		c *= 2;
	*vp = an_realloc(*vp, c * sz);
	memset(*vp + *n * sz, 0, (c - *n) * sz);
	*n = c;
}

/* The index + 1 of the op of local ids (name_id, type_id) in a's ops,
 * made on first sight, cached in src: an_op_add's way past its cache. */
static __attribute__((noinline)) uint32_t
an_op_miss(struct analysis_source *src, uint32_t name_id, uint32_t type_id)
{
	struct analysis *a = src->a;
	uint32_t gname = an_gid(src, name_id), gtype = an_gid(src, type_id);
	size_t i;

	for (i = 0; i < a->nops; i++)
		if (a->ops[i].name == gname && a->ops[i].type == gtype)
			break;
	if (i == a->nops)
		an_op_new(a, gname, gtype, strstr(an_str_get(a, gtype), "CPU") !=
		    NULL, a->seq);
	/* Not while an id is not defined yet (a record before its string,
	 * from a direct feed): its string may come, and the op change. */
	if ((gname != 0 || name_id == 0) && (gtype != 0 || type_id == 0)) {
		an_id_cache_fit(&src->op_of, &src->nop_of, name_id,
		    sizeof(*src->op_of));
		src->op_of[name_id] = (uint64_t)type_id << 32 |
		    ((uint32_t)i + 1);
	}
	return (uint32_t)i + 1;
}

/* Folds a kernel duration into the op statistics via the source's cache
 * (by its local ids: no string lookup on a hit); returns the op.  Inline:
 * one a kernel record. */
static inline __attribute__((always_inline)) struct an_op *
an_op_add(struct analysis_source *src, uint32_t name_id, uint32_t type_id,
    uint64_t dur)
{
	struct analysis *a = src->a;
	uint64_t c = name_id < src->nop_of ? src->op_of[name_id] : 0;
	uint32_t idx = (uint32_t)c;
	struct an_op *op;

	if (idx == 0 || c >> 32 != type_id)
		idx = an_op_miss(src, name_id, type_id);
	op = &a->ops[idx - 1];
	an_stat_add(&op->st, dur);
	return op;
}

/* The same for an API of local name id in a's apis. */
static __attribute__((noinline)) uint32_t
an_api_miss(struct analysis_source *src, uint32_t name_id)
{
	struct analysis *a = src->a;
	uint32_t g = an_gid(src, name_id);
	size_t i;

	for (i = 0; i < a->napis; i++)
		if (a->apis[i].name == g)
			break;
	if (i == a->napis) {
		an_grow(&a->apis, &a->capis, a->napis, sizeof(*a->apis));
		memset(&a->apis[i], 0, sizeof(a->apis[i]));
		a->apis[i].name = g;
		a->apis[i].seq = a->seq;
		a->napis++;
	}
	if (g != 0 || name_id == 0) {	/* as an_op_miss */
		an_id_cache_fit(&src->api_of, &src->napi_of, name_id,
		    sizeof(*src->api_of));
		src->api_of[name_id] = (uint32_t)i + 1;
	}
	return (uint32_t)i + 1;
}

/* The same for an API call's duration; returns its entry. */
static inline __attribute__((always_inline)) struct an_op *
an_api_add(struct analysis_source *src, uint32_t name_id, uint64_t dur)
{
	struct analysis *a = src->a;
	uint32_t idx = name_id < src->napi_of ? src->api_of[name_id] : 0;

	if (idx == 0)
		idx = an_api_miss(src, name_id);
	an_stat_add(&a->apis[idx - 1].st, dur);
	return &a->apis[idx - 1];
}

/*
 * A process's launch join table (AN_PEND_SIZE slots, 4 MiB), mapped on
 * its first correlated record, so that processes without launches (a
 * cluster's many ranks of collectives, a launcher) cost nothing, and its
 * pages come in as they are used.  A page's first touch is a write
 * (an_pend_touch): from calloc the first probe of a page, a read, mapped
 * the shared zero page and the write after it faulted again, a
 * copy-on-write whose TLB shootdown interrupted every CPU the report's
 * threads ran on (a quarter of the analysing thread's time on 4 files
 * with --jobs 2).  Mapping it populated instead cost 1 ms a table, what
 * a report over many small rank files would pay for every one.
 */
static struct an_pend *
an_pend_table(struct an_proc *p)
{
	void *m;

	m = mmap(NULL, AN_PEND_SIZE * sizeof(struct an_pend), PROT_READ |
	    PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		fputs("analysis: out of memory\n", stderr);
		abort();
	}
	memset(p->pend_touched, 0, sizeof(p->pend_touched));
	p->pend_left = AN_PEND_PAGES;
	return p->pend = m;
}

/* Writes to the page slot lies on before anything reads it.  Once every
 * page is in (a process past AN_PEND_SIZE launches; ids count up), one
 * test. */
static inline void
an_pend_touch(struct an_proc *p, const struct an_pend *slot)
{
	size_t pg;

	if (p->pend_left == 0)
		return;
	pg = (size_t)(slot - p->pend) / (AN_PAGE / sizeof(struct an_pend));
	if (!(p->pend_touched[pg / 64] & (1ull << (pg % 64)))) {
		p->pend_touched[pg / 64] |= 1ull << (pg % 64);
		*(volatile char *)((char *)p->pend + pg * AN_PAGE) = 0;
		p->pend_left--;
	}
}

void
an_pend_free(struct an_proc *p)
{
	if (p->pend != NULL)
		munmap(p->pend, AN_PEND_SIZE * sizeof(struct an_pend));
	p->pend = NULL;
}

/* Launch API time of a device name with no op yet (an_launch): it waits
 * for the name's first op (an_orphans_settle). */
static __attribute__((noinline)) void
an_launch_orphan(struct analysis *a, uint32_t name, uint64_t rt)
{
	struct an_orphan *o = NULL;

	for (size_t i = a->norph; i-- > 0;)
		if (a->orph[i].name == name) {
			o = &a->orph[i];
			break;
		}
	if (o == NULL) {
		an_grow(&a->orph, &a->corph, a->norph, sizeof(*a->orph));
		o = &a->orph[a->norph++];
		*o = (struct an_orphan){ name, 0, 0, a->seq };
	}
	o->total += rt;
	o->count++;
}

/* A launch among the worst delays so far (an_launch): into the small
 * insertion-sorted array. */
static __attribute__((noinline)) void
an_launch_top(struct analysis *a, const struct an_launch_out *l)
{
	size_t i = a->nl_top < 32 ? a->nl_top++ : 31;

	while (i > 0 && a->l_top[i - 1].delay < l->delay) {
		a->l_top[i] = a->l_top[i - 1];
		i--;
	}
	a->l_top[i] = *l;
}

/* A launch joined: API [as, ae] (name aname) launched device work [ds,
 * de] (name dname) in a process whose device work seen before it ended at
 * dprev.  Its delay is a stall only for the part the device was idle: a
 * kernel that waited behind the process's earlier device work was
 * queued, not stalled (a compute-bound loop keeps a deep queue).  Inline
 * in an_join, its rare parts out of line. */
static inline __attribute__((always_inline)) void
an_launch(struct analysis_source *src, struct an_proc *p, uint64_t corr,
    uint64_t as, uint64_t ae, uint32_t aname, uint64_t ds, uint64_t de,
    uint64_t dprev, uint32_t dname)
{
	struct analysis *a = src->a;
	uint64_t rt = ae - as, dur = de - ds;
	uint64_t delay = ds > ae ? ds - ae : 0;
	uint64_t ready = ae > dprev ? ae : dprev;
	uint64_t stall = ds > ready ? ds - ready : 0;
	size_t i;

	a->launches++;
	an_stat_add(&a->l_runtime, rt);
	an_stat_add(&a->l_dur, dur);
	an_stat_add(&a->l_delay, delay);
	if ((double)rt > a->l_runtime_ns)
		a->l_slow_runtime++;
	if ((double)stall > a->l_delay_ns)
		a->l_slow_delay++;
	if (dur < rt)
		a->l_short++;
	/* The host side of the op (key_averages' CPU time): the first op
	 * of that name; until there is one, it waits. */
	if (dname != 0 && dname < a->nop_first &&
	    (i = a->op_first[dname]) != 0) {
		a->ops[i - 1].host_total += rt;
		a->ops[i - 1].host_count++;
	} else if (dname != 0)
		an_launch_orphan(a, dname, rt);
	if (a->nl_top < 32 || delay > a->l_top[31].delay)
		an_launch_top(a, &(struct an_launch_out){ corr, aname, dname,
		    rt, dur, delay, p->rank, a->seq });
}

static inline __attribute__((always_inline)) void
an_join(struct analysis_source *src, struct an_proc *p, uint64_t corr,
    uint64_t s, uint64_t e, uint32_t gname, int is_dev)
{
	struct an_pend *pend, *slot;
	uint64_t prev_end;

	if (corr == 0)
		return;
	pend = p->pend != NULL ? p->pend : an_pend_table(p);
	slot = &pend[corr & (AN_PEND_SIZE - 1)];
	an_pend_touch(p, slot);
	/* Ids count up: the slots of the next launches are last touched a
	 * table ago, so fetch them ahead of their records. */
	__builtin_prefetch(&pend[(corr + 16) & (AN_PEND_SIZE - 1)], 1);
	/* Device records of a process come in about start order. */
	prev_end = p->launch_dev_end;
	if (is_dev && e > p->launch_dev_end)
		p->launch_dev_end = e;
	if (slot->corr == corr && slot->pid == p->pid &&
	    slot->is_dev != is_dev) {
		if (is_dev) {
			an_launch(src, p, corr, slot->start, slot->end,
			    slot->name, s, e, prev_end, gname);
			/* 1:N launches: keep the API for further device
			 * work. */
			return;
		}
		an_launch(src, p, corr, s, e, gname, slot->start, slot->end,
		    slot->prev_end, slot->name);
	}
	/* Field by field: a copy of a struct built on the stack stalled
	 * on its narrow stores. */
	slot->corr = corr;
	slot->start = s;
	slot->end = e;
	slot->prev_end = is_dev ? prev_end : 0;
	slot->name = gname;
	slot->pid = p->pid;
	slot->is_dev = (uint8_t)is_dev;
}

static void
an_coll_add(struct an_proc *p, int which, uint64_t s, uint64_t e,
    uint64_t bytes, uint32_t name, uint32_t comm, uint32_t alg, uint32_t rseq)
{
	struct an_coll *c;

	an_grow(&p->coll[which], &p->ccoll[which], p->ncoll[which],
	    sizeof(struct an_coll));
	c = &p->coll[which][p->ncoll[which]++];
	memset(c, 0, sizeof(*c));
	c->start = s;
	c->end = e;
	c->bytes = bytes;
	c->name = name;
	c->comm = comm;
	c->alg = alg;
	c->rseq = rseq;
	c->w = 1;
}

static size_t
an_dtype_size(uint32_t t)
{
	static const unsigned char sz[] = { 1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8,
	    2, 16, 0, 1, 1, 1, 1 };

	return t < sizeof(sz) && sz[t] ? sz[t] : 1;
}

struct an_dev *
an_dev_get(struct analysis *a, uint32_t device)
{
	for (size_t i = 0; i < a->ndevs; i++)
		if (a->devs[i].device == device)
			return &a->devs[i];
	if (a->ndevs == 65)
		return &a->devs[64];
	memset(&a->devs[a->ndevs], 0, sizeof(a->devs[0]));
	a->devs[a->ndevs].device = device;
	return &a->devs[a->ndevs++];
}

void
an_clock_sync(struct analysis_source *src, const struct rec_clock_sync *c)
{
	if (src->nclocks == 64)
		memmove(src->clocks, src->clocks + 1,
		    63 * sizeof(src->clocks[0]));
	else
		src->nclocks++;
	src->clocks[src->nclocks - 1] = *c;
}

void
an_mem_dev(struct analysis *a, const struct rec_memory *r)
{
	struct an_dev *d = an_dev_get(a, r->device);

	if (r->op == 0) {
		d->allocs++;
		d->alloc_bytes += r->bytes;
		d->cur += (int64_t)r->bytes;
	} else {
		d->frees++;
		d->free_bytes += r->bytes;
		d->cur -= (int64_t)r->bytes;
	}
	if (d->cur > d->peak) {
		d->peak = d->cur;
		d->peak_ts = r->end;
	}
}

/* A step range's END that withdraws it (record.h): no step. */
static bool
an_withdrawn(struct analysis_source *src, const struct rec_marker *m)
{
	return m->domain_id != 0 && strcmp(an_str_get(src->a, an_gid(src,
	    m->domain_id)), REC_STEPS_WITHDRAWN_DOMAIN) == 0;
}

static void
an_marker(struct analysis_source *src, const struct rec_marker *m)
{
	struct analysis *a = src->a;
	struct an_proc *p;
	const char *name;

	if (m->source_kind != 0)
		return;		/* device-side copies of host ranges */
	p = an_proc_find(src, m->pid);
	an_proc_ts(p, m->timestamp, m->timestamp);
	an_host_ts(p, m->timestamp);
	if (m->flag & 2u) {		/* MARKER_START */
		if (p->nopen == AN_OPEN_MAX) {
			/* Give up the oldest half at once (amortized). */
			memmove(p->open, p->open + AN_OPEN_MAX / 2,
			    (AN_OPEN_MAX / 2) * sizeof(p->open[0]));
			p->nopen -= AN_OPEN_MAX / 2;
			p->open_evicted += AN_OPEN_MAX / 2;
		}
		an_grow(&p->open, &p->copen, p->nopen, sizeof(*p->open));
		p->nopen++;
		p->open[p->nopen - 1].id = m->id;
		p->open[p->nopen - 1].ts = m->timestamp;
		p->open[p->nopen - 1].name = an_gid(src, m->name_id);
		if (p->open[p->nopen - 1].name == a->step_gid) {
			const char *dom = m->domain_id ? an_str_get(a,
			    an_gid(src, m->domain_id)) : NULL;

			p->step_src |= dom != NULL &&
			    strcmp(dom, REC_STEPS_SYNC_DOMAIN) == 0 ?
			    AN_STEPS_SYNC : AN_STEPS_MSTX;
			an_sweep_markers(a, p);
		}
		return;
	}
	if (!(m->flag & 4u))
		return;
	for (size_t i = p->nopen; i-- > 0;) {
		if (p->open[i].id != m->id)
			continue;
		uint64_t ts = p->open[i].ts;
		uint32_t gname = p->open[i].name;

		name = an_str_get(a, gname);
		memmove(p->open + i, p->open + i + 1,
		    (p->nopen - i - 1) * sizeof(p->open[0]));
		p->nopen--;
		if (gname == a->step_gid && m->timestamp >= ts &&
		    !an_withdrawn(src, m)) {
			an_sweep_step(a, p, ts, m->timestamp, -1);
		} else if (*a->o.data_marker != '\0' &&
		    strncmp(name, a->o.data_marker,
		    strlen(a->o.data_marker)) == 0 &&
		    m->timestamp > ts) {
			an_grow(&p->data, &p->cdata, p->ndata,
			    sizeof(*p->data));
			p->data[p->ndata].start = ts;
			p->data[p->ndata].dur = m->timestamp - ts >
			    UINT32_MAX ? UINT32_MAX :
			    (uint32_t)(m->timestamp - ts);
			p->data[p->ndata++].cls = 0;
		}
		if (gname == a->step_gid)
			an_sweep_markers(a, p);
		break;
	}
}

/*
 * The common start of a device work record: NULL for a host launch (the
 * device record counts instead); else its process, with *s and *e its
 * times in host time, already in the process's span.
 */
static inline struct an_proc *
an_work(struct analysis_source *src, const struct rec_hdr *h, uint64_t start,
    uint64_t end, uint32_t dev, uint32_t pid, uint64_t *s, uint64_t *e)
{
	struct an_proc *p;

	if (h->aux & REC_F_HOST_LAUNCH)
		return NULL;
	*s = start;
	*e = end;
	if (h->aux & REC_F_DEVICE_CLOCK) {
		*s = an_dev_time(src, dev, *s);
		*e = an_dev_time(src, dev, *e);
		if (*e < *s)
			*e = *s;
	}
	p = an_proc_find(src, pid);
	an_proc_ts(p, *s, *e);
	return p;
}

/* One record into the analysis (analysis_source_add); inlined in the
 * loop of an_add_run, so a chunk's records pay one call. */
static inline __attribute__((always_inline)) int
an_add(struct analysis_source *src, const struct rec_hdr *h)
{
	struct analysis *a = src->a;
	struct an_proc *p;
	struct an_op *op;
	uint64_t s, e;
	uint32_t gname;

	a->seq++;
	if (h->type >= REC_TYPE_MAX)
		return -EBADMSG;
	a->counts[h->type]++;
	a->records++;
	src->records++;
	switch (h->type) {
	case REC_KERNEL: {
		const struct rec_kernel *k = (const void *)h;

		if ((p = an_work(src, h, k->start, k->end, k->device,
		    k->pid, &s, &e)) == NULL)
			break;
		a->kernel_time += e - s;
		p->kernel_time += e - s;
		op = an_op_add(src, k->name_id, k->type_id, e - s);
		gname = op->name;
		if (op->aicpu) {
			a->aicpu_count++;
			a->aicpu_time += e - s;
		}
		an_sweep_add(a, p, s, e, AN_COMPUTE);
		an_join(src, p, k->correlation_id, s, e, gname, 1);
		break;
	}
	case REC_API: {
		const struct rec_api *r = (const void *)h;

		p = an_proc_find(src, r->pid);
		an_proc_ts(p, r->start, r->end);
		an_host_ts(p, r->end);
		gname = an_api_add(src, r->name_id, r->end - r->start)->name;
		p->api_time += r->end - r->start;
		an_join(src, p, r->correlation_id, r->start, r->end, gname,
		    0);
		break;
	}
	case REC_MEMCPY: {
		const struct rec_memcpy *r = (const void *)h;
		unsigned k = r->copy_kind < 6 ? r->copy_kind : 0;

		if ((p = an_work(src, h, r->start, r->end, r->device,
		    r->pid, &s, &e)) == NULL)
			break;
		an_stat_add(&a->memcpy_st[k], e - s);
		a->memcpy_bytes[k] += r->bytes;
		if (r->bytes % 512)
			a->memcpy_misaligned[k]++;
		an_sweep_add(a, p, s, e, AN_MEMCPY);
		an_join(src, p, r->correlation_id, s, e, 0, 1);
		break;
	}
	case REC_MEMSET: {
		const struct rec_memset *r = (const void *)h;

		if ((p = an_work(src, h, r->start, r->end, r->device,
		    r->pid, &s, &e)) == NULL)
			break;
		an_sweep_add(a, p, s, e, AN_MEMCPY);
		break;
	}
	case REC_MEMORY: {
		const struct rec_memory *r = (const void *)h;

		p = an_proc_find(src, r->pid);
		an_proc_ts(p, r->start, r->end);
		if (!src->no_mem_dev)
			an_mem_dev(a, r);
		break;
	}
	case REC_HCCL: {
		const struct rec_hccl *r = (const void *)h;

		if ((p = an_work(src, h, r->start, r->end, r->device,
		    r->pid, &s, &e)) == NULL)
			break;
		an_sweep_add(a, p, s, e, AN_COMM_H);
		an_coll_add(p, 1, s, e, (uint64_t)(r->bandwidth *
		    (double)(e - s)), an_gid(src, r->name_id),
		    an_gid(src, r->comm_name_id), 0, r->seq);
		break;
	}
	case REC_COMMUNICATION: {
		const struct rec_communication *r = (const void *)h;

		if ((p = an_work(src, h, r->start, r->end, r->device,
		    r->pid, &s, &e)) == NULL)
			break;
		an_sweep_add(a, p, s, e, AN_COMM_C);
		an_coll_add(p, 0, s, e, r->count * an_dtype_size(r->data_type),
		    an_gid(src, r->name_id), an_gid(src, r->comm_name_id),
		    an_gid(src, r->alg_type_id), r->seq);
		an_join(src, p, r->correlation_id, s, e,
		    an_gid(src, r->name_id), 1);
		break;
	}
	case REC_MARKER:
		an_marker(src, (const void *)h);
		break;
	case REC_STRING_DEF: {
		const struct rec_string_def *d = (const void *)h;

		return analysis_source_string(src, d->id, d->bytes);
	}
	case REC_PROCESS: {
		const struct rec_process *r = (const void *)h;

		p = an_proc_find(src, r->pid);
		p->rank = r->rank;
		p->local_rank = r->local_rank;
		p->world_size = r->world_size;
		p->job = an_gid(src, r->job_id);
		p->exe = an_gid(src, r->exe_id);
		break;
	}
	case REC_CLOCK_SYNC:
		an_clock_sync(src, (const void *)h);
		break;
	case REC_LOSS: {
		const struct rec_loss *r = (const void *)h;

		if (r->stage < LOSS_STAGE_MAX)
			src->loss_records[r->stage] += r->count;
		break;
	}
	case REC_SESSION:
		if (h->aux == SESSION_EV_AGENT_LEAVE)
			an_session_leave(src, (const void *)h);
		break;
	case REC_STEP: {
		const struct rec_step *r = (const void *)h;

		p = an_proc_find(src, r->pid);
		p->step_recs = true;
		p->step_src |= AN_STEPS_RECS;
		an_host_ts(p, r->end);
		if (r->end >= r->start)
			an_sweep_step(a, p, r->start, r->end,
			    (int64_t)r->step);
		break;
	}
	default:
		break;
	}
	return 0;
}

AN_ATTR int
analysis_source_add(struct analysis_source *src, const struct rec_hdr *h)
{
	return an_add(src, h);
}

void
an_add_run(struct analysis_source *src, const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		const struct rec_hdr *h = (const void *)p;

		an_add(src, h);
		p += h->size;
	}
}

/* Opens path for analysis_add_file (its read-ahead started). */
static int
an_open(struct analysis *a, const char *path, struct trace_reader **rp)
{
	int rc;

	if ((rc = trace_reader_open(path, rp)) != 0)
		return rc;
	if (a->o.jobs > 1) {
		unsigned k = an_shard_plan(a->o.jobs);

		if (k > 1) {
			/* What a file's shards hold at most (an_shards),
			 * and their index of each chunk. */
			trace_reader_hold(*rp, AN_SHARD_QUEUE);
			trace_reader_set_chunk_fn(*rp, an_shard_index);
		}
		trace_reader_set_threads(*rp, a->o.jobs - k);
	}
	return 0;
}

/* The source of the file open in r (analysis-int.h). */
struct analysis_source *
an_src_open(struct analysis *a, const char *path, struct trace_reader *r)
{
	const struct trace_header *th = trace_reader_header(r);
	struct analysis_source *src;

	src = analysis_source_new(a, path, th->hostname);
	if (src == NULL)
		return NULL;
	src->path = strdup(path);
	/* The writer's bound on how late it writes device records. */
	for (size_t i = 0; i < th->nconfig && a->o.reorder_ns == 0; i++) {
		unsigned long long v;
		char *end;

		if (strcmp(th->config[i].key, "max_lateness_ns") != 0)
			continue;
		v = strtoull(th->config[i].value, &end, 10);
		if (*end != '\0' || v == 0)
			continue;
		v += 1000000000ull;
		if (v > ANALYSIS_REORDER_MAX_NS)
			v = ANALYSIS_REORDER_MAX_NS;
		if (v > src->reorder_ns)
			src->reorder_ns = v;
	}
	for (size_t i = 0; i < th->nclocks && src->nclocks < 64; i++)
		src->clocks[src->nclocks++] = th->clocks[i];
	return src;
}

/* Analyses the file open in r (or its open error rc); closes r. */
static int
an_file(struct analysis *a, const char *path, struct trace_reader *r,
    int rc)
{
	struct analysis_source *src;
	const struct trace_footer *ft;
	struct trace_reader_stats st;

	a->files++;
	if (rc != 0) {
		an_warn(a, "%s: cannot read: %s", path, trace_strerror(rc));
		a->partial = true;
		return rc;
	}
	if ((src = an_src_open(a, path, r)) == NULL) {
		trace_reader_close(r);
		return -ENOMEM;
	}
	rc = an_shards(a, src, r, path);
	trace_reader_get_stats(r, &st);
	ft = trace_reader_footer(r);
	if (ft != NULL)
		analysis_source_losses(src, ft->losses);
	else if (st.truncated || rc < 0)
		src->truncated = true;
	if (st.bad_records > 0)
		an_warn(a, "%s: %" PRIu64 " malformed records skipped", path,
		    st.bad_records);
	trace_reader_close(r);
	return rc < 0 ? rc : 0;
}

AN_ATTR int
analysis_add_file(struct analysis *a, const char *path)
{
	struct trace_reader *r = NULL;
	int rc = an_open(a, path, &r);

	return an_file(a, path, r, rc);
}

AN_ATTR size_t
analysis_add_files(struct analysis *a, char *const *paths, size_t n)
{
	struct trace_reader *r = NULL, *next = NULL;
	int rc, nrc = 0;
	size_t ok = 0;

	if (n == 0)
		return 0;
	rc = an_open(a, paths[0], &r);
	for (size_t i = 0; i < n; i++) {
		/* The next file's workers start while this one is read. */
		if (i + 1 < n && a->o.jobs > 1)
			nrc = an_open(a, paths[i + 1], &next);
		if (an_file(a, paths[i], r, rc) == 0)
			ok++;
		if (i + 1 < n) {
			if (a->o.jobs > 1) {
				r = next;
				rc = nrc;
				next = NULL;
			} else
				rc = an_open(a, paths[i + 1], &r);
		}
	}
	return ok;
}

AN_ATTR const struct table *
analysis_table(struct analysis *a, enum analysis_section s)
{
	if (!a->ran || (unsigned)s >= ANALYSIS_SECTION_MAX)
		return NULL;
	return a->tables[s];
}

static const char *const an_section_names[ANALYSIS_SECTION_MAX] = {
	[ANALYSIS_SUMMARY] = "summary",
	[ANALYSIS_OPS] = "ops",
	[ANALYSIS_TOP_KERNELS] = "top_kernels",
	[ANALYSIS_APIS] = "apis",
	[ANALYSIS_LAUNCH] = "launch",
	[ANALYSIS_LAUNCH_OUTLIERS] = "launch_outliers",
	[ANALYSIS_MEMCPY] = "memcpy",
	[ANALYSIS_MEMORY] = "memory",
	[ANALYSIS_COMM] = "communication",
	[ANALYSIS_COMM_MATRIX] = "communication_matrix",
	[ANALYSIS_STEPS] = "steps",
	[ANALYSIS_RANKS] = "ranks",
	[ANALYSIS_CLOCKS] = "clocks",
	[ANALYSIS_SLOW_RANK] = "slow_rank",
	[ANALYSIS_ADVICE] = "advice",
};

AN_ATTR const char *
analysis_section_name(enum analysis_section s)
{
	return (unsigned)s < ANALYSIS_SECTION_MAX ? an_section_names[s] : NULL;
}

AN_ATTR int
analysis_section_from_name(const char *name)
{
	for (int i = 0; i < ANALYSIS_SECTION_MAX; i++)
		if (strcmp(an_section_names[i], name) == 0)
			return i;
	return -1;
}

AN_ATTR const char *const *
analysis_warnings(const struct analysis *a, size_t *n)
{
	static const char *const none[] = { NULL };

	if (n != NULL)
		*n = a->nwarn;
	return a->nwarn ? (const char *const *)a->warn : none;
}

AN_ATTR const struct analysis_advice *
analysis_advice(const struct analysis *a, size_t *n)
{
	*n = a->nadv;
	return a->adv;
}

AN_ATTR void
analysis_verdict(const struct analysis *a, struct analysis_verdict *v)
{
	*v = a->verdict;
}

AN_ATTR void
analysis_get_totals(const struct analysis *a, struct analysis_totals *t)
{
	unsigned ranks = 0;

	memset(t, 0, sizeof(*t));
	t->records = a->records;
	for (size_t i = 0; i < a->nsrc; i++)
		for (int j = 0; j < LOSS_STAGE_MAX; j++)
			t->lost += a->src[i]->losses[j] ?
			    a->src[i]->losses[j] : a->src[i]->loss_records[j];
	for (size_t i = 0; i < a->nproc; i++)
		if (a->proc[i]->rank >= 0)
			ranks++;
	t->ranks_seen = ranks;
	t->world_size = a->world_size > 0 ? (unsigned)a->world_size : 0;
	t->files = a->files;
	t->partial = a->partial;
	t->threads = a->threads ? a->threads : 1;
}

AN_ATTR const char *
analysis_strerror(int err)
{
	if (err == -ENOMEM)
		return "out of memory";
	if (err == -EBADMSG)
		return "malformed record";
	return trace_strerror(err);
}

AN_ATTR int
analysis_run(struct analysis *a)
{
	int rc;

	if (a->ran)
		return 0;
	if ((rc = an_steps(a)) != 0)
		return rc;
	if ((rc = an_sections(a)) != 0)
		return rc;
	a->ran = true;
	return 0;
}

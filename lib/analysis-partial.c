/*
 * Partial results: the state of an analysis after its input and before
 * the cross-rank work of analysis_run (clock alignment, collective
 * matching, step breakdown, verdict, tables).  Everything in it merges
 * exactly: sums, exact statistics (an_stat keeps its sum of squares as an
 * integer), first-seen orders, a top-32 list, the memory peak as a
 * (delta, relative peak) pair, and each rank's steps and collectives as
 * they are (past the caps, a sample that the merge samples again alike).
 * So the merge of per-file partials, in file order, is what one pass
 * over all the files gives; `msptictl report` runs that way
 * (analysis_add_files_merged), so a distributed report, which merges
 * partials made on the nodes, gives the same bytes by construction.
 *
 * A partial also travels (analysis_partial_encode/_decode): a small
 * binary format of unsigned LEB128 varints (signed ones zigzagged),
 * documented in doc/report.md "Partial results":
 *
 *	"MSPTIPRT" version:u8 length:u32le payload[length] fnv1a64:u64le
 *
 * Its size grows with names, never with kernels; steps and collectives
 * stop growing at the report's caps, past which a rank carries a sample
 * of them (analysis-sample.c).
 * The merge itself is analysis-merge.c's.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "util.h"

#define AN_ATTR	__attribute__((visibility("default")))

#define PT_MAGIC	"MSPTIPRT"
#define PT_VERSION	3	/* 2: a rank's first window step, step source;
				   3: collectives keyed and sampled */
#define PT_HDR		13		/* magic, version, length */
#define PT_MAX		(256u << 20)	/* far over any real partial */
#define PT_STR_MAX	(1u << 20)
#define PT_RANK_MAX	(1 << 24)

/* ---- the wire format ---- */

struct pt_w {
	unsigned char	*b;
	size_t		 n, cap;
	uint32_t	*ren;		/* string id -> partial's id */
};

static void
pt_put(struct pt_w *w, const void *p, size_t n)
{
	if (w->n + n > w->cap) {
		size_t c = w->cap ? w->cap : 4096;

		while (c < w->n + n)
			c *= 2;
		w->b = an_realloc(w->b, c);
		w->cap = c;
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void
pt_u(struct pt_w *w, uint64_t v)
{
	unsigned char t[10];

	pt_put(w, t, (size_t)(util_varint_put(t, v) - t));
}

static void
pt_i(struct pt_w *w, int64_t v)
{
	pt_u(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* A string id, renumbered to the strings the partial keeps. */
static void
pt_id(struct pt_w *w, uint32_t id)
{
	pt_u(w, w->ren[id]);
}

static void
pt_s(struct pt_w *w, const char *s)
{
	size_t n = strlen(s);

	pt_u(w, n);
	pt_put(w, s, n);
}

static void
pt_d(struct pt_w *w, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	pt_u(w, v);
}

static void
pt_stat(struct pt_w *w, const struct an_stat *s)
{
	pt_u(w, s->count);
	pt_u(w, s->total);
	pt_u(w, an_stat_min(s));
	pt_u(w, s->max);
	pt_u(w, (uint64_t)s->sumsq);
	pt_u(w, (uint64_t)(s->sumsq >> 64));
}


/*
 * Fields of a struct as the wire carries them, in order: the encoder and
 * the decoder walk the same table, so the two cannot drift apart.
 */
enum pt_kind { PT_U32, PT_U64, PT_I64, PT_ID, PT_RANK, PT_STAT };
struct pt_field {
	size_t		off;
	enum pt_kind	kind;
};
#define PT_F(t, m, k)	{ offsetof(t, m), k }

static const struct pt_field pt_dev_f[] = {
	PT_F(struct an_dev, device, PT_U32),
	PT_F(struct an_dev, allocs, PT_U64),
	PT_F(struct an_dev, frees, PT_U64),
	PT_F(struct an_dev, alloc_bytes, PT_U64),
	PT_F(struct an_dev, free_bytes, PT_U64),
	PT_F(struct an_dev, cur, PT_I64),
	PT_F(struct an_dev, peak, PT_I64),
	PT_F(struct an_dev, peak_ts, PT_U64),
};
/* The launch statistics of struct analysis. */
static const struct pt_field pt_launch_f[] = {
	PT_F(struct analysis, launches, PT_U64),
	PT_F(struct analysis, l_runtime, PT_STAT),
	PT_F(struct analysis, l_dur, PT_STAT),
	PT_F(struct analysis, l_delay, PT_STAT),
	PT_F(struct analysis, l_slow_runtime, PT_U64),
	PT_F(struct analysis, l_slow_delay, PT_U64),
	PT_F(struct analysis, l_short, PT_U64),
};
static const struct pt_field pt_lout_f[] = {
	PT_F(struct an_launch_out, corr, PT_U64),
	PT_F(struct an_launch_out, api, PT_ID),
	PT_F(struct an_launch_out, kernel, PT_ID),
	PT_F(struct an_launch_out, runtime, PT_U64),
	PT_F(struct an_launch_out, dur, PT_U64),
	PT_F(struct an_launch_out, delay, PT_U64),
	PT_F(struct an_launch_out, rank, PT_RANK),
};

static void
pt_fields(struct pt_w *w, const void *base, const struct pt_field *f,
    size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *p = (const char *)base + f[i].off;
		uint32_t u32;
		uint64_t u64;
		int64_t i64;
		int32_t i32;

		switch (f[i].kind) {
		case PT_U32:
			memcpy(&u32, p, sizeof(u32));
			pt_u(w, u32);
			break;
		case PT_U64:
			memcpy(&u64, p, sizeof(u64));
			pt_u(w, u64);
			break;
		case PT_I64:
			memcpy(&i64, p, sizeof(i64));
			pt_i(w, i64);
			break;
		case PT_ID:
			memcpy(&u32, p, sizeof(u32));
			pt_id(w, u32);
			break;
		case PT_RANK:
			memcpy(&i32, p, sizeof(i32));
			pt_i(w, i32);
			break;
		case PT_STAT:
			pt_stat(w, (const struct an_stat *)(const void *)p);
			break;
		}
	}
}

static void
pt_proc(struct pt_w *w, const struct an_proc *p)
{
	uint64_t prev;
	int cw = p->ncoll[0] > 0 ? 0 : 1;

	pt_u(w, p->pid);
	pt_i(w, p->rank);
	pt_i(w, p->local_rank);
	pt_i(w, p->world_size);
	pt_id(w, p->job);
	pt_id(w, p->exe);
	pt_u(w, p->first_ts);
	pt_u(w, p->last_ts);
	pt_u(w, p->late);
	pt_u(w, p->forced);
	pt_i(w, p->step_base);
	pt_u(w, p->step_src);
	pt_u(w, p->open_evicted);
	for (int g = 0; g < AN_G_MAX; g++) {
		pt_u(w, p->whole[g]);
		pt_u(w, p->gap_max[g]);
		pt_u(w, p->gap_from[g]);
	}
	pt_u(w, p->kernel_time);
	pt_u(w, p->api_time);
	pt_u(w, p->sync_calls);
	pt_u(w, p->ndata);
	prev = 0;
	for (size_t k = 0; k < p->ndata; k++) {
		pt_i(w, (int64_t)(p->data[k].start - prev));
		prev = p->data[k].start;
		pt_u(w, p->data[k].dur);
		pt_u(w, p->data[k].cls);
	}
	/* The analysis uses one kind of collective record per rank, keyed
	 * and sampled (analysis-sample.c), in start order. */
	pt_u(w, (uint64_t)cw);
	pt_u(w, p->seq_from);
	pt_u(w, p->ncoll[cw]);
	prev = 0;
	for (size_t k = 0; k < p->ncoll[cw]; k++) {
		const struct an_coll *c = &p->coll[cw][k];

		pt_i(w, (int64_t)(c->start - prev));
		prev = c->start;
		pt_i(w, (int64_t)(c->end - c->start));
		pt_u(w, c->bytes);
		pt_id(w, c->name);
		pt_id(w, c->comm);
		pt_id(w, c->alg);
		pt_u(w, c->rseq);
		pt_u(w, c->seq);
		pt_u(w, c->w);
	}
	/* Sampled past the step cap: the stride, and how many there were. */
	pt_u(w, p->step_w);
	pt_u(w, p->steps_seen);
	pt_u(w, p->nsteps);
	prev = 0;
	for (size_t k = 0; k < p->nsteps; k++) {
		const struct an_step *s = &p->steps[k];

		pt_i(w, (int64_t)(s->start - prev));
		prev = s->start;
		pt_i(w, (int64_t)(s->end - s->start));
		pt_i(w, s->step);
		for (int g = 0; g < AN_G_MAX; g++)
			pt_u(w, s->acc[g]);
		pt_i(w, s->first ? (int64_t)(s->first - s->start) + 1 : 0);
	}
}

/* Marks (non-zero) the string ids the partial refers to. */
static void
pt_mark(const struct analysis *a, uint32_t *used)
{
	used[a->step_gid] = 1;
	for (size_t i = 0; i < a->nops; i++)
		used[a->ops[i].name] = used[a->ops[i].type] = 1;
	for (size_t i = 0; i < a->norph; i++)
		used[a->orph[i].name] = 1;
	for (size_t i = 0; i < a->napis; i++)
		used[a->apis[i].name] = 1;
	for (size_t i = 0; i < a->nl_top; i++)
		used[a->l_top[i].api] = used[a->l_top[i].kernel] = 1;
	for (size_t i = 0; i < a->nproc; i++) {
		const struct an_proc *p = a->proc[i];
		int cw = p->ncoll[0] > 0 ? 0 : 1;

		used[p->job] = used[p->exe] = 1;
		for (size_t k = 0; k < p->ncoll[cw]; k++)
			used[p->coll[cw][k].name] = used[p->coll[cw][k].comm] =
			    used[p->coll[cw][k].alg] = 1;
	}
	used[0] = 0;
}

AN_ATTR int
analysis_partial_encode(struct analysis *a, void **out, size_t *outlen)
{
	struct pt_w w = { 0 };
	unsigned char hdr[PT_HDR], tail[8];

	if (a->ran)
		return -EINVAL;
	an_finish_input(a);
	pt_put(&w, PT_MAGIC, 8);
	pt_put(&w, hdr, 5);		/* version and length, below */
	/* What ingestion depended on: a merge checks it is the same. */
	pt_s(&w, a->o.step_marker);
	pt_s(&w, a->o.data_marker);
	pt_u(&w, a->o.reorder_ns);
	pt_d(&w, a->o.launch_runtime_us);
	pt_d(&w, a->o.launch_delay_us);
	pt_u(&w, a->o.coll_cap);
	pt_u(&w, a->o.step_cap);
	/* Each rank's steps and collectives, past the caps, sampled at its
	 * own strides; the merged analysis samples them all alike. */
	an_sample(a, false);
	/* Only the strings the partial refers to (not, say, the name of
	 * every marker), in their order. */
	w.ren = an_realloc(NULL, a->str.n * sizeof(uint32_t));
	memset(w.ren, 0, a->str.n * sizeof(uint32_t));
	pt_mark(a, w.ren);
	{
		uint32_t k = 1;

		for (size_t i = 1; i < a->str.n; i++)
			if (w.ren[i])
				w.ren[i] = k++;
		pt_u(&w, k);
		for (size_t i = 1; i < a->str.n; i++)
			if (w.ren[i])
				pt_s(&w, a->str.v[i]);
	}
	pt_u(&w, a->nwarn);
	for (size_t i = 0; i < a->nwarn; i++)
		pt_s(&w, a->warn[i]);
	pt_u(&w, a->files);
	pt_u(&w, a->partial);
	pt_u(&w, a->records);
	pt_u(&w, REC_TYPE_MAX);
	for (int k = 0; k < REC_TYPE_MAX; k++)
		pt_u(&w, a->counts[k]);
	pt_u(&w, a->kernel_time);
	pt_u(&w, a->aicpu_time);
	pt_u(&w, a->aicpu_count);
	pt_u(&w, a->nops);
	for (size_t i = 0; i < a->nops; i++) {
		pt_id(&w, a->ops[i].name);
		pt_id(&w, a->ops[i].type);
		pt_u(&w, a->ops[i].aicpu);
		pt_stat(&w, &a->ops[i].st);
		pt_u(&w, a->ops[i].host_total);
		pt_u(&w, a->ops[i].host_count);
	}
	pt_u(&w, a->norph);
	for (size_t i = 0; i < a->norph; i++) {
		pt_id(&w, a->orph[i].name);
		pt_u(&w, a->orph[i].total);
		pt_u(&w, a->orph[i].count);
	}
	pt_u(&w, a->napis);
	for (size_t i = 0; i < a->napis; i++) {
		pt_id(&w, a->apis[i].name);
		pt_stat(&w, &a->apis[i].st);
	}
	for (int k = 0; k < 6; k++) {
		pt_stat(&w, &a->memcpy_st[k]);
		pt_u(&w, a->memcpy_bytes[k]);
		pt_u(&w, a->memcpy_misaligned[k]);
	}
	pt_u(&w, a->ndevs);
	for (size_t i = 0; i < a->ndevs; i++)
		pt_fields(&w, &a->devs[i], pt_dev_f, nitems(pt_dev_f));
	pt_fields(&w, a, pt_launch_f, nitems(pt_launch_f));
	pt_u(&w, a->nl_top);
	for (size_t i = 0; i < a->nl_top; i++)
		pt_fields(&w, &a->l_top[i], pt_lout_f, nitems(pt_lout_f));
	pt_u(&w, a->nsrc);
	for (size_t i = 0; i < a->nsrc; i++) {
		const struct analysis_source *s = a->src[i];
		size_t np = 0;

		pt_s(&w, s->name);
		pt_s(&w, s->host);
		pt_u(&w, s->reorder_ns);
		pt_u(&w, LOSS_STAGE_MAX);
		for (int k = 0; k < LOSS_STAGE_MAX; k++) {
			pt_u(&w, s->losses[k]);
			pt_u(&w, s->loss_records[k]);
		}
		pt_u(&w, s->records);
		pt_u(&w, s->truncated);
		pt_u(&w, s->corrupt);
		for (size_t k = 0; k < a->nproc; k++)
			np += a->proc[k]->src == s;
		pt_u(&w, np);
		for (size_t k = 0; k < a->nproc; k++)
			if (a->proc[k]->src == s)
				pt_proc(&w, a->proc[k]);
	}
	free(w.ren);
	if (w.n - PT_HDR > PT_MAX) {
		free(w.b);
		return -E2BIG;
	}
	w.b[8] = PT_VERSION;
	util_put_le(w.b + 9, w.n - PT_HDR, 4);
	util_put_le(tail, util_fnv64(UTIL_FNV64_INIT, w.b + PT_HDR,
	    w.n - PT_HDR), 8);
	pt_put(&w, tail, 8);
	*out = w.b;
	*outlen = w.n;
	return 0;
}

/* ---- reading, every field checked ---- */

struct pt_r {
	const unsigned char *p, *end;
	const char	*err;		/* first problem, static text */
	size_t		 nstr;		/* valid string ids: below this */
};

static void
pt_bad(struct pt_r *r, const char *why)
{
	if (r->err == NULL)
		r->err = why;
	r->p = r->end;
}

static uint64_t
pt_ru(struct pt_r *r)
{
	uint64_t v = 0;

	for (int sh = 0; sh < 64; sh += 7) {
		unsigned char c;

		if (r->p >= r->end) {
			pt_bad(r, "truncated");
			return 0;
		}
		c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80))
			return v;
	}
	pt_bad(r, "bad number");
	return 0;
}

static int64_t
pt_ri(struct pt_r *r)
{
	uint64_t v = pt_ru(r);

	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A count of elements of at least min_bytes each still to come. */
static size_t
pt_rn(struct pt_r *r, size_t min_bytes, size_t max)
{
	uint64_t n = pt_ru(r);

	if (n > max || n * min_bytes > (uint64_t)(r->end - r->p)) {
		pt_bad(r, "count out of range");
		return 0;
	}
	return (size_t)n;
}

static uint32_t
pt_rid(struct pt_r *r)
{
	uint64_t v = pt_ru(r);

	if (v >= r->nstr) {
		pt_bad(r, "string id out of range");
		return 0;
	}
	return (uint32_t)v;
}

static int32_t
pt_rint(struct pt_r *r)
{
	int64_t v = pt_ri(r);

	/* Bounded well past any job: the rank checks allocate by it. */
	if (v < -1 || v > PT_RANK_MAX) {
		pt_bad(r, "rank out of range");
		return -1;
	}
	return (int32_t)v;
}

/* A string, NUL-terminated in a new buffer; NULL on error. */
static char *
pt_rs(struct pt_r *r)
{
	size_t n = pt_rn(r, 1, PT_STR_MAX);
	char *s;

	if (r->err != NULL)
		return NULL;
	if (memchr(r->p, '\0', n) != NULL) {
		pt_bad(r, "NUL in a string");
		return NULL;
	}
	s = an_realloc(NULL, n + 1);
	memcpy(s, r->p, n);
	s[n] = '\0';
	r->p += n;
	return s;
}

static double
pt_rd(struct pt_r *r)
{
	uint64_t v = pt_ru(r);
	double d;

	memcpy(&d, &v, sizeof(d));
	return d;
}

static void
pt_rstat(struct pt_r *r, struct an_stat *s)
{
	uint64_t lo, hi;

	s->count = pt_ru(r);
	s->total = pt_ru(r);
	s->nmin = ~pt_ru(r);
	s->max = pt_ru(r);
	lo = pt_ru(r);
	hi = pt_ru(r);
	s->sumsq = (unsigned __int128)hi << 64 | lo;
	if (s->count && ~s->nmin > s->max)
		pt_bad(r, "bad statistics");
	if (s->count == 0)
		s->nmin = 0;
}

/* Reads the fields of table f (pt_fields wrote them) into base; string
 * ids through map. */
static void
pt_rfields(struct pt_r *r, void *base, const struct pt_field *f, size_t n,
    const uint32_t *map)
{
	for (size_t i = 0; i < n; i++) {
		char *p = (char *)base + f[i].off;
		uint32_t u32;
		uint64_t u64;
		int64_t i64;
		int32_t i32;

		switch (f[i].kind) {
		case PT_U32:
			u32 = (uint32_t)pt_ru(r);
			memcpy(p, &u32, sizeof(u32));
			break;
		case PT_U64:
			u64 = pt_ru(r);
			memcpy(p, &u64, sizeof(u64));
			break;
		case PT_I64:
			i64 = pt_ri(r);
			memcpy(p, &i64, sizeof(i64));
			break;
		case PT_ID:
			u32 = map[pt_rid(r)];
			memcpy(p, &u32, sizeof(u32));
			break;
		case PT_RANK:
			i32 = pt_rint(r);
			memcpy(p, &i32, sizeof(i32));
			break;
		case PT_STAT:
			pt_rstat(r, (struct an_stat *)(void *)p);
			break;
		}
	}
}

static bool
pt_rflag(struct pt_r *r)
{
	uint64_t v = pt_ru(r);

	if (v > 1)
		pt_bad(r, "bad flag");
	return v == 1;
}

static void
pt_rproc(struct pt_r *r, struct an_proc *p, const uint32_t *map)
{
	uint64_t prev, v;
	int cw;
	size_t n;

	p->pid = (uint32_t)pt_ru(r);
	p->rank = pt_rint(r);
	p->local_rank = pt_rint(r);
	p->world_size = pt_rint(r);
	p->job = map[pt_rid(r)];
	p->exe = map[pt_rid(r)];
	p->first_ts = pt_ru(r);
	p->last_ts = pt_ru(r);
	p->late = pt_ru(r);
	p->forced = pt_ru(r);
	/* Bounded: steps are numbered from it (analysis-steps.c). */
	if ((p->step_base = pt_ri(r)) < -1 || p->step_base > (1ll << 53)) {
		pt_bad(r, "step out of range");
		p->step_base = -1;
	}
	if ((p->step_src = (uint32_t)pt_ru(r)) > 7) {
		pt_bad(r, "bad step source");
		p->step_src = 0;
	}
	p->open_evicted = pt_ru(r);
	for (int g = 0; g < AN_G_MAX; g++) {
		p->whole[g] = pt_ru(r);
		p->gap_max[g] = pt_ru(r);
		p->gap_from[g] = pt_ru(r);
	}
	p->kernel_time = pt_ru(r);
	p->api_time = pt_ru(r);
	p->sync_calls = pt_ru(r);
	n = pt_rn(r, 3, SIZE_MAX / sizeof(*p->data));
	p->data = an_realloc(NULL, (n ? n : 1) * sizeof(*p->data));
	p->cdata = n ? n : 1;
	prev = 0;
	for (size_t k = 0; k < n && r->err == NULL; k++) {
		uint64_t d = pt_ru(r);

		prev += (uint64_t)((int64_t)(d >> 1) ^ -(int64_t)(d & 1));
		p->data[k].start = prev;
		d = pt_ru(r);
		if (d > UINT32_MAX)
			pt_bad(r, "bad data-loading range");
		p->data[k].dur = (uint32_t)d;
		p->data[k].cls = (uint32_t)(pt_ru(r) & 3);
		p->ndata = k + 1;
	}
	cw = (int)pt_ru(r);
	if (cw != 0 && cw != 1) {
		pt_bad(r, "bad collective kind");
		return;
	}
	v = pt_ru(r);
	if (v != AN_SEQ_ORDINAL && v != AN_SEQ_RECORDS) {
		pt_bad(r, "bad collective keys");
		return;
	}
	p->seq_from = (uint8_t)v;
	n = pt_rn(r, 9, SIZE_MAX / sizeof(struct an_coll));
	p->coll[cw] = an_realloc(NULL, (n ? n : 1) * sizeof(struct an_coll));
	p->ccoll[cw] = n ? n : 1;
	prev = 0;
	for (size_t k = 0; k < n && r->err == NULL; k++) {
		struct an_coll *c = &p->coll[cw][k];

		memset(c, 0, sizeof(*c));
		prev += (uint64_t)pt_ri(r);
		c->start = prev;
		c->end = c->start + (uint64_t)pt_ri(r);
		if (c->end < c->start)
			pt_bad(r, "collective ends before it starts");
		c->bytes = pt_ru(r);
		c->name = map[pt_rid(r)];
		c->comm = map[pt_rid(r)];
		c->alg = map[pt_rid(r)];
		if ((v = pt_ru(r)) > UINT32_MAX)
			pt_bad(r, "bad collective seq");
		c->rseq = (uint32_t)v;
		if ((v = pt_ru(r)) > UINT32_MAX)
			pt_bad(r, "bad collective key");
		c->seq = (uint32_t)v;
		/* The stride it was sampled at, a power of two (its step's,
		 * or its key's outside steps: analysis-sample.c). */
		v = pt_ru(r);
		if (v == 0 || v > (1u << 30) || (v & (v - 1)) != 0)
			pt_bad(r, "bad collective sample");
		c->w = v == 0 ? 1 : (uint32_t)v;
		p->ncoll[cw] = k + 1;
	}
	v = pt_ru(r);
	if (v == 0 || v > (1u << 30) || (v & (v - 1)) != 0) {
		pt_bad(r, "bad step sample");
		return;
	}
	p->step_w = (uint32_t)v;
	p->steps_seen = pt_ru(r);
	n = pt_rn(r, 10, SIZE_MAX / sizeof(struct an_step));
	if (n > p->steps_seen)
		pt_bad(r, "more steps than seen");
	p->steps = an_realloc(NULL, (n ? n : 1) * sizeof(struct an_step));
	p->csteps = n ? n : 1;
	prev = 0;
	for (size_t k = 0; k < n && r->err == NULL; k++) {
		struct an_step *s = &p->steps[k];
		int64_t f;

		prev += (uint64_t)pt_ri(r);
		s->start = prev;
		s->end = s->start + (uint64_t)pt_ri(r);
		s->step = pt_ri(r);
		for (int g = 0; g < AN_G_MAX; g++)
			s->acc[g] = pt_ru(r);
		f = pt_ri(r);
		s->first = f > 0 ? s->start + (uint64_t)(f - 1) : 0;
		/* The breakdown walks steps in start order. */
		if (s->end < s->start || (k > 0 && s->start < s[-1].start))
			pt_bad(r, "steps out of order");
		/* A sample's steps are numbered, multiples of its stride. */
		if (p->step_w > 1 && (s->step < 0 ||
		    (uint64_t)s->step % p->step_w != 0))
			pt_bad(r, "bad sampled step");
		p->nsteps = k + 1;
	}
	p->safe_static = UINT64_MAX;
	p->finished = true;
}

/* Reads one partial's payload into b (new, same options as a). */
static void
pt_read(struct pt_r *r, const struct analysis *a, struct analysis *b)
{
	uint32_t *map = NULL;
	size_t n;
	char *s;

	s = pt_rs(r);
	if (s != NULL && strcmp(s, a->o.step_marker) != 0)
		pt_bad(r, "made with another --step-marker");
	free(s);
	s = pt_rs(r);
	if (s != NULL && strcmp(s, a->o.data_marker) != 0)
		pt_bad(r, "made with another data marker");
	free(s);
	if (pt_ru(r) != a->o.reorder_ns || pt_rd(r) != a->o.launch_runtime_us ||
	    pt_rd(r) != a->o.launch_delay_us || pt_ru(r) != a->o.coll_cap ||
	    pt_ru(r) != a->o.step_cap)
		pt_bad(r, "made with other analysis options");
	n = pt_rn(r, 1, UINT32_MAX);
	if (r->err != NULL)
		return;
	if (n == 0) {
		pt_bad(r, "no string table");
		return;
	}
	map = an_realloc(NULL, n * sizeof(uint32_t));
	map[0] = 0;
	for (size_t i = 1; i < n; i++) {
		if ((s = pt_rs(r)) == NULL) {
			n = i;
			break;
		}
		map[i] = an_str_intern(b, s);
		free(s);
	}
	r->nstr = n;
	/* Warnings are deduplicated by a linear search: a forged partial
	 * with a million would take hours to merge. */
	n = pt_rn(r, 1, AN_MAX_WARN);
	for (size_t i = 0; i < n && (s = pt_rs(r)) != NULL; i++) {
		an_warn(b, "%s", s);
		free(s);
	}
	b->files = (unsigned)pt_rn(r, 0, UINT32_MAX);
	b->partial = pt_rflag(r);
	b->records = pt_ru(r);
	n = pt_rn(r, 1, 4096);
	for (size_t k = 0; k < n; k++) {
		uint64_t v = pt_ru(r);

		if (k < REC_TYPE_MAX)
			b->counts[k] = v;
	}
	b->kernel_time = pt_ru(r);
	b->aicpu_time = pt_ru(r);
	b->aicpu_count = pt_ru(r);
	n = pt_rn(r, 11, UINT32_MAX);
	for (size_t i = 0; i < n && r->err == NULL; i++) {
		struct an_op o;

		memset(&o, 0, sizeof(o));
		o.name = map[pt_rid(r)];
		o.type = map[pt_rid(r)];
		o.aicpu = pt_rflag(r);
		pt_rstat(r, &o.st);
		o.host_total = pt_ru(r);
		o.host_count = pt_ru(r);
		for (size_t j = an_op_first(b, o.name); j > 0 && j <= b->nops;
		    j++)
			if (b->ops[j - 1].name == o.name && b->ops[j - 1].type ==
			    o.type)
				pt_bad(r, "an op twice");
		an_grow(&b->ops, &b->cops, b->nops, sizeof(*b->ops));
		b->ops[b->nops] = o;
		an_op_first_set(b, o.name, b->nops);
		b->nops++;
	}
	n = pt_rn(r, 3, UINT32_MAX);
	for (size_t i = 0; i < n && r->err == NULL; i++) {
		uint32_t name = map[pt_rid(r)];
		uint64_t t = pt_ru(r), c = pt_ru(r);

		an_orphan_add(b, name, t, c, 0);
	}
	n = pt_rn(r, 7, UINT32_MAX);
	for (size_t i = 0; i < n && r->err == NULL; i++) {
		an_grow(&b->apis, &b->capis, b->napis, sizeof(*b->apis));
		memset(&b->apis[b->napis], 0, sizeof(b->apis[0]));
		b->apis[b->napis].name = map[pt_rid(r)];
		pt_rstat(r, &b->apis[b->napis].st);
		b->napis++;
	}
	for (int k = 0; k < 6; k++) {
		pt_rstat(r, &b->memcpy_st[k]);
		b->memcpy_bytes[k] = pt_ru(r);
		b->memcpy_misaligned[k] = pt_ru(r);
	}
	n = pt_rn(r, 8, 65);
	for (size_t i = 0; i < n && r->err == NULL; i++) {
		pt_rfields(r, &b->devs[i], pt_dev_f, nitems(pt_dev_f), map);
		b->ndevs = i + 1;
	}
	pt_rfields(r, b, pt_launch_f, nitems(pt_launch_f), map);
	n = pt_rn(r, 7, 32);
	for (size_t i = 0; i < n && r->err == NULL; i++) {
		struct an_launch_out *l = &b->l_top[i];

		pt_rfields(r, l, pt_lout_f, nitems(pt_lout_f), map);
		if (i > 0 && l->delay > l[-1].delay)
			pt_bad(r, "launch outliers out of order");
		b->nl_top = i + 1;
	}
	n = pt_rn(r, 4, 1u << 20);
	for (size_t i = 0; i < n && r->err == NULL; i++) {
		struct analysis_source *src;
		char *name = pt_rs(r), *host = pt_rs(r);
		size_t nl, np;

		if (r->err != NULL) {
			free(name);
			free(host);
			break;
		}
		src = analysis_source_new(b, name, host);
		free(name);
		free(host);
		if (src == NULL) {
			pt_bad(r, "out of memory");
			break;
		}
		src->path = strdup(src->name);
		src->reorder_ns = pt_ru(r);
		nl = pt_rn(r, 2, 64);
		for (size_t k = 0; k < nl; k++) {
			uint64_t l = pt_ru(r), lr = pt_ru(r);

			if (k < LOSS_STAGE_MAX) {
				src->losses[k] = l;
				src->loss_records[k] = lr;
			}
		}
		src->records = pt_ru(r);
		src->truncated = pt_rflag(r);
		src->corrupt = pt_ru(r);
		np = pt_rn(r, 39, 1u << 20);	/* a rank: 39 fields at least */
		for (size_t k = 0; k < np && r->err == NULL; k++) {
			struct an_proc *p = an_realloc(NULL, sizeof(*p));

			memset(p, 0, sizeof(*p));
			p->src = src;
			p->idx = (uint32_t)b->nproc;
			b->proc = an_realloc(b->proc, (b->nproc + 1) *
			    sizeof(*b->proc));
			b->proc[b->nproc++] = p;
			pt_rproc(r, p, map);
		}
	}
	if (r->err == NULL && r->p != r->end)
		pt_bad(r, "trailing bytes");
	free(map);
}

AN_ATTR int
analysis_partial_read(const struct analysis *a, const void *buf, size_t len,
    size_t *used, struct analysis **part, char *err, size_t errlen)
{
	const unsigned char *p = buf;
	struct pt_r r = { 0 };
	struct analysis *b;
	uint64_t plen = 0, sum = 0;

	*part = NULL;
	if (len < PT_HDR + 8 || memcmp(p, PT_MAGIC, 8) != 0) {
		snprintf(err, errlen, "not a partial result (bad magic)");
		return -EBADMSG;
	}
	if (p[8] != PT_VERSION) {
		snprintf(err, errlen, "partial result version %u (this "
		    "msptictl reads %u)", p[8], PT_VERSION);
		return -EBADMSG;
	}
	plen = util_get_le32(p + 9);
	if (plen > PT_MAX || plen > len - PT_HDR - 8) {
		snprintf(err, errlen, "truncated partial result (%zu of %llu "
		    "bytes)", len, (unsigned long long)(plen + PT_HDR + 8));
		return -EBADMSG;
	}
	sum = util_get_le64(p + PT_HDR + plen);
	if (sum != util_fnv64(UTIL_FNV64_INIT, p + PT_HDR, plen)) {
		snprintf(err, errlen, "corrupt partial result (checksum)");
		return -EBADMSG;
	}
	if ((b = analysis_new(&a->o)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r.p = p + PT_HDR;
	r.end = r.p + plen;
	pt_read(&r, a, b);
	if (r.err != NULL) {
		snprintf(err, errlen, "malformed partial result: %s (at byte "
		    "%zu)", r.err, (size_t)(r.p - p));
		analysis_free(b);
		return -EBADMSG;
	}
	if (used != NULL)
		*used = PT_HDR + (size_t)plen + 8;
	*part = b;
	return 0;
}

AN_ATTR int
analysis_partial_decode(struct analysis *a, const void *buf, size_t len,
    size_t *used, char *err, size_t errlen)
{
	struct analysis *b;
	int rc;

	if ((rc = analysis_partial_read(a, buf, len, used, &b, err,
	    errlen)) != 0)
		return rc;
	rc = analysis_merge(a, b);
	analysis_free(b);
	if (rc != 0) {
		snprintf(err, errlen, "%s", analysis_strerror(rc));
		return rc;
	}
	return 0;
}

AN_ATTR unsigned
analysis_partial_ranks(const struct analysis *a)
{
	unsigned n = 0;

	for (size_t i = 0; i < a->nproc; i++)
		n += a->proc[i]->rank >= 0;
	return n;
}

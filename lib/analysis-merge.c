/*
 * Merging analyses (see analysis-partial.c for what a partial result is):
 * analysis_merge folds one analysis's state after its input into
 * another's, exactly, and analysis_add_files_merged / _encode_files read
 * files in threads, each its own analysis, merged (or encoded) in file
 * order, so the result is what one pass over all the files gives.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "util.h"

#define AN_ATTR	__attribute__((visibility("default")))

/* ---- merging ---- */

static void
pt_stat_merge(struct an_stat *d, const struct an_stat *s)
{
	if (s->count == 0)
		return;
	if (s->nmin > d->nmin)
		d->nmin = s->nmin;
	if (s->max > d->max)
		d->max = s->max;
	d->count += s->count;
	d->total += s->total;
	d->sumsq += s->sumsq;
}

/* Ends the input of a: every rank's sweep is finished and the sources'
 * ingestion tables are freed.  More records may not follow. */
void
an_finish_input(struct analysis *a)
{
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];

		if (!p->finished)
			an_sweep_finish(a, p);
		free(p->open);
		p->open = NULL;
		p->nopen = p->copen = 0;
		an_pend_free(p);
	}
	an_orphans_settle(a);
	for (size_t i = 0; i < a->nsrc; i++) {
		struct analysis_source *s = a->src[i];

		free(s->map);
		free(s->op_of);
		free(s->api_of);
		s->map = s->api_of = NULL;
		s->op_of = NULL;
		s->nmap = s->nop_of = s->napi_of = 0;
		s->last = NULL;
	}
}

size_t
an_op_new(struct analysis *a, uint32_t name, uint32_t type, bool aicpu,
    uint64_t seq)
{
	size_t j = a->nops;

	an_grow(&a->ops, &a->cops, a->nops, sizeof(*a->ops));
	memset(&a->ops[j], 0, sizeof(a->ops[j]));
	a->ops[j].name = name;
	a->ops[j].type = type;
	a->ops[j].aicpu = aicpu;
	a->ops[j].seq = seq;
	a->nops++;
	an_op_first_set(a, name, j);
	return j;
}

void
an_op_first_set(struct analysis *a, uint32_t name, size_t idx)
{
	if (name >= a->nop_first) {
		size_t n = a->nop_first ? a->nop_first : 256;

		while (n <= name)
			n *= 2;
		a->op_first = an_realloc(a->op_first, n * sizeof(uint32_t));
		memset(a->op_first + a->nop_first, 0,
		    (n - a->nop_first) * sizeof(uint32_t));
		a->nop_first = n;
	}
	if (a->op_first[name] == 0)
		a->op_first[name] = (uint32_t)idx + 1;
}

/* 1 + the first op of that name (name 0 too: a kernel without one). */
uint32_t
an_op_first(const struct analysis *a, uint32_t name)
{
	return name < a->nop_first ? a->op_first[name] : 0;
}

void
an_orphan_add(struct analysis *a, uint32_t name, uint64_t total,
    uint64_t count, uint64_t seq)
{
	for (size_t i = 0; i < a->norph; i++)
		if (a->orph[i].name == name) {
			a->orph[i].total += total;
			a->orph[i].count += count;
			if (seq < a->orph[i].seq)
				a->orph[i].seq = seq;
			return;
		}
	an_grow(&a->orph, &a->corph, a->norph, sizeof(*a->orph));
	a->orph[a->norph++] = (struct an_orphan){ name, total, count, seq };
}

void
an_orphans_settle(struct analysis *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->norph; i++) {
		uint32_t f = an_op_first(a, a->orph[i].name);

		if (f != 0) {
			a->ops[f - 1].host_total += a->orph[i].total;
			a->ops[f - 1].host_count += a->orph[i].count;
		} else
			a->orph[n++] = a->orph[i];
	}
	a->norph = n;
}

static void
pt_merge_ops(struct analysis *a, struct analysis *b, const uint32_t *map)
{
	/* Launch time the partial could not give to an op waits with a's
	 * for the first op of its name (an_orphans_settle). */
	for (size_t i = 0; i < b->norph; i++)
		an_orphan_add(a, map[b->orph[i].name], b->orph[i].total,
		    b->orph[i].count, b->orph[i].seq);
	for (size_t i = 0; i < b->nops; i++) {
		const struct an_op *o = &b->ops[i];
		uint32_t name = map[o->name], type = map[o->type];
		uint32_t f = an_op_first(a, name);
		size_t j = f ? f - 1 : a->nops;
		struct an_op *d;

		for (; j < a->nops; j++)
			if (a->ops[j].name == name && a->ops[j].type == type)
				break;
		if (j == a->nops)
			an_op_new(a, name, type, o->aicpu, o->seq);
		d = &a->ops[j];
		if (o->seq < d->seq)
			d->seq = o->seq;
		pt_stat_merge(&d->st, &o->st);
		/* The partial gave its launches to its first op of the name;
		 * here the first op of the name is an earlier one's. */
		if (o->host_count || o->host_total) {
			d = &a->ops[a->op_first[name] - 1];
			d->host_total += o->host_total;
			d->host_count += o->host_count;
		}
	}
	for (size_t i = 0; i < b->napis; i++) {
		uint32_t name = map[b->apis[i].name];
		size_t j;

		for (j = 0; j < a->napis && a->apis[j].name != name; j++)
			;
		if (j == a->napis) {
			an_grow(&a->apis, &a->capis, a->napis,
			    sizeof(*a->apis));
			memset(&a->apis[j], 0, sizeof(a->apis[j]));
			a->apis[j].name = name;
			a->apis[j].seq = b->apis[i].seq;
			a->napis++;
		}
		if (b->apis[i].seq < a->apis[j].seq)
			a->apis[j].seq = b->apis[i].seq;
		pt_stat_merge(&a->apis[j].st, &b->apis[i].st);
	}
	an_orphans_settle(a);
}

/* Whether launch outlier x goes before y: worse delay, or an equal one
 * earlier in the input (by record: shards of one file; else a's before
 * b's, as a merge in input order has them). */
static bool
pt_lout_before(const struct an_launch_out *x, const struct an_launch_out *y,
    bool by_seq)
{
	if (x->delay != y->delay)
		return x->delay > y->delay;
	return !by_seq || x->seq <= y->seq;
}

static void
pt_merge_launch(struct analysis *a, const struct analysis *b,
    const uint32_t *map, bool by_seq)
{
	struct an_launch_out top[32];
	size_t n = 0, x = 0, y = 0;

	a->launches += b->launches;
	pt_stat_merge(&a->l_runtime, &b->l_runtime);
	pt_stat_merge(&a->l_dur, &b->l_dur);
	pt_stat_merge(&a->l_delay, &b->l_delay);
	a->l_slow_runtime += b->l_slow_runtime;
	a->l_slow_delay += b->l_slow_delay;
	a->l_short += b->l_short;
	/* Worst delays first, earlier input first among equals: the order
	 * one pass's insertion keeps. */
	while (n < 32 && (x < a->nl_top || y < b->nl_top)) {
		if (y == b->nl_top || (x < a->nl_top &&
		    pt_lout_before(&a->l_top[x], &b->l_top[y], by_seq)))
			top[n++] = a->l_top[x++];
		else {
			top[n] = b->l_top[y++];
			top[n].api = map[top[n].api];
			top[n].kernel = map[top[n].kernel];
			n++;
		}
	}
	memcpy(a->l_top, top, n * sizeof(top[0]));
	a->nl_top = n;
}

static void
pt_merge_devs(struct analysis *a, const struct analysis *b)
{
	for (size_t i = 0; i < b->ndevs; i++) {
		const struct an_dev *s = &b->devs[i];
		struct an_dev *d = an_dev_get(a, s->device);

		d->allocs += s->allocs;
		d->frees += s->frees;
		d->alloc_bytes += s->alloc_bytes;
		d->free_bytes += s->free_bytes;
		/* s->peak is the partial's highest level above its start,
		 * reached first at s->peak_ts. */
		if (d->cur + s->peak > d->peak) {
			d->peak = d->cur + s->peak;
			d->peak_ts = s->peak_ts;
		}
		d->cur += s->cur;
	}
}

static void
pt_proc_remap(struct an_proc *p, const uint32_t *map)
{
	p->job = map[p->job];
	p->exe = map[p->exe];
	for (int w = 0; w < 2; w++)
		for (size_t k = 0; k < p->ncoll[w]; k++) {
			struct an_coll *c = &p->coll[w][k];

			c->name = map[c->name];
			c->comm = map[c->comm];
			c->alg = map[c->alg];
		}
}

/* analysis_merge, or a file's shard b into a (an_merge_shard). */
static void
an_merge(struct analysis *a, struct analysis *b, bool shard)
{
	uint32_t *map;

	an_finish_input(b);
	map = an_realloc(NULL, b->str.n * sizeof(uint32_t));
	for (size_t i = 0; i < b->str.n; i++)
		map[i] = an_str_intern(a, b->str.v[i]);
	for (size_t i = 0; i < b->nwarn; i++)
		an_warn(a, "%s", b->warn[i]);
	pt_merge_ops(a, b, map);
	for (int k = 0; k < 6; k++) {
		pt_stat_merge(&a->memcpy_st[k], &b->memcpy_st[k]);
		a->memcpy_bytes[k] += b->memcpy_bytes[k];
		a->memcpy_misaligned[k] += b->memcpy_misaligned[k];
	}
	pt_merge_devs(a, b);
	pt_merge_launch(a, b, map, shard);
	for (int k = 0; k < REC_TYPE_MAX; k++)
		a->counts[k] += b->counts[k];
	a->records += b->records;
	a->aicpu_time += b->aicpu_time;
	a->aicpu_count += b->aicpu_count;
	a->kernel_time += b->kernel_time;
	a->files += b->files;
	a->partial |= b->partial;
	if (b->threads > a->threads)
		a->threads = b->threads;
	if (shard) {
		/* One file: b's source is a's last, read in part (its
		 * losses, corrupt chunks and end are the first shard's). */
		struct analysis_source *d = a->src[a->nsrc - 1];

		d->records += b->src[0]->records;
		for (size_t i = 0; i < b->nproc; i++)
			b->proc[i]->src = d;
	} else {
		/* Sources move over as they are. */
		a->src = an_realloc(a->src, (a->nsrc + b->nsrc) *
		    sizeof(*a->src));
		for (size_t i = 0; i < b->nsrc; i++) {
			b->src[i]->a = a;
			a->src[a->nsrc++] = b->src[i];
		}
		b->nsrc = 0;
	}
	a->proc = an_realloc(a->proc, (a->nproc + b->nproc) *
	    sizeof(*a->proc));
	for (size_t i = 0; i < b->nproc; i++) {
		struct an_proc *p = b->proc[i];

		pt_proc_remap(p, map);
		p->idx = (uint32_t)a->nproc;
		a->proc[a->nproc++] = p;
	}
	b->nproc = 0;
	free(map);
}

AN_ATTR int
analysis_merge(struct analysis *a, struct analysis *b)
{
	if (a->ran || b->ran || a == b)
		return -EINVAL;
	an_merge(a, b, false);
	return 0;
}

void
an_merge_shard(struct analysis *a, struct analysis *b)
{
	an_merge(a, b, true);
}

static int
an_cmp_op_seq(const void *x, const void *y)
{
	const struct an_op *a = x, *b = y;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int
an_cmp_orph_seq(const void *x, const void *y)
{
	const struct an_orphan *a = x, *b = y;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int
an_cmp_proc_seq(const void *x, const void *y)
{
	const struct an_proc *a = *(struct an_proc *const *)x;
	const struct an_proc *b = *(struct an_proc *const *)y;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

void
an_merge_shards_end(struct analysis *a, const struct an_counts *before)
{
	struct analysis_source *src = a->src[a->nsrc - 1];

	/* What the file brought, in the order one pass met it. */
	an_sort(a->ops + before->nops, a->nops - before->nops,
	    sizeof(*a->ops), an_cmp_op_seq);
	an_sort(a->apis + before->napis, a->napis - before->napis,
	    sizeof(*a->apis), an_cmp_op_seq);
	an_sort(a->orph + before->norph, a->norph - before->norph,
	    sizeof(*a->orph), an_cmp_orph_seq);
	an_sort(a->proc + before->nproc, a->nproc - before->nproc,
	    sizeof(*a->proc), an_cmp_proc_seq);
	for (size_t i = before->nproc; i < a->nproc; i++)
		a->proc[i]->idx = (uint32_t)i;
	/* The first op of a name may now be another shard's: the launch
	 * time of the name is all the first's. */
	if (a->nop_first > 0)
		memset(a->op_first, 0, a->nop_first * sizeof(uint32_t));
	for (size_t i = 0; i < a->nops; i++)
		an_op_first_set(a, a->ops[i].name, i);
	for (size_t i = before->nops; i < a->nops; i++) {
		struct an_op *o = &a->ops[i];
		struct an_op *f = &a->ops[a->op_first[o->name] - 1];

		if (f != o && (o->host_total || o->host_count)) {
			f->host_total += o->host_total;
			f->host_count += o->host_count;
			o->host_total = o->host_count = 0;
		}
	}
	/* The source's caches point at ops and APIs by index. */
	free(src->op_of);
	free(src->api_of);
	src->op_of = NULL;
	src->api_of = NULL;
	src->nop_of = src->napi_of = 0;
}

/* ---- files in threads, merged in order ---- */

struct pt_job {
	struct analysis	*a;			/* options */
	char *const	*paths;
	size_t		 n;
	unsigned	 reader_threads;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	size_t		 next;		/* next file to take */
	struct analysis	**part;		/* per file, NULL: not yet */
	int		*rc;
	bool		*done;
	/* analysis_encode_files: each partial encoded and freed. */
	void		**buf;
	size_t		*len;
	unsigned	*ranks;
};

static void *
pt_worker(void *arg)
{
	struct pt_job *j = arg;

	for (;;) {
		struct analysis *p;
		size_t i;
		int rc;

		pthread_mutex_lock(&j->mu);
		i = j->next < j->n ? j->next++ : j->n;
		pthread_mutex_unlock(&j->mu);
		if (i == j->n)
			return NULL;
		{
			struct analysis_opts o = j->a->o;

			o.jobs = j->reader_threads + 1;
			p = analysis_new(&o);
		}
		if (p == NULL)
			rc = -ENOMEM;
		else {
			rc = analysis_add_file(p, j->paths[i]);
			an_finish_input(p);
		}
		if (p != NULL && j->buf != NULL) {
			int erc;

			j->ranks[i] = analysis_partial_ranks(p);
			if ((erc = analysis_partial_encode(p, &j->buf[i],
			    &j->len[i])) != 0) {
				j->buf[i] = NULL;
				rc = erc;
			}
			analysis_free(p);
			p = NULL;
		}
		pthread_mutex_lock(&j->mu);
		j->part[i] = p;
		j->rc[i] = rc;
		j->done[i] = true;
		pthread_cond_broadcast(&j->cv);
		pthread_mutex_unlock(&j->mu);
	}
}

/* j over the n paths for a's options; the analysing threads to run
 * (1 to 256: fewer files than jobs leave the rest to decompress ahead). */
static size_t
pt_job_init(struct pt_job *j, struct analysis *a, char *const *paths,
    size_t n)
{
	unsigned jobs = a->o.jobs ? a->o.jobs : 1;
	size_t nth = jobs < n ? jobs : n;

	if (nth > 256)
		nth = 256;
	if (nth == 0)
		nth = 1;
	memset(j, 0, sizeof(*j));
	j->a = a;
	j->paths = paths;
	j->n = n;
	j->reader_threads = (unsigned)(jobs / nth) - 1;
	return nth;
}

/* Starts up to nth workers on j (none when nth is 1); how many started. */
static size_t
pt_start(struct pt_job *j, pthread_t *th, size_t nth)
{
	sigset_t old;
	size_t started = 0;

	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	/* Inside an application (the Python extension) its signals stay
	 * with its own threads. */
	util_block_async_signals(&old);
	for (size_t t = 0; nth > 1 && t < nth; t++)
		if (pthread_create(&th[started], NULL, pt_worker, j) == 0)
			started++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return started;
}

/* Waits for the started workers of j and ends it. */
static void
pt_stop(struct pt_job *j, pthread_t *th, size_t started)
{
	for (size_t t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	pthread_mutex_destroy(&j->mu);
	pthread_cond_destroy(&j->cv);
}

/* Merges file i's partial into a; 1 when the file was read. */
static size_t
pt_merge_one(struct analysis *a, struct pt_job *j, size_t i)
{
	if (j->part[i] == NULL) {
		a->files++;
		a->partial = true;
		an_warn(a, "%s: cannot read: out of memory", j->paths[i]);
		return 0;
	}
	analysis_merge(a, j->part[i]);
	analysis_free(j->part[i]);
	j->part[i] = NULL;
	return j->rc[i] == 0;
}

AN_ATTR size_t
analysis_add_files_merged(struct analysis *a, char *const *paths, size_t n)
{
	struct pt_job j;
	pthread_t th[256];
	size_t nth, started = 0, ok = 0;
	unsigned jobs = a->o.jobs ? a->o.jobs : 1;

	if (n == 0)
		return 0;
	nth = pt_job_init(&j, a, paths, n);
	j.part = calloc(n, sizeof(*j.part));
	j.rc = calloc(n, sizeof(*j.rc));
	j.done = calloc(n, sizeof(*j.done));
	if (j.part == NULL || j.rc == NULL || j.done == NULL) {
		free(j.part);
		free(j.rc);
		free(j.done);
		return 0;
	}
	started = pt_start(&j, th, nth);
	/* Alone, this thread reads the files one by one. */
	if (started == 0) {
		struct analysis_opts o = a->o;

		o.jobs = jobs;
		for (size_t i = 0; i < n; i++) {
			j.part[i] = analysis_new(&o);
			if (j.part[i] != NULL)
				j.rc[i] = analysis_add_file(j.part[i],
				    paths[i]);
			j.done[i] = true;
			ok += pt_merge_one(a, &j, i);
		}
	}
	/* Else it merges each file's partial in file order as soon as it
	 * and the ones before it are done. */
	for (size_t i = 0; i < n; i++) {
		if (started == 0)
			break;
		pthread_mutex_lock(&j.mu);
		while (!j.done[i])
			pthread_cond_wait(&j.cv, &j.mu);
		pthread_mutex_unlock(&j.mu);
		ok += pt_merge_one(a, &j, i);
	}
	pt_stop(&j, th, started);
	free(j.part);
	free(j.rc);
	free(j.done);
	return ok;
}

AN_ATTR int
analysis_encode_files(const struct analysis_opts *o, char *const *paths,
    size_t n, void **bufs, size_t *lens, unsigned *ranks, int *rcs)
{
	struct analysis *a = analysis_new(o);
	struct pt_job j;
	pthread_t th[256];
	size_t nth, started = 0;

	if (a == NULL)
		return -ENOMEM;
	nth = pt_job_init(&j, a, paths, n);
	j.part = calloc(n + 1, sizeof(*j.part));
	j.done = calloc(n + 1, sizeof(*j.done));
	j.rc = rcs;
	j.buf = bufs;
	j.len = lens;
	j.ranks = ranks;
	if (j.part == NULL || j.done == NULL) {
		free(j.part);
		free(j.done);
		analysis_free(a);
		return -ENOMEM;
	}
	started = pt_start(&j, th, nth);
	if (started == 0)
		pt_worker(&j);
	pt_stop(&j, th, started);
	free(j.part);
	free(j.done);
	analysis_free(a);
	return 0;
}


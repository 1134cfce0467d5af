/*
 * One file in several threads (an_shard_plan: from analysis_opts.jobs
 * 3 on, 4 threads in 7 analysing, the rest decompressing): a node's trace
 * holds every local rank, and each rank's state (launch join, open
 * ranges, the step sweep) runs through the whole file, so a file is not
 * cut into record ranges but its processes are dealt out.  The calling
 * thread takes whole chunks from the reader (whose own threads
 * decompress ahead) and queues them; each shard, the caller's included,
 * walks every chunk, analyses the records of its own processes into its
 * own analysis, and skips the rest.  The shards then merge into the
 * caller's analysis (analysis-merge.c) with the first sights of ops,
 * APIs and ranks ordered by record (analysis.seq), so the result is
 * byte for byte what one thread gives.  The shards are as many as the
 * plan gives from the first chunk on, not as the processes seen so far:
 * ranks that register late get the shards left idle, and a shard with
 * no process only walks the chunks' indexes.  One thread reads a file the
 * same way, chunk by chunk (~3 % fewer instructions than a call a
 * record).
 *
 * Which records are whose is decided alike in every shard, from the
 * records alone:
 * - A record that looks up its process (what analysis_source_add does
 *   with it) goes to that process's shard; processes are dealt out
 *   round robin in the order they first appear.  Its pid 0 means the
 *   process of the record before (an_proc_find), which every shard
 *   tracks.
 * - String definitions and clock models: every shard (counted by the
 *   first).
 * - Device memory totals follow every MEMORY record in order: the first
 *   shard keeps them for all (its process part goes to its owner).
 * - The rest (losses, session events, host launches, unknown types) is
 *   the first shard's, but an agent's leave, which its owner reads.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "trace.h"
#include "util.h"

#define SH_MAX		16		/* shards at most */

/* How a record reaches a shard (sh_kind). */
enum sh_kind {
	SH_FIRST,		/* the first shard's */
	SH_PROC,		/* its process's (looked up) */
	SH_EVERY,		/* every shard's */
	SH_LEAVE,		/* its process's when known, else the first */
};

struct sh_job;

/* One shard: an analysis of its processes, and its walk's state. */
struct sh_shard {
	struct sh_job		*j;
	struct analysis		*a;
	struct analysis_source	*src;
	unsigned		 me, k;
	/* pid -> shard (+1 in owner; 0: free slot), open addressing. */
	struct sh_pid {
		uint32_t	pid;
		uint32_t	owner;
	}			*pids;
	size_t			 npids, cpids;	/* cpids: a power of two */
	uint32_t		 deal;		/* processes dealt so far */
	uint32_t		 last;		/* the process looked up last */
	bool			 have_last;
	uint32_t		 c_pid, c_owner; /* the last answer */
	bool			 c_ok;
	pthread_t		 th;
};

/* The chunks in flight: chunk i sits at q[i % AN_SHARD_QUEUE]. */
struct sh_job {
	pthread_mutex_t		 mu;
	pthread_cond_t		 more, less;
	struct trace_reader	*r;
	struct sh_slot {
		struct trace_chunk	 c;
		unsigned		 refs;	/* shards not done with it */
	}			 q[AN_SHARD_QUEUE];
	uint64_t		 pushed, freed;
	bool			 end;
	struct sh_shard		 sh[SH_MAX];
	unsigned		 k;
};

static enum sh_kind
sh_kind(const struct rec_hdr *h, uint32_t *pid)
{
	switch (h->type) {
	case REC_KERNEL:
		*pid = ((const struct rec_kernel *)(const void *)h)->pid;
		return h->aux & REC_F_HOST_LAUNCH ? SH_FIRST : SH_PROC;
	case REC_MEMCPY:
		*pid = ((const struct rec_memcpy *)(const void *)h)->pid;
		return h->aux & REC_F_HOST_LAUNCH ? SH_FIRST : SH_PROC;
	case REC_MEMSET:
		*pid = ((const struct rec_memset *)(const void *)h)->pid;
		return h->aux & REC_F_HOST_LAUNCH ? SH_FIRST : SH_PROC;
	case REC_HCCL:
		*pid = ((const struct rec_hccl *)(const void *)h)->pid;
		return h->aux & REC_F_HOST_LAUNCH ? SH_FIRST : SH_PROC;
	case REC_COMMUNICATION:
		*pid = ((const struct rec_communication *)(const void *)h)->pid;
		return h->aux & REC_F_HOST_LAUNCH ? SH_FIRST : SH_PROC;
	case REC_API:
		*pid = ((const struct rec_api *)(const void *)h)->pid;
		return SH_PROC;
	case REC_MEMORY:
		*pid = ((const struct rec_memory *)(const void *)h)->pid;
		return SH_PROC;
	case REC_MARKER: {
		const struct rec_marker *m = (const void *)h;

		*pid = m->pid;
		return m->source_kind == 0 ? SH_PROC : SH_FIRST;
	}
	case REC_PROCESS:
		*pid = ((const struct rec_process *)(const void *)h)->pid;
		return SH_PROC;
	case REC_STEP:
		*pid = ((const struct rec_step *)(const void *)h)->pid;
		return SH_PROC;
	case REC_STRING_DEF:
	case REC_CLOCK_SYNC:
		return SH_EVERY;
	case REC_SESSION:
		*pid = ((const struct rec_session *)(const void *)h)->pid;
		return h->aux == SESSION_EV_AGENT_LEAVE ? SH_LEAVE : SH_FIRST;
	default:
		return SH_FIRST;
	}
}

/* The slot of pid in s->pids (its owner 0 when not dealt yet). */
static struct sh_pid *
sh_slot(struct sh_shard *s, uint32_t pid)
{
	size_t m = s->cpids - 1, i = (pid * 0x9e3779b1u) & m;

	while (s->pids[i].owner != 0 && s->pids[i].pid != pid)
		i = (i + 1) & m;
	return &s->pids[i];
}

/* The shard of pid; deal: give it the next when it has none (else the
 * first's). */
static unsigned
sh_owner(struct sh_shard *s, uint32_t pid, bool deal)
{
	struct sh_pid *e;

	if (s->c_ok && s->c_pid == pid)
		return s->c_owner;
	e = sh_slot(s, pid);
	if (e->owner == 0) {
		if (!deal)
			return 0;
		if (2 * (s->npids + 1) > s->cpids) {
			struct sh_pid *old = s->pids;
			size_t n = s->cpids;

			s->cpids *= 2;
			s->pids = an_realloc(NULL, s->cpids * sizeof(*s->pids));
			memset(s->pids, 0, s->cpids * sizeof(*s->pids));
			for (size_t i = 0; i < n; i++)
				if (old[i].owner != 0)
					*sh_slot(s, old[i].pid) = old[i];
			free(old);
			e = sh_slot(s, pid);
		}
		e->pid = pid;
		e->owner = s->deal++ % s->k + 1;
		s->npids++;
	}
	s->c_ok = true;
	s->c_pid = pid;
	s->c_owner = e->owner - 1;
	return s->c_owner;
}

/*
 * A chunk's index (built by the reader's threads, an_shard_index): runs
 * of records that go the same way, so that a shard skips others'
 * records by the run.
 */
struct sh_run {
	uint32_t	off, len;	/* bytes */
	uint32_t	n;		/* records */
	uint32_t	pid;		/* SH_PROC, SH_LEAVE: the records' */
	uint8_t		kind;		/* enum sh_kind */
	bool		mem;		/* holds MEMORY records */
};

void
an_shard_index(const uint8_t *data, size_t len, uint32_t records,
    struct trace_chunk_aux *aux)
{
	struct sh_run *run = aux->p, *u = NULL;
	size_t n = 0, cap = aux->cap / sizeof(*run);

	(void)records;
	for (size_t at = 0; at < len;) {
		const struct rec_hdr *h = (const void *)(data + at);
		uint32_t pid = 0;
		enum sh_kind k = sh_kind(h, &pid);

		if (k == SH_FIRST || k == SH_EVERY)
			pid = 0;
		if (u == NULL || u->kind != k || u->pid != pid) {
			if (n == cap) {
				cap = cap ? 2 * cap : 256;
				run = an_realloc(run, cap * sizeof(*run));
				aux->p = run;
				aux->cap = cap * sizeof(*run);
			}
			u = &run[n++];
			u->off = (uint32_t)at;
			u->len = u->n = 0;
			u->pid = pid;
			u->kind = (uint8_t)k;
			u->mem = false;
		}
		u->len += h->size;
		u->n++;
		u->mem |= h->type == REC_MEMORY;
		at += h->size;
	}
	aux->len = n * sizeof(*run);
}

/* The records every shard takes: the first analyses them, the others
 * keep the strings and clocks. */
static void
sh_every(struct sh_shard *s, const uint8_t *p, const uint8_t *end)
{
	if (s->me == 0) {
		an_add_run(s->src, p, end);
		return;
	}
	while (p < end) {
		const struct rec_hdr *h = (const void *)p;

		s->a->seq++;
		if (h->type == REC_STRING_DEF) {
			const struct rec_string_def *d = (const void *)h;

			analysis_source_string(s->src, d->id, d->bytes);
		} else
			an_clock_sync(s->src, (const void *)h);
		p += h->size;
	}
}

/* Device memory totals of others' MEMORY records (the first shard). */
static void
sh_mem(struct sh_shard *s, const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		const struct rec_hdr *h = (const void *)p;

		if (h->type == REC_MEMORY)
			an_mem_dev(s->a, (const void *)h);
		p += h->size;
	}
}

/* The process a run of SH_PROC records looks up (pid 0: the one looked
 * up last), noted as the last. */
static uint32_t
sh_proc(struct sh_shard *s, const struct sh_run *u)
{
	uint32_t as = u->pid == 0 && s->have_last ? s->last : u->pid;

	s->last = as;
	s->have_last = true;
	return as;
}

/* Chunk c, as shard s sees it. */
static void
sh_walk(struct sh_shard *s, const struct trace_chunk *c)
{
	const struct sh_run *run = c->aux;
	size_t nrun = c->auxlen / sizeof(*run);

	if (s->k == 1) {
		an_add_run(s->src, c->data, c->data + c->len);
		return;
	}
	for (size_t i = 0; i < nrun; i++) {
		const struct sh_run *u = &run[i];
		const uint8_t *p = c->data + u->off, *end = p + u->len;
		unsigned owner = 0;

		switch ((enum sh_kind)u->kind) {
		case SH_PROC:
			/* Records of pid 0 go with the process looked up
			 * last: that record was its owner's, and the last
			 * that shard looked up (an_proc_find's cache). */
			owner = sh_owner(s, sh_proc(s, u), true);
			if (owner != s->me && s->me == 0 && u->mem)
				sh_mem(s, p, end);
			break;
		case SH_EVERY:
			sh_every(s, p, end);
			continue;
		case SH_LEAVE:
			owner = u->pid != 0 ? sh_owner(s, u->pid, false) : 0;
			break;
		case SH_FIRST:
			break;
		}
		if (owner == s->me)
			an_add_run(s->src, p, end);
		else
			s->a->seq += u->n;
	}
}

/* Shard s is done with chunk i: the last one gives it back. */
static void
sh_done(struct sh_job *j, uint64_t i)
{
	struct sh_slot *q = &j->q[i % AN_SHARD_QUEUE];

	pthread_mutex_lock(&j->mu);
	if (--q->refs == 0) {
		/* Chunks come free in order: every shard walks them so. */
		trace_reader_chunk_done(j->r, &q->c);
		j->freed++;
		pthread_cond_signal(&j->less);
	}
	pthread_mutex_unlock(&j->mu);
}

static void *
sh_worker(void *arg)
{
	struct sh_shard *s = arg;
	struct sh_job *j = s->j;

	for (uint64_t i = 0;; i++) {
		struct trace_chunk c;

		pthread_mutex_lock(&j->mu);
		while (i == j->pushed && !j->end)
			pthread_cond_wait(&j->more, &j->mu);
		if (i == j->pushed) {
			pthread_mutex_unlock(&j->mu);
			return NULL;
		}
		c = j->q[i % AN_SHARD_QUEUE].c;
		pthread_mutex_unlock(&j->mu);
		sh_walk(s, &c);
		sh_done(j, i);
	}
}

/* Shard i of j (0: a's own, on src). */
static int
sh_init(struct sh_job *j, unsigned i, struct analysis *a,
    struct analysis_source *src, struct trace_reader *r, const char *path)
{
	struct sh_shard *s = &j->sh[i];

	memset(s, 0, sizeof(*s));
	s->j = j;
	s->me = i;
	s->k = j->k;
	s->cpids = 64;
	s->pids = an_realloc(NULL, s->cpids * sizeof(*s->pids));
	memset(s->pids, 0, s->cpids * sizeof(*s->pids));
	if (i == 0) {
		s->a = a;
		s->src = src;
		return 0;
	}
	if ((s->a = analysis_new(&a->o)) == NULL)
		return -ENOMEM;
	s->a->seq = a->seq;
	if ((s->src = an_src_open(s->a, path, r)) == NULL)
		return -ENOMEM;
	s->src->no_mem_dev = true;
	return 0;
}

/*
 * A record costs the reader's threads ~29 ns (zstd, delta decoding,
 * checks) and its analysis ~40 ns on this design's benchmark
 * (bench-report): jobs threads go 4 in 7 to the shards, the rest to
 * reading.  So 2 jobs are 1 analysing thread and 1 reading, as before
 * the shards (on 2 CPUs a third thread only costs), 4 are 2 and 2, 16
 * are 9 and 7.
 */
unsigned
an_shard_plan(unsigned jobs)
{
	unsigned k = (4 * jobs + 3) / 7;

	if (k < 1)
		k = 1;
	return k < SH_MAX ? k : SH_MAX;
}

/* Starts k shards (fewer when threads cannot be had), before the first
 * chunk is queued: the shards deal processes out by their number. */
static void
sh_start(struct sh_job *j, unsigned k, struct analysis *a,
    struct analysis_source *src, struct trace_reader *r, const char *path)
{
	sigset_t old;
	unsigned n = 1;

	j->k = k;
	for (unsigned i = 0; i < k; i++)
		if (sh_init(j, i, a, src, r, path) != 0) {
			fputs("analysis: out of memory\n", stderr);
			abort();
		}
	/* Inside an application (the Python extension) its signals stay
	 * with its own threads. */
	util_block_async_signals(&old);
	while (n < k && pthread_create(&j->sh[n].th, NULL, sh_worker,
	    &j->sh[n]) == 0)
		n++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* The started ones wait for the first chunk: nothing is dealt. */
	for (unsigned i = n; i < k; i++) {
		analysis_free(j->sh[i].a);
		free(j->sh[i].pids);
		j->sh[i].pids = NULL;
	}
	j->k = n;
	for (unsigned i = 0; i < n; i++)
		j->sh[i].k = n;
}

/* Queues chunk c for every shard; waits while the queue is full. */
static void
sh_push(struct sh_job *j, const struct trace_chunk *c)
{
	pthread_mutex_lock(&j->mu);
	while (j->pushed - j->freed == AN_SHARD_QUEUE)
		pthread_cond_wait(&j->less, &j->mu);
	j->q[j->pushed % AN_SHARD_QUEUE].c = *c;
	j->q[j->pushed % AN_SHARD_QUEUE].refs = j->k;
	j->pushed++;
	pthread_cond_broadcast(&j->more);
	pthread_mutex_unlock(&j->mu);
}

int
an_shards(struct analysis *a, struct analysis_source *src,
    struct trace_reader *r, const char *path)
{
	struct sh_job *j = an_realloc(NULL, sizeof(*j));
	struct an_counts before = { a->nops, a->napis, a->norph, a->nproc };
	struct trace_chunk c;
	unsigned jobs = an_shard_plan(a->o.jobs), busy;
	int rc;

	memset(j, 0, sizeof(*j));
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->more, NULL);
	pthread_cond_init(&j->less, NULL);
	j->r = r;
	j->k = 0;
	for (;;) {
		rc = trace_reader_next_chunk(r, &c);
		if (rc == -EBADMSG) {
			an_warn(a, "%s: %s (chunk skipped)", path,
			    trace_reader_error(r));
			src->corrupt++;
			continue;
		}
		if (rc < 0)
			an_warn(a, "%s: read error: %s", path,
			    trace_strerror(rc));
		if (rc <= 0)
			break;
		/* As many shards as the plan gives, whatever the first
		 * chunk holds: ranks that register late are dealt to the
		 * shards the early ones left idle. */
		if (j->k == 0)
			sh_start(j, jobs, a, src, r, path);
		sh_push(j, &c);
		sh_walk(&j->sh[0], &c);
		sh_done(j, j->pushed - 1);
	}
	pthread_mutex_lock(&j->mu);
	j->end = true;
	pthread_cond_broadcast(&j->more);
	pthread_mutex_unlock(&j->mu);
	for (unsigned i = 1; i < j->k; i++) {
		pthread_join(j->sh[i].th, NULL);
		an_merge_shard(a, j->sh[i].a);
		analysis_free(j->sh[i].a);
	}
	if (j->k > 1)
		an_merge_shards_end(a, &before);
	/* The shards that had a process to analyse (every shard dealt
	 * the same processes). */
	busy = j->k > 0 && j->sh[0].deal < j->k ? j->sh[0].deal : j->k;
	if (busy == 0)
		busy = 1;
	if (busy > a->threads)
		a->threads = busy;
	for (unsigned i = 0; i < j->k; i++)
		free(j->sh[i].pids);
	pthread_cond_destroy(&j->more);
	pthread_cond_destroy(&j->less);
	pthread_mutex_destroy(&j->mu);
	free(j);
	return rc;
}

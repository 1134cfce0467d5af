/*
 * join: two waiting tables (launches, device tasks), each a chained hash on
 * (device, stream, task id) plus an age list in insertion order, so that
 * expiry and eviction take the oldest entry in O(1).  Entries that leave
 * are kept for the next ones: a capture takes and gives back one per
 * launch and per device task, in bursts (a ring drain adds thousands of
 * launches, a device poll takes them back).  join_expire (msptid calls it
 * after each device poll) ends a spell: a table then keeps as many as it
 * held at its peak in this spell or the one before, at least
 * JOIN_SPARE_MIN, and frees the rest.
 * The emit callback must not call back into the same join.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "join.h"

#define JOIN_MAX_NTASKS		4096	/* tasks one launch may declare */
#define JOIN_MIN_BUCKETS	256
#define JOIN_STREAM_BUCKETS	64
#define JOIN_MAX_STREAMS	4096	/* beyond: no window for new ones */
#define JOIN_SPARE_MIN		1024	/* freed entries always kept */

/* The task ids of the launches seen on one (device, stream). */
struct jstream {
	struct jstream	*next;
	uint32_t	 device;
	uint32_t	 stream;
	uint32_t	 first;
	uint32_t	 last;
};

struct jent {
	TAILQ_ENTRY(jent)	 age;
	struct jent		*next;		/* hash chain */
	uint32_t		 device;
	uint32_t		 stream;
	uint32_t		 task;
	uint64_t		 added;
	struct join_launch	 launch;	/* host table */
	unsigned char		 data[];	/* dev table: dev_size bytes */
};

TAILQ_HEAD(jent_list, jent);

struct jtable {
	struct jent	**buckets;
	size_t		  nbuckets;	/* power of two */
	size_t		  n;
	size_t		  max;
	struct jent_list  ages;
	/* Entries that left, for the next ones (all esize bytes): a join
	 * takes and gives back one per launch and per device task. */
	struct jent	 *spare;
	size_t		  nspare;
	size_t		  peak;		/* most entries since join_expire */
	size_t		  peak_prev;	/* and in the spell before */
	size_t		  esize;
};

struct join {
	struct join_config	 cfg;
	join_emit_cb		 emit;
	void			*arg;
	struct jtable		 host;
	struct jtable		 dev;
	struct join_stats	 st;
	struct jstream		*streams[JOIN_STREAM_BUCKETS];
	size_t			 nstreams;
};

static size_t
jhash(uint32_t device, uint32_t stream, uint32_t task)
{
	uint64_t k = ((uint64_t)stream << 32 | task) ^
	    ((uint64_t)device * 0x9e3779b97f4a7c15ull);

	k ^= k >> 31;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 29;
	return (size_t)k;
}

static int
jtable_init(struct jtable *t, size_t max, size_t data)
{
	t->nbuckets = JOIN_MIN_BUCKETS;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	t->n = 0;
	t->max = max;
	t->spare = NULL;
	t->nspare = 0;
	t->peak = t->peak_prev = 0;
	t->esize = sizeof(struct jent) + data;
	TAILQ_INIT(&t->ages);
	return t->buckets == NULL ? -ENOMEM : 0;
}

static void
jtable_free(struct jtable *t)
{
	struct jent *e;

	while ((e = TAILQ_FIRST(&t->ages)) != NULL) {
		TAILQ_REMOVE(&t->ages, e, age);
		free(e);
	}
	while ((e = t->spare) != NULL) {
		t->spare = e->next;
		free(e);
	}
	t->nspare = 0;
	free(t->buckets);
	t->buckets = NULL;
}

/* The chain link that holds (device, stream, task) or ends its chain;
 * h is jhash of the key (a join looks the same key up in both tables). */
static inline struct jent **
jtable_slot_h(struct jtable *t, size_t h, uint32_t device, uint32_t stream,
    uint32_t task)
{
	struct jent **pp = &t->buckets[h & (t->nbuckets - 1)];

	while (*pp != NULL && ((*pp)->device != device ||
	    (*pp)->stream != stream || (*pp)->task != task))
		pp = &(*pp)->next;
	return pp;
}

static struct jent **
jtable_slot(struct jtable *t, uint32_t device, uint32_t stream, uint32_t task)
{
	return jtable_slot_h(t, jhash(device, stream, task), device, stream,
	    task);
}

/* Doubles the bucket array when chains get long; failure just keeps the
 * old (still correct) array. */
static void
jtable_grow(struct jtable *t)
{
	size_t nb = t->nbuckets * 2, i;
	struct jent **b, *e, *next;

	if (t->n <= t->nbuckets * 2 || (b = calloc(nb, sizeof(*b))) == NULL)
		return;
	for (i = 0; i < t->nbuckets; i++)
		for (e = t->buckets[i]; e != NULL; e = next) {
			size_t h = jhash(e->device, e->stream, e->task) &
			    (nb - 1);

			next = e->next;
			e->next = b[h];
			b[h] = e;
		}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = nb;
}

/* Unlinks e from t (hash chain and age list); the caller frees it. */
static void
jtable_unlink(struct jtable *t, struct jent *e)
{
	struct jent **pp = jtable_slot(t, e->device, e->stream, e->task);

	if (*pp == e)
		*pp = e->next;
	TAILQ_REMOVE(&t->ages, e, age);
	t->n--;
}

/* The same for the entry *pp, its chain link known. */
static void
jtable_unlink_at(struct jtable *t, struct jent **pp)
{
	struct jent *e = *pp;

	*pp = e->next;
	TAILQ_REMOVE(&t->ages, e, age);
	t->n--;
}

static void
jtable_insert(struct jtable *t, struct jent **slot, struct jent *e)
{
	e->next = NULL;
	*slot = e;
	TAILQ_INSERT_TAIL(&t->ages, e, age);
	if (++t->n > t->peak)
		t->peak = t->n;
}

static struct jent *
jent_new(struct jtable *t, uint32_t device, uint32_t stream, uint32_t task,
    uint64_t now)
{
	struct jent *e = t->spare;

	if (e != NULL) {
		t->spare = e->next;
		t->nspare--;
	} else if ((e = malloc(t->esize)) == NULL)
		return NULL;
	e->device = device;
	e->stream = stream;
	e->task = task;
	e->added = now;
	return e;
}

/* e left t (unlinked): kept for the next one (jtable_trim bounds them). */
static void
jent_put(struct jtable *t, struct jent *e)
{
	e->next = t->spare;
	t->spare = e;
	t->nspare++;
}

/* A spell ends: the spare entries beyond the most this spell or the one
 * before held live (at least JOIN_SPARE_MIN) are freed.  A new entry is
 * made only when none is spare, so the next spell's bursts up to that
 * size allocate nothing. */
static void
jtable_trim(struct jtable *t)
{
	size_t keep = t->peak > t->peak_prev ? t->peak : t->peak_prev;

	if (keep < JOIN_SPARE_MIN)
		keep = JOIN_SPARE_MIN;
	while (t->nspare > keep) {
		struct jent *e = t->spare;

		t->spare = e->next;
		t->nspare--;
		free(e);
	}
	t->peak_prev = t->peak;
	t->peak = t->n;
}

static struct jstream **
join_stream_slot(struct join *j, uint32_t device, uint32_t stream)
{
	struct jstream **pp = &j->streams[jhash(device, stream, 0) &
	    (JOIN_STREAM_BUCKETS - 1)];

	while (*pp != NULL && ((*pp)->device != device ||
	    (*pp)->stream != stream))
		pp = &(*pp)->next;
	return pp;
}

/* Widens the launch range of (device, stream) to task (ids compare
 * modulo 2^32). */
static void
join_stream_note(struct join *j, uint32_t device, uint32_t stream,
    uint32_t task)
{
	struct jstream **pp = join_stream_slot(j, device, stream), *e = *pp;

	if (e == NULL) {
		if (j->nstreams >= JOIN_MAX_STREAMS ||
		    (e = malloc(sizeof(*e))) == NULL)
			return;
		e->next = NULL;
		e->device = device;
		e->stream = stream;
		e->first = e->last = task;
		*pp = e;
		j->nstreams++;
		return;
	}
	if ((int32_t)(task - e->first) < 0)
		e->first = task;
	if ((int32_t)(task - e->last) > 0)
		e->last = task;
}

/* Whether a device task with no launch lies outside the launches of its
 * stream: before the first, or (final: the capture is over) after the
 * last. */
static bool
join_outside(struct join *j, uint32_t device, uint32_t stream, uint32_t task,
    bool final)
{
	const struct jstream *e = *join_stream_slot(j, device, stream);

	if (e == NULL)
		return false;
	return (int32_t)(task - e->first) < 0 ||
	    (final && (int32_t)(task - e->last) > 0);
}

struct join *
join_new(const struct join_config *cfg, join_emit_cb emit, void *arg)
{
	struct join *j;

	if (cfg == NULL || cfg->dev_size == 0 || emit == NULL)
		return NULL;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	j->cfg = *cfg;
	if (j->cfg.dev_timeout_ns == 0)
		j->cfg.dev_timeout_ns = JOIN_DEV_TIMEOUT_NS;
	if (j->cfg.host_timeout_ns == 0)
		j->cfg.host_timeout_ns = JOIN_HOST_TIMEOUT_NS;
	if (j->cfg.max_dev == 0)
		j->cfg.max_dev = JOIN_MAX_DEV;
	if (j->cfg.max_host == 0)
		j->cfg.max_host = JOIN_MAX_HOST;
	j->emit = emit;
	j->arg = arg;
	if (jtable_init(&j->host, j->cfg.max_host, 0) != 0 ||
	    jtable_init(&j->dev, j->cfg.max_dev, j->cfg.dev_size) != 0) {
		join_free(j);
		return NULL;
	}
	return j;
}

void
join_free(struct join *j)
{
	if (j == NULL)
		return;
	jtable_free(&j->host);
	jtable_free(&j->dev);
	for (size_t i = 0; i < JOIN_STREAM_BUCKETS; i++)
		while (j->streams[i] != NULL) {
			struct jstream *e = j->streams[i];

			j->streams[i] = e->next;
			free(e);
		}
	free(j);
}

/* A launch task leaves without its device task: counted in *stat. */
static void
join_drop(struct join *j, const struct join_launch *l, uint64_t *stat)
{
	(*stat)++;
	if (j->cfg.drop != NULL)
		j->cfg.drop(l, j->arg);
}

/* Emits and frees the waiting device task *pp (its chain link) with
 * launch l (NULL: alone). */
static void
join_emit_dev(struct join *j, struct jent **pp, const struct join_launch *l)
{
	struct jent *e = *pp;

	jtable_unlink_at(&j->dev, pp);
	j->emit(e->data, l, j->arg);
	jent_put(&j->dev, e);
}

/* A waiting device task leaves alone: emitted (counted in *stat) unless
 * it lies outside the capture (join_outside). */
static void
join_emit_alone(struct join *j, struct jent *e, uint64_t *stat, bool final)
{
	if (join_outside(j, e->device, e->stream, e->task, final)) {
		j->st.dev_outside++;
		jtable_unlink(&j->dev, e);
		jent_put(&j->dev, e);
		return;
	}
	(*stat)++;
	join_emit_dev(j, jtable_slot(&j->dev, e->device, e->stream, e->task),
	    NULL);
}

static int
join_add_one(struct join *j, const struct join_launch *l, uint32_t task,
    uint64_t now)
{
	size_t h = jhash(l->device, l->stream, task);
	struct jent **pp, *e;

	pp = jtable_slot_h(&j->dev, h, l->device, l->stream, task);
	if (*pp != NULL) {
		j->st.matched++;
		join_emit_dev(j, pp, l);
		return 0;
	}
	pp = jtable_slot_h(&j->host, h, l->device, l->stream, task);
	if (*pp != NULL) {
		/* Task ids wrapped, or the same launch twice: keep the new one
		 * (a different launch lost its device task). */
		if ((*pp)->launch.correlation_id != l->correlation_id)
			join_drop(j, &(*pp)->launch, &j->st.host_only);
		(*pp)->launch = *l;
		(*pp)->added = now;
		TAILQ_REMOVE(&j->host.ages, *pp, age);
		TAILQ_INSERT_TAIL(&j->host.ages, *pp, age);
		j->st.host_replaced++;
		return 0;
	}
	if (j->host.n >= j->host.max) {
		e = TAILQ_FIRST(&j->host.ages);
		jtable_unlink(&j->host, e);
		join_drop(j, &e->launch, &j->st.host_evicted);
		jent_put(&j->host, e);
		pp = jtable_slot(&j->host, l->device, l->stream, task);
	}
	if ((e = jent_new(&j->host, l->device, l->stream, task, now)) ==
	    NULL) {
		/* No room, as at max_host: counted and passed on, never
		 * lost silently. */
		join_drop(j, l, &j->st.host_evicted);
		return -ENOMEM;
	}
	e->launch = *l;
	jtable_insert(&j->host, pp, e);
	jtable_grow(&j->host);
	return 0;
}

int
join_add_launch(struct join *j, const struct join_launch *l, uint64_t now)
{
	uint32_t n = l->ntasks == 0 ? 1 : l->ntasks, k;
	int rc = 0;

	if (n > JOIN_MAX_NTASKS)
		n = JOIN_MAX_NTASKS;
	join_stream_note(j, l->device, l->stream, l->task_id);
	if (n > 1)
		join_stream_note(j, l->device, l->stream, l->task_id + n - 1);
	for (k = 0; k < n; k++)
		if (join_add_one(j, l, l->task_id + k, now) != 0)
			rc = -ENOMEM;
	return rc;
}

int
join_add_task(struct join *j, uint32_t device, uint32_t stream,
    uint32_t task_id, const void *dev_task, uint64_t now)
{
	size_t h = jhash(device, stream, task_id);
	struct jent **pp, *e;
	struct join_launch l;

	pp = jtable_slot_h(&j->host, h, device, stream, task_id);
	if (*pp != NULL) {
		e = *pp;
		l = e->launch;
		jtable_unlink_at(&j->host, pp);
		jent_put(&j->host, e);
		j->st.matched++;
		j->emit(dev_task, &l, j->arg);
		return 0;
	}
	pp = jtable_slot_h(&j->dev, h, device, stream, task_id);
	if (*pp != NULL) {
		j->st.dev_duplicate++;
		join_emit_alone(j, *pp, &j->st.dev_unmatched, false);
		pp = jtable_slot(&j->dev, device, stream, task_id);
	}
	if (j->dev.n >= j->dev.max) {
		join_emit_alone(j, TAILQ_FIRST(&j->dev.ages), &j->st.dev_evicted,
		    false);
		pp = jtable_slot(&j->dev, device, stream, task_id);
	}
	if ((e = jent_new(&j->dev, device, stream, task_id, now)) == NULL) {
		if (join_outside(j, device, stream, task_id, false)) {
			j->st.dev_outside++;
			return -ENOMEM;
		}
		j->st.dev_unmatched++;
		j->emit(dev_task, NULL, j->arg);
		return -ENOMEM;
	}
	memset(&e->launch, 0, sizeof(e->launch));
	memcpy(e->data, dev_task, j->cfg.dev_size);
	jtable_insert(&j->dev, pp, e);
	jtable_grow(&j->dev);
	return 0;
}

void
join_expire(struct join *j, uint64_t now)
{
	struct jent *e;

	while ((e = TAILQ_FIRST(&j->dev.ages)) != NULL &&
	    now >= e->added && now - e->added >= j->cfg.dev_timeout_ns)
		join_emit_alone(j, e, &j->st.dev_unmatched, false);
	while ((e = TAILQ_FIRST(&j->host.ages)) != NULL &&
	    now >= e->added && now - e->added >= j->cfg.host_timeout_ns) {
		jtable_unlink(&j->host, e);
		join_drop(j, &e->launch, &j->st.host_only);
		jent_put(&j->host, e);
	}
	jtable_trim(&j->dev);
	jtable_trim(&j->host);
}

void
join_flush_at(struct join *j, uint64_t now, uint64_t inflight_ns)
{
	struct jent *e;

	while ((e = TAILQ_FIRST(&j->dev.ages)) != NULL)
		join_emit_alone(j, e, &j->st.dev_unmatched, true);
	while ((e = TAILQ_FIRST(&j->host.ages)) != NULL) {
		jtable_unlink(&j->host, e);
		join_drop(j, &e->launch, inflight_ns > 0 && e->added <= now &&
		    now - e->added < inflight_ns ? &j->st.host_inflight :
		    &j->st.host_only);
		jent_put(&j->host, e);
	}
}

void
join_flush(struct join *j)
{
	join_flush_at(j, 0, 0);
}

void
join_get_stats(const struct join *j, struct join_stats *out)
{
	*out = j->st;
	out->dev_waiting = j->dev.n;
	out->host_waiting = j->host.n;
	out->dev_spare = j->dev.nspare;
	out->host_spare = j->host.nspare;
}

void
join_host_foreach(const struct join *j,
    void (*cb)(const struct join_launch *, void *), void *arg)
{
	const struct jent *e;

	TAILQ_FOREACH(e, &j->host.ages, age)
		cb(&e->launch, arg);
}

int
join_has_launch(const struct join *j, uint32_t device, uint32_t stream,
    uint32_t task_id)
{
	return *jtable_slot((struct jtable *)&j->host, device, stream,
	    task_id) != NULL;
}

int
join_in_window(const struct join *j, uint32_t device, uint32_t stream,
    uint32_t task_id)
{
	const struct jstream *e = *join_stream_slot((struct join *)j, device,
	    stream);

	return e != NULL && (int32_t)(task_id - e->first) >= 0 &&
	    (int32_t)(task_id - e->last) <= 0;
}

void
join_stream_foreach(const struct join *j,
    void (*cb)(uint32_t, uint32_t, uint32_t, uint32_t, void *), void *arg)
{
	for (size_t i = 0; i < JOIN_STREAM_BUCKETS; i++)
		for (const struct jstream *e = j->streams[i]; e != NULL;
		    e = e->next)
			cb(e->device, e->stream, e->first, e->last, arg);
}

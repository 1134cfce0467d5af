/*
 * MSTX: marks, ranges and domains, implemented directly in libmspti.so.
 * A disabled MARKER kind costs one load.  Domains are never freed (records
 * point at their interned names, and a name keeps its enabled state across
 * destroy/create); dom_mtx guards the list, never the mark path.  Open
 * ranges and device marks waiting for their device record are remembered
 * in a growable hash map keyed by id (sharded, one short lock per shard),
 * so mstxRangeEnd and the device record (which carry only the id) find
 * the message, domain, stream and host time however many are open.  An
 * entry holds one reference per record still to come (the host END, each
 * device record) and goes with the last.  A mark without a stream needs
 * none and takes no lock.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "agent.h"

#define MSTX_MSG_MAX	255
#define MSTX_SHARDS	16
#define MSTX_MIN_CAP	256

struct mstxDomainRegistration_st {
	const char				*name;		/* interned */
	_Atomic bool				 enabled;
	struct mstxDomainRegistration_st	*next;
};

static struct mstxDomainRegistration_st default_domain = {
	.name = "default", .enabled = true,
};
static struct mstxDomainRegistration_st *domains = &default_domain;
static pthread_mutex_t dom_mtx = PTHREAD_MUTEX_INITIALIZER;

static _Atomic uint64_t next_marker_id = 1;

struct mstx_open {
	uint64_t	 id;		/* 0: free slot */
	const char	*name;
	const char	*domain;
	void		*stream;
	uint64_t	 start_ts;	/* host records' timestamps */
	uint64_t	 end_ts;
	unsigned	 refs;
	bool		 ended;
};

static struct mstx_shard {
	pthread_mutex_t		 mtx;
	struct mstx_open	*ents;
	size_t			 cap, used;
} mstx_shards[MSTX_SHARDS];
static pthread_once_t mstx_once = PTHREAD_ONCE_INIT;

/* A forked child: the locks may have been held by threads now gone. */
static void
mstx_atfork_child(void)
{
	unsigned i;

	for (i = 0; i < MSTX_SHARDS; i++)
		pthread_mutex_init(&mstx_shards[i].mtx, NULL);
	pthread_mutex_init(&dom_mtx, NULL);
}

static void
mstx_init_once(void)
{
	unsigned i;

	for (i = 0; i < MSTX_SHARDS; i++)
		pthread_mutex_init(&mstx_shards[i].mtx, NULL);
	pthread_atfork(NULL, NULL, mstx_atfork_child);
}

static struct mstx_shard *
mstx_shard(uint64_t id)
{
	return &mstx_shards[id % MSTX_SHARDS];
}

static size_t
mstx_hash(uint64_t id, size_t cap)
{
	id /= MSTX_SHARDS;
	id *= 0x9e3779b97f4a7c15ull;
	return (size_t)(id >> 17) & (cap - 1);
}

/* The slot of id in sh (locked), or of the free slot ending its probe. */
static size_t
mstx_slot(struct mstx_shard *sh, uint64_t id)
{
	size_t i = mstx_hash(id, sh->cap);

	while (sh->ents[i].id != 0 && sh->ents[i].id != id)
		i = (i + 1) & (sh->cap - 1);
	return i;
}

static bool
mstx_grow(struct mstx_shard *sh)
{
	struct mstx_open *old = sh->ents;
	size_t ocap = sh->cap, cap = ocap ? ocap * 2 : MSTX_MIN_CAP, i;

	sh->ents = calloc(cap, sizeof(*sh->ents));
	if (sh->ents == NULL) {
		sh->ents = old;
		return false;
	}
	sh->cap = cap;
	for (i = 0; i < ocap; i++)
		if (old[i].id != 0)
			sh->ents[mstx_slot(sh, old[i].id)] = old[i];
	free(old);
	return true;
}

/* Remembers e; false (nothing kept) when memory ran out. */
static bool
mstx_put(const struct mstx_open *e)
{
	struct mstx_shard *sh = mstx_shard(e->id);
	bool ok = true;

	pthread_once(&mstx_once, mstx_init_once);
	pthread_mutex_lock(&sh->mtx);
	if ((sh->used + 1) * 4 > sh->cap * 3 && !mstx_grow(sh) &&
	    sh->used + 1 >= sh->cap)
		ok = false;
	else {
		sh->ents[mstx_slot(sh, e->id)] = *e;
		sh->used++;
	}
	pthread_mutex_unlock(&sh->mtx);
	return ok;
}

/* Removes slot i of sh (locked), shifting its cluster back. */
static void
mstx_remove_at(struct mstx_shard *sh, size_t i)
{
	size_t j = i, k, mask = sh->cap - 1;

	sh->ents[i].id = 0;
	sh->used--;
	for (;;) {
		j = (j + 1) & mask;
		if (sh->ents[j].id == 0)
			break;
		k = mstx_hash(sh->ents[j].id, sh->cap);
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			sh->ents[i] = sh->ents[j];
			sh->ents[j].id = 0;
			i = j;
		}
	}
}

/* The entry of id, locked in *shp (unlock it after), or NULL unlocked. */
static struct mstx_open *
mstx_find(uint64_t id, struct mstx_shard **shp, size_t *slot)
{
	struct mstx_shard *sh = mstx_shard(id);
	size_t i;

	pthread_once(&mstx_once, mstx_init_once);
	pthread_mutex_lock(&sh->mtx);
	if (sh->cap == 0 || sh->ents[i = mstx_slot(sh, id)].id != id) {
		pthread_mutex_unlock(&sh->mtx);
		return NULL;
	}
	*shp = sh;
	*slot = i;
	return &sh->ents[i];
}

/* Drops one reference of e (found with mstx_find) and unlocks. */
static void
mstx_unref_locked(struct mstx_shard *sh, size_t slot)
{
	if (--sh->ents[slot].refs == 0)
		mstx_remove_at(sh, slot);
	pthread_mutex_unlock(&sh->mtx);
}

static void
mstx_unref(uint64_t id)
{
	struct mstx_shard *sh;
	size_t slot;

	if (mstx_find(id, &sh, &slot) != NULL)
		mstx_unref_locked(sh, slot);
}

/* Finds or adds the domain called name; NULL on allocation failure. */
static struct mstxDomainRegistration_st *
mstx_domain_get(const char *name)
{
	struct mstxDomainRegistration_st *d;

	pthread_mutex_lock(&dom_mtx);
	for (d = domains; d != NULL; d = d->next)
		if (strcmp(d->name, name) == 0)
			goto out;
	d = calloc(1, sizeof(*d));
	if (d != NULL && (d->name = api_intern(name)) == NULL) {
		free(d);
		d = NULL;
	}
	if (d != NULL) {
		d->enabled = true;
		d->next = domains;
		domains = d;
	}
out:
	pthread_mutex_unlock(&dom_mtx);
	return d;
}

int
mstx_domain_set_enabled(const char *name, bool enabled)
{
	struct mstxDomainRegistration_st *d;

	/* No domain is called "" (mstxDomainCreateA refuses it). */
	if (name == NULL || *name == '\0' ||
	    strnlen(name, MSTX_MSG_MAX) >= MSTX_MSG_MAX)
		return -1;
	if ((d = mstx_domain_get(name)) == NULL)
		return -1;
	atomic_store(&d->enabled, enabled);
	return 0;
}

bool
mstx_marker_take(uint64_t id, uint32_t flag, const char **name,
    const char **domain, uint64_t *host_ts)
{
	struct mstx_shard *sh;
	struct mstx_open *e;
	size_t slot;

	if ((e = mstx_find(id, &sh, &slot)) == NULL)
		return false;
	*name = e->name;
	*domain = e->domain;
	*host_ts = (flag & MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE) ?
	    e->end_ts : e->start_ts;
	mstx_unref_locked(sh, slot);
	return true;
}

static void
mstx_host_record(uint64_t id, msptiActivityFlag flag, const char *name,
    const char *domain, uint64_t ts)
{
	activity_emit_host_marker(flag, id, ts, name, domain);
}

/* The last messages this thread marked: message pointer -> interned copy.
 * A hit is checked by content (the caller may reuse a buffer), which
 * costs one strcmp instead of api_intern's hash and table probe. */
#define MSTX_TLS_CACHE	8
static API_TLS struct {
	const char	*msg;
	const char	*name;
} mstx_tls_cache[MSTX_TLS_CACHE];

/* message interned, or NULL when it is too long or memory ran out. */
static inline __attribute__((always_inline)) const char *
mstx_intern_cached(const char *message)
{
	unsigned i = ((uintptr_t)message >> 3) & (MSTX_TLS_CACHE - 1);
	const char *name = mstx_tls_cache[i].name;

	/* Cached names passed the length check below. */
	if (API_LIKELY(mstx_tls_cache[i].msg == message && name != NULL &&
	    strcmp(name, message) == 0))
		return name;
	if (strnlen(message, MSTX_MSG_MAX) >= MSTX_MSG_MAX ||
	    (name = api_intern(message)) == NULL)
		return NULL;
	mstx_tls_cache[i].msg = message;
	mstx_tls_cache[i].name = name;
	return name;
}

/*
 * mstx_begin's range or device marker (out of line: a plain mark keeps a
 * small frame): the open entry kept, the device marker queued, the step
 * counted.  Returns the host record's flag.
 */
static __attribute__((noinline)) msptiActivityFlag
mstx_begin_open(struct mstxDomainRegistration_st *d, const char *name,
    void *stream, msptiActivityFlag flag, uint64_t id, uint64_t ts)
{
	bool range = flag == MSPTI_ACTIVITY_FLAG_MARKER_START, kept;
	struct mstx_open e;

	memset(&e, 0, sizeof(e));
	e.id = id;
	e.name = name;
	e.domain = d->name;
	e.stream = stream;
	e.start_ts = ts;
	e.refs = (range ? 1 : 0) + (stream != NULL ? 1 : 0);
	kept = mstx_put(&e);
	if (stream != NULL) {
		msptiActivityFlag dflag = range ?
		    MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE :
		    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE;

		if (devtime_marker(id, (uint16_t)dflag, stream))
			flag = dflag;
		else if (kept)
			mstx_unref(id);		/* no device record */
	}
	if (range)
		session_step_begin(name, id);	/* before its record */
	return flag;
}

/*
 * One mark or range start.  flag is INSTANTANEOUS or START; with a stream
 * it becomes the _WITH_DEVICE variant when the device marker was queued.
 * The host time is taken before the device marker is queued, so the
 * device reaches it later.  Returns the id, 0 when nothing was recorded.
 */
static inline __attribute__((always_inline)) uint64_t
mstx_begin(struct mstxDomainRegistration_st *d, const char *message,
    void *stream, msptiActivityFlag flag)
{
	const char *name;
	uint64_t id, ts;

	if (d == NULL || message == NULL ||
	    !atomic_load_explicit(&d->enabled, memory_order_relaxed))
		return 0;
	if ((name = mstx_intern_cached(message)) == NULL)
		return 0;
	id = atomic_fetch_add_explicit(&next_marker_id, 1, memory_order_relaxed);
	ts = api_now();
	if (flag == MSPTI_ACTIVITY_FLAG_MARKER_START || stream != NULL)
		flag = mstx_begin_open(d, name, stream, flag, id, ts);
	mstx_host_record(id, flag, name, d->name, ts);
	return id;
}

/* A range end; an id never started (or ended already) gives nothing. */
static void
mstx_end(uint64_t id)
{
	msptiActivityFlag flag = MSPTI_ACTIVITY_FLAG_MARKER_END;
	const char *name, *domain;
	struct mstx_shard *sh;
	struct mstx_open *e;
	void *stream;
	uint64_t ts;
	size_t slot;

	if (id == 0 || (e = mstx_find(id, &sh, &slot)) == NULL)
		return;
	if (e->ended) {
		pthread_mutex_unlock(&sh->mtx);
		return;
	}
	e->ended = true;
	name = e->name;
	domain = e->domain;
	stream = e->stream;
	ts = e->end_ts = api_now();
	/* The host END's reference becomes the device END's, if any. */
	if (stream != NULL)
		pthread_mutex_unlock(&sh->mtx);
	else
		mstx_unref_locked(sh, slot);
	if (stream != NULL) {
		if (devtime_marker(id, MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE,
		    stream))
			flag = MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE;
		else
			mstx_unref(id);
	}
	mstx_host_record(id, flag, name, domain, ts);
	session_step_end(name, id);
}

MSTX_API void
mstxMarkA(const char *message, aclrtStream stream)
{
	if (API_UNLIKELY(!session_mark_ready()))
		session_mark_wait();
	if (API_UNLIKELY(api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER)))
		mstx_begin(&default_domain, message, stream,
		    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
}

MSTX_API mstxRangeId
mstxRangeStartA(const char *message, aclrtStream stream)
{
	if (API_UNLIKELY(!session_mark_ready()))
		session_mark_wait();
	if (!api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER)) {
		session_step_begin(message, 0);	/* steps count regardless */
		return 0;
	}
	return mstx_begin(&default_domain, message, stream,
	    MSPTI_ACTIVITY_FLAG_MARKER_START);
}

MSTX_API void
mstxRangeEnd(mstxRangeId id)
{
	if (api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER))
		mstx_end(id);
}

MSTX_API mstxDomainHandle_t
mstxDomainCreateA(const char *name)
{
	if (name == NULL || *name == '\0' ||
	    strnlen(name, MSTX_MSG_MAX) >= MSTX_MSG_MAX)
		return NULL;
	return mstx_domain_get(name);
}

MSTX_API void
mstxDomainDestroy(mstxDomainHandle_t domain)
{
	/* Kept: records and other handles still refer to it. */
}

MSTX_API void
mstxDomainMarkA(mstxDomainHandle_t domain, const char *message,
    aclrtStream stream)
{
	if (API_UNLIKELY(!session_mark_ready()))
		session_mark_wait();
	if (API_UNLIKELY(api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER)))
		mstx_begin(domain, message, stream,
		    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
}

MSTX_API mstxRangeId
mstxDomainRangeStartA(mstxDomainHandle_t domain, const char *message,
    aclrtStream stream)
{
	if (API_UNLIKELY(!session_mark_ready()))
		session_mark_wait();
	if (!api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER)) {
		session_step_begin(message, 0);
		return 0;
	}
	return mstx_begin(domain, message, stream,
	    MSPTI_ACTIVITY_FLAG_MARKER_START);
}

MSTX_API void
mstxDomainRangeEnd(mstxDomainHandle_t domain, mstxRangeId id)
{
	if (domain != NULL && api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER))
		mstx_end(id);
}

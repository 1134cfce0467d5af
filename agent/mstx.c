/*
 * MSTX: marks, ranges and domains, implemented directly in libmspti.so.
 * A disabled MARKER kind costs one load.  Domains are never freed (records
 * point at their interned names, and a name keeps its enabled state across
 * destroy/create); dom_mtx guards the list, never the mark path.  Open
 * marks and ranges are remembered in a direct-mapped table indexed by id so
 * that mstxRangeEnd and the device record (which carry only the id) find
 * the message, domain and stream without a lock.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

#define MSTX_MSG_MAX	255
#define MSTX_SLOTS	(1u << 16)

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

struct mstx_slot {
	_Atomic uint64_t	 id;
	const char *_Atomic	 name;
	const char *_Atomic	 domain;
	void *_Atomic		 stream;
	_Atomic int		 ended;
};
static struct mstx_slot mstx_slots[MSTX_SLOTS];

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

	if (name == NULL || strnlen(name, MSTX_MSG_MAX) >= MSTX_MSG_MAX)
		return -1;
	if ((d = mstx_domain_get(name)) == NULL)
		return -1;
	atomic_store(&d->enabled, enabled);
	return 0;
}

bool
mstx_marker_info(uint64_t id, const char **name, const char **domain)
{
	struct mstx_slot *s = &mstx_slots[id & (MSTX_SLOTS - 1)];

	if (atomic_load_explicit(&s->id, memory_order_acquire) != id)
		return false;
	*name = atomic_load_explicit(&s->name, memory_order_relaxed);
	*domain = atomic_load_explicit(&s->domain, memory_order_relaxed);
	return atomic_load_explicit(&s->id, memory_order_acquire) == id;
}

static void
mstx_host_record(uint64_t id, msptiActivityFlag flag, const char *name,
    const char *domain)
{
	msptiActivityMarker r;

	memset(&r, 0, sizeof(r));
	r.kind = MSPTI_ACTIVITY_KIND_MARKER;
	r.flag = flag;
	r.sourceKind = MSPTI_ACTIVITY_SOURCE_KIND_HOST;
	r.timestamp = api_now();
	r.id = id;
	r.objectId.pt.processId = api_pid();
	r.objectId.pt.threadId = api_tid();
	r.name = name;
	r.domain = domain;
	activity_emit(&r, sizeof(r));
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
static const char *
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
 * One mark or range start.  flag is INSTANTANEOUS or START; with a stream
 * it becomes the _WITH_DEVICE variant when the device marker was queued.
 * Returns the id, 0 when nothing was recorded.
 */
static uint64_t
mstx_begin(struct mstxDomainRegistration_st *d, const char *message,
    void *stream, msptiActivityFlag flag)
{
	struct mstx_slot *s;
	const char *name;
	uint64_t id;

	if (d == NULL || message == NULL ||
	    !atomic_load_explicit(&d->enabled, memory_order_relaxed))
		return 0;
	if ((name = mstx_intern_cached(message)) == NULL)
		return 0;
	id = atomic_fetch_add_explicit(&next_marker_id, 1, memory_order_relaxed);
	s = &mstx_slots[id & (MSTX_SLOTS - 1)];
	atomic_store_explicit(&s->id, 0, memory_order_relaxed);
	atomic_store_explicit(&s->name, name, memory_order_relaxed);
	atomic_store_explicit(&s->domain, d->name, memory_order_relaxed);
	atomic_store_explicit(&s->stream, stream, memory_order_relaxed);
	atomic_store_explicit(&s->ended, 0, memory_order_relaxed);
	atomic_store_explicit(&s->id, id, memory_order_release);
	if (stream != NULL) {
		msptiActivityFlag dflag = flag == MSPTI_ACTIVITY_FLAG_MARKER_START ?
		    MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE :
		    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE;

		if (devtime_marker(id, (uint16_t)dflag, stream))
			flag = dflag;
	}
	mstx_host_record(id, flag, name, d->name);
	return id;
}

static void
mstx_end(uint64_t id)
{
	struct mstx_slot *s = &mstx_slots[id & (MSTX_SLOTS - 1)];
	msptiActivityFlag flag = MSPTI_ACTIVITY_FLAG_MARKER_END;
	const char *name = NULL, *domain = NULL;
	void *stream = NULL;
	int zero = 0;

	if (id == 0)
		return;
	if (atomic_load_explicit(&s->id, memory_order_acquire) == id) {
		name = atomic_load_explicit(&s->name, memory_order_relaxed);
		domain = atomic_load_explicit(&s->domain, memory_order_relaxed);
		stream = atomic_load_explicit(&s->stream, memory_order_relaxed);
		if (!atomic_compare_exchange_strong(&s->ended, &zero, 1))
			return;		/* ended twice */
		if (atomic_load_explicit(&s->id, memory_order_acquire) != id)
			name = domain = NULL, stream = NULL;
	}
	if (stream != NULL && devtime_marker(id,
	    MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE, stream))
		flag = MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE;
	mstx_host_record(id, flag, name, domain);
}

MSTX_API void
mstxMarkA(const char *message, aclrtStream stream)
{
	if (API_UNLIKELY(api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER)))
		mstx_begin(&default_domain, message, stream,
		    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
}

MSTX_API mstxRangeId
mstxRangeStartA(const char *message, aclrtStream stream)
{
	if (!api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER))
		return 0;
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
	if (API_UNLIKELY(api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER)))
		mstx_begin(domain, message, stream,
		    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
}

MSTX_API mstxRangeId
mstxDomainRangeStartA(mstxDomainHandle_t domain, const char *message,
    aclrtStream stream)
{
	if (!api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER))
		return 0;
	return mstx_begin(domain, message, stream,
	    MSPTI_ACTIVITY_FLAG_MARKER_START);
}

MSTX_API void
mstxDomainRangeEnd(mstxDomainHandle_t domain, mstxRangeId id)
{
	if (domain != NULL && api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER))
		mstx_end(id);
}

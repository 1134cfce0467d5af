/*
 * msPTI activity API: kind masks, the emit point, per-thread buffers,
 * flushing and external correlation.  The buffer protocol is described in
 * api.h.  Locking: deliver_mtx (recursive) serialises complete callbacks;
 * period_mtx guards the FlushPeriod worker; the record path takes neither.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "util.h"

API_HOT _Atomic uint64_t api_kind_masks;
MSTX_API _Atomic uint32_t mstxEnabledState;

/*
 * After any change of api_kind_masks: sets mstxEnabledState from it.  A
 * racing change may store a stale value after ours, so store until what we
 * stored matches the masks read after it: the last store is always right.
 */
/* While registered with msptid (and from load, when msptid's socket is
 * there, until the first try to register failed), range starts come in
 * even when no marker is recorded, so the agent counts the process's
 * steps from its start: a session's step window needs each rank's step
 * index.  Marks and range ends stay inline (a load and a branch in the
 * caller): no step depends on them.  Without a daemon every check stays
 * inline. */
static _Atomic uint32_t api_mstx_steps;
static _Atomic uint32_t api_mstx_gated;	/* run's start gate closed */
static _Atomic uint32_t api_mstx_char = 's';	/* of "step" */

static uint32_t
api_mstx_state(void)
{
	return (api_kind_wanted(MSPTI_ACTIVITY_KIND_MARKER) ||
	    atomic_load(&api_mstx_gated) ? API_MSTX_ALL : 0) |
	    (atomic_load(&api_mstx_steps) ? API_MSTX_STEPS |
	    atomic_load(&api_mstx_char) << API_MSTX_CHAR_SHIFT : 0);
}

static void
api_kinds_changed(void)
{
	uint32_t v;

	do {
		v = api_mstx_state();
		atomic_store(&mstxEnabledState, v);
	} while (v != api_mstx_state());
}

void
api_mstx_step_char(unsigned char c)
{
	if (atomic_exchange(&api_mstx_char, c) != c)
		api_kinds_changed();
}

void
api_mstx_gate(bool closed)
{
	if (atomic_exchange(&api_mstx_gated, closed ? 1 : 0) !=
	    (closed ? 1u : 0u))
		api_kinds_changed();
}

void
api_mstx_count_steps(bool on)
{
	if (atomic_exchange(&api_mstx_steps, on ? 1 : 0) != (on ? 1u : 0u))
		api_kinds_changed();
}

static _Atomic(api_sink_fn) session_sink;
_Atomic(api_marker_sink_fn) api_marker_sink;
void *_Atomic api_sink_arg;

static _Atomic(msptiBuffersCallbackRequestFunc) cb_request;
static _Atomic(msptiBuffersCallbackCompleteFunc) cb_complete;

static _Atomic uint64_t next_corr = 1;
/* Records lost, per kind ([0]: unknown kind); see activity_drop(). */
static _Atomic uint64_t dropped_records[MSPTI_ACTIVITY_KIND_COUNT];

struct abuf {
	uint8_t		*base;
	size_t		 size;
	size_t		 used;
	size_t		 maxrec;	/* 0 = no limit */
	size_t		 nrec;
};

#define ABUF_BUSY	((struct abuf *)1)

struct abuf_thread {
	struct abuf *_Atomic	 cur;
	_Atomic int		 alive;
	struct abuf_thread	*next;
};

static struct abuf_thread *_Atomic abuf_threads;
static pthread_key_t abuf_key;
static pthread_once_t abuf_once = PTHREAD_ONCE_INIT;

static API_TLS struct abuf_thread *tls_abuf;
static API_TLS int tls_in_user_cb;
static API_TLS uint32_t tls_tid;

/* External correlation: per thread, per kind, a growable stack. */
#define EXT_KINDS	MSPTI_EXTERNAL_CORRELATION_KIND_SIZE
struct ext_stack {
	uint64_t	*ids;
	size_t		 len;
	size_t		 cap;
};
static API_TLS struct ext_stack *tls_ext;	/* [EXT_KINDS] */
static API_TLS unsigned tls_ext_depth;		/* total pushed, all kinds */

static const uint8_t record_sizes[MSPTI_ACTIVITY_KIND_COUNT] = {
	[MSPTI_ACTIVITY_KIND_MARKER] = sizeof(msptiActivityMarker),
	[MSPTI_ACTIVITY_KIND_KERNEL] = sizeof(msptiActivityKernel),
	[MSPTI_ACTIVITY_KIND_API] = sizeof(msptiActivityApi),
	[MSPTI_ACTIVITY_KIND_HCCL] = sizeof(msptiActivityHccl),
	[MSPTI_ACTIVITY_KIND_MEMORY] = sizeof(msptiActivityMemory),
	[MSPTI_ACTIVITY_KIND_MEMSET] = sizeof(msptiActivityMemset),
	[MSPTI_ACTIVITY_KIND_MEMCPY] = sizeof(msptiActivityMemcpy),
	[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] =
	    sizeof(msptiActivityExternalCorrelation),
	[MSPTI_ACTIVITY_KIND_COMMUNICATION] = sizeof(msptiActivityCommunication),
	[MSPTI_ACTIVITY_KIND_ACL_API] = sizeof(msptiActivityApi),
	[MSPTI_ACTIVITY_KIND_NODE_API] = sizeof(msptiActivityApi),
	[MSPTI_ACTIVITY_KIND_RUNTIME_API] = sizeof(msptiActivityApi),
};

size_t
activity_record_size(uint32_t kind)
{
	return kind < MSPTI_ACTIVITY_KIND_COUNT ? record_sizes[kind] : 0;
}

uint64_t
activity_dropped(void)
{
	uint64_t n = 0;
	unsigned k;

	for (k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; k++)
		n += atomic_load_explicit(&dropped_records[k],
		    memory_order_relaxed);
	return n;
}

void
activity_drop(uint32_t kind, uint64_t n)
{
	if (kind >= MSPTI_ACTIVITY_KIND_COUNT)
		kind = 0;
	atomic_fetch_add_explicit(&dropped_records[kind], n,
	    memory_order_relaxed);
}

MSPTI_API msptiResult
msptiActivityGetNumDroppedRecords(msptiActivityKind kind, size_t *dropped)
{
	if (dropped == NULL || kind < MSPTI_ACTIVITY_KIND_INVALID ||
	    kind >= MSPTI_ACTIVITY_KIND_COUNT)
		return MSPTI_ERROR_INVALID_PARAMETER;
	*dropped = kind == MSPTI_ACTIVITY_KIND_INVALID ?
	    (size_t)activity_dropped() :
	    (size_t)atomic_load(&dropped_records[kind]);
	return MSPTI_SUCCESS;
}

uint64_t
activity_next_correlation(void)
{
	return atomic_fetch_add_explicit(&next_corr, 1, memory_order_relaxed);
}

uint32_t
api_tid(void)
{
	if (API_UNLIKELY(tls_tid == 0))
		tls_tid = (uint32_t)syscall(SYS_gettid);
	return tls_tid;
}

static API_HOT _Atomic uint32_t cached_pid;

static pthread_mutex_t deliver_mtx;
static pthread_mutex_t period_mtx = PTHREAD_MUTEX_INITIALIZER;
static bool period_started;

static void
deliver_mtx_init(void)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&deliver_mtx, &a);
	pthread_mutexattr_destroy(&a);
}

/*
 * Only the forking thread exists in the child: a slot another thread held
 * BUSY (fork in the middle of its record copy) would make every flush
 * spin forever, and a lock it held would never be released.  Such a slot
 * loses its buffer (the owner's registers held it); the others are free
 * for reuse, their buffers stay attached but emptied: the records in them
 * are the parent's, which the parent delivers.  The FlushPeriod worker is
 * gone too: the next FlushPeriod starts a new one.
 */
static void
activity_atfork_child(void)
{
	struct abuf_thread *t;
	struct abuf *b;

	atomic_store(&cached_pid, 0);
	tls_tid = 0;
	for (t = atomic_load(&abuf_threads); t != NULL; t = t->next) {
		b = atomic_load(&t->cur);
		if (b == ABUF_BUSY)
			atomic_store(&t->cur, NULL);
		else if (b != NULL) {
			b->used = 0;
			b->nrec = 0;
		}
		if (t != tls_abuf)
			atomic_store(&t->alive, 0);
	}
	deliver_mtx_init();
	pthread_mutex_init(&period_mtx, NULL);
	period_started = false;
}

/* A forked child (register.c): its pid and the forking thread's tid are
 * not the parent's, whatever was cached (the handler above may not be
 * installed). */
void
api_after_fork_child(void)
{
	atomic_store(&cached_pid, 0);
	tls_tid = 0;
}

void
activity_host_marker(msptiActivityMarker *m, msptiActivityFlag flag,
    uint64_t id, uint64_t ts, uint32_t pid, const char *name,
    const char *domain)
{
	memset(m, 0, sizeof(*m));
	m->kind = MSPTI_ACTIVITY_KIND_MARKER;
	m->flag = flag;
	m->sourceKind = MSPTI_ACTIVITY_SOURCE_KIND_HOST;
	m->timestamp = ts;
	m->id = id;
	m->objectId.pt.processId = pid;
	m->objectId.pt.threadId = api_tid();
	m->name = name;
	m->domain = domain;
}

uint32_t
api_pid(void)
{
	uint32_t p = atomic_load_explicit(&cached_pid, memory_order_relaxed);

	if (API_UNLIKELY(p == 0)) {
		p = (uint32_t)getpid();
		atomic_store(&cached_pid, p);
	}
	return p;
}

void
api_session_set_sink(api_sink_fn fn, api_marker_sink_fn mfn, void *arg)
{
	atomic_store(&api_sink_arg, arg);
	atomic_store(&api_marker_sink, mfn);
	atomic_store(&session_sink, fn);
}

/* Sets the daemon-session half of the masks.  "api" is one record per
 * call: the layer kinds (ACL, node, runtime) would repeat it, so with it
 * they are left out of the mask, and no call builds or emits a second
 * record for the session. */
void
api_session_set_kinds(uint32_t mask)
{
	uint64_t old = atomic_load(&api_kind_masks), new;

	if (mask & (1u << MSPTI_ACTIVITY_KIND_API))
		mask &= ~(1u << MSPTI_ACTIVITY_KIND_ACL_API |
		    1u << MSPTI_ACTIVITY_KIND_NODE_API |
		    1u << MSPTI_ACTIVITY_KIND_RUNTIME_API);

	do {
		new = (old & 0xffffffffu) |
		    ((uint64_t)mask << API_MASK_SESSION_SHIFT);
	} while (!atomic_compare_exchange_weak(&api_kind_masks, &old, new));
	api_kinds_changed();
	devtime_kick();
}

static void
abuf_thread_exit(void *arg)
{
	struct abuf_thread *t = arg;

	/* The buffer stays attached; the next flush or thread delivers it. */
	atomic_store_explicit(&t->alive, 0, memory_order_release);
}

static void
abuf_init_once(void)
{
	pthread_key_create(&abuf_key, abuf_thread_exit);
	deliver_mtx_init();
	pthread_atfork(NULL, NULL, activity_atfork_child);
}

/* The calling thread's buffer slot: reuses a dead thread's or adds one.
 * Runs once per thread; NULL only if memory is exhausted. */
static struct abuf_thread *
abuf_thread_get(void)
{
	struct abuf_thread *t;
	int zero;

	if (API_LIKELY(tls_abuf != NULL))
		return tls_abuf;
	pthread_once(&abuf_once, abuf_init_once);
	for (t = atomic_load(&abuf_threads); t != NULL; t = t->next) {
		zero = 0;
		if (atomic_load_explicit(&t->alive, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&t->alive, &zero, 1))
			break;
	}
	if (t == NULL) {
		t = calloc(1, sizeof(*t));
		if (t == NULL)
			return NULL;
		t->alive = 1;
		t->next = atomic_load(&abuf_threads);
		while (!atomic_compare_exchange_weak(&abuf_threads, &t->next, t))
			;
	}
	pthread_setspecific(abuf_key, t);
	tls_abuf = t;
	return t;
}

/* Hands b to the complete callback and frees the descriptor. */
static void
abuf_deliver(struct abuf *b)
{
	msptiBuffersCallbackCompleteFunc done = atomic_load(&cb_complete);

	if (done != NULL) {
		pthread_mutex_lock(&deliver_mtx);
		tls_in_user_cb++;
		done(b->base, b->size, b->used);
		tls_in_user_cb--;
		pthread_mutex_unlock(&deliver_mtx);
	}
	free(b);
}

/* Asks the tool for a buffer; NULL when it gives none. */
static struct abuf *
abuf_request(void)
{
	msptiBuffersCallbackRequestFunc req = atomic_load(&cb_request);
	struct abuf *b;
	uint8_t *base = NULL;
	size_t size = 0, maxrec = 0;

	if (req == NULL)
		return NULL;
	tls_in_user_cb++;
	req(&base, &size, &maxrec);
	tls_in_user_cb--;
	if (base == NULL || size < sizeof(msptiActivity))
		return NULL;
	b = malloc(sizeof(*b));
	if (b == NULL) {
		/* Cannot track it: give it straight back, empty. */
		msptiBuffersCallbackCompleteFunc done = atomic_load(&cb_complete);
		if (done != NULL)
			done(base, size, 0);
		return NULL;
	}
	b->base = base;
	b->size = size;
	b->used = 0;
	b->maxrec = maxrec;
	b->nrec = 0;
	return b;
}

static inline bool
abuf_fits(const struct abuf *b, size_t len)
{
	return b->used + len <= b->size && (b->maxrec == 0 || b->nrec < b->maxrec);
}

/* Appends one record to the calling thread's buffer (the hot path). */
static void
abuf_append(const void *rec, size_t len)
{
	struct abuf_thread *t;
	struct abuf *b;

	if (API_UNLIKELY(tls_in_user_cb != 0))
		goto drop;	/* a user buffer callback produced a record */
	t = abuf_thread_get();
	if (API_UNLIKELY(t == NULL))
		goto drop;
	b = atomic_exchange_explicit(&t->cur, ABUF_BUSY, memory_order_acquire);
	if (API_LIKELY(b != NULL && abuf_fits(b, len))) {
		memcpy(b->base + b->used, rec, len);
		b->used += len;
		b->nrec++;
		atomic_store_explicit(&t->cur, b, memory_order_release);
		return;
	}
	/* Slow path: hand back a full buffer, get a new one. */
	atomic_store_explicit(&t->cur, NULL, memory_order_release);
	if (b != NULL)
		abuf_deliver(b);
	b = abuf_request();
	if (b == NULL)
		goto drop;
	if (!abuf_fits(b, len)) {
		abuf_deliver(b);
		goto drop;
	}
	memcpy(b->base, rec, len);
	b->used = len;
	b->nrec = 1;
	/* A flusher may have given an empty buffer back meanwhile. */
	b = atomic_exchange_explicit(&t->cur, b, memory_order_acq_rel);
	if (b != NULL && b != ABUF_BUSY)
		abuf_deliver(b);
	return;
drop:
	activity_drop(((const msptiActivity *)rec)->kind, 1);
}

void
activity_emit(const void *rec, size_t len)
{
	uint64_t m = atomic_load_explicit(&api_kind_masks, memory_order_relaxed);
	uint32_t kind = ((const msptiActivity *)rec)->kind;
	api_sink_fn sink;

	if ((m >> kind) & 1)
		abuf_append(rec, len);
	if ((m >> (API_MASK_SESSION_SHIFT + kind)) & 1) {
		sink = atomic_load_explicit(&session_sink, memory_order_acquire);
		if (sink != NULL)
			sink(rec, len, atomic_load_explicit(&api_sink_arg,
			    memory_order_relaxed));
	}
}

void
activity_api_host_marker(msptiActivityFlag flag, uint64_t id, uint64_t ts,
    const char *name, const char *domain)
{
	msptiActivityMarker r;

	activity_host_marker(&r, flag, id, ts, api_pid(), name, domain);
	abuf_append(&r, sizeof(r));
}

/* Emits to the in-process API only: device records devtime.c joined in
 * the agent (a daemon session gets its own, joined in msptid). */
void
activity_emit_api(const void *rec, size_t len)
{
	uint64_t m = atomic_load_explicit(&api_kind_masks, memory_order_relaxed);

	if ((m >> ((const msptiActivity *)rec)->kind) & 1)
		abuf_append(rec, len);
}

void
activity_emit_session(const void *rec, size_t len)
{
	uint64_t m = atomic_load_explicit(&api_kind_masks, memory_order_relaxed);
	uint32_t kind = ((const msptiActivity *)rec)->kind;
	api_sink_fn sink;

	if ((m >> (API_MASK_SESSION_SHIFT + kind)) & 1) {
		sink = atomic_load_explicit(&session_sink, memory_order_acquire);
		if (sink != NULL)
			sink(rec, len, atomic_load_explicit(&api_sink_arg,
			    memory_order_relaxed));
	}
}

/* The same whatever the masks say now: a device record of work queued
 * while its kind was enabled (devtime.c). */
void
activity_emit_api_always(const void *rec, size_t len)
{
	abuf_append(rec, len);
}

/* Takes t's buffer away from it (waiting out a record copy) and delivers
 * it if it holds records. */
static void
abuf_thread_flush(struct abuf_thread *t)
{
	struct abuf *b;

	for (;;) {
		b = atomic_load_explicit(&t->cur, memory_order_acquire);
		if (b == NULL)
			return;
		if (b == ABUF_BUSY) {
			if (t == tls_abuf)
				return;	/* flushing from inside our own append */
			sched_yield();
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&t->cur, &b, NULL,
		    memory_order_acquire, memory_order_relaxed))
			break;
	}
	if (b->used == 0) {
		struct abuf *none = NULL;

		/* Give an empty buffer back to its thread if it has none. */
		if (atomic_compare_exchange_strong(&t->cur, &none, b))
			return;
	}
	abuf_deliver(b);
}

static void
activity_flush_buffers(void)
{
	struct abuf_thread *t;

	pthread_once(&abuf_once, abuf_init_once);
	for (t = atomic_load(&abuf_threads); t != NULL; t = t->next)
		abuf_thread_flush(t);
}

MSPTI_API msptiResult
msptiActivityRegisterCallbacks(msptiBuffersCallbackRequestFunc req,
    msptiBuffersCallbackCompleteFunc done)
{
	if (req == NULL || done == NULL)
		return MSPTI_ERROR_INVALID_PARAMETER;
	pthread_once(&abuf_once, abuf_init_once);
	atomic_store(&cb_complete, done);
	atomic_store(&cb_request, req);
	return MSPTI_SUCCESS;
}

/*
 * Kinds whose records come from interposed calls, and the symbol that
 * shows whether ours come first.  KERNEL and the API kinds need it too:
 * without it the agent never sees a launch (no correlation, no device),
 * so they would say SUCCESS and record nothing.  MARKER does not (the
 * application calls our MSTX functions directly).
 */
static const char *
activity_kind_symbol(msptiActivityKind kind)
{
	switch (kind) {
	case MSPTI_ACTIVITY_KIND_HCCL:
	case MSPTI_ACTIVITY_KIND_COMMUNICATION:
	case MSPTI_ACTIVITY_KIND_NODE_API:
		return "HcclAllReduce";
	case MSPTI_ACTIVITY_KIND_MEMORY:
	case MSPTI_ACTIVITY_KIND_ACL_API:
		return "aclrtMalloc";
	case MSPTI_ACTIVITY_KIND_MEMSET:
		return "aclrtMemset";
	case MSPTI_ACTIVITY_KIND_MEMCPY:
		return "aclrtMemcpy";
	case MSPTI_ACTIVITY_KIND_KERNEL:
	case MSPTI_ACTIVITY_KIND_API:
	case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
		return "aclrtLaunchKernel";
	case MSPTI_ACTIVITY_KIND_RUNTIME_API:
		return "rtGetTaskIdAndStreamID";
	default:
		return NULL;
	}
}

static bool
activity_kind_valid(msptiActivityKind kind)
{
	return kind > MSPTI_ACTIVITY_KIND_INVALID &&
	    kind < MSPTI_ACTIVITY_KIND_COUNT;
}

MSPTI_API msptiResult
msptiActivityEnable(msptiActivityKind kind)
{
	const char *sym;

	if (!activity_kind_valid(kind))
		return MSPTI_ERROR_INVALID_PARAMETER;
	sym = activity_kind_symbol(kind);
	if (sym != NULL && !api_interposed(sym))
		return MSPTI_ERROR_WITHOUT_LD_PRELOAD;
	atomic_fetch_or(&api_kind_masks, (uint64_t)1 << kind);
	api_kinds_changed();
	devtime_kick();
	return MSPTI_SUCCESS;
}

MSPTI_API msptiResult
msptiActivityDisable(msptiActivityKind kind)
{
	if (!activity_kind_valid(kind))
		return MSPTI_ERROR_INVALID_PARAMETER;
	atomic_fetch_and(&api_kind_masks, ~((uint64_t)1 << kind));
	api_kinds_changed();
	devtime_kick();
	return MSPTI_SUCCESS;
}

MSPTI_API bool
msptiActivityIsEnabled(msptiActivityKind kind)
{
	if (!activity_kind_valid(kind))
		return false;
	return (atomic_load(&api_kind_masks) >> kind) & 1;
}

/* Not msPTI: the kinds a daemon session asks of this process, a bit per
 * msptiActivityKind, and bit MSPTI_ACTIVITY_KIND_COUNT for framework ops
 * (msptictl start --kinds op), which the Python package polls to install
 * its observer only while asked. */
MSPTI_API uint32_t
msptiExtSessionKinds(void)
{
	return api_kinds_session();
}

MSPTI_API msptiResult
msptiActivityEnableMarkerDomain(const char *name)
{
	return mstx_domain_set_enabled(name, true) == 0 ? MSPTI_SUCCESS :
	    MSPTI_ERROR_INVALID_PARAMETER;
}

MSPTI_API msptiResult
msptiActivityDisableMarkerDomain(const char *name)
{
	return mstx_domain_set_enabled(name, false) == 0 ? MSPTI_SUCCESS :
	    MSPTI_ERROR_INVALID_PARAMETER;
}

MSPTI_API msptiResult
msptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
    msptiActivity **record)
{
	uint8_t *p;
	size_t sz;
	uint32_t kind;

	if (buffer == NULL || record == NULL)
		return MSPTI_ERROR_INVALID_PARAMETER;
	if (*record == NULL)
		p = buffer;
	else {
		p = (uint8_t *)*record;
		if (p < buffer || p >= buffer + valid)
			return MSPTI_ERROR_INVALID_PARAMETER;
		memcpy(&kind, p, sizeof(kind));
		sz = activity_record_size(kind);
		if (sz == 0)
			return MSPTI_ERROR_INVALID_PARAMETER;
		p += sz;
	}
	if ((size_t)(p - buffer) + sizeof(msptiActivity) > valid)
		return MSPTI_ERROR_MAX_LIMIT_REACHED;
	memcpy(&kind, p, sizeof(kind));
	sz = activity_record_size(kind);
	if (sz == 0 || (size_t)(p - buffer) + sz > valid)
		return MSPTI_ERROR_INVALID_PARAMETER;
	*record = (msptiActivity *)p;
	return MSPTI_SUCCESS;
}

MSPTI_API msptiResult
msptiActivityFlushAll(uint32_t flag)
{
	devtime_drain();
	activity_flush_buffers();
	return MSPTI_SUCCESS;
}

/* FlushPeriod worker: sleeps on a condition variable, so a period of 0
 * costs nothing. */
static pthread_cond_t period_cond;
static uint32_t period_ms;

static void *
activity_period_main(void *arg)
{
	struct timespec ts;
	uint32_t ms;

	pthread_mutex_lock(&period_mtx);
	for (;;) {
		ms = period_ms;
		if (ms == 0) {
			pthread_cond_wait(&period_cond, &period_mtx);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (long)(ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&period_cond, &period_mtx, &ts) !=
		    ETIMEDOUT || period_ms == 0)
			continue;
		pthread_mutex_unlock(&period_mtx);
		msptiActivityFlushAll(1);
		pthread_mutex_lock(&period_mtx);
	}
	return NULL;
}

MSPTI_API msptiResult
msptiActivityFlushPeriod(uint32_t time_ms)
{
	msptiResult rc = MSPTI_SUCCESS;
	pthread_condattr_t a;

	pthread_mutex_lock(&period_mtx);
	period_ms = time_ms;
	if (!period_started && time_ms != 0) {
		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
		pthread_cond_init(&period_cond, &a);
		pthread_condattr_destroy(&a);
		if (api_thread_start(activity_period_main, NULL) == 0)
			period_started = true;
		else {
			period_ms = 0;
			rc = MSPTI_ERROR_INNER;
		}
	} else if (period_started)
		pthread_cond_signal(&period_cond);
	pthread_mutex_unlock(&period_mtx);
	return rc;
}

static bool
ext_kind_valid(msptiExternalCorrelationKind kind)
{
	return kind > MSPTI_EXTERNAL_CORRELATION_KIND_INVALID &&
	    kind < MSPTI_EXTERNAL_CORRELATION_KIND_SIZE;
}

static void
ext_free(void *arg)
{
	struct ext_stack *s = arg;
	int i;

	for (i = 0; i < EXT_KINDS; i++)
		free(s[i].ids);
	free(s);
}

static pthread_key_t ext_key;
static pthread_once_t ext_once = PTHREAD_ONCE_INIT;

static void
ext_init_once(void)
{
	pthread_key_create(&ext_key, ext_free);
}

MSPTI_API msptiResult
msptiActivityPushExternalCorrelationId(msptiExternalCorrelationKind kind,
    uint64_t id)
{
	struct ext_stack *s;
	uint64_t *ids;
	size_t cap;

	if (!ext_kind_valid(kind))
		return MSPTI_ERROR_INVALID_PARAMETER;
	if (tls_ext == NULL) {
		pthread_once(&ext_once, ext_init_once);
		tls_ext = calloc(EXT_KINDS, sizeof(*tls_ext));
		if (tls_ext == NULL)
			return MSPTI_ERROR_INNER;
		pthread_setspecific(ext_key, tls_ext);
	}
	s = &tls_ext[kind];
	if (s->len == s->cap) {
		cap = s->cap ? s->cap * 2 : 16;
		ids = realloc(s->ids, cap * sizeof(*ids));
		if (ids == NULL)
			return MSPTI_ERROR_INNER;
		s->ids = ids;
		s->cap = cap;
	}
	s->ids[s->len++] = id;
	tls_ext_depth++;
	return MSPTI_SUCCESS;
}

MSPTI_API msptiResult
msptiActivityPopExternalCorrelationId(msptiExternalCorrelationKind kind,
    uint64_t *lastId)
{
	struct ext_stack *s;

	if (!ext_kind_valid(kind) || lastId == NULL)
		return MSPTI_ERROR_INVALID_PARAMETER;
	if (tls_ext == NULL || tls_ext[kind].len == 0)
		return MSPTI_ERROR_QUEUE_EMPTY;
	s = &tls_ext[kind];
	*lastId = s->ids[--s->len];
	tls_ext_depth--;
	return MSPTI_SUCCESS;
}

void
activity_emit_external(uint64_t corr)
{
	msptiActivityExternalCorrelation r;
	int k;

	if (tls_ext_depth == 0)
		return;
	for (k = MSPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN; k < EXT_KINDS; k++) {
		if (tls_ext[k].len == 0)
			continue;
		memset(&r, 0, sizeof(r));
		r.kind = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
		r.externalKind = (msptiExternalCorrelationKind)k;
		r.externalId = tls_ext[k].ids[tls_ext[k].len - 1];
		r.correlationId = corr;
		activity_emit(&r, sizeof(r));
	}
}

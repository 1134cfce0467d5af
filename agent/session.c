/*
 * The agent's side of a daemon session, its hot path: the sink that
 * encodes activity records into the session's shared-memory ring.  The
 * start, update and stop the registration thread runs when msptid asks
 * are in session-ctl.c, the step window in session-step.c
 * (session-int.h lists what the three share).
 *
 * Hot path (session_sink, session_launch and session_api, any application
 * thread): no lock, no allocation, no syscall except the rare eventfd write
 * that wakes the daemon when the ring is past its wake threshold.  An
 * interposed call's launch waits in its thread's slot for the call's API
 * record, which writes both in one entry (session_api).  Strings are
 * interned per producer by pointer (records carry api_intern'ed pointers)
 * in a fixed open-addressing table; the id of a string is its slot + 1 and
 * its STRING_DEF is written into the ring before the first record that
 * uses it.
 *
 * Lifetime: only the registration thread starts and stops a session.  Stop
 * clears the sink, the launch pointer ('live') and the session kinds, then
 * waits for threads still inside the sink (session_quiesce) before it
 * unmaps the ring.  One session at a time per process.
 *
 * The stop fence costs producers no atomic read-modify-write: every
 * producing thread owns a slot (struct sess_thread, found through a TLS
 * pointer) whose 'in' count it raises before it loads 'live' and lowers
 * (release) when it is done.  The stopper clears 'live' and then runs
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which puts a full memory
 * barrier in every running thread of the process: so either a producer's
 * load of 'live' comes after that barrier and sees NULL, or its 'in' store
 * is visible to the stopper, which waits for every slot to read 0.  A
 * producer then needs only a compiler barrier between the store and the
 * load (the asymmetric fence of liburcu's memb flavour).  Where membarrier
 * is not available, producers use a full fence instead (sess_membarrier 0).
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session-int.h"

struct sess_thread *_Atomic sess_threads;
API_TLS struct sess_thread *tls_sess;
API_HOT _Atomic int sess_membarrier;
static pthread_key_t sess_key;
static pthread_once_t sess_once = PTHREAD_ONCE_INIT;
static bool sess_key_ok;

static void sess_thread_release(struct sess_thread *t);

static void
sess_thread_exit(void *arg)
{
	struct sess_thread *t = arg;

	/* Its ring segment goes back to the session for a later thread. */
	sess_thread_release(t);
	atomic_store_explicit(&t->in, 0, memory_order_release);
	if (tls_sess == t)
		tls_sess = NULL;	/* a later record claims a slot again */
	atomic_store_explicit(&t->used, 0, memory_order_release);
}

static void
sess_once_init(void)
{
	sess_key_ok = pthread_key_create(&sess_key, sess_thread_exit) == 0;
}

/* The calling thread's slot, claimed or allocated on its first record. */
struct sess_thread *
sess_thread_get(void)
{
	struct sess_thread *t, *head;
	int zero;

	pthread_once(&sess_once, sess_once_init);
	for (t = atomic_load(&sess_threads); t != NULL; t = t->next) {
		zero = 0;
		if (atomic_load_explicit(&t->used, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&t->used, &zero, 1))
			break;
	}
	if (t == NULL) {
		if ((t = aligned_alloc(64, sizeof(*t))) == NULL)
			return NULL;
		memset(t, 0, sizeof(*t));
		atomic_store(&t->used, 1);
		head = atomic_load(&sess_threads);
		do
			t->next = head;
		while (!atomic_compare_exchange_weak(&sess_threads, &head, t));
	}
	t->nstash = 0;		/* a slot given back mid-call */
	if (sess_key_ok)
		(void)pthread_setspecific(sess_key, t);
	tls_sess = t;
	return t;
}

/* Gives t's segment back when it holds one of the live session's (fenced
 * like a record, so the session is not freed under us). */
static void
sess_thread_release(struct sess_thread *t)
{
	struct agent_session *s;

	if (t->prod_gen == 0)
		return;
	if ((s = session_enter_on(t)) != NULL && t->prod_gen == s->gen)
		ring_producer_release(&t->prod);
	t->prod_gen = 0;
	session_leave(t);
}

/* The clock's mapping, when it changed since this session last wrote it
 * (the first record of a session writes the one in use). */
static void
session_clock(struct agent_session *s, struct ring_producer *p)
{
	struct rec_host_clock r;
	uint32_t want = hostclock_record(&r), have = atomic_load(&s->clock_gen);

	if (want == 0 || want == have ||
	    !atomic_compare_exchange_strong(&s->clock_gen, &have, want))
		return;
	r.pid = s->pid;
	/* Stamped when written into this capture (doc/trace-format.md): in
	 * the session's window, at or after the records before it. */
	r.timestamp = api_now();
	/* Not written (full): the next record tries again. */
	if (ring_pwrite_nodrop(p, &r) != 0)
		(void)atomic_compare_exchange_strong(&s->clock_gen, &want,
		    have);
}

/*
 * The producer a thread inside the sink writes with: its own segment,
 * claimed on its first record in this session, or the shared one for a
 * call nested in another (a signal handler): a segment has one writer.
 */
static inline struct ring_producer *
session_prod(struct agent_session *s, struct sess_thread *t)
{
	struct ring_producer *p = &t->prod;

	if (API_UNLIKELY(atomic_load_explicit(&t->in, memory_order_relaxed)
	    != 1))
		p = &s->shared;
	else if (API_UNLIKELY(t->prod_gen != s->gen)) {
		unsigned seg = ring_producer_claim(s->ring, &t->prod);

		t->prod_gen = s->gen;
		/* Its pages fault in as it writes, until the registration
		 * thread has populated ahead of it (segment 0 too, once
		 * threads share it: all the others are taken). */
		if (!(atomic_fetch_or(&s->populate_due, 1ull << seg) &
		    (1ull << seg)))
			register_wake();
	}
	if (API_UNLIKELY(atomic_load_explicit(&hostclock.gen,
	    memory_order_relaxed) != atomic_load_explicit(&s->clock_gen,
	    memory_order_relaxed)))
		session_clock(s, p);
	return p;
}

/* Set by session_string when a STRING_DEF found the segment full: the
 * record that needed it is dropped (and counted once) by the caller. */
static API_TLS bool sess_def_full;

/* session_string past its first probe: probes on from slot i, takes a
 * free slot, defines the string in p's segment. */
static __attribute__((noinline)) uint32_t
session_string_slow(struct agent_session *s, struct ring_producer *p,
    const char *str, size_t i)
{
	uint64_t bit = 1ull << p->seg;
	char buf[sizeof(struct rec_string_def) + SESS_STRING_KEEP + 16]
	    __attribute__((aligned(8)));
	size_t n, len;

	if (*str == '\0')
		return 0;
	for (n = 0; n < 64; n++, i = (i + 1) & (SESS_STRINGS - 1)) {
		struct sess_string *e = &s->strings[i];
		const char *k = atomic_load_explicit(&e->key,
		    memory_order_acquire);

		if (k == NULL) {
			const char *expect = NULL;

			if (!atomic_compare_exchange_strong(&e->key, &expect,
			    str) && expect != str)
				continue;
		} else if (k != str)
			continue;
		if (!(atomic_load_explicit(&e->defined, memory_order_acquire) &
		    bit)) {
			/* Defined once per segment, before its first use
			 * there: the daemon reads each segment in order, not
			 * the segments in the order they were written.  In
			 * the shared segment a racing thread may define it
			 * too: the same id and bytes twice is harmless. */
			len = strnlen(str, SESS_STRING_KEEP);
			if (record_string_def_encode(buf, sizeof(buf),
			    (uint32_t)i + 1, str, len) == 0)
				return 0;
			if (ring_pwrite_nodrop(p, buf) != 0) {
				sess_def_full = true;
				return 0;
			}
			atomic_fetch_or_explicit(&e->defined, bit,
			    memory_order_release);
		}
		return (uint32_t)i + 1;
	}
	return 0;
}

/* Interns str (an interned pointer) into this ring's string namespace;
 * 0 when it cannot, and for "" (never in a slot).  Inline: a string in
 * its first slot, defined in p's segment already, what nearly every
 * record finds; that way reads the slot, not the string (a line of its
 * own to a call made with cold caches). */
static inline uint32_t
session_string(struct agent_session *s, struct ring_producer *p,
    const char *str)
{
	struct sess_string *e;
	uintptr_t h;
	size_t i;

	if (str == NULL)
		return 0;
	h = (uintptr_t)str;
	h ^= h >> 17;
	h *= 0x9e3779b97f4a7c15ull;
	i = (h >> 20) & (SESS_STRINGS - 1);
	e = &s->strings[i];
	if (API_LIKELY(atomic_load_explicit(&e->key, memory_order_acquire) ==
	    str && (atomic_load_explicit(&e->defined, memory_order_acquire) &
	    (1ull << p->seg))))
		return (uint32_t)i + 1;
	return session_string_slow(s, p, str, i);
}

static __attribute__((noinline)) bool
session_domain_in(char **off, const char *domain)
{
	for (; *off != NULL; off++)
		if (strcmp(*off, domain) == 0)
			return true;
	return false;
}

/* Whether the session leaves domain out (msptictl --domains -name):
 * mostly it leaves none out. */
static inline bool
session_domain_off(struct agent_session *s, const char *domain)
{
	char **off = atomic_load_explicit(&s->domains_off, memory_order_acquire);

	return off != NULL && *off != NULL && domain != NULL &&
	    session_domain_in(off, domain);
}

/* Sets the fields every device work record shares (record.h); the rest of
 * r is zeroed by REC_INIT or set by the caller. */
#define SESS_WORK(r, s, t0, t1, corr, tid_, dev, strm, task) do {	\
	(r)->start = (t0);						\
	(r)->end = (t1);						\
	(r)->correlation_id = (corr);					\
	(r)->pid = (s)->pid;						\
	(r)->tid = (tid_);						\
	(r)->device = (dev);						\
	(r)->stream = (strm);						\
	(r)->task_id = (task);						\
} while (0)

/*
 * Encodes one activity record into a ring record; returns its size or 0.
 * MARKERs go straight into the ring instead (session_marker).
 */
static size_t
session_encode(struct agent_session *s, struct ring_producer *p,
    const msptiActivity *a, void *out)
{
	switch (a->kind) {
	case MSPTI_ACTIVITY_KIND_API:
	case MSPTI_ACTIVITY_KIND_ACL_API:
	case MSPTI_ACTIVITY_KIND_NODE_API:
	case MSPTI_ACTIVITY_KIND_RUNTIME_API: {
		const msptiActivityApi *x = (const void *)a;
		struct rec_api *r = out;

		REC_INIT(r, REC_API, 0);
		r->start = x->start;
		r->end = x->end;
		r->correlation_id = x->correlationId;
		r->pid = x->pt.processId;
		r->tid = x->pt.threadId;
		r->name_id = session_string(s, p, x->name);
		r->kind = (uint16_t)a->kind;
		return sizeof(*r);
	}
	case MSPTI_ACTIVITY_KIND_KERNEL: {
		const msptiActivityKernel *x = (const void *)a;
		struct rec_kernel *r = out;

		REC_INIT(r, REC_KERNEL, 0);
		SESS_WORK(r, s, x->start, x->end, x->correlationId, 0,
		    x->ds.deviceId, x->ds.streamId, REC_NONE);
		r->name_id = session_string(s, p, x->name);
		r->type_id = session_string(s, p, x->type);
		return sizeof(*r);
	}
	case MSPTI_ACTIVITY_KIND_MEMCPY: {
		const msptiActivityMemcpy *x = (const void *)a;
		struct rec_memcpy *r = out;

		REC_INIT(r, REC_MEMCPY, x->isAsync ? REC_F_ASYNC : 0);
		SESS_WORK(r, s, x->start, x->end, x->correlationId, 0,
		    x->deviceId, x->streamId, REC_NONE);
		r->bytes = x->bytes;
		r->copy_kind = x->copyKind <= 5 ? x->copyKind : 0;
		return sizeof(*r);
	}
	case MSPTI_ACTIVITY_KIND_MEMSET: {
		const msptiActivityMemset *x = (const void *)a;
		struct rec_memset *r = out;

		REC_INIT(r, REC_MEMSET, x->isAsync ? REC_F_ASYNC : 0);
		SESS_WORK(r, s, x->start, x->end, x->correlationId, 0,
		    x->deviceId, x->streamId, REC_NONE);
		r->bytes = x->bytes;
		r->value = x->value;
		return sizeof(*r);
	}
	case MSPTI_ACTIVITY_KIND_MEMORY: {
		const msptiActivityMemory *x = (const void *)a;
		struct rec_memory *r = out;

		REC_INIT(r, REC_MEMORY, 0);
		r->start = x->start;
		r->end = x->end;
		r->correlation_id = x->correlationId;
		r->address = x->address;
		r->bytes = x->bytes;
		r->pid = x->processId;
		r->device = x->deviceId;
		r->stream = x->streamId;
		r->op = (uint16_t)(x->memoryOperationType <= 1 ?
		    x->memoryOperationType : 0);
		r->mem_kind = (uint16_t)(x->memoryKind <= 1 ? x->memoryKind : 0);
		return sizeof(*r);
	}
	case MSPTI_ACTIVITY_KIND_HCCL: {
		const msptiActivityHccl *x = (const void *)a;
		struct rec_hccl *r = out;

		REC_INIT(r, REC_HCCL, 0);
		/* msptiActivityHccl has no correlation id. */
		SESS_WORK(r, s, x->start, x->end, 0, 0, x->ds.deviceId,
		    x->ds.streamId, REC_NONE);
		r->bandwidth = x->bandWidth == x->bandWidth ? x->bandWidth : 0;
		r->name_id = session_string(s, p, x->name);
		r->comm_name_id = session_string(s, p, x->commName);
		return sizeof(*r);
	}
	case MSPTI_ACTIVITY_KIND_COMMUNICATION: {
		const msptiActivityCommunication *x = (const void *)a;
		struct rec_communication *r = out;

		REC_INIT(r, REC_COMMUNICATION, 0);
		SESS_WORK(r, s, x->start, x->end, x->correlationId, 0,
		    x->ds.deviceId, x->ds.streamId, REC_NONE);
		r->count = x->count;
		r->name_id = session_string(s, p, x->name);
		r->comm_name_id = session_string(s, p, x->commName);
		r->alg_type_id = session_string(s, p, x->algType);
		r->data_type = (uint32_t)x->dataType;
		return sizeof(*r);
	}
	case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const msptiActivityExternalCorrelation *x = (const void *)a;
		struct rec_external_correlation *r = out;

		REC_INIT(r, REC_EXTERNAL_CORRELATION, 0);
		r->external_id = x->externalId;
		r->correlation_id = x->correlationId;
		r->external_kind = (uint32_t)x->externalKind;
		r->pid = s->pid;
		r->tid = api_tid();
		return sizeof(*r);
	}
	default:
		return 0;
	}
}

static inline void
session_wake(struct agent_session *s, struct ring_producer *p)
{
	uint64_t one = 1;

	if (API_UNLIKELY(ring_pneeds_wake(p))) {
		atomic_fetch_add_explicit(&s->wakes, 1, memory_order_relaxed);
		(void)!write(s->wakefd, &one, sizeof(one));
	}
}

/* A MARKER record, encoded straight into its reserved ring slot (its
 * strings are defined first, so their STRING_DEFs come before it). */
static inline __attribute__((always_inline)) void
session_marker_put(struct agent_session *s, struct ring_producer *p,
    const char *name, const char *domain, uint64_t ts, uint64_t id,
    uint32_t pid, uint32_t tid, uint32_t device, uint32_t stream,
    uint32_t source_kind, uint32_t flag)
{
	struct rec_marker *r;
	struct rec_hdr h;
	uint32_t name_id, domain_id;

	if (session_domain_off(s, domain))
		return;
	name_id = session_string(s, p, name);
	domain_id = session_string(s, p, domain);
	if (API_UNLIKELY(sess_def_full)) {
		/* Full before its strings: one record lost, counted once. */
		sess_def_full = false;
		ring_pdrop(p, sizeof(*r));
		session_wake(s, p);
		return;
	}
	/* A full ring counts its own drops. */
	if (ring_preserve(p, sizeof(*r), (void **)&r) == 0) {
		r->timestamp = ts;
		r->id = id;
		r->pid = pid;
		r->tid = tid;
		r->device = device;
		r->stream = stream;
		r->name_id = name_id;
		r->domain_id = domain_id;
		r->flag = flag;
		r->source_kind = source_kind;
		rec_hdr_set(&h, REC_MARKER, sizeof(*r), 0);
		ring_commit(r, &h);
	}
	session_wake(s, p);
}

/* A MARKER of the activity API's, host or device side. */
static void
session_marker(struct agent_session *s, struct ring_producer *p,
    const msptiActivityMarker *x)
{
	if (x->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE)
		session_marker_put(s, p, x->name, x->domain, x->timestamp,
		    x->id, REC_NONE, REC_NONE, x->objectId.ds.deviceId,
		    x->objectId.ds.streamId, 1, (uint32_t)x->flag);
	else
		session_marker_put(s, p, x->name, x->domain, x->timestamp,
		    x->id, x->objectId.pt.processId, x->objectId.pt.threadId,
		    REC_NONE, REC_NONE, 0, (uint32_t)x->flag);
}

void
session_marker_from(struct agent_session *s, struct sess_thread *t,
    const msptiActivityMarker *m)
{
	session_marker(s, session_prod(s, t), m);
}

/* The size in an encoded record's header. */
static inline size_t
session_rec_size(const void *rec)
{
	struct rec_hdr h;

	memcpy(&h, rec, sizeof h);
	return h.size;
}

/*
 * A call's records go into the session with its API record: both or
 * neither.  An interposer writes the launch record (session_launch) or a
 * host-timed work record after the real call, and icall_exit writes the
 * API record after that; a stop landing in between used to keep the
 * launch, which msptid joins into a KERNEL (MEMCPY, ...) record of a call
 * the trace does not hold.  So while the session takes API records, a
 * work record of the call open on its thread (icall_open_corr) waits in
 * the thread's slot, and the API record's entry into the session writes
 * it first.  What the API record did not take (the call's API kind came
 * on after it began) goes at the call's end (session_call_end), if the
 * session is still the same and still takes API records.  A waiting
 * record whose session ended goes nowhere, like the call's API record;
 * so does one whose session stopped taking API records: a stop takes the
 * kinds away before the session, and a call that ended in between, its
 * API record left out, wrote its launch alone (a KERNEL record of a call
 * the trace does not hold, tests/integ/session-callpair.sh).
 */
static uint64_t
sess_work_corr(const void *rec)
{
	struct rec_hdr h;

	memcpy(&h, rec, sizeof(h));
	switch (h.type) {
	case REC_KERNEL:
		return ((const struct rec_kernel *)rec)->correlation_id;
	case REC_MEMCPY:
		return ((const struct rec_memcpy *)rec)->correlation_id;
	case REC_MEMSET:
		return ((const struct rec_memset *)rec)->correlation_id;
	case REC_HCCL:
		return ((const struct rec_hccl *)rec)->correlation_id;
	case REC_COMMUNICATION:
		return ((const struct rec_communication *)rec)->correlation_id;
	}
	return 0;
}

/* Whether a work record of call corr, for producer q of thread t, waits
 * for its call's API record: it is a record of the call open on this
 * thread, the session takes API records, q is the thread's own segment
 * (not a nested entry, whose strings may be defined elsewhere), and the
 * slot has room.  Otherwise the caller writes it at once. */
static inline bool
sess_stash_ok(const struct sess_thread *t, const struct ring_producer *q,
    uint64_t corr)
{
	return corr != 0 && corr == icall_open_corr && q == &t->prod &&
	    (api_kinds_session() & (1u << MSPTI_ACTIVITY_KIND_API)) &&
	    t->nstash < SESS_STASH;
}

/* Keeps rec (of session s, encoded for producer q) for its call's API
 * record, as sess_stash_ok says; false: write it at once. */
static bool
sess_stash_put(const struct agent_session *s, struct sess_thread *t,
    const struct ring_producer *q, const void *rec)
{
	uint64_t corr = sess_work_corr(rec);
	struct sess_stash *e;

	if (!sess_stash_ok(t, q, corr))
		return false;
	e = &t->stash[t->nstash];
	e->gen = s->gen;
	e->corr = corr;
	e->pend = false;
	memcpy(e->u.rec, rec, session_rec_size(rec));
	t->nstash++;
	return true;
}

static bool	session_launch_put(struct agent_session *s,
		    struct ring_producer *q, const struct pending *p);

/* Writes t's waiting records of call corr into s (s NULL: none), and
 * forgets them; those of another session are forgotten unwritten. */
static void
sess_stash_write(struct agent_session *s, struct sess_thread *t,
    struct ring_producer *q, uint64_t corr)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->nstash; i++) {
		struct sess_stash *e = &t->stash[i];

		if (e->corr != corr) {
			if (n != i)
				t->stash[n] = *e;
			n++;
		} else if (s == NULL || e->gen != s->gen)
			continue;
		else if (e->pend)
			(void)session_launch_put(s, q, &e->u.pd);
		else
			ring_pwrite(q, e->u.rec);	/* counts its own drop */
	}
	t->nstash = n;
}

void
session_call_end(uint64_t corr)
{
	struct sess_thread *t = tls_sess;
	struct agent_session *s;
	struct ring_producer *q = NULL;

	if (API_LIKELY(t == NULL || t->nstash == 0))
		return;
	if ((s = session_enter_on(t)) != NULL &&
	    atomic_load_explicit(&s->win, memory_order_relaxed) ==
	    SESS_WIN_OPEN &&
	    (api_kinds_session() & (1u << MSPTI_ACTIVITY_KIND_API)))
		q = session_prod(s, t);
	else
		s = NULL;
	sess_stash_write(s, t, q, corr);
	if (s != NULL)
		session_wake(s, q);
	session_leave(t);
}

/*
 * A record found no live session although session kinds are on: maybe we
 * are a child forked without the atfork handlers (_Fork, clone), whose
 * wiped fork page says so.  The first thread to see it makes the process
 * a new agent (registers, waits for its own config under run); the
 * record that found it is not the parent's and is dropped (counted in
 * sess_fork_lost, reported at the child's first capture ack as an
 * agent_ring loss).
 */
_Atomic uint64_t sess_fork_lost;

static void
session_check_fork(void)
{
	int zero = 0;

	if (API_LIKELY(atomic_load_explicit(&sess_fp->mine,
	    memory_order_relaxed) != 0))
		return;
	atomic_fetch_add(&sess_fork_lost, 1);
	if (!atomic_compare_exchange_strong(&sess_fp->mine, &zero, 2))
		return;
	if (!agent_config.disabled)
		register_after_fork_child();
	atomic_store(&sess_fp->mine, 1);
}

/* Waits (bounded, like the first runtime call) until this process has
 * its own config: a forked rank's first marks belong to its capture. */
void
session_mark_wait(void)
{
	if (atomic_load(&sess_fp->mine) == 0) {
		int zero = 0;

		if (atomic_compare_exchange_strong(&sess_fp->mine, &zero, 2)) {
			if (!agent_config.disabled)
				register_after_fork_child();
			atomic_store(&sess_fp->mine, 1);
		}
	}
	if (atomic_load(&gate_closed))
		gate_wait();
}

/* Enters the sink for a record of the live session: the session, or
 * NULL when none is live (maybe a forked child's first record:
 * session_check_fork) or the record falls outside its step window;
 * either way the caller ends with session_leave(*tp). */
static inline struct agent_session *
session_enter_open(struct sess_thread **tp)
{
	struct agent_session *s = session_enter(tp);

	if (API_UNLIKELY(s == NULL)) {
		session_check_fork();
		return NULL;
	}
	/* Outside the step window: not this capture's. */
	if (API_UNLIKELY(atomic_load_explicit(&s->win, memory_order_relaxed) !=
	    SESS_WIN_OPEN))
		return NULL;
	return s;
}

/* session_enter_open for a record meant for session arg: NULL too when
 * arg is not the live one (arg is only compared: a stopped session may
 * be freed already). */
static inline struct agent_session *
session_enter_arg(void *arg, struct sess_thread **tp)
{
	struct agent_session *s = session_enter_open(tp);

	return API_LIKELY(s == arg) ? s : NULL;
}

/* The session sink: runs on the producing thread, never blocks. */
void
session_sink(const msptiActivity *a, size_t len, void *arg)
{
	struct sess_thread *t;
	struct agent_session *s;
	struct ring_producer *p;
	uint64_t rec[REC_FIXED_MAX / 8];

	(void)len;
	/* A layer kind (ACL, node, runtime API) comes only without "api"
	 * (api_session_set_kinds). */
	if ((s = session_enter_arg(arg, &t)) == NULL)
		goto out;
	p = session_prod(s, t);
	if (a->kind == MSPTI_ACTIVITY_KIND_MARKER) {
		session_marker(s, p, (const msptiActivityMarker *)a);
		goto out;
	}
	if (session_encode(s, p, a, rec) == 0)
		goto out;
	if (API_UNLIKELY(sess_def_full)) {
		sess_def_full = false;
		ring_pdrop(p, session_rec_size(rec));
	} else if (sess_stash_put(s, t, p, rec))
		goto out;
	else {
		/* A call's API record takes its waiting work records. */
		if (API_UNLIKELY(t->nstash != 0) &&
		    a->kind == MSPTI_ACTIVITY_KIND_API)
			sess_stash_write(s, t, p, ((const msptiActivityApi *)
			    (const void *)a)->correlationId);
		ring_pwrite(p, rec);	/* a full ring counts its own drops */
	}
	session_wake(s, p);
out:
	session_leave(t);
}

/* The sink's way in for MSTX's host markers (api_marker_sink_fn): the
 * same path as a MARKER through session_sink, its fields as they come. */
void
session_host_marker(void *arg, msptiActivityFlag flag, uint64_t id,
    uint64_t ts, const char *name, const char *domain)
{
	struct sess_thread *t;
	struct agent_session *s = session_enter_arg(arg, &t);

	if (s != NULL)
		session_marker_put(s, session_prod(s, t), name, domain, ts, id,
		    api_pid(), api_tid(), REC_NONE, REC_NONE, 0,
		    (uint32_t)flag);
	session_leave(t);
}

/* session_launch_put of a kernel launch: its name (a string definition
 * first when it is new), then the record encoded in its slot. */
static bool
session_kernel_put(struct agent_session *s, struct ring_producer *q,
    const struct pending *p)
{
	uint32_t name_id = session_string(s, q, p->name);
	struct rec_kernel *r;
	struct rec_hdr h;

	if (API_UNLIKELY(sess_def_full)) {
		sess_def_full = false;
		ring_pdrop(q, sizeof(*r));
		return false;
	}
	if (ring_preserve(q, sizeof(*r), (void **)&r) != 0)
		return false;	/* a full ring counts its drop */
	SESS_WORK(r, s, p->start, p->end, p->corr, api_tid(), p->device,
	    p->stream, p->task);
	r->name_id = name_id;
	r->type_id = 0;
	r->reserved = 0;
	rec_hdr_set(&h, REC_KERNEL, sizeof(*r), REC_F_HOST_LAUNCH);
	ring_commit(r, &h);
	return true;
}

/* Encodes p's host launch record (REC_F_HOST_LAUNCH: start/end are the
 * launch call; device, stream and task id key the device task msptid
 * joins to it) and writes it into q: false when p's kind has none, a
 * string it names did not fit, or the ring was full (both counted). */
static bool
session_launch_put(struct agent_session *s, struct ring_producer *q,
    const struct pending *p)
{
	uint64_t rec[REC_FIXED_MAX / 8];

	switch (p->kind) {
	case MSPTI_ACTIVITY_KIND_KERNEL:
		/* Most launches: encoded in its ring slot, not copied. */
		return session_kernel_put(s, q, p);
	case MSPTI_ACTIVITY_KIND_MEMCPY: {
		struct rec_memcpy *r = (void *)rec;

		REC_INIT(r, REC_MEMCPY, REC_F_HOST_LAUNCH |
		    (p->is_async ? REC_F_ASYNC : 0));
		SESS_WORK(r, s, p->start, p->end, p->corr, api_tid(), p->device,
		    p->stream, p->task);
		r->bytes = p->bytes;
		r->copy_kind = p->copy_kind <= 5 ? p->copy_kind : 0;
		break;
	}
	case MSPTI_ACTIVITY_KIND_MEMSET: {
		struct rec_memset *r = (void *)rec;

		REC_INIT(r, REC_MEMSET, REC_F_HOST_LAUNCH |
		    (p->is_async ? REC_F_ASYNC : 0));
		SESS_WORK(r, s, p->start, p->end, p->corr, api_tid(), p->device,
		    p->stream, p->task);
		r->bytes = p->bytes;
		r->value = p->value;
		break;
	}
	case MSPTI_ACTIVITY_KIND_HCCL: {
		struct rec_hccl *r = (void *)rec;

		REC_INIT(r, REC_HCCL, REC_F_HOST_LAUNCH);
		SESS_WORK(r, s, p->start, p->end, p->corr, api_tid(), p->device,
		    p->stream, p->task);
		r->name_id = session_string(s, q, p->name);
		r->comm_name_id = session_string(s, q, p->comm_name);
		break;
	}
	default:
		return false;
	}
	if (API_UNLIKELY(sess_def_full)) {
		sess_def_full = false;
		ring_pdrop(q, session_rec_size(rec));
		return false;
	}
	return ring_pwrite(q, rec) == 0;	/* a full ring counts its drop */
}

/*
 * Writes p's host launch record into the ring.  Any thread; the same
 * fencing as session_sink.  A launch of the call open on its thread,
 * while the session takes API records, waits for the call's API record
 * (session_api), which writes both in one entry into the session: both
 * or neither are in the trace.  It is its session's: a stop and a new
 * start before the API record leave it out (the session's gen, not its
 * address, which the new one may have).  Returns false when no session
 * captures or the ring was full.
 */
bool
session_launch(const struct pending *p)
{
	struct sess_thread *t;
	struct agent_session *s;
	struct ring_producer *q;
	bool ok = false;

	if (atomic_load_explicit(&sess_fp->live, memory_order_relaxed) == NULL)
		return false;
	if ((s = session_enter_open(&t)) == NULL)
		goto out;
	/* Not nested (in 1): the thread's own segment, as session_prod
	 * would give it. */
	if (atomic_load_explicit(&t->in, memory_order_relaxed) == 1 &&
	    sess_stash_ok(t, &t->prod, p->corr)) {
		/* Kept as it is for session_api: encoded only there. */
		struct sess_stash *e = &t->stash[t->nstash];

		e->gen = s->gen;
		e->corr = p->corr;
		e->pend = true;
		e->u.pd = *p;
		t->nstash++;
		ok = true;
		goto out;
	}
	q = session_prod(s, t);
	ok = session_launch_put(s, q, p);
	session_wake(s, q);
out:
	session_leave(t);
	return ok;
}

/*
 * Writes a call's API record (REC_API, kind API, from the call's own
 * fields) into the live session's ring, encoded in its slot, after the
 * call's waiting work records (session_launch, sess_stash_put): one entry
 * into the session for all of them.  Any thread; the same fencing as
 * session_sink.
 */
void
session_api(uint64_t start, uint64_t end, uint64_t corr, const char *name)
{
	struct sess_thread *t;
	struct agent_session *s;
	struct ring_producer *p;
	struct rec_api *r;
	struct rec_hdr h;
	uint32_t name_id;

	if (atomic_load_explicit(&sess_fp->live, memory_order_relaxed) == NULL)
		return;
	if ((s = session_enter_open(&t)) == NULL)
		goto out;
	p = session_prod(s, t);
	name_id = session_string(s, p, name);
	if (API_UNLIKELY(sess_def_full)) {
		sess_def_full = false;
		ring_pdrop(p, sizeof(*r));
	} else {
		if (t->nstash != 0)	/* the call's launch */
			sess_stash_write(s, t, p, corr);
		/* A full ring counts its own drops. */
		if (ring_preserve(p, sizeof(*r), (void **)&r) == 0) {
			r->start = start;
			r->end = end;
			r->correlation_id = corr;
			r->pid = api_pid();
			r->tid = api_tid();
			r->name_id = name_id;
			r->kind = MSPTI_ACTIVITY_KIND_API;
			r->domain = 0;
			r->cbid = 0;
			r->reserved = 0;
			rec_hdr_set(&h, REC_API, sizeof(*r), 0);
			ring_commit(r, &h);
		}
	}
	session_wake(s, p);
out:
	session_leave(t);
}


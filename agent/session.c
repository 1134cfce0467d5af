/*
 * The agent's side of a daemon session: the sink that encodes activity
 * records into the session's shared-memory ring, and the start, update and
 * stop steps the registration thread runs when msptid asks.
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
 * waits for threads still inside the sink before it unmaps the ring.  One
 * session at a time per process.
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

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>

#include "log.h"
#include "record.h"
#include "ring.h"
#include "api.h"
#include "agent.h"

#define SESS_STRINGS		4096	/* interned strings per ring */
#define SESS_STRING_KEEP	400	/* longest string sent */
#define SESS_MAX_DOMAINS_OFF	32

struct sess_string {
	const char *_Atomic	key;
	_Atomic uint64_t	defined;	/* bit i: sent in segment i */
};

/* Step window states (agent_session.win). */
enum { SESS_WIN_BEFORE, SESS_WIN_OPEN, SESS_WIN_DONE };

struct agent_session {
	uint64_t		 id;
	uint64_t		 gen;		/* this process's session count */
	struct ring		*ring;
	struct ring_producer	 shared;	/* segment 0, for nested calls */
	/* Segments claimed by a thread, for the registration thread to
	 * populate (session_populate_due): not the claimer's to wait for. */
	_Atomic uint64_t	 populate_due;
	int			 wakefd;
	_Atomic bool		 active;
	uint32_t		 pid;
	_Atomic uint64_t	 wakes;
	/* Marker domains switched off; NULL-terminated, replaced whole. */
	_Atomic(char **)	 domains_off;
	/* A step window (--steps N): records are written only while win
	 * is OPEN, from the start of step win_from (or the first step after
	 * it this process starts) to the end of step win_from + win_n - 1.
	 * win_n 0: no window, always OPEN.  Under step_lock but win. */
	_Atomic int		 win;
	uint32_t		 win_n;
	int64_t			 win_from;	/* -1: not chosen yet */
	uint64_t		 win_last_id;	/* range id of the last step */
	bool			 win_blind;	/* set before any step was seen */
	/* hostclock.gen of the last REC_HOST_CLOCK written (0: none). */
	_Atomic uint32_t	 clock_gen;
	struct sess_string	 strings[SESS_STRINGS];
};

static struct agent_session *cur;	/* registration thread only */
static uint64_t sess_gen;		/* registration thread only */

/*
 * cur while capturing: what producers check after entering (see top).  It
 * lives in a page the kernel wipes in a child at fork (MADV_WIPEONFORK),
 * so a child never writes into its parent's ring, however it was forked
 * (fork(), or _Fork()/clone() without the atfork handlers); 'mine' is 0
 * in such a child until the agent has made it a new agent of its own.
 */
static struct sess_forkpage sess_fp_static = { NULL, 1 };
API_HOT struct sess_forkpage *sess_fp = &sess_fp_static;

/* Steps: MSTX ranges named step_name that this process started. */
static pthread_mutex_t step_lock = PTHREAD_MUTEX_INITIALIZER;
static char step_names[4][128] = { "step" };
static _Atomic(const char *) step_name = step_names[0];
static unsigned step_name_slot;
static uint64_t step_starts;		/* under step_lock */
static uint64_t step_last_ns, step_period_ns;
/* SESSION_STEPS_*: MSTX steps, once the process marked one, always win
 * over the synchronize pattern (steps.c). */
static uint32_t step_src;
/* A synchronize step's range open in session gen step_sync_gen. */
static uint64_t step_sync_open, step_sync_gen;
#define STEP_SYNC_ID	(1ull << 62)	/* its marker ids: no MSTX id's */
/* The first step of session first_note_sid's window, for msptid
 * (session_first_due), once the process's steps became known after it
 * was told another; first_note_sid 0: nothing to tell. */
static uint64_t first_note_sid;
static int64_t first_note;

/* A device-work record of the call open on its thread, waiting for the
 * call's API record: a host launch as its interposer gave it
 * (session_launch: pend), or a record encoded (sess_stash_put). */
#define SESS_STASH	4
struct sess_stash {
	uint64_t		 gen;	/* its session's */
	uint64_t		 corr;
	bool			 pend;	/* u.pd, else u.rec */
	union {
		uint64_t	 rec[REC_FIXED_MAX / 8];
		struct pending	 pd;
	} u;
};

/* A producing thread's fence slot (see the top); kept for the life of the
 * process, reused by a later thread once its thread has exited. */
struct sess_thread {
	_Atomic uint32_t	 in;	/* nesting depth inside the sink */
	_Atomic int		 used;	/* owned by a live thread */
	struct sess_thread	*next;
	/* The ring segment this thread writes to, claimed on its first
	 * record in session prod_gen (ring.h). */
	uint64_t		 prod_gen;
	struct ring_producer	 prod;
	unsigned		 nstash;
	struct sess_stash	 stash[SESS_STASH];
} __attribute__((aligned(64)));

static struct sess_thread *_Atomic sess_threads;
static API_TLS struct sess_thread *tls_sess;
static pthread_key_t sess_key;
static pthread_once_t sess_once = PTHREAD_ONCE_INIT;
static bool sess_key_ok;
/* 1: membarrier is registered, producers need only a compiler barrier. */
static API_HOT _Atomic int sess_membarrier;

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
static struct sess_thread *
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

/* session_enter on the slot t (the caller's own). */
static inline struct agent_session *
session_enter_on(struct sess_thread *t)
{
	atomic_store_explicit(&t->in, atomic_load_explicit(&t->in,
	    memory_order_relaxed) + 1, memory_order_relaxed);
	if (API_LIKELY(atomic_load_explicit(&sess_membarrier,
	    memory_order_relaxed)))
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
	/* Acquire: the session it points to was published with a store. */
	return (struct agent_session *)atomic_load_explicit(&sess_fp->live,
	    memory_order_acquire);
}

/*
 * Enters the sink: returns the live session to write into, or NULL when
 * none is capturing; either way the caller ends with session_leave(*tp).
 * The common case is a TLS load, a plain store and a plain load.
 */
static inline struct agent_session *
session_enter(struct sess_thread **tp)
{
	struct sess_thread *t = tls_sess;

	if (API_UNLIKELY(t == NULL) && (t = sess_thread_get()) == NULL) {
		*tp = NULL;
		return NULL;
	}
	*tp = t;
	return session_enter_on(t);
}

static inline void
session_leave(struct sess_thread *t)
{
	if (t != NULL)
		atomic_store_explicit(&t->in, atomic_load_explicit(&t->in,
		    memory_order_relaxed) - 1, memory_order_release);
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

/*
 * The producer a thread inside the sink writes with: its own segment,
 * claimed on its first record in this session, or the shared one for a
 * call nested in another (a signal handler): a segment has one writer.
 */
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

/* Registration thread: the bytes each per-thread segment took in this
 * process's last session, populated up front in the next one. */
static uint64_t sess_written[RING_MAX_SEGMENTS];

/* A producer came near the end of its segment's populated part (the
 * ring's populate hook, from its write): the registration thread
 * populates further. */
static void
session_pop_hook(struct ring *r, unsigned seg, void *arg)
{
	struct agent_session *s = arg;

	(void)r;
	if (!(atomic_fetch_or(&s->populate_due, 1ull << seg) &
	    (1ull << seg)))
		register_wake();
}

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

/* Stopper side, after 'live' is cleared: waits until no thread is inside
 * the sink.  False when one stays inside for ~2 s (stopped in a debugger):
 * the caller must then not free what it may still use. */
static bool
session_quiesce(void)
{
	struct sess_thread *t;
	int spins = 0;

	if (atomic_load(&sess_membarrier)) {
		if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED,
		    0, 0) != 0) {
			/* Cannot happen once registered; be safe anyway:
			 * full fences from now on, and time for racers. */
			atomic_store(&sess_membarrier, 0);
			usleep(10000);
		}
	} else
		atomic_thread_fence(memory_order_seq_cst);
	for (t = atomic_load(&sess_threads); t != NULL; t = t->next) {
		while (atomic_load_explicit(&t->in, memory_order_acquire) != 0) {
			if (++spins > 2000)
				return false;
			if (spins < 100)
				sched_yield();
			else
				usleep(1000);
		}
	}
	return true;
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
 * 0 when it cannot.  Inline: a string in its first slot, defined in p's
 * segment already, what nearly every record finds. */
static inline uint32_t
session_string(struct agent_session *s, struct ring_producer *p,
    const char *str)
{
	struct sess_string *e;
	uintptr_t h;
	size_t i;

	if (str == NULL || *str == '\0')
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
 * session is still the same; a waiting record whose session ended goes
 * nowhere, like the call's API record.
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
	    SESS_WIN_OPEN)
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
static _Atomic uint64_t sess_fork_lost;

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

static inline bool
session_is_step(const char *msg)
{
	const char *n = atomic_load_explicit(&step_name, memory_order_relaxed);

	return msg != NULL && msg[0] == n[0] && strcmp(msg, n) == 0;
}

/* The window at the start of step idx (range id, 0 when markers are not
 * captured); step_lock held, s entered. */
static void
session_win_step(struct agent_session *s, uint64_t idx, uint64_t id)
{
	int64_t from = s->win_from;

	if (s->win_n == 0 || from < 0 || (int64_t)idx < from)
		return;
	if ((int64_t)idx < from + (int64_t)s->win_n) {
		if (idx == (uint64_t)from + s->win_n - 1)
			s->win_last_id = id;
		if (atomic_load(&s->win) == SESS_WIN_BEFORE)
			atomic_store(&s->win, SESS_WIN_OPEN);
	} else
		atomic_store(&s->win, SESS_WIN_DONE);
}

/* A synchronize step's range record (START or END), written into s's
 * ring whatever the kinds: the daemon counts the window by them, and
 * report's step breakdown reads them (domain mspti.sync says whence). */
static void
session_sync_marker(struct agent_session *s, struct sess_thread *t,
    msptiActivityFlag flag, uint64_t idx, uint64_t ts, const char *domain)
{
	msptiActivityMarker m;

	activity_host_marker(&m, flag, STEP_SYNC_ID + idx, ts, s->pid,
	    api_intern(atomic_load(&step_name)), api_intern(domain));
	if (m.name == NULL || m.domain == NULL)
		return;
	session_marker(s, session_prod(s, t), &m);
}

/*
 * MSTX (mstx.c): a range named msg starts, with id (0 when markers are not
 * captured), before its record is written.  Counts the process's steps,
 * whether or not a session captures, so a session can tell each rank's
 * step index and open the window at the start of the same step on all.
 */
void
session_step_begin(const char *msg, uint64_t id)
{
	struct sess_thread *t;
	struct agent_session *s;
	uint64_t idx, now;
	bool takeover = false;

	if (API_LIKELY(!session_is_step(msg)))
		return;
	now = api_now();
	pthread_mutex_lock(&step_lock);
	if (step_src == SESSION_STEPS_SYNC) {
		/*
		 * The first MSTX step of a process that stepped by the
		 * synchronize pattern: it is the step under way, so the count
		 * (and a window over it) goes on, on every rank alike.  That
		 * step's synchronize range, if written, is withdrawn: its END
		 * says so, and neither msptid nor report count it.
		 */
		takeover = true;
		if (step_starts > 0)
			step_starts--;
	} else if (step_src == SESSION_STEPS_NONE)
		step_starts = 0;
	step_src = SESSION_STEPS_MSTX;
	idx = step_starts++;
	if (!takeover && step_last_ns != 0 && now > step_last_ns)
		step_period_ns = step_period_ns == 0 ? now - step_last_ns :
		    (step_period_ns * 3 + (now - step_last_ns)) / 4;
	step_last_ns = now;
	if ((s = session_enter(&t)) != NULL) {
		if (takeover && step_sync_open != 0 &&
		    step_sync_gen == s->gen)
			session_sync_marker(s, t, MSPTI_ACTIVITY_FLAG_MARKER_END,
			    step_sync_open - 1, now, REC_STEPS_WITHDRAWN_DOMAIN);
		session_win_step(s, idx, id);
	}
	if (takeover)
		step_sync_open = 0;
	session_leave(t);
	pthread_mutex_unlock(&step_lock);
}

/* A step range ended (after its END record): the window closes after the
 * last step of it. */
void
session_step_end(const char *name, uint64_t id)
{
	struct sess_thread *t;
	struct agent_session *s;

	if (API_LIKELY(!session_is_step(name)) || id == 0)
		return;
	pthread_mutex_lock(&step_lock);
	if ((s = session_enter(&t)) != NULL && s->win_n != 0 &&
	    s->win_last_id == id && atomic_load(&s->win) == SESS_WIN_OPEN)
		atomic_store(&s->win, SESS_WIN_DONE);
	session_leave(t);
	pthread_mutex_unlock(&step_lock);
}

/*
 * steps.c: the synchronize pattern says step idx starts now (boundary),
 * or, when it was just found, that the process is in step idx.  Ignored
 * once the process marked an MSTX step.
 */
void
session_step_sync(uint64_t idx, bool boundary)
{
	struct sess_thread *t;
	struct agent_session *s;
	uint64_t now = api_now();
	bool note = false;

	pthread_mutex_lock(&step_lock);
	if (step_src == SESSION_STEPS_MSTX)
		goto out;
	if (step_src == SESSION_STEPS_NONE) {
		/*
		 * A window set before the pattern was found had no index to
		 * go by.  Under msptictl run (k 0) it starts with the first
		 * whole step from now.  A k chosen on the other ranks' counts
		 * (or forced) stays, as on every rank: the steps of it this
		 * process has passed are missed, and msptid is told the first
		 * step it records (none when it is past the window).
		 */
		int64_t next = boundary ? (int64_t)idx : (int64_t)idx + 1;

		if ((s = session_enter(&t)) != NULL && s->win_n != 0 &&
		    s->win_blind && s->win_from >= 0 &&
		    s->win_from < next &&
		    atomic_load(&s->win) == SESS_WIN_BEFORE) {
			if (s->win_from == 0)
				s->win_from = next;
			else {
				first_note = next < s->win_from +
				    (int64_t)s->win_n ? next : -1;
				if (first_note < 0)
					atomic_store(&s->win, SESS_WIN_DONE);
				first_note_sid = s->id;
				note = true;
			}
		}
		session_leave(t);
	}
	step_src = SESSION_STEPS_SYNC;
	step_starts = idx + 1;
	if (!boundary)
		goto out;
	if (step_last_ns != 0 && now > step_last_ns)
		step_period_ns = step_period_ns == 0 ? now - step_last_ns :
		    (step_period_ns * 3 + (now - step_last_ns)) / 4;
	step_last_ns = now;
	if ((s = session_enter(&t)) != NULL) {
		/* The step that ends, then the one that starts. */
		if (step_sync_open != 0 && step_sync_gen == s->gen &&
		    atomic_load(&s->win) == SESS_WIN_OPEN)
			session_sync_marker(s, t, MSPTI_ACTIVITY_FLAG_MARKER_END,
			    step_sync_open - 1, now, REC_STEPS_SYNC_DOMAIN);
		step_sync_open = 0;
		session_win_step(s, idx, 0);
		if (atomic_load(&s->win) == SESS_WIN_OPEN) {
			session_sync_marker(s, t,
			    MSPTI_ACTIVITY_FLAG_MARKER_START, idx, now,
			    REC_STEPS_SYNC_DOMAIN);
			step_sync_open = idx + 1;
			step_sync_gen = s->gen;
		}
	}
	session_leave(t);
out:
	pthread_mutex_unlock(&step_lock);
	if (note)
		register_wake();
}

/* Sets s's window start (step_lock held) and says where this process is:
 * its step count, recent step time and the first step it will record. */
static void
session_win_set(struct agent_session *s, int64_t from,
    struct session_step_info *si)
{
	si->step = (int64_t)step_starts;
	si->period_ns = step_period_ns;
	si->first = -1;
	si->src = step_src;
	if (s->win_n == 0)
		return;
	if (from < 0) {
		s->win_from = -1;
		return;
	}
	s->win_from = from;
	s->win_blind = step_src == SESSION_STEPS_NONE;
	first_note_sid = 0;		/* this answer says it */
	/* A step already under way is not recorded: the next one is the
	 * first, and the steps before it are missed. */
	si->first = (int64_t)step_starts > from ? (int64_t)step_starts : from;
	if (si->first >= from + (int64_t)s->win_n) {
		atomic_store(&s->win, SESS_WIN_DONE);
		si->first = -1;
	}
}

/*
 * Registration thread, once the start is acked (so that the capture is
 * active without waiting for it): the pages of the segment the first
 * producing thread claims, here rather than one fault at a time on the
 * application's records.  The shared segment 0 takes nested records and
 * the threads past the per-thread segments: it is populated when the
 * first thread falls back to it (session_prod).  A segment is 8 MB by
 * default, and populating all of it cost ~5 ms of CPU, and its memory,
 * in every session however little it recorded: now 1 MiB, or what the
 * segment took in the last session when more, and more as the thread's
 * writes pass half of it (session_pop_hook, ring_populate_ahead).
 */
void
session_prefault(void)
{
	if (cur == NULL)
		return;
	ring_populate_ahead(cur->ring, 1);
}

/* Registration thread: populates ahead of the threads that claimed a
 * segment or came near the end of its populated part since (the shared
 * segment 0, written by any thread, whole). */
void
session_populate_due(void)
{
	uint64_t due;

	if (cur == NULL ||
	    (due = atomic_exchange(&cur->populate_due, 0)) == 0)
		return;
	for (unsigned i = 0; i < 64; i++)
		if (due & (1ull << i)) {
			if (i == 0)
				ring_populate(cur->ring, 0);
			else
				ring_populate_ahead(cur->ring, i);
		}
}

/* Registration thread: true, with the session and si->first, when
 * msptid is to be told the first step its window records now. */
bool
session_first_due(uint64_t *sid, struct session_step_info *si)
{
	bool due;

	pthread_mutex_lock(&step_lock);
	due = first_note_sid != 0 && cur != NULL && cur->id == first_note_sid;
	if (due) {
		*sid = first_note_sid;
		memset(si, 0, sizeof(*si));
		si->step = (int64_t)step_starts;
		si->period_ns = step_period_ns;
		si->first = first_note;
		si->src = step_src;
	}
	first_note_sid = 0;
	pthread_mutex_unlock(&step_lock);
	return due;
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
static void
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
static void
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
	case MSPTI_ACTIVITY_KIND_KERNEL: {
		struct rec_kernel *r = (void *)rec;

		REC_INIT(r, REC_KERNEL, REC_F_HOST_LAUNCH);
		SESS_WORK(r, s, p->start, p->end, p->corr, api_tid(), p->device,
		    p->stream, p->task);
		r->name_id = session_string(s, q, p->name);
		break;
	}
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

static char **
session_domains_dup(char **names, size_t n)
{
	char **out;

	if (n > SESS_MAX_DOMAINS_OFF)
		n = SESS_MAX_DOMAINS_OFF;
	if ((out = calloc(n + 1, sizeof(*out))) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if ((out[i] = strdup(names[i] ? names[i] : "")) == NULL) {
			out[i] = strdup("");
			if (out[i] == NULL)
				break;
		}
	return out;
}

/* The old list is kept until the session ends: a producer may read it. */
static char **retired_domains[64];
static size_t nretired;

static void
session_domains_free(char **off)
{
	if (off == NULL)
		return;
	for (char **p = off; *p != NULL; p++)
		free(*p);
	free(off);
}

uint64_t
session_current(void)
{
	return cur != NULL ? cur->id : 0;
}

/*
 * Starts capturing into the ring in ringfd (which this takes) for session
 * id.  On success *wakefdp is an eventfd the caller passes to the daemon
 * (and then closes; we keep our own copy).  Returns 0 or a negative errno
 * with a reason in why.
 */
int
session_start(uint64_t id, uint32_t kinds, char **domains_off,
    size_t ndomains_off, const struct session_step_cfg *sc, int ringfd,
    int *wakefdp, const char **why, struct session_step_info *si)
{
	struct agent_session *s;
	int rc;

	memset(si, 0, sizeof(*si));
	si->first = -1;
	*wakefdp = -1;
	if (cur != NULL) {
		close(ringfd);
		*why = "already capturing for another session";
		return -EBUSY;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		close(ringfd);
		*why = "out of memory";
		return -ENOMEM;
	}
	s->id = id;
	s->gen = ++sess_gen;
	/* Not api_pid(): its cache may be a parent's in a child forked
	 * without the atfork handlers. */
	s->pid = (uint32_t)getpid();
	s->win_n = sc != NULL ? sc->steps : 0;
	s->win_from = -1;
	atomic_store(&s->win, s->win_n ? SESS_WIN_BEFORE : SESS_WIN_OPEN);
	rc = ring_map(ringfd, &s->ring);
	close(ringfd);
	if (rc != 0) {
		*why = "cannot map the ring";
		free(s);
		return rc;
	}
	ring_set_lazy(s->ring, true);
	ring_set_populate_hook(s->ring, session_pop_hook, s);
	for (unsigned i = 1; i < RING_MAX_SEGMENTS; i++)
		ring_set_populate_hint(s->ring, i, sess_written[i]);
	ring_producer_shared(s->ring, &s->shared);
	s->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wakefd < 0 || (*wakefdp = dup(s->wakefd)) < 0) {
		rc = -errno;
		if (s->wakefd >= 0)
			close(s->wakefd);
		ring_unmap(s->ring);
		free(s);
		*why = "cannot create an eventfd";
		return rc;
	}
	/* Once per process; producers switch to the cheap fence. */
	if (!atomic_load(&sess_membarrier) && syscall(__NR_membarrier,
	    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		atomic_store(&sess_membarrier, 1);
	atomic_store(&s->domains_off, session_domains_dup(domains_off,
	    ndomains_off));
	atomic_store(&s->active, true);
	pthread_mutex_lock(&step_lock);
	if (s->win_n != 0 && sc->step_name != NULL && *sc->step_name != '\0' &&
	    strcmp(sc->step_name, atomic_load(&step_name)) != 0) {
		/* Another step name than the one counted since load: its
		 * steps count from now (MSPTI_STEP_NAME names it at load). */
		step_name_slot = (step_name_slot + 1) %
		    (sizeof(step_names) / sizeof(step_names[0]));
		snprintf(step_names[step_name_slot], sizeof(step_names[0]),
		    "%s", sc->step_name);
		atomic_store(&step_name, step_names[step_name_slot]);
		api_mstx_step_char((unsigned char)sc->step_name[0]);
		/* Synchronize steps keep their count: only the name of
		 * their ranges changes. */
		if (step_src != SESSION_STEPS_SYNC) {
			step_starts = 0;
			step_last_ns = step_period_ns = 0;
		}
	}
	session_win_set(s, sc != NULL ? sc->step_from : -1, si);
	si->fork_lost = atomic_exchange(&sess_fork_lost, 0);
	cur = s;
	atomic_store(&sess_fp->live, s);
	pthread_mutex_unlock(&step_lock);
	api_session_set_sink(session_sink, session_host_marker, s);
	api_session_set_kinds(kinds);
	log_debug("session %llu: capturing kinds 0x%x",
	    (unsigned long long)id, kinds);
	return 0;
}

int
session_update(uint64_t id, uint32_t kinds, char **domains_off,
    size_t ndomains_off, int64_t step_from, struct session_step_info *si)
{
	char **old;

	memset(si, 0, sizeof(*si));
	si->first = -1;
	if (cur == NULL || cur->id != id)
		return -ENOENT;
	pthread_mutex_lock(&step_lock);
	if (step_from >= 0)
		first_note_sid = 0;	/* this answer says it */
	/* k, or a later k while the window has not opened (the daemon moves
	 * it when a rank had passed the first one). */
	if (step_from >= 0 && cur->win_n != 0 &&
	    atomic_load(&cur->win) == SESS_WIN_BEFORE &&
	    (int64_t)step_starts > step_from) {
		/* Past the window it is told of: say where we are, record
		 * nothing; the daemon picks a later one for every rank. */
		si->step = (int64_t)step_starts;
		si->period_ns = step_period_ns;
		si->first = -1;
		si->src = step_src;
		cur->win_from = -1;
	} else if (step_from >= 0 && cur->win_n != 0 &&
	    atomic_load(&cur->win) == SESS_WIN_BEFORE)
		session_win_set(cur, step_from, si);
	else {
		si->step = (int64_t)step_starts;
		si->period_ns = step_period_ns;
		si->first = cur->win_n != 0 && cur->win_from >= 0 ?
		    cur->win_from : -1;
		si->src = step_src;
	}
	pthread_mutex_unlock(&step_lock);
	old = atomic_exchange(&cur->domains_off,
	    session_domains_dup(domains_off, ndomains_off));
	if (old != NULL) {
		if (nretired < sizeof(retired_domains) /
		    sizeof(retired_domains[0]))
			retired_domains[nretired++] = old;
		/* else: leak rather than free under a reader */
	}
	api_session_set_kinds(kinds);
	return 0;
}

/*
 * Stops the current session (id 0: whatever is running): device records
 * already launched are drained into the ring first when flush is set (a
 * clean stop), then producers are fenced out and the ring is unmapped.
 */
int
session_stop(uint64_t id, bool flush)
{
	struct agent_session *s = cur;

	if (s == NULL || (id != 0 && s->id != id))
		return -ENOENT;
	/* Device timing of a session is joined in msptid; this only drains
	 * what the in-process API still waits for. */
	if (flush)
		devtime_drain();
	api_session_set_kinds(0);
	api_session_set_sink(NULL, NULL, NULL);
	atomic_store(&sess_fp->live, NULL);
	atomic_store(&s->active, false);
	/* Threads already inside the sink finish within a few records; a
	 * thread that never comes back (stopped by a debugger) must not make
	 * us unmap under it, so give up and leak after ~2 s. */
	if (!session_quiesce()) {
		cur = NULL;
		return 0;
	}
	cur = NULL;
	for (unsigned i = 1; i < RING_MAX_SEGMENTS; i++)
		sess_written[i] = ring_written(s->ring, i);
	ring_unmap(s->ring);
	close(s->wakefd);
	session_domains_free(atomic_load(&s->domains_off));
	for (size_t i = 0; i < nretired; i++)
		session_domains_free(retired_domains[i]);
	nretired = 0;
	log_debug("session %llu: stopped", (unsigned long long)s->id);
	free(s);
	return 0;
}

/*
 * In a forked child: the parent's session is not ours.  Only this thread
 * exists, so nothing is inside the sink; drop the mapping quietly.
 */
void
session_after_fork_child(void)
{
	struct agent_session *s = cur;
	struct sess_thread *t;

	/* A child is a rank of its own: its steps count from its start. */
	pthread_mutex_init(&step_lock, NULL);
	memset(sess_written, 0, sizeof(sess_written));
	step_starts = 0;
	step_last_ns = step_period_ns = 0;
	step_src = SESSION_STEPS_NONE;
	step_sync_open = 0;
	first_note_sid = 0;
	steps_after_fork_child();
	atomic_store(&sess_fp->live, NULL);
	if (atomic_load(&sess_fp->mine) == 0)
		atomic_store(&sess_fp->mine, 2);	/* set to 1 below */
	/* Slots of the parent's other threads: they do not exist here.
	 * No record waits for a call of the parent's session. */
	for (t = atomic_load(&sess_threads); t != NULL; t = t->next) {
		t->nstash = 0;
		if (t != tls_sess) {
			atomic_store(&t->in, 0);
			atomic_store(&t->used, 0);
		}
	}
	atomic_store(&sess_fp->mine, 1);
	if (s == NULL)
		return;
	api_session_set_kinds(0);
	api_session_set_sink(NULL, NULL, NULL);
	cur = NULL;
	ring_unmap(s->ring);
	close(s->wakefd);
	session_domains_free(atomic_load(&s->domains_off));
	for (size_t i = 0; i < nretired; i++)
		session_domains_free(retired_domains[i]);
	nretired = 0;
	free(s);
}

/* The fork page (see sess_forkpage): before any session can start. */
__attribute__((constructor(150))) static void
session_forkpage_init(void)
{
	struct sess_forkpage *p;
	long pg = sysconf(_SC_PAGESIZE);
	const char *v;

	if ((v = getenv("MSPTI_STEP_NAME")) != NULL && *v != '\0')
		snprintf(step_names[0], sizeof(step_names[0]), "%s", v);
	api_mstx_step_char((unsigned char)step_names[0][0]);
	p = mmap(NULL, pg > 0 ? (size_t)pg : 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
#ifdef MADV_WIPEONFORK
	if (madvise(p, pg > 0 ? (size_t)pg : 4096, MADV_WIPEONFORK) == 0) {
		atomic_store(&p->mine, 1);
		sess_fp = p;
		return;
	}
#endif
	/* Older kernels: the atfork handler alone guards the parent's ring. */
	munmap(p, pg > 0 ? (size_t)pg : 4096);
}

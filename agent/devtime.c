/*
 * Device records: the pending-launch queue, the channel reader thread,
 * the join of device tasks to host calls and the device clock model.
 *
 * Producers (interposers, any thread) push struct pending into a
 * lock-free MPSC queue (Vyukov's sequence-numbered ring); when the ring is
 * full they spill into an overflow array under dt_over_mtx, so a deep
 * device queue loses nothing.  The reader thread alone pops both into a
 * private hash map keyed by (device, stream, task) that grows with the
 * number of launches outstanding, reads each device's profiling channel
 * through the simulator's
 * npusim_channel_* helpers (found with dlsym, so a runtime without them
 * just yields no device records), joins, converts device time to host
 * CLOCK_REALTIME with lib/clocksync's fit (offset and drift over recent
 * (host, device) clock pairs, weighed by their brackets), and emits
 * through activity_emit (devrec.c fills the activity records).
 *
 * A pending entry remembers the kinds wanted when its call was made, and
 * a joined record is emitted for those kinds whatever the masks say now:
 * work launched while a kind was enabled is delivered even when the
 * device finishes it after msptiActivityDisable.  The thread sleeps on
 * dt_cond while no device kind is wanted and nothing is outstanding (no
 * CPU when idle); otherwise it polls every DEVTIME_POLL_MS, and
 * devtime_drain (FlushAll) wakes it for one synchronous pass.  Channels
 * are open while a kind is wanted or launches are outstanding: an open
 * reader makes the device record.  dt_mtx guards the thread's state and
 * the drain handshake.
 *
 * A task can run, and its record be read, before its call has queued
 * the pending entry (a synchronous copy, or any task the simulator runs
 * in the submitting thread).  So a record with no entry waits while the
 * thread that submitted it (the record's tid) is still inside that call
 * (struct dt_thread, marked by devtime_call_begin/end around every
 * interposed call that may queue device work); only once the call is
 * over, and the queue drained again up to every cell reserved by then
 * (a producer preempted between reserving a cell and publishing it hides
 * the cells after it), is it taken for a task without a launch of ours
 * and emitted alone.  No time limit decides that, and a
 * FlushAll racing a launch on another thread neither emits the record
 * unjoined nor leaves its entry behind.
 *
 * Losses are counted per kind (activity_drop): a launch whose pending
 * entry cannot be stored (memory), and a launch whose device record never
 * comes (the channel overran: tasks of one stream complete in order, so a
 * record for a later task of the stream proves the earlier one lost; or
 * it is older than DEVTIME_EXPIRE_NS).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <npusim/npusim.h>
#include <runtime/rt.h>

#include "agent.h"
#include "api.h"
#include "clocksync.h"
#include "log.h"
#include "streamorder.h"

#define DEVTIME_POLL_MS		5
#define DEVTIME_MAX_DEV		32
#define DEVTIME_QUEUE		(1u << 14)
#define DEVTIME_MAP_MIN		(1u << 12)	/* pending map slots, first */
#define DEVTIME_BATCH		256
#define DEVTIME_STREAMS		256		/* streams tracked for losses */
#define DEVTIME_STUCK_NS	30000000000ull	/* a call open this long: its
						 * record goes out alone */
#define DEVTIME_EXPIRE_NS	30000000000ull	/* stale pending entries */
#define CLOCK_EVERY_NS		10000000ull

/* Simulator helpers, all optional. */
typedef int (*chan_open_fn)(int32_t, struct npusim_channel_reader *);
typedef int (*chan_read_fn)(struct npusim_channel_reader *,
    struct npusim_record *, size_t, uint64_t *);
typedef void (*chan_close_fn)(struct npusim_channel_reader *);
typedef int (*chan_clock_fn)(struct npusim_channel_reader *,
    struct npusim_clock_sample *);
typedef aclError (*read_clock_fn)(int32_t, uint64_t *, uint64_t *);
typedef aclError (*read_pair_fn)(int32_t, uint64_t *, uint64_t *,
    uint32_t *);
typedef void (*last_task_fn)(uint32_t *, uint32_t *, int32_t *);
typedef rtError_t (*task_ids_fn)(uint32_t *, uint32_t *);
typedef rtError_t (*trace_fn)(uint64_t, uint64_t, uint16_t, rtStream_t);

static _Atomic(void *) h_open, h_read, h_close, h_clock, h_readclock,
    h_readpair, h_lasttask, h_taskids, h_trace;

/* Pending queue. */
struct qcell {
	_Atomic size_t	seq;
	struct pending	p;
};
static struct qcell *_Atomic dt_queue;
static _Atomic size_t dt_enq;
static size_t dt_deq;
static _Atomic uint64_t dt_channel_lost;
/* MSPTI_TEST_DEVTIME_PUBLISH_DELAY_MS: pushes from a thread named
 * "dt-stall" wait this long between reserving a cell and publishing it
 * (the window a preempted producer leaves open), for tests. */
static int dt_publish_delay_ms;
/* Overflow of the ring (dt_over_mtx); dt_over_len is read without it. */
static pthread_mutex_t dt_over_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct pending *dt_over;
static size_t dt_over_cap;
static _Atomic size_t dt_over_len;
/* Pending entries queued and not yet joined, expired or counted lost. */
static _Atomic size_t dt_outstanding;

/* Thread state. */
static pthread_mutex_t dt_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dt_cond;
static pthread_once_t dt_once = PTHREAD_ONCE_INIT;
static bool dt_started;
static uint64_t dt_drain_req, dt_drain_done;
static API_HOT _Atomic uint32_t dt_devices;	/* bit per device seen */
/* Guards devs[].open/r and the channel calls; no user code runs under it. */
static pthread_mutex_t dt_chan_mtx = PTHREAD_MUTEX_INITIALIZER;

static API_TLS uint32_t tls_last_stream = 0xffffffffu;
static API_TLS uint32_t tls_last_task = 0xffffffffu;
static API_TLS uint32_t tls_last_device = 0xffffffffu;

/*
 * A thread that made an interposed call which may queue device work: one
 * per thread, kept for the life of the process and reused once its
 * thread has exited (tid 0).  Only the owner writes depth (calls nested
 * in callbacks) and ended (outermost calls finished), with release
 * stores after the call's pending entry is queued; the reader loads them
 * after the record, which the runtime published after depth was raised.
 */
struct dt_thread {
	_Atomic uint32_t	 tid;
	_Atomic uint32_t	 depth;
	_Atomic uint64_t	 ended;
	_Atomic int		 used;
	struct dt_thread	*next;
} __attribute__((aligned(64)));
static struct dt_thread *_Atomic dt_threads;
static API_TLS struct dt_thread *tls_dt;
static pthread_key_t dt_thread_key;
static pthread_once_t dt_thread_once = PTHREAD_ONCE_INIT;
static bool dt_thread_key_ok;

/* Channel state (dt_chan_mtx) then reader-private state. */
struct dev_state {
	bool				 open;
	struct npusim_channel_reader	 r;
	/* The device clock's model (lib/clocksync: pairs weighed by their
	 * brackets, a bad read left out) and when its last pair was taken. */
	struct clocksync		 cs;
	uint64_t			 last_sample;
	/* A stream's tasks never overlap in host time (reader only). */
	struct streamorder		 order;
};
static struct dev_state devs[DEVTIME_MAX_DEV];

/* Open addressing; kind 0 marks a free slot.  Reader only. */
static struct pending *dt_map;
static size_t dt_map_cap, dt_map_used;
static uint64_t dt_last_expire;

/* A record waiting for its pending entry, and what was seen of the
 * thread that submitted it (call_open). */
struct deferred {
	struct npusim_record	 rec;
	uint64_t		 start, end;	/* host ns (read_times) */
	uint64_t		 since;
	struct dt_thread	*t;
	uint64_t		 ended0;
	bool			 over;	/* its call is known to be over */
	size_t			 need;	/* then: dt_enq, every cell reserved
					 * before it must be popped first */
};
static struct deferred *dt_defer;
static size_t dt_ndefer, dt_defer_cap;

/* Highest task seen per stream, to tell a lost record (reader only). */
static struct {
	uint32_t	dev, stream, high;
	bool		set;
} dt_high[DEVTIME_STREAMS];
static uint64_t dt_lost_at;	/* host ns of the last channel loss */

static struct npusim_record dt_batch[DEVTIME_BATCH];

bool
devtime_available(void)
{
	return api_optional(&h_open, "npusim_channel_open") != NULL &&
	    api_optional(&h_read, "npusim_channel_read") != NULL &&
	    api_optional(&h_close, "npusim_channel_close") != NULL;
}

static struct qcell *
devtime_queue(void)
{
	struct qcell *q = atomic_load_explicit(&dt_queue, memory_order_acquire),
	    *none = NULL;
	char v[16];
	size_t i;

	if (API_LIKELY(q != NULL))
		return q;
	if (env_get("MSPTI_TEST_DEVTIME_PUBLISH_DELAY_MS", v, sizeof(v)))
		dt_publish_delay_ms = atoi(v) > 0 && atoi(v) < 60000 ?
		    atoi(v) : 0;
	q = malloc(DEVTIME_QUEUE * sizeof(*q));
	if (q == NULL)
		return NULL;
	for (i = 0; i < DEVTIME_QUEUE; i++)
		atomic_init(&q[i].seq, i);
	if (!atomic_compare_exchange_strong(&dt_queue, &none, q)) {
		free(q);
		q = none;
	}
	return q;
}

/* ---- threads inside a call (see struct dt_thread) ---- */

static void
dt_thread_exit(void *arg)
{
	struct dt_thread *t = arg;

	if (tls_dt == t)
		tls_dt = NULL;
	atomic_store_explicit(&t->depth, 0, memory_order_relaxed);
	atomic_store_explicit(&t->tid, 0, memory_order_release);
	atomic_store_explicit(&t->used, 0, memory_order_release);
}

static void
dt_thread_once_init(void)
{
	dt_thread_key_ok = pthread_key_create(&dt_thread_key,
	    dt_thread_exit) == 0;
}

/* The calling thread's slot, claimed or allocated on its first call. */
static struct dt_thread *
dt_thread_get(void)
{
	struct dt_thread *t, *head;
	int zero;

	pthread_once(&dt_thread_once, dt_thread_once_init);
	for (t = atomic_load(&dt_threads); t != NULL; t = t->next) {
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
		head = atomic_load(&dt_threads);
		do
			t->next = head;
		while (!atomic_compare_exchange_weak(&dt_threads, &head, t));
	}
	atomic_store_explicit(&t->depth, 0, memory_order_relaxed);
	atomic_store_explicit(&t->tid, api_tid(), memory_order_release);
	if (dt_thread_key_ok)
		(void)pthread_setspecific(dt_thread_key, t);
	tls_dt = t;
	return t;
}

bool
devtime_call_begin(void)
{
	struct dt_thread *t = tls_dt;

	if (API_UNLIKELY(t == NULL) && (t = dt_thread_get()) == NULL)
		return false;
	/* Ordered before the task's record by the runtime's own release
	 * (the channel stamp, or the stream lock for its worker). */
	atomic_store_explicit(&t->depth, atomic_load_explicit(&t->depth,
	    memory_order_relaxed) + 1, memory_order_relaxed);
	return true;
}

void
devtime_call_end(void)
{
	struct dt_thread *t = tls_dt;
	uint32_t d;

	if (API_UNLIKELY(t == NULL))
		return;		/* a fork in between reset the slots */
	d = atomic_load_explicit(&t->depth, memory_order_relaxed);
	if (d == 0)
		return;
	if (d == 1)
		atomic_store_explicit(&t->ended, atomic_load_explicit(
		    &t->ended, memory_order_relaxed) + 1, memory_order_release);
	atomic_store_explicit(&t->depth, d - 1, memory_order_release);
}

/* Counts a launch lost for every kind it was wanted for. */
static void
pending_drop(const struct pending *p)
{
	uint32_t k;

	for (k = 1; k < MSPTI_ACTIVITY_KIND_COUNT; k++)
		if (p->kinds & (1u << k))
			activity_drop(k, 1);
}

/* The ring is full (the reader is behind a deep device queue): keep the
 * entry in the overflow array. */
static bool
overflow_push(const struct pending *p)
{
	struct pending *n;
	size_t len, cap;

	pthread_mutex_lock(&dt_over_mtx);
	len = atomic_load_explicit(&dt_over_len, memory_order_relaxed);
	if (len == dt_over_cap) {
		cap = dt_over_cap ? dt_over_cap * 2 : DEVTIME_QUEUE;
		n = realloc(dt_over, cap * sizeof(*n));
		if (n == NULL) {
			pthread_mutex_unlock(&dt_over_mtx);
			return false;
		}
		dt_over = n;
		dt_over_cap = cap;
	}
	dt_over[len] = *p;
	atomic_store_explicit(&dt_over_len, len + 1, memory_order_release);
	pthread_mutex_unlock(&dt_over_mtx);
	return true;
}

static void
publish_delay(void)
{
	char name[16];
	struct timespec ts;

	if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0 ||
	    strcmp(name, "dt-stall") != 0)
		return;
	ts.tv_sec = dt_publish_delay_ms / 1000;
	ts.tv_nsec = (long)(dt_publish_delay_ms % 1000) * 1000000;
	nanosleep(&ts, NULL);
}

static bool
queue_push(const struct pending *p)
{
	struct qcell *q = devtime_queue(), *c;
	size_t pos, seq;
	intptr_t dif;

	if (q == NULL)
		return false;
	pos = atomic_load_explicit(&dt_enq, memory_order_relaxed);
	for (;;) {
		c = &q[pos & (DEVTIME_QUEUE - 1)];
		seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		dif = (intptr_t)seq - (intptr_t)pos;
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&dt_enq, &pos,
			    pos + 1, memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (dif < 0)
			return overflow_push(p);
		else
			pos = atomic_load_explicit(&dt_enq,
			    memory_order_relaxed);
	}
	if (API_UNLIKELY(dt_publish_delay_ms != 0))
		publish_delay();
	c->p = *p;
	atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
	return true;
}

static bool
queue_pop(struct pending *out)
{
	struct qcell *q = atomic_load_explicit(&dt_queue, memory_order_acquire),
	    *c;

	if (q == NULL)
		return false;
	c = &q[dt_deq & (DEVTIME_QUEUE - 1)];
	if (atomic_load_explicit(&c->seq, memory_order_acquire) != dt_deq + 1)
		return false;
	*out = c->p;
	atomic_store_explicit(&c->seq, dt_deq + DEVTIME_QUEUE,
	    memory_order_release);
	dt_deq++;
	return true;
}

/* Queues p for the in-process join; false when no device record can
 * come (no channel helpers).  An entry that cannot be stored is counted
 * lost (true: no host-timed record stands in for it). */
static bool
devtime_enqueue(const struct pending *p)
{
	if (!devtime_available())
		return false;
	atomic_fetch_add(&dt_outstanding, 1);
	if (queue_push(p))
		return true;
	atomic_fetch_sub(&dt_outstanding, 1);
	pending_drop(p);
	return true;
}

/* The ids of the calling thread's last queued task and its device: from
 * the simulator in one call when it says (npusimLastTask), else from
 * rtGetTaskIdAndStreamID and a lookup of the call's stream.  False when
 * the runtime cannot tell. */
static bool
devtime_last_task(struct pending *p, uint32_t *task, uint32_t *stream,
    uint32_t *dev)
{
	last_task_fn lt = (last_task_fn)api_optional(&h_lasttask,
	    "npusimLastTask");
	task_ids_fn ids;
	int32_t d = -1;

	if (lt != NULL) {
		lt(task, stream, &d);
		if (*task == NPUSIM_ID_NONE || d < 0)
			return false;
		*dev = (uint32_t)d;
		devtime_note_device(*dev);
		return true;
	}
	ids = (task_ids_fn)api_internal(&h_taskids, "rtGetTaskIdAndStreamID");
	if (ids == NULL || ids(task, stream) != RT_ERROR_NONE ||
	    *task == NPUSIM_ID_NONE)
		return false;
	*dev = icall_stream_device(p->handle);
	return true;
}

unsigned
devtime_submit(struct pending *p)
{
	uint32_t task, stream, dev, kinds = 1u << p->kind, api, sess;
	unsigned host = 0;

	if (p->kind == MSPTI_ACTIVITY_KIND_HCCL)
		kinds |= 1u << MSPTI_ACTIVITY_KIND_COMMUNICATION;
	/* The in-process join only for a call marked at its start: one
	 * begun before the kinds were enabled could have its device record
	 * read, and emitted alone, before this entry is queued. */
	api = p->in_call ? api_kinds_api() & kinds : 0;
	sess = api_kinds_session() & kinds;
	if (api != 0)
		host |= DEVTIME_HOST_API;
	if (sess != 0)
		host |= DEVTIME_HOST_SESSION;
	if (!devtime_last_task(p, &task, &stream, &dev) ||
	    /* Same ids as last time: the call queued no task of its own.
	     * The device too: stream ids are per device, and a thread may
	     * use two. */
	    (task == tls_last_task && stream == tls_last_stream &&
	    dev == tls_last_device)) {
		/* Host-timed records say the call's stream's device. */
		p->device = icall_stream_device(p->handle);
		return host;
	}
	tls_last_task = task;
	tls_last_stream = stream;
	tls_last_device = dev;
	p->device = dev;
	p->task = task;
	p->stream = stream;
	/* Two independent consumers: a daemon session joins device timing
	 * in msptid from the launch record; the in-process API joins here. */
	if (sess != 0 && session_launch(p))
		host &= ~DEVTIME_HOST_SESSION;
	p->kinds = api;
	if (api != 0 && devtime_enqueue(p))
		host &= ~DEVTIME_HOST_API;
	return host;
}

bool
devtime_marker(uint64_t id, uint16_t flag, void *stream)
{
	trace_fn trace = (trace_fn)api_internal(&h_trace, "rtProfilerTraceEx");
	task_ids_fn ids;
	uint32_t task, sid, dev;
	bool in;

	if (trace == NULL || !devtime_available())
		return false;
	dev = icall_stream_device(stream);	/* notes the device */
	/* The marker task may run before its entry is queued (see top). */
	in = devtime_call_begin();
	if (trace(id, 0, flag, stream) != RT_ERROR_NONE) {
		if (in)
			devtime_call_end();
		return false;
	}
	/* Keep the launch dedup in step with the marker task we queued. */
	ids = (task_ids_fn)api_internal(&h_taskids, "rtGetTaskIdAndStreamID");
	if (ids != NULL && ids(&task, &sid) == RT_ERROR_NONE) {
		tls_last_task = task;
		tls_last_stream = sid;
		tls_last_device = dev;
		/* The in-process join delivers it even after a Disable. */
		if (api_kinds_api() & (1u << MSPTI_ACTIVITY_KIND_MARKER)) {
			struct pending p;

			memset(&p, 0, sizeof(p));
			p.kind = MSPTI_ACTIVITY_KIND_MARKER;
			p.kinds = 1u << MSPTI_ACTIVITY_KIND_MARKER;
			p.device = dev;
			p.stream = sid;
			p.task = task;
			p.corr = id;
			p.start = p.end = api_now();
			devtime_enqueue(&p);
		}
	}
	if (in)
		devtime_call_end();
	return true;
}

static void
devtime_cond_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&dt_cond, &a);
	pthread_condattr_destroy(&a);
}

/*
 * In a forked child the reader thread is gone: without this, FlushAll
 * would wait its full timeout for it on every call, and a lock it held at
 * fork would never be released.  The next kick starts a new reader.  The
 * parent's channel readers are forgotten, not closed (their enable counts
 * are the parent's), and so are its pending launches (a producer may have
 * been between its reservation and its publication).
 */
static void
devtime_atfork_child(void)
{
	struct qcell *q = atomic_load(&dt_queue);
	uint32_t dev;
	size_t i;

	pthread_mutex_init(&dt_mtx, NULL);
	pthread_mutex_init(&dt_chan_mtx, NULL);
	devtime_cond_init();
	pthread_mutex_init(&dt_over_mtx, NULL);
	/* Only the forking thread lives on: it keeps its slot (its thread
	 * key names it), under its new tid. */
	for (struct dt_thread *t = atomic_load(&dt_threads); t != NULL;
	    t = t->next) {
		atomic_store(&t->depth, 0);
		if (t == tls_dt)
			atomic_store(&t->tid, (uint32_t)syscall(SYS_gettid));
		else {
			atomic_store(&t->tid, 0);
			atomic_store(&t->used, 0);
		}
	}
	tls_last_task = tls_last_stream = tls_last_device = 0xffffffffu;
	dt_started = false;
	dt_drain_req = dt_drain_done = 0;
	/* The parent's launches are its own: none is delivered here. */
	free(dt_map);
	dt_map = NULL;
	dt_map_cap = dt_map_used = 0;
	free(dt_defer);
	dt_defer = NULL;
	dt_ndefer = dt_defer_cap = 0;
	atomic_store(&dt_over_len, 0);
	atomic_store(&dt_outstanding, 0);
	memset(dt_high, 0, sizeof(dt_high));
	dt_lost_at = 0;
	for (dev = 0; dev < DEVTIME_MAX_DEV; dev++) {
		devs[dev].open = false;
		clocksync_init(&devs[dev].cs);
		streamorder_init(&devs[dev].order);
	}
	if (q != NULL) {
		for (i = 0; i < DEVTIME_QUEUE; i++)
			atomic_store_explicit(&q[i].seq, i,
			    memory_order_relaxed);
		atomic_store(&dt_enq, 0);
		dt_deq = 0;
	}
}

static void
devtime_init_once(void)
{
	devtime_cond_init();
	pthread_atfork(NULL, NULL, devtime_atfork_child);
}

static void *devtime_main(void *);

/* Opens the channel of every device seen so far.  Called under
 * dt_chan_mtx, on the enabling thread too, so that tasks completing right
 * after msptiActivityEnable are already recorded by the device. */
static void
devtime_open_locked(void)
{
	chan_open_fn copen = (chan_open_fn)api_optional(&h_open,
	    "npusim_channel_open");
	uint32_t mask = atomic_load(&dt_devices), dev;

	for (dev = 0; dev < DEVTIME_MAX_DEV; dev++) {
		struct dev_state *d = &devs[dev];

		if (!(mask & (1u << dev)) || d->open)
			continue;
		memset(&d->r, 0, sizeof(d->r));
		if (copen((int32_t)dev, &d->r) == 0)
			d->open = true;
	}
}

/* Starts the reader on first need; wakes it so it sees new masks. */
void
devtime_kick(void)
{
	bool want = (api_kinds_api() & API_DEVICE_KINDS) != 0;

	if (!want && !dt_started && atomic_load(&dt_outstanding) == 0)
		return;
	if (!devtime_available())
		return;
	pthread_once(&dt_once, devtime_init_once);
	if (want) {
		pthread_mutex_lock(&dt_chan_mtx);
		devtime_open_locked();
		pthread_mutex_unlock(&dt_chan_mtx);
	}
	pthread_mutex_lock(&dt_mtx);
	if (!dt_started && api_thread_start(devtime_main, NULL) == 0)
		dt_started = true;
	pthread_cond_broadcast(&dt_cond);
	pthread_mutex_unlock(&dt_mtx);
}

void
devtime_note_device(uint32_t dev)
{
	uint32_t bit;

	if (dev >= DEVTIME_MAX_DEV)
		return;
	bit = 1u << dev;
	if (atomic_load_explicit(&dt_devices, memory_order_relaxed) & bit)
		return;
	atomic_fetch_or(&dt_devices, bit);
	register_note_device(dev);
	devtime_kick();
}

static void
timespec_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* Waits (bounded) until the reader has done a full pass that started after
 * this call, so device work completed before FlushAll is delivered. */
void
devtime_drain(void)
{
	struct timespec ts;
	uint64_t mine;

	if (!dt_started || ((api_kinds_api() & API_DEVICE_KINDS) == 0 &&
	    atomic_load(&dt_outstanding) == 0))
		return;
	timespec_after(&ts, 1000000000ull);
	pthread_mutex_lock(&dt_mtx);
	mine = ++dt_drain_req;
	pthread_cond_broadcast(&dt_cond);
	while (dt_drain_done < mine)
		if (pthread_cond_timedwait(&dt_cond, &dt_mtx, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&dt_mtx);
}

/* ---- clock model ---- */

/* One clock pair into d's model: with its bracket from the simulator
 * when it says, else from npusimReadClock or the channel header. */
static void
clock_sample(uint32_t dev, struct dev_state *d, bool force)
{
	read_pair_fn rp = (read_pair_fn)api_optional(&h_readpair,
	    "npusimReadClockPair");
	read_clock_fn rc = (read_clock_fn)api_optional(&h_readclock,
	    "npusimReadClock");
	chan_clock_fn cc = (chan_clock_fn)api_optional(&h_clock,
	    "npusim_channel_clock");
	struct npusim_clock_sample s;
	uint64_t h = 0, dv = 0, now = api_now();
	uint32_t br = 0;

	if (!force && clocksync_ready(&d->cs) &&
	    now - d->last_sample < CLOCK_EVERY_NS)
		return;
	if (rp != NULL && rp((int32_t)dev, &h, &dv, &br) == ACL_SUCCESS)
		;
	else if (rc != NULL && rc((int32_t)dev, &h, &dv) == ACL_SUCCESS)
		br = 0;
	else if (cc != NULL && d->open && cc(&d->r, &s) == 0) {
		h = s.host_realtime_ns;
		dv = s.device_ns;
		br = 0;
	} else
		return;
	d->last_sample = now;
	(void)clocksync_add(&d->cs, h, dv, br);
}

uint64_t
devtime_to_host(uint32_t dev, uint64_t device_ns)
{
	if (dev >= DEVTIME_MAX_DEV)
		return device_ns;
	return clock_model_to_host(&devs[dev].cs.model, device_ns);
}

/* ---- pending map (reader only) ---- */

static size_t
map_hash(uint32_t dev, uint32_t stream, uint32_t task)
{
	uint64_t k = ((uint64_t)stream << 32 | task) ^ ((uint64_t)dev << 56);

	k ^= k >> 31;
	k *= 0x9e3779b97f4a7c15ull;
	k ^= k >> 29;
	return (size_t)k & (dt_map_cap - 1);
}

static bool
map_same(const struct pending *e, uint32_t dev, uint32_t stream,
    uint32_t task)
{
	return e->kind != 0 && e->device == dev && e->stream == stream &&
	    e->task == task;
}

/* Inserts without growing; the table has a free slot. */
static void
map_insert(const struct pending *p)
{
	size_t i = map_hash(p->device, p->stream, p->task);

	while (dt_map[i].kind != 0) {
		if (map_same(&dt_map[i], p->device, p->stream, p->task)) {
			/* Task id reused: the older launch never came. */
			pending_drop(&dt_map[i]);
			atomic_fetch_sub(&dt_outstanding, 1);
			dt_map[i] = *p;
			return;
		}
		i = (i + 1) & (dt_map_cap - 1);
	}
	dt_map[i] = *p;
	dt_map_used++;
}

/* Doubles the table (at most 3/4 full); false when memory ran out. */
static bool
map_grow(void)
{
	struct pending *old = dt_map;
	size_t ocap = dt_map_cap, cap = ocap ? ocap * 2 : DEVTIME_MAP_MIN, i;

	dt_map = calloc(cap, sizeof(*dt_map));
	if (dt_map == NULL) {
		dt_map = old;
		return false;
	}
	dt_map_cap = cap;
	dt_map_used = 0;
	for (i = 0; i < ocap; i++)
		if (old[i].kind != 0)
			map_insert(&old[i]);
	free(old);
	return true;
}

static void
map_put(const struct pending *p)
{
	if ((dt_map_used + 1) * 4 > dt_map_cap * 3 && !map_grow() &&
	    dt_map_used + 1 >= dt_map_cap) {
		pending_drop(p);
		atomic_fetch_sub(&dt_outstanding, 1);
		return;
	}
	map_insert(p);
}

/* Removes slot i (backward-shift deletion keeps probing hole-free). */
static void
map_remove_at(size_t i)
{
	size_t j = i, k, mask = dt_map_cap - 1;

	dt_map[i].kind = 0;
	dt_map_used--;
	atomic_fetch_sub(&dt_outstanding, 1);
	for (;;) {
		j = (j + 1) & mask;
		if (dt_map[j].kind == 0)
			break;
		k = map_hash(dt_map[j].device, dt_map[j].stream,
		    dt_map[j].task);
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			dt_map[i] = dt_map[j];
			dt_map[j].kind = 0;
			i = j;
		}
	}
}

static bool
map_take(uint32_t dev, uint32_t stream, uint32_t task, struct pending *out)
{
	size_t i;

	if (dt_map_used == 0)
		return false;
	for (i = map_hash(dev, stream, task); dt_map[i].kind != 0;
	    i = (i + 1) & (dt_map_cap - 1))
		if (map_same(&dt_map[i], dev, stream, task)) {
			*out = dt_map[i];
			map_remove_at(i);
			return true;
		}
	return false;
}

/* The highest task seen on (dev, stream), NULL if untracked. */
static uint32_t *
stream_high(uint32_t dev, uint32_t stream, bool add)
{
	size_t i;

	for (i = 0; i < DEVTIME_STREAMS && dt_high[i].set; i++)
		if (dt_high[i].dev == dev && dt_high[i].stream == stream)
			return &dt_high[i].high;
	if (!add || i == DEVTIME_STREAMS)
		return NULL;
	dt_high[i].set = true;
	dt_high[i].dev = dev;
	dt_high[i].stream = stream;
	dt_high[i].high = 0;
	return &dt_high[i].high;
}

static void
stream_saw(uint32_t dev, uint32_t stream, uint32_t task)
{
	uint32_t *h = stream_high(dev, stream, true);

	if (h != NULL && (int32_t)(task - *h) > 0)
		*h = task;
}

/*
 * Counts and forgets the entries whose device record cannot come any
 * more: after a channel loss, those behind a later record of their
 * stream; always, those older than DEVTIME_EXPIRE_NS.  Runs at most once
 * a second, or each pass for a while after a loss.
 */
static void
map_expire(uint64_t now)
{
	bool after_loss = dt_lost_at != 0 && now - dt_lost_at < 2000000000ull;
	uint32_t *h;
	size_t i;

	if (dt_map_used == 0 || (!after_loss &&
	    now - dt_last_expire < 1000000000ull))
		return;
	dt_last_expire = now;
	for (i = 0; i < dt_map_cap; i++)
		while (dt_map[i].kind != 0) {
			const struct pending *e = &dt_map[i];

			h = after_loss ? stream_high(e->device, e->stream,
			    false) : NULL;
			/* Signed: entries may be newer than now. */
			if ((int64_t)(now - e->start) <=
			    (int64_t)DEVTIME_EXPIRE_NS &&
			    (h == NULL || (int32_t)(*h - e->task) <= 0))
				break;
			pending_drop(e);
			map_remove_at(i);
		}
}

/* Pops the ring and the overflow array into the map. */
static void
queue_drain(void)
{
	struct pending p, *over;
	size_t n, i;

	while (queue_pop(&p))
		map_put(&p);
	if (atomic_load_explicit(&dt_over_len, memory_order_acquire) == 0)
		return;
	pthread_mutex_lock(&dt_over_mtx);
	over = dt_over;
	n = atomic_load(&dt_over_len);
	dt_over = NULL;
	dt_over_cap = 0;
	atomic_store(&dt_over_len, 0);
	pthread_mutex_unlock(&dt_over_mtx);
	for (i = 0; i < n; i++)
		map_put(&over[i]);
	free(over);
}

/* ---- emitting (the records themselves: devrec.c) ---- */

/*
 * Host times of a record just read from its channel, in channel order:
 * converted with the model of now, then kept in its stream's order
 * (lib/streamorder, the rule msptid's collector applies too).
 */
static void
read_times(const struct npusim_record *rec, uint64_t *start, uint64_t *end)
{
	uint32_t dev = (uint32_t)rec->device;

	*start = devtime_to_host(dev, rec->start_ns);
	*end = devtime_to_host(dev, rec->end_ns);
	if (dev < DEVTIME_MAX_DEV)
		streamorder_apply(&devs[dev].order, (uint32_t)rec->pid,
		    rec->stream_id, rec->start_ns, rec->end_ns, start, end);
	else if (*end < *start)
		*end = *start;
}

static bool
rec_needs_join(const struct npusim_record *rec)
{
	return rec->kind == NPUSIM_TASK_KERNEL || rec->kind == NPUSIM_TASK_MEMCPY ||
	    rec->kind == NPUSIM_TASK_MEMSET || rec->kind == NPUSIM_TASK_COMM ||
	    rec->kind == NPUSIM_TASK_MARKER;
}

/* The slot of the live thread tid, or NULL. */
static struct dt_thread *
dt_thread_find(uint32_t tid)
{
	struct dt_thread *t;

	for (t = atomic_load_explicit(&dt_threads, memory_order_acquire);
	    t != NULL; t = t->next)
		if (atomic_load_explicit(&t->tid, memory_order_acquire) == tid)
			return t;
	return NULL;
}

/*
 * Whether the call that submitted d's task may still queue its pending
 * entry: its thread is inside the call it was in when the record was
 * first seen (the first look notes ended).  A thread with no slot, or
 * out of every call, has queued whatever it was going to; the release
 * stores of devtime_call_end make that entry visible to the next
 * queue_drain.
 */
static bool
call_open(struct deferred *d)
{
	uint32_t tid = (uint32_t)d->rec.tid;
	struct dt_thread *t = d->t;
	uint64_t e;

	if (t != NULL &&
	    atomic_load_explicit(&t->tid, memory_order_acquire) != tid)
		return false;		/* the thread has exited since */
	if (t == NULL && (t = dt_thread_find(tid)) == NULL)
		return false;
	if (atomic_load_explicit(&t->depth, memory_order_acquire) == 0)
		return false;
	e = atomic_load_explicit(&t->ended, memory_order_acquire);
	if (d->t == NULL) {
		d->t = t;
		d->ended0 = e;
		return true;
	}
	return e == d->ended0;
}

/*
 * Emits d's record joined to its pending entry, or alone once no entry
 * can come any more (call_open; DEVTIME_STUCK_NS bounds a call that never
 * returns); returns false to keep it for a later pass.  Alone it gets the
 * kinds wanted now: a task launched while none of them was on is not a
 * loss.
 */
static bool
try_emit(struct deferred *d, uint64_t now)
{
	const struct npusim_record *rec = &d->rec;
	struct pending p;

	if (!rec_needs_join(rec)) {
		devrec_emit(rec, NULL, d->start, d->end);
		return true;
	}
	if (map_take((uint32_t)rec->device, rec->stream_id, rec->task_id, &p)) {
		devrec_emit(rec, &p, d->start, d->end);
		return true;
	}
	if (!d->over) {
		if (call_open(d) && now - d->since < DEVTIME_STUCK_NS)
			return false;
		/*
		 * The call is over: its entry, if any, has a reserved cell
		 * below dt_enq now (the reservation came before the release
		 * that call_open acquired).  The ring pops in order, so a
		 * producer still between reserving an earlier cell and
		 * publishing it hides the entry; wait for it to publish.
		 */
		d->over = true;
		d->need = atomic_load_explicit(&dt_enq, memory_order_acquire);
	}
	queue_drain();
	if (map_take((uint32_t)rec->device, rec->stream_id, rec->task_id, &p)) {
		devrec_emit(rec, &p, d->start, d->end);
		return true;
	}
	if ((intptr_t)(d->need - dt_deq) > 0 &&
	    now - d->since < DEVTIME_STUCK_NS)
		return false;
	devrec_emit(rec, NULL, d->start, d->end);
	return true;
}

/* Keeps d for a later pass (its pending entry is not in yet). */
static void
defer_add(const struct deferred *d)
{
	struct deferred *n;
	size_t cap;

	if (dt_ndefer == dt_defer_cap) {
		cap = dt_defer_cap ? dt_defer_cap * 2 : 1024;
		n = realloc(dt_defer, cap * sizeof(*n));
		if (n == NULL) {
			/* Delivered, if without its call. */
			devrec_emit(&d->rec, NULL, d->start, d->end);
			return;
		}
		dt_defer = n;
		dt_defer_cap = cap;
	}
	dt_defer[dt_ndefer++] = *d;
}

/* Retries what waited for its host side. */
static void
defer_retry(uint64_t now)
{
	size_t i, k;

	for (i = 0, k = 0; i < dt_ndefer; i++)
		if (!try_emit(&dt_defer[i], now))
			dt_defer[k++] = dt_defer[i];
	dt_ndefer = k;
}

/* One pass: pending queue into the map, channels into records.  A
 * draining pass (FlushAll) samples the clock first; a record whose call
 * is still open on another thread waits for it (a flush delivers the
 * work of the calls that returned before it). */
static void
devtime_pass(bool draining)
{
	struct deferred w;
	chan_read_fn cread = (chan_read_fn)api_optional(&h_read,
	    "npusim_channel_read");
	uint32_t mask = atomic_load(&dt_devices), dev, pid = api_pid();
	uint64_t now = api_now(), lost;
	size_t i;
	int n;

	queue_drain();
	defer_retry(now);
	for (dev = 0; dev < DEVTIME_MAX_DEV; dev++) {
		struct dev_state *d = &devs[dev];

		if (!(mask & (1u << dev)))
			continue;
		for (;;) {
			pthread_mutex_lock(&dt_chan_mtx);
			devtime_open_locked();
			if (!d->open) {
				pthread_mutex_unlock(&dt_chan_mtx);
				break;
			}
			clock_sample(dev, d, draining);
			lost = 0;
			n = cread(&d->r, dt_batch, DEVTIME_BATCH, &lost);
			pthread_mutex_unlock(&dt_chan_mtx);
			if (lost != 0) {
				/* Counted per kind by map_expire. */
				log_debug("device %u channel overran: %llu "
				    "records lost (%llu in all)", dev,
				    (unsigned long long)lost,
				    (unsigned long long)(atomic_fetch_add(
				    &dt_channel_lost, lost) + lost));
				dt_lost_at = now;
			}
			if (n <= 0)
				break;
			for (i = 0; i < (size_t)n; i++) {
				if ((uint32_t)dt_batch[i].pid != pid)
					continue;
				if (rec_needs_join(&dt_batch[i]))
					stream_saw((uint32_t)dt_batch[i].device,
					    dt_batch[i].stream_id,
					    dt_batch[i].task_id);
				w.rec = dt_batch[i];
				read_times(&w.rec, &w.start, &w.end);
				w.since = now;
				w.t = NULL;
				w.ended0 = 0;
				w.over = false;
				w.need = 0;
				if (!try_emit(&w, now))
					defer_add(&w);
			}
			if (n < DEVTIME_BATCH)
				break;
		}
	}
	/* Retry what waited for its host side. */
	queue_drain();
	defer_retry(now);
	map_expire(now);
}

static void
devtime_close_all(void)
{
	chan_close_fn cclose = (chan_close_fn)api_optional(&h_close,
	    "npusim_channel_close");
	uint32_t dev;

	pthread_mutex_lock(&dt_chan_mtx);
	for (dev = 0; dev < DEVTIME_MAX_DEV; dev++)
		if (devs[dev].open) {
			cclose(&devs[dev].r);
			devs[dev].open = false;
			clocksync_init(&devs[dev].cs);
		}
	pthread_mutex_unlock(&dt_chan_mtx);
}

/* Whether the reader has work: a device kind wanted, or launches made
 * while one was still to be joined. */
static bool
devtime_active(void)
{
	return (api_kinds_api() & API_DEVICE_KINDS) != 0 ||
	    atomic_load(&dt_outstanding) != 0 || dt_ndefer != 0;
}

static void *
devtime_main(void *arg)
{
	struct timespec ts;
	uint64_t req;

	pthread_mutex_lock(&dt_mtx);
	for (;;) {
		req = dt_drain_req;
		if (!devtime_active()) {
			pthread_mutex_unlock(&dt_mtx);
			devtime_close_all();
			pthread_mutex_lock(&dt_mtx);
			dt_drain_done = req;
			pthread_cond_broadcast(&dt_cond);
			if (!devtime_active() && dt_drain_req == req)
				pthread_cond_wait(&dt_cond, &dt_mtx);
			continue;
		}
		pthread_mutex_unlock(&dt_mtx);
		devtime_pass(req != dt_drain_done);
		pthread_mutex_lock(&dt_mtx);
		if (req != dt_drain_done) {
			dt_drain_done = req;
			pthread_cond_broadcast(&dt_cond);
		}
		if (dt_drain_req == req) {
			timespec_after(&ts, DEVTIME_POLL_MS * 1000000ull);
			pthread_cond_timedwait(&dt_cond, &dt_mtx, &ts);
		}
	}
	return NULL;
}

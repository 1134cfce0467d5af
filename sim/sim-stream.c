/*
 * sim-stream.c - streams as in-order queues and the execution of every
 * task kind.
 *
 * Device time is the model's, on the CLOCK_MONOTONIC axis: a task starts
 * at the latest of the previous task's end on its stream, its host
 * submission, the event it waits on and (collectives) the last rank's
 * arrival, and lasts its modelled duration.  No host thread's wake-up
 * becomes device time.  A task whose execution cannot block (kernels,
 * markers, events, memset, copies into device memory) runs in the
 * submitting thread when the stream is idle (copies and sets only when
 * small); the rest, and everything
 * behind them, go to the stream's worker thread, which sleeps only
 * before a copy into host memory (so the host never sees the data before
 * the model says it arrived).  Host waits block until the work has been
 * executed, or only such a copy is left, then sleep once until its
 * modelled end (and finish the copy if the worker has not yet).
 */
#include <sys/syscall.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "util.h"

/* Copies and sets up to this size run in the submitter; larger ones on
 * the worker, so the host's real memmove never delays its next launch. */
#define SIM_STREAM_INLINE_BYTES	(64U << 10)

static __thread uint32_t	sim_stream_last_task = NPUSIM_ID_NONE;
static __thread uint32_t	sim_stream_last_stream = NPUSIM_ID_NONE;
static __thread int32_t		sim_stream_last_dev = -1;
static __thread pid_t		sim_stream_tid;

/* The process id, cached (a record carries it); a forked child
 * recomputes it. */
static pid_t		sim_stream_pid;
static pthread_once_t	sim_stream_pid_once = PTHREAD_ONCE_INIT;

/* In a forked child: its pid, and the tid of its one thread (the forking
 * thread's cached tid is its parent's). */
static void
sim_stream_pid_reset(void)
{
	__atomic_store_n(&sim_stream_pid, 0, __ATOMIC_RELAXED);
	sim_stream_tid = 0;
}

static void
sim_stream_pid_init(void)
{
	pthread_atfork(NULL, NULL, sim_stream_pid_reset);
}

static pid_t
sim_stream_getpid(void)
{
	pid_t	pid = __atomic_load_n(&sim_stream_pid, __ATOMIC_RELAXED);

	if (pid == 0) {
		pthread_once(&sim_stream_pid_once, sim_stream_pid_init);
		pid = getpid();
		__atomic_store_n(&sim_stream_pid, pid, __ATOMIC_RELAXED);
	}
	return (pid);
}

static pid_t
sim_stream_gettid(void)
{
	if (sim_stream_tid == 0) {
		pthread_once(&sim_stream_pid_once, sim_stream_pid_init);
		sim_stream_tid = (pid_t)syscall(SYS_gettid);
	}
	return (sim_stream_tid);
}

static void
sim_stream_destroy(struct sim_obj *obj)
{
	struct sim_stream	*s = (struct sim_stream *)obj;

	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->done);
	free(s);
}

/* Fill t as a new task of the given kind, stamped with the calling
 * thread. */
void
sim_stream_task_init(struct sim_task *t, int kind, const char *name)
{
	memset(t, 0, sizeof *t);
	t->kind = kind;
	t->tid = sim_stream_gettid();
	if (name != NULL)
		strncpy(t->name, name, sizeof t->name - 1);
}

/* A new heap task of the given kind. */
struct sim_task *
sim_stream_task(int kind, const char *name)
{
	struct sim_task	*t;

	if ((t = malloc(sizeof *t)) == NULL)
		return (NULL);
	sim_stream_task_init(t, kind, name);
	return (t);
}

void
sim_stream_free_task(struct sim_task *t)
{
	if (t == NULL)
		return;
	if ((t->kind == NPUSIM_TASK_EVENT || t->kind == SIM_TASK_WAIT) &&
	    t->u.event.ev != NULL)
		sim_handle_put(&t->u.event.ev->obj);
	if (t->kind == NPUSIM_TASK_COMM)
		sim_comm_release(&t->u.comm);
	if (t->kind == NPUSIM_TASK_KERNEL)
		free(t->u.kernel.args);
	free(t);
}

static uint64_t
sim_stream_max(uint64_t a, uint64_t b)
{
	return (a > b ? a : b);
}

/* A copy whose destination the host can read without the runtime. */
static int
sim_stream_to_host(const struct sim_task *t)
{
	return (t->kind == NPUSIM_TASK_MEMCPY &&
	    (t->u.memcpy.kind == ACL_MEMCPY_DEVICE_TO_HOST ||
	    t->u.memcpy.kind == ACL_MEMCPY_HOST_TO_HOST));
}

/* Can t run now, in the submitter, without blocking? */
static int
sim_stream_inline(struct sim_task *t)
{
	struct sim_event	*ev;
	int			 ready;

	switch (t->kind) {
	case NPUSIM_TASK_COMM:
		return (0);
	case NPUSIM_TASK_KERNEL:
		/* A body that really computes over much data runs on the
		 * worker, like a big copy. */
		return (t->u.kernel.ops == NULL ||
		    t->u.kernel.bytes <= SIM_STREAM_INLINE_BYTES);
	case NPUSIM_TASK_MEMCPY:
		/* A big copy would hold up the host like a real DMA does
		 * not: the worker moves the bytes meanwhile. */
		return (!sim_stream_to_host(t) &&
		    t->u.memcpy.count <= SIM_STREAM_INLINE_BYTES);
	case NPUSIM_TASK_MEMSET:
		return (t->u.memset.count <= SIM_STREAM_INLINE_BYTES);
	case SIM_TASK_WAIT:
		ev = t->u.event.ev;
		pthread_mutex_lock(&ev->lock);
		ready = ev->completed >= t->u.event.gen;
		pthread_mutex_unlock(&ev->lock);
		return (ready);
	}
	return (1);
}

/*
 * Copy a paced task's bytes and account it, once: the worker after its
 * sleep, or a host wait that passed the copy's end first.  Under the
 * stream lock, so no syncer sees the task complete with its bytes half
 * moved.
 */
static void
sim_stream_paced_finish(struct sim_stream *s, uint64_t n)
{
	struct sim_task	*t;
	int		 done = 0;

	pthread_mutex_lock(&s->lock);
	if (s->paced_n == n && n != 0) {
		/* The worker keeps a task queued while it runs it. */
		t = TAILQ_FIRST(&s->queue);
		s->paced_n = s->paced_host = 0;
		if (t->u.memcpy.count > 0)
			memmove(t->u.memcpy.dst, t->u.memcpy.src,
			    t->u.memcpy.count);
		sim_shm_task_done(s->dev, s->busy, s->paced_start, s->vtime,
		    &s->paced_rec, sim_clock_mono());
		done = 1;
	}
	pthread_mutex_unlock(&s->lock);
	if (done)
		pthread_cond_signal(&s->wake);	/* the worker, if it waits */
}

/*
 * A copy into host memory (on the worker): its bytes move at its modelled
 * end, so the host never sees them sooner.  A host wait for the stream
 * sleeps to that end and finishes the copy, paying its own wake-up only;
 * the worker waits for that (woken after it, off the host's path) or,
 * when no host waits, for the end itself, and then finishes it.
 */
static void
sim_stream_paced(struct sim_stream *s, struct npusim_record *rec,
    uint64_t start, uint64_t end)
{
	struct timespec	ts;
	uint64_t	n;

	rec->start_ns = sim_clock_device(s->dev->id, start);
	rec->end_ns = sim_clock_device(s->dev->id, end);
	ts.tv_sec = (time_t)(end / 1000000000ULL);
	ts.tv_nsec = (long)(end % 1000000000ULL);
	pthread_mutex_lock(&s->lock);
	n = s->paced_n = s->completed + 1;
	s->paced_start = start;
	s->paced_rec = *rec;
	s->vtime = end;
	pthread_cond_broadcast(&s->done);	/* a syncer may take it */
	while (s->paced_n == n) {
		if (s->paced_host == n)		/* a host wait will finish it */
			pthread_cond_wait(&s->wake, &s->lock);
		else if (sim_clock_mono() < end)
			pthread_cond_timedwait(&s->wake, &s->lock, &ts);
		else
			break;
	}
	pthread_mutex_unlock(&s->lock);
	if (sim_cfg.test_worker_lag_ms > 0)
		usleep((useconds_t)sim_cfg.test_worker_lag_ms * 1000);
	sim_stream_paced_finish(s, n);
}

/*
 * Execute one task at its modelled time; returns its error (sticky on the
 * stream).  Called by whoever owns the stream's timeline: the submitter
 * under the stream lock while the queue is empty, else the worker.
 */
static aclError
sim_stream_exec(struct sim_stream *s, struct sim_task *t, uint64_t now)
{
	struct sim_device	*d = s->dev;
	struct npusim_record	 rec;
	struct sim_event	*ev;
	uint64_t		 start, end;
	aclError		 e = ACL_SUCCESS;

	start = sim_stream_max(s->vtime, t->submit_ns);
	if (t->kind == SIM_TASK_WAIT) {
		/* Waits on the recording stream's progress, not on time. */
		ev = t->u.event.ev;
		pthread_mutex_lock(&ev->lock);
		while (ev->completed < t->u.event.gen)
			pthread_cond_wait(&ev->cond, &ev->lock);
		start = sim_stream_max(start, ev->mono_ns);
		pthread_mutex_unlock(&ev->lock);
		s->vtime = start;
		return (ACL_SUCCESS);
	}
	memset(&rec, 0, sizeof rec);
	rec.kind = (uint16_t)t->kind;
	rec.device = d->id;
	rec.stream_id = s->id;
	rec.task_id = t->task_id;
	rec.pid = (int32_t)sim_stream_getpid();
	rec.tid = (int32_t)t->tid;
	rec.peer = rec.reduce_op = NPUSIM_ID_NONE;
	memcpy(rec.name, t->name, sizeof rec.name);
	rec.name[sizeof rec.name - 1] = '\0';

	end = start + t->dur_ns;
	switch (t->kind) {
	case NPUSIM_TASK_KERNEL:
		rec.kernel_type = (uint16_t)t->u.kernel.type;
		rec.block_dim = t->u.kernel.block_dim;
		rec.flops = (uint64_t)t->u.kernel.flops;
		rec.bytes = (uint64_t)t->u.kernel.bytes;
		rec.mte_bytes = rec.bytes;
		/* 1.8 GHz cores, blockDim of them busy. */
		rec.aicore_cycles = (uint64_t)((double)t->dur_ns * 1.8) *
		    (t->u.kernel.block_dim ? t->u.kernel.block_dim : 1);
		if (t->u.kernel.ops != NULL)
			t->u.kernel.ops->run(t->u.kernel.args);
		break;
	case NPUSIM_TASK_MEMCPY:
		rec.bytes = t->u.memcpy.count;
		rec.memcpy_kind = (uint32_t)t->u.memcpy.kind;
		if (sim_stream_to_host(t)) {
			sim_stream_paced(s, &rec, start, end);
			return (ACL_SUCCESS);
		}
		if (t->u.memcpy.count > 0)
			memmove(t->u.memcpy.dst, t->u.memcpy.src,
			    t->u.memcpy.count);
		break;
	case NPUSIM_TASK_MEMSET:
		memset(t->u.memset.dst, t->u.memset.value, t->u.memset.count);
		rec.bytes = t->u.memset.count;
		break;
	case NPUSIM_TASK_MARKER:
		rec.marker_id = t->u.marker.index;
		rec.model_id = t->u.marker.model;
		rec.tag_id = t->u.marker.tag;
		break;
	case NPUSIM_TASK_COMM:
		e = sim_comm_exec(&t->u.comm, start, &rec);
		end = rec.end_ns;	/* modelled, monotonic */
		break;
	}
	s->vtime = end;
	rec.start_ns = sim_clock_device(d->id, start);
	rec.end_ns = sim_clock_device(d->id, end);
	rec.status = e != ACL_SUCCESS;
	if (t->kind == NPUSIM_TASK_EVENT) {
		ev = t->u.event.ev;
		pthread_mutex_lock(&ev->lock);
		if (t->u.event.gen > ev->completed) {
			ev->completed = t->u.event.gen;
			ev->ts_ns = rec.end_ns;
			ev->mono_ns = end;
			ev->dev = d;
		}
		pthread_cond_broadcast(&ev->cond);
		pthread_mutex_unlock(&ev->lock);
	}
	if (t->kind == NPUSIM_TASK_COMM)
		now = sim_clock_mono();	/* it took real time */
	/* Waiting for the last rank is not busy; the transfer is. */
	if (t->kind == NPUSIM_TASK_COMM && start + rec.wait_ns <= end)
		start += rec.wait_ns;
	sim_shm_task_done(d, s->busy, start, end, &rec, now);
	return (e);
}

static void *
sim_stream_main(void *arg)
{
	struct sim_stream	*s = arg;
	struct sim_task		*t;
	aclError		 e;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (TAILQ_EMPTY(&s->queue) && !s->stop)
			pthread_cond_wait(&s->wake, &s->lock);
		if ((t = TAILQ_FIRST(&s->queue)) == NULL)
			break;	/* stopping and drained */
		/* t stays queued while it runs: submitters see a busy
		 * stream and queue behind it. */
		pthread_mutex_unlock(&s->lock);
		e = sim_stream_exec(s, t, sim_clock_mono());
		pthread_mutex_lock(&s->lock);
		TAILQ_REMOVE(&s->queue, t, entry);
		if (e != ACL_SUCCESS && s->error == ACL_SUCCESS)
			s->error = e;
		s->completed++;
		if (s->completed >= s->wake_at) {
			s->wake_at = UINT64_MAX;
			pthread_cond_broadcast(&s->done);
		}
		pthread_mutex_unlock(&s->lock);
		sim_stream_free_task(t);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return (NULL);
}

/*
 * A stream id: device-wide (the metrics page's allocator) so that
 * (device, stream, task) is a key across processes, never one of this
 * process's live streams on the device (the 16-bit ids wrap on a device
 * used for long); without a metrics page, process-wide.  Caller holds
 * sim_rt.lock.
 */
static uint32_t
sim_stream_new_id(struct sim_device *d)
{
	static uint32_t		 local;
	struct sim_stream	*it;
	uint32_t		 id;
	int			 tries, busy;

	for (tries = 0; tries < 0x10000; tries++) {
		if (d->metrics != NULL)
			id = __atomic_fetch_add(&d->metrics->next_stream_id, 1,
			    __ATOMIC_RELAXED) & 0xffff;
		else
			id = local++ & 0xffff;
		busy = 0;
		LIST_FOREACH(it, &d->streams, entry)
			if (it->id == id) {
				busy = 1;
				break;
			}
		if (!busy)
			break;
	}
	return (id);
}

/* Create a stream and its worker on an open device; caller holds lock. */
struct sim_stream *
sim_stream_create(struct sim_device *d, int is_default)
{
	struct sim_stream	*s;
	pthread_condattr_t	 ca;
	sigset_t		 old;
	int			 rc;

	if ((s = calloc(1, sizeof *s)) == NULL)
		return (NULL);
	s->dev = d;
	s->is_default = is_default;
	s->id = sim_stream_new_id(d);
	s->busy = sim_shm_busy_new(d);
	pthread_mutex_init(&s->lock, NULL);
	/* The worker also waits on wake for a paced copy's modelled end. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&s->done, NULL);
	s->wake_at = UINT64_MAX;
	TAILQ_INIT(&s->queue);
	util_block_async_signals(&old);
	rc = pthread_create(&s->thread, NULL, sim_stream_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		sim_shm_busy_release(d, s->busy);
		sim_stream_destroy(&s->obj);
		return (NULL);
	}
	LIST_INSERT_HEAD(&d->streams, s, entry);
	sim_handle_add(&s->obj, SIM_MAGIC_STREAM, sim_stream_destroy);
	return (s);
}

/*
 * Drain and stop a stream, join its worker and drop the table's
 * reference.  Whoever unlinks it from the device does the work, so a
 * destroy racing aclFinalize joins once.
 */
void
sim_stream_shutdown(struct sim_stream *s)
{
	struct sim_stream	*it;
	int			 found = 0;

	pthread_mutex_lock(&sim_rt.lock);
	LIST_FOREACH(it, &s->dev->streams, entry) {
		if (it == s) {
			found = 1;
			LIST_REMOVE(s, entry);
			break;
		}
	}
	pthread_mutex_unlock(&sim_rt.lock);
	if (!found)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	/* The device finishes the stream's work before it goes. */
	sim_clock_wait_until(s->vtime);
	sim_shm_busy_flush(s->dev, s->busy);
	sim_shm_busy_release(s->dev, s->busy);
	s->busy = NULL;
	sim_handle_remove(s, SIM_MAGIC_STREAM);
}

/* A referenced stream for a handle; NULL means the default stream. */
aclError
sim_stream_resolve(aclrtStream stream, struct sim_stream **out)
{
	struct sim_device	*d;
	struct sim_stream	*s;
	int			 dev;

	sim_runtime_init();
	if (stream == NULL) {
		dev = sim_runtime_current_device();
		if (dev < 0 || (d = sim_runtime_device(dev)) == NULL) {
			sim_runtime_set_error(ACL_ERROR_RT_CONTEXT_NULL,
			    "no device set for the default stream");
			return (ACL_ERROR_RT_CONTEXT_NULL);
		}
		pthread_mutex_lock(&sim_rt.lock);
		if ((s = d->default_stream) != NULL)
			sim_handle_ref(&s->obj);
		pthread_mutex_unlock(&sim_rt.lock);
		if (s == NULL)
			return (ACL_ERROR_RT_CONTEXT_NULL);
	} else if ((s = sim_handle_get(stream, SIM_MAGIC_STREAM)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "stream %p", stream);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	*out = s;
	return (ACL_SUCCESS);
}

/*
 * Queue a task.  owned: t is the caller's heap task, which the stream
 * then owns (and may already have run and freed); else t is the caller's
 * (on its stack, holding no references) and is copied only if it must
 * wait in the queue.  Internal kinds get no task id: they have no record.
 */
static aclError
sim_stream_enqueue(struct sim_stream *s, struct sim_task *t, int owned)
{
	struct sim_task	*q;
	uint32_t	 id = NPUSIM_ID_NONE;
	int		 visible = t->kind != SIM_TASK_WAIT;

	t->submit_ns = sim_clock_mono();
	pthread_mutex_lock(&s->lock);
	if (s->stop) {
		pthread_mutex_unlock(&s->lock);
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "stream is being destroyed");
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	if (TAILQ_EMPTY(&s->queue) && sim_stream_inline(t)) {
		/* The stream is idle and t cannot block: run it here. */
		if (visible)
			t->task_id = id = s->next_task_id++;
		s->submitted++;
		sim_stream_exec(s, t, t->submit_ns);
		s->completed++;
		pthread_mutex_unlock(&s->lock);
		if (owned)
			sim_stream_free_task(t);
	} else {
		if (owned)
			q = t;
		else if ((q = malloc(sizeof *q)) != NULL)
			memcpy(q, t, sizeof *q);
		else {
			pthread_mutex_unlock(&s->lock);
			return (ACL_ERROR_RT_MEMORY_ALLOCATION);
		}
		if (visible)
			q->task_id = id = s->next_task_id++;
		s->submitted++;
		TAILQ_INSERT_TAIL(&s->queue, q, entry);
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
		/* q may be freed by now: only id is used below. */
	}
	if (visible) {
		sim_stream_last_task = id;
		sim_stream_last_stream = s->id;
		sim_stream_last_dev = s->dev->id;
		if (s->dev->metrics != NULL)
			__atomic_fetch_add(&s->dev->metrics->tasks_launched,
			    1, __ATOMIC_RELAXED);
	}
	return (ACL_SUCCESS);
}

/* Queue a heap task; on success the stream owns it. */
aclError
sim_stream_submit(struct sim_stream *s, struct sim_task *t)
{
	return (sim_stream_enqueue(s, t, 1));
}

/* Queue a task the caller keeps (a kernel on its stack: no malloc when it
 * runs at once). */
aclError
sim_stream_submit_copy(struct sim_stream *s, struct sim_task *t)
{
	return (sim_stream_enqueue(s, t, 0));
}

/*
 * Wait until everything submitted so far has been executed, or all but
 * the last, a copy into host memory waiting for its end (*paced gets its
 * number for sim_stream_paced_finish, else 0); *end gets the modelled
 * end.  Reports and clears a task error.  Does not sleep.
 */
aclError
sim_stream_drain(struct sim_stream *s, uint64_t *end, uint64_t *paced)
{
	uint64_t	target;
	aclError	e;

	pthread_mutex_lock(&s->lock);
	target = s->submitted;
	*paced = 0;
	while (s->completed < target) {
		/* All but the last ran, and the last is a copy waiting for
		 * its modelled end: the caller sleeps to it and finishes it. */
		if (s->paced_n != 0 && s->paced_n == target) {
			*paced = s->paced_host = target;
			break;
		}
		/* Woken when the last of ours ran, not at every task. */
		if (target < s->wake_at)
			s->wake_at = target;
		pthread_cond_wait(&s->done, &s->lock);
	}
	*end = s->vtime;
	e = s->error;
	s->error = ACL_SUCCESS;
	pthread_mutex_unlock(&s->lock);
	if (e != ACL_SUCCESS)
		sim_runtime_set_error(e, "a task on stream %u failed", s->id);
	return (e);
}

/* Host wait for a stream: executed, then one sleep to the modelled end. */
aclError
sim_stream_sync(struct sim_stream *s)
{
	uint64_t	end, paced;
	aclError	e;

	e = sim_stream_drain(s, &end, &paced);
	sim_shm_busy_prefetch(s->dev, s->busy);
	sim_clock_wait_until(end);
	sim_stream_paced_finish(s, paced);
	sim_shm_busy_flush(s->dev, s->busy);
	return (e);
}

aclError
sim_stream_sync_device(struct sim_device *d)
{
	struct sim_sync {
		struct sim_stream	*s;
		uint64_t		 paced;
	}			*v = NULL, *nv;
	struct sim_stream	*s;
	size_t			 n = 0, i;
	uint64_t		 end, last = 0;
	aclError		 e = ACL_SUCCESS, e1;

	pthread_mutex_lock(&sim_rt.lock);
	LIST_FOREACH(s, &d->streams, entry) {
		if ((nv = realloc(v, (n + 1) * sizeof *v)) == NULL)
			break;
		v = nv;
		sim_handle_ref(&s->obj);
		v[n++].s = s;
	}
	pthread_mutex_unlock(&sim_rt.lock);
	for (i = 0; i < n; i++) {
		if ((e1 = sim_stream_drain(v[i].s, &end, &v[i].paced)) !=
		    ACL_SUCCESS && e == 0)
			e = e1;
		last = sim_stream_max(last, end);
		sim_shm_busy_prefetch(d, v[i].s->busy);
	}
	sim_clock_wait_until(last);
	for (i = 0; i < n; i++) {
		sim_stream_paced_finish(v[i].s, v[i].paced);
		sim_shm_busy_flush(d, v[i].s->busy);
		sim_handle_put(&v[i].s->obj);
	}
	free(v);
	return (e);
}

SIM_EXPORT aclError
aclrtCreateStream(aclrtStream *stream)
{
	struct sim_device	*d;
	struct sim_stream	*s;
	int			 dev;

	sim_runtime_init();
	if (stream == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	dev = sim_runtime_current_device();
	if (dev < 0 || (d = sim_runtime_device(dev)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_CONTEXT_NULL,
		    "aclrtCreateStream: no device set");
		return (ACL_ERROR_RT_CONTEXT_NULL);
	}
	pthread_mutex_lock(&sim_rt.lock);
	s = sim_stream_create(d, 0);
	pthread_mutex_unlock(&sim_rt.lock);
	if (s == NULL)
		return (ACL_ERROR_RT_NO_STREAM_RESOURCE);
	*stream = s;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtDestroyStream(aclrtStream stream)
{
	struct sim_stream	*s;

	if (stream == NULL ||
	    (s = sim_handle_get(stream, SIM_MAGIC_STREAM)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "stream %p", stream);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	if (s->is_default) {
		sim_handle_put(&s->obj);
		return (ACL_ERROR_INVALID_PARAM);
	}
	sim_stream_shutdown(s);
	sim_handle_put(&s->obj);
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtSynchronizeStream(aclrtStream stream)
{
	struct sim_stream	*s;
	aclError		 e;

	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS)
		return (e);
	e = sim_stream_sync(s);
	sim_handle_put(&s->obj);
	return (e);
}

SIM_EXPORT aclError
aclrtSynchronizeDevice(void)
{
	struct sim_device	*d;
	int			 dev;

	sim_runtime_init();
	dev = sim_runtime_current_device();
	if (dev < 0 || (d = sim_runtime_device(dev)) == NULL)
		return (ACL_ERROR_RT_CONTEXT_NULL);
	return (sim_stream_sync_device(d));
}

SIM_EXPORT aclError
aclrtStreamGetId(aclrtStream stream, int32_t *streamId)
{
	struct sim_stream	*s;
	aclError		 e;

	if (streamId == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS)
		return (e);
	*streamId = (int32_t)s->id;
	sim_handle_put(&s->obj);
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
npusimStreamGetDevice(aclrtStream stream, int32_t *deviceId)
{
	struct sim_stream	*s;
	aclError		 e;

	if (deviceId == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS)
		return (e);
	*deviceId = s->dev->id;
	sim_handle_put(&s->obj);
	return (ACL_SUCCESS);
}

SIM_EXPORT rtError_t
rtGetTaskIdAndStreamID(uint32_t *taskId, uint32_t *streamId)
{
	if (taskId == NULL || streamId == NULL)
		return (ACL_ERROR_RT_PARAM_INVALID);
	*taskId = sim_stream_last_task;
	*streamId = sim_stream_last_stream;
	return (RT_ERROR_NONE);
}

SIM_EXPORT void
npusimLastTask(uint32_t *taskId, uint32_t *streamId, int32_t *deviceId)
{
	if (taskId != NULL)
		*taskId = sim_stream_last_task;
	if (streamId != NULL)
		*streamId = sim_stream_last_stream;
	if (deviceId != NULL)
		*deviceId = sim_stream_last_dev;
}

SIM_EXPORT rtError_t
rtProfilerTraceEx(uint64_t indexId, uint64_t modelId, uint16_t tagId,
    rtStream_t stm)
{
	struct sim_stream	*s;
	struct sim_task		*t;
	aclError		 e;

	if ((e = sim_stream_resolve(stm, &s)) != ACL_SUCCESS)
		return (e);
	if ((t = sim_stream_task(NPUSIM_TASK_MARKER, "marker")) == NULL) {
		sim_handle_put(&s->obj);
		return (ACL_ERROR_RT_MEMORY_ALLOCATION);
	}
	t->u.marker.index = indexId;
	t->u.marker.model = modelId;
	t->u.marker.tag = tagId;
	if ((e = sim_stream_submit(s, t)) != ACL_SUCCESS)
		sim_stream_free_task(t);
	sim_handle_put(&s->obj);
	return (e);
}

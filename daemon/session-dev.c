/*
 * Device collection for sessions.  The agent writes host launch records
 * (REC_F_HOST_LAUNCH with device, stream and task id) for the device
 * kinds; they go into the agent's join (lib/join).  The session references
 * the devices its agents use (devcol_use, metrics_use_device); on every
 * drain the daemon polls the channels once (devcol_poll), routes each
 * device task by pid to the sess_agent capturing it, and the join emits
 * KERNEL, MEMCPY, MEMSET, HCCL and COMMUNICATION records with host
 * CLOCK_REALTIME times (REC_F_JOINED when the launch was found).  Device
 * MARKER tasks are written directly, named after the host marker of the
 * same id.  Records the daemon builds use the agent's string namespace,
 * ids above SESS_STRINGS, so stream and ring mode treat them like the
 * agent's own.  REC_CLOCK_SYNC records (the devcol clock model per device)
 * are written when a device comes into use, every second and at stop;
 * REC_COUNTER records come from metrics_subscribe for the session's
 * devices and pids.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"
#include "util.h"
#include "record.h"
#include "ring.h"
#include "trace.h"
#include "join.h"
#include "msptid.h"
#include "devcol.h"
#include "metrics.h"

/* A host launch from an agent: a device work record with a task id. */
bool
session_dev_is_launch(const struct rec_hdr *h)
{
	if (!(h->aux & REC_F_HOST_LAUNCH))
		return false;
	switch (h->type) {
	case REC_KERNEL:
		return ((const struct rec_kernel *)h)->task_id != REC_NONE;
	case REC_MEMCPY:
		return ((const struct rec_memcpy *)h)->task_id != REC_NONE;
	case REC_MEMSET:
		return ((const struct rec_memset *)h)->task_id != REC_NONE;
	case REC_HCCL:
		return ((const struct rec_hccl *)h)->task_id != REC_NONE;
	case REC_COMMUNICATION:
		return ((const struct rec_communication *)h)->task_id !=
		    REC_NONE;
	}
	return false;
}

/* Feeds a launch record into sa's join, as drained at now (realtime ns).
 * user keeps what the device task lacks: copy kind or memset value, and
 * the async flag (bit 32). */
void
session_dev_add_launch(struct sess_agent *sa, const struct rec_hdr *h,
    uint64_t now)
{
	struct join_launch l;

/* The fields every device-work record type names the same way. */
#define LAUNCH_FROM(r) do {						\
	l.device = (r)->device;						\
	l.stream = (r)->stream;						\
	l.task_id = (r)->task_id;					\
	l.correlation_id = (r)->correlation_id;				\
	l.start = (r)->start;						\
	l.end = (r)->end;						\
	l.tid = (r)->tid;						\
} while (0)

	memset(&l, 0, sizeof(l));
	l.kind = h->type;
	l.user = (uint64_t)((h->aux & REC_F_ASYNC) != 0) << 32;
	switch (h->type) {
	case REC_KERNEL: {
		const struct rec_kernel *r = (const void *)h;

		LAUNCH_FROM(r);
		l.name_id = r->name_id;
		break;
	}
	case REC_MEMCPY: {
		const struct rec_memcpy *r = (const void *)h;

		LAUNCH_FROM(r);
		l.user |= r->copy_kind;
		break;
	}
	case REC_MEMSET: {
		const struct rec_memset *r = (const void *)h;

		LAUNCH_FROM(r);
		l.user |= r->value;
		break;
	}
	case REC_HCCL:
		LAUNCH_FROM((const struct rec_hccl *)(const void *)h);
		break;
	case REC_COMMUNICATION:
		LAUNCH_FROM((const struct rec_communication *)(const void *)h);
		break;
	default:
		return;
	}
#undef LAUNCH_FROM
	l.pid = (uint32_t)sa->pid;
	/* -ENOMEM: the task went through the drop callback, counted. */
	(void)join_add_launch(sa->join, &l, now);
}

static const char *
session_dev_kernel_type(unsigned t)
{
	switch (t) {
	case 0:		return "KERNEL_AICORE";
	case 1:		return "KERNEL_AIVEC";
	case 2:		return "KERNEL_AICPU";
	}
	return "KERNEL_UNKNOWN";
}

/* aclrtMemcpyKind (device channel) to msptiActivityMemcpyKind. */
static uint32_t
session_dev_copy_kind(uint32_t k)
{
	static const uint32_t map[] = { 1, 2, 3, 4, 5 };

	return k < nitems(map) ? map[k] : 0;
}

/*
 * The join's output: one device task with its launch (or alone), as the
 * records the session's kinds ask for, in sa's string namespace.
 */
static void
session_dev_join_emit(const void *dev_task, const struct join_launch *l,
    void *arg)
{
	const struct devcol_task *t = dev_task;
	struct sess_agent *sa = arg;
	struct session *s = sa->s;
	uint64_t buf[REC_FIXED_MAX / 8];
	uint32_t aux = l != NULL ? REC_F_JOINED : 0, k = s->kinds;
	uint64_t corr = l != NULL ? l->correlation_id : 0;
	uint32_t tid = l != NULL ? l->tid : t->tid;
	bool stop = false;

	if (session_done(s))
		return;
	if (l != NULL && (l->user >> 32))
		aux |= REC_F_ASYNC;
	/* A task without a launch that started before its kind was on
	 * (before the start, or a retarget) is not in the window. */
	if (l == NULL)
		for (unsigned i = 0; i < nitems(s->kind_on_ns); i++)
			if (t->start < s->kind_on_ns[i])
				k &= ~(1u << i);
	/* Nor one outside the agent's step window. */
	if (l == NULL && session_steps_task_out(sa, t->start))
		return;
/* The fields every device-work record takes from the task and launch. */
#define TASK_FILL(r) do {						\
	(r)->start = t->start;						\
	(r)->end = t->end;						\
	(r)->correlation_id = corr;					\
	(r)->pid = t->pid;						\
	(r)->tid = tid;							\
	(r)->device = t->device;					\
	(r)->stream = t->stream;					\
	(r)->task_id = t->task_id;					\
} while (0)

	switch (t->kind) {
	case DEVCOL_KERNEL: {
		struct rec_kernel *r = (void *)buf;

		if (!(k & (1u << REC_KERNEL)))
			return;
		REC_INIT(r, REC_KERNEL, aux & ~REC_F_ASYNC);
		TASK_FILL(r);
		r->name_id = session_drain_string(sa, t->name);
		r->type_id = session_drain_const(sa,
		    session_dev_kernel_type(t->kernel_type));
		stop = session_drain_out(sa, &r->hdr);
		break;
	}
	case DEVCOL_MEMCPY: {
		struct rec_memcpy *r = (void *)buf;

		if (!(k & (1u << REC_MEMCPY)))
			return;
		REC_INIT(r, REC_MEMCPY, aux);
		TASK_FILL(r);
		r->bytes = t->bytes;
		r->copy_kind = l != NULL && l->kind == REC_MEMCPY ?
		    (uint32_t)(l->user & 0xffffffffu) :
		    session_dev_copy_kind(t->memcpy_kind);
		if (r->copy_kind > 5)
			r->copy_kind = 0;
		stop = session_drain_out(sa, &r->hdr);
		break;
	}
	case DEVCOL_MEMSET: {
		struct rec_memset *r = (void *)buf;

		if (!(k & (1u << REC_MEMSET)))
			return;
		REC_INIT(r, REC_MEMSET, aux);
		TASK_FILL(r);
		r->bytes = t->bytes;
		r->value = l != NULL && l->kind == REC_MEMSET ?
		    (uint32_t)(l->user & 0xffffffffu) : 0;
		stop = session_drain_out(sa, &r->hdr);
		break;
	}
	case DEVCOL_COMM:
		if (k & (1u << REC_HCCL)) {
			struct rec_hccl *r = (void *)buf;

			REC_INIT(r, REC_HCCL, aux & ~REC_F_ASYNC);
			TASK_FILL(r);
			/* bytes per ns is GB/s */
			r->bandwidth = t->end > t->start ? (double)t->bytes /
			    (double)(t->end - t->start) : 0;
			r->name_id = session_drain_string(sa, t->name);
			r->comm_name_id = session_drain_string(sa,
			    t->comm_name);
			r->seq = t->comm_seq;
			stop |= session_drain_out(sa, &r->hdr);
		}
		if (k & (1u << REC_COMMUNICATION)) {
			struct rec_communication *r = (void *)buf;

			REC_INIT(r, REC_COMMUNICATION, aux & ~REC_F_ASYNC);
			TASK_FILL(r);
			r->count = t->count;
			r->name_id = session_drain_string(sa, t->name);
			r->comm_name_id = session_drain_string(sa,
			    t->comm_name);
			r->alg_type_id = session_drain_const(sa,
			    t->algorithm == 1 ? "RING" : t->algorithm == 2 ?
			    "P2P" : "NONE");
			r->data_type = t->data_type <= 12 ? t->data_type :
			    0xffff;
			r->seq = t->comm_seq;
			stop |= session_drain_out(sa, &r->hdr);
		}
		break;
	default:
		break;
	}
	/* The size limit set stop_reason; session_dev_poll stops the
	 * session once the join is no longer running. */
	(void)stop;
#undef TASK_FILL
}

/* A device marker task: written at once, named after its host marker. */
static void
session_dev_marker(struct sess_agent *sa, const struct devcol_task *t)
{
	struct session *s = sa->s;
	const struct sess_mark *m;
	struct rec_marker r;

	if (!(s->kinds & (1u << REC_MARKER)) || sa->marks == NULL)
		return;
	m = &sa->marks[t->marker_id % SESS_MARKS];
	/* Unknown id: its domain is off, or it was marked before the
	 * capture. */
	if (m->id != t->marker_id || m->name_id == 0)
		return;
	REC_INIT(&r, REC_MARKER, 0);
	r.timestamp = t->start;
	r.id = t->marker_id;
	r.pid = REC_NONE;
	r.tid = REC_NONE;
	r.device = t->device;
	r.stream = t->stream;
	r.name_id = m->name_id;
	r.domain_id = m->domain_id;
	r.flag = t->tag_id;
	r.source_kind = 1;
	(void)session_drain_out(sa, &r.hdr);
}

/* The sess_agent whose join takes device tasks of pid, or NULL. */
static struct sess_agent *
session_dev_agent_by_pid(struct daemon *d, uint32_t pid)
{
	struct session *s;
	struct sess_agent *sa, *found = NULL;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if ((uint32_t)sa->pid != pid || sa->join == NULL)
				continue;
			if (sa->state == SA_ACTIVE || sa->state == SA_STOPPING)
				return sa;
			found = sa;
		}
	}
	return found;
}

bool
session_dev_filter(uint32_t device, uint32_t pid, void *arg)
{
	return session_dev_agent_by_pid(arg, pid) != NULL;
}

/* Forgets floor i of a (order does not matter). */
static void
session_dev_floor_forget(struct agent *a, size_t i)
{
	a->dev_floors[i] = a->dev_floors[--a->ndev_floors];
}

/*
 * Whether task (device, stream, task_id) is one a capture that a left
 * queued (agent_floor): it was counted there.  Forgets a stream's range
 * once the stream ran past it, and every expired range whatever its
 * stream (a stream that never runs again must not keep its floor).  At
 * most SESS_FLOORS_MAX are scanned.
 */
bool
session_dev_floor_drop(struct agent *a, uint32_t device, uint32_t stream,
    uint32_t task_id, uint64_t now)
{
	bool hit = false;

	for (size_t i = 0; i < a->ndev_floors; i++) {
		struct agent_floor *f = &a->dev_floors[i];

		if (now >= f->until_mono) {
			session_dev_floor_forget(a, i--);
			continue;
		}
		if (f->device != device || f->stream != stream)
			continue;
		if ((int32_t)(task_id - f->lo) >= 0 &&
		    (int32_t)(task_id - f->hi) <= 0)
			hit = true;
		else if ((int32_t)(task_id - f->hi) > 0)
			session_dev_floor_forget(a, i--);
	}
	return hit;
}

/*
 * Adds n task ids from task_id on (device, stream) to a's floors: 0, or
 * -1 when SESS_FLOORS_MAX unexpired floors are kept already (counted in
 * a->dev_floors_refused and logged: those tasks may then go to a later
 * capture of the pid).
 */
int
session_dev_floor_add(struct agent *a, uint32_t device, uint32_t stream,
    uint32_t task_id, uint32_t n, uint64_t now)
{
	struct agent_floor *f = NULL, *nf;

	if (n == 0)
		n = 1;
	for (size_t i = 0; i < a->ndev_floors; i++) {
		if (now >= a->dev_floors[i].until_mono) {
			session_dev_floor_forget(a, i--);
			continue;
		}
		if (a->dev_floors[i].device == device &&
		    a->dev_floors[i].stream == stream)
			f = &a->dev_floors[i];
	}
	if (f == NULL) {
		if (a->ndev_floors >= SESS_FLOORS_MAX ||
		    (nf = realloc(a->dev_floors, (a->ndev_floors + 1) *
		    sizeof(*nf))) == NULL) {
			/* Logged the first time and at every power of two. */
			a->dev_floors_refused++;
			if ((a->dev_floors_refused &
			    (a->dev_floors_refused - 1)) == 0)
				log_warnx("agent pid %ld: %llu queued task "
				    "range(s) not kept (%zu streams kept)",
				    (long)a->cred.pid, (unsigned long long)
				    a->dev_floors_refused, a->ndev_floors);
			return -1;
		}
		a->dev_floors = nf;
		f = &a->dev_floors[a->ndev_floors++];
		f->device = device;
		f->stream = stream;
		f->lo = task_id;
		f->hi = task_id + n - 1;
	}
	if ((int32_t)(task_id - f->lo) < 0)
		f->lo = task_id;
	if ((int32_t)(task_id + n - 1 - f->hi) > 0)
		f->hi = task_id + n - 1;
	f->until_mono = now + SESS_FLOOR_NS;
	return 0;
}

/*
 * The sess_agent that owns device task t: the one whose launch of it
 * waits; else a capture of the pid that has ended but not yet finalized,
 * if t lies within its launches (its launch was dropped and counted
 * there); else the pid's live capture, unless t was left queued by an
 * ended one (session_dev_floor_drop).  A task launched in session A that
 * completes after a back-to-back session B of the same pid started is
 * thus A's: delivered or counted in A, never written into B.
 */
static struct sess_agent *
session_dev_route(struct daemon *d, const struct devcol_task *t)
{
	struct session *s;
	struct sess_agent *sa, *live = NULL, *ended = NULL, *window = NULL;
	bool work = t->kind != DEVCOL_MARKER;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if ((uint32_t)sa->pid != t->pid || sa->join == NULL)
				continue;
			if (work && join_has_launch(sa->join, t->device,
			    t->stream, t->task_id))
				return sa;
			if (sa->state == SA_ACTIVE || sa->state == SA_STOPPING) {
				if (live == NULL)
					live = sa;
				continue;
			}
			ended = sa;
			if (work && window == NULL && join_in_window(sa->join,
			    t->device, t->stream, t->task_id))
				window = sa;
		}
	}
	if (!work)
		return live != NULL ? live : ended;
	if (window != NULL)
		return window;
	if (live != NULL && live->agent != NULL &&
	    live->agent->ndev_floors > 0 &&
	    session_dev_floor_drop(live->agent, t->device, t->stream,
	    t->task_id, util_monotonic_ns()))
		return NULL;
	return live != NULL ? live : ended;
}

/* When the current session_dev_poll began (CLOCK_REALTIME): the time
 * each task it routes entered the join (one clock read per poll). */
static uint64_t session_dev_poll_ns;

/* The record types that a device task of kind k can become. */
static uint32_t
session_dev_kind_mask(uint32_t k)
{
	switch (k) {
	case DEVCOL_KERNEL:
		return 1u << REC_KERNEL;
	case DEVCOL_MEMCPY:
		return 1u << REC_MEMCPY;
	case DEVCOL_MEMSET:
		return 1u << REC_MEMSET;
	case DEVCOL_COMM:
		return 1u << REC_HCCL | 1u << REC_COMMUNICATION;
	}
	return 0;
}

/*
 * Routes t.  A work task of a kind that its session never had on is not
 * joined: the agent writes launches only for kinds on, so none can come
 * for it, and the emit would discard it after it waited out the join's
 * device timeout (a marker-only capture of a busy device held up to
 * JOIN_MAX_DEV such tasks and spent most of the daemon's time on them).
 */
static void
session_dev_task(const struct devcol_task *t, void *arg)
{
	struct sess_agent *sa = session_dev_route(arg, t);

	if (sa == NULL)
		return;
	if (t->kind != DEVCOL_MARKER &&
	    !(sa->s->kinds_ever & session_dev_kind_mask(t->kind)))
		return;
	switch (t->kind) {
	case DEVCOL_MARKER:
		session_dev_marker(sa, t);
		break;
	case DEVCOL_KERNEL:
	case DEVCOL_MEMCPY:
	case DEVCOL_MEMSET:
	case DEVCOL_COMM:
		(void)join_add_task(sa->join, t->device, t->stream,
		    t->task_id, t, session_dev_poll_ns);
		break;
	default:
		break;
	}
}

/*
 * When the next poll is due, from how full the fullest channel was at
 * this one (fill, thousandths), the time since the one before (since_ns)
 * and the interval chosen then (last_ns): when a quarter of a channel
 * would fill at that rate, at least SESS_DEV_POLL_MIN_MS and, while a
 * channel is in use (in_use), at most SESS_DEV_POLL_MAX_MS away; 0 (no
 * timer) when none is.
 *
 * The upper bound is for a device that was idle and then runs fast: the
 * rate seen over the idle spell says nothing about the next burst, and a
 * device completing 400,000 tasks a second laps a 16,384-record channel
 * in 41 ms; waiting for the drain timer (100 ms) lost most of such a
 * burst.
 *
 * A poll less than SESS_DEV_POLL_MIN_MS after the one before (the drain
 * timer's, or a session's start or stop, right after the poll timer's)
 * saw too short a window to tell the rate: a busy device may have
 * published nothing in it.  It keeps the last interval; taking its
 * "nothing" for an idle device left a 200,000-task/s channel unread for
 * the drain timer's 100 ms, and it overran (thousands of records lost).
 */
uint64_t
session_dev_next_ns(unsigned fill, uint64_t since_ns, uint64_t last_ns,
    bool in_use)
{
	const uint64_t lo = SESS_DEV_POLL_MIN_MS * 1000000ull;
	const uint64_t hi = SESS_DEV_POLL_MAX_MS * 1000000ull;
	uint64_t ns;

	if (!in_use)
		return 0;
	if (since_ns < lo && last_ns != 0)
		return last_ns;
	if (fill == 0)
		return hi;
	ns = since_ns * 250 / fill;
	return ns < lo ? lo : ns > hi ? hi : ns;
}

void
session_dev_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	session_dev_poll(arg);
}

/*
 * Reads every device channel in use once and routes the tasks; then lets
 * device tasks that waited too long for a launch go out alone.
 */
void
session_dev_poll(struct daemon *d)
{
	static bool polling;
	static uint64_t last_mono, last_next;
	struct session *s;
	struct sess_agent *sa;
	uint64_t now, mono, next;

	if (d->devcol == NULL || polling)
		return;
	polling = true;
	session_dev_poll_ns = util_realtime_ns();
	devcol_poll(d->devcol, session_dev_task, d);
	mono = util_monotonic_ns();
	/* No poll in the last two drain periods (a session just began, or
	 * the first): no rate to go by, so measure it soon. */
	if (last_mono == 0 || mono - last_mono > 2 * SESS_DRAIN_MS *
	    1000000ull)
		next = 2 * SESS_DEV_POLL_MIN_MS * 1000000ull;
	else
		next = session_dev_next_ns(devcol_last_fill(d->devcol),
		    mono - last_mono, last_next, devcol_in_use(d->devcol));
	last_mono = mono;
	last_next = next;
	if (d->devpoll_ev != NULL && next != 0) {
		struct timeval tv = { (time_t)(next / 1000000000ull),
		    (suseconds_t)(next % 1000000000ull / 1000) };

		evtimer_add(d->devpoll_ev, &tv);
	} else if (d->devpoll_ev != NULL)
		evtimer_del(d->devpoll_ev);
	now = util_realtime_ns();
	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->join != NULL)
				join_expire(sa->join, now);
	}
	polling = false;
	/* A size limit reached by device records. */
	TAILQ_FOREACH(s, &d->sessions, entry)
		if (s->state == SESS_ACTIVE && s->stop_reason != NULL)
			session_stop(s, s->stop_reason);
}

/* Takes references on the devices a uses, for s: channels and metrics. */
void
session_dev_use(struct session *s, const struct agent *a)
{
	struct daemon *d = s->d;
	uint64_t added = 0;

	for (size_t i = 0; a != NULL && i < a->ndevices; i++) {
		uint32_t dev = a->devices[i];

		if (dev >= 64 || (s->devmask & (1ull << dev)))
			continue;
		if (d->devcol != NULL && devcol_use(d->devcol, dev) != 0)
			continue;
		if (d->metrics != NULL)
			(void)metrics_use_device(d->metrics, dev);
		s->dev_lost_base[dev] = d->devcol != NULL ?
		    devcol_lost(d->devcol, dev) : 0;
		s->devmask |= 1ull << dev;
		added |= 1ull << dev;
	}
	if (added != 0 && s->w != NULL)
		session_dev_clock_records(s, added);
	/* No rate known for a new device yet: poll soon to measure it (its
	 * work may be under way already, and a drain period of it can be
	 * more than its channel holds). */
	if (added != 0 && d->devpoll_ev != NULL &&
	    !evtimer_pending(d->devpoll_ev, NULL)) {
		struct timeval tv = { 0, 2 * SESS_DEV_POLL_MIN_MS * 1000 };

		evtimer_add(d->devpoll_ev, &tv);
	}
	/* A first point of each new device's metrics now (a short capture
	 * may end before the next tick). */
	s->dev_first_due |= added;
	session_dev_first_metrics(s);
}

/*
 * The first point of each device that has none yet.  A device's page has
 * no snapshot until its process's sampler first ran, which under load can
 * be after the agent named the device: the drain tick tries again.
 */
void
session_dev_first_metrics(struct session *s)
{
	for (uint32_t dev = 0; s->dev_first_due != 0 && dev < 64; dev++)
		if ((s->dev_first_due & (1ull << dev)) &&
		    (s->d->metrics == NULL ||
		    metrics_sample_device(s->d->metrics, dev)))
			s->dev_first_due &= ~(1ull << dev);
}

/* The last point of the session's device metrics (finalizing). */
void
session_dev_last_metrics(struct session *s)
{
	session_dev_first_metrics(s);
	for (uint32_t dev = 0; dev < 64 && s->d->metrics != NULL; dev++)
		if (s->devmask & (1ull << dev))
			(void)metrics_sample_device(s->d->metrics, dev);
}

/* Device-channel losses of s so far. */
uint64_t
session_dev_lost(const struct session *s)
{
	uint64_t n = s->dev_lost;

	for (uint32_t dev = 0; dev < 64; dev++)
		if ((s->devmask & (1ull << dev)) && s->d->devcol != NULL) {
			uint64_t l = devcol_lost(s->d->devcol, dev);

			if (l > s->dev_lost_base[dev])
				n += l - s->dev_lost_base[dev];
		}
	return n;
}

/* Drops s's device references (end of the session). */
void
session_dev_release(struct session *s)
{
	struct daemon *d = s->d;

	s->dev_lost = session_dev_lost(s);
	for (uint32_t dev = 0; dev < 64; dev++) {
		if (!(s->devmask & (1ull << dev)))
			continue;
		if (d->devcol != NULL)
			devcol_unuse(d->devcol, dev);
		if (d->metrics != NULL)
			metrics_unuse_device(d->metrics, dev);
	}
	s->devmask = 0;
}

/* One REC_CLOCK_SYNC per device of mask that has a clock model. */
void
session_dev_clock_records(struct session *s, uint64_t mask)
{
	struct clock_model m;
	struct rec_clock_sync r;

	if (s->w == NULL || s->d->devcol == NULL)
		return;
	for (uint32_t dev = 0; dev < 64; dev++) {
		if (!(mask & (1ull << dev)) ||
		    devcol_clock_model(s->d->devcol, dev, &m) != 0 ||
		    m.samples == 0)
			continue;
		REC_INIT(&r, REC_CLOCK_SYNC, 0);
		r.host_ref_ns = m.host_ref_ns;
		r.device_ref_ns = m.device_ref_ns;
		r.drift = m.drift;
		r.error_ns = m.error_ns;
		r.device = dev;
		r.samples = m.samples;
		session_sink_emit(s, &r);
	}
}

/* Live metrics: the session's devices and captured pids, as counters. */
void
session_dev_counter_cb(const struct metrics_counter *c, void *arg)
{
	struct session *s = arg;
	struct sess_agent *sa;
	struct rec_counter r;
	bool want = false;

	/* Stopping too: the last point is taken while finalizing. */
	if (s->w == NULL || (s->state != SESS_ACTIVE &&
	    s->state != SESS_STOPPING))
		return;
	if (c->pid == 0)
		want = c->device < 64 && (s->devmask & (1ull << c->device));
	else
		TAILQ_FOREACH(sa, &s->agents, entry)
			if ((uint32_t)sa->pid == c->pid &&
			    sa->state == SA_ACTIVE)
				want = true;
	if (!want || c->value != c->value)
		return;
	REC_INIT(&r, REC_COUNTER, 0);
	r.timestamp = c->timestamp;
	r.value = c->value;
	r.track_id = session_sink_intern(s, c->track);
	r.unit_id = session_sink_intern(s, c->unit);
	r.pid = c->pid;
	r.device = c->pid == 0 ? c->device : REC_NONE;
	session_sink_emit(s, &r);
}

/* Launches of sa that lost their device timing so far (LOSS_DEVICE_UNMATCHED):
 * they waited past the join's host timeout or were evicted. */
uint64_t
session_dev_unmatched(const struct sess_agent *sa)
{
	return sa->dev_unmatched;
}

/* The join dropped a launch task of sa: counted once, by kind. */
static void
session_dev_join_drop(const struct join_launch *l, void *arg)
{
	struct sess_agent *sa = arg;

	sa->dev_unmatched++;
	sa->dev_lost_kind[l->kind < REC_TYPE_MAX ? l->kind : 0]++;
}

/* Whether sa's device channel ever gave it a task: if not, none of its
 * launches can get device timing (the channel is not visible here). */
static bool
session_dev_silent(const struct join_stats *st)
{
	return st->matched + st->dev_unmatched + st->dev_evicted +
	    st->dev_outside == 0;
}

/*
 * Whether some launch of s still waits for a device task that may yet
 * come: its process is alive and its channel has given it tasks before.
 * Finalizing polls the devices while this holds (bounded).
 */
bool
session_dev_inflight(const struct session *s)
{
	const struct sess_agent *sa;
	struct join_stats st;

	if (s->d->devcol == NULL)
		return false;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (sa->join == NULL || sa->agent == NULL)
			continue;
		join_get_stats(sa->join, &st);
		if (st.host_waiting > 0 && !session_dev_silent(&st))
			return true;
	}
	return false;
}

/* What the joins of s hold now: device tasks waiting for their launch
 * (*dev) and launch tasks waiting for their device task (*host). */
void
session_dev_waiting(const struct session *s, uint64_t *dev, uint64_t *host)
{
	const struct sess_agent *sa;
	struct join_stats st;

	*dev = *host = 0;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (sa->join == NULL)
			continue;
		join_get_stats(sa->join, &st);
		*dev += st.dev_waiting;
		*host += st.host_waiting;
	}
}

/* A launch task still waiting at the end: its (device, stream) task id
 * range goes to the agent's floors (join_host_foreach). */
static void
session_dev_floor_note(const struct join_launch *l, void *arg)
{
	(void)session_dev_floor_add(arg, l->device, l->stream, l->task_id,
	    l->ntasks, util_monotonic_ns());
}

/* Frees what session-dev.c keeps in a (the registry frees a). */
void
session_dev_agent_free(struct agent *a)
{
	free(a->dev_floors);
	a->dev_floors = NULL;
	a->ndev_floors = 0;
}

/*
 * Every sess_agent with a join: emit what waits (end of the session,
 * after the wait for the device).  A launch whose device task has not
 * come by now is lost (device_unmatched), and so is every one the join
 * dropped before (30 s host timeout, eviction): the trace gets a loss
 * record per kind and pid of all of them, so they sum to the footer's
 * and the session's totals.  The task ids still queued stay the ended
 * capture's (agent_floor): a later session of the pid does not take them.
 */
void
session_dev_join_flush(struct session *s)
{
	struct sess_agent *sa;
	uint64_t now = util_realtime_ns();

	TAILQ_FOREACH(sa, &s->agents, entry) {
		struct join_stats st;
		struct rec_loss r;
		uint64_t lost;
		bool silent;

		if (sa->join == NULL)
			continue;
		if (sa->agent != NULL)
			join_host_foreach(sa->join, session_dev_floor_note,
			    sa->agent);
		join_flush_at(sa->join, now, SESS_INFLIGHT_NS);
		for (unsigned k = 0; k < REC_TYPE_MAX && s->w != NULL; k++) {
			if (sa->dev_lost_kind[k] == 0)
				continue;
			REC_INIT(&r, REC_LOSS, 0);
			r.timestamp = now;
			r.count = sa->dev_lost_kind[k];
			r.stage = LOSS_DEVICE_UNMATCHED;
			r.pid = (uint32_t)sa->pid;
			r.lost_type = k;
			session_sink_emit(s, &r);
		}
		join_get_stats(sa->join, &st);
		lost = st.host_only + st.host_evicted + st.host_inflight;
		if (lost != sa->dev_unmatched)
			log_warnx("session %llu pid %ld: join counted %llu "
			    "launches lost, its drops %llu",
			    (unsigned long long)s->id, (long)sa->pid,
			    (unsigned long long)lost,
			    (unsigned long long)sa->dev_unmatched);
		silent = session_dev_silent(&st);
		log_info("session %llu pid %ld: %llu device tasks joined, %llu "
		    "alone, %llu launches without a device task (%llu of "
		    "them launched in the last %llu ms)",
		    (unsigned long long)s->id, (long)sa->pid,
		    (unsigned long long)st.matched,
		    (unsigned long long)(st.dev_unmatched + st.dev_evicted),
		    (unsigned long long)sa->dev_unmatched,
		    (unsigned long long)st.host_inflight,
		    (unsigned long long)(SESS_INFLIGHT_NS / 1000000));
		if (sa->dev_unmatched > 0)
			log_warnx("session %llu pid %ld: %llu launches have no "
			    "device timing (device_unmatched)%s",
			    (unsigned long long)s->id, (long)sa->pid,
			    (unsigned long long)sa->dev_unmatched, silent ?
			    ": the device channel gave no task of this "
			    "process (is NPUSIM_SHM_PREFIX/the device "
			    "visible to msptid?)" : st.host_inflight > 0 ?
			    ": still queued on the device when the stop's "
			    "wait ended" : "");
		join_free(sa->join);
		sa->join = NULL;
	}
}

/* Called by the registry when an agent's device list changed. */
void
session_dev_agent_changed(struct daemon *d, struct agent *a)
{
	struct session *s;
	struct sess_agent *sa;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->agent == a && sa->state == SA_ACTIVE)
				session_dev_use(s, a);
	}
}

/* An agent started capturing: its devices, its pid's metrics, a join. */
void
session_dev_start(struct sess_agent *sa, struct agent *a)
{
	struct session *s = sa->s;
	struct join_config jc;

	memset(&jc, 0, sizeof(jc));
	jc.dev_size = sizeof(struct devcol_task);
	jc.drop = session_dev_join_drop;
	if (sa->join == NULL)
		sa->join = join_new(&jc, session_dev_join_emit, sa);
	if (s->d->metrics != NULL && !sa->watched &&
	    metrics_watch_pid(s->d->metrics, (uint32_t)sa->pid) == 0)
		sa->watched = true;
	session_dev_use(s, a);
}

/* The clock model of each device of s, for the trace header:
 * "dev0 host_ref_ns=H device_ref_ns=D drift=X error_ns=E samples=N; ..."
 * (host = H + (dev - D) * (1 + X)); "" when none is known yet. */
void
session_dev_clock_text(struct session *s, char *out, size_t len)
{
	struct clock_model m;
	size_t n = 0;

	out[0] = '\0';
	for (uint32_t dev = 0; dev < 64 && s->d->devcol != NULL; dev++) {
		int k;

		if (!(s->devmask & (1ull << dev)) ||
		    devcol_clock_model(s->d->devcol, dev, &m) != 0 ||
		    m.samples == 0)
			continue;
		k = snprintf(out + n, len - n, "%sdev%u host_ref_ns=%llu "
		    "device_ref_ns=%llu drift=%.9g error_ns=%.1f samples=%u",
		    n ? "; " : "", dev, (unsigned long long)m.host_ref_ns,
		    (unsigned long long)m.device_ref_ns, m.drift, m.error_ns,
		    m.samples);
		if (k < 0 || (size_t)k >= len - n) {
			out[n] = '\0';
			break;
		}
		n += (size_t)k;
	}
}

/*
 * Capture sessions: the state machine and the agents in it.
 *
 * A session owns one struct sess_agent per agent it captures, each with a
 * ring the daemon created (lib/ring) and mapped, and whose memfd went to
 * the agent with StartCapture.  The agent answers with CaptureAck and an
 * eventfd it writes when the ring passes the wake threshold; the daemon
 * drains on that wake and on a timer (session-drain.c).
 *
 * States: starting (waiting for the agents' acks, the CLI waits for its
 * reply) -> active -> stopping (StopCapture sent, waiting for acks) ->
 * finalized | failed.  Every ctl peer that waits on a session (start
 * reply, stop, wait) is remembered and forgotten in session_peer_gone when
 * its connection closes first.  Control requests are in session-ctl.c,
 * device collection in session-dev.c, the trace file in session-sink.c,
 * ring mode's flight recorder in session-flight.c.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
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

static const struct {
	const char	*name;
	uint32_t	 mask;
} sess_kinds[] = {
	{ "marker", 1u << 1 },
	{ "kernel", 1u << 2 },
	{ "api", (1u << 3) | (1u << 10) | (1u << 11) | (1u << 12) },
	{ "hccl", 1u << 4 },
	{ "memory", 1u << 5 },
	{ "memset", 1u << 6 },
	{ "memcpy", 1u << 7 },
	{ "correlation", 1u << 8 },
	{ "communication", 1u << 9 },
	/* Framework ops (PyTorch aten ops) as MSTX ranges of domain
	 * "framework", linked to their launches by external correlation: bit
	 * 13 (MSPTI_ACTIVITY_KIND_COUNT) tells the job's mspti package to
	 * install its observer (msptiExtSessionKinds). */
	{ "op", (1u << 13) | (1u << 1) | (1u << 8) },
	/* op with each op's input shapes and dtypes (bit 14). */
	{ "shapes", (1u << 14) | (1u << 13) | (1u << 1) | (1u << 8) },
};

const char *const session_state_names[] = {
	[SESS_STARTING] = "starting",
	[SESS_ACTIVE] = "active",
	[SESS_STOPPING] = "stopping",
	[SESS_FINALIZED] = "finalized",
	[SESS_FAILED] = "failed",
};

/* Parses a kind name; returns its mask or 0. */
static uint32_t
session_kind_mask(const char *name)
{
	for (size_t i = 0; i < nitems(sess_kinds); i++)
		if (strcmp(name, sess_kinds[i].name) == 0)
			return sess_kinds[i].mask;
	return 0;
}

/* Kind names of mask into out (pointers to static strings). */
size_t
session_kind_names(uint32_t mask, char **out)
{
	size_t n = 0;

	for (size_t i = 0; i < nitems(sess_kinds); i++)
		if ((mask & sess_kinds[i].mask) == sess_kinds[i].mask)
			out[n++] = (char *)sess_kinds[i].name;
	return n;
}

struct session *
session_find(struct daemon *d, uint64_t id)
{
	struct session *s;

	TAILQ_FOREACH(s, &d->sessions, entry)
		if (s->id == id)
			return s;
	return NULL;
}

bool
session_done(const struct session *s)
{
	return s->state == SESS_FINALIZED || s->state == SESS_FAILED;
}

/* The live session an agent is in, or NULL. */
struct sess_agent *
session_agent_of(struct daemon *d, const struct agent *a)
{
	struct session *s;
	struct sess_agent *sa;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->agent == a)
				return sa;
	}
	return NULL;
}

/*
 * Marks the session failed with a clear error (disk full, ...) and stops
 * it; the agents are told to stop, the application is never affected.
 */
void
session_fail(struct session *s, int err, const char *what)
{
	char buf[256];

	if (s->error != NULL)
		return;
	snprintf(buf, sizeof(buf), "%s: %s", what, strerror(-err));
	s->error = strdup(buf);
	log_warnx("session %llu failed: %s", (unsigned long long)s->id, buf);
	if (!session_done(s))
		session_stop(s, "error");
}

static void
session_agent_free(struct sess_agent *sa)
{
	if (sa == NULL)
		return;
	if (sa->ev != NULL)
		event_free(sa->ev);
	if (sa->evfd >= 0)
		close(sa->evfd);
	ring_unmap(sa->ring);
	join_free(sa->join);
	free(sa->marks);
	for (size_t i = 0; i <= SESS_ALLSTR && sa->strs != NULL; i++)
		free(sa->strs[i]);
	free(sa->strs);
	free(sa->strmap);
	free(sa->dhash);
	free(sa->fr);
	free(sa->error);
	free(sa->win_note);
	free(sa);
}

/* Releases what an agent no longer needs once it left the capture; its
 * counters stay for the session's totals. */
static void
session_agent_release(struct sess_agent *sa)
{
	if (sa->watched && sa->s->d->metrics != NULL) {
		metrics_unwatch_pid(sa->s->d->metrics, (uint32_t)sa->pid);
		sa->watched = false;
	}
	if (sa->ev != NULL) {
		event_free(sa->ev);
		sa->ev = NULL;
	}
	if (sa->evfd >= 0) {
		close(sa->evfd);
		sa->evfd = -1;
	}
	if (sa->ring != NULL && !sa->s->ring_mode) {
		ring_unmap(sa->ring);
		sa->ring = NULL;
	}
}

/* The trace's record of sa leaving, with what it lost so far (the
 * footer has the session's totals; this is the per-target part). */
static void
session_agent_leave_event(struct sess_agent *sa, const char *why)
{
	static const char *names[LOSS_STAGE_MAX] = {
		[LOSS_AGENT_RING] = "agent_ring",
		[LOSS_DAEMON_REJECT] = "daemon_reject",
	};
	uint64_t losses[LOSS_STAGE_MAX];
	char buf[256];
	size_t n;

	session_drain_agent_losses(sa, losses);
	n = (size_t)snprintf(buf, sizeof(buf), "%s", why ? why : "");
	if (sa->pid_rewrites > 0 && n < sizeof(buf))
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%llu records "
		    "named another pid", n ? "; " : "",
		    (unsigned long long)sa->pid_rewrites);
	if (sa->s->steps_max > 0 && n < sizeof(buf)) {
		if (sa->first_known && sa->first_step >= 0)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
			    "%ssteps %lld..%lld", n ? "; " : "",
			    (long long)sa->first_step, (long long)
			    (sa->first_step + sa->win_steps - 1));
		else
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
			    "%sno step", n ? "; " : "");
		if (sa->win_note != NULL && n < sizeof(buf))
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
			    " (%s)", sa->win_note);
	}
	for (unsigned k = 0; k < LOSS_STAGE_MAX && n < sizeof(buf); k++)
		if (names[k] != NULL && losses[k] > 0)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
			    "%s%s=%llu", strchr(buf, '=') ? " " :
			    n ? "; lost " : "lost ", names[k], (unsigned long long)losses[k]);
	session_sink_event(sa->s, SESSION_EV_AGENT_LEAVE, (uint32_t)sa->pid,
	    why != NULL || *buf ? buf : NULL);
}

/* The agent is out of the capture: drained, done, unmapped. */
void
session_agent_finish(struct sess_agent *sa, const char *why)
{
	struct session *s = sa->s;

	if (sa->state == SA_DONE || sa->state == SA_FAILED)
		return;
	session_drain_agent(sa);
	if (why != NULL && sa->error == NULL)
		sa->error = strdup(why);
	sa->state = sa->state == SA_STARTING ? SA_FAILED : SA_DONE;
	session_agent_leave_event(sa, why);
	session_agent_release(sa);
	if (sa->agent != NULL && sa->agent->session_id == s->id)
		sa->agent->session_id = 0;
	session_check_done(s);
}

/* Flight recorder memory held by live sessions of uid, and by all. */
void
session_ring_memory(struct daemon *d, uid_t uid, uint64_t *of_uid,
    uint64_t *all)
{
	struct session *s;
	struct sess_agent *sa;

	*of_uid = *all = 0;
	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s) || !s->ring_mode)
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if (sa->fr == NULL)
				continue;
			*all += sa->frcap;
			if (s->owner.uid == uid)
				*of_uid += sa->frcap;
		}
	}
}

/*
 * Creates the ring for a in s and sends StartCapture.  Returns 0, or -1
 * with the reason in *why (the peer of a may have been dropped).
 */
int
session_attach(struct session *s, struct agent *a, const char **why)
{
	Mspti__StartCapture sc = MSPTI__START_CAPTURE__INIT;
	struct sess_agent *sa;
	int fd = -1, rc;

	if (a->session_id != 0) {
		*why = "already in another session";
		return -1;
	}
	if ((sa = calloc(1, sizeof(*sa))) == NULL ||
	    (sa->strmap = calloc(SESS_ALLSTR + 1, sizeof(*sa->strmap))) ==
	    NULL ||
	    (sa->strs = calloc(SESS_ALLSTR + 1, sizeof(*sa->strs))) == NULL ||
	    (sa->marks = calloc(SESS_MARKS, sizeof(*sa->marks))) == NULL) {
		session_agent_free(sa);
		*why = "daemon out of memory";
		return -1;
	}
	sa->s = s;
	sa->agent = a;
	sa->pid = a->cred.pid;
	sa->uid = a->cred.uid;
	sa->rank = a->rank;
	sa->agent_id = a->id;
	sa->evfd = -1;
	sa->state = SA_STARTING;
	sa->joined_mono = util_monotonic_ns();
	if (s->ring_mode) {
		static char msg[192];
		uint64_t uid_used, all_used;

		sa->frcap = s->buffer_size;
		session_ring_memory(s->d, s->owner.uid, &uid_used, &all_used);
		if (uid_used + sa->frcap > s->d->lim.ring_mem_per_uid ||
		    all_used + sa->frcap > s->d->lim.ring_mem_total) {
			snprintf(msg, sizeof(msg), "ring memory cap reached: "
			    "uid %lu holds %llu KiB of %llu KiB, msptid %llu "
			    "KiB of %llu KiB", (unsigned long)s->owner.uid,
			    (unsigned long long)(uid_used >> 10),
			    (unsigned long long)(s->d->lim.ring_mem_per_uid >>
			    10), (unsigned long long)(all_used >> 10),
			    (unsigned long long)(s->d->lim.ring_mem_total >>
			    10));
			session_agent_free(sa);
			*why = msg;
			return -1;
		}
		if ((sa->fr = malloc(sa->frcap)) == NULL) {
			session_agent_free(sa);
			*why = "daemon out of memory";
			return -1;
		}
	}
	/* One segment per producing thread (ring.h), each of the ring size:
	 * a thread writes as fast as if it were alone. */
	if ((rc = ring_create_segs(s->ring_size, RING_DEFAULT_SEGMENTS,
	    &fd)) != 0 ||
	    (rc = ring_map(fd, &sa->ring)) != 0) {
		if (fd >= 0)
			close(fd);
		session_agent_free(sa);
		*why = "cannot create the ring";
		log_warnx("ring for pid %ld: %s", (long)a->cred.pid,
		    ring_strerror(rc));
		return -1;
	}
	/* Woken at a quarter full: 3/4 of the ring is left to absorb the
	 * daemon's wake-up and drain latency (~22 ms at 5 M markers/s with
	 * the default 8 MiB ring); per segment. */
	sa->wake_threshold = s->ring_size / 4;
	TAILQ_INSERT_TAIL(&s->agents, sa, entry);
	a->session_id = s->id;
	sa->pending = true;
	s->npending++;
	sc.session_id = s->id;
	sc.kinds = s->kinds;
	sc.domains_off = s->domains_off;
	sc.n_domains_off = s->ndomains_off;
	sa->first_step = -1;
	if (s->steps_max > 0) {
		sc.steps = s->steps_max;
		sc.step_name = s->step_name;
		sc.step_from = s->step_from;
		sa->win_sent = s->step_from >= 0;
	}
	/* peer_send owns fd from here. */
	if (peer_send(a->peer, MSPTI__MSG_TYPE__MSG_START_CAPTURE, &sc.base,
	    fd) != 0) {
		/* The peer is gone, and a with it; registry_remove already
		 * finished sa. */
		*why = "agent connection lost";
		return -2;
	}
	return 0;
}

/* Called when an agent's pending start or update resolved. */
static void
session_pending_done(struct session *s)
{
	if (s->npending > 0)
		s->npending--;
	if (s->npending > 0)
		return;
	/* Every target acked: the step window's start, then the reply. */
	if (session_steps_choose(s) && s->npending > 0)
		return;
	if (s->state == SESS_STARTING) {
		s->state = SESS_ACTIVE;
		session_check_done(s);
	}
	session_ctl_reply_pending(s);
}

/* The end of finalizing, once the trace is closed (st valid when the
 * session had a writer). */
static void
session_finalize_end(struct session *s, int rc, const struct trace_writer_stats *st)
{
	struct sess_agent *sa;

	if (st != NULL) {
		s->bytes = st->file_bytes;
		s->disk_lost = st->lost;
		if (rc != 0 && s->error == NULL) {
			char buf[256];

			snprintf(buf, sizeof(buf), "writing the trace: %s",
			    strerror(-rc));
			s->error = strdup(buf);
		}
	}
	/* Agents' rings are no longer needed in ring mode either. */
	TAILQ_FOREACH(sa, &s->agents, entry) {
		ring_unmap(sa->ring);
		sa->ring = NULL;
		free(sa->fr);
		sa->fr = NULL;
		if (sa->agent != NULL && sa->agent->session_id == s->id)
			sa->agent->session_id = 0;
	}
	if (s->outfd >= 0) {
		close(s->outfd);
		s->outfd = -1;
	}
	s->state = s->error != NULL ? SESS_FAILED : SESS_FINALIZED;
	s->d->nsessions--;
	log_info("session %llu %s: %llu records, %llu bytes%s%s",
	    (unsigned long long)s->id, session_state_names[s->state],
	    (unsigned long long)s->records, (unsigned long long)s->bytes,
	    s->error ? ": " : "", s->error ? s->error : "");
	sd_status("%u agents, %u sessions", s->d->nagents, s->d->nsessions);
	session_ctl_reply_pending(s);
	for (size_t i = 0; i < s->nwaiters; i++)
		session_ctl_send_info(s->waiters[i], s);
	s->nwaiters = 0;
	server_trim_soon(s->d);
}

/* The trace's writer thread wrote the footer (or failed). */
static void
session_closed_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct trace_writer_stats st;
	int rc;

	rc = trace_writer_close_finish(s->wclosing, &st);
	s->wclosing = NULL;
	event_free(s->close_ev);
	s->close_ev = NULL;
	session_finalize_end(s, rc, &st);
}

static void session_finalize_close(struct session *s);

/* Polls the devices while launches of s wait for their device tasks, at
 * most SESS_INFLIGHT_WAIT_MS after the stop; then closes. */
static void
session_inflight_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct timeval tv = { 0, SESS_INFLIGHT_POLL_MS * 1000 };

	session_dev_poll(s->d);
	if (session_dev_inflight(s) &&
	    util_monotonic_ns() < s->inflight_until &&
	    evtimer_add(s->inflight_tv, &tv) == 0)
		return;
	session_finalize_close(s);
}

/*
 * Drains what is left; then, while launches wait for device tasks that
 * are still queued on the device, polls the channels on a timer (the loop
 * goes on meanwhile; bounded by SESS_INFLIGHT_WAIT_MS), and closes
 * (session_finalize_close).
 */
static void
session_finalize(struct session *s)
{
	struct sess_agent *sa;
	struct timeval tv = { 0, SESS_INFLIGHT_POLL_MS * 1000 };

	if (s->finalizing)
		return;
	s->finalizing = true;
	if (s->ack_tv != NULL)
		evtimer_del(s->ack_tv);
	if (s->drain_tv != NULL)
		evtimer_del(s->drain_tv);
	if (s->dur_tv != NULL)
		evtimer_del(s->dur_tv);
	TAILQ_FOREACH(sa, &s->agents, entry) {
		session_drain_agent(sa);
		session_agent_release(sa);
	}
	/* Device tasks of the last launches. */
	session_dev_poll(s->d);
	if (session_dev_inflight(s) && (s->inflight_tv = evtimer_new(s->d->base,
	    session_inflight_cb, s)) != NULL) {
		s->inflight_until = util_monotonic_ns() +
		    SESS_INFLIGHT_WAIT_MS * 1000000ull;
		if (evtimer_add(s->inflight_tv, &tv) == 0)
			return;
	}
	session_finalize_close(s);
}

/*
 * Writes the last records and closes the trace.  The writer's thread does
 * the closing writes; the session stays "stopping" until it is done
 * (session_closed_cb), so no reply says finalized before the file is
 * whole, and the loop never waits for the disk.
 */
static void
session_finalize_close(struct session *s)
{
	struct trace_footer f;
	struct trace_writer_stats st;
	int rc, fd;

	if (s->inflight_tv != NULL) {
		event_free(s->inflight_tv);
		s->inflight_tv = NULL;
	}
	/* Whatever still waits for the device is lost. */
	session_dev_join_flush(s);
	/* The last metrics point of each device, here rather than when
	 * finalizing began: a device an agent names during the wait for
	 * in-flight tasks (its note came late) has its first point then. */
	session_dev_last_metrics(s);
	if (s->msub != NULL) {
		metrics_unsubscribe(s->msub);
		s->msub = NULL;
	}
	session_dev_clock_records(s, s->devmask);
	session_dev_release(s);
	s->end_ns = util_realtime_ns();
	if (s->ring_mode && s->outfd >= 0 && s->error == NULL) {
		uint64_t n;

		if ((rc = session_flight_write(s, s->outfd, &n,
		    &s->wclosing)) != 0)
			session_fail(s, rc, "writing the trace");
	}
	if (s->w == NULL && s->wclosing == NULL) {
		session_finalize_end(s, 0, NULL);
		return;
	}
	if (s->w != NULL) {
		char why[320], steps[256];

		session_steps_describe(s, steps, sizeof(steps));
		snprintf(why, sizeof(why), "%s%s%s", s->stop_reason ?
		    s->stop_reason : "stopped", *steps ? "; " : "", steps);
		session_sink_event(s, SESSION_EV_STOP, 0, why);
	}
	memset(&f, 0, sizeof(f));
	f.end_ns = s->end_ns;
	session_drain_losses(s, f.losses);
	/* No record goes to the writer from here on. */
	if (s->w != NULL)
		s->wclosing = s->w;
	s->w = NULL;
	if ((fd = trace_writer_close_start(s->wclosing, &f)) >= 0 &&
	    (s->close_ev = event_new(s->d->base, fd, EV_READ,
	    session_closed_cb, s)) != NULL && event_add(s->close_ev, NULL) == 0) {
		s->close_fd = fd;
		return;
	}
	if (s->close_ev != NULL) {
		event_free(s->close_ev);
		s->close_ev = NULL;
	}
	/* A synchronous writer (or no event): close here. */
	rc = fd >= 0 ? trace_writer_close_finish(s->wclosing, &st) :
	    trace_writer_close(s->wclosing, &f, &st);
	s->wclosing = NULL;
	session_finalize_end(s, rc, &st);
}

/* Waits (daemon shutdown) for a trace being closed by its thread, at most
 * SESS_CLOSE_WAIT_MS. */
static void
session_finalize_wait(struct session *s)
{
	struct pollfd pf = { s->close_fd, POLLIN, 0 };

	if (s->close_ev == NULL)
		return;
	if (poll(&pf, 1, SESS_CLOSE_WAIT_MS) == 1)
		session_closed_cb(s->close_fd, EV_READ, s);
	else
		log_warnx("session %llu: the trace is still being written; "
		    "it may be incomplete", (unsigned long long)s->id);
}

/* Finalizes a stopping session once no agent is left to ack. */
void
session_check_done(struct session *s)
{
	struct sess_agent *sa;
	bool live = false, any_started = false;

	if (session_done(s))
		return;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (sa->state == SA_STARTING || sa->state == SA_ACTIVE ||
		    sa->state == SA_STOPPING)
			live = true;
		if (sa->state != SA_FAILED)
			any_started = true;
	}
	if (s->state == SESS_STOPPING && !live) {
		session_finalize(s);
		return;
	}
	/* A pid-targeted session whose processes all left ends by itself;
	 * a job selector waits for the job to come back (elastic). */
	if (s->state == SESS_ACTIVE && !live && !s->elastic) {
		if (!any_started && s->error == NULL)
			s->error = strdup("no target could be captured");
		session_stop(s, any_started ? "targets exited" : "no targets");
		return;
	}
	/* The ranks still owing steps may have left. */
	if (s->state == SESS_ACTIVE && session_steps_check(s))
		session_stop(s, "steps");
}

/*
 * Stops s: StopCapture to every capturing agent; finalization follows
 * their acks (or the ack timeout).
 */
void
session_stop(struct session *s, const char *reason)
{
	Mspti__StopCapture sc = MSPTI__STOP_CAPTURE__INIT;
	struct sess_agent *sa, *next;
	struct timeval tv = { SESS_ACK_TIMEOUT_MS / 1000,
	    (SESS_ACK_TIMEOUT_MS % 1000) * 1000 };

	if (session_done(s) || s->state == SESS_STOPPING)
		return;
	if (s->stop_reason == NULL)
		s->stop_reason = reason;
	s->state = SESS_STOPPING;
	log_info("session %llu stopping (%s)", (unsigned long long)s->id,
	    s->stop_reason);
	sc.session_id = s->id;
	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next) {
		if (sa->state != SA_ACTIVE && sa->state != SA_STARTING)
			continue;
		sa->state = SA_STOPPING;
		if (sa->agent == NULL || peer_send(sa->agent->peer,
		    MSPTI__MSG_TYPE__MSG_STOP_CAPTURE, &sc.base, -1) != 0)
			continue;	/* finished by registry_remove */
	}
	if (session_done(s))
		return;
	evtimer_add(s->ack_tv, &tv);
	session_check_done(s);
}

void
session_free(struct session *s)
{
	struct sess_agent *sa;

	if (s == NULL)
		return;
	/* For msptid's node-wide counters (httpmetrics.c). */
	if (s->d != NULL) {
		uint64_t lost[LOSS_STAGE_MAX];

		session_drain_losses(s, lost);
		for (unsigned i = 0; i < LOSS_STAGE_MAX; i++)
			s->d->retired_losses[i] += lost[i];
		s->d->retired_records += s->records;
	}
	while ((sa = TAILQ_FIRST(&s->agents)) != NULL) {
		TAILQ_REMOVE(&s->agents, sa, entry);
		if (sa->agent != NULL && sa->agent->session_id == s->id)
			sa->agent->session_id = 0;
		session_agent_free(sa);
	}
	if (s->msub != NULL)
		metrics_unsubscribe(s->msub);
	session_dev_release(s);
	if (s->drain_tv != NULL)
		event_free(s->drain_tv);
	if (s->dur_tv != NULL)
		event_free(s->dur_tv);
	if (s->ack_tv != NULL)
		event_free(s->ack_tv);
	if (s->inflight_tv != NULL)
		event_free(s->inflight_tv);
	trace_writer_abort(s->w);
	while (!TAILQ_EMPTY(&s->snaps))
		session_ctl_snap_free(TAILQ_FIRST(&s->snaps));
	if (s->close_ev != NULL)
		event_free(s->close_ev);
	trace_writer_abort(s->wclosing);
	if (s->outfd >= 0)
		close(s->outfd);
	for (size_t i = 0; i < s->ndomains_off; i++)
		free(s->domains_off[i]);
	free(s->domains_off);
	free(s->waiters);
	free(s->ranks);
	free(s->job_id);
	free(s->output);
	free(s->error);
	free(s->target_text);
	free(s->step_name);
	if (s->pending_acks != NULL) {
		session_ctl_acks_free(s->pending_acks);
		free(s->pending_acks);
	}
	free(s);
}

/* Forgets finished sessions beyond the newest SESS_KEEP_DONE. */
void
session_gc(struct daemon *d)
{
	struct session *s, *next;
	size_t done = 0;

	TAILQ_FOREACH_REVERSE(s, &d->sessions, session_list, entry)
		if (session_done(s) && ++done > SESS_KEEP_DONE)
			break;
	if (s == NULL)
		return;
	while (s != NULL) {
		next = TAILQ_PREV(s, session_list, entry);
		if (session_done(s) && s->reply_peer == NULL &&
		    s->nwaiters == 0) {
			TAILQ_REMOVE(&d->sessions, s, entry);
			session_free(s);
		}
		s = next;
	}
}

void
session_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct sess_agent *sa, *next;

	/* Agents that did not ack in time: out of the capture. */
	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next) {
		sa->pending = false;
		if (sa->state == SA_STARTING) {
			session_agent_finish(sa, "agent did not answer");
			if (session_done(s))
				return;
		} else if (sa->state == SA_STOPPING)
			session_agent_finish(sa, "agent did not ack stop");
		if (session_done(s))
			return;
	}
	s->npending = 0;
	/* The window with the agents that answered; no more waiting. */
	if (session_steps_choose(s)) {
		TAILQ_FOREACH(sa, &s->agents, entry)
			sa->pending = false;
		s->npending = 0;
	}
	if (s->state == SESS_STARTING) {
		s->state = SESS_ACTIVE;
		session_check_done(s);
	}
	session_ctl_reply_pending(s);
}

void
session_duration_cb(evutil_socket_t fd, short what, void *arg)
{
	session_stop(arg, "duration");
}

/* Does s's selector pick agent a (for --job/--rank/--all joins)? */
bool
session_selects(const struct session *s, const struct agent *a)
{
	bool rank_ok = s->nranks == 0;

	for (size_t i = 0; i < s->nranks; i++)
		if (s->ranks[i] == a->rank)
			rank_ok = true;
	if (!rank_ok)
		return false;
	if (s->job_id != NULL && strcmp(s->job_id, a->job_id) != 0)
		return false;
	return s->all || s->job_id != NULL || s->nranks > 0;
}

/* ORs the masks of names into *mask; -1 with a message in bad for an
 * unknown name. */
int
session_parse_kinds(char **names, size_t n, uint32_t *mask, char *bad,
    size_t badlen)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t m = session_kind_mask(names[i]);

		if (m == 0) {
			int o = snprintf(bad, badlen, "unknown kind '%.64s' "
			    "(kinds:", names[i]);

			/* The list from the table, so a new kind is named. */
			for (size_t k = 0; k < nitems(sess_kinds) && o > 0 &&
			    (size_t)o < badlen; k++)
				o += snprintf(bad + o, badlen - (size_t)o,
				    "%s %s", k ? "," : "", sess_kinds[k].name);
			if (o > 0 && (size_t)o < badlen)
				snprintf(bad + o, badlen - (size_t)o, ")");
			return -1;
		}
		*mask |= m;
	}
	return 0;
}

/* Turns domains on (forgets them) and off (adds them, once each) in s's
 * list; -1 beyond SESS_MAX_DOMAINS or without memory. */
int
session_domains_set(struct session *s, char **on, size_t non, char **off,
    size_t noff)
{
	for (size_t i = 0; i < non; i++)
		for (size_t j = 0; j < s->ndomains_off; j++)
			if (strcmp(s->domains_off[j], on[i]) == 0) {
				free(s->domains_off[j]);
				s->domains_off[j] =
				    s->domains_off[--s->ndomains_off];
				break;
			}
	for (size_t i = 0; i < noff; i++) {
		bool have = false;
		char **v;

		for (size_t j = 0; j < s->ndomains_off; j++)
			if (strcmp(s->domains_off[j], off[i]) == 0)
				have = true;
		if (have)
			continue;
		if (s->ndomains_off >= SESS_MAX_DOMAINS)
			return -1;
		v = realloc(s->domains_off, (s->ndomains_off + 1) *
		    sizeof(*v));
		if (v == NULL)
			return -1;
		s->domains_off = v;
		if ((v[s->ndomains_off] = strndup(off[i], 256)) == NULL)
			return -1;
		s->ndomains_off++;
	}
	return 0;
}

/* Agent -> daemon: the answer to StartCapture, UpdateCapture, StopCapture,
 * or news of the first step an agent's window records. */
int
session_capture_ack(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__CaptureAck *ack = (const Mspti__CaptureAck *)m;
	struct session *s = session_find(p->d, ack->session_id);
	struct sess_agent *sa = NULL;
	int fd = peer_take_fd(p);

	if (s != NULL)
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->agent == p->agent)
				break;
	if (sa == NULL) {
		/* A late ack for a session that is gone. */
		if (fd >= 0)
			close(fd);
		return 0;
	}
	switch (ack->op) {
	case MSPTI__CAPTURE_OP__CAPTURE_START:
		if (sa->state != SA_STARTING && sa->state != SA_STOPPING)
			break;
		if (ack->code == 0 && fd >= 0 && sa->capture_ns == 0)
			/* Its capture began now, even if the session is
			 * already stopping (a short --duration). */
			sa->capture_ns = util_realtime_ns();
		if (ack->code != 0 || fd < 0) {
			session_agent_finish(sa, ack->message && *ack->message ?
			    ack->message : "agent refused the capture");
		} else if (sa->state == SA_STARTING) {
			sa->state = SA_ACTIVE;
			sa->evfd = fd;
			fd = -1;
			sa->ev = event_new(p->d->base, sa->evfd,
			    EV_READ | EV_PERSIST, session_drain_wake_cb, sa);
			if (sa->ev != NULL)
				event_add(sa->ev, NULL);
			ring_arm_wake(sa->ring, sa->wake_threshold);
			session_dev_start(sa, p->agent);
			session_sink_process(s, p->agent);
			session_sink_event(s, SESSION_EV_AGENT_JOIN,
			    (uint32_t)sa->pid, "capturing");
			sa->fork_lost = ack->fork_lost;
			session_steps_ack(sa, ack->step, ack->step_period_ns,
			    ack->first_step, ack->step_source, true);
		}
		if (sa->pending && !session_done(s)) {
			sa->pending = false;
			session_pending_done(s);
		}
		break;
	case MSPTI__CAPTURE_OP__CAPTURE_UPDATE:
		if (ack->code == 0)
			session_steps_ack(sa, ack->step, ack->step_period_ns,
			    ack->first_step, ack->step_source, false);
		if (s->stop_reason != NULL && s->state == SESS_ACTIVE &&
		    !sa->pending) {
			session_stop(s, s->stop_reason);
			break;
		}
		if (sa->pending) {
			sa->pending = false;
			session_pending_done(s);
		}
		break;
	case MSPTI__CAPTURE_OP__CAPTURE_STOP:
		if (sa->state == SA_STOPPING || sa->state == SA_ACTIVE)
			session_agent_finish(sa, NULL);
		break;
	case MSPTI__CAPTURE_OP__CAPTURE_FIRST:
		if (sa->state == SA_ACTIVE &&
		    session_steps_first(sa, ack->first_step) &&
		    s->state == SESS_ACTIVE && s->npending == 0)
			session_stop(s, s->stop_reason ? s->stop_reason :
			    "steps");
		break;
	default:
		break;
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/* A new agent registered: job selectors with room take it (elastic).
 * Returns -1 when the agent's peer was dropped meanwhile. */
int
session_agent_registered(struct daemon *d, struct agent *a)
{
	struct session *s;
	const char *why;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (s->state != SESS_ACTIVE || !s->elastic ||
		    !session_selects(s, a) ||
		    !ctl_may_act_on(&s->owner, a->cred.uid))
			continue;
		pid_t pid = a->cred.pid;
		int rc;

		if ((rc = session_attach(s, a, &why)) != 0) {
			log_warnx("session %llu: pid %ld cannot join: %s",
			    (unsigned long long)s->id, (long)pid, why);
			/* -2: a and its peer are gone. */
			return rc == -2 ? -1 : 0;
		}
		/* Its ack is not awaited by anyone. */
		TAILQ_LAST(&s->agents, sess_agent_list)->pending = false;
		s->npending--;
		log_info("session %llu: pid %ld joins",
		    (unsigned long long)s->id, (long)a->cred.pid);
		return 0;
	}
	return 0;
}

/* The agent's connection closed (the process exited or was killed): its
 * ring stays mapped here, so every record it wrote is still drained. */
void
session_agent_gone(struct daemon *d, struct agent *a)
{
	struct session *s, *next;
	struct sess_agent *sa;
	bool pending;

	TAILQ_FOREACH_SAFE(s, &d->sessions, entry, next) {
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if (sa->agent != a)
				continue;
			sa->agent = NULL;
			pending = sa->pending;
			sa->pending = false;
			session_agent_finish(sa, "agent exited");
			if (pending && !session_done(s))
				session_pending_done(s);
			break;
		}
	}
}

/* A ctl connection closed: forget it wherever it waits. */
void
session_peer_gone(struct daemon *d, struct peer *p)
{
	struct session *s;

	session_at_peer_gone(p);
	TAILQ_FOREACH(s, &d->sessions, entry) {
		struct sess_snap *sn;

		if (s->reply_peer == p)
			s->reply_peer = NULL;
		TAILQ_FOREACH(sn, &s->snaps, entry)
			if (sn->p == p)
				sn->p = NULL;
		for (size_t i = 0; i < s->nwaiters; i++)
			if (s->waiters[i] == p)
				s->waiters[i--] = s->waiters[--s->nwaiters];
	}
}

/* Daemon shutdown: finalize every live session so their files are whole. */
void
session_shutdown(struct daemon *d)
{
	struct session *s;

	session_at_shutdown();
	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		if (s->stop_reason == NULL)
			s->stop_reason = "daemon shutdown";
		s->state = SESS_STOPPING;
		session_finalize(s);
		/* No wait for the device at shutdown. */
		if (s->inflight_tv != NULL)
			session_finalize_close(s);
		session_finalize_wait(s);
	}
	while ((s = TAILQ_FIRST(&d->sessions)) != NULL) {
		TAILQ_REMOVE(&d->sessions, s, entry);
		free(s->waiters);
		s->waiters = NULL;
		session_free(s);
	}
}

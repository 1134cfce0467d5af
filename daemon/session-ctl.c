/*
 * Control requests on sessions: start, stop, wait, retarget, snapshot and
 * the list; the per-target acks and SessionInfo replies.
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

static void
session_ctl_ack_info(Mspti__TargetAck *t, const struct sess_agent *sa,
    uint64_t losses[LOSS_STAGE_MAX])
{
	static const char *names[] = {
		[SA_STARTING] = "starting",
		[SA_ACTIVE] = "capturing",
		[SA_STOPPING] = "stopping",
		[SA_DONE] = "done",
		[SA_FAILED] = "failed",
	};

	mspti__target_ack__init(t);
	t->pid = (uint32_t)sa->pid;
	t->agent_id = sa->agent_id;
	t->rank = sa->rank;
	t->code = sa->state == SA_FAILED ? 1 : 0;
	t->message = sa->state == SA_FAILED && sa->error != NULL ? sa->error :
	    sa->win_note != NULL ? sa->win_note : sa->error != NULL ?
	    sa->error : (char *)names[sa->state];
	t->first_step = sa->first_known ? sa->first_step : -1;
	t->steps = sa->win_steps;
	t->window_start_ns = sa->win_open_ns;
	t->step_now = session_steps_now(sa);
	t->step_period_ns = sa->step_period_ns;
	t->capture_start_ns = sa->capture_ns;
	t->step_source = (char *)session_steps_source(sa->step_src);
	if (losses != NULL) {
		session_drain_agent_losses(sa, losses);
		t->losses = losses;
		t->n_losses = LOSS_STAGE_MAX;
	}
}

/* Fills info for s; *bufs hold what must be freed with session_ctl_info_free. */
struct sess_info_bufs {
	Mspti__TargetAck	*acks;
	Mspti__TargetAck	**ptrs;
	uint64_t		(*tlosses)[LOSS_STAGE_MAX];	/* per target */
	char			*kinds[16];
	uint64_t		 losses[LOSS_STAGE_MAX];
};

static void
session_ctl_info(struct session *s, Mspti__SessionInfo *i,
    struct sess_info_bufs *b)
{
	struct sess_agent *sa;
	size_t n = 0;

	mspti__session_info__init(i);
	memset(b, 0, sizeof(*b));
	i->session_id = s->id;
	i->state = (char *)session_state_names[s->state];
	i->uid = (uint32_t)s->owner.uid;
	i->output = s->output;
	i->error = s->error != NULL ? s->error : (char *)"";
	i->start_ns = s->start_ns;
	i->end_ns = s->end_ns;
	i->n_kinds = session_kind_names(s->kinds, b->kinds);
	i->kinds = b->kinds;
	i->mode = (char *)(s->ring_mode ? "ring" : "stream");
	i->records = s->records;
	i->bytes = s->bytes;
	if (s->w != NULL) {
		struct trace_writer_stats st;

		trace_writer_get_stats(s->w, &st);
		i->bytes = st.file_bytes;
	}
	session_drain_losses(s, b->losses);
	i->losses = b->losses;
	i->n_losses = LOSS_STAGE_MAX;
	i->steps = s->steps_seen;
	i->step_from = s->steps_max > 0 ? s->step_from : -1;
	i->step_skew_ns = session_steps_skew(s);
	session_dev_waiting(s, &i->dev_tasks_waiting, &i->launches_waiting);
	i->stop_reason = (char *)(s->stop_reason ? s->stop_reason : "");
	i->target = s->target_text;
	TAILQ_FOREACH(sa, &s->agents, entry)
		n++;
	if (n > 0) {
		b->acks = calloc(n, sizeof(*b->acks));
		b->ptrs = calloc(n, sizeof(*b->ptrs));
		b->tlosses = calloc(n, sizeof(*b->tlosses));
		if (b->acks == NULL || b->ptrs == NULL || b->tlosses == NULL)
			n = 0;
	}
	i->n_targets = 0;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (i->n_targets >= n)
			break;
		session_ctl_ack_info(&b->acks[i->n_targets], sa,
		    b->tlosses[i->n_targets]);
		b->ptrs[i->n_targets] = &b->acks[i->n_targets];
		i->n_targets++;
	}
	i->targets = b->ptrs;
}

static void
session_ctl_info_free(struct sess_info_bufs *b)
{
	free(b->acks);
	free(b->ptrs);
	free(b->tlosses);
}

int
session_ctl_send_info(struct peer *p, struct session *s)
{
	Mspti__SessionInfo i;
	struct sess_info_bufs b;
	int rc;

	session_ctl_info(s, &i, &b);
	rc = peer_send(p, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &i.base, -1);
	session_ctl_info_free(&b);
	return rc;
}

static void
session_ctl_acks_add(struct sess_acks *k, uint32_t pid, int code,
    const struct agent *a, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void
session_ctl_acks_add(struct sess_acks *k, uint32_t pid, int code,
    const struct agent *a, const char *fmt, ...)
{
	Mspti__TargetAck *t;
	va_list ap;
	char buf[256];

	if (k->n >= SESS_MAX_TARGETS)
		return;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		Mspti__TargetAck *v = realloc(k->v, cap * sizeof(*v));

		if (v == NULL)
			return;
		k->v = v;
		k->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	t = &k->v[k->n];
	mspti__target_ack__init(t);
	t->pid = pid;
	t->code = code;
	t->agent_id = a ? a->id : 0;
	t->rank = a ? a->rank : -1;
	k->msgs[k->n] = strdup(buf);
	t->message = k->msgs[k->n] ? k->msgs[k->n] : (char *)"";
	k->n++;
}

void
session_ctl_acks_free(struct sess_acks *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->msgs[i]);
	free(k->v);
	k->v = NULL;
	k->n = k->cap = 0;
}

/* Replaces the acks of agents we attached with their final state. */
static void
session_ctl_acks_final(struct session *s, struct sess_acks *k)
{
	struct sess_agent *sa;

	for (size_t i = 0; i < k->n; i++) {
		if (k->v[i].code != 0)
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if ((uint32_t)sa->pid != k->v[i].pid)
				continue;
			if (sa->state == SA_FAILED) {
				k->v[i].code = 1;
				free(k->msgs[i]);
				k->msgs[i] = strdup(sa->error ? sa->error :
				    "capture failed");
				k->v[i].message = k->msgs[i] ? k->msgs[i] :
				    (char *)"capture failed";
			} else if (sa->state == SA_ACTIVE) {
				k->v[i].message = sa->win_note != NULL ?
				    sa->win_note : (char *)"capturing";
				k->v[i].first_step = sa->first_known ?
				    sa->first_step : -1;
				k->v[i].step_now = session_steps_now(sa);
				k->v[i].step_period_ns = sa->step_period_ns;
				k->v[i].capture_start_ns = sa->capture_ns;
			} else if (sa->state == SA_DONE) {
				k->v[i].message = sa->error ? sa->error :
				    (char *)"done";
			}
			/* A short session may be stopping by the time the
			 * reply goes out: its capture began all the same. */
			k->v[i].capture_start_ns = sa->capture_ns;
		}
	}
}

/* Sends the pending start or retarget reply, if any. */
void
session_ctl_reply_pending(struct session *s)
{
	struct sess_info_bufs b;
	Mspti__SessionInfo i;
	Mspti__TargetAck **ptrs = NULL;
	struct peer *p = s->reply_peer;

	if (p == NULL) {
		/* The requester hung up: nobody takes these. */
		session_ctl_acks_free(s->pending_acks);
		return;
	}
	s->reply_peer = NULL;
	if (s->ack_tv != NULL)
		evtimer_del(s->ack_tv);
	session_ctl_acks_final(s, s->pending_acks);
	if (s->pending_acks->n > 0 &&
	    (ptrs = calloc(s->pending_acks->n, sizeof(*ptrs))) != NULL)
		for (size_t k = 0; k < s->pending_acks->n; k++)
			ptrs[k] = &s->pending_acks->v[k];
	session_ctl_info(s, &i, &b);
	if (s->reply_type == MSPTI__MSG_TYPE__MSG_START_SESSION_REP) {
		Mspti__StartSessionReply r = MSPTI__START_SESSION_REPLY__INIT;

		r.session = &i;
		r.acks = ptrs;
		r.n_acks = ptrs ? s->pending_acks->n : 0;
		peer_send(p, s->reply_type, &r.base, -1);
	} else {
		Mspti__RetargetReply r = MSPTI__RETARGET_REPLY__INIT;

		r.session = &i;
		r.acks = ptrs;
		r.n_acks = ptrs ? s->pending_acks->n : 0;
		peer_send(p, s->reply_type, &r.base, -1);
	}
	session_ctl_info_free(&b);
	free(ptrs);
	session_ctl_acks_free(s->pending_acks);
}

/* Resolves explicit pids, attaching those the caller may capture. */
static void
session_ctl_add_pids(struct session *s, struct peer *p, uint32_t *pids,
    size_t n, struct sess_acks *k)
{
	const char *why;
	int rc;

	for (size_t i = 0; i < n; i++) {
		struct agent *a = registry_find_pid(s->d, (pid_t)pids[i]);

		if (a == NULL) {
			session_ctl_acks_add(k, pids[i], 3, NULL,
			    "no agent registered with pid %u", pids[i]);
			continue;
		}
		if (!ctl_may_act_on(&p->cred, a->cred.uid)) {
			session_ctl_acks_add(k, pids[i], 3, a,
			    "permission denied: pid %u belongs to uid %lu",
			    pids[i], (unsigned long)a->cred.uid);
			continue;
		}
		if ((rc = session_attach(s, a, &why)) != 0) {
			session_ctl_acks_add(k, pids[i], 1, rc == -2 ? NULL : a,
			    "%s", why);
			continue;
		}
		session_ctl_acks_add(k, pids[i], 0, a, "starting");
	}
}

static int	session_ctl_start_refuse(struct peer *p,
		    const Mspti__StartSession *req, int fd, uint32_t *kinds,
		    int *rc);

int
session_ctl_start(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__StartSession *req = (const Mspti__StartSession *)m;
	int fd = peer_take_fd(p);
	uint64_t now = util_realtime_ns();
	uint32_t kinds;
	int rc;

	/* At an instant (start --start-at): checked now, started then.
	 * MSPTID_TEST_NO_START_AT: as an msptid before held starts, which
	 * does not know the field (for the client's check of that). */
	if (req->start_at_ns > now &&
	    getenv("MSPTID_TEST_NO_START_AT") == NULL) {
		if (req->start_at_ns - now > SESS_START_AT_MAX_NS) {
			if (fd >= 0)
				close(fd);
			return peer_send_error(p, 2, "start: the start instant "
			    "is more than 10 minutes ahead");
		}
		/* Everything the start itself checks, at once. */
		if (session_ctl_start_refuse(p, req, fd, &kinds, &rc))
			return rc;
		return session_at_defer(p, req, fd);
	}
	return session_ctl_start_fd(p, req, fd);
}

/*
 * A start's request checked, before anything is made of it: false when it
 * may start (*kinds: its kinds); else true, fd closed and the error sent
 * (*rc: the send's result).  A deferred start is checked so at once.
 */
static int
session_ctl_start_refuse(struct peer *p, const Mspti__StartSession *req,
    int fd, uint32_t *kinds, int *rc)
{
	const Mspti__SessionConfig *cfg = req->config;
	const Mspti__SessionTarget *tg = req->target;
	struct daemon *d = p->d;
	uint64_t want = cfg != NULL && cfg->buffer_size ? cfg->buffer_size :
	    RING_DEFAULT_CAPACITY;
	bool ring = cfg != NULL && cfg->mode != NULL &&
	    strcmp(cfg->mode, "ring") == 0;
	char bad[256];
	struct stat st;
	int fl;

	*kinds = 0;
	if (tg == NULL || (tg->n_pids == 0 && !tg->all && tg->n_ranks == 0 &&
	    (tg->job_id == NULL || *tg->job_id == '\0')))
		snprintf(bad, sizeof(bad), "no target given (--pid, --job, "
		    "--rank or --all)");
	else if (tg->n_pids > SESS_MAX_TARGETS ||
	    tg->n_ranks > SESS_MAX_TARGETS)
		snprintf(bad, sizeof(bad), "too many targets");
	else if (fd < 0)
		snprintf(bad, sizeof(bad), "no output file descriptor came "
		    "with the request");
	/* The CLI opened the file as the requester; we only write to it.
	 * Only a regular file: a pipe or device whose reader stalls would
	 * stall the writer. */
	else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (fl = fcntl(fd, F_GETFL)) < 0 || (fl & O_ACCMODE) == O_RDONLY)
		snprintf(bad, sizeof(bad), "the output must be a regular file "
		    "open for writing");
	else if (cfg != NULL && session_parse_kinds(cfg->kinds, cfg->n_kinds,
	    kinds, bad, sizeof(bad)) != 0)
		;	/* bad says which */
	else if (cfg != NULL && cfg->mode != NULL && *cfg->mode != '\0' &&
	    strcmp(cfg->mode, "stream") != 0 && strcmp(cfg->mode, "ring") != 0)
		snprintf(bad, sizeof(bad), "unknown mode '%.32s' (stream or "
		    "ring)", cfg->mode);
	else if (cfg != NULL && cfg->buffer_size != 0 &&
	    (cfg->buffer_size < RING_MIN_CAPACITY ||
	    cfg->buffer_size > RING_MAX_CAPACITY))
		snprintf(bad, sizeof(bad), "buffer size must be between 4K "
		    "and 1G");
	/* A flight recorder per target in msptid's memory: one that alone
	 * passes the caps is refused here (the others at each attach). */
	else if (ring && (want > d->lim.ring_mem_per_uid ||
	    want > d->lim.ring_mem_total))
		snprintf(bad, sizeof(bad), "a %llu KiB ring buffer exceeds "
		    "msptid's ring memory cap (%llu KiB per uid, %llu KiB in "
		    "all; msptid --ring-memory-per-uid/--ring-memory-total)",
		    (unsigned long long)(want >> 10),
		    (unsigned long long)(d->lim.ring_mem_per_uid >> 10),
		    (unsigned long long)(d->lim.ring_mem_total >> 10));
	else {
		if (*kinds == 0)
			*kinds = SESS_DEFAULT_KINDS;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	*rc = peer_send_error(p, 2, "start: %s", bad);
	return 1;
}

/* A start, now; takes fd (-1: none came). */
int
session_ctl_start_fd(struct peer *p, const Mspti__StartSession *req, int fd)
{
	const Mspti__SessionConfig *cfg = req->config;
	const Mspti__SessionTarget *tg = req->target;
	struct daemon *d = p->d;
	struct session *s = NULL;
	struct sess_acks *k = NULL;
	struct agent *a;
	char tt[256];
	int rc;
	uint32_t kinds;
	const char *why;

	if (session_ctl_start_refuse(p, req, fd, &kinds, &rc))
		return rc;
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (k = calloc(1, sizeof(*k))) == NULL)
		goto nomem;
	s->d = d;
	s->id = d->next_session_id++;
	s->owner = p->cred;
	s->outfd = fd;
	fd = -1;
	s->kinds = kinds;
	s->kinds_ever = kinds;
	s->state = SESS_STARTING;
	s->start_ns = util_realtime_ns();
	for (unsigned i = 0; i < nitems(s->kind_on_ns); i++)
		s->kind_on_ns[i] = s->start_ns;
	s->pending_acks = k;
	TAILQ_INIT(&s->agents);
	TAILQ_INIT(&s->snaps);
	s->output = strdup(req->output ? req->output : "");
	s->ring_mode = cfg != NULL && cfg->mode != NULL &&
	    strcmp(cfg->mode, "ring") == 0;
	s->buffer_size = cfg && cfg->buffer_size ? cfg->buffer_size :
	    RING_DEFAULT_CAPACITY;
	/* The shared ring is a power of two no larger than the buffer. */
	s->ring_size = RING_MIN_CAPACITY;
	while (s->ring_size * 2 <= s->buffer_size &&
	    s->ring_size * 2 <= RING_MAX_CAPACITY)
		s->ring_size *= 2;
	if (s->ring_mode && s->ring_size > (1u << 20))
		s->ring_size = 1u << 20;
	s->duration_ns = cfg ? cfg->duration_ns : 0;
	s->steps_max = cfg ? cfg->steps : 0;
	s->step_forced = s->steps_max > 0 && cfg->start_step_set;
	s->step_from = s->step_forced ? (int64_t)(cfg->start_step > INT64_MAX /
	    2 ? INT64_MAX / 2 : cfg->start_step) : -1;
	s->step_name = strdup(cfg && cfg->step_name && *cfg->step_name ?
	    cfg->step_name : "step");
	s->max_size = cfg ? cfg->max_size : 0;
	if (cfg != NULL && session_domains_set(s, NULL, 0, cfg->domains_off,
	    cfg->n_domains_off) != 0)
		goto nomem;
	s->all = tg->all;
	if (tg->job_id != NULL && *tg->job_id != '\0' &&
	    (s->job_id = strndup(tg->job_id, 256)) == NULL)
		goto nomem;
	if (tg->n_ranks > 0) {
		if ((s->ranks = calloc(tg->n_ranks, sizeof(*s->ranks))) == NULL)
			goto nomem;
		memcpy(s->ranks, tg->ranks, tg->n_ranks * sizeof(*s->ranks));
		s->nranks = tg->n_ranks;
	}
	s->elastic = tg->n_pids == 0;
	if (tg->n_pids > 0)
		snprintf(tt, sizeof(tt), "pid %u%s", tg->pids[0],
		    tg->n_pids > 1 ? ",..." : "");
	else if (s->job_id != NULL)
		snprintf(tt, sizeof(tt), "job %s%s", s->job_id,
		    s->nranks ? " ranks" : "");
	else if (s->nranks > 0)
		snprintf(tt, sizeof(tt), "rank %d%s", s->ranks[0],
		    s->nranks > 1 ? ",..." : "");
	else
		snprintf(tt, sizeof(tt), "all");
	s->target_text = strdup(tt);
	s->drain_tv = event_new(d->base, -1, EV_PERSIST, session_drain_cb, s);
	s->ack_tv = evtimer_new(d->base, session_timeout_cb, s);
	s->dur_tv = evtimer_new(d->base, session_duration_cb, s);
	if (s->output == NULL || s->step_name == NULL ||
	    s->target_text == NULL || s->drain_tv == NULL ||
	    s->ack_tv == NULL || s->dur_tv == NULL)
		goto nomem;
	/* The devices of the targets known now, so the header has their
	 * clock models; later agents add theirs when they join. */
	if (d->devcol != NULL)
		devcol_set_filter(d->devcol, session_dev_filter, d);
	if (tg->n_pids > 0) {
		for (size_t i = 0; i < tg->n_pids; i++) {
			a = registry_find_pid(d, (pid_t)tg->pids[i]);
			if (a != NULL && a->session_id == 0 &&
			    ctl_may_act_on(&p->cred, a->cred.uid))
				session_dev_use(s, a);
		}
	} else
		TAILQ_FOREACH(a, &d->agents, entry)
			if (session_selects(s, a) && a->session_id == 0 &&
			    ctl_may_act_on(&p->cred, a->cred.uid))
				session_dev_use(s, a);
	/* Compression and writes go to the writer's own thread: neither
	 * zstd nor a slow disk delays the loop (chunks beyond
	 * lim.write_queue count as disk loss). */
	if (!s->ring_mode && (rc = session_sink_open(s, s->outfd,
	    d->lim.write_queue, &s->w)) != 0) {
		session_free(s);
		return peer_send_error(p, 1, "start: cannot write the trace: %s",
		    strerror(-rc));
	}
	session_gc(d);
	TAILQ_INSERT_TAIL(&d->sessions, s, entry);
	d->nsessions++;
	session_sink_event(s, SESSION_EV_START, 0, s->target_text);
	session_dev_clock_records(s, s->devmask);
	if (d->metrics != NULL)
		s->msub = metrics_subscribe(d->metrics, session_dev_counter_cb, s);

	if (tg->n_pids > 0)
		session_ctl_add_pids(s, p, tg->pids, tg->n_pids, k);
	else {
		struct agent *next;

		TAILQ_FOREACH_SAFE(a, &d->agents, entry, next) {
			if (!session_selects(s, a))
				continue;
			if (!ctl_may_act_on(&p->cred, a->cred.uid)) {
				/* --all means "all of mine" to a non-root
				 * user; a named job or rank is refused. */
				if (!s->all || s->job_id != NULL)
					session_ctl_acks_add(k, (uint32_t)
					    a->cred.pid, 3, a,
					    "permission denied: pid %ld belongs"
					    " to uid %lu", (long)a->cred.pid,
					    (unsigned long)a->cred.uid);
				continue;
			}
			pid_t pid = a->cred.pid;

			if ((rc = session_attach(s, a, &why)) != 0)
				session_ctl_acks_add(k, (uint32_t)pid, 1,
				    rc == -2 ? NULL : a, "%s", why);
			else
				session_ctl_acks_add(k, (uint32_t)a->cred.pid, 0,
				    a, "starting");
		}
		if (k->n == 0)
			session_ctl_acks_add(k, 0, 0, NULL, "no agent matches %s "
			    "yet; new ones will join", s->target_text);
	}
	log_info("session %llu started by uid %lu: %s, %zu target(s)",
	    (unsigned long long)s->id, (unsigned long)p->cred.uid,
	    s->target_text, k->n);
	{
		struct timeval tv = { SESS_DRAIN_MS / 1000,
		    (SESS_DRAIN_MS % 1000) * 1000 };

		event_add(s->drain_tv, &tv);
	}
	if (s->duration_ns > 0) {
		struct timeval tv = { (time_t)(s->duration_ns / 1000000000ull),
		    (suseconds_t)(s->duration_ns % 1000000000ull / 1000) };

		evtimer_add(s->dur_tv, &tv);
	}
	s->reply_peer = p;
	s->reply_type = MSPTI__MSG_TYPE__MSG_START_SESSION_REP;
	if (s->npending == 0) {
		/* Nothing to wait for; ranks that join later start at step
		 * 0 (msptictl run) unless told otherwise. */
		if (s->steps_max > 0 && s->step_from < 0)
			s->step_from = 0;
		s->state = SESS_ACTIVE;
		session_ctl_reply_pending(s);
		if (!s->elastic)
			session_check_done(s);
	} else {
		struct timeval tv = { SESS_ACK_TIMEOUT_MS / 1000,
		    (SESS_ACK_TIMEOUT_MS % 1000) * 1000 };

		evtimer_add(s->ack_tv, &tv);
	}
	sd_status("%u agents, %u sessions", d->nagents, d->nsessions);
	return 0;
nomem:
	if (fd >= 0)
		close(fd);
	if (s != NULL && s->pending_acks == NULL)
		free(k);
	session_free(s);
	return peer_send_error(p, 1, "daemon out of memory");
}

/* Looks up the session of a request and checks the caller may act on it. */
static struct session *
session_ctl_lookup(struct peer *p, uint64_t id, uint32_t pid)
{
	struct session *s;
	struct agent *a;
	struct sess_agent *sa;

	if (id == 0 && pid != 0) {
		if ((a = registry_find_pid(p->d, (pid_t)pid)) == NULL ||
		    (sa = session_agent_of(p->d, a)) == NULL) {
			peer_send_error(p, 3, "no session captures pid %u", pid);
			return NULL;
		}
		s = sa->s;
	} else if ((s = session_find(p->d, id)) == NULL) {
		peer_send_error(p, 3, "no session %llu", (unsigned long long)id);
		return NULL;
	}
	if (!ctl_may_act_on(&p->cred, s->owner.uid)) {
		peer_send_error(p, 3, "permission denied: session %llu belongs "
		    "to uid %lu", (unsigned long long)s->id,
		    (unsigned long)s->owner.uid);
		return NULL;
	}
	return s;
}

static int
session_ctl_add_waiter(struct session *s, struct peer *p)
{
	struct peer **v;

	for (size_t i = 0; i < s->nwaiters; i++)
		if (s->waiters[i] == p)
			return 0;
	v = realloc(s->waiters, (s->nwaiters + 1) * sizeof(*v));
	if (v == NULL)
		return peer_send_error(p, 1, "daemon out of memory");
	s->waiters = v;
	v[s->nwaiters++] = p;
	return 0;
}

int
session_ctl_stop(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__StopSession *req = (const Mspti__StopSession *)m;
	struct session *s;

	if ((s = session_ctl_lookup(p, req->session_id, req->pid)) == NULL)
		return 0;
	if (session_done(s))
		return session_ctl_send_info(p, s);
	if (session_ctl_add_waiter(s, p) != 0)
		return 0;
	session_stop(s, "stopped by command");
	return 0;
}

int
session_ctl_wait(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__WaitSession *req = (const Mspti__WaitSession *)m;
	struct session *s;

	if ((s = session_ctl_lookup(p, req->session_id, 0)) == NULL)
		return 0;
	if (session_done(s))
		return session_ctl_send_info(p, s);
	return session_ctl_add_waiter(s, p);
}

int
session_ctl_list(struct peer *p, const ProtobufCMessage *m)
{
	Mspti__SessionsReply rep = MSPTI__SESSIONS_REPLY__INIT;
	Mspti__SessionInfo *infos = NULL, **ptrs = NULL;
	struct sess_info_bufs *bufs = NULL;
	struct session *s;
	size_t n = 0, i = 0;
	int rc;

	TAILQ_FOREACH(s, &p->d->sessions, entry)
		n++;
	if (n > 0) {
		infos = calloc(n, sizeof(*infos));
		ptrs = calloc(n, sizeof(*ptrs));
		bufs = calloc(n, sizeof(*bufs));
		if (infos == NULL || ptrs == NULL || bufs == NULL) {
			free(infos);
			free(ptrs);
			free(bufs);
			return peer_send_error(p, 1, "daemon out of memory");
		}
	}
	/* Everyone sees every session, as list shows every agent. */
	TAILQ_FOREACH(s, &p->d->sessions, entry) {
		session_ctl_info(s, &infos[i], &bufs[i]);
		ptrs[i] = &infos[i];
		i++;
	}
	rep.sessions = ptrs;
	rep.n_sessions = n;
	rc = peer_send(p, MSPTI__MSG_TYPE__MSG_SESSIONS_REP, &rep.base, -1);
	for (i = 0; i < n; i++)
		session_ctl_info_free(&bufs[i]);
	free(infos);
	free(ptrs);
	free(bufs);
	return rc;
}

static void
session_ctl_send_update(struct session *s)
{
	Mspti__UpdateCapture uc = MSPTI__UPDATE_CAPTURE__INIT;
	struct sess_agent *sa, *next;

	uc.session_id = s->id;
	uc.kinds = s->kinds;
	uc.domains_off = s->domains_off;
	uc.n_domains_off = s->ndomains_off;
	uc.step_from = -1;
	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next) {
		if (sa->state != SA_ACTIVE || sa->agent == NULL)
			continue;
		sa->pending = true;
		s->npending++;
		peer_send(sa->agent->peer, MSPTI__MSG_TYPE__MSG_UPDATE_CAPTURE,
		    &uc.base, -1);
	}
}

int
session_ctl_retarget(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__RetargetSession *req = (const Mspti__RetargetSession *)m;
	Mspti__StopCapture sc = MSPTI__STOP_CAPTURE__INIT;
	struct session *s;
	struct sess_acks *k;
	struct sess_agent *sa;
	uint32_t on = 0, off = 0;
	char bad[256], detail[512];
	bool changed;

	if ((s = session_ctl_lookup(p, req->session_id, 0)) == NULL)
		return 0;
	if (s->state != SESS_ACTIVE)
		return peer_send_error(p, 1, "session %llu is %s, not active",
		    (unsigned long long)s->id, session_state_names[s->state]);
	if (s->reply_peer != NULL)
		return peer_send_error(p, 1, "session %llu is busy with another "
		    "request; try again", (unsigned long long)s->id);
	if (session_parse_kinds(req->kinds_on, req->n_kinds_on, &on, bad,
	    sizeof(bad)) != 0 || session_parse_kinds(req->kinds_off,
	    req->n_kinds_off, &off, bad, sizeof(bad)) != 0)
		return peer_send_error(p, 2, "retarget: %s", bad);
	if (req->n_add_pids > SESS_MAX_TARGETS ||
	    req->n_domains_off > SESS_MAX_DOMAINS)
		return peer_send_error(p, 2, "retarget: too many values");
	if (req->start_step_set) {
		if (s->steps_max == 0)
			return peer_send_error(p, 2, "retarget: --start-step "
			    "needs a session with --steps");
		if (req->start_step > INT64_MAX / 2)
			return peer_send_error(p, 2, "retarget: start step too "
			    "large");
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->win_open_ns != 0)
				return peer_send_error(p, 1, "retarget: pid %ld's "
				    "step window has started already",
				    (long)sa->pid);
	}
	if ((k = calloc(1, sizeof(*k))) == NULL)
		return peer_send_error(p, 1, "daemon out of memory");
	changed = on != 0 || off != 0 || req->n_domains_on > 0 ||
	    req->n_domains_off > 0;
	for (unsigned i = 0; i < nitems(s->kind_on_ns); i++)
		if ((on & ~s->kinds) & (1u << i))
			s->kind_on_ns[i] = util_realtime_ns();
	s->kinds = (s->kinds | on) & ~off;
	s->kinds_ever |= s->kinds;
	if (session_domains_set(s, req->domains_on, req->n_domains_on,
	    req->domains_off, req->n_domains_off) != 0) {
		free(k);
		return peer_send_error(p, 1, "retarget: too many domains");
	}
	snprintf(detail, sizeof(detail), "kinds 0x%x, %zu domain(s) off, "
	    "+%zu -%zu pids", s->kinds, s->ndomains_off, req->n_add_pids,
	    req->n_remove_pids);
	session_sink_event(s, SESSION_EV_RETARGET, 0, detail);
	log_info("session %llu retarget: %s", (unsigned long long)s->id,
	    detail);
	session_ctl_acks_free(s->pending_acks);
	free(s->pending_acks);
	s->pending_acks = k;
	s->reply_peer = p;
	s->reply_type = MSPTI__MSG_TYPE__MSG_RETARGET_REP;
	s->npending = 0;
	/* Removed pids stop capturing; their records so far stay. */
	sc.session_id = s->id;
	for (size_t i = 0; i < req->n_remove_pids; i++) {
		bool found = false;

		TAILQ_FOREACH(sa, &s->agents, entry) {
			if ((uint32_t)sa->pid != req->remove_pids[i] ||
			    (sa->state != SA_ACTIVE && sa->state != SA_STARTING))
				continue;
			found = true;
			sa->state = SA_STOPPING;
			session_ctl_acks_add(k, req->remove_pids[i], 0, sa->agent,
			    "removed");
			if (sa->agent != NULL)
				peer_send(sa->agent->peer,
				    MSPTI__MSG_TYPE__MSG_STOP_CAPTURE, &sc.base,
				    -1);
			break;
		}
		if (!found)
			session_ctl_acks_add(k, req->remove_pids[i], 3, NULL,
			    "pid %u is not in session %llu",
			    req->remove_pids[i], (unsigned long long)s->id);
	}
	/* A new first step sends every agent an update that carries the
	 * kinds and domains too: one update, one pending ack per agent. */
	if (changed && !req->start_step_set)
		session_ctl_send_update(s);
	if (req->start_step_set) {
		/* Every capturing rank answers with its new first step. */
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->state == SA_ACTIVE)
				session_ctl_acks_add(k, (uint32_t)sa->pid, 0,
				    sa->agent, "capturing");
		(void)session_steps_set(s, (int64_t)req->start_step);
	}
	if (req->n_add_pids > 0)
		session_ctl_add_pids(s, p, req->add_pids, req->n_add_pids, k);
	if (s->npending == 0)
		session_ctl_reply_pending(s);
	else {
		struct timeval tv = { SESS_ACK_TIMEOUT_MS / 1000,
		    (SESS_ACK_TIMEOUT_MS % 1000) * 1000 };

		evtimer_add(s->ack_tv, &tv);
	}
	return 0;
}

void
session_ctl_snap_free(struct sess_snap *sn)
{
	TAILQ_REMOVE(&sn->s->snaps, sn, entry);
	if (sn->ev != NULL)
		event_free(sn->ev);
	trace_writer_abort(sn->w);
	free(sn);
}

/* A snapshot's writer thread is done: the requester gets its answer. */
static void
session_ctl_snap_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess_snap *sn = arg;
	struct session *s = sn->s;
	struct peer *p = sn->p;
	int rc;

	rc = trace_writer_close_finish(sn->w, NULL);
	sn->w = NULL;
	if (rc == 0)
		log_info("session %llu: snapshot of %llu records",
		    (unsigned long long)s->id, (unsigned long long)sn->nrec);
	session_ctl_snap_free(sn);
	if (p == NULL)
		return;
	if (rc != 0)
		peer_send_error(p, 1, "snapshot: writing the trace: %s",
		    strerror(-rc));
	else
		session_ctl_send_info(p, s);
}

int
session_ctl_snapshot(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__SnapshotSession *req = (const Mspti__SnapshotSession *)m;
	struct trace_footer f;
	struct session *s;
	struct sess_agent *sa;
	struct sess_snap *sn = NULL;
	struct stat st;
	int fd = peer_take_fd(p), rc, dfd;

	if ((s = session_ctl_lookup(p, req->session_id, 0)) == NULL)
		goto out;
	if (!s->ring_mode) {
		peer_send_error(p, 2, "session %llu is in stream mode; snapshot "
		    "needs --mode ring", (unsigned long long)s->id);
		goto out;
	}
	if (session_done(s) || s->finalizing) {
		peer_send_error(p, 1, "session %llu is %s",
		    (unsigned long long)s->id, session_state_names[s->state]);
		goto out;
	}
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		peer_send_error(p, 2, "snapshot: no regular output file came "
		    "with the request");
		goto out;
	}
	if ((sn = calloc(1, sizeof(*sn))) == NULL) {
		peer_send_error(p, 1, "daemon out of memory");
		goto out;
	}
	TAILQ_FOREACH(sa, &s->agents, entry)
		session_drain_agent(sa);
	if ((rc = session_flight_write(s, fd, &sn->nrec, &sn->w)) != 0) {
		free(sn);
		peer_send_error(p, 1, "snapshot: writing the trace: %s",
		    strerror(-rc));
		goto out;
	}
	sn->s = s;
	sn->p = p;
	TAILQ_INSERT_TAIL(&s->snaps, sn, entry);
	memset(&f, 0, sizeof(f));
	f.end_ns = util_realtime_ns();
	session_drain_losses(s, f.losses);
	/* The thread writes it; the answer comes when it is done. */
	if ((dfd = trace_writer_close_start(sn->w, &f)) < 0 ||
	    (sn->ev = event_new(s->d->base, dfd, EV_READ,
	    session_ctl_snap_done_cb, sn)) == NULL ||
	    event_add(sn->ev, NULL) != 0) {
		session_ctl_snap_free(sn);
		peer_send_error(p, 1, "snapshot: cannot write the trace");
	}
out:
	if (fd >= 0)
		close(fd);
	return 0;
}

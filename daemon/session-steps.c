/*
 * Step windows: `--steps N` records the same step indices [k, k+N) on
 * every rank of a session.  Each agent counts the MSTX ranges named the
 * step name that its process started (agent/session.c) and says, in its
 * CaptureAck, how many (its next step's index) and its recent step time.
 * With `--start-step K`, k is K; else, once every target acked, k is
 * chosen so that no rank can have started it by the time it hears of it
 * (each rank's next step plus the steps it runs in SESS_STEPS_LEAD_NS
 * and since it acked),
 * and sent to the agents in an UpdateCapture.  The agents write nothing
 * outside their window; this side counts each agent's steps, states
 * what a rank that came too late missed, and stops the session once
 * every rank that steps has recorded its window.
 */

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "record.h"
#include "msptid.h"

/* How far ahead of every rank an automatic window starts: more than the
 * UpdateCapture round trip on a loaded node. */
#define SESS_STEPS_LEAD_NS	300000000ull
#define SESS_STEPS_LEAD_MAX	10000	/* steps, for very fast loops */
#define SESS_STEPS_ROUNDS	3	/* times k moves for a rank past it */

#define MARK_START	((1u << 1) | (1u << 4))	/* START, START_WITH_DEVICE */
#define MARK_END	((1u << 2) | (1u << 5))	/* END, END_WITH_DEVICE */

static bool	session_steps_passed(const struct session *s);

static void
session_steps_send(struct session *s, struct sess_agent *sa, bool pending)
{
	Mspti__UpdateCapture uc = MSPTI__UPDATE_CAPTURE__INIT;

	if (sa->agent == NULL)
		return;
	uc.session_id = s->id;
	uc.kinds = s->kinds;
	uc.domains_off = s->domains_off;
	uc.n_domains_off = s->ndomains_off;
	uc.step_from = s->step_from;
	sa->win_sent = true;
	if (pending) {
		sa->pending = true;
		s->npending++;
	}
	(void)peer_send(sa->agent->peer, MSPTI__MSG_TYPE__MSG_UPDATE_CAPTURE,
	    &uc.base, -1);
}

/*
 * Once every target acked its start: picks k and tells the capturing
 * agents.  True when updates went out (their acks are then pending).
 */
bool
session_steps_choose(struct session *s)
{
	struct sess_agent *sa, *next;
	uint64_t now = util_monotonic_ns();
	int64_t k = 0;
	bool sent = false;

	if (s->steps_max == 0 || (s->step_from >= 0 &&
	    !session_steps_passed(s)))
		return false;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		int64_t at;

		if (sa->state != SA_ACTIVE)
			continue;
		at = sa->step_at_ack;
		/* A rank that steps may start its next step any moment, and
		 * has gone on stepping since it acked (other acks came later). */
		if (sa->step_at_ack > 0 || sa->step_period_ns > 0) {
			uint64_t ahead = SESS_STEPS_LEAD_NS + (now > sa->ack_mono ?
			    now - sa->ack_mono : 0);
			uint64_t m = sa->step_period_ns > 0 ?
			    ahead / sa->step_period_ns : 0;

			at += 1 + (int64_t)(m > SESS_STEPS_LEAD_MAX ?
			    SESS_STEPS_LEAD_MAX : m);
		}
		if (at > k)
			k = at;
	}
	if (s->step_from >= 0) {
		/* A later k for everyone; no window has opened yet (an agent
		 * told of the earlier k opens only at it, which is ahead). */
		s->step_rounds++;
		if (k <= s->step_from)
			k = s->step_from + 1;
		TAILQ_FOREACH(sa, &s->agents, entry) {
			sa->win_sent = false;
			sa->first_known = false;
			sa->first_step = -1;
		}
	}
	s->step_from = k;
	log_info("session %llu: steps [%lld, %lld) on every rank",
	    (unsigned long long)s->id, (long long)k,
	    (long long)(k + s->steps_max));
	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next)
		if (sa->state == SA_ACTIVE && !sa->win_sent) {
			session_steps_send(s, sa, true);
			sent = true;
		}
	return sent;
}

/*
 * Retarget --start-step K: the window moves to [K, K+N) on every rank,
 * forced (a cluster start chose K for all its nodes).  True when updates
 * went out (their acks are then pending).
 */
bool
session_steps_set(struct session *s, int64_t k)
{
	struct sess_agent *sa;
	bool sent = false;

	s->step_forced = true;
	s->step_from = k;
	log_info("session %llu: steps [%lld, %lld) on every rank (set)",
	    (unsigned long long)s->id, (long long)k,
	    (long long)(k + s->steps_max));
	TAILQ_FOREACH(sa, &s->agents, entry) {
		sa->win_sent = false;
		sa->first_known = false;
		sa->first_step = -1;
		if (sa->state == SA_ACTIVE) {
			session_steps_send(s, sa, true);
			sent = true;
		}
	}
	return sent;
}

/* sa's next step's index now, from its last ack and its step time. */
int64_t
session_steps_now(const struct sess_agent *sa)
{
	uint64_t now = util_monotonic_ns();

	if (sa->s->steps_max == 0 || sa->ack_mono == 0)
		return -1;
	if (sa->step_period_ns == 0 || now <= sa->ack_mono)
		return sa->step_at_ack;
	return sa->step_at_ack + (int64_t)((now - sa->ack_mono) /
	    sa->step_period_ns);
}

/* After a round of updates: a rank had passed k before it heard of it
 * (it records nothing and said where it is), so k moves, a few times. */
static bool
session_steps_passed(const struct session *s)
{
	const struct sess_agent *sa;

	if (s->step_forced || s->step_rounds >= SESS_STEPS_ROUNDS)
		return false;
	TAILQ_FOREACH(sa, &s->agents, entry)
		if (sa->state == SA_ACTIVE && sa->first_known &&
		    sa->first_step < 0 && sa->step_at_ack > s->step_from)
			return true;
	return false;
}

/* How many steps sa has to record; 0 when none (or not known yet). */
static uint32_t
session_steps_expected(const struct sess_agent *sa)
{
	const struct session *s = sa->s;
	int64_t end = s->step_from + (int64_t)s->steps_max;

	if (!sa->first_known || sa->first_step < 0 || sa->first_step >= end)
		return 0;
	return (uint32_t)(end - sa->first_step);
}

static void
session_steps_note(struct sess_agent *sa)
{
	const struct session *s = sa->s;
	char buf[160];

	if (!sa->first_known || sa->first_step == s->step_from)
		return;
	if (sa->first_step < 0)
		snprintf(buf, sizeof(buf), "joined after steps [%lld, %lld): "
		    "none captured", (long long)s->step_from,
		    (long long)(s->step_from + s->steps_max));
	else
		snprintf(buf, sizeof(buf), "joined at step %lld: steps "
		    "[%lld, %lld) missed", (long long)sa->first_step,
		    (long long)s->step_from, (long long)sa->first_step);
	free(sa->win_note);
	sa->win_note = strdup(buf);
	log_warnx("session %llu: pid %ld %s", (unsigned long long)s->id,
	    (long)sa->pid, buf);
}

static void
session_steps_maybe_done(struct sess_agent *sa)
{
	uint32_t want = session_steps_expected(sa);

	if (!sa->win_done && want > 0 && sa->win_steps >= want) {
		sa->win_done = true;
		if (session_steps_check(sa->s) && sa->s->stop_reason == NULL)
			sa->s->stop_reason = "steps";
	}
}

/*
 * An agent's CaptureAck (start or update): where it is, and the first
 * step it records once it knows k.
 */
void
session_steps_ack(struct sess_agent *sa, int64_t step, uint64_t period_ns,
    int64_t first, uint32_t src, bool start)
{
	struct session *s = sa->s;

	if (src == SESS_STEPS_SRC_MSTX || src == SESS_STEPS_SRC_SYNC)
		sa->step_src = src;
	if (s->steps_max == 0)
		return;
	sa->step_at_ack = step;
	if (period_ns > 0 || start)
		sa->step_period_ns = period_ns;
	sa->ack_mono = util_monotonic_ns();
	if (sa->win_sent && !sa->first_known) {
		sa->first_known = true;
		sa->first_step = first;
		session_steps_note(sa);
		session_steps_maybe_done(sa);
	} else if (start && !sa->win_sent && s->step_from >= 0 &&
	    sa->state == SA_ACTIVE)
		/* k was chosen while its StartCapture was on the way. */
		session_steps_send(s, sa, false);
}

/*
 * sa's window records from step first (-1: none) and not from the one its
 * ack said: its step indices became known after the window was set, past
 * k.  True when the session has nothing more to wait for.
 */
bool
session_steps_first(struct sess_agent *sa, int64_t first)
{
	struct session *s = sa->s;

	if (s->steps_max == 0 || !sa->first_known || sa->first_step == first ||
	    first < -1 || (first >= 0 && first < s->step_from))
		return false;
	sa->first_step = first;
	session_steps_note(sa);
	session_steps_maybe_done(sa);
	return session_steps_check(s);
}

/*
 * A host marker of sa, before it is written: counts its steps.  True
 * when the record is past sa's window (not written).
 */
bool
session_steps_marker(struct sess_agent *sa, const struct rec_marker *m)
{
	struct session *s = sa->s;
	const char *name, *dom;

	if (s->steps_max == 0)
		return false;
	if (sa->win_done)
		return true;
	if (m->source_kind != 0 || m->name_id == 0 || m->name_id > SESS_STRINGS ||
	    (name = sa->strs[m->name_id]) == NULL ||
	    strcmp(name, s->step_name) != 0)
		return false;
	/* The agent's synchronize steps are ranges of their own domain;
	 * one withdrawn (MSTX took its step over) is no step. */
	dom = m->domain_id != 0 && m->domain_id <= SESS_STRINGS ?
	    sa->strs[m->domain_id] : NULL;
	if (dom != NULL && strcmp(dom, REC_STEPS_WITHDRAWN_DOMAIN) == 0)
		return false;
	sa->step_src = dom != NULL && strcmp(dom, REC_STEPS_SYNC_DOMAIN) == 0 ?
	    SESS_STEPS_SRC_SYNC : SESS_STEPS_SRC_MSTX;
	if (m->flag & MARK_START) {
		if (sa->win_open_ns == 0)
			sa->win_open_ns = m->timestamp;
	} else if (m->flag & MARK_END) {
		sa->win_steps++;
		s->steps_seen++;
		sa->win_close_ns = m->timestamp;
		session_steps_maybe_done(sa);
	}
	return false;
}

/* "mstx", "synchronize", or "" when the rank has shown no step yet. */
const char *
session_steps_source(uint32_t src)
{
	return src == SESS_STEPS_SRC_MSTX ? "mstx" :
	    src == SESS_STEPS_SRC_SYNC ? "synchronize" : "";
}

/* Records of sa after its window ended (a thread racing the close). */
bool
session_steps_skip(const struct sess_agent *sa)
{
	return sa->s->steps_max > 0 && sa->win_done;
}

/* A device task of sa without its launch: outside the window? */
bool
session_steps_task_out(const struct sess_agent *sa, uint64_t start)
{
	if (sa->s->steps_max == 0)
		return false;
	if (sa->win_open_ns == 0 || start < sa->win_open_ns)
		return true;
	return sa->win_done && start > sa->win_close_ns;
}

/*
 * True when every rank that steps has recorded its window (and one has):
 * ranks with no rank number that never stepped (a launcher) are not
 * waited for, nor those that came too late to record any step.
 */
bool
session_steps_check(struct session *s)
{
	struct sess_agent *sa;
	bool any_done = false, any_late = false;

	if (s->steps_max == 0 || s->step_from < 0 || session_done(s))
		return false;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (sa->win_done) {
			any_done = true;
			continue;
		}
		if (sa->first_known && session_steps_expected(sa) == 0) {
			any_late = sa->first_step < 0 || any_late;
			continue;
		}
		if (sa->state != SA_ACTIVE && sa->state != SA_STARTING)
			continue;
		if (sa->rank >= 0 || sa->step_at_ack > 0 ||
		    sa->step_period_ns > 0 || sa->win_open_ns != 0)
			return false;
	}
	/* Every rank came after the window: nothing more to wait for,
	 * unless later agents may still join (job, rank, all). */
	return any_done || (any_late && !s->elastic);
}

/* The spread of the window's start across the ranks that began at k. */
uint64_t
session_steps_skew(const struct session *s)
{
	const struct sess_agent *sa;
	uint64_t lo = UINT64_MAX, hi = 0;

	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (!sa->first_known || sa->first_step != s->step_from ||
		    sa->win_open_ns == 0)
			continue;
		if (sa->win_open_ns < lo)
			lo = sa->win_open_ns;
		if (sa->win_open_ns > hi)
			hi = sa->win_open_ns;
	}
	return hi > lo ? hi - lo : 0;
}

/* "steps [k, k+N) on R ranks, start skew X ns" for logs and the trace. */
void
session_steps_describe(const struct session *s, char *buf, size_t len)
{
	const struct sess_agent *sa;
	unsigned n = 0, late = 0, srcs = 0;

	*buf = '\0';
	if (s->steps_max == 0)
		return;
	if (s->step_from < 0) {
		snprintf(buf, len, "steps: no window chosen");
		return;
	}

	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (sa->first_known && sa->first_step == s->step_from &&
		    sa->win_open_ns != 0)
			n++;
		else if (sa->win_note != NULL)
			late++;
		srcs |= 1u << sa->step_src;
	}
	snprintf(buf, len, "steps [%lld, %lld) on %u rank(s)%s, start skew "
	    "%llu ns%s", (long long)s->step_from,
	    (long long)(s->step_from + s->steps_max), n,
	    (srcs & 6) == 6 ? " from MSTX and synchronize" :
	    (srcs & 4) ? " from synchronize" : (srcs & 2) ? " from MSTX" : "",
	    (unsigned long long)session_steps_skew(s),
	    late ? ", some ranks joined late" : "");
}

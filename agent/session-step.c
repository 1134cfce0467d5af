/*
 * The process's steps and a capture's step window (--steps N, --start-step
 * K).  A step is an MSTX range named the step name (MSPTI_STEP_NAME, or
 * the capture's), or, in a process that marks none, what the synchronize
 * pattern found (steps.c).  The count goes on whether or not a capture is
 * running, so that a capture opens its window at the start of the same
 * step on every rank; a synchronize step's range is written into the
 * capture for msptid and report.  The state here is under step_lock.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session-int.h"

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
	session_marker_from(s, t, &m);
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

/* Registration thread: true, with the session and si->first, when
 * msptid is to be told the first step its window records now. */
bool
session_first_due(uint64_t *sid, struct session_step_info *si)
{
	bool due;

	pthread_mutex_lock(&step_lock);
	due = first_note_sid != 0 && sess_cur != NULL &&
	    sess_cur->id == first_note_sid;
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

/* session_start, past the ring: s's window and step name from the start's
 * step config (sc NULL: no window), what to tell msptid of this process's
 * steps, and then s is published as the live session, under step_lock so
 * that a step beginning sees either no session or s with its window. */
void
sess_step_start(struct agent_session *s, const struct session_step_cfg *sc,
    struct session_step_info *si)
{
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
	sess_cur = s;
	atomic_store(&sess_fp->live, s);
	pthread_mutex_unlock(&step_lock);
}

/* session_update: s's window at step_from (-1: unchanged) while it has
 * not opened, and where this process is. */
void
sess_step_update(struct agent_session *s, int64_t step_from,
    struct session_step_info *si)
{
	pthread_mutex_lock(&step_lock);
	if (step_from >= 0)
		first_note_sid = 0;	/* this answer says it */
	/* k, or a later k while the window has not opened (the daemon moves
	 * it when a rank had passed the first one). */
	if (step_from >= 0 && s->win_n != 0 &&
	    atomic_load(&s->win) == SESS_WIN_BEFORE &&
	    (int64_t)step_starts > step_from) {
		/* Past the window it is told of: say where we are, record
		 * nothing; the daemon picks a later one for every rank. */
		si->step = (int64_t)step_starts;
		si->period_ns = step_period_ns;
		si->first = -1;
		si->src = step_src;
		s->win_from = -1;
	} else if (step_from >= 0 && s->win_n != 0 &&
	    atomic_load(&s->win) == SESS_WIN_BEFORE)
		session_win_set(s, step_from, si);
	else {
		si->step = (int64_t)step_starts;
		si->period_ns = step_period_ns;
		si->first = s->win_n != 0 && s->win_from >= 0 ?
		    s->win_from : -1;
		si->src = step_src;
	}
	pthread_mutex_unlock(&step_lock);
}

/* In a forked child (one thread): a child is a rank of its own, its steps
 * count from its start. */
void
sess_step_after_fork_child(void)
{
	pthread_mutex_init(&step_lock, NULL);
	step_starts = 0;
	step_last_ns = step_period_ns = 0;
	step_src = SESSION_STEPS_NONE;
	step_sync_open = 0;
	first_note_sid = 0;
}

/* The step name counted from load (MSPTI_STEP_NAME, else "step"). */
__attribute__((constructor(150))) static void
sess_step_init(void)
{
	const char *v;

	if ((v = getenv("MSPTI_STEP_NAME")) != NULL && *v != '\0')
		snprintf(step_names[0], sizeof(step_names[0]), "%s", v);
	api_mstx_step_char((unsigned char)step_names[0][0]);
}

/*
 * What the agent's three session files share, and nothing else includes:
 * the session, a producing thread's fence slot, and the way into the sink.
 *
 *   session.c       the hot path: entering the sink, encoding records
 *                   into the ring, interning strings, a call's records in
 *                   one entry (any application thread)
 *   session-ctl.c   start, update and stop of a capture, the stop fence's
 *                   wait, the fork page, populating the ring ahead
 *                   (registration thread)
 *   session-step.c  the process's step count and a capture's step window
 *                   (MSTX hooks, the synchronize pattern)
 *
 * The fence and the sink's rules are at the top of session.c.
 */
#ifndef MSPTI_SESSION_INT_H
#define MSPTI_SESSION_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "record.h"
#include "ring.h"
#include "api.h"
#include "agent.h"

#define SESS_STRINGS		4096	/* interned strings per ring */
#define SESS_STRING_KEEP	400	/* longest string sent */

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

/* A producing thread's fence slot (top of session.c); kept for the life
 * of the process, reused by a later thread once its thread has exited. */
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

/* session-ctl.c: the live session (registration thread only; producers
 * read sess_fp->live). */
extern struct agent_session *sess_cur;

/* session.c: every thread's slot, the caller's own, the fence's kind
 * (1: membarrier is registered, producers need only a compiler barrier),
 * records a fork child dropped before it was an agent of its own. */
extern struct sess_thread *_Atomic sess_threads;
extern API_TLS struct sess_thread *tls_sess;
extern API_HOT _Atomic int sess_membarrier;
extern _Atomic uint64_t sess_fork_lost;
struct sess_thread *sess_thread_get(void);

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

/* session.c */
void	session_sink(const msptiActivity *a, size_t len, void *arg);
void	session_host_marker(void *arg, msptiActivityFlag flag, uint64_t id,
	    uint64_t ts, const char *name, const char *domain);
/* A MARKER of the activity API's into s, from t (inside the sink). */
void	session_marker_from(struct agent_session *s, struct sess_thread *t,
	    const msptiActivityMarker *m);

/* session-step.c (step_lock inside) */
/* Sets s's window from the start's step config and says where this
 * process is; then publishes s as the live session. */
void	sess_step_start(struct agent_session *s,
	    const struct session_step_cfg *sc, struct session_step_info *si);
/* Moves s's window to step_from (>= 0), if it has not opened yet. */
void	sess_step_update(struct agent_session *s, int64_t step_from,
	    struct session_step_info *si);
void	sess_step_after_fork_child(void);

#endif

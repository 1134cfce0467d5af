/*
 * libmspti.so internals shared by the registration side (agent.c,
 * register.c).  The msPTI API side has its own header, agent/api.h.
 *
 * Rules for everything in the agent: never exit, abort, print (unless
 * MSPTI_DEBUG is set), or block the application; degrade to "not
 * capturing" and count what was lost.
 */
#ifndef MSPTI_AGENT_H
#define MSPTI_AGENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_VERSION		PACKAGE_VERSION

/* Capabilities announced in Hello. */
#define AGENT_CAP_MSPTI		(1u << 0)	/* in-process msPTI API */
#define AGENT_CAP_MSTX		(1u << 1)

/* agent.c */
struct agent_config {
	char		rundir[108];	/* runtime dir of msptid */
	bool		debug;		/* MSPTI_DEBUG: log to stderr */
	bool		disabled;	/* MSPTI_DISABLE: do nothing */
};
extern struct agent_config agent_config;
uint64_t	agent_start_ns(void);

/* env.c: the environment as our threads read it (setenv and friends are
 * interposed and locked against it). */
bool		env_get(const char *name, char *buf, size_t len);

/* register.c: the background thread that keeps us registered. */
int		register_start(void);
void		register_after_fork_child(void);
void		register_note_device(uint32_t device);
void		register_wake(void);
uint64_t	register_agent_id(void);

/* gate.c: under `msptictl run` (MSPTI_RUN_GATE_MS), the first runtime
 * call waits, bounded, until the session config has arrived. */
extern _Atomic bool gate_closed;
void		gate_init(void);
void		gate_after_fork_child(void);
void		gate_hold_hello(int hold_ms);
bool		gate_is_closed(void);
void		gate_open(void);
void		gate_wait(void);
uint64_t	gate_device_ticket(void);
void		gate_device_wait(uint64_t ticket);
bool		gate_device_sync_due(uint64_t *cookie);
void		gate_device_acked(uint64_t cookie);

/* session-ctl.c: capture for a daemon session (registration thread
 * only); session-int.h has what the session files share. */
struct session_step_cfg {		/* StartCapture's step window */
	uint32_t	 steps;		/* 0: none */
	const char	*step_name;
	int64_t		 step_from;	/* -1: not chosen yet */
};
struct session_step_info {		/* what CaptureAck says of steps */
	int64_t		 step;		/* steps started so far */
	uint64_t	 period_ns;	/* recent step time, 0: unknown */
	int64_t		 first;		/* first step recorded, -1: none */
	uint64_t	 fork_lost;	/* records of a fork child, dropped */
	uint32_t	 src;		/* SESSION_STEPS_* */
};
/* Where a process's step index comes from (CaptureAck.step_source). */
#define SESSION_STEPS_NONE	0
#define SESSION_STEPS_MSTX	1	/* MSTX ranges named the step name */
#define SESSION_STEPS_SYNC	2	/* the synchronize pattern (steps.c) */
int		session_start(uint64_t id, uint32_t kinds, char **domains_off,
		    size_t ndomains_off, const struct session_step_cfg *sc,
		    int ringfd, int *wakefdp, const char **why,
		    struct session_step_info *si);
void		session_prefault(void);
void		session_populate_due(void);
int		session_update(uint64_t id, uint32_t kinds, char **domains_off,
		    size_t ndomains_off, int64_t step_from,
		    struct session_step_info *si);
int		session_stop(uint64_t id, bool flush);
uint64_t	session_current(void);
void		session_after_fork_child(void);
struct sess_forkpage {			/* wiped in a fork child */
	void *_Atomic	 live;		/* struct agent_session * */
	_Atomic int	 mine;		/* 0: a child not yet on its own */
};
extern struct sess_forkpage *sess_fp;

/* session.c: the sink (any thread). */
/* Writes a host launch (device, stream, task id) into the session ring. */
struct pending;
bool		session_launch(const struct pending *p);
void		session_call_end(uint64_t corr);
/* A call's API record into the session ring (with its launch). */
void		session_api(uint64_t start, uint64_t end, uint64_t corr,
		    const char *name);
/* MSTX: the mark gate. */
void		session_mark_wait(void);
/* False when a mark must first wait for this process's config. */
static inline bool
session_mark_ready(void)
{
	return __builtin_expect(atomic_load_explicit(&sess_fp->mine,
	    memory_order_relaxed) == 1, 1) &&
	    !atomic_load_explicit(&gate_closed, memory_order_relaxed);
}

/* session-step.c: step counting and the window. */
/* MSTX hooks (any thread). */
void		session_step_begin(const char *msg, uint64_t id);
void		session_step_end(const char *name, uint64_t id);
/* steps.c: the synchronize pattern gave step idx (a boundary: it starts
 * now; else the count found when the pattern was first seen). */
void		session_step_sync(uint64_t idx, bool boundary);
/* Registration thread: msptid is to be told the first step recorded. */
bool		session_first_due(uint64_t *sid, struct session_step_info *si);

/* stepdet.c: the period detector over synchronize calls (pure). */
#define STEPDET_HIST	128	/* tokens remembered (>= 3 * STEPDET_PMAX) */
#define STEPDET_PMAX	32	/* longest period (synchronizes per step) */
#define STEPDET_LOST	64	/* syncs without a boundary: pattern dropped */
#define STEPDET_STEP	1	/* stepdet_feed: this sync closed a step */
#define STEPDET_LOCKED	2	/* the pattern was just found */
struct stepdet_tok {
	uint64_t	 site;		/* call site (module offset, kind) */
	uint32_t	 launches;	/* launches since the previous sync */
};
struct stepdet {
	struct stepdet_tok hist[STEPDET_HIST];	/* ring of the latest */
	uint64_t	 n;		/* syncs fed */
	uint64_t	 steps;		/* boundaries counted: the step index */
	uint64_t	 last_bound;	/* n just after the last boundary */
	unsigned	 period;	/* 0: no pattern */
	unsigned	 ctx;		/* tokens that identify the boundary */
	bool		 by_site;	/* the boundary is its site alone */
	struct stepdet_tok pat[STEPDET_PMAX];	/* the period, boundary last */
};
void		stepdet_init(struct stepdet *d);
int		stepdet_feed(struct stepdet *d, uint64_t site,
		    uint32_t launches);

#endif

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

/* session.c: capture for a daemon session (registration thread only). */
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
};
int		session_start(uint64_t id, uint32_t kinds, char **domains_off,
		    size_t ndomains_off, const struct session_step_cfg *sc,
		    int ringfd, int *wakefdp, const char **why,
		    struct session_step_info *si);
int		session_update(uint64_t id, uint32_t kinds, char **domains_off,
		    size_t ndomains_off, int64_t step_from,
		    struct session_step_info *si);
int		session_stop(uint64_t id, bool flush);
uint64_t	session_current(void);
/* Writes a host launch (device, stream, task id) into the session ring. */
struct pending;
bool		session_launch(const struct pending *p);
void		session_after_fork_child(void);
/* MSTX hooks (any thread): step counting and the window, the mark gate. */
void		session_step_begin(const char *msg, uint64_t id);
void		session_step_end(const char *name, uint64_t id);
void		session_mark_wait(void);
struct sess_forkpage {			/* session.c: wiped in a fork child */
	void *_Atomic	 live;		/* struct agent_session * */
	_Atomic int	 mine;		/* 0: a child not yet on its own */
};
extern struct sess_forkpage *sess_fp;
/* False when a mark must first wait for this process's config. */
static inline bool
session_mark_ready(void)
{
	return __builtin_expect(atomic_load_explicit(&sess_fp->mine,
	    memory_order_relaxed) == 1, 1) &&
	    !atomic_load_explicit(&gate_closed, memory_order_relaxed);
}

#endif

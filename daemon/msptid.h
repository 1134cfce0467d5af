/*
 * msptid: the per-node profiling daemon.  This header is the map of the
 * daemon: every struct, then one block of prototypes per file.  The daemon
 * is built as libmsptid (everything but main.c) so tests link the real code.
 *
 * Threading: one libevent loop on the main thread owns every structure
 * here; nothing is shared with other threads.
 */
#ifndef MSPTID_H
#define MSPTID_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/event.h>
#include <event2/buffer.h>

#include "frame.h"
#include "record.h"

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST((head));				\
	    (var) && ((tvar) = TAILQ_NEXT((var), field), 1);		\
	    (var) = (tvar))
#endif

#define MSPTID_VERSION		PACKAGE_VERSION
#define MSPTID_PROTOCOL		FRAME_VERSION

#define PEER_MAX_AGENTS		4096	/* registered agents at once */
#define PEER_MAX_CTL_PER_UID	32	/* control connections per uid */
/* Memory a peer's unsent replies may hold before it is dropped. */
#define PEER_MAX_QUEUED		(2 * FRAME_MAX_LEN)
#define PEER_MAX_PREHELLO_PER_UID 256	/* agent links without Hello */
#define PEER_HELLO_TIMEOUT_MS	5000	/* an agent says Hello in this */
#define PEER_FRAME_TIMEOUT_MS	10000	/* a frame begun completes in */
#define SERVER_ACCEPT_PAUSE_MS	1000	/* listeners off after EMFILE */
#define SERVER_ACCEPT_BATCH	32	/* accepts per listener wake-up */
#define SERVER_TRIM_DELAY_MS	1000	/* malloc_trim this long after */
#define PEER_TRIM_BYTES		(64u << 10) /* a peer this big: trim */
#define PEER_MAX_RXFDS		4	/* descriptors received and not yet used */

struct daemon;
struct peer;
struct ring;
struct trace_writer;
struct sess_acks;
struct devcol;		/* devcol.h */
struct metrics;		/* metrics.h */
struct metrics_sub;	/* metrics.h */
struct metrics_counter;	/* metrics.h */
struct join;		/* join.h */
struct httpmetrics;	/* httpmetrics.c */
struct sockaddr_storage;
struct evbuffer;

/* Sessions (session*.c). */
#define SESS_ACK_TIMEOUT_MS	3000	/* agent acks of start and stop */
#define SESS_DRAIN_MS		100	/* drain timer */
#define SESS_DRAIN_BATCH	65536	/* records per ring per drain call */
/* Device channels are polled sooner than the drain timer while they fill
 * fast: the next poll comes when the fullest would be a quarter full at
 * the rate it filled since the last one, at least this long after. */
#define SESS_DEV_POLL_MIN_MS	5
/* ... and at most this long after, while a channel is in use (a device
 * idle until now may run fast next). */
#define SESS_DEV_POLL_MAX_MS	25
/* A launch this recent at the end may still be queued on the device. */
#define SESS_INFLIGHT_NS	JOIN_DEV_TIMEOUT_NS
/* At the stop, the most finalizing waits for the device tasks of launches
 * still queued (polling every SESS_INFLIGHT_POLL_MS); what is missing
 * then is counted lost (device_unmatched). */
#define SESS_INFLIGHT_WAIT_MS	3000
#define SESS_INFLIGHT_POLL_MS	20
/* How long the ids of tasks a capture left queued stay its own
 * (agent_floor); the most kept per agent. */
#define SESS_FLOOR_NS		60000000000ull
#define SESS_FLOORS_MAX		256	/* scanned per device task */
/* The most a device record is written after records that started up to
 * this much later (its task waited JOIN_DEV_TIMEOUT_NS for a launch, then
 * the next drain tick): recorded in the header as "max_lateness_ns" for
 * the analysis' reorder window. */
#define SESS_MAX_LATENESS_NS	(JOIN_DEV_TIMEOUT_NS + \
	3ull * SESS_DRAIN_MS * 1000000ull)
#define SESS_KEEP_DONE		64	/* finished sessions kept for `sessions` */
#define SESS_STRINGS		4096	/* producer string ids 1..this */
#define SESS_ALLSTR		(2 * SESS_STRINGS)	/* + daemon-made ones */
#define SESS_DHASH		(4 * SESS_STRINGS)	/* their hash slots */
#define SESS_DIDX_BITS		13	/* a slot's index bits; the rest is
					   the string's hash above them */
#define SESS_MARKS		1024	/* host marker ids remembered */
/* Marker ids from here on are the agent's synchronize step ranges
 * (agent/session.c STEP_SYNC_ID), never an MSTX id with a device task. */
#define SESS_SYNC_MARK_ID	(1ull << 62)
#define SESS_MAX_TARGETS	4096
#define SESS_MAX_DOMAINS	32
/* Ring mode's flight recorders live in msptid's memory: bounded per
 * session owner's uid and in total (msptid --ring-memory-*). */
#define SESS_RING_MEM_PER_UID	(256ull << 20)
#define SESS_RING_MEM_TOTAL	(1024ull << 20)
/* A producer's dropped-record count may grow by at most one per this
 * many ns since it joined (100 M/s, 20x the agent's fastest), plus slack. */
#define SESS_MIN_RECORD_NS	10
#define SESS_DROPS_SLACK	65536
/* Chunks (records before compression) waiting for the writer's thread
 * to compress and write them, per session; beyond it they count as
 * LOSS_DISK. */
#define SESS_WRITE_QUEUE	(64u << 20)
#define SESS_CLOSE_WAIT_MS	10000	/* at shutdown, for the last writes */
#define SESS_DEFAULT_KINDS	(0x1ffeu & ~(1u << 8))

/* A host marker's strings (agent namespace), for the device marker of the
 * same id. */
struct sess_mark {
	uint64_t	id;
	uint32_t	name_id;
	uint32_t	domain_id;
};

/* Per-target errors collected while resolving a request's targets. */
struct sess_acks {
	Mspti__TargetAck	*v;
	size_t			 n, cap;
	char			*msgs[SESS_MAX_TARGETS];
};

/* A snapshot being written by its writer's thread; its requester gets the
 * answer when it is done (p NULL once that peer is gone). */
struct sess_snap {
	TAILQ_ENTRY(sess_snap)	 entry;
	struct session		*s;
	struct peer		*p;
	struct trace_writer	*w;
	struct event		*ev;
	uint64_t		 nrec;
};
TAILQ_HEAD(sess_snap_list, sess_snap);

/* Which socket a peer came from; a message type lists who may send it. */
enum peer_kind {
	PEER_AGENT = 1,
	PEER_CTL = 2,
};

/* One unsent frame; fd (if >= 0) goes with its first byte. */
struct peer_out {
	TAILQ_ENTRY(peer_out)	 entry;
	uint8_t			*buf;
	size_t			 len;
	size_t			 off;
	size_t			 cost;		/* memory it holds, overhead too */
	int			 fd;
};

/* Identity of a connected process, from SO_PEERCRED. */
struct peer_cred {
	pid_t	pid;
	uid_t	uid;
	gid_t	gid;
};

/* A registered agent: one training process (or one fork of it). */
/* Task ids [lo, hi] of a device stream whose launches were still queued
 * when a capture of the agent ended, counted lost there; a later session
 * of the agent must not take their tasks (session-dev.c). */
struct agent_floor {
	uint32_t	device;
	uint32_t	stream;
	uint32_t	lo;
	uint32_t	hi;
	uint64_t	until_mono;	/* forgotten then (a reused stream id) */
};

struct agent {
	TAILQ_ENTRY(agent)	 entry;
	struct peer		*peer;
	uint64_t		 id;
	struct peer_cred	 cred;
	char			*exe;
	char			*cmdline;
	char			*job_id;
	char			*version;
	int32_t			 rank;
	int32_t			 local_rank;
	int32_t			 world_size;
	uint32_t		*devices;
	size_t			 ndevices;
	uint64_t		 capabilities;
	uint64_t		 since_ns;
	uint64_t		 session_id;
	bool			 exe_checked;	/* exe from /proc (priv.c) */
	/* Device tasks of captures the agent left. */
	struct agent_floor	*dev_floors;
	size_t			 ndev_floors;
	uint64_t		 dev_floors_refused;	/* at SESS_FLOORS_MAX */
};

struct peer {
	TAILQ_ENTRY(peer)	 entry;
	struct daemon		*d;
	enum peer_kind		 kind;
	int			 fd;
	struct peer_cred	 cred;
	struct event		*rev;
	struct event		*wev;
	struct evbuffer		*in;
	int			 rxfds[PEER_MAX_RXFDS];
	int			 nrxfds;
	bool			 rxbad;		/* sent too many descriptors */
	TAILQ_HEAD(, peer_out)	 outq;
	size_t			 queued;
	struct agent		*agent;		/* PEER_AGENT after Hello */
	bool			 closing;	/* drop once outq drains */
	struct event		*tev;		/* Hello or half-frame timeout */
	bool			 dead;		/* freed; the struct waits in
						   d->dead_peers for reaping */
	bool			 frame_timing;	/* tev runs for a half frame */
};

TAILQ_HEAD(peer_list, peer);
TAILQ_HEAD(agent_list, agent);

enum sess_state {
	SESS_STARTING,
	SESS_ACTIVE,
	SESS_STOPPING,
	SESS_FINALIZED,
	SESS_FAILED,
};

enum sess_agent_state {
	SA_STARTING,	/* StartCapture sent, no ack yet */
	SA_ACTIVE,	/* capturing into its ring */
	SA_STOPPING,	/* StopCapture sent */
	SA_DONE,	/* left the capture; its records are in */
	SA_FAILED,	/* never started */
};

/* One agent's part in one session: the ring the daemon created for it. */
struct sess_agent {
	TAILQ_ENTRY(sess_agent)	 entry;
	struct session		*s;
	struct agent		*agent;		/* NULL once it disconnected */
	pid_t			 pid;
	uid_t			 uid;
	int32_t			 rank;
	uint64_t		 agent_id;
	enum sess_agent_state	 state;
	bool			 pending;	/* an ack someone waits for */
	bool			 corrupt;
	char			*error;
	struct ring		*ring;
	size_t			 wake_threshold;
	int			 evfd;		/* the agent's wake eventfd */
	struct event		*ev;
	uint32_t		*strmap;	/* producer id -> trace id */
	char			**strs;		/* producer id -> string */
	uint64_t		 records;
	uint64_t		 rejects;	/* ours, beyond ring_drain's */
	uint64_t		 ring_rejects;
	uint64_t		 ring_drops;	/* producer's claim, bounded */
	bool			 drops_forged;	/* claimed beyond the bound */
	uint64_t		 joined_mono;	/* CLOCK_MONOTONIC at attach */
	uint64_t		 pid_rewrites;	/* records naming another pid */
	/* Ring mode: the flight recorder, a circular buffer of records. */
	uint8_t			*fr;
	size_t			 frcap, frstart, frlen;
	uint64_t		 fr_evicted;
	/* Device timing, joined here (session-dev.c). */
	struct join		*join;		/* launches <-> device tasks */
	uint64_t		 dev_unmatched;	/* launches left without device
						   timing (join's drops) */
	uint64_t		 dev_lost_kind[REC_TYPE_MAX];	/* the same,
						   by the launch's type */
	uint32_t		 ndstr;		/* daemon strings in strs[] */
	uint32_t		*dhash;		/* their index (1..ndstr) and
						   hash tag by hash, 0 empty;
						   made on first use
						   (SESS_DHASH) */
	const char		*cstr[8];	/* session_drain_const's */
	uint32_t		 cid[8];	/* constants and their ids */
	struct sess_mark	*marks;		/* host marker id -> strings */
	bool			 watched;	/* metrics_watch_pid taken */
	uint64_t		 fork_lost;	/* a fork child's early records */
	/* Step window (session-steps.c): where the agent was at its ack,
	 * the first step it records (-1: none or not known yet), the steps
	 * recorded, and the window's host start and end. */
	int64_t			 step_at_ack;
	uint64_t		 step_period_ns;
	uint64_t		 ack_mono;	/* CLOCK_MONOTONIC of that ack */
	int64_t			 first_step;
	bool			 first_known;	/* first_step is its answer */
	bool			 win_sent;	/* it was told k */
	uint32_t		 win_steps;
	uint64_t		 win_open_ns, win_close_ns;
	uint32_t		 step_src;	/* SESS_STEPS_SRC_*: its index */
	uint64_t		 capture_ns;	/* realtime its start ack came */
	bool			 win_done;
	char			*win_note;	/* what it missed, or NULL */
};
TAILQ_HEAD(sess_agent_list, sess_agent);

struct session {
	TAILQ_ENTRY(session)	 entry;
	struct daemon		*d;
	uint64_t		 id;
	enum sess_state		 state;
	struct peer_cred	 owner;
	/* Selector. */
	char			*target_text;
	char			*job_id;
	int32_t			*ranks;
	size_t			 nranks;
	bool			 all;
	bool			 elastic;	/* new matching agents join */
	/* Config. */
	uint32_t		 kinds;
	uint32_t		 kinds_ever;	/* every kind on at some time */
	char			**domains_off;
	size_t			 ndomains_off;
	uint64_t		 duration_ns;
	uint32_t		 steps_max;
	char			*step_name;
	int64_t			 step_from;	/* window start, -1: not yet */
	bool			 step_forced;	/* --start-step */
	unsigned		 step_rounds;	/* times k moved */
	size_t			 buffer_size;
	size_t			 ring_size;
	bool			 ring_mode;
	uint64_t		 max_size;
	/* Output. */
	int			 outfd;
	char			*output;	/* display name from the CLI */
	struct trace_writer	*w;
	struct trace_writer	*wclosing;	/* its thread writes the end */
	struct sess_snap_list	 snaps;		/* snapshots being written */
	struct event		*close_ev;	/* on its close_fd */
	int			 close_fd;
	bool			 finalizing;
	/* Progress. */
	struct sess_agent_list	 agents;
	uint64_t		 start_ns, end_ns;
	uint64_t		 records, flushed_records, bytes;
	uint64_t		 old_rejects, old_drops, disk_lost;
	uint64_t		 ticks;
	uint32_t		 steps_seen;
	const char		*stop_reason;	/* static string */
	char			*error;
	/* Requests waiting on the session. */
	struct peer		*reply_peer;	/* start or retarget reply */
	uint16_t		 reply_type;
	struct sess_acks	*pending_acks;
	unsigned		 npending;
	struct peer		**waiters;	/* stop and wait */
	size_t			 nwaiters;
	struct event		*drain_tv, *ack_tv, *dur_tv;
	/* Finalizing waits for device tasks of the last launches. */
	struct event		*inflight_tv;
	uint64_t		 inflight_until;	/* monotonic ns */
	/* Device collection: devices referenced (devcol, metrics), the
	 * channel loss counters when referenced, live counter samples. */
	uint64_t		 devmask;
	uint64_t		 dev_first_due;	/* no first metrics point yet */
	uint64_t		 dev_lost_base[64];
	uint64_t		 dev_lost;	/* of devices already released */
	uint64_t		 kind_on_ns[16];	/* per record type: since */
	struct metrics_sub	*msub;
};
TAILQ_HEAD(session_list, session);

/* Bounds on what peers may make the daemon hold (server_create sets the
 * defaults; msptid's options and tests change them). */
struct daemon_limits {
	size_t		max_queued;		/* PEER_MAX_QUEUED */
	unsigned	prehello_per_uid;	/* PEER_MAX_PREHELLO_PER_UID */
	unsigned	hello_timeout_ms;	/* PEER_HELLO_TIMEOUT_MS */
	unsigned	frame_timeout_ms;	/* PEER_FRAME_TIMEOUT_MS */
	uint64_t	ring_mem_per_uid;	/* flight recorders of one uid */
	uint64_t	ring_mem_total;		/* all flight recorders */
	size_t		write_queue;		/* SESS_WRITE_QUEUE */
};

struct daemon {
	struct daemon_limits	 lim;
	struct event_base	*base;
	char			*rundir;
	int			 lockfd;
	int			 agent_lfd;
	int			 ctl_lfd;
	bool			 activated;	/* sockets from systemd */
	struct event		*agent_lev;
	struct event		*ctl_lev;
	struct event		*accept_tv;	/* resumes paused listeners */
	bool			 accept_paused;	/* out of descriptors */
	uint64_t		 accept_pauses, accept_refused;
	struct event		*sigev[3];
	uint64_t		 start_ns;	/* CLOCK_REALTIME */
	uint64_t		 start_mono;
	struct peer_list	 peers;
	struct peer_list	 dead_peers;	/* closed, not yet free()d */
	struct event		*reap_ev;
	struct event		*trim_ev;	/* malloc_trim after a burst */
	struct agent_list	 agents;
	struct session_list	 sessions;
	uint64_t		 next_session_id;
	unsigned		 nagents;
	unsigned		 nsessions;
	uint64_t		 next_agent_id;
	uint64_t		 frames_rejected;
	uint64_t		 peers_dropped;
	struct devcol		*devcol;	/* device channels */
	struct event		*devpoll_ev;	/* the next poll, sooner
						   than the drain timer's
						   while channels fill fast */
	struct metrics		*metrics;	/* metric sampling */
	struct httpmetrics	*http;		/* --metrics-listen */
	/* Of sessions already freed, so node totals never go down. */
	uint64_t		 retired_records;
	uint64_t		 retired_losses[LOSS_STAGE_MAX];
	int			 exit_code;
};

/* server.c */
struct daemon	*server_create(const char *rundir);
int		 server_listen(struct daemon *);
int		 server_run(struct daemon *);
void		 server_shutdown(struct daemon *);
void		 server_free(struct daemon *);
void		 server_accept_resume(struct daemon *);
void		 server_trim_soon(struct daemon *);

/* peer.c */
struct peer	*peer_new(struct daemon *, enum peer_kind, int fd);
void		 peer_free(struct peer *);
void		 peer_reap(struct daemon *);
void		 peer_drop(struct peer *, const char *why);
int		 peer_send(struct peer *, uint16_t type,
		     const ProtobufCMessage *msg, int fd);
int		 peer_send_error(struct peer *, int code, const char *fmt, ...)
		     __attribute__((format(printf, 3, 4)));
int		 peer_take_fd(struct peer *);
const char	*peer_name(const struct peer *, char *buf, size_t len);

/* dispatch.c */
/* A handler returns 0, or -1 when it dropped the peer. */
typedef int (*dispatch_fn)(struct peer *, const ProtobufCMessage *);
int		 dispatch_frame(struct peer *, const struct frame_hdr *,
		     const uint8_t *payload);
const char	*dispatch_check(const struct peer *, const struct frame_hdr *,
		     char *buf, size_t len);

/* registry.c */
int		 registry_hello(struct peer *, const ProtobufCMessage *);
int		 registry_update(struct peer *, const ProtobufCMessage *);
int		 registry_sync(struct peer *, const ProtobufCMessage *);
void		 registry_remove(struct daemon *, struct agent *);
struct agent	*registry_find_pid(struct daemon *, pid_t);

/* ctl.c */
int		 ctl_status(struct peer *, const ProtobufCMessage *);
int		 ctl_list(struct peer *, const ProtobufCMessage *);
bool		 ctl_may_act_on(const struct peer_cred *caller, uid_t owner);

/* session.c */
extern const char *const session_state_names[];
size_t		 session_kind_names(uint32_t mask, char **out);
struct session	*session_find(struct daemon *d, uint64_t id);
bool		 session_done(const struct session *s);
struct sess_agent *session_agent_of(struct daemon *d, const struct agent *a);
void		 session_fail(struct session *s, int err, const char *what);
void		 session_agent_finish(struct sess_agent *sa, const char *why);
int		 session_attach(struct session *s, struct agent *a,
		     const char **why);
void		 session_ring_memory(struct daemon *d, uid_t uid,
		     uint64_t *of_uid, uint64_t *all);
void		 session_check_done(struct session *s);
void		 session_stop(struct session *s, const char *reason);
void		 session_free(struct session *s);
void		 session_gc(struct daemon *d);
void		 session_timeout_cb(evutil_socket_t fd, short what, void *arg);
void		 session_duration_cb(evutil_socket_t fd, short what,
		     void *arg);
bool		 session_selects(const struct session *s,
		     const struct agent *a);
int		 session_parse_kinds(char **names, size_t n, uint32_t *mask,
		     char *bad, size_t badlen);
int		 session_domains_set(struct session *s, char **on, size_t non,
		     char **off, size_t noff);
int		 session_capture_ack(struct peer *p,
		     const ProtobufCMessage *m);
int		 session_agent_registered(struct daemon *d, struct agent *a);
void		 session_agent_gone(struct daemon *d, struct agent *a);
void		 session_peer_gone(struct daemon *d, struct peer *p);
void		 session_shutdown(struct daemon *d);

/* session-drain.c */
bool		 session_drain_remap(struct session *s, struct sess_agent *sa,
		     struct rec_hdr *h);
bool		 session_drain_out(struct sess_agent *sa, struct rec_hdr *h);
/* A string's hash (session_drain_string's), eight bytes at a time: a
 * kernel's name is 30-60. */
static inline uint32_t
session_str_hash(const char *str, size_t n)
{
	uint64_t h = (uint64_t)n * 0x9e3779b97f4a7c15ull, w;

	for (; n >= 8; str += 8, n -= 8) {
		memcpy(&w, str, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	for (w = 0; n > 0; n--)
		w = w << 8 | (unsigned char)str[n - 1];
	h = (h ^ w) * 0x94d049bb133111ebull;
	return (uint32_t)(h ^ (h >> 32));
}

uint32_t	 session_drain_string(struct sess_agent *sa, const char *str);
uint32_t	 session_drain_const(struct sess_agent *sa, const char *lit);
void		 session_drain_agent(struct sess_agent *sa);
void		 session_drain_agent_losses(const struct sess_agent *sa,
		     uint64_t losses[LOSS_STAGE_MAX]);
void		 session_drain_losses(const struct session *s,
		     uint64_t losses[LOSS_STAGE_MAX]);
void		 session_drain_cb(evutil_socket_t fd, short what, void *arg);
void		 session_drain_wake_cb(evutil_socket_t fd, short what,
		     void *arg);

/* session-steps.c: step windows (--steps N, --start-step K) */
bool		 session_steps_choose(struct session *s);
bool		 session_steps_set(struct session *s, int64_t k);
int64_t		 session_steps_now(const struct sess_agent *sa);
void		 session_steps_ack(struct sess_agent *sa, int64_t step,
		     uint64_t period_ns, int64_t first, uint32_t src,
		     bool start);
bool		 session_steps_first(struct sess_agent *sa, int64_t first);
/* Where a rank's step indices come from (CaptureAck.step_source). */
#define SESS_STEPS_SRC_NONE	0
#define SESS_STEPS_SRC_MSTX	1
#define SESS_STEPS_SRC_SYNC	2
const char	*session_steps_source(uint32_t src);
bool		 session_steps_marker(struct sess_agent *sa,
		     const struct rec_marker *m);
bool		 session_steps_skip(const struct sess_agent *sa);
bool		 session_steps_task_out(const struct sess_agent *sa,
		     uint64_t start);
bool		 session_steps_check(struct session *s);
uint64_t	 session_steps_skew(const struct session *s);
void		 session_steps_describe(const struct session *s, char *buf,
		     size_t len);

/* session-flight.c */
void		 session_flight_add(struct sess_agent *sa,
		     const struct rec_hdr *h);
int		 session_flight_write(struct session *s, int fd,
		     uint64_t *nrec, struct trace_writer **wp);

/* session-dev.c */
bool		 session_dev_is_launch(const struct rec_hdr *h);
void		 session_dev_add_launch(struct sess_agent *sa,
		     const struct rec_hdr *h, uint64_t now);
bool		 session_dev_filter(uint32_t device, uint32_t pid, void *arg);
void		 session_dev_poll(struct daemon *d);
uint64_t	 session_dev_next_ns(unsigned fill, uint64_t since_ns,
		     uint64_t last_ns, bool in_use);
void		 session_dev_poll_cb(evutil_socket_t, short, void *);
void		 session_dev_use(struct session *s, const struct agent *a);
uint64_t	 session_dev_lost(const struct session *s);
void		 session_dev_release(struct session *s);
void		 session_dev_clock_records(struct session *s, uint64_t mask);
void		 session_dev_counter_cb(const struct metrics_counter *c,
		     void *arg);
uint64_t	 session_dev_unmatched(const struct sess_agent *sa);
void		 session_dev_close(struct sess_agent *sa);
void		 session_dev_agent_free(struct agent *a);
bool		 session_dev_floor_drop(struct agent *a, uint32_t device,
		     uint32_t stream, uint32_t task_id, uint64_t now);
int		 session_dev_floor_add(struct agent *a, uint32_t device,
		     uint32_t stream, uint32_t task_id, uint32_t n,
		     uint64_t now);
void		 session_dev_join_flush(struct session *s);
bool		 session_dev_inflight(const struct session *s);
void		 session_dev_waiting(const struct session *s, uint64_t *dev,
		     uint64_t *host);
void		 session_dev_last_metrics(struct session *s);
void		 session_dev_first_metrics(struct session *s);
void		 session_dev_agent_changed(struct daemon *d, struct agent *a);
void		 session_dev_start(struct sess_agent *sa, struct agent *a);
void		 session_dev_clock_text(struct session *s, char *out,
		     size_t len);

/* session-sink.c */
void		 session_sink_emit(struct session *s, const void *rec);
void		 session_sink_emit_valid(struct session *s,
		     const struct rec_hdr *rec);
uint32_t	 session_sink_intern(struct session *s, const char *str);
void		 session_sink_event(struct session *s, unsigned ev,
		     uint32_t pid, const char *detail);
void		 session_sink_process(struct session *s,
		     const struct agent *a);
int		 session_sink_open(struct session *s, int fd, size_t queue,
		     struct trace_writer **wp);
int		 session_sink_flush_tick(struct session *s);

/* session-ctl.c */
int		 session_ctl_send_info(struct peer *p, struct session *s);
void		 session_ctl_acks_free(struct sess_acks *k);
void		 session_ctl_reply_pending(struct session *s);
void		 session_ctl_snap_free(struct sess_snap *sn);
int		 session_ctl_start(struct peer *p, const ProtobufCMessage *m);
int		 session_ctl_start_fd(struct peer *p,
		     const Mspti__StartSession *req, int fd);

/* session-at.c: starts deferred to an instant (StartSession.start_at_ns) */
#define SESS_START_AT_MAX_NS	(600ull * 1000000000ull)	/* 10 min */
#define SESS_AT_MAX_PER_PEER	4	/* deferred starts per connection */
#define SESS_AT_MAX		64	/* deferred starts in all */
#define SESS_AT_MAX_PER_UID	16	/* of one uid other than root */
#define SESS_AT_ROOT_RESERVE	16	/* of SESS_AT_MAX, root's alone */
int		 session_at_defer(struct peer *p,
		     const Mspti__StartSession *req, int fd);
void		 session_at_peer_gone(struct peer *p);
void		 session_at_shutdown(void);
int		 session_ctl_stop(struct peer *p, const ProtobufCMessage *m);
int		 session_ctl_wait(struct peer *p, const ProtobufCMessage *m);
int		 session_ctl_list(struct peer *p, const ProtobufCMessage *m);
int		 session_ctl_retarget(struct peer *p,
		     const ProtobufCMessage *m);
int		 session_ctl_snapshot(struct peer *p,
		     const ProtobufCMessage *m);

/* httpmetrics.c: GET /metrics in Prometheus text format 0.0.4. */
struct httpmetrics *httpmetrics_start(struct daemon *d, const char *spec);
void		 httpmetrics_free(struct httpmetrics *);
uint16_t	 httpmetrics_port(const struct httpmetrics *);
int		 httpmetrics_parse(const char *spec,
		     struct sockaddr_storage *ss, socklen_t *len);
int		 httpmetrics_render(struct httpmetrics *, struct evbuffer *);

/* priv.c: what our privileges allow; status reports what they do not. */
bool		 priv_can_read_any_exe(void);
void		 priv_agent_exe(struct agent *);
size_t		 priv_limits(const struct daemon *, char *buf, size_t len,
		     char **lines, size_t max);

/* sd.c: every use of libsystemd lives there. */
void		 sd_ready(const char *status);
void		 sd_stopping(void);
int		 sd_watchdog_start(struct event_base *);
void		 sd_status(const char *fmt, ...)
		     __attribute__((format(printf, 1, 2)));
int		 sd_sockets(int *agent_fd, int *ctl_fd);
bool		 sd_journal(void);

#endif

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
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/event.h>
#include <event2/buffer.h>

#include "frame.h"

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
#define PEER_MAX_QUEUED		(2 * FRAME_MAX_LEN) /* unsent bytes before a peer is dropped */
#define PEER_MAX_RXFDS		4	/* descriptors received and not yet used */

struct daemon;
struct peer;
struct ring;
struct trace_writer;
struct sess_acks;
struct devcol;		/* devcol.h */
struct metrics;		/* metrics.h */
struct metrics_sub;	/* metrics.h */
struct join;		/* join.h */
struct sess_mark;	/* session.c */

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
	int			 fd;
};

/* Identity of a connected process, from SO_PEERCRED. */
struct peer_cred {
	pid_t	pid;
	uid_t	uid;
	gid_t	gid;
};

/* A registered agent: one training process (or one fork of it). */
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
	uint64_t		 ring_drops;
	/* Ring mode: the flight recorder, a circular buffer of records. */
	uint8_t			*fr;
	size_t			 frcap, frstart, frlen;
	uint64_t		 fr_evicted;
	/* Device timing, joined here (session.c "device collection"). */
	struct join		*join;		/* launches <-> device tasks */
	uint64_t		 dev_unmatched;	/* launches left without device
						   timing, once join is gone */
	uint32_t		 ndstr;		/* daemon strings in strs[] */
	struct sess_mark	*marks;		/* host marker id -> strings */
	bool			 watched;	/* metrics_watch_pid taken */
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
	char			**domains_off;
	size_t			 ndomains_off;
	uint64_t		 duration_ns;
	uint32_t		 steps_max;
	char			*step_name;
	size_t			 buffer_size;
	size_t			 ring_size;
	bool			 ring_mode;
	uint64_t		 max_size;
	/* Output. */
	int			 outfd;
	char			*output;	/* display name from the CLI */
	struct trace_writer	*w;
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
	/* Device collection: devices referenced (devcol, metrics), the
	 * channel loss counters when referenced, live counter samples. */
	uint64_t		 devmask;
	uint64_t		 dev_lost_base[64];
	uint64_t		 dev_lost;	/* of devices already released */
	uint64_t		 kind_on_ns[16];	/* per record type: since */
	struct metrics_sub	*msub;
};
TAILQ_HEAD(session_list, session);

struct daemon {
	struct event_base	*base;
	char			*rundir;
	int			 lockfd;
	int			 agent_lfd;
	int			 ctl_lfd;
	bool			 activated;	/* sockets from systemd */
	struct event		*agent_lev;
	struct event		*ctl_lev;
	struct event		*sigev[3];
	uint64_t		 start_ns;	/* CLOCK_REALTIME */
	uint64_t		 start_mono;
	struct peer_list	 peers;
	struct agent_list	 agents;
	struct session_list	 sessions;
	uint64_t		 next_session_id;
	unsigned		 nagents;
	unsigned		 nsessions;
	uint64_t		 next_agent_id;
	uint64_t		 frames_rejected;
	uint64_t		 peers_dropped;
	struct devcol		*devcol;	/* device channels */
	struct metrics		*metrics;	/* metric sampling */
	int			 exit_code;
};

/* server.c */
struct daemon	*server_create(const char *rundir);
int		 server_listen(struct daemon *);
int		 server_run(struct daemon *);
void		 server_shutdown(struct daemon *);
void		 server_free(struct daemon *);

/* peer.c */
struct peer	*peer_new(struct daemon *, enum peer_kind, int fd);
void		 peer_free(struct peer *);
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
int		 session_start_req(struct peer *, const ProtobufCMessage *);
int		 session_stop_req(struct peer *, const ProtobufCMessage *);
int		 session_retarget_req(struct peer *, const ProtobufCMessage *);
int		 session_list_req(struct peer *, const ProtobufCMessage *);
int		 session_wait_req(struct peer *, const ProtobufCMessage *);
int		 session_snapshot_req(struct peer *, const ProtobufCMessage *);
int		 session_capture_ack(struct peer *, const ProtobufCMessage *);
int		 session_agent_registered(struct daemon *, struct agent *);
void		 session_agent_gone(struct daemon *, struct agent *);
void		 session_peer_gone(struct daemon *, struct peer *);
void		 session_stop(struct session *, const char *reason);
void		 session_fail(struct session *, int err, const char *what);
void		 session_free(struct session *);
void		 session_gc(struct daemon *);
void		 session_shutdown(struct daemon *);
void		 session_agent_devices(struct daemon *, struct agent *);
size_t		 session_kind_names(uint32_t mask, char **out);
int		 session_parse_kinds(char **names, size_t n, uint32_t *mask,
		     char *bad, size_t badlen);
int		 session_domains_set(struct session *, char **on, size_t non,
		     char **off, size_t noff);

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

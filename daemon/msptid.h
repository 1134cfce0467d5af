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

#define MSPTID_VERSION		PACKAGE_VERSION
#define MSPTID_PROTOCOL		FRAME_VERSION

#define PEER_MAX_AGENTS		4096	/* registered agents at once */
#define PEER_MAX_CTL_PER_UID	32	/* control connections per uid */
#define PEER_MAX_QUEUED		(8u << 20) /* unsent bytes before a peer is dropped */
#define PEER_MAX_RXFDS		4	/* descriptors received and not yet used */

struct daemon;
struct peer;

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
	TAILQ_HEAD(, peer_out)	 outq;
	size_t			 queued;
	struct agent		*agent;		/* PEER_AGENT after Hello */
	bool			 closing;	/* drop once outq drains */
};

TAILQ_HEAD(peer_list, peer);
TAILQ_HEAD(agent_list, agent);

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
	unsigned		 nagents;
	unsigned		 nsessions;
	uint64_t		 next_agent_id;
	uint64_t		 frames_rejected;
	uint64_t		 peers_dropped;
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
void		 registry_remove(struct daemon *, struct agent *);
struct agent	*registry_find_pid(struct daemon *, pid_t);

/* ctl.c */
int		 ctl_status(struct peer *, const ProtobufCMessage *);
int		 ctl_list(struct peer *, const ProtobufCMessage *);
bool		 ctl_may_act_on(const struct peer_cred *caller, uid_t owner);

/* sd.c: every use of libsystemd lives there. */
void		 sd_ready(const char *status);
void		 sd_stopping(void);
void		 sd_status(const char *fmt, ...)
		     __attribute__((format(printf, 1, 2)));
int		 sd_sockets(int *agent_fd, int *ctl_fd);
bool		 sd_journal(void);

#endif

/*
 * A harness for unit tests of libmsptid: a struct daemon without listening
 * sockets, peers on real socketpairs with tiny buffers, and the test's own
 * end of each socketpair driven from the same thread.  The event loop only
 * runs when a helper pumps it (EVLOOP_NONBLOCK), so nothing depends on
 * time, except how long a wait may take: the daemon's trace writer is a
 * thread of its own whose fsync, on a busy disk, took longer than 200,000
 * passes of the loop (check_session, sanitizer build, in CI).
 */
#ifndef DAEMON_HARNESS_H
#define DAEMON_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "msptid.h"

#define DH_BUF		2048	/* SO_SNDBUF / SO_RCVBUF of both ends */
#define DH_WAIT_NS	30000000000ull	/* how long a wait may take */
#define DH_SPIN		20000	/* passes before each pass naps 50 us */
#define DH_MAXFDS	8

/* The daemon under test, its runtime dir. */
extern struct daemon	*dh_d;
extern char		 dh_dir[64];

/* Our end of one peer's socketpair. */
struct dh_conn {
	int		 fd;		/* non-blocking */
	int		 dfd;		/* the daemon's end (its number) */
	struct peer	*peer;		/* valid while the daemon keeps it */
	pid_t		 child;		/* the process that made the pair */
	int		 keep;		/* keeps that process alive */
	uint8_t		*buf;		/* received, not yet a whole frame */
	size_t		 len, cap;
	uint64_t	 off;		/* stream offset of buf[0] */
	int		 fds[DH_MAXFDS];	/* received with the bytes at */
	uint64_t	 fdoff[DH_MAXFDS];	/* these stream offsets */
	int		 nfds;
	bool		 eof;
};

void	dh_setup(void);
void	dh_teardown(void);

/* Runs the loop once without blocking; n times. */
void	dh_pump(int n);

/*
 * One more pass of a wait that started at *t0 (0: on this pass): false
 * once it has taken DH_WAIT_NS.  Past DH_SPIN passes each one naps first,
 * so a slow daemon gets wall time, not a count of loop passes.
 */
bool	dh_wait_more(uint64_t *t0, unsigned *passes);

/* Pumps until expr holds (for at most DH_WAIT_NS); the value of expr. */
#define DH_PUMP_UNTIL(expr) ({						\
	uint64_t dh_t0_ = 0;						\
	unsigned dh_n_ = 0;						\
	while (!(expr) && dh_wait_more(&dh_t0_, &dh_n_))		\
		dh_pump(1);						\
	(expr);								\
})

/*
 * Makes a socketpair with buffers of bufsz bytes (0: DH_BUF) and a peer of
 * kind on one end.  With as_child, a child process creates the pair, so
 * SO_PEERCRED names that process (kept alive until dh_close), not us.
 * Returns the peer, or NULL (c->fd is still ours then).
 */
struct peer	*dh_connect(struct dh_conn *c, enum peer_kind kind, int bufsz,
		    bool as_child);
void		 dh_close(struct dh_conn *c);

/* Is the daemon's peer of c still in d->peers? */
bool	dh_alive(const struct dh_conn *c);

/* Sends raw bytes, pumping the loop while the socket is full.  0 or -errno. */
int	dh_send_raw(struct dh_conn *c, const void *buf, size_t len, int fd);
/* Sends one frame (fd, if >= 0, goes with it and stays the caller's). */
int	dh_send(struct dh_conn *c, uint16_t type, const ProtobufCMessage *msg,
	    int fd);

/*
 * Reads without pumping; returns 1 when a whole frame is buffered, 0 when
 * not (yet), -ECONNRESET at EOF.
 */
int	dh_poll(struct dh_conn *c);

/*
 * Pumps until a whole frame arrived and decodes it: *typep, *msgp (freed
 * with protobuf_c_message_free_unpacked), *fdp (a descriptor that came
 * with it, or -1; NULL closes it).  0, -ECONNRESET (EOF), -ETIMEDOUT (no
 * frame within DH_WAIT_NS) or a frame_hdr_parse error.
 */
int	dh_recv(struct dh_conn *c, uint16_t *typep, ProtobufCMessage **msgp,
	    int *fdp);
/* dh_recv that expects type; NULL (and a failed check) otherwise. */
ProtobufCMessage *dh_expect(struct dh_conn *c, uint16_t type, int *fdp);

/* Pumps until the daemon closed c (reading and discarding what it sent). */
bool	dh_wait_eof(struct dh_conn *c);

/* Registers c as an agent: Hello with these fields, then Welcome.
 * Returns the agent id (0 on failure). */
uint64_t	dh_hello(struct dh_conn *c, const char *job, int rank,
		    char **argv, size_t argc);

#endif

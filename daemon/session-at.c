/*
 * Starts at an instant: a StartSession with start_at_ns (a cluster's
 * --duration start gives every node the same CLOCK_REALTIME instant) is
 * checked at once and kept, with its output descriptor, on a timer of the
 * event loop until this host's clock reaches the instant; then it starts
 * as if it had just arrived.  Nothing blocks the loop meanwhile, and the
 * start no longer waits for the node's msptictl to be scheduled, connect
 * and send at the instant: only this loop's timer latency remains.  The
 * requester's connection going away drops it.  Each waiting start holds
 * a descriptor and a copy of its request, so there are at most
 * SESS_AT_MAX_PER_PEER per connection and SESS_AT_MAX in all.  One user
 * cannot take them all from the others: a uid other than root holds at
 * most SESS_AT_MAX_PER_UID, and the last SESS_AT_ROOT_RESERVE are root's
 * alone (an operator's cluster start is not refused for a user's).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "msptid.h"

struct sess_at {
	TAILQ_ENTRY(sess_at)	 entry;
	struct peer		*p;		/* NULL once it is gone */
	Mspti__StartSession	*req;		/* our own copy */
	int			 fd;		/* the output */
	uint64_t		 at_ns;
	struct event		*tv;
};

static TAILQ_HEAD(, sess_at) sess_ats = TAILQ_HEAD_INITIALIZER(sess_ats);
static unsigned nsess_ats;

static void
session_at_free(struct sess_at *sa)
{
	TAILQ_REMOVE(&sess_ats, sa, entry);
	nsess_ats--;
	if (sa->tv != NULL)
		event_free(sa->tv);
	if (sa->fd >= 0)
		close(sa->fd);
	if (sa->req != NULL)
		mspti__start_session__free_unpacked(sa->req, NULL);
	free(sa);
}

/* Arms sa's timer for what is left to its instant (the timer runs on
 * the monotonic clock: the realtime clock is checked again when it
 * fires). */
static void
session_at_arm(struct sess_at *sa)
{
	uint64_t now = util_realtime_ns(), d = sa->at_ns > now ?
	    sa->at_ns - now : 0;
	struct timeval tv = { (time_t)(d / 1000000000ull),
	    (suseconds_t)(d % 1000000000ull / 1000) };

	evtimer_add(sa->tv, &tv);
}

static void
session_at_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess_at *sa = arg;
	struct peer *p = sa->p;
	Mspti__StartSession *req = sa->req;
	int ofd = sa->fd;

	(void)fd;
	(void)what;
	/* Early by the timer's rounding: the last microseconds. */
	if (util_realtime_ns() < sa->at_ns && sa->at_ns -
	    util_realtime_ns() > 1000) {
		session_at_arm(sa);
		return;
	}
	/* Off the list before the start: a reply that fails frees p, and
	 * session_at_peer_gone must not find (and free) this one again. */
	TAILQ_REMOVE(&sess_ats, sa, entry);
	nsess_ats--;
	event_free(sa->tv);
	free(sa);
	if (p == NULL || p->dead)
		close(ofd);
	else {
		req->start_at_ns = 0;
		(void)session_ctl_start_fd(p, req, ofd);
	}
	mspti__start_session__free_unpacked(req, NULL);
}

/*
 * Keeps req (checked by the caller) until start_at_ns; takes fd.  0, or
 * the error sent to p.
 */
int
session_at_defer(struct peer *p, const Mspti__StartSession *req, int fd)
{
	struct sess_at *sa;
	size_t len, mine = 0, uid_n = 0, users = 0;
	uint8_t *buf;

	/* Each holds a descriptor and a copy for up to 10 minutes. */
	TAILQ_FOREACH(sa, &sess_ats, entry) {
		if (sa->p == p)
			mine++;
		if (sa->p != NULL && sa->p->cred.uid == p->cred.uid)
			uid_n++;
		if (sa->p != NULL && sa->p->cred.uid != 0)
			users++;
	}
	if (mine >= SESS_AT_MAX_PER_PEER || nsess_ats >= SESS_AT_MAX ||
	    (p->cred.uid != 0 && (uid_n >= SESS_AT_MAX_PER_UID ||
	    users >= SESS_AT_MAX - SESS_AT_ROOT_RESERVE))) {
		close(fd);
		log_warnx("start by uid %lu refused: too many deferred starts "
		    "(%zu on its connection, %zu of its uid, %u in all)",
		    (unsigned long)p->cred.uid, mine, uid_n, nsess_ats);
		return peer_send_error(p, 1, "start: too many deferred starts "
		    "waiting (at most %d per connection, %d per user, %d in "
		    "all)", SESS_AT_MAX_PER_PEER, SESS_AT_MAX_PER_UID,
		    SESS_AT_MAX);
	}
	len = mspti__start_session__get_packed_size(req);
	buf = malloc(len ? len : 1);
	if (buf == NULL || (sa = calloc(1, sizeof(*sa))) == NULL) {
		free(buf);
		close(fd);
		return peer_send_error(p, 1, "daemon out of memory");
	}
	mspti__start_session__pack(req, buf);
	sa->req = mspti__start_session__unpack(NULL, len, buf);
	free(buf);
	sa->p = p;
	sa->fd = fd;
	sa->at_ns = req->start_at_ns;
	TAILQ_INSERT_TAIL(&sess_ats, sa, entry);
	nsess_ats++;
	if (sa->req == NULL ||
	    (sa->tv = evtimer_new(p->d->base, session_at_cb, sa)) == NULL) {
		session_at_free(sa);
		return peer_send_error(p, 1, "daemon out of memory");
	}
	session_at_arm(sa);
	log_info("start by uid %lu deferred to %llu (in %.3f ms)",
	    (unsigned long)p->cred.uid, (unsigned long long)sa->at_ns,
	    (double)(sa->at_ns - util_realtime_ns()) / 1e6);
	return 0;
}

/* The requester hung up: its start will not happen. */
void
session_at_peer_gone(struct peer *p)
{
	struct sess_at *sa, *next;

	TAILQ_FOREACH_SAFE(sa, &sess_ats, entry, next)
		if (sa->p == p) {
			log_info("deferred start by uid %lu dropped: the "
			    "requester went away", (unsigned long)p->cred.uid);
			session_at_free(sa);
		}
}

/* Daemon shutdown: no deferred start is left behind. */
void
session_at_shutdown(void)
{
	while (!TAILQ_EMPTY(&sess_ats))
		session_at_free(TAILQ_FIRST(&sess_ats));
}

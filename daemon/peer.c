/*
 * One connected peer (agent or control client): non-blocking reads into a
 * buffer, frame extraction, descriptor passing, and a bounded send queue.
 * A peer that sends a bad frame, floods us, or stops reading is dropped;
 * the daemon itself never stops for a peer.
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "log.h"
#include "util.h"
#include "msptid.h"

static void	peer_read_cb(evutil_socket_t, short, void *);
static void	peer_write_cb(evutil_socket_t, short, void *);
static void	peer_timeout_cb(evutil_socket_t, short, void *);

/* peer_flush: the other end closed (EPIPE, ECONNRESET). */
#define PEER_CLOSED	(-2)

const char *
peer_name(const struct peer *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s pid %ld uid %lu",
	    p->kind == PEER_AGENT ? "agent" : "client",
	    (long)p->cred.pid, (unsigned long)p->cred.uid);
	return buf;
}

static unsigned
peer_count_ctl(struct daemon *d, uid_t uid)
{
	struct peer *p;
	unsigned n = 0;

	TAILQ_FOREACH(p, &d->peers, entry)
		if (p->kind == PEER_CTL && p->cred.uid == uid)
			n++;
	return n;
}

/* Agent connections of uid that have not said Hello yet. */
static unsigned
peer_count_prehello(struct daemon *d, uid_t uid)
{
	struct peer *p;
	unsigned n = 0;

	TAILQ_FOREACH(p, &d->peers, entry)
		if (p->kind == PEER_AGENT && p->agent == NULL &&
		    p->cred.uid == uid)
			n++;
	return n;
}

static void
peer_arm(struct peer *p, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(p->tev, &tv);
}

/*
 * Keeps the one timer of p right after a read: an agent has until its
 * Hello timeout to say Hello; after that, a frame once begun must be
 * complete within the frame timeout (restarted by every whole frame).
 */
static void
peer_timer_update(struct peer *p, bool progressed)
{
	size_t buffered = evbuffer_get_length(p->in);

	if (p->kind == PEER_AGENT && p->agent == NULL)
		return;			/* the Hello timer, from peer_new */
	if (buffered == 0 || progressed) {
		if (p->frame_timing || evtimer_pending(p->tev, NULL))
			evtimer_del(p->tev);
		p->frame_timing = false;
	}
	if (buffered > 0 && !p->frame_timing) {
		p->frame_timing = true;
		peer_arm(p, p->d->lim.frame_timeout_ms);
	}
}

static void
peer_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;

	p->d->frames_rejected += p->frame_timing;
	peer_drop(p, p->frame_timing ? "stalled in the middle of a frame" :
	    "no Hello in time");
}

struct peer *
peer_new(struct daemon *d, enum peer_kind kind, int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	struct peer *p;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
		log_warn("SO_PEERCRED");
		return NULL;
	}
	if (kind == PEER_CTL && uc.uid != 0 &&
	    peer_count_ctl(d, uc.uid) >= PEER_MAX_CTL_PER_UID) {
		log_warnx("uid %lu: too many control connections",
		    (unsigned long)uc.uid);
		return NULL;
	}
	if (kind == PEER_AGENT && d->nagents >= PEER_MAX_AGENTS) {
		log_warnx("pid %ld: agent limit %u reached", (long)uc.pid,
		    PEER_MAX_AGENTS);
		return NULL;
	}
	/* Root too: a registered agent no longer counts, so only a flood
	 * of silent connections meets this. */
	if (kind == PEER_AGENT &&
	    peer_count_prehello(d, uc.uid) >= d->lim.prehello_per_uid) {
		log_debug("uid %lu: too many agent connections without Hello",
		    (unsigned long)uc.uid);
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->d = d;
	p->kind = kind;
	p->fd = fd;
	p->cred.pid = uc.pid;
	p->cred.uid = uc.uid;
	p->cred.gid = uc.gid;
	TAILQ_INIT(&p->outq);
	TAILQ_INSERT_TAIL(&d->peers, p, entry);
	p->in = evbuffer_new();
	p->rev = event_new(d->base, fd, EV_READ | EV_PERSIST, peer_read_cb, p);
	p->wev = event_new(d->base, fd, EV_WRITE, peer_write_cb, p);
	p->tev = evtimer_new(d->base, peer_timeout_cb, p);
	if (p->in == NULL || p->rev == NULL || p->wev == NULL ||
	    p->tev == NULL || event_add(p->rev, NULL) != 0) {
		p->fd = -1;	/* the caller closes it */
		peer_free(p);
		return NULL;
	}
	if (kind == PEER_AGENT)
		peer_arm(p, d->lim.hello_timeout_ms);
	log_debug("new %s peer pid %ld", kind == PEER_AGENT ? "agent" : "ctl",
	    (long)uc.pid);
	return p;
}

/*
 * Closes p and releases everything it holds.  The struct itself is kept
 * (dead) until the loop runs again, so a caller up the stack that still
 * holds p (a handler that ignored peer_send's -1) sees p->dead, never
 * freed memory.
 */
void
peer_free(struct peer *p)
{
	struct peer_out *o;

	if (p == NULL || p->dead)
		return;
	if (p->queued > PEER_TRIM_BYTES || (p->in != NULL &&
	    evbuffer_get_length(p->in) > PEER_TRIM_BYTES))
		server_trim_soon(p->d);
	if (p->agent != NULL)
		registry_remove(p->d, p->agent);
	if (p->kind == PEER_CTL)
		session_peer_gone(p->d, p);
	TAILQ_REMOVE(&p->d->peers, p, entry);
	if (p->rev != NULL)
		event_free(p->rev);
	p->rev = NULL;
	if (p->wev != NULL)
		event_free(p->wev);
	if (p->tev != NULL)
		event_free(p->tev);
	if (p->in != NULL)
		evbuffer_free(p->in);
	p->wev = p->tev = NULL;
	p->in = NULL;
	while ((o = TAILQ_FIRST(&p->outq)) != NULL) {
		TAILQ_REMOVE(&p->outq, o, entry);
		if (o->fd >= 0)
			close(o->fd);
		free(o->buf);
		free(o);
	}
	for (int i = 0; i < p->nrxfds; i++)
		close(p->rxfds[i]);
	if (p->fd >= 0) {
		close(p->fd);
		/* A descriptor is free again: listeners paused by EMFILE
		 * may accept. */
		server_accept_resume(p->d);
	}
	p->fd = -1;
	p->dead = true;
	TAILQ_INSERT_TAIL(&p->d->dead_peers, p, entry);
	event_active(p->d->reap_ev, EV_TIMEOUT, 0);
}

/* Frees the peers closed since the loop last ran. */
void
peer_reap(struct daemon *d)
{
	struct peer *p;

	while ((p = TAILQ_FIRST(&d->dead_peers)) != NULL) {
		TAILQ_REMOVE(&d->dead_peers, p, entry);
		free(p);
	}
}

/* Drops a misbehaving peer with one log line. */
void
peer_drop(struct peer *p, const char *why)
{
	char name[64];

	log_warnx("dropping %s: %s", peer_name(p, name, sizeof(name)), why);
	p->d->peers_dropped++;
	server_trim_soon(p->d);
	peer_free(p);
}

/* Returns the oldest descriptor received from the peer, or -1. */
int
peer_take_fd(struct peer *p)
{
	int fd;

	if (p->nrxfds == 0)
		return -1;
	fd = p->rxfds[0];
	memmove(p->rxfds, p->rxfds + 1, (size_t)(p->nrxfds - 1) * sizeof(int));
	p->nrxfds--;
	return fd;
}

/* Queues a received descriptor; more than PEER_MAX_RXFDS breaks a rule. */
static void
peer_keep_fd(int fd, void *arg)
{
	struct peer *p = arg;

	if (p->nrxfds < PEER_MAX_RXFDS)
		p->rxfds[p->nrxfds++] = fd;
	else {
		close(fd);
		p->rxbad = true;
	}
}

/* Reads what is available; returns -1 if the peer is gone or broke a rule. */
static int
peer_fill(struct peer *p, const char **why)
{
	uint8_t buf[65536];
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * PEER_MAX_RXFDS)];
	} cm;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	ssize_t n;

	n = recvmsg(p->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		/* A process that exits with our reply unread resets the
		 * connection: that is an ordinary close, not a fault. */
		*why = errno == ECONNRESET ? NULL : strerror(errno);
		return -1;
	}
	if (n == 0) {
		*why = NULL;	/* orderly close */
		return -1;
	}
	p->rxbad = 0;
	frame_collect_fds(&mh, peer_keep_fd, p);
	if ((mh.msg_flags & MSG_CTRUNC) || p->rxbad) {
		*why = "too many passed descriptors";
		return -1;
	}
	if (evbuffer_add(p->in, buf, (size_t)n) != 0) {
		*why = "out of memory";
		return -1;
	}
	return 1;
}

static void
peer_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	struct daemon *d = p->d;
	uint8_t hdrbuf[FRAME_HDR_LEN];
	struct frame_hdr h;
	const char *why = NULL, *bad;
	char buf[96];
	bool progressed = false;
	int rc;

	if ((rc = peer_fill(p, &why)) < 0) {
		if (why != NULL)
			peer_drop(p, why);
		else
			peer_free(p);
		return;
	}
	/* Extract every whole frame; dispatch may free the peer. */
	while (evbuffer_get_length(p->in) >= FRAME_HDR_LEN) {
		evbuffer_copyout(p->in, hdrbuf, sizeof(hdrbuf));
		if ((rc = frame_hdr_parse(hdrbuf, &h)) != 0) {
			d->frames_rejected++;
			peer_drop(p, frame_strerror(rc));
			return;
		}
		/* Judged on its header: no payload of a frame we would
		 * refuse is ever buffered. */
		if ((bad = dispatch_check(p, &h, buf, sizeof(buf))) != NULL) {
			d->frames_rejected++;
			peer_drop(p, bad);
			return;
		}
		if (evbuffer_get_length(p->in) < FRAME_HDR_LEN + (size_t)h.len)
			break;
		uint8_t *frame = evbuffer_pullup(p->in, FRAME_HDR_LEN + h.len);
		if (frame == NULL) {
			peer_drop(p, "out of memory");
			return;
		}
		/* dispatch_frame frees the peer on error; stop then. */
		if (dispatch_frame(p, &h, frame + FRAME_HDR_LEN) != 0 ||
		    p->dead)
			return;
		evbuffer_drain(p->in, FRAME_HDR_LEN + h.len);
		progressed = true;
		if (p->closing)
			return;
	}
	/* A Hello just handled stops the Hello timer. */
	if (progressed && p->kind == PEER_AGENT && p->agent != NULL &&
	    !p->frame_timing)
		evtimer_del(p->tev);
	peer_timer_update(p, progressed);
}

/* Writes queued frames; returns 0, PEER_CLOSED when the other end is
 * gone, or -1 on another error. */
static int
peer_flush(struct peer *p)
{
	struct peer_out *o;

	while ((o = TAILQ_FIRST(&p->outq)) != NULL) {
		struct iovec iov = { o->buf + o->off, o->len - o->off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		union frame_cmsg1 cm;
		ssize_t n;

		if (o->fd >= 0 && o->off == 0)
			frame_attach_fd(&mh, &cm, o->fd);
		n = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			/* It exited or closed before reading what we had to
			 * say (a launcher's short-lived child, say). */
			if (errno == EPIPE || errno == ECONNRESET)
				return PEER_CLOSED;
			return -1;
		}
		if (o->fd >= 0) {
			close(o->fd);
			o->fd = -1;
		}
		o->off += (size_t)n;
		if (o->off < o->len)
			break;
		p->queued -= o->cost;
		TAILQ_REMOVE(&p->outq, o, entry);
		free(o->buf);
		free(o);
	}
	if (!TAILQ_EMPTY(&p->outq))
		event_add(p->wev, NULL);
	return 0;
}

/* After a failed peer_flush: an orderly close, or a fault. */
static void
peer_flush_failed(struct peer *p, int rc)
{
	char name[64];

	if (rc == PEER_CLOSED) {
		log_debug("%s closed before reading our reply",
		    peer_name(p, name, sizeof(name)));
		peer_free(p);
	} else
		peer_drop(p, "write failed");
}

static void
peer_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	int rc;

	if ((rc = peer_flush(p)) != 0)
		peer_flush_failed(p, rc);
	else if (p->closing && TAILQ_EMPTY(&p->outq))
		peer_free(p);
}

/*
 * Queues one frame (and a descriptor, which the peer layer then owns and
 * closes once sent).  Returns 0, or -1 when the peer was dropped: the
 * caller must not touch it afterwards.
 */
int
peer_send(struct peer *p, uint16_t type, const ProtobufCMessage *msg, int fd)
{
	struct peer_out *o;
	int rc;

	if (p->dead) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if ((o = calloc(1, sizeof(*o))) == NULL)
		goto fail;
	o->fd = fd;
	if ((rc = frame_pack(type, msg, &o->buf, &o->len)) != 0) {
		log_warnx("cannot pack %s: %s", msg_name(type), frame_strerror(rc));
		free(o);
		if (fd >= 0)
			close(fd);
		/* The requester gets an answer, never silence. */
		if (type == MSPTI__MSG_TYPE__MSG_ERROR)
			return 0;
		return peer_send_error(p, 1, "cannot send %s: %s",
		    msg_name(type), frame_strerror(rc));
	}
	/* What the frame really holds: both blocks and malloc's header of
	 * each, so a flood of tiny replies meets the bound too. */
	o->cost = malloc_usable_size(o->buf) + malloc_usable_size(o) +
	    2 * sizeof(size_t);
	if (p->queued + o->cost > p->d->lim.max_queued) {
		free(o->buf);
		free(o);
		if (fd >= 0)
			close(fd);
		peer_drop(p, "not reading its replies");
		return -1;
	}
	TAILQ_INSERT_TAIL(&p->outq, o, entry);
	p->queued += o->cost;
	if ((rc = peer_flush(p)) != 0) {
		peer_flush_failed(p, rc);
		return -1;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return 0;
}

int
peer_send_error(struct peer *p, int code, const char *fmt, ...)
{
	Mspti__Error err = MSPTI__ERROR__INIT;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	err.code = code;
	err.message = msg;
	return peer_send(p, MSPTI__MSG_TYPE__MSG_ERROR, &err.base, -1);
}

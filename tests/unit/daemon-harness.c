/* The libmsptid test harness (daemon-harness.h). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "daemon-harness.h"

struct daemon	*dh_d;
char		 dh_dir[64];

void
dh_setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	snprintf(dh_dir, sizeof(dh_dir), "/tmp/msptid-ut.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dh_dir));
	dh_d = server_create(dh_dir);
	ck_assert_ptr_nonnull(dh_d);
}

void
dh_teardown(void)
{
	if (dh_d != NULL) {
		server_shutdown(dh_d);
		server_free(dh_d);
		dh_d = NULL;
	}
	rmdir(dh_dir);
}

void
dh_pump(int n)
{
	for (int i = 0; i < n; i++)
		event_base_loop(dh_d->base, EVLOOP_NONBLOCK);
}

bool
dh_wait_more(uint64_t *t0, unsigned *passes)
{
	struct timespec ts, nap = { 0, 50000 };
	uint64_t now;

	if (++*passes > DH_SPIN)
		nanosleep(&nap, NULL);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (*t0 == 0)
		*t0 = now;
	return now - *t0 < DH_WAIT_NS;
}

static void
dh_bufsize(int fd, int bufsz)
{
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsz,
	    sizeof(bufsz)), 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsz,
	    sizeof(bufsz)), 0);
}

/* A child makes the socketpair and hands us both ends, then waits for
 * EOF on keep so the pid that SO_PEERCRED names stays alive. */
static void
dh_pair_from_child(struct dh_conn *c, int sv[2])
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	int ctl[2];
	char b = 0;
	struct iovec iov = { &b, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *ch;
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int pair[2];

		close(ctl[0]);
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
		    pair) != 0)
			_exit(1);
		memset(&cm, 0, sizeof(cm));
		ch = CMSG_FIRSTHDR(&mh);
		ch->cmsg_level = SOL_SOCKET;
		ch->cmsg_type = SCM_RIGHTS;
		ch->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(ch), pair, sizeof(pair));
		if (sendmsg(ctl[1], &mh, 0) != 1)
			_exit(1);
		close(pair[0]);
		close(pair[1]);
		while (read(ctl[1], &b, 1) > 0)
			;
		_exit(0);
	}
	close(ctl[1]);
	ck_assert_int_eq(recvmsg(ctl[0], &mh, MSG_CMSG_CLOEXEC), 1);
	ch = CMSG_FIRSTHDR(&mh);
	ck_assert_ptr_nonnull(ch);
	ck_assert_int_eq(ch->cmsg_type, SCM_RIGHTS);
	memcpy(sv, CMSG_DATA(ch), 2 * sizeof(int));
	c->child = pid;
	c->keep = ctl[0];
}

struct peer *
dh_connect(struct dh_conn *c, enum peer_kind kind, int bufsz, bool as_child)
{
	int sv[2];

	memset(c, 0, sizeof(*c));
	c->keep = -1;
	if (as_child)
		dh_pair_from_child(c, sv);
	else
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC,
		    0, sv), 0);
	if (bufsz <= 0)
		bufsz = DH_BUF;
	dh_bufsize(sv[0], bufsz);
	dh_bufsize(sv[1], bufsz);
	ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	c->fd = sv[1];
	c->dfd = sv[0];
	c->peer = peer_new(dh_d, kind, sv[0]);
	if (c->peer == NULL)
		close(sv[0]);
	return c->peer;
}

void
dh_close(struct dh_conn *c)
{
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
	if (c->keep >= 0) {
		close(c->keep);
		c->keep = -1;
		waitpid(c->child, NULL, 0);
	}
}

bool
dh_alive(const struct dh_conn *c)
{
	struct peer *p;

	TAILQ_FOREACH(p, &dh_d->peers, entry)
		if (p == c->peer && p->fd == c->dfd)
			return true;
	return false;
}

int
dh_send_raw(struct dh_conn *c, const void *buf, size_t len, int fd)
{
	size_t off = 0;
	uint64_t t0 = 0;
	unsigned passes = 0;

	while (off < len) {
		struct iovec iov = { (uint8_t *)buf + off, len - off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		union frame_cmsg1 cm;
		ssize_t n;

		if (fd >= 0 && off == 0)
			frame_attach_fd(&mh, &cm, fd);
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				return -errno;
			if (!dh_wait_more(&t0, &passes))
				return -ETIMEDOUT;
			dh_pump(1);
			continue;
		}
		off += (size_t)n;
	}
	return 0;
}

int
dh_send(struct dh_conn *c, uint16_t type, const ProtobufCMessage *msg, int fd)
{
	uint8_t *buf;
	size_t len;
	int rc;

	if ((rc = frame_pack(type, msg, &buf, &len)) != 0)
		return rc;
	rc = dh_send_raw(c, buf, len, fd);
	free(buf);
	return rc;
}

static void
dh_keep_fd(int fd, void *arg)
{
	struct dh_conn *c = arg;

	if (c->nfds < DH_MAXFDS) {
		c->fdoff[c->nfds] = c->off + c->len;
		c->fds[c->nfds++] = fd;
	} else
		close(fd);
}

/* One non-blocking read into c->buf: 1 read, 0 nothing, -ECONNRESET. */
static int
dh_fill(struct dh_conn *c)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct msghdr mh;
	struct iovec iov;
	ssize_t n;

	if (c->eof)
		return -ECONNRESET;
	if (c->cap - c->len < 65536) {
		c->cap = c->cap ? c->cap * 2 : 131072;
		c->buf = realloc(c->buf, c->cap);
		ck_assert_ptr_nonnull(c->buf);
	}
	iov.iov_base = c->buf + c->len;
	iov.iov_len = c->cap - c->len;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0) {
		c->eof = true;
		return -ECONNRESET;
	}
	frame_collect_fds(&mh, dh_keep_fd, c);
	c->len += (size_t)n;
	return 1;
}

/* A whole frame at the front of c->buf? */
static bool
dh_have_frame(const struct dh_conn *c)
{
	struct frame_hdr h;

	if (c->len < FRAME_HDR_LEN)
		return false;
	if (frame_hdr_parse(c->buf, &h) != 0)
		return true;	/* reported by dh_recv */
	return c->len >= FRAME_HDR_LEN + (size_t)h.len;
}

int
dh_poll(struct dh_conn *c)
{
	int rc;

	while (!dh_have_frame(c))
		if ((rc = dh_fill(c)) <= 0)
			return rc;
	return 1;
}

int
dh_recv(struct dh_conn *c, uint16_t *typep, ProtobufCMessage **msgp, int *fdp)
{
	struct frame_hdr h;
	size_t flen;
	int fd = -1, rc;
	uint64_t t0 = 0;
	unsigned passes = 0;

	*msgp = NULL;
	if (fdp != NULL)
		*fdp = -1;
	while ((rc = dh_poll(c)) == 0) {
		if (!dh_wait_more(&t0, &passes))
			return -ETIMEDOUT;
		dh_pump(1);
	}
	if (rc < 0)
		return rc;
	if ((rc = frame_hdr_parse(c->buf, &h)) != 0)
		return rc;
	flen = FRAME_HDR_LEN + h.len;
	/* Descriptors that came with this frame's bytes. */
	for (int i = 0; i < c->nfds; ) {
		if (c->fdoff[i] < c->off + flen) {
			if (fd < 0)
				fd = c->fds[i];
			else
				close(c->fds[i]);
			memmove(&c->fds[i], &c->fds[i + 1],
			    (size_t)(c->nfds - i - 1) * sizeof(int));
			memmove(&c->fdoff[i], &c->fdoff[i + 1],
			    (size_t)(c->nfds - i - 1) * sizeof(uint64_t));
			c->nfds--;
		} else
			i++;
	}
	rc = frame_unpack(&h, c->buf + FRAME_HDR_LEN, msgp);
	memmove(c->buf, c->buf + flen, c->len - flen);
	c->len -= flen;
	c->off += flen;
	if (rc != 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	*typep = h.type;
	if (fdp != NULL)
		*fdp = fd;
	else if (fd >= 0)
		close(fd);
	return 0;
}

ProtobufCMessage *
dh_expect(struct dh_conn *c, uint16_t type, int *fdp)
{
	ProtobufCMessage *m;
	uint16_t t = 0;
	int rc;

	rc = dh_recv(c, &t, &m, fdp);
	ck_assert_msg(rc == 0, "waiting for %s: %s", msg_name(type),
	    frame_strerror(rc));
	if (t == MSPTI__MSG_TYPE__MSG_ERROR && type != t)
		ck_abort_msg("waiting for %s: Error %d: %s", msg_name(type),
		    ((Mspti__Error *)m)->code, ((Mspti__Error *)m)->message);
	ck_assert_msg(t == type, "waiting for %s, got %s", msg_name(type),
	    msg_name(t));
	return m;
}

bool
dh_wait_eof(struct dh_conn *c)
{
	uint64_t t0 = 0;
	unsigned passes = 0;

	while (dh_wait_more(&t0, &passes)) {
		int rc = dh_fill(c);

		if (rc == -ECONNRESET || (rc < 0 && rc != -EAGAIN))
			return true;
		if (rc > 0) {
			/* Discard what the daemon sent before closing. */
			c->off += c->len;
			c->len = 0;
			continue;
		}
		dh_pump(1);
	}
	return false;
}

uint64_t
dh_hello(struct dh_conn *c, const char *job, int rank, char **argv,
    size_t argc)
{
	Mspti__Hello h = MSPTI__HELLO__INIT;
	Mspti__Welcome *w;
	uint64_t id;

	h.exe = "/usr/bin/python3";
	h.argv = argv;
	h.n_argv = argc;
	h.job_id = (char *)(job ? job : "");
	h.rank = rank;
	h.local_rank = rank;
	h.world_size = rank >= 0 ? 8 : -1;
	h.agent_version = "9.9.9";
	if (dh_send(c, MSPTI__MSG_TYPE__MSG_HELLO, &h.base, -1) != 0)
		return 0;
	w = (Mspti__Welcome *)dh_expect(c, MSPTI__MSG_TYPE__MSG_WELCOME, NULL);
	id = w->agent_id;
	ck_assert_uint_eq(w->protocol, FRAME_VERSION);
	protobuf_c_message_free_unpacked(&w->base, NULL);
	return id;
}

/*
 * Frame codec and blocking frame I/O.  The daemon has its own non-blocking
 * reader (daemon/peer.c) but shares the header codec and the type table.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "frame.h"
#include "util.h"

#define MSG(t, n, d, m) [MSPTI__MSG_TYPE__##t] = { n, &d, m }

const struct msg_desc msg_table[MSG_TYPE_MAX] = {
	MSG(MSG_HELLO, "Hello", mspti__hello__descriptor, 64 * 1024),
	MSG(MSG_WELCOME, "Welcome", mspti__welcome__descriptor, 4096),
	MSG(MSG_AGENT_UPDATE, "AgentUpdate", mspti__agent_update__descriptor, 4096),
	MSG(MSG_ERROR, "Error", mspti__error__descriptor, 4096),
	MSG(MSG_STATUS_REQ, "StatusRequest", mspti__status_request__descriptor, 256),
	MSG(MSG_STATUS_REP, "StatusReply", mspti__status_reply__descriptor, 64 * 1024),
	MSG(MSG_LIST_REQ, "ListRequest", mspti__list_request__descriptor, 256),
	MSG(MSG_LIST_REP, "ListReply", mspti__list_reply__descriptor, FRAME_MAX_LEN),
	MSG(MSG_METRICS_REQ, "MetricsRequest", mspti__metrics_request__descriptor, 256),
	MSG(MSG_METRICS_REP, "MetricsReply", mspti__metrics_reply__descriptor, FRAME_MAX_LEN),
	MSG(MSG_START_SESSION, "StartSession", mspti__start_session__descriptor, 64 * 1024),
	MSG(MSG_START_SESSION_REP, "StartSessionReply", mspti__start_session_reply__descriptor, FRAME_MAX_LEN),
	MSG(MSG_STOP_SESSION, "StopSession", mspti__stop_session__descriptor, 256),
	MSG(MSG_SESSION_INFO, "SessionInfo", mspti__session_info__descriptor, FRAME_MAX_LEN),
	MSG(MSG_RETARGET_SESSION, "RetargetSession", mspti__retarget_session__descriptor, 64 * 1024),
	MSG(MSG_RETARGET_REP, "RetargetReply", mspti__retarget_reply__descriptor, FRAME_MAX_LEN),
	MSG(MSG_SESSIONS_REQ, "SessionsRequest", mspti__sessions_request__descriptor, 256),
	MSG(MSG_SESSIONS_REP, "SessionsReply", mspti__sessions_reply__descriptor, FRAME_MAX_LEN),
	MSG(MSG_WAIT_SESSION, "WaitSession", mspti__wait_session__descriptor, 256),
	MSG(MSG_SNAPSHOT_SESSION, "SnapshotSession", mspti__snapshot_session__descriptor, 8192),
	MSG(MSG_START_CAPTURE, "StartCapture", mspti__start_capture__descriptor, 64 * 1024),
	MSG(MSG_UPDATE_CAPTURE, "UpdateCapture", mspti__update_capture__descriptor, 64 * 1024),
	MSG(MSG_STOP_CAPTURE, "StopCapture", mspti__stop_capture__descriptor, 256),
	MSG(MSG_CAPTURE_ACK, "CaptureAck", mspti__capture_ack__descriptor, 4096),
	MSG(MSG_AGENT_SYNC, "AgentSync", mspti__agent_sync__descriptor, 256),
	MSG(MSG_AGENT_SYNC_REP, "AgentSyncReply", mspti__agent_sync_reply__descriptor, 256),
};

const char *
msg_name(unsigned type)
{
	if (type >= MSG_TYPE_MAX || msg_table[type].desc == NULL)
		return "unknown";
	return msg_table[type].name;
}

void
frame_hdr_put(uint8_t out[FRAME_HDR_LEN], uint16_t type, uint32_t len)
{
	util_put_le(out, FRAME_MAGIC, 4);
	out[4] = FRAME_VERSION & 0xff;
	out[5] = FRAME_VERSION >> 8;
	out[6] = type & 0xff;
	out[7] = type >> 8;
	util_put_le(out + 8, len, 4);
}

int
frame_hdr_parse(const uint8_t in[FRAME_HDR_LEN], struct frame_hdr *h)
{
	h->magic = util_get_le32(in);
	h->version = in[4] | in[5] << 8;
	h->type = in[6] | in[7] << 8;
	h->len = util_get_le32(in + 8);
	if (h->magic != FRAME_MAGIC || h->version != FRAME_VERSION)
		return -EPROTO;
	if (h->type >= MSG_TYPE_MAX || msg_table[h->type].desc == NULL)
		return -EBADMSG;
	if (h->len > msg_table[h->type].max_len || h->len > FRAME_MAX_LEN)
		return -EMSGSIZE;
	return 0;
}

int
frame_pack(uint16_t type, const ProtobufCMessage *msg, uint8_t **out,
    size_t *outlen)
{
	size_t len;
	uint8_t *buf;

	if (type >= MSG_TYPE_MAX || msg_table[type].desc == NULL ||
	    msg->descriptor != msg_table[type].desc)
		return -EINVAL;
	len = protobuf_c_message_get_packed_size(msg);
	if (len > msg_table[type].max_len)
		return -EMSGSIZE;
	if ((buf = malloc(FRAME_HDR_LEN + len)) == NULL)
		return -ENOMEM;
	frame_hdr_put(buf, type, (uint32_t)len);
	protobuf_c_message_pack(msg, buf + FRAME_HDR_LEN);
	*out = buf;
	*outlen = FRAME_HDR_LEN + len;
	return 0;
}

int
frame_unpack(const struct frame_hdr *h, const uint8_t *payload,
    ProtobufCMessage **out)
{
	*out = protobuf_c_message_unpack(msg_table[h->type].desc, NULL, h->len,
	    payload);
	return *out == NULL ? -EBADMSG : 0;
}

int
frame_send(int sock, uint16_t type, const ProtobufCMessage *msg, int fd)
{
	uint8_t *buf;
	size_t len, off = 0;
	int rc;

	if ((rc = frame_pack(type, msg, &buf, &len)) != 0)
		return rc;
	while (off < len) {
		struct iovec iov = { buf + off, len - off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		union frame_cmsg1 cm;
		ssize_t n;

		if (fd >= 0 && off == 0)
			frame_attach_fd(&mh, &cm, fd);
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { sock, POLLOUT, 0 };
				if (poll(&p, 1, 1000) <= 0) {
					free(buf);
					return -ETIMEDOUT;
				}
				continue;
			}
			rc = -errno;
			free(buf);
			return rc;
		}
		off += (size_t)n;
	}
	free(buf);
	return 0;
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void
frame_attach_fd(struct msghdr *mh, union frame_cmsg1 *cm, int fd)
{
	struct cmsghdr *c;

	memset(cm, 0, sizeof(*cm));
	mh->msg_control = cm->buf;
	mh->msg_controllen = sizeof(cm->buf);
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
}

void
frame_collect_fds(struct msghdr *mh, void (*fn)(int fd, void *arg), void *arg)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			fn(fd, arg);
		}
	}
}

/* Keeps the first descriptor in *arg (an int *, may be NULL); closes others. */
static void
keep_first_fd(int fd, void *arg)
{
	int *fdp = arg;

	if (fdp != NULL && *fdp < 0)
		*fdp = fd;
	else
		close(fd);
}

/* Reads exactly len bytes before the deadline, collecting one passed fd. */
static int
read_full(int sock, uint8_t *p, size_t len, long deadline, int *fdp)
{
	size_t off = 0;

	while (off < len) {
		union {
			struct cmsghdr	hdr;
			char		buf[CMSG_SPACE(sizeof(int) * 4)];
		} cm;
		struct iovec iov = { p + off, len - off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
		    .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
		ssize_t n;

		if (deadline >= 0) {
			long left = deadline - now_ms();
			struct pollfd pf = { sock, POLLIN, 0 };
			int r;

			if (left <= 0)
				return -ETIMEDOUT;
			r = poll(&pf, 1, (int)left);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return r == 0 ? -ETIMEDOUT : -errno;
		}
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		frame_collect_fds(&mh, keep_first_fd, fdp);
		off += (size_t)n;
	}
	return 0;
}

int
frame_recv(int sock, int timeout_ms, struct frame_hdr *h,
    ProtobufCMessage **msg, int *fdp)
{
	uint8_t hdr[FRAME_HDR_LEN], *payload = NULL;
	long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	int fd = -1, rc;

	*msg = NULL;
	if (fdp != NULL)
		*fdp = -1;
	if ((rc = read_full(sock, hdr, sizeof(hdr), deadline, &fd)) != 0)
		goto fail;
	if ((rc = frame_hdr_parse(hdr, h)) != 0)
		goto fail;
	if (h->len > 0) {
		if ((payload = malloc(h->len)) == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
		if ((rc = read_full(sock, payload, h->len, deadline, &fd)) != 0)
			goto fail;
	}
	if ((rc = frame_unpack(h, payload, msg)) != 0)
		goto fail;
	free(payload);
	if (fdp != NULL)
		*fdp = fd;
	else if (fd >= 0)
		close(fd);
	return 0;
fail:
	free(payload);
	if (fd >= 0)
		close(fd);
	return rc;
}

const char *
frame_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EPROTO:
		return "bad frame magic or protocol version";
	case -EBADMSG:
		return "unknown message type or malformed message";
	case -EMSGSIZE:
		return "message too large";
	case -ETIMEDOUT:
		return "timed out";
	case -ECONNRESET:
		return "connection closed by peer";
	default:
		return strerror(-err);
	}
}

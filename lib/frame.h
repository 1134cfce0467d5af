/*
 * Frames on agent.sock and ctl.sock: a 12-byte little-endian header
 * (magic "MSPT", version, type, payload length) then one protobuf message.
 * The message type table (msg_table) is the one place that maps a type to
 * its name, descriptor and size bound.
 */
#ifndef MSPTI_FRAME_H
#define MSPTI_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <protobuf-c/protobuf-c.h>

#include "mspti.pb-c.h"

#define FRAME_MAGIC	0x5450534du	/* "MSPT" read as little-endian u32 */
#define FRAME_VERSION	1
#define FRAME_HDR_LEN	12
#define FRAME_MAX_LEN	(16u << 20)	/* hard bound on any payload; each
					 * type has its own, smaller bound */

struct frame_hdr {
	uint32_t	magic;
	uint16_t	version;
	uint16_t	type;
	uint32_t	len;
};

struct msg_desc {
	const char				*name;
	const ProtobufCMessageDescriptor	*desc;
	uint32_t				 max_len;
};

/* Indexed by MSPTI__MSG_TYPE__*; entries with desc == NULL are unknown. */
#define MSG_TYPE_MAX	64
extern const struct msg_desc msg_table[MSG_TYPE_MAX];

const char	*msg_name(unsigned type);

/* Header codec.  frame_hdr_parse returns 0, -EPROTO (bad magic or version),
 * -EBADMSG (unknown type) or -EMSGSIZE (payload over the type's bound). */
void	frame_hdr_put(uint8_t out[FRAME_HDR_LEN], uint16_t type, uint32_t len);
int	frame_hdr_parse(const uint8_t in[FRAME_HDR_LEN], struct frame_hdr *h);

/* Packs msg as a full frame into a malloc'd buffer the caller frees.
 * Returns 0 or -EMSGSIZE / -ENOMEM / -EINVAL. */
int	frame_pack(uint16_t type, const ProtobufCMessage *msg,
	    uint8_t **out, size_t *outlen);

/* Unpacks a payload of header h; *out is freed with protobuf_c_message_free_unpacked.
 * Returns 0 or -EBADMSG. */
int	frame_unpack(const struct frame_hdr *h, const uint8_t *payload,
	    ProtobufCMessage **out);

/* Blocking I/O for clients (msptictl, the agent's thread).  frame_send
 * passes fd (if >= 0) with SCM_RIGHTS.  frame_recv waits at most timeout_ms
 * (-1 forever) for a whole frame, returns the decoded message and, when a
 * descriptor came with it and fdp is not NULL, that descriptor in *fdp
 * (else -1; an unexpected descriptor is closed).  Both return 0 or a
 * negative errno; -ETIMEDOUT, -ECONNRESET (peer closed), protocol errors as
 * frame_hdr_parse. */
int	frame_send(int sock, uint16_t type, const ProtobufCMessage *msg, int fd);
int	frame_recv(int sock, int timeout_ms, struct frame_hdr *h,
	    ProtobufCMessage **msg, int *fdp);

/* Descriptor passing.  frame_attach_fd puts fd in mh's control data,
 * using cm as storage; frame_collect_fds calls fn for every descriptor
 * that came with a received mh (the callee owns it). */
union frame_cmsg1 {
	struct cmsghdr	hdr;
	char		buf[CMSG_SPACE(sizeof(int))];
};
void	frame_attach_fd(struct msghdr *mh, union frame_cmsg1 *cm, int fd);
void	frame_collect_fds(struct msghdr *mh, void (*fn)(int fd, void *arg),
	    void *arg);

/* Text for the negative errno-style codes above. */
const char	*frame_strerror(int err);

#endif

/*
 * The one place incoming messages are routed.  The dispatcher alone checks
 * who may send a type, unpacks, logs and frees; handlers get decoded,
 * typed messages.  Names, descriptors and size bounds come from msg_table.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "msptid.h"
#include "metrics.h"

struct dispatch_entry {
	dispatch_fn	handler;
	unsigned	who;	/* PEER_AGENT | PEER_CTL */
};

#define T(x)	MSPTI__MSG_TYPE__##x

static const struct dispatch_entry dispatch_table[MSG_TYPE_MAX] = {
	[T(MSG_HELLO)] =	{ registry_hello, PEER_AGENT },
	[T(MSG_AGENT_UPDATE)] =	{ registry_update, PEER_AGENT },
	[T(MSG_STATUS_REQ)] =	{ ctl_status, PEER_CTL },
	[T(MSG_LIST_REQ)] =	{ ctl_list, PEER_CTL },
	[T(MSG_START_SESSION)] = { session_ctl_start, PEER_CTL },
	[T(MSG_STOP_SESSION)] =	{ session_ctl_stop, PEER_CTL },
	[T(MSG_RETARGET_SESSION)] = { session_ctl_retarget, PEER_CTL },
	[T(MSG_SESSIONS_REQ)] =	{ session_ctl_list, PEER_CTL },
	[T(MSG_WAIT_SESSION)] =	{ session_ctl_wait, PEER_CTL },
	[T(MSG_SNAPSHOT_SESSION)] = { session_ctl_snapshot, PEER_CTL },
	[T(MSG_CAPTURE_ACK)] =	{ session_capture_ack, PEER_AGENT },
	[T(MSG_METRICS_REQ)] =	{ metrics_request, PEER_CTL },
	[T(MSG_AGENT_SYNC)] =	{ registry_sync, PEER_AGENT },
};

/*
 * Judges a frame by its header alone, before any payload is buffered:
 * NULL when p may send it now, else why not (in buf or static).
 */
const char *
dispatch_check(const struct peer *p, const struct frame_hdr *h, char *buf,
    size_t len)
{
	const struct dispatch_entry *e = &dispatch_table[h->type];

	if (e->handler == NULL || (e->who & p->kind) == 0) {
		snprintf(buf, len, "unexpected %s message", msg_name(h->type));
		return buf;
	}
	/* An agent must say Hello first, and only once. */
	if (p->kind == PEER_AGENT &&
	    (p->agent == NULL) != (h->type == T(MSG_HELLO)))
		return p->agent == NULL ? "message before Hello" :
		    "second Hello";
	return NULL;
}

int
dispatch_frame(struct peer *p, const struct frame_hdr *h,
    const uint8_t *payload)
{
	const struct dispatch_entry *e = &dispatch_table[h->type];
	ProtobufCMessage *msg;
	const char *bad;
	char why[96];
	int rc;

	if ((bad = dispatch_check(p, h, why, sizeof(why))) != NULL) {
		p->d->frames_rejected++;
		peer_drop(p, bad);
		return -1;
	}
	if (frame_unpack(h, payload, &msg) != 0) {
		snprintf(why, sizeof(why), "malformed %s message",
		    msg_name(h->type));
		p->d->frames_rejected++;
		peer_drop(p, why);
		return -1;
	}
	log_debug("pid %ld: %s (%u bytes)", (long)p->cred.pid,
	    msg_name(h->type), h->len);
	rc = e->handler(p, msg);
	protobuf_c_message_free_unpacked(msg, NULL);
	return rc;
}

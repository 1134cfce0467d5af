/*
 * Unit tests for the daemon's peers, dispatcher, registry and control
 * requests (daemon/peer.c, dispatch.c, registry.c, ctl.c, linked from
 * libmsptid).  Every peer is one end of a real socketpair with tiny
 * buffers; the test talks from the other end and pumps the event loop
 * itself (daemon-harness.h), so nothing here depends on timing.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon-harness.h"

#define T(x)	MSPTI__MSG_TYPE__##x

static Mspti__ListReply *
list(struct dh_conn *ctl)
{
	Mspti__ListRequest req = MSPTI__LIST_REQUEST__INIT;

	ck_assert_int_eq(dh_send(ctl, T(MSG_LIST_REQ), &req.base, -1), 0);
	return (Mspti__ListReply *)dh_expect(ctl, T(MSG_LIST_REP), NULL);
}

static Mspti__StatusReply *
status(struct dh_conn *ctl)
{
	Mspti__StatusRequest req = MSPTI__STATUS_REQUEST__INIT;

	ck_assert_int_eq(dh_send(ctl, T(MSG_STATUS_REQ), &req.base, -1), 0);
	return (Mspti__StatusReply *)dh_expect(ctl, T(MSG_STATUS_REP), NULL);
}

/* An AgentSync round trip: the agent is registered and served. */
static void
agent_served(struct dh_conn *a, uint64_t cookie)
{
	Mspti__AgentSync s = MSPTI__AGENT_SYNC__INIT;
	Mspti__AgentSyncReply *r;

	s.cookie = cookie;
	ck_assert_int_eq(dh_send(a, T(MSG_AGENT_SYNC), &s.base, -1), 0);
	r = (Mspti__AgentSyncReply *)dh_expect(a, T(MSG_AGENT_SYNC_REP), NULL);
	ck_assert_uint_eq(r->cookie, cookie);
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

#define free_msg(m)	protobuf_c_message_free_unpacked(&(m)->base, NULL)

/*
 * Identity comes from SO_PEERCRED: an agent whose socketpair a child
 * process made is that child, whatever process talks over it.
 */
START_TEST(test_hello_peercred)
{
	struct dh_conn child, self, ctl;
	char *argv[] = { "train.py", "--lr", "0.1" };
	Mspti__ListReply *l;

	ck_assert_ptr_nonnull(dh_connect(&child, PEER_AGENT, 0, true));
	ck_assert_ptr_nonnull(dh_connect(&self, PEER_AGENT, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_int_ne(child.child, getpid());
	ck_assert_uint_eq(dh_hello(&child, "jobA", 1, argv, 3), 1);
	ck_assert_uint_eq(dh_hello(&self, "jobA", 2, argv, 3), 2);
	ck_assert_uint_eq(dh_d->nagents, 2);

	l = list(&ctl);
	ck_assert_uint_eq(l->n_agents, 2);
	ck_assert_uint_eq(l->agents[0]->agent_id, 1);
	ck_assert_uint_eq(l->agents[0]->pid, (uint32_t)child.child);
	ck_assert_uint_eq(l->agents[0]->uid, getuid());
	ck_assert_uint_eq(l->agents[0]->gid, getgid());
	ck_assert_uint_eq(l->agents[1]->agent_id, 2);
	ck_assert_uint_eq(l->agents[1]->pid, (uint32_t)getpid());
	free_msg(l);
	ck_assert_ptr_eq(registry_find_pid(dh_d, child.child),
	    child.peer->agent);
	ck_assert_ptr_eq(registry_find_pid(dh_d, getpid()), self.peer->agent);
	dh_close(&child);
	dh_close(&self);
	dh_close(&ctl);
}
END_TEST

/* ListRequest: exactly the registered agents, every field; a closed
 * agent leaves the registry. */
START_TEST(test_list_fields)
{
	struct dh_conn a[3], ctl;
	char *argv0[] = { "python", "train.py", "--tag", "a\tb\x7f" };
	char *argv1[] = { "solo" };
	Mspti__Hello h = MSPTI__HELLO__INIT;
	uint32_t devs[] = { 0, 3 };
	Mspti__ListReply *l;
	Mspti__Welcome *w;

	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	l = list(&ctl);
	ck_assert_uint_eq(l->n_agents, 0);
	free_msg(l);

	for (int i = 0; i < 3; i++)
		ck_assert_ptr_nonnull(dh_connect(&a[i], PEER_AGENT, 0, false));
	h.exe = "/opt/bin/trainer\n";
	h.argv = argv0;
	h.n_argv = 4;
	h.job_id = "job-42";
	h.rank = 7;
	h.local_rank = 3;
	h.world_size = 16;
	h.devices = devs;
	h.n_devices = 2;
	h.agent_version = "1.2.3";
	h.capabilities = 5;
	ck_assert_int_eq(dh_send(&a[0], T(MSG_HELLO), &h.base, -1), 0);
	w = (Mspti__Welcome *)dh_expect(&a[0], T(MSG_WELCOME), NULL);
	ck_assert_uint_eq(w->agent_id, 1);
	ck_assert_str_eq(w->daemon_version, MSPTID_VERSION);
	free_msg(w);
	ck_assert_uint_eq(dh_hello(&a[1], NULL, -1, argv1, 1), 2);
	ck_assert_uint_eq(dh_hello(&a[2], "job-43", 0, NULL, 0), 3);

	l = list(&ctl);
	ck_assert_uint_eq(l->n_agents, 3);
	ck_assert_uint_eq(l->agents[0]->agent_id, 1);
	ck_assert_uint_eq(l->agents[0]->pid, (uint32_t)getpid());
	ck_assert_str_eq(l->agents[0]->job_id, "job-42");
	ck_assert_int_eq(l->agents[0]->rank, 7);
	ck_assert_int_eq(l->agents[0]->local_rank, 3);
	ck_assert_int_eq(l->agents[0]->world_size, 16);
	ck_assert_uint_eq(l->agents[0]->n_devices, 2);
	ck_assert_uint_eq(l->agents[0]->devices[0], 0);
	ck_assert_uint_eq(l->agents[0]->devices[1], 3);
	/* The executable is the kernel's (/proc/<pid>/exe, priv.c), not the
	 * one the peer claimed; control characters from the peer are
	 * replaced. */
	{
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		ck_assert_int_gt(n, 0);
		self[n] = '\0';
		ck_assert_str_eq(l->agents[0]->exe, self);
		ck_assert(l->agents[0]->exe_checked);
	}
	ck_assert_str_eq(l->agents[0]->cmdline, "python train.py --tag a?b?");
	ck_assert_str_eq(l->agents[0]->agent_version, "1.2.3");
	ck_assert_uint_eq(l->agents[0]->session_id, 0);
	ck_assert_uint_gt(l->agents[0]->since_ns, 0);
	ck_assert_uint_eq(l->agents[1]->agent_id, 2);
	ck_assert_str_eq(l->agents[1]->job_id, "");
	ck_assert_int_eq(l->agents[1]->rank, -1);
	ck_assert_str_eq(l->agents[1]->cmdline, "solo");
	ck_assert_uint_eq(l->agents[1]->n_devices, 0);
	ck_assert_uint_eq(l->agents[2]->agent_id, 3);
	ck_assert_str_eq(l->agents[2]->job_id, "job-43");
	ck_assert_str_eq(l->agents[2]->cmdline, "");
	free_msg(l);

	/* The middle one exits: the registry forgets it at once. */
	dh_close(&a[1]);
	ck_assert(DH_PUMP_UNTIL(dh_d->nagents == 2));
	l = list(&ctl);
	ck_assert_uint_eq(l->n_agents, 2);
	ck_assert_uint_eq(l->agents[0]->agent_id, 1);
	ck_assert_uint_eq(l->agents[1]->agent_id, 3);
	free_msg(l);
	/* An orderly close is not a dropped peer. */
	ck_assert_uint_eq(dh_d->peers_dropped, 0);
	dh_close(&a[0]);
	dh_close(&a[2]);
	dh_close(&ctl);
}
END_TEST

START_TEST(test_status)
{
	struct dh_conn a, b, ctl;
	Mspti__StatusReply *r;
	uint8_t junk[FRAME_HDR_LEN] = "JUNKJUNKJUNK";

	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	r = status(&ctl);
	ck_assert_str_eq(r->version, MSPTID_VERSION);
	ck_assert_uint_eq(r->pid, (uint32_t)getpid());
	ck_assert_str_eq(r->runtime_dir, dh_dir);
	ck_assert_uint_eq(r->agents, 0);
	ck_assert_uint_eq(r->sessions, 0);
	ck_assert_uint_eq(r->frames_rejected, 0);
	ck_assert_uint_eq(r->peers_dropped, 0);
	ck_assert_uint_gt(r->start_time_ns, 0);
	free_msg(r);

	ck_assert_ptr_nonnull(dh_connect(&a, PEER_AGENT, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&b, PEER_AGENT, 0, false));
	ck_assert_uint_ne(dh_hello(&a, "j", 0, NULL, 0), 0);
	ck_assert_uint_ne(dh_hello(&b, "j", 1, NULL, 0), 0);
	ck_assert_int_eq(dh_send_raw(&b, junk, sizeof(junk), -1), 0);
	ck_assert(dh_wait_eof(&b));
	r = status(&ctl);
	ck_assert_uint_eq(r->agents, 1);
	ck_assert_uint_eq(r->frames_rejected, 1);
	ck_assert_uint_eq(r->peers_dropped, 1);
	free_msg(r);
	dh_close(&a);
	dh_close(&b);
	dh_close(&ctl);
}
END_TEST

/* ---- misbehaving peers: each drops that peer and nothing else ---- */

struct bad_case {
	const char	*name;
	enum peer_kind	 kind;
	bool		 hello;		/* register first */
	int		 what;
	bool		 rejected;	/* counted in frames_rejected */
};

enum {
	BAD_HELLO_AGAIN, BAD_BEFORE_HELLO, BAD_UNKNOWN_TYPE, BAD_CTL_ON_AGENT,
	BAD_AGENT_ON_CTL, BAD_DAEMON_TYPE, BAD_OVERSIZED, BAD_OVER_MAX,
	BAD_GARBAGE, BAD_VERSION, BAD_PAYLOAD, BAD_TRUNCATED, BAD_DEVICES,
};

static const struct bad_case bad_cases[] = {
	{ "second Hello", PEER_AGENT, true, BAD_HELLO_AGAIN, true },
	{ "message before Hello", PEER_AGENT, false, BAD_BEFORE_HELLO, true },
	{ "unknown type", PEER_AGENT, true, BAD_UNKNOWN_TYPE, true },
	{ "ctl message from an agent", PEER_AGENT, true, BAD_CTL_ON_AGENT,
	    true },
	{ "agent message from a ctl", PEER_CTL, false, BAD_AGENT_ON_CTL, true },
	{ "daemon-only type", PEER_AGENT, true, BAD_DAEMON_TYPE, true },
	{ "oversized header", PEER_CTL, false, BAD_OVERSIZED, true },
	{ "length over FRAME_MAX_LEN", PEER_AGENT, false, BAD_OVER_MAX, true },
	{ "garbage", PEER_CTL, false, BAD_GARBAGE, true },
	{ "wrong version", PEER_AGENT, false, BAD_VERSION, true },
	{ "malformed payload", PEER_AGENT, false, BAD_PAYLOAD, true },
	{ "truncated frame, then close", PEER_AGENT, true, BAD_TRUNCATED,
	    false },
	{ "too many devices", PEER_AGENT, true, BAD_DEVICES, false },
};

static void
send_packed(struct dh_conn *c, uint16_t type, const ProtobufCMessage *m)
{
	uint8_t *buf;
	size_t len;

	ck_assert_int_eq(frame_pack(type, m, &buf, &len), 0);
	ck_assert_int_eq(dh_send_raw(c, buf, len, -1), 0);
	free(buf);
}

static void
send_bad(struct dh_conn *c, int what)
{
	Mspti__Hello hello = MSPTI__HELLO__INIT;
	Mspti__AgentUpdate up = MSPTI__AGENT_UPDATE__INIT;
	Mspti__StatusRequest st = MSPTI__STATUS_REQUEST__INIT;
	Mspti__Welcome w = MSPTI__WELCOME__INIT;
	uint32_t devs[65] = { 0 };
	uint8_t buf[64];
	static const char garbage[] = "GET / HTTP/1.1\r\nHost: msptid\r\n\r\n";

	memset(buf, 0xff, sizeof(buf));
	switch (what) {
	case BAD_HELLO_AGAIN:
		send_packed(c, T(MSG_HELLO), &hello.base);
		break;
	case BAD_BEFORE_HELLO:
		send_packed(c, T(MSG_AGENT_UPDATE), &up.base);
		break;
	case BAD_UNKNOWN_TYPE:
		frame_hdr_put(buf, 60, 0);
		ck_assert_int_eq(dh_send_raw(c, buf, FRAME_HDR_LEN, -1), 0);
		break;
	case BAD_CTL_ON_AGENT:
		send_packed(c, T(MSG_STATUS_REQ), &st.base);
		break;
	case BAD_AGENT_ON_CTL:
		send_packed(c, T(MSG_HELLO), &hello.base);
		break;
	case BAD_DAEMON_TYPE:
		send_packed(c, T(MSG_WELCOME), &w.base);
		break;
	case BAD_OVERSIZED:
		/* StatusRequest is bounded to 256 bytes; nothing follows. */
		frame_hdr_put(buf, T(MSG_STATUS_REQ), 100000);
		ck_assert_int_eq(dh_send_raw(c, buf, FRAME_HDR_LEN, -1), 0);
		break;
	case BAD_OVER_MAX:
		frame_hdr_put(buf, T(MSG_HELLO), FRAME_MAX_LEN + 1);
		ck_assert_int_eq(dh_send_raw(c, buf, FRAME_HDR_LEN, -1), 0);
		break;
	case BAD_GARBAGE:
		ck_assert_int_eq(dh_send_raw(c, garbage, sizeof(garbage) - 1,
		    -1), 0);
		break;
	case BAD_VERSION:
		frame_hdr_put(buf, T(MSG_HELLO), 0);
		buf[4] = FRAME_VERSION + 1;
		ck_assert_int_eq(dh_send_raw(c, buf, FRAME_HDR_LEN, -1), 0);
		break;
	case BAD_PAYLOAD:
		frame_hdr_put(buf, T(MSG_HELLO), 16);
		ck_assert_int_eq(dh_send_raw(c, buf, FRAME_HDR_LEN + 16, -1),
		    0);
		break;
	case BAD_TRUNCATED:
		/* Half an AgentUpdate, then the process is gone. */
		frame_hdr_put(buf, T(MSG_AGENT_UPDATE), 40);
		ck_assert_int_eq(dh_send_raw(c, buf, FRAME_HDR_LEN + 20, -1),
		    0);
		dh_pump(10);
		ck_assert(dh_alive(c));		/* waits for the rest */
		close(c->fd);
		c->fd = -1;
		break;
	case BAD_DEVICES:
		up.devices = devs;
		up.n_devices = 65;
		send_packed(c, T(MSG_AGENT_UPDATE), &up.base);
		break;
	}
}

START_TEST(test_bad_peer)
{
	const struct bad_case *bc = &bad_cases[_i];
	struct dh_conn good, bad, ctl;
	uint64_t rejected, dropped;
	Mspti__ListReply *l;

	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&good, PEER_AGENT, 0, false));
	ck_assert_uint_eq(dh_hello(&good, "job", 0, NULL, 0), 1);
	ck_assert_ptr_nonnull(dh_connect(&bad, bc->kind, 0, false));
	if (bc->hello)
		ck_assert_uint_eq(dh_hello(&bad, "job", 1, NULL, 0), 2);
	rejected = dh_d->frames_rejected;
	dropped = dh_d->peers_dropped;

	send_bad(&bad, bc->what);
	if (bad.fd >= 0)
		ck_assert_msg(dh_wait_eof(&bad), "%s: peer not dropped",
		    bc->name);
	ck_assert_msg(DH_PUMP_UNTIL(!dh_alive(&bad)), "%s: peer kept",
	    bc->name);
	ck_assert_uint_eq(dh_d->frames_rejected,
	    rejected + (bc->rejected ? 1 : 0));
	ck_assert_uint_eq(dh_d->peers_dropped,
	    dropped + (bc->what == BAD_TRUNCATED ? 0 : 1));

	/* The other agent is still registered and served, and the daemon
	 * answers control requests. */
	ck_assert(dh_alive(&good));
	agent_served(&good, 77);
	l = list(&ctl);
	ck_assert_uint_eq(l->n_agents, 1);
	ck_assert_uint_eq(l->agents[0]->agent_id, 1);
	free_msg(l);
	dh_close(&bad);
	dh_close(&good);
	dh_close(&ctl);
}
END_TEST

/* AgentUpdate: the device set and the identity (job, ranks) change. */
START_TEST(test_agent_update)
{
	struct dh_conn a, ctl;
	Mspti__AgentUpdate u = MSPTI__AGENT_UPDATE__INIT;
	uint32_t devs[] = { 1, 3, 5 };
	Mspti__ListReply *l;

	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&a, PEER_AGENT, 0, false));
	ck_assert_uint_eq(dh_hello(&a, NULL, -1, NULL, 0), 1);

	u.devices = devs;
	u.n_devices = 3;
	u.job_id = "job-7";
	u.rank = 2;
	u.local_rank = 0;
	u.world_size = 4;
	ck_assert_int_eq(dh_send(&a, T(MSG_AGENT_UPDATE), &u.base, -1), 0);
	l = list(&ctl);
	ck_assert_uint_eq(l->n_agents, 1);
	ck_assert_uint_eq(l->agents[0]->n_devices, 3);
	ck_assert_uint_eq(l->agents[0]->devices[2], 5);
	ck_assert_str_eq(l->agents[0]->job_id, "job-7");
	ck_assert_int_eq(l->agents[0]->rank, 2);
	ck_assert_int_eq(l->agents[0]->local_rank, 0);
	ck_assert_int_eq(l->agents[0]->world_size, 4);
	free_msg(l);

	/* Devices only; the identity stays. */
	u.n_devices = 1;
	ck_assert_int_eq(dh_send(&a, T(MSG_AGENT_UPDATE), &u.base, -1), 0);
	l = list(&ctl);
	ck_assert_uint_eq(l->agents[0]->n_devices, 1);
	ck_assert_uint_eq(l->agents[0]->devices[0], 1);
	ck_assert_str_eq(l->agents[0]->job_id, "job-7");
	free_msg(l);

	/* No devices, new rank. */
	u.n_devices = 0;
	u.rank = 3;
	ck_assert_int_eq(dh_send(&a, T(MSG_AGENT_UPDATE), &u.base, -1), 0);
	l = list(&ctl);
	ck_assert_uint_eq(l->agents[0]->n_devices, 0);
	ck_assert_int_eq(l->agents[0]->rank, 3);
	free_msg(l);
	ck_assert_uint_eq(dh_d->peers_dropped, 0);
	dh_close(&a);
	dh_close(&ctl);
}
END_TEST

/* ---- the send queue ---- */

#define LIST_CMDLINE	1024	/* REG_MAX_CMDLINE in daemon/registry.c */
#define MANY_ARGS	90
#define ARG_LEN		40

/* argv of agent i: MANY_ARGS strings of ARG_LEN characters. */
static char **
long_argv(int i)
{
	char **v = calloc(MANY_ARGS, sizeof(*v));

	for (int k = 0; k < MANY_ARGS; k++) {
		int n;

		v[k] = malloc(ARG_LEN + 1);
		n = snprintf(v[k], ARG_LEN + 1, "a%03d-%02d-", i % 1000, k % 100);
		memset(v[k] + n, 'x', (size_t)(ARG_LEN - n));
		v[k][ARG_LEN] = '\0';
	}
	return v;
}

static char *
long_cmdline(int i)
{
	char **v = long_argv(i);
	char *s = calloc(MANY_ARGS, ARG_LEN + 1);

	for (int k = 0; k < MANY_ARGS; k++) {
		if (k)
			strcat(s, " ");
		strcat(s, v[k]);
		free(v[k]);
	}
	free(v);
	return s;
}

static void
register_many(struct dh_conn *a, int n)
{
	for (int i = 0; i < n; i++) {
		char **v = long_argv(i);

		ck_assert_ptr_nonnull(dh_connect(&a[i], PEER_AGENT, 0, false));
		ck_assert_uint_eq(dh_hello(&a[i], "big", i, v, MANY_ARGS),
		    (uint64_t)i + 1);
		for (int k = 0; k < MANY_ARGS; k++)
			free(v[k]);
		free(v);
	}
	ck_assert_uint_eq(dh_d->nagents, (unsigned)n);
}

/*
 * A ListReply a hundred times the socket buffer: the daemon writes what
 * fits, queues the rest and finishes on writability, and the reply
 * arrives whole and in order.
 */
START_TEST(test_large_reply_partial_writes)
{
	enum { N = 48 };
	struct dh_conn a[N], ctl;
	Mspti__ListRequest req = MSPTI__LIST_REQUEST__INIT;
	Mspti__ListReply *l;
	size_t total;

	register_many(a, N);
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_int_eq(dh_send(&ctl, T(MSG_LIST_REQ), &req.base, -1), 0);
	/* Handled: part of the reply is still queued in the daemon. */
	ck_assert(DH_PUMP_UNTIL(ctl.peer->queued > 0));
	ck_assert(!TAILQ_EMPTY(&ctl.peer->outq));
	ck_assert_uint_gt(ctl.peer->queued, (size_t)N * LIST_CMDLINE / 2);
	l = (Mspti__ListReply *)dh_expect(&ctl, T(MSG_LIST_REP), NULL);
	total = (size_t)ctl.off;
	ck_assert_uint_gt(total, (size_t)N * LIST_CMDLINE);
	ck_assert_uint_eq(l->n_agents, N);
	for (int i = 0; i < N; i++) {
		char *want = long_cmdline(i);

		/* The registry keeps the first KiB of a command line. */
		if (strlen(want) > LIST_CMDLINE)
			want[LIST_CMDLINE] = '\0';
		ck_assert_uint_eq(l->agents[i]->agent_id, (uint64_t)i + 1);
		ck_assert_int_eq(l->agents[i]->rank, i);
		ck_assert_str_eq(l->agents[i]->cmdline, want);
		free(want);
	}
	free_msg(l);
	ck_assert_uint_eq(ctl.peer->queued, 0);
	ck_assert(TAILQ_EMPTY(&ctl.peer->outq));
	/* And the next request on the same connection is answered. */
	l = list(&ctl);
	ck_assert_uint_eq(l->n_agents, N);
	free_msg(l);
	ck_assert_uint_eq(dh_d->peers_dropped, 0);
	for (int i = 0; i < N; i++)
		dh_close(&a[i]);
	dh_close(&ctl);
}
END_TEST

/*
 * A client that keeps asking and never reads is dropped once its queue
 * would pass PEER_MAX_QUEUED; the daemon never blocks on it.
 */
START_TEST(test_slow_reader_dropped)
{
	enum { N = 64 };
	struct dh_conn a[N], slow, ctl;
	Mspti__ListRequest req = MSPTI__LIST_REQUEST__INIT;
	Mspti__ListReply *l;
	Mspti__StatusReply *st;
	uint64_t dropped;
	size_t reply_len;
	int sent = 0;

	register_many(a, N);
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	l = list(&ctl);
	reply_len = (size_t)ctl.off;
	free_msg(l);

	ck_assert_ptr_nonnull(dh_connect(&slow, PEER_CTL, 0, false));
	dropped = dh_d->peers_dropped;
	while (sent < 5000 && dh_d->peers_dropped == dropped) {
		if (dh_send(&slow, T(MSG_LIST_REQ), &req.base, -1) != 0)
			break;
		sent++;
		dh_pump(4);
	}
	ck_assert(DH_PUMP_UNTIL(dh_d->peers_dropped == dropped + 1));
	ck_assert(!dh_alive(&slow));
	/* Not before its queue was full. */
	ck_assert_int_ge(sent, (int)(PEER_MAX_QUEUED / reply_len));
	ck_assert(dh_wait_eof(&slow));

	/* Everyone else is fine. */
	st = status(&ctl);
	ck_assert_uint_eq(st->agents, N);
	ck_assert_uint_eq(st->peers_dropped, dropped + 1);
	ck_assert_uint_eq(st->frames_rejected, 0);
	free_msg(st);
	agent_served(&a[N - 1], 5);
	for (int i = 0; i < N; i++)
		dh_close(&a[i]);
	dh_close(&slow);
	dh_close(&ctl);
}
END_TEST

/* ---- descriptor passing ---- */

START_TEST(test_fd_passing)
{
	Mspti__StatusRequest req = MSPTI__STATUS_REQUEST__INIT;
	Mspti__StatusReply *r;
	struct dh_conn ctl;
	int p1[2], p2[2], fd;
	char ch = 0;

	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_int_eq(peer_take_fd(ctl.peer), -1);
	/* Non-blocking: a wrong descriptor fails the test, not hangs it. */
	ck_assert_int_eq(pipe2(p1, O_NONBLOCK), 0);
	ck_assert_int_eq(pipe2(p2, O_NONBLOCK), 0);
	ck_assert_int_eq(dh_send(&ctl, T(MSG_STATUS_REQ), &req.base, p1[1]),
	    0);
	ck_assert_int_eq(dh_send(&ctl, T(MSG_STATUS_REQ), &req.base, p2[1]),
	    0);
	close(p1[1]);
	close(p2[1]);
	for (int i = 0; i < 2; i++) {
		r = (Mspti__StatusReply *)dh_expect(&ctl, T(MSG_STATUS_REP),
		    NULL);
		free_msg(r);
	}
	ck_assert_int_eq(ctl.peer->nrxfds, 2);

	/* Oldest first; each is the descriptor we sent, close-on-exec. */
	fd = peer_take_fd(ctl.peer);
	ck_assert_int_ge(fd, 0);
	ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	ck_assert_int_eq(write(fd, "1", 1), 1);
	ck_assert_int_eq(read(p1[0], &ch, 1), 1);
	ck_assert_int_eq(ch, '1');
	close(fd);
	fd = peer_take_fd(ctl.peer);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "2", 1), 1);
	ck_assert_int_eq(read(p2[0], &ch, 1), 1);
	ck_assert_int_eq(ch, '2');
	close(fd);
	ck_assert_int_eq(peer_take_fd(ctl.peer), -1);
	ck_assert_int_eq(ctl.peer->nrxfds, 0);
	close(p1[0]);
	close(p2[0]);
	dh_close(&ctl);
}
END_TEST

/* More unused descriptors than PEER_MAX_RXFDS: dropped, and every one
 * of them closed. */
START_TEST(test_too_many_fds)
{
	Mspti__StatusRequest req = MSPTI__STATUS_REQUEST__INIT;
	struct dh_conn ctl, other;
	uint64_t dropped = dh_d->peers_dropped;
	int p[2];
	char ch;

	ck_assert_ptr_nonnull(dh_connect(&other, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	for (int i = 0; i < PEER_MAX_RXFDS; i++) {
		ck_assert_int_eq(dh_send(&ctl, T(MSG_STATUS_REQ), &req.base,
		    p[1]), 0);
		protobuf_c_message_free_unpacked(dh_expect(&ctl,
		    T(MSG_STATUS_REP), NULL), NULL);
	}
	ck_assert(dh_alive(&ctl));
	ck_assert_int_eq(ctl.peer->nrxfds, PEER_MAX_RXFDS);
	ck_assert_int_eq(dh_send(&ctl, T(MSG_STATUS_REQ), &req.base, p[1]), 0);
	close(p[1]);
	ck_assert(dh_wait_eof(&ctl));
	ck_assert(DH_PUMP_UNTIL(!dh_alive(&ctl)));
	ck_assert_uint_eq(dh_d->peers_dropped, dropped + 1);
	/* No write end is left open anywhere: the pipe reads EOF. */
	ck_assert_int_eq(read(p[0], &ch, 1), 0);
	close(p[0]);
	ck_assert(dh_alive(&other));
	free_msg(status(&other));
	dh_close(&ctl);
	dh_close(&other);
}
END_TEST

/* Non-root users have at most PEER_MAX_CTL_PER_UID control connections. */
START_TEST(test_ctl_limit)
{
	struct dh_conn c[PEER_MAX_CTL_PER_UID + 1];

	if (getuid() == 0)
		return;		/* root is not limited */
	for (int i = 0; i < PEER_MAX_CTL_PER_UID; i++)
		ck_assert_ptr_nonnull(dh_connect(&c[i], PEER_CTL, 0, false));
	ck_assert_ptr_null(dh_connect(&c[PEER_MAX_CTL_PER_UID], PEER_CTL, 0,
	    false));
	/* Agents are not control connections. */
	dh_close(&c[PEER_MAX_CTL_PER_UID]);
	ck_assert_ptr_nonnull(dh_connect(&c[PEER_MAX_CTL_PER_UID], PEER_AGENT,
	    0, false));
	for (int i = 0; i <= PEER_MAX_CTL_PER_UID; i++)
		dh_close(&c[i]);
}
END_TEST

/* ---- hostile peers (issue 13) ---- */

/* Pumps, sleeping 1 ms between rounds, until expr holds or 10 s passed:
 * for the daemon's own timeouts, which run on real time. */
#define PUMP_WAIT(expr) ({						\
	int pw_i_ = 0;							\
	while (!(expr) && pw_i_++ < 10000) {				\
		dh_pump(4);						\
		usleep(1000);						\
	}								\
	(expr);								\
})

/*
 * A process that says Hello and exits before reading Welcome (a launcher's
 * short-lived child, a rank that ends at once) is an ordinary close: the
 * daemon's write gets EPIPE, and that is not a misbehaving peer.
 */
START_TEST(test_closed_before_reply)
{
	Mspti__Hello h = MSPTI__HELLO__INIT;
	struct dh_conn a, ctl;
	uint64_t dropped = dh_d->peers_dropped;
	Mspti__StatusReply *st;

	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&a, PEER_AGENT, 0, false));
	h.exe = "/bin/true";
	h.job_id = "";
	h.agent_version = "9.9.9";
	ck_assert_int_eq(dh_send(&a, T(MSG_HELLO), &h.base, -1), 0);
	close(a.fd);
	a.fd = -1;
	ck_assert(DH_PUMP_UNTIL(!dh_alive(&a)));
	ck_assert_uint_eq(dh_d->peers_dropped, dropped);
	ck_assert_uint_eq(dh_d->nagents, 0);
	st = status(&ctl);
	ck_assert_uint_eq(st->peers_dropped, dropped);
	free_msg(st);
	dh_close(&a);
	dh_close(&ctl);
}
END_TEST

/*
 * A header is judged when it arrives: a type this peer may not send, or a
 * length over that type's bound, drops the peer before its payload is
 * buffered (a reply type may be 16 MiB, a request never).
 */
static const struct {
	enum peer_kind	kind;
	bool		hello;
	uint16_t	type;
	uint32_t	len;
} early_cases[] = {
	{ PEER_CTL, false, T(MSG_LIST_REP), FRAME_MAX_LEN },
	{ PEER_CTL, false, T(MSG_SESSIONS_REP), FRAME_MAX_LEN },
	{ PEER_CTL, false, T(MSG_HELLO), 60000 },
	{ PEER_AGENT, false, T(MSG_START_SESSION), 60000 },
	{ PEER_AGENT, false, T(MSG_AGENT_UPDATE), 100 },	/* before Hello */
	{ PEER_AGENT, true, T(MSG_HELLO), 100 },		/* second Hello */
	{ PEER_AGENT, true, T(MSG_METRICS_REP), FRAME_MAX_LEN },
};

START_TEST(test_header_judged_early)
{
	uint8_t hdr[FRAME_HDR_LEN];
	struct dh_conn bad, other;
	uint64_t rejected;

	ck_assert_ptr_nonnull(dh_connect(&other, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&bad, early_cases[_i].kind, 0,
	    false));
	if (early_cases[_i].hello)
		ck_assert_uint_ne(dh_hello(&bad, "job", 0, NULL, 0), 0);
	rejected = dh_d->frames_rejected;
	frame_hdr_put(hdr, early_cases[_i].type, early_cases[_i].len);
	ck_assert_int_eq(dh_send_raw(&bad, hdr, sizeof(hdr), -1), 0);
	/* Only the header: nothing more is needed to judge it. */
	ck_assert(DH_PUMP_UNTIL(!dh_alive(&bad)));
	ck_assert_uint_eq(dh_d->frames_rejected, rejected + 1);
	free_msg(status(&other));
	dh_close(&bad);
	dh_close(&other);
}
END_TEST

/*
 * The send queue's bound counts what the queue really costs (each frame's
 * allocations and their overhead), so a client that asks for tiny replies
 * and never reads them is dropped before the daemon holds much more than
 * the bound.
 */
START_TEST(test_queue_bound_is_memory)
{
	Mspti__StopSession req = MSPTI__STOP_SESSION__INIT;
	struct dh_conn slow;
	size_t base, most = 0;
	int sent = 0;

	dh_d->lim.max_queued = 512 * 1024;
	ck_assert_ptr_nonnull(dh_connect(&slow, PEER_CTL, 0, false));
	req.session_id = 12345;		/* an Error reply, ~30 bytes */
	base = mallinfo2().uordblks;
	while (dh_alive(&slow) && sent < 200000) {
		size_t now;

		if (dh_send(&slow, T(MSG_STOP_SESSION), &req.base, -1) != 0)
			break;
		sent++;
		if (sent % 64 == 0) {
			dh_pump(8);
			now = mallinfo2().uordblks;
			if (now > base && now - base > most)
				most = now - base;
		}
	}
	ck_assert(DH_PUMP_UNTIL(!dh_alive(&slow)));
	/* The bound plus the input buffer and socket slack, not 3-4x. */
	ck_assert_uint_le(most, dh_d->lim.max_queued + 256 * 1024);
	dh_close(&slow);
}
END_TEST

/* An agent that never says Hello is closed after a few seconds (here
 * lim.hello_timeout_ms); so is a peer that stops in the middle of a
 * frame. */
START_TEST(test_stalled_peers_time_out)
{
	struct dh_conn quiet, half, ctl, good;
	uint8_t hdr[FRAME_HDR_LEN];

	dh_d->lim.hello_timeout_ms = 100;
	dh_d->lim.frame_timeout_ms = 100;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&good, PEER_AGENT, 0, false));
	ck_assert_uint_ne(dh_hello(&good, "job", 0, NULL, 0), 0);
	ck_assert_ptr_nonnull(dh_connect(&quiet, PEER_AGENT, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&half, PEER_CTL, 0, false));
	frame_hdr_put(hdr, T(MSG_STATUS_REQ), 0);
	ck_assert_int_eq(dh_send_raw(&half, hdr, 7, -1), 0);
	ck_assert(PUMP_WAIT(!dh_alive(&quiet) && !dh_alive(&half)));
	/* Registered agents and idle clients between frames stay. */
	ck_assert(dh_alive(&good));
	ck_assert(dh_alive(&ctl));
	agent_served(&good, 3);
	free_msg(status(&ctl));
	dh_close(&quiet);
	dh_close(&half);
	dh_close(&good);
	dh_close(&ctl);
}
END_TEST

/* Connections that have not said Hello are bounded per uid (root too). */
START_TEST(test_prehello_per_uid)
{
	struct dh_conn c[5], ok;

	dh_d->lim.prehello_per_uid = 4;
	for (int i = 0; i < 4; i++)
		ck_assert_ptr_nonnull(dh_connect(&c[i], PEER_AGENT, 0, false));
	ck_assert_ptr_null(dh_connect(&c[4], PEER_AGENT, 0, false));
	dh_close(&c[4]);
	/* One says Hello: its slot frees. */
	ck_assert_uint_ne(dh_hello(&c[0], "job", 0, NULL, 0), 0);
	ck_assert_ptr_nonnull(dh_connect(&ok, PEER_AGENT, 0, false));
	for (int i = 0; i < 4; i++)
		dh_close(&c[i]);
	dh_close(&ok);
}
END_TEST

static Suite *
daemon_suite(void)
{
	Suite *su = suite_create("daemon");
	TCase *tc = tcase_create("peers");

	tcase_add_checked_fixture(tc, dh_setup, dh_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_hello_peercred);
	tcase_add_test(tc, test_list_fields);
	tcase_add_test(tc, test_status);
	tcase_add_loop_test(tc, test_bad_peer, 0,
	    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_test(tc, test_agent_update);
	tcase_add_test(tc, test_large_reply_partial_writes);
	tcase_add_test(tc, test_slow_reader_dropped);
	tcase_add_test(tc, test_fd_passing);
	tcase_add_test(tc, test_too_many_fds);
	tcase_add_test(tc, test_ctl_limit);
	tcase_add_test(tc, test_closed_before_reply);
	tcase_add_loop_test(tc, test_header_judged_early, 0,
	    (int)(sizeof(early_cases) / sizeof(early_cases[0])));
	tcase_add_test(tc, test_queue_bound_is_memory);
	tcase_add_test(tc, test_stalled_peers_time_out);
	tcase_add_test(tc, test_prehello_per_uid);
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	SRunner *sr = srunner_create(daemon_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

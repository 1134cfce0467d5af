/*
 * Unit tests for the daemon's sessions (daemon/session*.c, linked from
 * libmsptid): the configuration logic (kind lists, their names, the
 * marker-domain list), and the session state machine driven by fake
 * agents and a fake msptictl over socketpairs (daemon-harness.h).  A fake
 * agent answers StartCapture as agent/register.c does: it maps the ring
 * memfd that came with it and acks with an eventfd; it writes records into
 * that ring and wakes the daemon through the eventfd.  The trace file is
 * read back with lib/trace.
 */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <check.h>
#include <dlfcn.h>
#include <poll.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include "msptid.h"
#include "ring.h"
#include "join.h"
#include "trace.h"
#include "daemon-harness.h"

START_TEST(test_kinds_parse)
{
	char *ok[] = { "kernel", "marker", "api" };
	char *badv[] = { "kernel", "bogus" };
	char bad[256] = "";
	uint32_t m = 0;

	ck_assert_int_eq(session_parse_kinds(ok, 3, &m, bad, sizeof(bad)), 0);
	/* api covers API, ACL_API, NODE_API and RUNTIME_API. */
	ck_assert_uint_eq(m, (1u << 2) | (1u << 1) | (1u << 3) | (1u << 10) |
	    (1u << 11) | (1u << 12));
	m = 0;
	ck_assert_int_eq(session_parse_kinds(badv, 2, &m, bad, sizeof(bad)),
	    -1);
	ck_assert_ptr_nonnull(strstr(bad, "unknown kind 'bogus'"));
	m = 0;
	ck_assert_int_eq(session_parse_kinds(NULL, 0, &m, bad, sizeof(bad)), 0);
	ck_assert_uint_eq(m, 0);
}
END_TEST

START_TEST(test_kind_names_roundtrip)
{
	char *all[] = { "marker", "kernel", "api", "hccl", "memory", "memset",
	    "memcpy", "correlation", "communication" };
	char *names[16];
	char bad[64];
	uint32_t m = 0, m2 = 0;
	size_t n;

	ck_assert_int_eq(session_parse_kinds(all, 9, &m, bad, sizeof(bad)), 0);
	n = session_kind_names(m, names);
	ck_assert_uint_eq(n, 9);
	ck_assert_int_eq(session_parse_kinds(names, n, &m2, bad, sizeof(bad)),
	    0);
	ck_assert_uint_eq(m, m2);
	/* A partial api mask is not named "api". */
	n = session_kind_names(1u << 3, names);
	ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_domains)
{
	struct session *s = calloc(1, sizeof(*s));
	char *off[] = { "fwd", "bwd", "fwd" };
	char *on[] = { "fwd" };
	char name[16];
	char *one[] = { name };

	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(session_domains_set(s, NULL, 0, off, 3), 0);
	ck_assert_uint_eq(s->ndomains_off, 2);		/* once each */
	ck_assert_int_eq(session_domains_set(s, on, 1, NULL, 0), 0);
	ck_assert_uint_eq(s->ndomains_off, 1);
	ck_assert_str_eq(s->domains_off[0], "bwd");
	/* Bounded: 32 domains off at most. */
	for (int i = 0; i < 31; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		ck_assert_int_eq(session_domains_set(s, NULL, 0, one, 1), 0);
	}
	ck_assert_uint_eq(s->ndomains_off, 32);
	snprintf(name, sizeof(name), "extra");
	ck_assert_int_eq(session_domains_set(s, NULL, 0, one, 1), -1);
	for (size_t i = 0; i < s->ndomains_off; i++)
		free(s->domains_off[i]);
	free(s->domains_off);
	free(s);
}
END_TEST

/* ---- the session state machine ---- */

#define T(x)		MSPTI__MSG_TYPE__##x
#define free_msg(m)	protobuf_c_message_free_unpacked(&(m)->base, NULL)

#define MARKER_INSTANT	1
#define MARKER_START	2
#define MARKER_END	4
#define DEFAULT_KINDS	(0x1ffeu & ~(1u << 8))

static char out_path[128];

/*
 * A disk that stalls: while stall_on, every trace write waits for a byte
 * on stall_pipe (at most 3 s, so old code that wrote on the loop thread
 * fails the test instead of hanging it).  Writes from the loop thread
 * during a stall are counted: there must be none.
 */
static atomic_int stall_on, loop_writes;
static int stall_pipe[2] = { -1, -1 };
static pid_t loop_tid;

ssize_t	pwritev(int, const struct iovec *, int, off_t);

ssize_t
pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	static ssize_t (*real)(int, const struct iovec *, int, off_t);

	if (real == NULL)
		real = (ssize_t (*)(int, const struct iovec *, int, off_t))
		    dlsym(RTLD_NEXT, "pwritev");
	if (atomic_load(&stall_on)) {
		struct pollfd pf = { stall_pipe[0], POLLIN, 0 };
		char c;

		if ((pid_t)syscall(SYS_gettid) == loop_tid)
			atomic_fetch_add(&loop_writes, 1);
		if (poll(&pf, 1, 3000) == 1)
			(void)!read(stall_pipe[0], &c, 1);
	}
	return real(fd, iov, n, off);
}

static void
sess_setup(void)
{
	dh_setup();
	snprintf(out_path, sizeof(out_path), "%s/out.trace", dh_dir);
}

static void
sess_teardown(void)
{
	unlink(out_path);
	dh_teardown();
}

/* A fake agent: its connection, and the ring it was given. */
struct fake {
	struct dh_conn	 c;
	pid_t		 pid;
	uint64_t	 sid;
	uint32_t	 kinds;
	struct ring	*ring;
	int		 evfd;
	uint64_t	 ts;
};

/* Registers a fake agent whose pid (SO_PEERCRED) is a child of ours. */
static void
fake_register(struct fake *f, const char *job, int rank)
{
	memset(f, 0, sizeof(*f));
	f->evfd = -1;
	f->ts = 1700000000000000000ull;
	ck_assert_ptr_nonnull(dh_connect(&f->c, PEER_AGENT, 0, true));
	f->pid = f->c.child;
	ck_assert_uint_ne(dh_hello(&f->c, job, rank, NULL, 0), 0);
}

/* Receives StartCapture and its ring; does not answer. */
static Mspti__StartCapture *
fake_get_start(struct fake *f)
{
	Mspti__StartCapture *sc;
	int fd = -1;

	sc = (Mspti__StartCapture *)dh_expect(&f->c, T(MSG_START_CAPTURE),
	    &fd);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ring_map(fd, &f->ring), 0);
	close(fd);
	f->sid = sc->session_id;
	f->kinds = sc->kinds;
	return sc;
}

/* Answers StartCapture as agent/register.c does: ack with an eventfd. */
static void
fake_ack_start(struct fake *f)
{
	Mspti__CaptureAck ack = MSPTI__CAPTURE_ACK__INIT;

	f->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(f->evfd, 0);
	ack.session_id = f->sid;
	ack.op = MSPTI__CAPTURE_OP__CAPTURE_START;
	ack.message = "";
	ck_assert_int_eq(dh_send(&f->c, T(MSG_CAPTURE_ACK), &ack.base,
	    f->evfd), 0);
}

static void
fake_start(struct fake *f)
{
	free_msg(fake_get_start(f));
	fake_ack_start(f);
}

/* Receives StopCapture and acks it. */
static void
fake_stop(struct fake *f)
{
	Mspti__CaptureAck ack = MSPTI__CAPTURE_ACK__INIT;
	Mspti__StopCapture *sc;

	sc = (Mspti__StopCapture *)dh_expect(&f->c, T(MSG_STOP_CAPTURE), NULL);
	ck_assert_uint_eq(sc->session_id, f->sid);
	free_msg(sc);
	ack.session_id = f->sid;
	ack.op = MSPTI__CAPTURE_OP__CAPTURE_STOP;
	ck_assert_int_eq(dh_send(&f->c, T(MSG_CAPTURE_ACK), &ack.base, -1),
	    0);
}

static void
fake_close(struct fake *f)
{
	ring_unmap(f->ring);
	f->ring = NULL;
	if (f->evfd >= 0)
		close(f->evfd);
	f->evfd = -1;
	dh_close(&f->c);
}

static void
fake_string(struct fake *f, uint32_t id, const char *str)
{
	uint64_t buf[REC_MAX_SIZE / 8];

	ck_assert_uint_gt(record_string_def_encode(buf, sizeof(buf), id, str,
	    strlen(str)), 0);
	ck_assert_int_eq(ring_write(f->ring, buf), 0);
}

static void
fake_marker(struct fake *f, uint32_t flag, uint32_t name_id)
{
	struct rec_marker m;

	REC_INIT(&m, REC_MARKER, 0);
	m.timestamp = f->ts++;
	m.id = f->ts;
	m.pid = (uint32_t)f->pid;
	m.tid = (uint32_t)f->pid;
	m.device = REC_NONE;
	m.stream = REC_NONE;
	m.name_id = name_id;
	m.flag = flag;
	ck_assert_int_eq(ring_write(f->ring, &m), 0);
}

/* Wakes the daemon and pumps until it drained everything. */
static void
fake_flush(struct fake *f)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(f->evfd, &one, sizeof(one)), sizeof(one));
	ck_assert(DH_PUMP_UNTIL(ring_pending(f->ring) == 0));
}

/* Sends StartSession for pids with an output file (cfg may be NULL). */
static void
ctl_start(struct dh_conn *ctl, uint32_t *pids, size_t npids,
    Mspti__SessionConfig *cfg)
{
	Mspti__StartSession req = MSPTI__START_SESSION__INIT;
	Mspti__SessionTarget tg = MSPTI__SESSION_TARGET__INIT;
	int fd;

	fd = open(out_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	tg.pids = pids;
	tg.n_pids = npids;
	req.target = &tg;
	req.config = cfg;
	req.output = out_path;
	ck_assert_int_eq(dh_send(ctl, T(MSG_START_SESSION), &req.base, fd), 0);
	close(fd);
}

static Mspti__StartSessionReply *
ctl_start_reply(struct dh_conn *ctl)
{
	return (Mspti__StartSessionReply *)dh_expect(ctl,
	    T(MSG_START_SESSION_REP), NULL);
}

static void
ctl_wait(struct dh_conn *ctl, uint64_t id)
{
	Mspti__WaitSession w = MSPTI__WAIT_SESSION__INIT;

	w.session_id = id;
	ck_assert_int_eq(dh_send(ctl, T(MSG_WAIT_SESSION), &w.base, -1), 0);
}

static void
ctl_stop(struct dh_conn *ctl, uint64_t id)
{
	Mspti__StopSession st = MSPTI__STOP_SESSION__INIT;

	st.session_id = id;
	ck_assert_int_eq(dh_send(ctl, T(MSG_STOP_SESSION), &st.base, -1), 0);
}

static Mspti__SessionInfo *
ctl_info(struct dh_conn *ctl)
{
	return (Mspti__SessionInfo *)dh_expect(ctl, T(MSG_SESSION_INFO), NULL);
}

static struct session *
session_by_id(uint64_t id)
{
	struct session *s;

	TAILQ_FOREACH(s, &dh_d->sessions, entry)
		if (s->id == id)
			return s;
	return NULL;
}

/* What a trace file holds. */
struct tfile {
	uint64_t		 session_id;
	char			 producer[64];
	char			 target[64];
	bool			 footer;
	struct trace_footer	 f;
	uint64_t		 all;		/* records read */
	uint64_t		 records;	/* read, STRING_DEF aside */
	uint64_t		 markers;
	uint64_t		 named[4][8];	/* [name][flag bit] */
	uint64_t		 process_pid;
	uint64_t		 events[SESSION_EV_MAX];
	uint64_t		 fwd_defs;	/* STRING_DEFs of "fwd" */
};

static const char *tnames[4] = { "step", "fwd", "other", NULL };

static void
read_trace(struct tfile *t)
{
	const struct trace_header *h;
	const struct rec_hdr *r;
	struct trace_reader *rd;
	struct trace_reader_stats st;
	int rc;

	memset(t, 0, sizeof(*t));
	ck_assert_int_eq(trace_reader_open(out_path, &rd), 0);
	h = trace_reader_header(rd);
	t->session_id = h->session_id;
	snprintf(t->producer, sizeof(t->producer), "%s", h->producer);
	for (size_t i = 0; i < h->nconfig; i++)
		if (strcmp(h->config[i].key, "target") == 0)
			snprintf(t->target, sizeof(t->target), "%s",
			    h->config[i].value);
	if (trace_reader_footer(rd) != NULL) {
		t->footer = true;
		t->f = *trace_reader_footer(rd);
	}
	while ((rc = trace_reader_next(rd, &r)) == 1) {
		t->all++;
		if (r->type == REC_STRING_DEF) {
			const struct rec_string_def *sd = (const void *)r;

			t->fwd_defs += sd->len == 3 &&
			    memcmp(sd->bytes, "fwd", 3) == 0;
			continue;
		}
		t->records++;
		if (r->type == REC_MARKER) {
			const struct rec_marker *m = (const void *)r;
			const char *name = trace_reader_string(rd, m->name_id);

			t->markers++;
			for (int i = 0; tnames[i] != NULL; i++)
				if (name != NULL && strcmp(name, tnames[i]) == 0)
					t->named[i][__builtin_ctz(m->flag)]++;
		} else if (r->type == REC_PROCESS)
			t->process_pid = ((const struct rec_process *)r)->pid;
		else if (r->type == REC_SESSION && r->aux < SESSION_EV_MAX)
			t->events[r->aux]++;
	}
	ck_assert_int_eq(rc, 0);
	trace_reader_get_stats(rd, &st);
	ck_assert(!st.truncated);
	ck_assert_uint_eq(st.corrupt_chunks, 0);
	trace_reader_close(rd);
}

/*
 * The whole life of a session: starting (no reply before the agent's
 * ack), active with a per-target "capturing" ack, records from the
 * agent's ring in the file, stop -> StopCapture -> finalized, footer.
 */
START_TEST(test_session_lifecycle)
{
	struct dh_conn ctl, ctl2, lc;
	struct fake f;
	Mspti__SessionConfig cfg = MSPTI__SESSION_CONFIG__INIT;
	Mspti__StartSessionReply *rep;
	Mspti__StartCapture *sc;
	Mspti__SessionInfo *info;
	Mspti__ListRequest lreq = MSPTI__LIST_REQUEST__INIT;
	Mspti__ListReply *l;
	struct session *s;
	struct tfile t;
	char *off[] = { "noisy" }, want[64];
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&lc, PEER_CTL, 0, false));
	cfg.domains_off = off;
	cfg.n_domains_off = 1;
	cfg.buffer_size = 65536;
	ctl_start(&ctl, &pid, 1, &cfg);

	sc = fake_get_start(&f);
	ck_assert_uint_eq(sc->session_id, 1);
	ck_assert_uint_eq(sc->kinds, DEFAULT_KINDS);
	ck_assert_uint_eq(sc->n_domains_off, 1);
	ck_assert_str_eq(sc->domains_off[0], "noisy");
	free_msg(sc);
	s = session_by_id(1);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(s->state, SESS_STARTING);
	ck_assert_uint_eq(dh_d->nsessions, 1);
	/* No reply while the agent has not answered. */
	dh_pump(100);
	ck_assert_int_eq(dh_poll(&ctl), 0);

	fake_ack_start(&f);
	rep = ctl_start_reply(&ctl);
	ck_assert_ptr_nonnull(rep->session);
	ck_assert_uint_eq(rep->session->session_id, 1);
	ck_assert_str_eq(rep->session->state, "active");
	ck_assert_str_eq(rep->session->mode, "stream");
	ck_assert_uint_eq(rep->n_acks, 1);
	ck_assert_uint_eq(rep->acks[0]->pid, pid);
	ck_assert_int_eq(rep->acks[0]->code, 0);
	ck_assert_str_eq(rep->acks[0]->message, "capturing");
	ck_assert_uint_eq(rep->session->n_targets, 1);
	ck_assert_str_eq(rep->session->targets[0]->message, "capturing");
	free_msg(rep);
	ck_assert_int_eq(s->state, SESS_ACTIVE);
	ck_assert_int_eq(TAILQ_FIRST(&s->agents)->state, SA_ACTIVE);
	/* The agent is listed as in the session. */
	ck_assert_int_eq(dh_send(&lc, T(MSG_LIST_REQ), &lreq.base, -1), 0);
	l = (Mspti__ListReply *)dh_expect(&lc, T(MSG_LIST_REP), NULL);
	ck_assert_uint_eq(l->n_agents, 1);
	ck_assert_uint_eq(l->agents[0]->session_id, 1);
	free_msg(l);

	/* Records: a string, a range and an instant marker. */
	fake_string(&f, 1, "fwd");
	fake_marker(&f, MARKER_START, 1);
	fake_marker(&f, MARKER_END, 1);
	fake_marker(&f, MARKER_INSTANT, 1);
	fake_flush(&f);
	ck_assert_uint_eq(s->records, 3);

	/* Stop: StopCapture to the agent, finalized on its ack. */
	ctl_stop(&ctl2, 1);
	dh_pump(10);
	ck_assert_int_eq(s->state, SESS_STOPPING);
	ck_assert_int_eq(dh_poll(&ctl2), 0);
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_str_eq(info->stop_reason, "stopped by command");
	ck_assert_str_eq(info->error, "");
	ck_assert_uint_eq(info->records, 3);
	ck_assert_uint_eq(info->n_targets, 1);
	ck_assert_str_eq(info->targets[0]->message, "done");
	ck_assert_uint_eq(info->n_losses, LOSS_STAGE_MAX);
	for (size_t i = 0; i < info->n_losses; i++)
		ck_assert_uint_eq(info->losses[i], 0);
	ck_assert_uint_gt(info->bytes, 0);
	free_msg(info);
	ck_assert_uint_eq(dh_d->nsessions, 0);
	ck_assert_uint_eq(f.c.peer->agent->session_id, 0);

	read_trace(&t);
	ck_assert_uint_eq(t.session_id, 1);
	snprintf(want, sizeof(want), "pid %u", pid);
	ck_assert_str_eq(t.target, want);
	ck_assert_int_eq(strncmp(t.producer, "msptid ", 7), 0);
	ck_assert(t.footer);
	ck_assert_uint_eq(t.f.records, t.all);
	ck_assert_uint_eq(t.f.counts[REC_STRING_DEF], t.all - t.records);
	ck_assert_uint_eq(t.f.counts[REC_MARKER], 3);
	ck_assert_uint_eq(t.markers, 3);
	ck_assert_uint_eq(t.named[1][1], 1);	/* fwd START */
	ck_assert_uint_eq(t.named[1][2], 1);	/* fwd END */
	ck_assert_uint_eq(t.named[1][0], 1);	/* fwd INSTANT */
	ck_assert_uint_eq(t.process_pid, pid);
	ck_assert_uint_eq(t.events[SESSION_EV_START], 1);
	ck_assert_uint_eq(t.events[SESSION_EV_AGENT_JOIN], 1);
	ck_assert_uint_eq(t.events[SESSION_EV_AGENT_LEAVE], 1);
	ck_assert_uint_eq(t.events[SESSION_EV_STOP], 1);
	for (int i = 0; i < LOSS_STAGE_MAX; i++)
		ck_assert_uint_eq(t.f.losses[i], 0);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
	dh_close(&lc);
}
END_TEST

/* A marker written by producer p (a per-thread segment or the shared one). */
static int
fake_pmarker(struct fake *f, struct ring_producer *p, uint32_t flag,
    uint32_t name_id)
{
	struct rec_marker m;

	REC_INIT(&m, REC_MARKER, 0);
	m.timestamp = f->ts++;
	m.id = f->ts;
	m.pid = (uint32_t)f->pid;
	m.tid = (uint32_t)f->pid;
	m.device = REC_NONE;
	m.stream = REC_NONE;
	m.name_id = name_id;
	m.flag = flag;
	return ring_pwrite(p, &m);
}

/*
 * The daemon's ring has per-thread segments; it merges them: records of
 * two threads' segments and the shared one all reach the file, each
 * segment's own STRING_DEF of the same id is one string of the trace,
 * and the drops of a full segment are the session's agent_ring loss,
 * exactly.
 */
START_TEST(test_session_segments)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionConfig cfg = MSPTI__SESSION_CONFIG__INIT;
	struct ring_producer a, b, z;
	Mspti__SessionInfo *info;
	uint64_t buf[REC_MAX_SIZE / 8];
	uint64_t nb = 0, lost;
	struct tfile t;
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	cfg.buffer_size = 65536;
	ctl_start(&ctl, &pid, 1, &cfg);
	fake_start(&f);
	free_msg(ctl_start_reply(&ctl));
	ck_assert_uint_eq(ring_segments(f.ring), RING_DEFAULT_SEGMENTS);
	ck_assert_uint_eq(ring_producer_claim(f.ring, &a), 1);
	ck_assert_uint_eq(ring_producer_claim(f.ring, &b), 2);
	ring_producer_shared(f.ring, &z);
	/* Each segment defines string 1 before it uses it. */
	ck_assert_uint_gt(record_string_def_encode(buf, sizeof(buf), 1, "fwd",
	    3), 0);
	ck_assert_int_eq(ring_pwrite(&a, buf), 0);
	ck_assert_int_eq(ring_pwrite(&b, buf), 0);
	ck_assert_int_eq(ring_pwrite(&z, buf), 0);
	ck_assert_int_eq(fake_pmarker(&f, &a, MARKER_START, 1), 0);
	ck_assert_int_eq(fake_pmarker(&f, &z, MARKER_INSTANT, 1), 0);
	/* Segment 2 until it is full, and 5 more: dropped, counted. */
	while (fake_pmarker(&f, &b, MARKER_END, 1) == 0)
		nb++;
	lost = 1;
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(fake_pmarker(&f, &b, MARKER_END, 1), -ENOSPC);
	lost += 5;
	fake_flush(&f);
	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_uint_eq(info->records, 2 + nb);
	ck_assert_uint_eq(info->losses[LOSS_AGENT_RING], lost);
	ck_assert_uint_eq(info->losses[LOSS_DAEMON_REJECT], 0);
	free_msg(info);
	read_trace(&t);
	ck_assert_uint_eq(t.markers, 2 + nb);
	ck_assert_uint_eq(t.named[1][1], 1);	/* fwd START, segment 1 */
	ck_assert_uint_eq(t.named[1][0], 1);	/* fwd INSTANT, segment 0 */
	ck_assert_uint_eq(t.named[1][2], nb);	/* fwd END, segment 2 */
	ck_assert_uint_eq(t.fwd_defs, 1);
	ck_assert_uint_eq(t.f.losses[LOSS_AGENT_RING], lost);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* Per-target acks: a pid without an agent is refused with exit class 3,
 * the other target starts; with no target at all the session fails. */
START_TEST(test_session_unknown_pid)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__StartSessionReply *rep;
	Mspti__SessionInfo *info;
	uint32_t pids[2];

	fake_register(&f, "job", 0);
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	/* We are a live process, but not an agent. */
	pids[0] = (uint32_t)getpid();
	pids[1] = (uint32_t)f.pid;
	ctl_start(&ctl, pids, 2, NULL);
	fake_start(&f);
	rep = ctl_start_reply(&ctl);
	ck_assert_uint_eq(rep->n_acks, 2);
	ck_assert_uint_eq(rep->acks[0]->pid, pids[0]);
	ck_assert_int_eq(rep->acks[0]->code, 3);
	ck_assert_ptr_nonnull(strstr(rep->acks[0]->message,
	    "no agent registered"));
	ck_assert_uint_eq(rep->acks[1]->pid, pids[1]);
	ck_assert_int_eq(rep->acks[1]->code, 0);
	ck_assert_str_eq(rep->acks[1]->message, "capturing");
	ck_assert_str_eq(rep->session->state, "active");
	free_msg(rep);
	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	free_msg(info);

	/* Only an unknown pid: refused, and the session fails. */
	ctl_start(&ctl, pids, 1, NULL);
	rep = ctl_start_reply(&ctl);
	ck_assert_uint_eq(rep->n_acks, 1);
	ck_assert_int_eq(rep->acks[0]->code, 3);
	ck_assert_uint_eq(rep->session->session_id, 2);
	free_msg(rep);
	ck_assert(DH_PUMP_UNTIL(session_by_id(2)->state == SESS_FAILED));
	ck_assert_str_eq(session_by_id(2)->error,
	    "no target could be captured");
	ck_assert_uint_eq(dh_d->nsessions, 0);
	/* The agent was never asked. */
	dh_pump(10);
	ck_assert_int_eq(dh_poll(&f.c), 0);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/*
 * An agent that never acks: the start reply still comes when the ack
 * timer fires.  The timer is SESS_ACK_TIMEOUT_MS (seconds); rather than
 * wait, the test checks it is armed and makes it fire now.
 */
START_TEST(test_session_ack_timeout)
{
	struct dh_conn ctl;
	struct fake f;
	Mspti__StartSessionReply *rep;
	struct session *s;
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ctl_start(&ctl, &pid, 1, NULL);
	free_msg(fake_get_start(&f));
	dh_pump(100);
	s = session_by_id(1);
	ck_assert_int_eq(s->state, SESS_STARTING);
	ck_assert_int_eq(dh_poll(&ctl), 0);
	ck_assert(evtimer_pending(s->ack_tv, NULL));

	event_active(s->ack_tv, EV_TIMEOUT, 1);
	rep = ctl_start_reply(&ctl);
	ck_assert_uint_eq(rep->n_acks, 1);
	ck_assert_uint_eq(rep->acks[0]->pid, pid);
	ck_assert_int_eq(rep->acks[0]->code, 1);
	ck_assert_str_eq(rep->acks[0]->message, "agent did not answer");
	free_msg(rep);
	ck_assert(DH_PUMP_UNTIL(s->state == SESS_FINALIZED ||
	    s->state == SESS_FAILED));
	ck_assert_int_eq(s->state, SESS_FAILED);

	/* A late ack is ignored; the agent stays connected. */
	fake_ack_start(&f);
	dh_pump(50);
	ck_assert(dh_alive(&f.c));
	ck_assert_int_eq(s->state, SESS_FAILED);
	ck_assert_uint_eq(dh_d->peers_dropped, 0);
	fake_close(&f);
	dh_close(&ctl);
}
END_TEST

/* Ring garbage is counted as daemon_reject; the session still finalizes
 * and keeps every valid record. */
START_TEST(test_session_ring_garbage)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__StartSessionReply *rep;
	Mspti__SessionInfo *info;
	struct rec_marker bad;
	struct rec_process proc;
	struct rec_hdr *h;
	void *p;
	struct tfile t;
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	ctl_start(&ctl, &pid, 1, NULL);
	fake_start(&f);
	rep = ctl_start_reply(&ctl);
	ck_assert_int_eq(rep->acks[0]->code, 0);
	free_msg(rep);

	fake_string(&f, 1, "fwd");
	fake_marker(&f, MARKER_START, 1);
	/* 1: a marker with two flag bits (fails validation). */
	REC_INIT(&bad, REC_MARKER, 0);
	bad.flag = MARKER_START | MARKER_END;
	ck_assert_int_eq(ring_write(f.ring, &bad), 0);
	/* 2: an unknown type, its body random-ish bytes. */
	ck_assert_int_eq(ring_reserve(f.ring, 64, &p), 0);
	memset((uint8_t *)p + 8, 0xa5, 56);
	h = &(struct rec_hdr){ .type = 0x77, .size = 64, .aux = 0x1234 };
	ring_commit(p, h);
	/* 3: a valid record an agent may not send. */
	REC_INIT(&proc, REC_PROCESS, 0);
	proc.pid = 1;
	proc.rank = proc.local_rank = proc.world_size = -1;
	ck_assert_int_eq(ring_write(f.ring, &proc), 0);
	/* 4: a string id beyond the agent's namespace. */
	fake_string(&f, 1u << 20, "huge");
	fake_marker(&f, MARKER_END, 1);
	fake_flush(&f);

	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_uint_eq(info->records, 2);
	ck_assert_uint_eq(info->losses[LOSS_DAEMON_REJECT], 4);
	free_msg(info);
	read_trace(&t);
	ck_assert(t.footer);
	ck_assert_uint_eq(t.f.losses[LOSS_DAEMON_REJECT], 4);
	ck_assert_uint_eq(t.f.counts[REC_MARKER], 2);
	ck_assert_uint_eq(t.named[1][1], 1);
	ck_assert_uint_eq(t.named[1][2], 1);
	/* Only the daemon's own PROCESS record. */
	ck_assert_uint_eq(t.f.counts[REC_PROCESS], 1);
	ck_assert_uint_eq(t.process_pid, pid);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* --steps N: END markers of ranges named "step" are counted; the session
 * stops after the N-th and writes nothing after it. */
START_TEST(test_session_steps)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionConfig cfg = MSPTI__SESSION_CONFIG__INIT;
	Mspti__CaptureAck ack = MSPTI__CAPTURE_ACK__INIT;
	Mspti__StartSessionReply *rep;
	Mspti__StartCapture *sc;
	Mspti__UpdateCapture *uc;
	Mspti__SessionInfo *info;
	struct tfile t;
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	cfg.steps = 2;
	ctl_start(&ctl, &pid, 1, &cfg);
	/* The window is not chosen at StartCapture... */
	sc = fake_get_start(&f);
	ck_assert_uint_eq(sc->steps, 2);
	ck_assert_str_eq(sc->step_name, "step");
	ck_assert_int_eq(sc->step_from, -1);
	free_msg(sc);
	fake_ack_start(&f);	/* at step 0, no step time yet */
	/* ...but once every target answered where it is: k = 0 here. */
	uc = (Mspti__UpdateCapture *)dh_expect(&f.c, T(MSG_UPDATE_CAPTURE),
	    NULL);
	ck_assert_int_eq(uc->step_from, 0);
	free_msg(uc);
	ack.session_id = f.sid;
	ack.op = MSPTI__CAPTURE_OP__CAPTURE_UPDATE;
	ack.message = "";
	ack.first_step = 0;
	ck_assert_int_eq(dh_send(&f.c, T(MSG_CAPTURE_ACK), &ack.base, -1), 0);
	rep = ctl_start_reply(&ctl);
	ck_assert_int_eq(rep->session->step_from, 0);
	free_msg(rep);
	ctl_wait(&ctl2, 1);

	fake_string(&f, 1, "step");
	fake_string(&f, 2, "other");
	for (int i = 0; i < 5; i++) {
		fake_marker(&f, MARKER_START, 1);
		fake_marker(&f, MARKER_END, 2);		/* not a step */
		fake_marker(&f, MARKER_INSTANT, 1);	/* not an end */
		fake_marker(&f, MARKER_END, 1);
	}
	ck_assert_int_eq(write(f.evfd, &(uint64_t){ 1 }, 8), 8);
	/* The daemon stops the session by itself. */
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_str_eq(info->stop_reason, "steps");
	ck_assert_uint_eq(info->steps, 2);
	ck_assert_uint_eq(info->records, 8);
	free_msg(info);
	read_trace(&t);
	ck_assert_uint_eq(t.markers, 8);
	ck_assert_uint_eq(t.named[0][2], 2);	/* step END */
	ck_assert_uint_eq(t.named[0][1], 2);	/* step START */
	ck_assert_uint_eq(t.named[0][0], 2);	/* step INSTANT */
	ck_assert_uint_eq(t.named[2][2], 2);	/* other END */
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/*
 * --max-size: the session stops itself once the trace reaches the limit.
 * The daemon sees the writer's size per flushed chunk, so records are
 * written in batches until StopCapture comes.
 */
START_TEST(test_session_max_size)
{
	enum { BATCH = 2000, MAX_BATCHES = 60 };
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionConfig cfg = MSPTI__SESSION_CONFIG__INIT;
	Mspti__SessionInfo *info;
	struct tfile t;
	struct stat st;
	uint32_t pid;
	int b;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	cfg.max_size = 64 * 1024;
	cfg.buffer_size = 1 << 20;
	ctl_start(&ctl, &pid, 1, &cfg);
	fake_start(&f);
	free_msg(ctl_start_reply(&ctl));
	ctl_wait(&ctl2, 1);

	fake_string(&f, 1, "fwd");
	for (b = 0; b < MAX_BATCHES; b++) {
		for (int i = 0; i < BATCH; i++)
			fake_marker(&f, MARKER_INSTANT, 1);
		fake_flush(&f);
		if (dh_poll(&f.c) != 0)
			break;
	}
	ck_assert_msg(b < MAX_BATCHES, "no stop after %d records",
	    b * BATCH);
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_str_eq(info->stop_reason, "size limit");
	ck_assert_uint_eq(info->records, (uint64_t)(b + 1) * BATCH);
	free_msg(info);
	/*
	 * Not before max_size bytes of records were captured, and at most
	 * one writer chunk (plus the batch in flight) past that: the limit
	 * is checked against what the writer has flushed.
	 */
	ck_assert_int_eq(stat(out_path, &st), 0);
	ck_assert_uint_ge((uint64_t)(b + 1) * BATCH * sizeof(struct rec_marker),
	    cfg.max_size);
	ck_assert_uint_le((uint64_t)(b + 1) * BATCH * sizeof(struct rec_marker),
	    cfg.max_size + TRACE_CHUNK_SIZE +
	    2 * BATCH * sizeof(struct rec_marker));
	ck_assert_int_gt(st.st_size, 0);
	read_trace(&t);
	ck_assert(t.footer);
	ck_assert_uint_eq(t.f.counts[REC_MARKER], (uint64_t)(b + 1) * BATCH);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* The agent's connection closes mid-session: what it wrote is drained
 * from the ring the daemon still maps, and the session finalizes. */
START_TEST(test_session_agent_exits)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionInfo *info;
	struct tfile t;
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	ctl_start(&ctl, &pid, 1, NULL);
	fake_start(&f);
	free_msg(ctl_start_reply(&ctl));
	ctl_wait(&ctl2, 1);

	fake_string(&f, 1, "fwd");
	for (int i = 0; i < 5; i++)
		fake_marker(&f, MARKER_INSTANT, 1);
	/* No wake: the records are still in the ring when it exits. */
	dh_pump(10);
	ck_assert_uint_gt(ring_pending(f.ring), 0);
	close(f.c.fd);
	f.c.fd = -1;
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_str_eq(info->stop_reason, "targets exited");
	ck_assert_uint_eq(info->records, 5);
	ck_assert_str_eq(info->targets[0]->message, "agent exited");
	free_msg(info);
	ck_assert_uint_eq(dh_d->nagents, 0);
	read_trace(&t);
	ck_assert(t.footer);
	ck_assert_uint_eq(t.f.counts[REC_MARKER], 5);
	ck_assert_uint_eq(t.events[SESSION_EV_STOP], 1);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* A host launch of type (KERNEL or MEMCPY) on device 0, stream 7. */
static void
fake_launch(struct fake *f, uint16_t type, uint32_t task)
{
	uint64_t buf[REC_FIXED_MAX / 8];

	memset(buf, 0, sizeof(buf));
	if (type == REC_KERNEL) {
		struct rec_kernel *k = (void *)buf;

		REC_INIT(k, REC_KERNEL, REC_F_HOST_LAUNCH);
		k->start = f->ts++;
		k->end = f->ts;
		k->correlation_id = task + 1;
		k->pid = k->tid = (uint32_t)f->pid;
		k->stream = 7;
		k->task_id = task;
	} else {
		struct rec_memcpy *m = (void *)buf;

		REC_INIT(m, REC_MEMCPY, REC_F_HOST_LAUNCH);
		m->start = f->ts++;
		m->end = f->ts;
		m->correlation_id = task + 1;
		m->bytes = 64;
		m->pid = m->tid = (uint32_t)f->pid;
		m->stream = 7;
		m->task_id = task;
		m->copy_kind = 1;
	}
	while (ring_write(f->ring, buf) != 0)
		fake_flush(f);
}

/*
 * Launches whose device task never comes are device_unmatched, each in
 * one per-kind loss record, whichever way the join lost it: evicted from
 * a full join (beyond JOIN_MAX_HOST waiting) or still waiting at the end.
 * The loss records sum to the footer's and the session's totals.
 */
START_TEST(test_session_unmatched_per_kind)
{
	enum { EVICT = 40, COPIES = 10 };
	struct dh_conn ctl, ctl2;
	Mspti__SessionConfig cfg = MSPTI__SESSION_CONFIG__INIT;
	struct trace_reader *rd;
	const struct rec_hdr *r;
	struct fake f;
	Mspti__SessionInfo *info;
	uint64_t kinds[REC_TYPE_MAX] = { 0 }, sum = 0;
	uint32_t pid, task = 0;
	char *k[] = { "kernel", "memcpy" };
	int rc;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	cfg.kinds = k;
	cfg.n_kinds = 2;
	cfg.buffer_size = 1 << 20;
	ctl_start(&ctl, &pid, 1, &cfg);
	fake_start(&f);
	free_msg(ctl_start_reply(&ctl));
	for (uint32_t i = 0; i < COPIES; i++)
		fake_launch(&f, REC_MEMCPY, task++);
	for (uint32_t i = 0; i < JOIN_MAX_HOST + EVICT - COPIES; i++)
		fake_launch(&f, REC_KERNEL, task++);
	fake_flush(&f);
	ctl_stop(&ctl, f.sid);
	fake_stop(&f);
	info = ctl_info(&ctl);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_uint_eq(info->losses[LOSS_DEVICE_UNMATCHED], task);
	ck_assert_uint_eq(info->targets[0]->losses[LOSS_DEVICE_UNMATCHED],
	    task);
	free_msg(info);

	ck_assert_int_eq(trace_reader_open(out_path, &rd), 0);
	ck_assert_ptr_nonnull(trace_reader_footer(rd));
	ck_assert_uint_eq(trace_reader_footer(rd)->losses[LOSS_DEVICE_UNMATCHED],
	    task);
	while ((rc = trace_reader_next(rd, &r)) == 1) {
		const struct rec_loss *l = (const void *)r;

		if (r->type != REC_LOSS || l->stage != LOSS_DEVICE_UNMATCHED)
			continue;
		ck_assert_uint_eq(l->pid, pid);
		ck_assert_uint_lt(l->lost_type, REC_TYPE_MAX);
		ck_assert_uint_eq(kinds[l->lost_type], 0);	/* one per kind */
		kinds[l->lost_type] = l->count;
		sum += l->count;
	}
	ck_assert_int_eq(rc, 0);
	trace_reader_close(rd);
	/* The evicted ones were the oldest: the copies and 30 kernels. */
	ck_assert_uint_eq(kinds[REC_MEMCPY], COPIES);
	ck_assert_uint_eq(kinds[REC_KERNEL], task - COPIES);
	ck_assert_uint_eq(sum, task);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* ---- hostile agents and requesters (issue 13) ---- */

/* StartCapture for f, with the ring's shared header mapped at *shp too
 * (what a hostile agent may scribble on). */
static void
fake_start_mapped(struct fake *f, uint8_t **shp)
{
	Mspti__StartCapture *sc;
	int fd = -1;

	sc = (Mspti__StartCapture *)dh_expect(&f->c, T(MSG_START_CAPTURE),
	    &fd);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ring_map(fd, &f->ring), 0);
	*shp = mmap(NULL, RING_HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fd, 0);
	ck_assert(*shp != MAP_FAILED);
	close(fd);
	f->sid = sc->session_id;
	f->kinds = sc->kinds;
	free_msg(sc);
	fake_ack_start(f);
}

/*
 * Records are the ring owner's: a marker or API record naming another
 * pid is attributed to the agent that wrote it; the producer's drop
 * counter cannot claim more than it could have written, and counts for
 * that target.
 */
START_TEST(test_session_forged_records)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionInfo *info;
	struct rec_marker m;
	struct rec_api api;
	const struct rec_hdr *r;
	struct trace_reader *rd;
	uint8_t *sh;
	uint64_t forged = 4600000000000000000ull, others = 0, mine = 0;
	uint32_t pid;
	int rc;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	ctl_start(&ctl, &pid, 1, NULL);
	fake_start_mapped(&f, &sh);
	free_msg(ctl_start_reply(&ctl));

	fake_string(&f, 1, "step");
	REC_INIT(&m, REC_MARKER, 0);
	m.timestamp = f.ts++;
	m.id = 7;
	m.pid = 1;			/* somebody else */
	m.tid = 1;
	m.device = m.stream = REC_NONE;
	m.name_id = 1;
	m.flag = MARKER_START;
	ck_assert_int_eq(ring_write(f.ring, &m), 0);
	m.flag = MARKER_END;
	m.timestamp = f.ts++;
	ck_assert_int_eq(ring_write(f.ring, &m), 0);
	REC_INIT(&api, REC_API, 0);
	api.start = f.ts++;
	api.end = f.ts++;
	api.pid = 1;
	api.tid = 1;
	api.correlation_id = 1;
	api.name_id = 1;
	api.kind = 3;
	ck_assert_int_eq(ring_write(f.ring, &api), 0);
	fake_marker(&f, MARKER_INSTANT, 1);	/* its own pid */
	memcpy(sh + RING_OFF_DROPS, &forged, sizeof(forged));
	fake_flush(&f);

	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	/* Bounded: nowhere near the claim. */
	ck_assert_uint_lt(info->losses[LOSS_AGENT_RING], 1000000000000ull);
	ck_assert_uint_eq(info->n_targets, 1);
	ck_assert_uint_eq(info->targets[0]->n_losses, LOSS_STAGE_MAX);
	ck_assert_uint_eq(info->targets[0]->losses[LOSS_AGENT_RING],
	    info->losses[LOSS_AGENT_RING]);
	free_msg(info);

	ck_assert_int_eq(trace_reader_open(out_path, &rd), 0);
	while ((rc = trace_reader_next(rd, &r)) == 1) {
		if (r->type < REC_MARKER || r->type > REC_COMMUNICATION)
			continue;
		if (record_pid(r) == pid)
			mine++;
		else
			others++;
	}
	ck_assert_int_eq(rc, 0);
	trace_reader_close(rd);
	ck_assert_uint_eq(others, 0);
	ck_assert_uint_eq(mine, 4);
	munmap(sh, RING_HDR_SIZE);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* A ring whose producer broke it beyond repair counts in daemon_reject
 * (its records are lost), and only that agent leaves the capture. */
START_TEST(test_session_corrupt_ring_counted)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionInfo *info;
	uint8_t *sh;
	uint64_t head;
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	ctl_start(&ctl, &pid, 1, NULL);
	fake_start_mapped(&f, &sh);
	free_msg(ctl_start_reply(&ctl));
	fake_string(&f, 1, "step");
	fake_marker(&f, MARKER_INSTANT, 1);
	fake_flush(&f);
	/* A head a whole lap (and more) beyond the tail. */
	memcpy(&head, sh + RING_OFF_HEAD, sizeof(head));
	head += 1ull << 40;
	memcpy(sh + RING_OFF_HEAD, &head, sizeof(head));
	ck_assert_int_eq(write(f.evfd, &(uint64_t){ 1 }, 8), 8);
	ck_assert(DH_PUMP_UNTIL(session_by_id(1)->state != SESS_ACTIVE));
	ctl_wait(&ctl2, 1);
	info = ctl_info(&ctl2);
	ck_assert_uint_ge(info->losses[LOSS_DAEMON_REJECT], 1);
	ck_assert_uint_eq(info->records, 1);
	free_msg(info);
	munmap(sh, RING_HDR_SIZE);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/*
 * The start requester hangs up before the agent acks; the acks collected
 * for its reply are freed when the reply is due with no one to take it
 * (they leaked, 905 bytes, once a retarget replaced them).
 */
START_TEST(test_session_requester_gone)
{
	Mspti__RetargetSession rt = MSPTI__RETARGET_SESSION__INIT;
	Mspti__RetargetReply *rr;
	struct dh_conn ctl, ctl2;
	struct fake f;
	struct session *s;
	char *on[] = { "marker" };
	uint32_t pid;

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	ctl_start(&ctl, &pid, 1, NULL);
	free_msg(fake_get_start(&f));
	s = session_by_id(1);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_ge(s->pending_acks->n, 1);
	dh_close(&ctl);
	ck_assert(DH_PUMP_UNTIL(s->reply_peer == NULL));
	fake_ack_start(&f);
	ck_assert(DH_PUMP_UNTIL(s->state == SESS_ACTIVE));
	/* Nobody to answer: nothing is kept for it. */
	ck_assert_uint_eq(s->pending_acks->n, 0);
	ck_assert_ptr_null(s->pending_acks->v);

	rt.session_id = 1;
	rt.kinds_on = on;
	rt.n_kinds_on = 1;
	ck_assert_int_eq(dh_send(&ctl2, T(MSG_RETARGET_SESSION), &rt.base, -1),
	    0);
	{
		Mspti__UpdateCapture *uc;
		Mspti__CaptureAck ack = MSPTI__CAPTURE_ACK__INIT;

		uc = (Mspti__UpdateCapture *)dh_expect(&f.c,
		    T(MSG_UPDATE_CAPTURE), NULL);
		free_msg(uc);
		ack.session_id = f.sid;
		ack.op = MSPTI__CAPTURE_OP__CAPTURE_UPDATE;
		ck_assert_int_eq(dh_send(&f.c, T(MSG_CAPTURE_ACK), &ack.base,
		    -1), 0);
	}
	rr = (Mspti__RetargetReply *)dh_expect(&ctl2, T(MSG_RETARGET_REP),
	    NULL);
	ck_assert_ptr_nonnull(rr);
	free_msg(rr);
	ck_assert_uint_eq(s->pending_acks->n, 0);
	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	free_msg(ctl_info(&ctl2));
	fake_close(&f);
	dh_close(&ctl2);
}
END_TEST

/* The daemon writes only regular files: a pipe (whose reader may never
 * read, blocking the loop) is refused with a clear error. */
START_TEST(test_session_output_not_regular)
{
	Mspti__StartSession req = MSPTI__START_SESSION__INIT;
	Mspti__SessionTarget tg = MSPTI__SESSION_TARGET__INIT;
	Mspti__Error *err;
	struct dh_conn ctl;
	struct fake f;
	uint32_t pid;
	int p[2];

	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	tg.pids = &pid;
	tg.n_pids = 1;
	req.target = &tg;
	req.output = "fifo";
	ck_assert_int_eq(dh_send(&ctl, T(MSG_START_SESSION), &req.base, p[1]),
	    0);
	close(p[1]);
	err = (Mspti__Error *)dh_expect(&ctl, T(MSG_ERROR), NULL);
	ck_assert_ptr_nonnull(err);
	ck_assert_ptr_nonnull(strstr(err->message, "regular file"));
	free_msg(err);
	ck_assert_ptr_null(session_by_id(1));
	/* The agent was never asked. */
	dh_pump(10);
	ck_assert_int_eq(dh_poll(&f.c), 0);
	close(p[0]);
	fake_close(&f);
	dh_close(&ctl);
}
END_TEST

/* A stalled disk never stalls the daemon: the trace's writes happen on its
 * writer thread, control requests are answered meanwhile, and the session
 * says finalized only once the file is whole. */
START_TEST(test_session_slow_disk)
{
	Mspti__StatusRequest sreq = MSPTI__STATUS_REQUEST__INIT;
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionInfo *info;
	struct tfile t;
	uint32_t pid;

	loop_tid = (pid_t)syscall(SYS_gettid);
	ck_assert_int_eq(pipe2(stall_pipe, O_CLOEXEC), 0);
	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	/* Stuck from the start: even the header waits. */
	atomic_store(&stall_on, 1);
	ctl_start(&ctl, &pid, 1, NULL);
	fake_start(&f);
	free_msg(ctl_start_reply(&ctl));
	fake_string(&f, 1, "step");
	for (int i = 0; i < 1000; i++)
		fake_marker(&f, MARKER_INSTANT, 1);
	fake_flush(&f);
	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	dh_pump(200);
	/* The disk is stuck: the daemon still answers. */
	ck_assert_int_eq(dh_send(&ctl, T(MSG_STATUS_REQ), &sreq.base, -1), 0);
	free_msg((Mspti__StatusReply *)dh_expect(&ctl, T(MSG_STATUS_REP),
	    NULL));
	ck_assert_int_eq(atomic_load(&loop_writes), 0);
	/* Not finalized before its file is. */
	ck_assert_int_eq(dh_poll(&ctl2), 0);
	ck_assert_int_eq(session_by_id(1)->state, SESS_STOPPING);

	atomic_store(&stall_on, 0);
	ck_assert_int_eq(write(stall_pipe[1], "xxxxxxxx", 8), 8);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_uint_eq(info->losses[LOSS_DISK], 0);
	free_msg(info);
	read_trace(&t);
	ck_assert(t.footer);
	ck_assert_uint_eq(t.markers, 1000);
	ck_assert_int_eq(atomic_load(&loop_writes), 0);
	close(stall_pipe[0]);
	close(stall_pipe[1]);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/*
 * Ring mode's flight recorders live in msptid's memory: bounded per uid
 * and in total.  A buffer beyond the cap is refused at start; targets
 * beyond what is left are refused one by one, with the reason.
 */
START_TEST(test_session_ring_memory_cap)
{
	Mspti__SessionConfig cfg = MSPTI__SESSION_CONFIG__INIT;
	Mspti__StartSessionReply *rep;
	Mspti__Error *err;
	struct dh_conn ctl;
	struct fake f[3];
	uint32_t pids[3];
	int ok = 0, capped = 0;

	dh_d->lim.ring_mem_per_uid = 1u << 20;
	for (int i = 0; i < 3; i++) {
		fake_register(&f[i], "job", i);
		pids[i] = (uint32_t)f[i].pid;
	}
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	cfg.mode = "ring";
	cfg.buffer_size = 2u << 20;
	ctl_start(&ctl, pids, 3, &cfg);
	err = (Mspti__Error *)dh_expect(&ctl, T(MSG_ERROR), NULL);
	ck_assert_ptr_nonnull(strstr(err->message, "ring memory"));
	free_msg(err);

	cfg.buffer_size = 512u << 10;
	ctl_start(&ctl, pids, 3, &cfg);
	for (int i = 0; i < 3; i++) {
		Mspti__StartCapture *sc;
		int fd = -1;

		dh_pump(20);
		if (dh_poll(&f[i].c) != 1)
			continue;
		sc = (Mspti__StartCapture *)dh_expect(&f[i].c,
		    T(MSG_START_CAPTURE), &fd);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(ring_map(fd, &f[i].ring), 0);
		close(fd);
		f[i].sid = sc->session_id;
		free_msg(sc);
		fake_ack_start(&f[i]);
	}
	rep = ctl_start_reply(&ctl);
	for (size_t i = 0; i < rep->n_acks; i++) {
		if (rep->acks[i]->code == 0)
			ok++;
		else if (strstr(rep->acks[i]->message, "ring memory"))
			capped++;
	}
	ck_assert_int_eq(ok, 2);
	ck_assert_int_eq(capped, 1);
	free_msg(rep);
	/* Newest first: an older fake's child is kept by the newer ones. */
	for (int i = 2; i >= 0; i--)
		fake_close(&f[i]);
	dh_close(&ctl);
}
END_TEST

/* A disk too slow for the queue: chunks that do not fit are not written
 * and count as disk losses; what is written plus what is lost is all. */
START_TEST(test_session_disk_loss_counted)
{
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionInfo *info;
	struct tfile t;
	uint32_t pid;

	loop_tid = (pid_t)syscall(SYS_gettid);
	ck_assert_int_eq(pipe2(stall_pipe, O_CLOEXEC), 0);
	dh_d->lim.write_queue = 1;	/* nothing fits */
	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	ctl_start(&ctl, &pid, 1, NULL);
	fake_start(&f);
	free_msg(ctl_start_reply(&ctl));
	fake_string(&f, 1, "step");
	for (int i = 0; i < 500; i++)
		fake_marker(&f, MARKER_INSTANT, 1);
	fake_flush(&f);
	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "finalized");
	ck_assert_uint_ge(info->losses[LOSS_DISK], 500);
	free_msg(info);
	read_trace(&t);
	ck_assert(t.footer);
	ck_assert_uint_eq(t.markers, 0);
	ck_assert_uint_ge(t.f.losses[LOSS_DISK], 500);
	close(stall_pipe[0]);
	close(stall_pipe[1]);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* A ring-mode snapshot to a stalled disk: the daemon answers others
 * meanwhile, and the snapshot's own answer comes once it is written. */
START_TEST(test_session_snapshot_slow_disk)
{
	Mspti__SnapshotSession sn = MSPTI__SNAPSHOT_SESSION__INIT;
	Mspti__StatusRequest sreq = MSPTI__STATUS_REQUEST__INIT;
	Mspti__SessionConfig cfg = MSPTI__SESSION_CONFIG__INIT;
	struct dh_conn ctl, ctl2;
	struct fake f;
	Mspti__SessionInfo *info;
	char snap[100];
	struct tfile t;
	uint32_t pid;
	int fd;

	loop_tid = (pid_t)syscall(SYS_gettid);
	ck_assert_int_eq(pipe2(stall_pipe, O_CLOEXEC), 0);
	fake_register(&f, "job", 0);
	pid = (uint32_t)f.pid;
	ck_assert_ptr_nonnull(dh_connect(&ctl, PEER_CTL, 0, false));
	ck_assert_ptr_nonnull(dh_connect(&ctl2, PEER_CTL, 0, false));
	cfg.mode = "ring";
	cfg.buffer_size = 65536;
	ctl_start(&ctl, &pid, 1, &cfg);
	fake_start(&f);
	free_msg(ctl_start_reply(&ctl));
	fake_string(&f, 1, "step");
	for (int i = 0; i < 100; i++)
		fake_marker(&f, MARKER_INSTANT, 1);
	fake_flush(&f);

	atomic_store(&stall_on, 1);
	snprintf(snap, sizeof(snap), "%s/snap.trace", dh_dir);
	fd = open(snap, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	sn.session_id = 1;
	ck_assert_int_eq(dh_send(&ctl2, T(MSG_SNAPSHOT_SESSION), &sn.base, fd),
	    0);
	close(fd);
	dh_pump(200);
	ck_assert_int_eq(dh_send(&ctl, T(MSG_STATUS_REQ), &sreq.base, -1), 0);
	free_msg((Mspti__StatusReply *)dh_expect(&ctl, T(MSG_STATUS_REP),
	    NULL));
	ck_assert_int_eq(dh_poll(&ctl2), 0);
	ck_assert_int_eq(atomic_load(&loop_writes), 0);
	atomic_store(&stall_on, 0);
	ck_assert_int_eq(write(stall_pipe[1], "xxxxxxxx", 8), 8);
	info = ctl_info(&ctl2);
	ck_assert_str_eq(info->state, "active");
	free_msg(info);
	snprintf(out_path, sizeof(out_path), "%s", snap);
	read_trace(&t);
	ck_assert(t.footer);
	ck_assert_uint_eq(t.markers, 100);
	unlink(snap);
	snprintf(out_path, sizeof(out_path), "%s/out.trace", dh_dir);
	ctl_stop(&ctl2, 1);
	fake_stop(&f);
	free_msg(ctl_info(&ctl2));
	close(stall_pipe[0]);
	close(stall_pipe[1]);
	fake_close(&f);
	dh_close(&ctl);
	dh_close(&ctl2);
}
END_TEST

/* Floors (task ranges an ended capture left queued): expired ones go
 * whatever their stream, the cap counts what it refuses, and a stream's
 * range still holds its tasks until it expires or the stream runs past. */
START_TEST(test_session_floors_bounded)
{
	struct agent a;
	uint64_t now = 1000;

	memset(&a, 0, sizeof(a));
	a.cred.pid = 4242;
	/* Streams 0..9 once, then never again. */
	for (uint32_t st = 0; st < 10; st++)
		ck_assert_int_eq(session_dev_floor_add(&a, 0, st, 100, 2, now),
		    0);
	ck_assert_uint_eq(a.ndev_floors, 10);
	ck_assert(session_dev_floor_drop(&a, 0, 3, 101, now + 1));
	ck_assert(!session_dev_floor_drop(&a, 0, 3, 99, now + 1));
	ck_assert(!session_dev_floor_drop(&a, 1, 3, 100, now + 1));
	/* Past the stream's range: that floor goes, the others stay. */
	ck_assert(!session_dev_floor_drop(&a, 0, 3, 102, now + 1));
	ck_assert_uint_eq(a.ndev_floors, 9);
	/* A task of another stream after they expired: all go. */
	ck_assert(!session_dev_floor_drop(&a, 0, 77, 5, now + SESS_FLOOR_NS));
	ck_assert_uint_eq(a.ndev_floors, 0);

	/* The cap: one more stream is refused and counted. */
	for (uint32_t st = 0; st < SESS_FLOORS_MAX; st++)
		ck_assert_int_eq(session_dev_floor_add(&a, 1, st, 7, 1, now),
		    0);
	ck_assert_int_eq(session_dev_floor_add(&a, 1, SESS_FLOORS_MAX, 7, 1,
	    now), -1);
	ck_assert_uint_eq(a.dev_floors_refused, 1);
	ck_assert_uint_eq(a.ndev_floors, SESS_FLOORS_MAX);
	/* A known stream widens its range within the cap. */
	ck_assert_int_eq(session_dev_floor_add(&a, 1, 5, 8, 3, now), 0);
	ck_assert(session_dev_floor_drop(&a, 1, 5, 10, now));
	/* Expired floors make room again. */
	ck_assert_int_eq(session_dev_floor_add(&a, 1, SESS_FLOORS_MAX, 7, 1,
	    now + SESS_FLOOR_NS), 0);
	ck_assert_uint_eq(a.ndev_floors, 1);
	session_dev_agent_free(&a);
}
END_TEST

/* Two names whose session_str_hash is the same (slot and tag alike), found
 * by the birthday bound among 2^18 candidates (~8 pairs expected). */
struct hname {
	uint32_t	h;
	uint32_t	i;
};

static int
hname_cmp(const void *x, const void *y)
{
	const struct hname *a = x, *b = y;

	return a->h < b->h ? -1 : a->h > b->h ? 1 : (a->i > b->i) -
	    (a->i < b->i);
}

static void
hash_twins(char *a, char *b, size_t len)
{
	const uint32_t n = 1u << 18;
	struct hname *v = calloc(n, sizeof(*v));
	char buf[64];

	ck_assert_ptr_nonnull(v);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "aclnnTwin_%08x_bf16", i);
		v[i].h = session_str_hash(buf, strlen(buf));
		v[i].i = i;
	}
	qsort(v, n, sizeof(*v), hname_cmp);
	for (uint32_t i = 1; i < n; i++)
		if (v[i].h == v[i - 1].h) {
			snprintf(a, len, "aclnnTwin_%08x_bf16", v[i - 1].i);
			snprintf(b, len, "aclnnTwin_%08x_bf16", v[i].i);
			free(v);
			return;
		}
	free(v);
	ck_abort_msg("no two names with the same hash in 2^18");
}

/*
 * The daemon's strings of an agent (device records name their kernels by
 * string): every distinct string gets the next id above the agent's, the
 * same string the same id however often and in whatever order, up to
 * SESS_ALLSTR - SESS_STRINGS of them, then 0 for new ones; names that are
 * prefixes of one another, differ only in their last bytes, or hash
 * alike (slot and tag) stay apart; constants by address give the id their
 * text has.
 */
START_TEST(test_drain_strings)
{
	const uint32_t max = SESS_ALLSTR - SESS_STRINGS;
	struct sess_agent *sa = calloc(1, sizeof(*sa));
	char name[96], twin_a[64], twin_b[64];
	uint32_t id, ida, idb, next = SESS_STRINGS + 1;

	ck_assert_ptr_nonnull(sa);
	sa->strs = calloc(SESS_ALLSTR + 1, sizeof(*sa->strs));
	ck_assert_ptr_nonnull(sa->strs);
	ck_assert_uint_eq(session_drain_string(sa, NULL), 0);
	ck_assert_uint_eq(session_drain_string(sa, ""), 0);

	hash_twins(twin_a, twin_b, sizeof(twin_a));
	ida = session_drain_string(sa, twin_a);
	idb = session_drain_string(sa, twin_b);
	ck_assert_uint_eq(ida, next++);
	ck_assert_uint_eq(idb, next++);
	ck_assert_uint_eq(session_drain_string(sa, twin_b), idb);
	ck_assert_uint_eq(session_drain_string(sa, twin_a), ida);

	/* Prefixes of one another: "k", "kk", ... up to 80 bytes. */
	for (size_t n = 1; n <= 80; n++) {
		memset(name, 'k', n);
		name[n] = '\0';
		ck_assert_uint_eq(session_drain_string(sa, name), next++);
	}
	/* Alike but for the last byte, at every length's tail. */
	for (size_t n = 1; n <= 24; n++)
		for (char c = 'a'; c <= 'd'; c++) {
			memset(name, 'm', n);
			name[n - 1] = c;
			name[n] = '\0';
			ck_assert_uint_eq(session_drain_string(sa, name),
			    next++);
		}
	/* Constants: the text's id, by address from then on. */
	id = session_drain_const(sa, "KERNEL_AICORE");
	ck_assert_uint_eq(id, next++);
	ck_assert_uint_eq(session_drain_const(sa, "KERNEL_AICORE"), id);
	ck_assert_uint_eq(session_drain_string(sa, "KERNEL_AICORE"), id);
	ck_assert_uint_eq(session_drain_const(sa, "RING"), next++);
	ck_assert_uint_eq(session_drain_const(sa, "P2P"), next++);
	ck_assert_uint_eq(session_drain_const(sa, "RING"), next - 2);

	/* Kernel names up to the limit, then 0 for new ones. */
	for (uint32_t i = 0; next <= SESS_STRINGS + max; i++) {
		snprintf(name, sizeof(name),
		    "aclnnFusedMatmul_%05u_bf16_transpose_b", i);
		ck_assert_uint_eq(session_drain_string(sa, name), next++);
	}
	ck_assert_uint_eq(sa->ndstr, max);
	ck_assert_uint_eq(session_drain_string(sa, "one more"), 0);
	/* Everything still found, in reverse order, with its text. */
	for (uint32_t i = max; i > 0; i--) {
		const char *str = sa->strs[SESS_STRINGS + i];

		ck_assert_ptr_nonnull(str);
		ck_assert_uint_eq(session_drain_string(sa, str),
		    SESS_STRINGS + i);
	}
	ck_assert_uint_eq(session_drain_string(sa, twin_a), ida);
	ck_assert_uint_eq(session_drain_string(sa, twin_b), idb);
	ck_assert_str_eq(sa->strs[ida], twin_a);
	ck_assert_str_eq(sa->strs[idb], twin_b);

	for (size_t i = 0; i <= SESS_ALLSTR; i++)
		free(sa->strs[i]);
	free(sa->strs);
	free(sa->dhash);
	free(sa);
}
END_TEST

/*
 * When msptid polls the device channels next: when a quarter of the
 * fullest would fill at the rate seen, 5 to 25 ms apart while a channel
 * is in use, never when none is.  The 25 ms bound is for a device idle
 * until now that runs fast next: waiting for the drain timer (100 ms)
 * lost most of a 400,000-task/s burst (session-devjoin.sh).  A poll right
 * after another (the drain timer's, under 5 ms later) saw too short a
 * window to tell a busy device from an idle one and keeps the last
 * interval: it once took its empty window for an idle device, and a
 * 200,000-task/s channel went unread for 100 ms and overran
 * (bench-session-kernels: 3,328 records lost at device_channel, one run
 * in three on this 2-CPU machine).
 */
START_TEST(test_dev_poll_interval)
{
	const uint64_t ms = 1000000;
	static const struct {
		uint32_t	fill;		/* thousandths of the fullest */
		uint64_t	since, last;	/* ms */
		bool		in_use;
		uint64_t	want;		/* ms */
	} c[] = {
		/* A quarter at the rate seen: 250 thousandths in 20 ms. */
		{ 250, 20, 0, true, 20 },
		{ 250, 10, 20, true, 10 },
		/* Never under 5 ms, never over 25 ms while a channel is in
		 * use: a slow device, or one idle over the window. */
		{ 1000, 10, 5, true, 5 },
		{ 125, 20, 20, true, 25 },
		{ 10, 10, 5, true, 25 },
		{ 0, 100, 20, true, 25 },
		/* No channel in use: no timer. */
		{ 0, 100, 20, false, 0 },
		{ 500, 10, 0, false, 0 },
		/* A window under 5 ms keeps the interval, empty or not. */
		{ 0, 2, 22, true, 22 },
		{ 15, 2, 22, true, 22 },
		{ 0, 4, 22, true, 22 },
		/* ... unless there is none: the rate it saw. */
		{ 0, 2, 0, true, 25 },
		{ 500, 4, 0, true, 5 },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		ck_assert_msg(session_dev_next_ns(c[i].fill, c[i].since * ms,
		    c[i].last * ms, c[i].in_use) == c[i].want * ms,
		    "case %zu: fill %u over %llu ms after %llu ms: %llu ns, "
		    "want %llu ms", i, c[i].fill,
		    (unsigned long long)c[i].since,
		    (unsigned long long)c[i].last,
		    (unsigned long long)session_dev_next_ns(c[i].fill,
		    c[i].since * ms, c[i].last * ms, c[i].in_use),
		    (unsigned long long)c[i].want);
}
END_TEST

static Suite *
session_suite(void)
{
	Suite *su = suite_create("session");
	TCase *tc = tcase_create("config");
	TCase *tm = tcase_create("machine");

	tcase_add_test(tc, test_kinds_parse);
	tcase_add_test(tc, test_kind_names_roundtrip);
	tcase_add_test(tc, test_domains);
	tcase_add_test(tc, test_drain_strings);
	tcase_add_test(tc, test_dev_poll_interval);
	suite_add_tcase(su, tc);

	tcase_add_checked_fixture(tm, sess_setup, sess_teardown);
	tcase_set_timeout(tm, 120);
	tcase_add_test(tm, test_session_lifecycle);
	tcase_add_test(tm, test_session_segments);
	tcase_add_test(tm, test_session_unknown_pid);
	tcase_add_test(tm, test_session_ack_timeout);
	tcase_add_test(tm, test_session_ring_garbage);
	tcase_add_test(tm, test_session_steps);
	tcase_add_test(tm, test_session_max_size);
	tcase_add_test(tm, test_session_agent_exits);
	tcase_add_test(tm, test_session_unmatched_per_kind);
	tcase_add_test(tm, test_session_forged_records);
	tcase_add_test(tm, test_session_corrupt_ring_counted);
	tcase_add_test(tm, test_session_requester_gone);
	tcase_add_test(tm, test_session_output_not_regular);
	tcase_add_test(tm, test_session_slow_disk);
	tcase_add_test(tm, test_session_ring_memory_cap);
	tcase_add_test(tm, test_session_disk_loss_counted);
	tcase_add_test(tm, test_session_snapshot_slow_disk);
	tcase_add_test(tm, test_session_floors_bounded);
	suite_add_tcase(su, tm);
	return su;
}

int
main(void)
{
	SRunner *sr = srunner_create(session_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

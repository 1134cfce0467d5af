/*
 * Capture sessions: start, retarget, stop, wait, snapshot; the per-agent
 * rings, their draining and validation, and the trace file.
 *
 * A session owns one struct sess_agent per agent it captures, each with a
 * ring the daemon created (lib/ring) and mapped, and whose memfd went to
 * the agent with StartCapture.  The agent answers with CaptureAck and an
 * eventfd it writes when the ring passes the wake threshold; the daemon
 * drains on that wake and on a timer.  Records from a ring are untrusted:
 * ring_drain validates each, and string ids are resolved only through the
 * agent's own STRING_DEF records.
 *
 * States: starting (waiting for the agents' acks, the CLI waits for its
 * reply) -> active -> stopping (StopCapture sent, waiting for acks) ->
 * finalized | failed.  Every ctl peer that waits on a session (start
 * reply, stop, wait) is remembered and forgotten in session_peer_gone when
 * its connection closes first.
 *
 * Device collection: the agent writes host launch records (REC_F_HOST_LAUNCH
 * with device, stream and task id) for the device kinds; they go into the
 * agent's join (lib/join).  The session references the devices its agents
 * use (devcol_use, metrics_use_device); on every drain the daemon polls the
 * channels once (devcol_poll), routes each device task by pid to the
 * sess_agent capturing it, and the join emits KERNEL, MEMCPY, MEMSET, HCCL
 * and COMMUNICATION records with host CLOCK_REALTIME times (REC_F_JOINED
 * when the launch was found).  Device MARKER tasks are written directly,
 * named after the host marker of the same id.  Records the daemon builds
 * use the agent's string namespace, ids above SESS_STRINGS, so stream and
 * ring mode treat them like the agent's own.  REC_CLOCK_SYNC records (the
 * devcol clock model per device) are written when a device comes into use,
 * every second and at stop; REC_COUNTER records come from metrics_subscribe
 * for the session's devices and pids.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"
#include "util.h"
#include "record.h"
#include "ring.h"
#include "trace.h"
#include "join.h"
#include "msptid.h"
#include "devcol.h"
#include "metrics.h"

#define SESS_ACK_TIMEOUT_MS	3000	/* agent acks of start and stop */
#define SESS_DRAIN_MS		100	/* drain timer */
#define SESS_DRAIN_BATCH	65536	/* records per ring per drain call */
/* A launch this recent at the end may still be queued on the device. */
#define SESS_INFLIGHT_NS	JOIN_DEV_TIMEOUT_NS
/* The most a device record is written after records that started up to
 * this much later (its task waited JOIN_DEV_TIMEOUT_NS for a launch, then
 * the next drain tick): recorded in the header as "max_lateness_ns" for
 * the analysis' reorder window. */
#define SESS_MAX_LATENESS_NS	(JOIN_DEV_TIMEOUT_NS + \
	3ull * SESS_DRAIN_MS * 1000000ull)
#define SESS_KEEP_DONE		64	/* finished sessions kept for `sessions` */
#define SESS_STRINGS		4096	/* producer string ids 1..this */
#define SESS_ALLSTR		(2 * SESS_STRINGS)	/* + daemon-made ones */
#define SESS_MARKS		1024	/* host marker ids remembered */
#define SESS_MAX_TARGETS	4096
#define SESS_MAX_DOMAINS	32

static const struct {
	const char	*name;
	uint32_t	 mask;
} sess_kinds[] = {
	{ "marker", 1u << 1 },
	{ "kernel", 1u << 2 },
	{ "api", (1u << 3) | (1u << 10) | (1u << 11) | (1u << 12) },
	{ "hccl", 1u << 4 },
	{ "memory", 1u << 5 },
	{ "memset", 1u << 6 },
	{ "memcpy", 1u << 7 },
	{ "correlation", 1u << 8 },
	{ "communication", 1u << 9 },
};
#define SESS_DEFAULT_KINDS	(0x1ffeu & ~(1u << 8))

/* A host marker's strings (agent namespace), for the device marker of the
 * same id. */
struct sess_mark {
	uint64_t	id;
	uint32_t	name_id;
	uint32_t	domain_id;
};

static const char *sess_state_names[] = {
	[SESS_STARTING] = "starting",
	[SESS_ACTIVE] = "active",
	[SESS_STOPPING] = "stopping",
	[SESS_FINALIZED] = "finalized",
	[SESS_FAILED] = "failed",
};

static void	session_drain_cb(evutil_socket_t, short, void *);
static void	session_wake_cb(evutil_socket_t, short, void *);
static void	session_timeout_cb(evutil_socket_t, short, void *);
static void	session_duration_cb(evutil_socket_t, short, void *);
static void	session_check_done(struct session *);
static void	session_agent_finish(struct sess_agent *, const char *why);
static int	session_flush_tick(struct session *);
static void	session_devices_poll(struct daemon *);
static void	session_clock_records(struct session *, uint64_t mask);

/* Parses a kind name; returns its mask or 0. */
static uint32_t
session_kind_mask(const char *name)
{
	for (size_t i = 0; i < nitems(sess_kinds); i++)
		if (strcmp(name, sess_kinds[i].name) == 0)
			return sess_kinds[i].mask;
	return 0;
}

/* Kind names of mask into out (pointers to static strings). */
size_t
session_kind_names(uint32_t mask, char **out)
{
	size_t n = 0;

	for (size_t i = 0; i < nitems(sess_kinds); i++)
		if ((mask & sess_kinds[i].mask) == sess_kinds[i].mask)
			out[n++] = (char *)sess_kinds[i].name;
	return n;
}

static struct session *
session_find(struct daemon *d, uint64_t id)
{
	struct session *s;

	TAILQ_FOREACH(s, &d->sessions, entry)
		if (s->id == id)
			return s;
	return NULL;
}

static bool
session_done(const struct session *s)
{
	return s->state == SESS_FINALIZED || s->state == SESS_FAILED;
}

/* The live session an agent is in, or NULL. */
static struct sess_agent *
session_agent_of(struct daemon *d, const struct agent *a)
{
	struct session *s;
	struct sess_agent *sa;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->agent == a)
				return sa;
	}
	return NULL;
}

/* Appends a daemon-made record to the session's output. */
static void
session_emit(struct session *s, const void *rec)
{
	int rc;

	if (s->w == NULL)
		return;
	if ((rc = trace_writer_add(s->w, rec)) != 0 && rc != -EBADMSG &&
	    s->error == NULL) {
		session_fail(s, rc, "writing the trace");
	}
}

/* session_emit for a record known to be valid (ring_drain checked it). */
static void
session_emit_valid(struct session *s, const struct rec_hdr *rec)
{
	int rc;

	if (s->w == NULL)
		return;
	if ((rc = trace_writer_add_valid(s->w, rec)) != 0 && s->error == NULL)
		session_fail(s, rc, "writing the trace");
}

static uint32_t
session_intern(struct session *s, const char *str)
{
	uint32_t id = 0;

	if (s->w == NULL || str == NULL)
		return 0;
	if (trace_writer_intern(s->w, str, strlen(str), &id) != 0)
		return 0;
	return id;
}

static void
session_event(struct session *s, unsigned ev, uint32_t pid, const char *detail)
{
	struct rec_session r;

	REC_INIT(&r, REC_SESSION, ev);
	r.timestamp = util_realtime_ns();
	r.session_id = s->id;
	r.pid = pid;
	r.detail_id = session_intern(s, detail);
	session_emit(s, &r);
}

static void
session_process_record(struct session *s, const struct agent *a)
{
	struct rec_process r;

	REC_INIT(&r, REC_PROCESS, 0);
	r.start_ns = a->since_ns;
	r.pid = (uint32_t)a->cred.pid;
	r.uid = (uint32_t)a->cred.uid;
	r.rank = a->rank;
	r.local_rank = a->local_rank;
	r.world_size = a->world_size;
	r.job_id = session_intern(s, a->job_id);
	r.exe_id = session_intern(s, a->exe);
	r.cmdline_id = session_intern(s, a->cmdline);
	session_emit(s, &r);
}

/*
 * Marks the session failed with a clear error (disk full, ...) and stops
 * it; the agents are told to stop, the application is never affected.
 */
void
session_fail(struct session *s, int err, const char *what)
{
	char buf[256];

	if (s->error != NULL)
		return;
	snprintf(buf, sizeof(buf), "%s: %s", what, strerror(-err));
	s->error = strdup(buf);
	log_warnx("session %llu failed: %s", (unsigned long long)s->id, buf);
	if (!session_done(s))
		session_stop(s, "error");
}

/* ---- ring draining ---- */

struct drain_ctx {
	struct sess_agent	*sa;
	bool			 stop;
};

/* Copies len bytes at offset at of sa's flight recorder, wrapping. */
static void
session_flight_read(const struct sess_agent *sa, size_t at, void *dst,
    size_t len)
{
	size_t first = sa->frcap - at < len ? sa->frcap - at : len;

	memcpy(dst, sa->fr + at, first);
	memcpy((uint8_t *)dst + first, sa->fr, len - first);
}

/* Ring mode: keeps the record, evicting the oldest ones to make room. */
static void
session_flight_add(struct sess_agent *sa, const struct rec_hdr *h)
{
	size_t len = h->size, end, first;

	if (sa->fr == NULL || len > sa->frcap)
		return;
	while (sa->frlen + len > sa->frcap) {
		struct rec_hdr oh;

		session_flight_read(sa, sa->frstart, &oh, sizeof(oh));
		sa->frstart = (sa->frstart + oh.size) % sa->frcap;
		sa->frlen -= oh.size;
		sa->fr_evicted++;
	}
	end = (sa->frstart + sa->frlen) % sa->frcap;
	first = sa->frcap - end < len ? sa->frcap - end : len;
	memcpy(sa->fr + end, h, first);
	memcpy(sa->fr, (const uint8_t *)h + first, len - first);
	sa->frlen += len;
}

/* Rewrites the producer string ids of rec (a private copy) to trace ids. */
static bool
session_remap(struct session *s, struct sess_agent *sa, struct rec_hdr *h)
{
	/* The string fields of each type, looked up once. */
	static uint16_t offs_of[REC_TYPE_MAX][REC_MAX_STR_FIELDS];
	static int8_t n_of[REC_TYPE_MAX];
	static bool known;
	const uint16_t *offs;
	int n;

	if (!known) {
		for (unsigned t = 0; t < REC_TYPE_MAX; t++)
			n_of[t] = (int8_t)record_string_fields(t, offs_of[t]);
		known = true;
	}
	if (h->type >= REC_TYPE_MAX)
		return true;
	n = n_of[h->type];
	offs = offs_of[h->type];
	for (int i = 0; i < n; i++) {
		uint32_t id, tid = 0;

		memcpy(&id, (uint8_t *)h + offs[i], sizeof(id));
		if (id == 0)
			continue;
		if (id <= SESS_ALLSTR) {
			tid = sa->strmap[id];
			if (tid == 0 && sa->strs[id] != NULL) {
				tid = session_intern(s, sa->strs[id]);
				sa->strmap[id] = tid;
			}
		}
		memcpy((uint8_t *)h + offs[i], &tid, sizeof(tid));
	}
	return true;
}

/* Counts a finished step range of the configured name. */
static void
session_count_step(struct session *s, struct sess_agent *sa,
    const struct rec_marker *m)
{
	const char *name;

	if (s->steps_max == 0 || m->source_kind != 0 ||
	    m->flag != 4 /* MARKER_END */ || m->name_id == 0 ||
	    m->name_id > SESS_STRINGS)
		return;
	/* An END marker carries the range's message in our agent. */
	name = sa->strs[m->name_id];
	if (name == NULL || strcmp(name, s->step_name) != 0)
		return;
	s->steps_seen++;
	if (s->steps_seen >= s->steps_max && !s->stop_reason)
		s->stop_reason = "steps";
}

/*
 * Writes one record of sa (agent string namespace) to the session: the
 * flight recorder in ring mode, else remapped into the trace.  Returns
 * true when the size limit was reached.
 */
static bool
session_agent_put(struct sess_agent *sa, struct rec_hdr *r, bool valid)
{
	struct session *s = sa->s;

	sa->records++;
	s->records++;
	if (s->ring_mode) {
		session_flight_add(sa, r);
		return false;
	}
	session_remap(s, sa, r);
	if (valid)
		session_emit_valid(s, r);
	else
		session_emit(s, r);
	if (s->max_size > 0 && s->w != NULL && !s->stop_reason) {
		struct trace_writer_stats st;

		trace_writer_get_stats(s->w, &st);
		/* The file so far, plus the chunk being built at the ratio
		 * the written chunks compressed at (1/4 before the first). */
		uint64_t est = st.file_bytes + (st.raw_bytes > 0 ?
		    (uint64_t)((double)st.pending_bytes * (double)st.file_bytes /
		    (double)st.raw_bytes) : st.pending_bytes / 4);
		if (est >= s->max_size) {
			s->stop_reason = "size limit";
			return true;
		}
	}
	return false;
}

/* session_agent_put for a record of the caller's, which stays as it is. */
static bool
session_agent_out(struct sess_agent *sa, const struct rec_hdr *h)
{
	uint64_t buf[REC_MAX_SIZE / 8];

	if (sa->s->ring_mode)
		return session_agent_put(sa, (struct rec_hdr *)h, false);
	memcpy(buf, h, h->size);
	return session_agent_put(sa, (struct rec_hdr *)buf, false);
}

/* Interns str in sa's namespace above the agent's ids; 0 when full. */
static uint32_t
session_agent_string(struct sess_agent *sa, const char *str)
{
	if (str == NULL || *str == '\0')
		return 0;
	for (uint32_t i = 1; i <= sa->ndstr; i++)
		if (strcmp(sa->strs[SESS_STRINGS + i], str) == 0)
			return SESS_STRINGS + i;
	if (sa->ndstr >= SESS_ALLSTR - SESS_STRINGS ||
	    (sa->strs[SESS_STRINGS + sa->ndstr + 1] = strdup(str)) == NULL)
		return 0;
	sa->ndstr++;
	return SESS_STRINGS + sa->ndstr;
}

/* A host launch from an agent: a device work record with a task id. */
static bool
session_is_launch(const struct rec_hdr *h)
{
	if (!(h->aux & REC_F_HOST_LAUNCH))
		return false;
	switch (h->type) {
	case REC_KERNEL:
		return ((const struct rec_kernel *)h)->task_id != REC_NONE;
	case REC_MEMCPY:
		return ((const struct rec_memcpy *)h)->task_id != REC_NONE;
	case REC_MEMSET:
		return ((const struct rec_memset *)h)->task_id != REC_NONE;
	case REC_HCCL:
		return ((const struct rec_hccl *)h)->task_id != REC_NONE;
	case REC_COMMUNICATION:
		return ((const struct rec_communication *)h)->task_id !=
		    REC_NONE;
	}
	return false;
}

/* Feeds a launch record into sa's join.  user keeps what the device task
 * lacks: copy kind or memset value, and the async flag (bit 32). */
static void
session_add_launch(struct sess_agent *sa, const struct rec_hdr *h)
{
	struct join_launch l;

/* The fields every device-work record type names the same way. */
#define LAUNCH_FROM(r) do {						\
	l.device = (r)->device;						\
	l.stream = (r)->stream;						\
	l.task_id = (r)->task_id;					\
	l.correlation_id = (r)->correlation_id;				\
	l.start = (r)->start;						\
	l.end = (r)->end;						\
	l.tid = (r)->tid;						\
} while (0)

	memset(&l, 0, sizeof(l));
	l.kind = h->type;
	l.user = (uint64_t)((h->aux & REC_F_ASYNC) != 0) << 32;
	switch (h->type) {
	case REC_KERNEL: {
		const struct rec_kernel *r = (const void *)h;

		LAUNCH_FROM(r);
		l.name_id = r->name_id;
		break;
	}
	case REC_MEMCPY: {
		const struct rec_memcpy *r = (const void *)h;

		LAUNCH_FROM(r);
		l.user |= r->copy_kind;
		break;
	}
	case REC_MEMSET: {
		const struct rec_memset *r = (const void *)h;

		LAUNCH_FROM(r);
		l.user |= r->value;
		break;
	}
	case REC_HCCL:
		LAUNCH_FROM((const struct rec_hccl *)(const void *)h);
		break;
	case REC_COMMUNICATION:
		LAUNCH_FROM((const struct rec_communication *)(const void *)h);
		break;
	default:
		return;
	}
#undef LAUNCH_FROM
	l.pid = (uint32_t)sa->pid;
	(void)join_add_launch(sa->join, &l, util_realtime_ns());
}

static const char *
session_kernel_type(unsigned t)
{
	switch (t) {
	case 0:		return "KERNEL_AICORE";
	case 1:		return "KERNEL_AIVEC";
	case 2:		return "KERNEL_AICPU";
	}
	return "KERNEL_UNKNOWN";
}

/* aclrtMemcpyKind (device channel) to msptiActivityMemcpyKind. */
static uint32_t
session_copy_kind(uint32_t k)
{
	static const uint32_t map[] = { 1, 2, 3, 4, 5 };

	return k < nitems(map) ? map[k] : 0;
}

/*
 * The join's output: one device task with its launch (or alone), as the
 * records the session's kinds ask for, in sa's string namespace.
 */
static void
session_join_emit(const void *dev_task, const struct join_launch *l,
    void *arg)
{
	const struct devcol_task *t = dev_task;
	struct sess_agent *sa = arg;
	struct session *s = sa->s;
	uint64_t buf[REC_FIXED_MAX / 8];
	uint32_t aux = l != NULL ? REC_F_JOINED : 0, k = s->kinds;
	uint64_t corr = l != NULL ? l->correlation_id : 0;
	uint32_t tid = l != NULL ? l->tid : t->tid;
	bool stop = false;

	if (session_done(s))
		return;
	if (l != NULL && (l->user >> 32))
		aux |= REC_F_ASYNC;
	/* A task without a launch that started before its kind was on
	 * (before the start, or a retarget) is not in the window. */
	if (l == NULL)
		for (unsigned i = 0; i < nitems(s->kind_on_ns); i++)
			if (t->start < s->kind_on_ns[i])
				k &= ~(1u << i);
/* The fields every device-work record takes from the task and launch. */
#define TASK_FILL(r) do {						\
	(r)->start = t->start;						\
	(r)->end = t->end;						\
	(r)->correlation_id = corr;					\
	(r)->pid = t->pid;						\
	(r)->tid = tid;							\
	(r)->device = t->device;					\
	(r)->stream = t->stream;					\
	(r)->task_id = t->task_id;					\
} while (0)

	switch (t->kind) {
	case DEVCOL_KERNEL: {
		struct rec_kernel *r = (void *)buf;

		if (!(k & (1u << REC_KERNEL)))
			return;
		REC_INIT(r, REC_KERNEL, aux & ~REC_F_ASYNC);
		TASK_FILL(r);
		r->name_id = session_agent_string(sa, t->name);
		r->type_id = session_agent_string(sa,
		    session_kernel_type(t->kernel_type));
		stop = session_agent_out(sa, &r->hdr);
		break;
	}
	case DEVCOL_MEMCPY: {
		struct rec_memcpy *r = (void *)buf;

		if (!(k & (1u << REC_MEMCPY)))
			return;
		REC_INIT(r, REC_MEMCPY, aux);
		TASK_FILL(r);
		r->bytes = t->bytes;
		r->copy_kind = l != NULL && l->kind == REC_MEMCPY ?
		    (uint32_t)(l->user & 0xffffffffu) :
		    session_copy_kind(t->memcpy_kind);
		if (r->copy_kind > 5)
			r->copy_kind = 0;
		stop = session_agent_out(sa, &r->hdr);
		break;
	}
	case DEVCOL_MEMSET: {
		struct rec_memset *r = (void *)buf;

		if (!(k & (1u << REC_MEMSET)))
			return;
		REC_INIT(r, REC_MEMSET, aux);
		TASK_FILL(r);
		r->bytes = t->bytes;
		r->value = l != NULL && l->kind == REC_MEMSET ?
		    (uint32_t)(l->user & 0xffffffffu) : 0;
		stop = session_agent_out(sa, &r->hdr);
		break;
	}
	case DEVCOL_COMM:
		if (k & (1u << REC_HCCL)) {
			struct rec_hccl *r = (void *)buf;

			REC_INIT(r, REC_HCCL, aux & ~REC_F_ASYNC);
			TASK_FILL(r);
			/* bytes per ns is GB/s */
			r->bandwidth = t->end > t->start ? (double)t->bytes /
			    (double)(t->end - t->start) : 0;
			r->name_id = session_agent_string(sa, t->name);
			r->comm_name_id = session_agent_string(sa,
			    t->comm_name);
			stop |= session_agent_out(sa, &r->hdr);
		}
		if (k & (1u << REC_COMMUNICATION)) {
			struct rec_communication *r = (void *)buf;

			REC_INIT(r, REC_COMMUNICATION, aux & ~REC_F_ASYNC);
			TASK_FILL(r);
			r->count = t->count;
			r->name_id = session_agent_string(sa, t->name);
			r->comm_name_id = session_agent_string(sa,
			    t->comm_name);
			r->alg_type_id = session_agent_string(sa,
			    t->algorithm == 1 ? "RING" : t->algorithm == 2 ?
			    "P2P" : "NONE");
			r->data_type = t->data_type <= 12 ? t->data_type :
			    0xffff;
			stop |= session_agent_out(sa, &r->hdr);
		}
		break;
	default:
		break;
	}
	/* The size limit set stop_reason; session_devices_poll stops the
	 * session once the join is no longer running. */
	(void)stop;
#undef TASK_FILL
}

/* A device marker task: written at once, named after its host marker. */
static void
session_device_marker(struct sess_agent *sa, const struct devcol_task *t)
{
	struct session *s = sa->s;
	const struct sess_mark *m;
	struct rec_marker r;

	if (!(s->kinds & (1u << REC_MARKER)) || sa->marks == NULL)
		return;
	m = &sa->marks[t->marker_id % SESS_MARKS];
	/* Unknown id: its domain is off, or it was marked before the
	 * capture. */
	if (m->id != t->marker_id || m->name_id == 0)
		return;
	REC_INIT(&r, REC_MARKER, 0);
	r.timestamp = t->start;
	r.id = t->marker_id;
	r.pid = REC_NONE;
	r.tid = REC_NONE;
	r.device = t->device;
	r.stream = t->stream;
	r.name_id = m->name_id;
	r.domain_id = m->domain_id;
	r.flag = t->tag_id;
	r.source_kind = 1;
	(void)session_agent_out(sa, &r.hdr);
}

/* The sess_agent whose join takes device tasks of pid, or NULL. */
static struct sess_agent *
session_agent_by_pid(struct daemon *d, uint32_t pid)
{
	struct session *s;
	struct sess_agent *sa, *found = NULL;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if ((uint32_t)sa->pid != pid || sa->join == NULL)
				continue;
			if (sa->state == SA_ACTIVE || sa->state == SA_STOPPING)
				return sa;
			found = sa;
		}
	}
	return found;
}

static bool
session_devcol_filter(uint32_t device, uint32_t pid, void *arg)
{
	return session_agent_by_pid(arg, pid) != NULL;
}

static void
session_devcol_task(const struct devcol_task *t, void *arg)
{
	struct sess_agent *sa = session_agent_by_pid(arg, t->pid);

	if (sa == NULL)
		return;
	switch (t->kind) {
	case DEVCOL_MARKER:
		session_device_marker(sa, t);
		break;
	case DEVCOL_KERNEL:
	case DEVCOL_MEMCPY:
	case DEVCOL_MEMSET:
	case DEVCOL_COMM:
		(void)join_add_task(sa->join, t->device, t->stream,
		    t->task_id, t, util_realtime_ns());
		break;
	default:
		break;
	}
}

/*
 * Reads every device channel in use once and routes the tasks; then lets
 * device tasks that waited too long for a launch go out alone.
 */
static void
session_devices_poll(struct daemon *d)
{
	static bool polling;
	struct session *s;
	struct sess_agent *sa;
	uint64_t now;

	if (d->devcol == NULL || polling)
		return;
	polling = true;
	devcol_poll(d->devcol, session_devcol_task, d);
	now = util_realtime_ns();
	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->join != NULL)
				join_expire(sa->join, now);
	}
	polling = false;
	/* A size limit reached by device records. */
	TAILQ_FOREACH(s, &d->sessions, entry)
		if (s->state == SESS_ACTIVE && s->stop_reason != NULL)
			session_stop(s, s->stop_reason);
}

/* Takes references on the devices a uses, for s: channels and metrics. */
static void
session_use_devices(struct session *s, const struct agent *a)
{
	struct daemon *d = s->d;
	uint64_t added = 0;

	for (size_t i = 0; a != NULL && i < a->ndevices; i++) {
		uint32_t dev = a->devices[i];

		if (dev >= 64 || (s->devmask & (1ull << dev)))
			continue;
		if (d->devcol != NULL && devcol_use(d->devcol, dev) != 0)
			continue;
		if (d->metrics != NULL)
			(void)metrics_use_device(d->metrics, dev);
		s->dev_lost_base[dev] = d->devcol != NULL ?
		    devcol_lost(d->devcol, dev) : 0;
		s->devmask |= 1ull << dev;
		added |= 1ull << dev;
	}
	if (added != 0 && s->w != NULL)
		session_clock_records(s, added);
}

/* Device-channel losses of s so far. */
static uint64_t
session_device_lost(const struct session *s)
{
	uint64_t n = s->dev_lost;

	for (uint32_t dev = 0; dev < 64; dev++)
		if ((s->devmask & (1ull << dev)) && s->d->devcol != NULL) {
			uint64_t l = devcol_lost(s->d->devcol, dev);

			if (l > s->dev_lost_base[dev])
				n += l - s->dev_lost_base[dev];
		}
	return n;
}

/* Drops s's device references (end of the session). */
static void
session_release_devices(struct session *s)
{
	struct daemon *d = s->d;

	s->dev_lost = session_device_lost(s);
	for (uint32_t dev = 0; dev < 64; dev++) {
		if (!(s->devmask & (1ull << dev)))
			continue;
		if (d->devcol != NULL)
			devcol_unuse(d->devcol, dev);
		if (d->metrics != NULL)
			metrics_unuse_device(d->metrics, dev);
	}
	s->devmask = 0;
}

/* One REC_CLOCK_SYNC per device of mask that has a clock model. */
static void
session_clock_records(struct session *s, uint64_t mask)
{
	struct clock_model m;
	struct rec_clock_sync r;

	if (s->w == NULL || s->d->devcol == NULL)
		return;
	for (uint32_t dev = 0; dev < 64; dev++) {
		if (!(mask & (1ull << dev)) ||
		    devcol_clock_model(s->d->devcol, dev, &m) != 0 ||
		    m.samples == 0)
			continue;
		REC_INIT(&r, REC_CLOCK_SYNC, 0);
		r.host_ref_ns = m.host_ref_ns;
		r.device_ref_ns = m.device_ref_ns;
		r.drift = m.drift;
		r.error_ns = m.error_ns;
		r.device = dev;
		r.samples = m.samples;
		session_emit(s, &r);
	}
}

/* Live metrics: the session's devices and captured pids, as counters. */
static void
session_counter_cb(const struct metrics_counter *c, void *arg)
{
	struct session *s = arg;
	struct sess_agent *sa;
	struct rec_counter r;
	bool want = false;

	if (s->w == NULL || s->state != SESS_ACTIVE)
		return;
	if (c->pid == 0)
		want = c->device < 64 && (s->devmask & (1ull << c->device));
	else
		TAILQ_FOREACH(sa, &s->agents, entry)
			if ((uint32_t)sa->pid == c->pid &&
			    sa->state == SA_ACTIVE)
				want = true;
	if (!want || c->value != c->value)
		return;
	REC_INIT(&r, REC_COUNTER, 0);
	r.timestamp = c->timestamp;
	r.value = c->value;
	r.track_id = session_intern(s, c->track);
	r.unit_id = session_intern(s, c->unit);
	r.pid = c->pid;
	r.device = c->pid == 0 ? c->device : REC_NONE;
	session_emit(s, &r);
}

/* Launches of sa that lost their device timing so far (LOSS_DEVICE_UNMATCHED):
 * they waited past the join's host timeout or were evicted. */
static uint64_t
session_agent_unmatched(const struct sess_agent *sa)
{
	struct join_stats st;

	if (sa->join == NULL)
		return sa->dev_unmatched;
	join_get_stats(sa->join, &st);
	return st.host_only + st.host_evicted;
}

/* Every sess_agent with a join: emit what waits (end of the session).
 * Launches made in the last SESS_INFLIGHT_NS may still be queued on the
 * device: not a loss, unless the device channel never gave this process
 * a single task (then none of its launches has device timing). */
static void
session_join_flush(struct session *s)
{
	struct sess_agent *sa;
	uint64_t now = util_realtime_ns();

	TAILQ_FOREACH(sa, &s->agents, entry) {
		struct join_stats st;
		uint64_t lost;
		bool silent;

		if (sa->join == NULL)
			continue;
		join_flush_at(sa->join, now, SESS_INFLIGHT_NS);
		join_get_stats(sa->join, &st);
		lost = st.host_only + st.host_evicted;
		silent = st.matched + st.dev_unmatched + st.dev_evicted == 0;
		if (silent)
			lost += st.host_inflight;
		sa->dev_unmatched = lost;
		log_info("session %llu pid %ld: %llu device tasks joined, %llu "
		    "alone, %llu launches without a device task, %llu still "
		    "in flight at the end", (unsigned long long)s->id,
		    (long)sa->pid, (unsigned long long)st.matched,
		    (unsigned long long)(st.dev_unmatched + st.dev_evicted),
		    (unsigned long long)lost,
		    (unsigned long long)(st.host_only + st.host_evicted +
		    st.host_inflight - lost));
		if (lost > 0)
			log_warnx("session %llu pid %ld: %llu launches have no "
			    "device timing (device_unmatched)%s",
			    (unsigned long long)s->id, (long)sa->pid,
			    (unsigned long long)lost, silent ?
			    ": the device channel gave no task of this "
			    "process (is NPUSIM_SHM_PREFIX/the device "
			    "visible to msptid?)" : "");
		join_free(sa->join);
		sa->join = NULL;
	}
}

/* Called by the registry when an agent's device list changed. */
void
session_agent_devices(struct daemon *d, struct agent *a)
{
	struct session *s;
	struct sess_agent *sa;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->agent == a && sa->state == SA_ACTIVE)
				session_use_devices(s, a);
	}
}

static int
session_drain_one_cb(const struct rec_hdr *h, void *arg)
{
	struct drain_ctx *ctx = arg;
	struct sess_agent *sa = ctx->sa;
	struct session *s = sa->s;

	if (h->type == REC_STRING_DEF) {
		const struct rec_string_def *sd = (const void *)h;

		if (sd->id == 0 || sd->id > SESS_STRINGS) {
			sa->rejects++;
			return 0;
		}
		free(sa->strs[sd->id]);
		sa->strs[sd->id] = strndup(sd->bytes, sd->len);
		sa->strmap[sd->id] = 0;
		return 0;
	}
	/* Only activity records may come from an agent. */
	if (h->type < REC_MARKER || h->type > REC_COMMUNICATION) {
		sa->rejects++;
		return 0;
	}
	/* With --steps, the capture ends at the last counted step's end. */
	if (s->steps_max > 0 && s->steps_seen >= s->steps_max)
		return 1;
	if (h->type == REC_MARKER) {
		const struct rec_marker *m = (const void *)h;

		session_count_step(s, sa, m);
		if (s->stop_reason != NULL)
			ctx->stop = true;
		if (m->source_kind == 0 && sa->marks != NULL && m->name_id != 0) {
			struct sess_mark *k = &sa->marks[m->id % SESS_MARKS];

			k->id = m->id;
			k->name_id = m->name_id;
			k->domain_id = m->domain_id;
		}
	}
	/* A host launch waits in the join for its device task. */
	if (session_is_launch(h) && sa->join != NULL) {
		session_add_launch(sa, h);
		return 0;
	}
	/* h is ring_drain's private, validated copy: remapped in place
	 * and written without a second validation. */
	if (session_agent_put(sa, (struct rec_hdr *)h, true))
		ctx->stop = true;
	return s->error != NULL;
}

/* Drains sa's ring completely (bounded) and updates loss counters. */
static void
session_drain_agent(struct sess_agent *sa)
{
	struct session *s = sa->s;
	struct drain_ctx ctx = { sa, false };
	struct ring_stats st;
	int n, rounds = 0;

	if (sa->ring == NULL)
		return;
	do {
		n = ring_drain(sa->ring, session_drain_one_cb, &ctx,
		    SESS_DRAIN_BATCH);
	} while (n == SESS_DRAIN_BATCH && ++rounds < 64 && s->error == NULL);
	ring_get_stats(sa->ring, &st);
	sa->ring_rejects = st.rejects;
	/* Producer-reported drops are untrusted: they only ever grow. */
	if (st.drops > sa->ring_drops)
		sa->ring_drops = st.drops;
	if (n == -EBADMSG && !sa->corrupt) {
		sa->corrupt = true;
		log_warnx("session %llu: ring of pid %ld is corrupt, dropping "
		    "its capture", (unsigned long long)s->id,
		    (long)sa->pid);
	}
	if (ctx.stop && s->state == SESS_ACTIVE)
		session_stop(s, s->stop_reason ? s->stop_reason : "limit");
}

static void
session_losses(const struct session *s, uint64_t losses[LOSS_STAGE_MAX])
{
	const struct sess_agent *sa;

	memset(losses, 0, sizeof(uint64_t) * LOSS_STAGE_MAX);
	TAILQ_FOREACH(sa, &s->agents, entry) {
		losses[LOSS_AGENT_RING] += sa->ring_drops;
		losses[LOSS_DAEMON_REJECT] += sa->ring_rejects + sa->rejects;
		losses[LOSS_DEVICE_UNMATCHED] += session_agent_unmatched(sa);
	}
	losses[LOSS_DAEMON_REJECT] += s->old_rejects;
	losses[LOSS_AGENT_RING] += s->old_drops;
	losses[LOSS_DEVICE_CHANNEL] = session_device_lost(s);
	if (s->w != NULL) {
		struct trace_writer_stats st;

		trace_writer_get_stats(s->w, &st);
		losses[LOSS_DISK] = st.lost;
	} else
		losses[LOSS_DISK] = s->disk_lost;
}

static void
session_drain_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct sess_agent *sa, *next;

	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next) {
		session_drain_agent(sa);
		if (sa->corrupt && sa->state == SA_ACTIVE)
			session_agent_finish(sa, "ring corrupt");
		if (session_done(s) || s->state != SESS_ACTIVE)
			break;
	}
	if (s->state == SESS_ACTIVE)
		session_devices_poll(s->d);
	if (s->w != NULL && s->state == SESS_ACTIVE)
		(void)session_flush_tick(s);
}

static void
session_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess_agent *sa = arg;
	uint64_t v;

	while (read(fd, &v, sizeof(v)) > 0)
		;
	session_drain_agent(sa);
	if (sa->ring != NULL)
		ring_arm_wake(sa->ring, sa->wake_threshold);
}

/* ---- agents joining and leaving ---- */

static void
session_agent_free(struct sess_agent *sa)
{
	if (sa == NULL)
		return;
	if (sa->ev != NULL)
		event_free(sa->ev);
	if (sa->evfd >= 0)
		close(sa->evfd);
	ring_unmap(sa->ring);
	join_free(sa->join);
	free(sa->marks);
	for (size_t i = 0; i <= SESS_ALLSTR && sa->strs != NULL; i++)
		free(sa->strs[i]);
	free(sa->strs);
	free(sa->strmap);
	free(sa->fr);
	free(sa->error);
	free(sa);
}

/* Releases what an agent no longer needs once it left the capture; its
 * counters stay for the session's totals. */
static void
session_agent_release(struct sess_agent *sa)
{
	if (sa->watched && sa->s->d->metrics != NULL) {
		metrics_unwatch_pid(sa->s->d->metrics, (uint32_t)sa->pid);
		sa->watched = false;
	}
	if (sa->ev != NULL) {
		event_free(sa->ev);
		sa->ev = NULL;
	}
	if (sa->evfd >= 0) {
		close(sa->evfd);
		sa->evfd = -1;
	}
	if (sa->ring != NULL && !sa->s->ring_mode) {
		ring_unmap(sa->ring);
		sa->ring = NULL;
	}
}

/* The agent is out of the capture: drained, done, unmapped. */
static void
session_agent_finish(struct sess_agent *sa, const char *why)
{
	struct session *s = sa->s;

	if (sa->state == SA_DONE || sa->state == SA_FAILED)
		return;
	session_drain_agent(sa);
	if (why != NULL && sa->error == NULL)
		sa->error = strdup(why);
	sa->state = sa->state == SA_STARTING ? SA_FAILED : SA_DONE;
	session_event(s, SESSION_EV_AGENT_LEAVE, (uint32_t)sa->pid, why);
	session_agent_release(sa);
	if (sa->agent != NULL && sa->agent->session_id == s->id)
		sa->agent->session_id = 0;
	session_check_done(s);
}

/*
 * Creates the ring for a in s and sends StartCapture.  Returns 0, or -1
 * with the reason in *why (the peer of a may have been dropped).
 */
static int
session_attach(struct session *s, struct agent *a, const char **why)
{
	Mspti__StartCapture sc = MSPTI__START_CAPTURE__INIT;
	struct sess_agent *sa;
	int fd = -1, rc;

	if (a->session_id != 0) {
		*why = "already in another session";
		return -1;
	}
	if ((sa = calloc(1, sizeof(*sa))) == NULL ||
	    (sa->strmap = calloc(SESS_ALLSTR + 1, sizeof(*sa->strmap))) ==
	    NULL ||
	    (sa->strs = calloc(SESS_ALLSTR + 1, sizeof(*sa->strs))) == NULL ||
	    (sa->marks = calloc(SESS_MARKS, sizeof(*sa->marks))) == NULL) {
		session_agent_free(sa);
		*why = "daemon out of memory";
		return -1;
	}
	sa->s = s;
	sa->agent = a;
	sa->pid = a->cred.pid;
	sa->uid = a->cred.uid;
	sa->rank = a->rank;
	sa->agent_id = a->id;
	sa->evfd = -1;
	sa->state = SA_STARTING;
	if (s->ring_mode) {
		sa->frcap = s->buffer_size;
		if ((sa->fr = malloc(sa->frcap)) == NULL) {
			session_agent_free(sa);
			*why = "daemon out of memory";
			return -1;
		}
	}
	if ((rc = ring_create(s->ring_size, &fd)) != 0 ||
	    (rc = ring_map(fd, &sa->ring)) != 0) {
		if (fd >= 0)
			close(fd);
		session_agent_free(sa);
		*why = "cannot create the ring";
		log_warnx("ring for pid %ld: %s", (long)a->cred.pid,
		    ring_strerror(rc));
		return -1;
	}
	/* Woken at a quarter full: 3/4 of the ring is left to absorb the
	 * daemon's wake-up and drain latency (~22 ms at 5 M markers/s with
	 * the default 8 MiB ring). */
	sa->wake_threshold = s->ring_size / 4;
	TAILQ_INSERT_TAIL(&s->agents, sa, entry);
	a->session_id = s->id;
	sa->pending = true;
	s->npending++;
	sc.session_id = s->id;
	sc.kinds = s->kinds;
	sc.domains_off = s->domains_off;
	sc.n_domains_off = s->ndomains_off;
	/* peer_send owns fd from here. */
	if (peer_send(a->peer, MSPTI__MSG_TYPE__MSG_START_CAPTURE, &sc.base,
	    fd) != 0) {
		/* The peer is gone, and a with it; registry_remove already
		 * finished sa. */
		*why = "agent connection lost";
		return -2;
	}
	return 0;
}

/* An agent started capturing: its devices, its pid's metrics, a join. */
static void
session_device_start(struct sess_agent *sa, struct agent *a)
{
	struct session *s = sa->s;
	struct join_config jc;

	memset(&jc, 0, sizeof(jc));
	jc.dev_size = sizeof(struct devcol_task);
	if (sa->join == NULL)
		sa->join = join_new(&jc, session_join_emit, sa);
	if (s->d->metrics != NULL && !sa->watched &&
	    metrics_watch_pid(s->d->metrics, (uint32_t)sa->pid) == 0)
		sa->watched = true;
	session_use_devices(s, a);
}

static void
session_ack_info(Mspti__TargetAck *t, const struct sess_agent *sa)
{
	static const char *names[] = {
		[SA_STARTING] = "starting",
		[SA_ACTIVE] = "capturing",
		[SA_STOPPING] = "stopping",
		[SA_DONE] = "done",
		[SA_FAILED] = "failed",
	};

	mspti__target_ack__init(t);
	t->pid = (uint32_t)sa->pid;
	t->agent_id = sa->agent_id;
	t->rank = sa->rank;
	t->code = sa->state == SA_FAILED ? 1 : 0;
	t->message = sa->error != NULL ? sa->error : (char *)names[sa->state];
}

/* Fills info for s; *bufs hold what must be freed with session_info_free. */
struct sess_info_bufs {
	Mspti__TargetAck	*acks;
	Mspti__TargetAck	**ptrs;
	char			*kinds[16];
	uint64_t		 losses[LOSS_STAGE_MAX];
};

static void
session_info(struct session *s, Mspti__SessionInfo *i,
    struct sess_info_bufs *b)
{
	struct sess_agent *sa;
	size_t n = 0;

	mspti__session_info__init(i);
	memset(b, 0, sizeof(*b));
	i->session_id = s->id;
	i->state = (char *)sess_state_names[s->state];
	i->uid = (uint32_t)s->owner.uid;
	i->output = s->output;
	i->error = s->error != NULL ? s->error : (char *)"";
	i->start_ns = s->start_ns;
	i->end_ns = s->end_ns;
	i->n_kinds = session_kind_names(s->kinds, b->kinds);
	i->kinds = b->kinds;
	i->mode = (char *)(s->ring_mode ? "ring" : "stream");
	i->records = s->records;
	i->bytes = s->bytes;
	if (s->w != NULL) {
		struct trace_writer_stats st;

		trace_writer_get_stats(s->w, &st);
		i->bytes = st.file_bytes;
	}
	session_losses(s, b->losses);
	i->losses = b->losses;
	i->n_losses = LOSS_STAGE_MAX;
	i->steps = s->steps_seen;
	i->stop_reason = (char *)(s->stop_reason ? s->stop_reason : "");
	i->target = s->target_text;
	TAILQ_FOREACH(sa, &s->agents, entry)
		n++;
	if (n > 0) {
		b->acks = calloc(n, sizeof(*b->acks));
		b->ptrs = calloc(n, sizeof(*b->ptrs));
		if (b->acks == NULL || b->ptrs == NULL)
			n = 0;
	}
	i->n_targets = 0;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (i->n_targets >= n)
			break;
		session_ack_info(&b->acks[i->n_targets], sa);
		b->ptrs[i->n_targets] = &b->acks[i->n_targets];
		i->n_targets++;
	}
	i->targets = b->ptrs;
}

static void
session_info_free(struct sess_info_bufs *b)
{
	free(b->acks);
	free(b->ptrs);
}

static int
session_send_info(struct peer *p, struct session *s)
{
	Mspti__SessionInfo i;
	struct sess_info_bufs b;
	int rc;

	session_info(s, &i, &b);
	rc = peer_send(p, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &i.base, -1);
	session_info_free(&b);
	return rc;
}

/* Per-target errors collected while resolving a request's targets. */
struct sess_acks {
	Mspti__TargetAck	*v;
	size_t			 n, cap;
	char			*msgs[SESS_MAX_TARGETS];
};

static void
session_acks_add(struct sess_acks *k, uint32_t pid, int code,
    const struct agent *a, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void
session_acks_add(struct sess_acks *k, uint32_t pid, int code,
    const struct agent *a, const char *fmt, ...)
{
	Mspti__TargetAck *t;
	va_list ap;
	char buf[256];

	if (k->n >= SESS_MAX_TARGETS)
		return;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		Mspti__TargetAck *v = realloc(k->v, cap * sizeof(*v));

		if (v == NULL)
			return;
		k->v = v;
		k->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	t = &k->v[k->n];
	mspti__target_ack__init(t);
	t->pid = pid;
	t->code = code;
	t->agent_id = a ? a->id : 0;
	t->rank = a ? a->rank : -1;
	k->msgs[k->n] = strdup(buf);
	t->message = k->msgs[k->n] ? k->msgs[k->n] : (char *)"";
	k->n++;
}

static void
session_acks_free(struct sess_acks *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->msgs[i]);
	free(k->v);
	k->v = NULL;
	k->n = k->cap = 0;
}

/* Replaces the acks of agents we attached with their final state. */
static void
session_acks_final(struct session *s, struct sess_acks *k)
{
	struct sess_agent *sa;

	for (size_t i = 0; i < k->n; i++) {
		if (k->v[i].code != 0)
			continue;
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if ((uint32_t)sa->pid != k->v[i].pid)
				continue;
			if (sa->state == SA_FAILED) {
				k->v[i].code = 1;
				free(k->msgs[i]);
				k->msgs[i] = strdup(sa->error ? sa->error :
				    "capture failed");
				k->v[i].message = k->msgs[i] ? k->msgs[i] :
				    (char *)"capture failed";
			} else if (sa->state == SA_ACTIVE) {
				k->v[i].message = (char *)"capturing";
			} else if (sa->state == SA_DONE) {
				k->v[i].message = sa->error ? sa->error :
				    (char *)"done";
			}
		}
	}
}

/* Sends the pending start or retarget reply, if any. */
static void
session_reply_pending(struct session *s)
{
	struct sess_info_bufs b;
	Mspti__SessionInfo i;
	Mspti__TargetAck **ptrs = NULL;
	struct peer *p = s->reply_peer;

	if (p == NULL)
		return;
	s->reply_peer = NULL;
	if (s->ack_tv != NULL)
		evtimer_del(s->ack_tv);
	session_acks_final(s, s->pending_acks);
	if (s->pending_acks->n > 0 &&
	    (ptrs = calloc(s->pending_acks->n, sizeof(*ptrs))) != NULL)
		for (size_t k = 0; k < s->pending_acks->n; k++)
			ptrs[k] = &s->pending_acks->v[k];
	session_info(s, &i, &b);
	if (s->reply_type == MSPTI__MSG_TYPE__MSG_START_SESSION_REP) {
		Mspti__StartSessionReply r = MSPTI__START_SESSION_REPLY__INIT;

		r.session = &i;
		r.acks = ptrs;
		r.n_acks = ptrs ? s->pending_acks->n : 0;
		peer_send(p, s->reply_type, &r.base, -1);
	} else {
		Mspti__RetargetReply r = MSPTI__RETARGET_REPLY__INIT;

		r.session = &i;
		r.acks = ptrs;
		r.n_acks = ptrs ? s->pending_acks->n : 0;
		peer_send(p, s->reply_type, &r.base, -1);
	}
	session_info_free(&b);
	free(ptrs);
	session_acks_free(s->pending_acks);
}

/* Called when an agent's pending start or update resolved. */
static void
session_pending_done(struct session *s)
{
	if (s->npending > 0)
		s->npending--;
	if (s->npending > 0)
		return;
	if (s->state == SESS_STARTING) {
		s->state = SESS_ACTIVE;
		session_check_done(s);
	}
	session_reply_pending(s);
}

/* ---- the trace file ---- */

/* The clock model of each device of s, for the trace header:
 * "dev0 host_ref_ns=H device_ref_ns=D drift=X error_ns=E samples=N; ..."
 * (host = H + (dev - D) * (1 + X)); "" when none is known yet. */
static void
session_clock_text(struct session *s, char *out, size_t len)
{
	struct clock_model m;
	size_t n = 0;

	out[0] = '\0';
	for (uint32_t dev = 0; dev < 64 && s->d->devcol != NULL; dev++) {
		int k;

		if (!(s->devmask & (1ull << dev)) ||
		    devcol_clock_model(s->d->devcol, dev, &m) != 0 ||
		    m.samples == 0)
			continue;
		k = snprintf(out + n, len - n, "%sdev%u host_ref_ns=%llu "
		    "device_ref_ns=%llu drift=%.9g error_ns=%.1f samples=%u",
		    n ? "; " : "", dev, (unsigned long long)m.host_ref_ns,
		    (unsigned long long)m.device_ref_ns, m.drift, m.error_ns,
		    m.samples);
		if (k < 0 || (size_t)k >= len - n) {
			out[n] = '\0';
			break;
		}
		n += (size_t)k;
	}
}

/*
 * Opens a trace writer with msptid's compression: zstd level 1 without
 * zstd's per-frame XXH64 content checksum (~20 % of the compression time;
 * each chunk keeps its CRC-32C and the reader checks every record, see
 * doc/trace-format.md).  MSPTID_ZSTD_LEVEL (e.g. -1: zstd's fast levels)
 * and MSPTID_ZSTD_CHECKSUM=1 change that.
 */
static int
session_writer_open(int fd, const struct trace_header *h,
    struct trace_writer **wp)
{
	const char *lv = getenv("MSPTID_ZSTD_LEVEL");
	const char *ck = getenv("MSPTID_ZSTD_CHECKSUM");
	bool sum = ck != NULL && strcmp(ck, "1") == 0;
	long level = 0;
	char *end = NULL;
	int rc;

	if ((rc = trace_writer_open(fd, h, 0, wp)) != 0)
		return rc;
	if (lv != NULL && *lv != '\0')
		level = strtol(lv, &end, 10);
	if ((end != NULL && *end != '\0') || level < INT_MIN / 2 ||
	    level > INT_MAX / 2 || trace_writer_tune(*wp, (int)level, sum) != 0) {
		log_warnx("MSPTID_ZSTD_LEVEL %s: not a zstd level, using 1", lv);
		(void)trace_writer_tune(*wp, 0, sum);
	}
	return 0;
}

static int
session_open_writer(struct session *s, int fd, struct trace_writer **wp)
{
	struct trace_header h;
	struct trace_kv kv[12];
	char host[256], dur[32], steps[32], buf[32], maxs[32], model[1024];
	char late[32];
	char kinds[256] = "";
	char *names[16];
	size_t nk, nkv = 0;

	memset(&h, 0, sizeof(h));
	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	nk = session_kind_names(s->kinds, names);
	for (size_t i = 0; i < nk; i++) {
		strncat(kinds, names[i], sizeof(kinds) - strlen(kinds) - 2);
		if (i + 1 < nk)
			strcat(kinds, ",");
	}
	snprintf(dur, sizeof(dur), "%llu", (unsigned long long)s->duration_ns);
	snprintf(steps, sizeof(steps), "%u", s->steps_max);
	snprintf(buf, sizeof(buf), "%zu", s->ring_size);
	snprintf(maxs, sizeof(maxs), "%llu", (unsigned long long)s->max_size);
	kv[nkv++] = (struct trace_kv){ "target", s->target_text };
	kv[nkv++] = (struct trace_kv){ "kinds", kinds };
	kv[nkv++] = (struct trace_kv){ "mode", s->ring_mode ? "ring" :
	    "stream" };
	kv[nkv++] = (struct trace_kv){ "duration_ns", dur };
	kv[nkv++] = (struct trace_kv){ "steps", steps };
	kv[nkv++] = (struct trace_kv){ "step_name", s->step_name };
	kv[nkv++] = (struct trace_kv){ "buffer_size", buf };
	kv[nkv++] = (struct trace_kv){ "max_size", maxs };
	/* msptid maps device time to host time; the model of each device
	 * at the start, and REC_CLOCK_SYNC records as it is refitted. */
	/* Device records trail the others by up to this much. */
	snprintf(late, sizeof(late), "%llu",
	    (unsigned long long)SESS_MAX_LATENESS_NS);
	kv[nkv++] = (struct trace_kv){ "max_lateness_ns", late };
	kv[nkv++] = (struct trace_kv){ "clock_sync", "daemon" };
	session_clock_text(s, model, sizeof(model));
	kv[nkv++] = (struct trace_kv){ "clock_model", model };
	h.created_ns = util_realtime_ns();
	h.session_id = s->id;
	h.hostname = host;
	h.producer = "msptid " MSPTID_VERSION;
	h.config = kv;
	h.nconfig = nkv;
	return session_writer_open(fd, &h, wp);
}

/* Ring mode: writes every agent's flight recorder to a new trace on fd. */
static int
session_write_flight(struct session *s, int fd, uint64_t *nrec)
{
	struct trace_writer *w, *saved = s->w;
	struct trace_footer f;
	struct sess_agent *sa;
	uint64_t buf[REC_MAX_SIZE / 8];
	int rc;

	*nrec = 0;
	if ((rc = session_open_writer(s, fd, &w)) != 0)
		return rc;
	s->w = w;
	session_event(s, SESSION_EV_SNAPSHOT, 0, "snapshot");
	session_clock_records(s, s->devmask);
	TAILQ_FOREACH(sa, &s->agents, entry) {
		size_t at = sa->frstart, left = sa->frlen;

		if (sa->agent != NULL)
			session_process_record(s, sa->agent);
		memset(sa->strmap, 0, (SESS_ALLSTR + 1) * sizeof(*sa->strmap));
		while (left >= sizeof(struct rec_hdr) && sa->fr != NULL) {
			struct rec_hdr h;

			session_flight_read(sa, at, &h, sizeof(h));
			if (h.size < sizeof(h) || h.size > left)
				break;
			session_flight_read(sa, at, buf, h.size);
			session_remap(s, sa, (struct rec_hdr *)buf);
			session_emit(s, buf);
			(*nrec)++;
			at = (at + h.size) % sa->frcap;
			left -= h.size;
		}
		memset(sa->strmap, 0, (SESS_ALLSTR + 1) * sizeof(*sa->strmap));
	}
	memset(&f, 0, sizeof(f));
	f.end_ns = util_realtime_ns();
	session_losses(s, f.losses);
	s->w = saved;
	return trace_writer_close(w, &f, NULL);
}

/* Writes out the writer's partial chunk about once a second, so a killed
 * daemon leaves at most that much of the capture unwritten. */
static int
session_flush_tick(struct session *s)
{
	if (++s->ticks % (1000 / SESS_DRAIN_MS) != 0)
		return 0;
	session_clock_records(s, s->devmask);
	if (s->records == s->flushed_records)
		return 0;
	s->flushed_records = s->records;
	return trace_writer_flush(s->w);
}

/* ---- finalizing ---- */

static void
session_finalize(struct session *s)
{
	struct trace_footer f;
	struct trace_writer_stats st;
	struct sess_agent *sa;
	int rc;

	if (s->ack_tv != NULL)
		evtimer_del(s->ack_tv);
	if (s->drain_tv != NULL)
		evtimer_del(s->drain_tv);
	if (s->dur_tv != NULL)
		evtimer_del(s->dur_tv);
	TAILQ_FOREACH(sa, &s->agents, entry) {
		session_drain_agent(sa);
		session_agent_release(sa);
	}
	/* Device tasks of the last launches, then whatever still waits. */
	session_devices_poll(s->d);
	session_join_flush(s);
	if (s->msub != NULL) {
		metrics_unsubscribe(s->msub);
		s->msub = NULL;
	}
	session_clock_records(s, s->devmask);
	session_release_devices(s);
	s->end_ns = util_realtime_ns();
	if (s->ring_mode && s->outfd >= 0 && s->error == NULL) {
		uint64_t n;

		rc = session_write_flight(s, s->outfd, &n);
		if (rc != 0)
			session_fail(s, rc, "writing the trace");
		s->bytes = (uint64_t)lseek(s->outfd, 0, SEEK_CUR);
	}
	if (s->w != NULL) {
		session_event(s, SESSION_EV_STOP, 0,
		    s->stop_reason ? s->stop_reason : "stopped");
		memset(&f, 0, sizeof(f));
		f.end_ns = s->end_ns;
		session_losses(s, f.losses);
		rc = trace_writer_close(s->w, &f, &st);
		s->w = NULL;
		s->bytes = st.file_bytes;
		s->disk_lost = st.lost;
		if (rc != 0 && s->error == NULL) {
			char buf[256];

			snprintf(buf, sizeof(buf), "writing the trace: %s",
			    strerror(-rc));
			s->error = strdup(buf);
		}
	}
	/* Agents' rings are no longer needed in ring mode either. */
	TAILQ_FOREACH(sa, &s->agents, entry) {
		ring_unmap(sa->ring);
		sa->ring = NULL;
		free(sa->fr);
		sa->fr = NULL;
		if (sa->agent != NULL && sa->agent->session_id == s->id)
			sa->agent->session_id = 0;
	}
	if (s->outfd >= 0) {
		close(s->outfd);
		s->outfd = -1;
	}
	s->state = s->error != NULL ? SESS_FAILED : SESS_FINALIZED;
	s->d->nsessions--;
	log_info("session %llu %s: %llu records, %llu bytes%s%s",
	    (unsigned long long)s->id, sess_state_names[s->state],
	    (unsigned long long)s->records, (unsigned long long)s->bytes,
	    s->error ? ": " : "", s->error ? s->error : "");
	sd_status("%u agents, %u sessions", s->d->nagents, s->d->nsessions);
	session_reply_pending(s);
	for (size_t i = 0; i < s->nwaiters; i++)
		session_send_info(s->waiters[i], s);
	s->nwaiters = 0;
}

/* Finalizes a stopping session once no agent is left to ack. */
static void
session_check_done(struct session *s)
{
	struct sess_agent *sa;
	bool live = false, any_started = false;

	if (session_done(s))
		return;
	TAILQ_FOREACH(sa, &s->agents, entry) {
		if (sa->state == SA_STARTING || sa->state == SA_ACTIVE ||
		    sa->state == SA_STOPPING)
			live = true;
		if (sa->state != SA_FAILED)
			any_started = true;
	}
	if (s->state == SESS_STOPPING && !live) {
		session_finalize(s);
		return;
	}
	/* A pid-targeted session whose processes all left ends by itself;
	 * a job selector waits for the job to come back (elastic). */
	if (s->state == SESS_ACTIVE && !live && !s->elastic) {
		if (!any_started && s->error == NULL)
			s->error = strdup("no target could be captured");
		session_stop(s, any_started ? "targets exited" : "no targets");
	}
}

/*
 * Stops s: StopCapture to every capturing agent; finalization follows
 * their acks (or the ack timeout).
 */
void
session_stop(struct session *s, const char *reason)
{
	Mspti__StopCapture sc = MSPTI__STOP_CAPTURE__INIT;
	struct sess_agent *sa, *next;
	struct timeval tv = { SESS_ACK_TIMEOUT_MS / 1000,
	    (SESS_ACK_TIMEOUT_MS % 1000) * 1000 };

	if (session_done(s) || s->state == SESS_STOPPING)
		return;
	if (s->stop_reason == NULL)
		s->stop_reason = reason;
	s->state = SESS_STOPPING;
	log_info("session %llu stopping (%s)", (unsigned long long)s->id,
	    s->stop_reason);
	sc.session_id = s->id;
	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next) {
		if (sa->state != SA_ACTIVE && sa->state != SA_STARTING)
			continue;
		sa->state = SA_STOPPING;
		if (sa->agent == NULL || peer_send(sa->agent->peer,
		    MSPTI__MSG_TYPE__MSG_STOP_CAPTURE, &sc.base, -1) != 0)
			continue;	/* finished by registry_remove */
	}
	if (session_done(s))
		return;
	evtimer_add(s->ack_tv, &tv);
	session_check_done(s);
}

/* ---- lifetime ---- */

void
session_free(struct session *s)
{
	struct sess_agent *sa;

	if (s == NULL)
		return;
	while ((sa = TAILQ_FIRST(&s->agents)) != NULL) {
		TAILQ_REMOVE(&s->agents, sa, entry);
		if (sa->agent != NULL && sa->agent->session_id == s->id)
			sa->agent->session_id = 0;
		session_agent_free(sa);
	}
	if (s->msub != NULL)
		metrics_unsubscribe(s->msub);
	session_release_devices(s);
	if (s->drain_tv != NULL)
		event_free(s->drain_tv);
	if (s->dur_tv != NULL)
		event_free(s->dur_tv);
	if (s->ack_tv != NULL)
		event_free(s->ack_tv);
	trace_writer_abort(s->w);
	if (s->outfd >= 0)
		close(s->outfd);
	for (size_t i = 0; i < s->ndomains_off; i++)
		free(s->domains_off[i]);
	free(s->domains_off);
	free(s->waiters);
	free(s->ranks);
	free(s->job_id);
	free(s->output);
	free(s->error);
	free(s->target_text);
	free(s->step_name);
	if (s->pending_acks != NULL) {
		session_acks_free(s->pending_acks);
		free(s->pending_acks);
	}
	free(s);
}

/* Forgets finished sessions beyond the newest SESS_KEEP_DONE. */
void
session_gc(struct daemon *d)
{
	struct session *s, *next;
	size_t done = 0;

	TAILQ_FOREACH_REVERSE(s, &d->sessions, session_list, entry)
		if (session_done(s) && ++done > SESS_KEEP_DONE)
			break;
	if (s == NULL)
		return;
	while (s != NULL) {
		next = TAILQ_PREV(s, session_list, entry);
		if (session_done(s) && s->reply_peer == NULL &&
		    s->nwaiters == 0) {
			TAILQ_REMOVE(&d->sessions, s, entry);
			session_free(s);
		}
		s = next;
	}
}

static void
session_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct sess_agent *sa, *next;

	/* Agents that did not ack in time: out of the capture. */
	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next) {
		sa->pending = false;
		if (sa->state == SA_STARTING) {
			session_agent_finish(sa, "agent did not answer");
			if (session_done(s))
				return;
		} else if (sa->state == SA_STOPPING)
			session_agent_finish(sa, "agent did not ack stop");
		if (session_done(s))
			return;
	}
	s->npending = 0;
	if (s->state == SESS_STARTING) {
		s->state = SESS_ACTIVE;
		session_check_done(s);
	}
	session_reply_pending(s);
}

static void
session_duration_cb(evutil_socket_t fd, short what, void *arg)
{
	session_stop(arg, "duration");
}

/* Does s's selector pick agent a (for --job/--rank/--all joins)? */
static bool
session_selects(const struct session *s, const struct agent *a)
{
	bool rank_ok = s->nranks == 0;

	for (size_t i = 0; i < s->nranks; i++)
		if (s->ranks[i] == a->rank)
			rank_ok = true;
	if (!rank_ok)
		return false;
	if (s->job_id != NULL && strcmp(s->job_id, a->job_id) != 0)
		return false;
	return s->all || s->job_id != NULL || s->nranks > 0;
}

/* ---- requests ---- */

/* ORs the masks of names into *mask; -1 with a message in bad for an
 * unknown name. */
int
session_parse_kinds(char **names, size_t n, uint32_t *mask, char *bad,
    size_t badlen)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t m = session_kind_mask(names[i]);

		if (m == 0) {
			snprintf(bad, badlen, "unknown kind '%.64s' (kinds: "
			    "api, kernel, memcpy, memset, memory, hccl, "
			    "communication, marker, correlation)", names[i]);
			return -1;
		}
		*mask |= m;
	}
	return 0;
}

/* Turns domains on (forgets them) and off (adds them, once each) in s's
 * list; -1 beyond SESS_MAX_DOMAINS or without memory. */
int
session_domains_set(struct session *s, char **on, size_t non, char **off,
    size_t noff)
{
	for (size_t i = 0; i < non; i++)
		for (size_t j = 0; j < s->ndomains_off; j++)
			if (strcmp(s->domains_off[j], on[i]) == 0) {
				free(s->domains_off[j]);
				s->domains_off[j] =
				    s->domains_off[--s->ndomains_off];
				break;
			}
	for (size_t i = 0; i < noff; i++) {
		bool have = false;
		char **v;

		for (size_t j = 0; j < s->ndomains_off; j++)
			if (strcmp(s->domains_off[j], off[i]) == 0)
				have = true;
		if (have)
			continue;
		if (s->ndomains_off >= SESS_MAX_DOMAINS)
			return -1;
		v = realloc(s->domains_off, (s->ndomains_off + 1) *
		    sizeof(*v));
		if (v == NULL)
			return -1;
		s->domains_off = v;
		if ((v[s->ndomains_off] = strndup(off[i], 256)) == NULL)
			return -1;
		s->ndomains_off++;
	}
	return 0;
}

/* Resolves explicit pids, attaching those the caller may capture. */
static void
session_add_pids(struct session *s, struct peer *p, uint32_t *pids,
    size_t n, struct sess_acks *k)
{
	const char *why;
	int rc;

	for (size_t i = 0; i < n; i++) {
		struct agent *a = registry_find_pid(s->d, (pid_t)pids[i]);

		if (a == NULL) {
			session_acks_add(k, pids[i], 3, NULL,
			    "no agent registered with pid %u", pids[i]);
			continue;
		}
		if (!ctl_may_act_on(&p->cred, a->cred.uid)) {
			session_acks_add(k, pids[i], 3, a,
			    "permission denied: pid %u belongs to uid %lu",
			    pids[i], (unsigned long)a->cred.uid);
			continue;
		}
		if ((rc = session_attach(s, a, &why)) != 0) {
			session_acks_add(k, pids[i], 1, rc == -2 ? NULL : a,
			    "%s", why);
			continue;
		}
		session_acks_add(k, pids[i], 0, a, "starting");
	}
}

int
session_start_req(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__StartSession *req = (const Mspti__StartSession *)m;
	const Mspti__SessionConfig *cfg = req->config;
	const Mspti__SessionTarget *tg = req->target;
	struct daemon *d = p->d;
	struct session *s = NULL;
	struct sess_acks *k = NULL;
	struct agent *a;
	char bad[256], tt[256];
	struct stat st;
	int fd, fl, rc;
	uint32_t kinds = 0;
	const char *why;

	fd = peer_take_fd(p);
	if (tg == NULL || (tg->n_pids == 0 && !tg->all && tg->n_ranks == 0 &&
	    (tg->job_id == NULL || *tg->job_id == '\0'))) {
		if (fd >= 0)
			close(fd);
		return peer_send_error(p, 2, "start: no target given "
		    "(--pid, --job, --rank or --all)");
	}
	if (tg->n_pids > SESS_MAX_TARGETS || tg->n_ranks > SESS_MAX_TARGETS) {
		if (fd >= 0)
			close(fd);
		return peer_send_error(p, 2, "start: too many targets");
	}
	if (fd < 0)
		return peer_send_error(p, 2, "start: no output file descriptor "
		    "came with the request");
	/* The CLI opened the file as the requester; we only write to it. */
	if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) ||
	    S_ISFIFO(st.st_mode)) || (fl = fcntl(fd, F_GETFL)) < 0 ||
	    (fl & O_ACCMODE) == O_RDONLY) {
		close(fd);
		return peer_send_error(p, 2, "start: the output must be a "
		    "regular file or a pipe open for writing");
	}
	if (cfg != NULL && session_parse_kinds(cfg->kinds, cfg->n_kinds,
	    &kinds, bad, sizeof(bad)) != 0) {
		close(fd);
		return peer_send_error(p, 2, "start: %s", bad);
	}
	if (kinds == 0)
		kinds = SESS_DEFAULT_KINDS;
	if (cfg != NULL && cfg->mode != NULL && *cfg->mode != '\0' &&
	    strcmp(cfg->mode, "stream") != 0 && strcmp(cfg->mode, "ring") != 0) {
		close(fd);
		return peer_send_error(p, 2, "start: unknown mode '%.32s' "
		    "(stream or ring)", cfg->mode);
	}
	if (cfg != NULL && cfg->buffer_size != 0 &&
	    (cfg->buffer_size < RING_MIN_CAPACITY ||
	    cfg->buffer_size > RING_MAX_CAPACITY)) {
		close(fd);
		return peer_send_error(p, 2, "start: buffer size must be "
		    "between 4K and 1G");
	}
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (k = calloc(1, sizeof(*k))) == NULL)
		goto nomem;
	s->d = d;
	s->id = d->next_session_id++;
	s->owner = p->cred;
	s->outfd = fd;
	fd = -1;
	s->kinds = kinds;
	s->state = SESS_STARTING;
	s->start_ns = util_realtime_ns();
	for (unsigned i = 0; i < nitems(s->kind_on_ns); i++)
		s->kind_on_ns[i] = s->start_ns;
	s->pending_acks = k;
	TAILQ_INIT(&s->agents);
	s->output = strdup(req->output ? req->output : "");
	s->ring_mode = cfg != NULL && cfg->mode != NULL &&
	    strcmp(cfg->mode, "ring") == 0;
	s->buffer_size = cfg && cfg->buffer_size ? cfg->buffer_size :
	    RING_DEFAULT_CAPACITY;
	/* The shared ring is a power of two no larger than the buffer. */
	s->ring_size = RING_MIN_CAPACITY;
	while (s->ring_size * 2 <= s->buffer_size &&
	    s->ring_size * 2 <= RING_MAX_CAPACITY)
		s->ring_size *= 2;
	if (s->ring_mode && s->ring_size > (1u << 20))
		s->ring_size = 1u << 20;
	s->duration_ns = cfg ? cfg->duration_ns : 0;
	s->steps_max = cfg ? cfg->steps : 0;
	s->step_name = strdup(cfg && cfg->step_name && *cfg->step_name ?
	    cfg->step_name : "step");
	s->max_size = cfg ? cfg->max_size : 0;
	if (cfg != NULL && session_domains_set(s, NULL, 0, cfg->domains_off,
	    cfg->n_domains_off) != 0)
		goto nomem;
	s->all = tg->all;
	if (tg->job_id != NULL && *tg->job_id != '\0' &&
	    (s->job_id = strndup(tg->job_id, 256)) == NULL)
		goto nomem;
	if (tg->n_ranks > 0) {
		if ((s->ranks = calloc(tg->n_ranks, sizeof(*s->ranks))) == NULL)
			goto nomem;
		memcpy(s->ranks, tg->ranks, tg->n_ranks * sizeof(*s->ranks));
		s->nranks = tg->n_ranks;
	}
	s->elastic = tg->n_pids == 0;
	if (tg->n_pids > 0)
		snprintf(tt, sizeof(tt), "pid %u%s", tg->pids[0],
		    tg->n_pids > 1 ? ",..." : "");
	else if (s->job_id != NULL)
		snprintf(tt, sizeof(tt), "job %s%s", s->job_id,
		    s->nranks ? " ranks" : "");
	else if (s->nranks > 0)
		snprintf(tt, sizeof(tt), "rank %d%s", s->ranks[0],
		    s->nranks > 1 ? ",..." : "");
	else
		snprintf(tt, sizeof(tt), "all");
	s->target_text = strdup(tt);
	s->drain_tv = event_new(d->base, -1, EV_PERSIST, session_drain_cb, s);
	s->ack_tv = evtimer_new(d->base, session_timeout_cb, s);
	s->dur_tv = evtimer_new(d->base, session_duration_cb, s);
	if (s->output == NULL || s->step_name == NULL ||
	    s->target_text == NULL || s->drain_tv == NULL ||
	    s->ack_tv == NULL || s->dur_tv == NULL)
		goto nomem;
	/* The devices of the targets known now, so the header has their
	 * clock models; later agents add theirs when they join. */
	if (d->devcol != NULL)
		devcol_set_filter(d->devcol, session_devcol_filter, d);
	if (tg->n_pids > 0) {
		for (size_t i = 0; i < tg->n_pids; i++) {
			a = registry_find_pid(d, (pid_t)tg->pids[i]);
			if (a != NULL && a->session_id == 0 &&
			    ctl_may_act_on(&p->cred, a->cred.uid))
				session_use_devices(s, a);
		}
	} else
		TAILQ_FOREACH(a, &d->agents, entry)
			if (session_selects(s, a) && a->session_id == 0 &&
			    ctl_may_act_on(&p->cred, a->cred.uid))
				session_use_devices(s, a);
	if (!s->ring_mode && (rc = session_open_writer(s, s->outfd, &s->w)) !=
	    0) {
		session_free(s);
		return peer_send_error(p, 1, "start: cannot write the trace: %s",
		    strerror(-rc));
	}
	session_gc(d);
	TAILQ_INSERT_TAIL(&d->sessions, s, entry);
	d->nsessions++;
	session_event(s, SESSION_EV_START, 0, s->target_text);
	session_clock_records(s, s->devmask);
	if (d->metrics != NULL)
		s->msub = metrics_subscribe(d->metrics, session_counter_cb, s);

	if (tg->n_pids > 0)
		session_add_pids(s, p, tg->pids, tg->n_pids, k);
	else {
		struct agent *next;

		TAILQ_FOREACH_SAFE(a, &d->agents, entry, next) {
			if (!session_selects(s, a))
				continue;
			if (!ctl_may_act_on(&p->cred, a->cred.uid)) {
				/* --all means "all of mine" to a non-root
				 * user; a named job or rank is refused. */
				if (!s->all || s->job_id != NULL)
					session_acks_add(k, (uint32_t)
					    a->cred.pid, 3, a,
					    "permission denied: pid %ld belongs"
					    " to uid %lu", (long)a->cred.pid,
					    (unsigned long)a->cred.uid);
				continue;
			}
			pid_t pid = a->cred.pid;

			if ((rc = session_attach(s, a, &why)) != 0)
				session_acks_add(k, (uint32_t)pid, 1,
				    rc == -2 ? NULL : a, "%s", why);
			else
				session_acks_add(k, (uint32_t)a->cred.pid, 0,
				    a, "starting");
		}
		if (k->n == 0)
			session_acks_add(k, 0, 0, NULL, "no agent matches %s "
			    "yet; new ones will join", s->target_text);
	}
	log_info("session %llu started by uid %lu: %s, %zu target(s)",
	    (unsigned long long)s->id, (unsigned long)p->cred.uid,
	    s->target_text, k->n);
	{
		struct timeval tv = { SESS_DRAIN_MS / 1000,
		    (SESS_DRAIN_MS % 1000) * 1000 };

		event_add(s->drain_tv, &tv);
	}
	if (s->duration_ns > 0) {
		struct timeval tv = { (time_t)(s->duration_ns / 1000000000ull),
		    (suseconds_t)(s->duration_ns % 1000000000ull / 1000) };

		evtimer_add(s->dur_tv, &tv);
	}
	s->reply_peer = p;
	s->reply_type = MSPTI__MSG_TYPE__MSG_START_SESSION_REP;
	if (s->npending == 0) {
		/* Nothing to wait for. */
		s->state = SESS_ACTIVE;
		session_reply_pending(s);
		if (!s->elastic)
			session_check_done(s);
	} else {
		struct timeval tv = { SESS_ACK_TIMEOUT_MS / 1000,
		    (SESS_ACK_TIMEOUT_MS % 1000) * 1000 };

		evtimer_add(s->ack_tv, &tv);
	}
	sd_status("%u agents, %u sessions", d->nagents, d->nsessions);
	return 0;
nomem:
	if (fd >= 0)
		close(fd);
	if (s != NULL && s->pending_acks == NULL)
		free(k);
	session_free(s);
	return peer_send_error(p, 1, "daemon out of memory");
}

/* Looks up the session of a request and checks the caller may act on it. */
static struct session *
session_lookup(struct peer *p, uint64_t id, uint32_t pid)
{
	struct session *s;
	struct agent *a;
	struct sess_agent *sa;

	if (id == 0 && pid != 0) {
		if ((a = registry_find_pid(p->d, (pid_t)pid)) == NULL ||
		    (sa = session_agent_of(p->d, a)) == NULL) {
			peer_send_error(p, 3, "no session captures pid %u", pid);
			return NULL;
		}
		s = sa->s;
	} else if ((s = session_find(p->d, id)) == NULL) {
		peer_send_error(p, 3, "no session %llu", (unsigned long long)id);
		return NULL;
	}
	if (!ctl_may_act_on(&p->cred, s->owner.uid)) {
		peer_send_error(p, 3, "permission denied: session %llu belongs "
		    "to uid %lu", (unsigned long long)s->id,
		    (unsigned long)s->owner.uid);
		return NULL;
	}
	return s;
}

static int
session_add_waiter(struct session *s, struct peer *p)
{
	struct peer **v;

	for (size_t i = 0; i < s->nwaiters; i++)
		if (s->waiters[i] == p)
			return 0;
	v = realloc(s->waiters, (s->nwaiters + 1) * sizeof(*v));
	if (v == NULL)
		return peer_send_error(p, 1, "daemon out of memory");
	s->waiters = v;
	v[s->nwaiters++] = p;
	return 0;
}

int
session_stop_req(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__StopSession *req = (const Mspti__StopSession *)m;
	struct session *s;

	if ((s = session_lookup(p, req->session_id, req->pid)) == NULL)
		return 0;
	if (session_done(s))
		return session_send_info(p, s);
	if (session_add_waiter(s, p) != 0)
		return 0;
	session_stop(s, "stopped by command");
	return 0;
}

int
session_wait_req(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__WaitSession *req = (const Mspti__WaitSession *)m;
	struct session *s;

	if ((s = session_lookup(p, req->session_id, 0)) == NULL)
		return 0;
	if (session_done(s))
		return session_send_info(p, s);
	return session_add_waiter(s, p);
}

int
session_list_req(struct peer *p, const ProtobufCMessage *m)
{
	Mspti__SessionsReply rep = MSPTI__SESSIONS_REPLY__INIT;
	Mspti__SessionInfo *infos = NULL, **ptrs = NULL;
	struct sess_info_bufs *bufs = NULL;
	struct session *s;
	size_t n = 0, i = 0;
	int rc;

	TAILQ_FOREACH(s, &p->d->sessions, entry)
		n++;
	if (n > 0) {
		infos = calloc(n, sizeof(*infos));
		ptrs = calloc(n, sizeof(*ptrs));
		bufs = calloc(n, sizeof(*bufs));
		if (infos == NULL || ptrs == NULL || bufs == NULL) {
			free(infos);
			free(ptrs);
			free(bufs);
			return peer_send_error(p, 1, "daemon out of memory");
		}
	}
	/* Everyone sees every session, as list shows every agent. */
	TAILQ_FOREACH(s, &p->d->sessions, entry) {
		session_info(s, &infos[i], &bufs[i]);
		ptrs[i] = &infos[i];
		i++;
	}
	rep.sessions = ptrs;
	rep.n_sessions = n;
	rc = peer_send(p, MSPTI__MSG_TYPE__MSG_SESSIONS_REP, &rep.base, -1);
	for (i = 0; i < n; i++)
		session_info_free(&bufs[i]);
	free(infos);
	free(ptrs);
	free(bufs);
	return rc;
}

static void
session_send_update(struct session *s)
{
	Mspti__UpdateCapture uc = MSPTI__UPDATE_CAPTURE__INIT;
	struct sess_agent *sa, *next;

	uc.session_id = s->id;
	uc.kinds = s->kinds;
	uc.domains_off = s->domains_off;
	uc.n_domains_off = s->ndomains_off;
	TAILQ_FOREACH_SAFE(sa, &s->agents, entry, next) {
		if (sa->state != SA_ACTIVE || sa->agent == NULL)
			continue;
		sa->pending = true;
		s->npending++;
		peer_send(sa->agent->peer, MSPTI__MSG_TYPE__MSG_UPDATE_CAPTURE,
		    &uc.base, -1);
	}
}

int
session_retarget_req(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__RetargetSession *req = (const Mspti__RetargetSession *)m;
	Mspti__StopCapture sc = MSPTI__STOP_CAPTURE__INIT;
	struct session *s;
	struct sess_acks *k;
	struct sess_agent *sa;
	uint32_t on = 0, off = 0;
	char bad[256], detail[512];
	bool changed;

	if ((s = session_lookup(p, req->session_id, 0)) == NULL)
		return 0;
	if (s->state != SESS_ACTIVE)
		return peer_send_error(p, 1, "session %llu is %s, not active",
		    (unsigned long long)s->id, sess_state_names[s->state]);
	if (s->reply_peer != NULL)
		return peer_send_error(p, 1, "session %llu is busy with another "
		    "request; try again", (unsigned long long)s->id);
	if (session_parse_kinds(req->kinds_on, req->n_kinds_on, &on, bad,
	    sizeof(bad)) != 0 || session_parse_kinds(req->kinds_off,
	    req->n_kinds_off, &off, bad, sizeof(bad)) != 0)
		return peer_send_error(p, 2, "retarget: %s", bad);
	if (req->n_add_pids > SESS_MAX_TARGETS ||
	    req->n_domains_off > SESS_MAX_DOMAINS)
		return peer_send_error(p, 2, "retarget: too many values");
	if ((k = calloc(1, sizeof(*k))) == NULL)
		return peer_send_error(p, 1, "daemon out of memory");
	changed = on != 0 || off != 0 || req->n_domains_on > 0 ||
	    req->n_domains_off > 0;
	for (unsigned i = 0; i < nitems(s->kind_on_ns); i++)
		if ((on & ~s->kinds) & (1u << i))
			s->kind_on_ns[i] = util_realtime_ns();
	s->kinds = (s->kinds | on) & ~off;
	if (session_domains_set(s, req->domains_on, req->n_domains_on,
	    req->domains_off, req->n_domains_off) != 0) {
		free(k);
		return peer_send_error(p, 1, "retarget: too many domains");
	}
	snprintf(detail, sizeof(detail), "kinds 0x%x, %zu domain(s) off, "
	    "+%zu -%zu pids", s->kinds, s->ndomains_off, req->n_add_pids,
	    req->n_remove_pids);
	session_event(s, SESSION_EV_RETARGET, 0, detail);
	log_info("session %llu retarget: %s", (unsigned long long)s->id,
	    detail);
	free(s->pending_acks);
	s->pending_acks = k;
	s->reply_peer = p;
	s->reply_type = MSPTI__MSG_TYPE__MSG_RETARGET_REP;
	s->npending = 0;
	/* Removed pids stop capturing; their records so far stay. */
	sc.session_id = s->id;
	for (size_t i = 0; i < req->n_remove_pids; i++) {
		bool found = false;

		TAILQ_FOREACH(sa, &s->agents, entry) {
			if ((uint32_t)sa->pid != req->remove_pids[i] ||
			    (sa->state != SA_ACTIVE && sa->state != SA_STARTING))
				continue;
			found = true;
			sa->state = SA_STOPPING;
			session_acks_add(k, req->remove_pids[i], 0, sa->agent,
			    "removed");
			if (sa->agent != NULL)
				peer_send(sa->agent->peer,
				    MSPTI__MSG_TYPE__MSG_STOP_CAPTURE, &sc.base,
				    -1);
			break;
		}
		if (!found)
			session_acks_add(k, req->remove_pids[i], 3, NULL,
			    "pid %u is not in session %llu",
			    req->remove_pids[i], (unsigned long long)s->id);
	}
	if (changed)
		session_send_update(s);
	if (req->n_add_pids > 0)
		session_add_pids(s, p, req->add_pids, req->n_add_pids, k);
	if (s->npending == 0)
		session_reply_pending(s);
	else {
		struct timeval tv = { SESS_ACK_TIMEOUT_MS / 1000,
		    (SESS_ACK_TIMEOUT_MS % 1000) * 1000 };

		evtimer_add(s->ack_tv, &tv);
	}
	return 0;
}

int
session_snapshot_req(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__SnapshotSession *req = (const Mspti__SnapshotSession *)m;
	struct session *s;
	struct sess_agent *sa;
	struct stat st;
	uint64_t n;
	int fd = peer_take_fd(p), rc;

	if ((s = session_lookup(p, req->session_id, 0)) == NULL)
		goto out;
	if (!s->ring_mode) {
		peer_send_error(p, 2, "session %llu is in stream mode; snapshot "
		    "needs --mode ring", (unsigned long long)s->id);
		goto out;
	}
	if (session_done(s)) {
		peer_send_error(p, 1, "session %llu is %s",
		    (unsigned long long)s->id, sess_state_names[s->state]);
		goto out;
	}
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		peer_send_error(p, 2, "snapshot: no regular output file came "
		    "with the request");
		goto out;
	}
	TAILQ_FOREACH(sa, &s->agents, entry)
		session_drain_agent(sa);
	if ((rc = session_write_flight(s, fd, &n)) != 0) {
		peer_send_error(p, 1, "snapshot: writing the trace: %s",
		    strerror(-rc));
		goto out;
	}
	log_info("session %llu: snapshot of %llu records",
	    (unsigned long long)s->id, (unsigned long long)n);
	session_send_info(p, s);
out:
	if (fd >= 0)
		close(fd);
	return 0;
}

/* Agent -> daemon: the answer to StartCapture, UpdateCapture, StopCapture. */
int
session_capture_ack(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__CaptureAck *ack = (const Mspti__CaptureAck *)m;
	struct session *s = session_find(p->d, ack->session_id);
	struct sess_agent *sa = NULL;
	int fd = peer_take_fd(p);

	if (s != NULL)
		TAILQ_FOREACH(sa, &s->agents, entry)
			if (sa->agent == p->agent)
				break;
	if (sa == NULL) {
		/* A late ack for a session that is gone. */
		if (fd >= 0)
			close(fd);
		return 0;
	}
	switch (ack->op) {
	case MSPTI__CAPTURE_OP__CAPTURE_START:
		if (sa->state != SA_STARTING && sa->state != SA_STOPPING)
			break;
		if (ack->code != 0 || fd < 0) {
			session_agent_finish(sa, ack->message && *ack->message ?
			    ack->message : "agent refused the capture");
		} else if (sa->state == SA_STARTING) {
			sa->state = SA_ACTIVE;
			sa->evfd = fd;
			fd = -1;
			sa->ev = event_new(p->d->base, sa->evfd,
			    EV_READ | EV_PERSIST, session_wake_cb, sa);
			if (sa->ev != NULL)
				event_add(sa->ev, NULL);
			ring_arm_wake(sa->ring, sa->wake_threshold);
			session_device_start(sa, p->agent);
			session_process_record(s, p->agent);
			session_event(s, SESSION_EV_AGENT_JOIN,
			    (uint32_t)sa->pid, "capturing");
		}
		if (sa->pending && !session_done(s)) {
			sa->pending = false;
			session_pending_done(s);
		}
		break;
	case MSPTI__CAPTURE_OP__CAPTURE_UPDATE:
		if (sa->pending) {
			sa->pending = false;
			session_pending_done(s);
		}
		break;
	case MSPTI__CAPTURE_OP__CAPTURE_STOP:
		if (sa->state == SA_STOPPING || sa->state == SA_ACTIVE)
			session_agent_finish(sa, NULL);
		break;
	default:
		break;
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/* A new agent registered: job selectors with room take it (elastic).
 * Returns -1 when the agent's peer was dropped meanwhile. */
int
session_agent_registered(struct daemon *d, struct agent *a)
{
	struct session *s;
	const char *why;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (s->state != SESS_ACTIVE || !s->elastic ||
		    !session_selects(s, a) ||
		    !ctl_may_act_on(&s->owner, a->cred.uid))
			continue;
		pid_t pid = a->cred.pid;
		int rc;

		if ((rc = session_attach(s, a, &why)) != 0) {
			log_warnx("session %llu: pid %ld cannot join: %s",
			    (unsigned long long)s->id, (long)pid, why);
			/* -2: a and its peer are gone. */
			return rc == -2 ? -1 : 0;
		}
		/* Its ack is not awaited by anyone. */
		TAILQ_LAST(&s->agents, sess_agent_list)->pending = false;
		s->npending--;
		log_info("session %llu: pid %ld joins",
		    (unsigned long long)s->id, (long)a->cred.pid);
		return 0;
	}
	return 0;
}

/* The agent's connection closed (the process exited or was killed): its
 * ring stays mapped here, so every record it wrote is still drained. */
void
session_agent_gone(struct daemon *d, struct agent *a)
{
	struct session *s, *next;
	struct sess_agent *sa;
	bool pending;

	TAILQ_FOREACH_SAFE(s, &d->sessions, entry, next) {
		TAILQ_FOREACH(sa, &s->agents, entry) {
			if (sa->agent != a)
				continue;
			sa->agent = NULL;
			pending = sa->pending;
			sa->pending = false;
			session_agent_finish(sa, "agent exited");
			if (pending && !session_done(s))
				session_pending_done(s);
			break;
		}
	}
}

/* A ctl connection closed: forget it wherever it waits. */
void
session_peer_gone(struct daemon *d, struct peer *p)
{
	struct session *s;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (s->reply_peer == p)
			s->reply_peer = NULL;
		for (size_t i = 0; i < s->nwaiters; i++)
			if (s->waiters[i] == p)
				s->waiters[i--] = s->waiters[--s->nwaiters];
	}
}

/* Daemon shutdown: finalize every live session so their files are whole. */
void
session_shutdown(struct daemon *d)
{
	struct session *s;

	TAILQ_FOREACH(s, &d->sessions, entry) {
		if (session_done(s))
			continue;
		if (s->stop_reason == NULL)
			s->stop_reason = "daemon shutdown";
		s->state = SESS_STOPPING;
		session_finalize(s);
	}
	while ((s = TAILQ_FIRST(&d->sessions)) != NULL) {
		TAILQ_REMOVE(&d->sessions, s, entry);
		free(s->waiters);
		s->waiters = NULL;
		session_free(s);
	}
}

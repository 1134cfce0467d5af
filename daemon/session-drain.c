/*
 * Draining the agents' rings.  Records from a ring are untrusted:
 * ring_drain validates each, and string ids are resolved only through the
 * agent's own STRING_DEF records.  A drained record goes to the flight
 * recorder (ring mode) or, remapped to trace string ids, to the trace.
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

struct sess_drain_ctx {
	struct sess_agent	*sa;
	bool			 stop;
	uint64_t		 now;	/* realtime ns at the drain's start */
};

/* Rewrites the producer string ids of rec (a private copy) to trace ids. */
bool
session_drain_remap(struct session *s, struct sess_agent *sa, struct rec_hdr *h)
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
				tid = session_sink_intern(s, sa->strs[id]);
				sa->strmap[id] = tid;
			}
		}
		memcpy((uint8_t *)h + offs[i], &tid, sizeof(tid));
	}
	return true;
}

/*
 * Writes one record of sa (agent string namespace) to the session: the
 * flight recorder in ring mode, else remapped into the trace.  Returns
 * true when the size limit was reached.
 */
static bool
session_drain_put(struct sess_agent *sa, struct rec_hdr *r, bool valid)
{
	struct session *s = sa->s;

	sa->records++;
	s->records++;
	if (s->ring_mode) {
		session_flight_add(sa, r);
		return false;
	}
	session_drain_remap(s, sa, r);
	if (valid)
		session_sink_emit_valid(s, r);
	else
		session_sink_emit(s, r);
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

/* session_drain_put for a record msptid made: its string ids may be
 * rewritten in place. */
bool
session_drain_out(struct sess_agent *sa, struct rec_hdr *h)
{
	return session_drain_put(sa, h, false);
}

_Static_assert(SESS_ALLSTR - SESS_STRINGS < (1u << SESS_DIDX_BITS) &&
    SESS_DHASH > SESS_ALLSTR - SESS_STRINGS &&
    (SESS_DHASH & (SESS_DHASH - 1)) == 0, "SESS_DHASH: too small for the "
    "daemon strings, or not a power of two");

/*
 * Interns str in sa's namespace above the agent's ids; 0 when full.  A
 * device record names its kernel (and type, communicator, algorithm) by
 * string, so this runs two or three times a record: by hash, open
 * addressing in SESS_DHASH slots for the at most SESS_STRINGS strings,
 * each slot the string's index and the rest of its hash, so that only
 * the string it names is compared.  (A scan of them made msptid's CPU per
 * kernel record grow with the distinct kernel names: 16 times as much,
 * and records lost at the device channel, with 4,000 names; hashing a
 * byte at a time was a fifth of it with one name.)
 */
uint32_t
session_drain_string(struct sess_agent *sa, const char *str)
{
	uint32_t h, tag, v;
	size_t slot, n;

	if (str == NULL || *str == '\0')
		return 0;
	if (sa->dhash == NULL &&
	    (sa->dhash = calloc(SESS_DHASH, sizeof(*sa->dhash))) == NULL)
		return 0;
	n = strlen(str);
	h = session_str_hash(str, n);
	tag = h >> SESS_DIDX_BITS;
	for (slot = h & (SESS_DHASH - 1); (v = sa->dhash[slot]) != 0;
	    slot = (slot + 1) & (SESS_DHASH - 1)) {
		uint32_t i = v & ((1u << SESS_DIDX_BITS) - 1);

		if (v >> SESS_DIDX_BITS == tag &&
		    strcmp(sa->strs[SESS_STRINGS + i], str) == 0)
			return SESS_STRINGS + i;
	}
	if (sa->ndstr >= SESS_ALLSTR - SESS_STRINGS ||
	    (sa->strs[SESS_STRINGS + sa->ndstr + 1] = strdup(str)) == NULL)
		return 0;
	sa->ndstr++;
	sa->dhash[slot] = tag << SESS_DIDX_BITS | sa->ndstr;
	return SESS_STRINGS + sa->ndstr;
}

/* session_drain_string for one of msptid's string constants (kernel
 * types, algorithms), its id kept by the constant's address. */
uint32_t
session_drain_const(struct sess_agent *sa, const char *lit)
{
	size_t i = (size_t)(((uintptr_t)lit * 0x9e3779b97f4a7c15ull) >> 61);
	uint32_t id;

	if (sa->cstr[i] == lit)
		return sa->cid[i];
	if ((id = session_drain_string(sa, lit)) != 0) {
		sa->cstr[i] = lit;
		sa->cid[i] = id;
	}
	return id;
}

static int
session_drain_one_cb(const struct rec_hdr *h, void *arg)
{
	struct sess_drain_ctx *ctx = arg;
	struct sess_agent *sa = ctx->sa;
	struct session *s = sa->s;

	if (h->type == REC_STRING_DEF) {
		const struct rec_string_def *sd = (const void *)h;

		if (sd->id == 0 || sd->id > SESS_STRINGS) {
			sa->rejects++;
			return 0;
		}
		/* Every segment defines the strings it uses (ring.h): the
		 * same definition again keeps its trace id. */
		if (sa->strs[sd->id] != NULL &&
		    strlen(sa->strs[sd->id]) == sd->len &&
		    memcmp(sa->strs[sd->id], sd->bytes, sd->len) == 0)
			return 0;
		free(sa->strs[sd->id]);
		sa->strs[sd->id] = strndup(sd->bytes, sd->len);
		sa->strmap[sd->id] = 0;
		return 0;
	}
	/* Only activity records and the agent's clock may come from it. */
	if ((h->type < REC_MARKER || h->type > REC_COMMUNICATION) &&
	    h->type != REC_HOST_CLOCK) {
		sa->rejects++;
		return 0;
	}
	/* Every record is the ring owner's (SO_PEERCRED), whatever pid it
	 * names: a device marker names none, anything else is rewritten. */
	if (record_pid(h) != (uint32_t)sa->pid && !(h->type == REC_MARKER &&
	    ((const struct rec_marker *)h)->source_kind == 1 &&
	    record_pid(h) == REC_NONE)) {
		if (sa->pid_rewrites++ == 0)
			log_warnx("session %llu: pid %ld writes records naming "
			    "pid %lu; they are attributed to pid %ld",
			    (unsigned long long)s->id, (long)sa->pid,
			    (unsigned long)record_pid(h), (long)sa->pid);
		(void)record_set_pid((struct rec_hdr *)h, (uint32_t)sa->pid);
	}
	/* How the agent's timestamps were read: kept whatever the window. */
	if (h->type == REC_HOST_CLOCK) {
		if (session_drain_put(sa, (struct rec_hdr *)h, true))
			ctx->stop = true;
		return s->error != NULL;
	}
	/* With --steps, each agent's capture ends at its window's end
	 * (session-steps.c); a thread racing the close is not in it. */
	if (session_steps_skip(sa))
		return 0;
	if (h->type == REC_MARKER) {
		const struct rec_marker *m = (const void *)h;

		if (session_steps_marker(sa, m))
			return 0;
		if (s->stop_reason != NULL)
			ctx->stop = true;
		/* A synchronize step range (agent/session.c) has no device
		 * task: its slot would be a pending MSTX marker's. */
		if (m->source_kind == 0 && sa->marks != NULL &&
		    m->name_id != 0 && m->id < SESS_SYNC_MARK_ID) {
			struct sess_mark *k = &sa->marks[m->id % SESS_MARKS];

			k->id = m->id;
			k->name_id = m->name_id;
			k->domain_id = m->domain_id;
		}
	}
	/* A host launch waits in the join for its device task. */
	if (session_dev_is_launch(h) && sa->join != NULL) {
		session_dev_add_launch(sa, h, ctx->now);
		return 0;
	}
	/* h is ring_drain's private, validated copy: remapped in place
	 * and written without a second validation. */
	if (session_drain_put(sa, (struct rec_hdr *)h, true))
		ctx->stop = true;
	return s->error != NULL;
}

/*
 * The producer's own count of records it dropped (ring full) is
 * untrusted: it only ever grows, and never past what the agent could
 * have tried to write since it joined (one record per SESS_MIN_RECORD_NS).
 * A claim beyond that is a forgery: the counter is frozen where it was
 * and the forgery counts as one daemon reject.
 */
static void
session_drain_drops(struct sess_agent *sa, uint64_t drops)
{
	uint64_t cap = (util_monotonic_ns() - sa->joined_mono) /
	    SESS_MIN_RECORD_NS + SESS_DROPS_SLACK;

	if (sa->drops_forged || drops <= sa->ring_drops)
		return;
	if (drops > cap) {
		sa->drops_forged = true;
		sa->rejects++;
		log_warnx("session %llu: pid %ld claims %llu dropped records, "
		    "more than it could have written; its count stays %llu",
		    (unsigned long long)sa->s->id, (long)sa->pid,
		    (unsigned long long)drops,
		    (unsigned long long)sa->ring_drops);
		return;
	}
	sa->ring_drops = drops;
}

/* Drains sa's ring completely (bounded) and updates loss counters. */
void
session_drain_agent(struct sess_agent *sa)
{
	struct session *s = sa->s;
	struct sess_drain_ctx ctx = { sa, false, util_realtime_ns() };
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
	session_drain_drops(sa, st.drops);
	if (n == -EBADMSG && !sa->corrupt) {
		sa->corrupt = true;
		/* What it still held is lost: a daemon reject. */
		sa->rejects++;
		log_warnx("session %llu: ring of pid %ld is corrupt, dropping "
		    "its capture (%llu bytes unread)", (unsigned long long)s->id,
		    (long)sa->pid, (unsigned long long)st.pending);
	}
	if ((ctx.stop || (s->steps_max > 0 && s->stop_reason != NULL)) &&
	    s->state == SESS_ACTIVE)
		session_stop(s, s->stop_reason ? s->stop_reason : "limit");
}

/* sa's own losses (the device-channel and disk stages are per device and
 * per file: the session's). */
void
session_drain_agent_losses(const struct sess_agent *sa,
    uint64_t losses[LOSS_STAGE_MAX])
{
	memset(losses, 0, sizeof(uint64_t) * LOSS_STAGE_MAX);
	losses[LOSS_AGENT_RING] = sa->ring_drops + sa->fork_lost;
	losses[LOSS_DAEMON_REJECT] = sa->ring_rejects + sa->rejects;
	losses[LOSS_DEVICE_UNMATCHED] = session_dev_unmatched(sa);
}

void
session_drain_losses(const struct session *s, uint64_t losses[LOSS_STAGE_MAX])
{
	const struct sess_agent *sa;

	memset(losses, 0, sizeof(uint64_t) * LOSS_STAGE_MAX);
	TAILQ_FOREACH(sa, &s->agents, entry) {
		losses[LOSS_AGENT_RING] += sa->ring_drops + sa->fork_lost;
		losses[LOSS_DAEMON_REJECT] += sa->ring_rejects + sa->rejects;
		losses[LOSS_DEVICE_UNMATCHED] += session_dev_unmatched(sa);
	}
	losses[LOSS_DAEMON_REJECT] += s->old_rejects;
	losses[LOSS_AGENT_RING] += s->old_drops;
	losses[LOSS_DEVICE_CHANNEL] = session_dev_lost(s);
	if (s->w != NULL) {
		struct trace_writer_stats st;

		trace_writer_get_stats(s->w, &st);
		losses[LOSS_DISK] = st.lost;
	} else
		losses[LOSS_DISK] = s->disk_lost;
}

void
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
	if (s->state == SESS_ACTIVE) {
		session_dev_poll(s->d);
		session_dev_first_metrics(s);
	}
	if (s->w != NULL && s->state == SESS_ACTIVE)
		(void)session_sink_flush_tick(s);
}

void
session_drain_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sess_agent *sa = arg;
	uint64_t v;

	while (read(fd, &v, sizeof(v)) > 0)
		;
	session_drain_agent(sa);
	if (sa->corrupt && sa->state == SA_ACTIVE) {
		/* Frees sa->ev, this callback's event: touch nothing after. */
		session_agent_finish(sa, "ring corrupt");
		return;
	}
	if (sa->ring != NULL)
		ring_arm_wake(sa->ring, sa->wake_threshold);
}

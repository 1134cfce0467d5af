/*
 * libmspti.so: the msPTI activity/callback API, MSTX and the ACL/HCCL
 * interposers (see ../shared/docs/MSPTI.md for the contract).
 *
 * Data path
 * ---------
 * Every record, whatever produced it, goes through activity_emit(), the
 * one emit point (MSTX's host markers through activity_emit_host_marker,
 * the same two steps without a record built for the session, which gets
 * their fields by its marker sink).  It reads the kind masks once and
 *   - appends the record to the calling thread's buffer when the kind is
 *     enabled in the in-process API mask (msptiActivityEnable), and
 *   - hands it to api_session_sink when the kind is enabled in the daemon
 *     session mask and the sink is set.
 * The two masks live in one 64-bit word (api_kind_masks: bits 0..31 the
 * API mask, bits 32..63 the session mask), so "is kind K wanted at all"
 * is one relaxed load (api_kind_wanted).  The daemon-session code (a later
 * issue) sets the session half with api_session_set_kinds() and installs
 * its sink with api_session_set_sink(); the sink is NULL until then.  The
 * sink runs on the producing thread and must not block; the record it gets
 * is only valid during the call.  Strings in records are interned
 * (api_intern) and stay valid for the life of the process.
 *
 * Buffers (activity.c)
 * --------------------
 * One struct abuf_thread per thread that ever produced a record, kept in
 * a push-only list and reused after the thread exits.  Its atomic 'cur'
 * holds the thread's current user buffer, NULL (none) or ABUF_BUSY (the
 * owner is copying a record).  The owner swaps in ABUF_BUSY, copies, and
 * stores the buffer back: one atomic exchange and one release store per
 * record, no lock, no allocation, no syscall.  A flusher (FlushAll, the
 * FlushPeriod worker) takes a buffer with compare-and-swap when it is not
 * ABUF_BUSY; the owner then simply asks for a new one.  User callbacks
 * (request, complete) never run while ABUF_BUSY is held.  Completed
 * buffers are delivered under one recursive mutex so the complete callback
 * never runs concurrently with itself.
 *
 * Device records (devtime.c)
 * --------------------------
 * Interposers that queue device work record a "pending" entry (device,
 * stream id, task id → correlation id, call details and the kinds wanted
 * at the call) in a lock-free MPSC queue that spills into a locked
 * overflow array when full.  One reader thread drains it into a private
 * hash map that grows with the launches outstanding (bounded by memory,
 * never by a fixed size), reads the simulator's per-device profiling
 * channel (through
 * npusim_channel_* found with dlsym, so no hard dependency), joins by
 * (device, stream, task), converts device times with a clock model
 * fitted on (host CLOCK_REALTIME, device) sample pairs, and emits
 * KERNEL/MEMCPY/MEMSET/HCCL/COMMUNICATION and device MARKER records, for
 * the kinds wanted at the call even if disabled since.  The thread sleeps
 * on a condition variable while no device kind is wanted and nothing is
 * outstanding, polls every DEVTIME_POLL_MS otherwise, and FlushAll wakes
 * it for a synchronous drain first.  A record read before its call has
 * queued the pending entry waits while the submitting thread is inside
 * that call (devtime_call_begin/end, from icall_enter/icall_exit), so it
 * is joined exactly once whatever thread flushes.  Times are converted
 * when read, in channel order, with lib/streamorder's rule (a stream's
 * tasks never overlap), as msptid does.  Records that cannot be kept are
 * counted per kind (activity_drop, msptiActivityGetNumDroppedRecords).
 *
 * Each interposed call queues at most one device task, so a pending entry
 * (and a daemon session's launch record) keys exactly one task: the
 * simulator runs all items of an HcclBatchSendRecv as one COMM task, whose
 * record carries the items' total count and bytes (doc/npusim.md).  The
 * COMMUNICATION and HCCL record layouts have no peer rank field.
 *
 * MEMORY records: aclrtMalloc/aclrtFree give memory kind DEVICE;
 * aclrtMallocHost/aclrtFreeHost give kind UNKNOWN (msPTI defines no host
 * kind) with deviceId MSPTI_INVALID_DEVICE_ID.
 */
#ifndef MSPTI_AGENT_API_H
#define MSPTI_AGENT_API_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mspti/mspti.h"
/* The agent defines the MSTX functions: no inline wrappers here. */
#define MSTX_NO_INLINE 1
#include "mstx/ms_tools_ext.h"

#define API_TLS		__thread __attribute__((tls_model("initial-exec")))
/* The process-wide words every interposed call reads and few write (kind
 * and callback masks, the start gate, the session's fork page, ...): in
 * one section, which the linker lays out in one piece, so that a call
 * made with cold caches misses on one line for all of them, not one a
 * word (they are defined in the files that own them; gate.c's comes
 * first and aligns the section to a line). */
#define API_HOT		__attribute__((section("mspti_hot")))
#define API_LIKELY(x)	__builtin_expect(!!(x), 1)
#define API_UNLIKELY(x)	__builtin_expect(!!(x), 0)

/* Largest record (msptiActivityCommunication). */
#define API_RECORD_MAX	72

/* activity.c: kind masks, emit point, buffers, flush, external correlation. */
extern _Atomic uint64_t api_kind_masks;
/* For the header's inline checks (ms_tools_ext.h): API_MSTX_ALL while every
 * MSTX call must come in (MARKER wanted, or run's start gate closed),
 * API_MSTX_STEPS while range starts must (steps counted for msptid), those
 * whose name begins with the step name's first byte (bits 8-15); kept in
 * step with api_kind_masks by every change of it (api_kinds_changed). */
extern MSTX_API _Atomic uint32_t mstxEnabledState;
#define API_MSTX_ALL	0x1u
#define API_MSTX_STEPS	0x2u
#define API_MSTX_CHAR_SHIFT	8
#define API_MASK_SESSION_SHIFT	32
/* The API kinds of one layer (icall_enter). */
#define API_LAYER_KINDS	((1u << MSPTI_ACTIVITY_KIND_ACL_API) | \
	(1u << MSPTI_ACTIVITY_KIND_NODE_API) | \
	(1u << MSPTI_ACTIVITY_KIND_RUNTIME_API))
/* Kinds fed by the device channel. */
#define API_DEVICE_KINDS	((1u << MSPTI_ACTIVITY_KIND_KERNEL) | \
	(1u << MSPTI_ACTIVITY_KIND_MEMCPY) | (1u << MSPTI_ACTIVITY_KIND_MEMSET) | \
	(1u << MSPTI_ACTIVITY_KIND_HCCL) | \
	(1u << MSPTI_ACTIVITY_KIND_COMMUNICATION) | \
	(1u << MSPTI_ACTIVITY_KIND_MARKER))

/* The in-process API half alone (devtime.c serves only that consumer). */
static inline uint32_t
api_kinds_api(void)
{
	return (uint32_t)atomic_load_explicit(&api_kind_masks,
	    memory_order_relaxed);
}

/* The daemon-session half alone. */
static inline uint32_t
api_kinds_session(void)
{
	return (uint32_t)(atomic_load_explicit(&api_kind_masks,
	    memory_order_relaxed) >> API_MASK_SESSION_SHIFT);
}

/* Union of both masks, from one load. */
static inline uint32_t
api_kinds_wanted(void)
{
	uint64_t m = atomic_load_explicit(&api_kind_masks, memory_order_relaxed);

	return (uint32_t)m | (uint32_t)(m >> API_MASK_SESSION_SHIFT);
}

static inline bool
api_kind_wanted(unsigned kind)
{
	return (api_kinds_wanted() >> kind) & 1;
}

/* The daemon-session sink: see the comment at the top. */
typedef void (*api_sink_fn)(const msptiActivity *rec, size_t len, void *arg);
/* Its way in for a host MARKER (activity_emit_host_marker): the fields
 * as they are, no msptiActivityMarker built. */
typedef void (*api_marker_sink_fn)(void *arg, msptiActivityFlag flag,
    uint64_t id, uint64_t ts, const char *name, const char *domain);
void		api_session_set_sink(api_sink_fn fn, api_marker_sink_fn mfn,
		    void *arg);
void		api_session_set_kinds(uint32_t mask);
/* Exported, not msPTI: the session half of the masks (bit
 * MSPTI_ACTIVITY_KIND_COUNT: framework ops), for the Python package. */
MSPTI_API uint32_t msptiExtSessionKinds(void);

/* The one emit point; rec is sizeof its struct (len), at most
 * API_RECORD_MAX bytes. */
void		activity_emit(const void *rec, size_t len);
/* The same, to the in-process API's buffers only. */
void		activity_emit_api(const void *rec, size_t len);
/* The same whatever the masks say now (work queued while enabled). */
void		activity_emit_api_always(const void *rec, size_t len);
/* To the daemon session's sink only, when it wants the kind. */
void		activity_emit_session(const void *rec, size_t len);
size_t		activity_record_size(uint32_t kind);
/* activity_emit_host_marker's record for the in-process API. */
void		activity_api_host_marker(msptiActivityFlag flag, uint64_t id,
		    uint64_t ts, const char *name, const char *domain);
/* The sink's arguments (api_session_set_sink; activity.c). */
extern _Atomic(api_marker_sink_fn) api_marker_sink;
extern void *_Atomic api_sink_arg;

/* A host MARKER of this process and thread: what activity_emit does
 * with activity_host_marker's record, without building one for the
 * session (inline: MSTX's hot path). */
static inline void
activity_emit_host_marker(msptiActivityFlag flag, uint64_t id, uint64_t ts,
    const char *name, const char *domain)
{
	uint64_t m = atomic_load_explicit(&api_kind_masks, memory_order_relaxed);
	api_marker_sink_fn sink;

	if ((m >> MSPTI_ACTIVITY_KIND_MARKER) & 1)
		activity_api_host_marker(flag, id, ts, name, domain);
	if ((m >> (API_MASK_SESSION_SHIFT + MSPTI_ACTIVITY_KIND_MARKER)) & 1) {
		sink = atomic_load_explicit(&api_marker_sink,
		    memory_order_acquire);
		if (sink != NULL)
			sink(atomic_load_explicit(&api_sink_arg,
			    memory_order_relaxed), flag, id, ts, name, domain);
	}
}
/* m as a host MARKER record of process pid, thread the caller. */
void		activity_host_marker(msptiActivityMarker *m,
		    msptiActivityFlag flag, uint64_t id, uint64_t ts,
		    uint32_t pid, const char *name, const char *domain);
/* Records lost, all kinds; activity_drop counts n lost of kind. */
uint64_t	activity_dropped(void);
void		activity_drop(uint32_t kind, uint64_t n);
/* Next process-wide correlation id (from 1). */
uint64_t	activity_next_correlation(void);
/* Emits one EXTERNAL_CORRELATION record per non-empty stack of the
 * calling thread for correlation id corr. */
void		activity_emit_external(uint64_t corr);
uint32_t	api_tid(void);
uint32_t	api_pid(void);
void		api_after_fork_child(void);
void		api_mstx_count_steps(bool on);
/* Run's start gate closed or opened (gate.c): while closed, every MSTX
 * call comes in and waits for the config. */
void		api_mstx_gate(bool closed);
/* The first byte of the step range's name (session-step.c, when it
 * changes). */
void		api_mstx_step_char(unsigned char c);

/* hostclock.c: the agent's clock (CLOCK_REALTIME ns, from the TSC where
 * it is invariant).  Two mapping slots: a refit writes the one not in use
 * and then publishes it by bumping seq (slot seq & 1; 0 while the TSC is
 * not in use), so a reader always has a whole mapping.  A mapping holds
 * from base_tsc for span ticks (then a refit is due) and is capped at
 * span + span / 8, where the next one starts with the value it has
 * there; ticks before base_tsc read the previous mapping (prev_*), so the
 * clock is continuous at the switch however late a reader sees it. */
#if defined(__x86_64__)
#define API_HAVE_TSC	1
#else
#define API_HAVE_TSC	0
#endif
struct rec_host_clock;
struct hostclock_map {
	_Atomic uint64_t	base_tsc, base_ns, mult, span;
	_Atomic uint64_t	prev_tsc, prev_ns, prev_mult;
};
struct hostclock {
	_Atomic uint32_t	seq;
	_Atomic uint32_t	gen;	/* count of mappings made */
	struct hostclock_map	map[2];
} __attribute__((aligned(64)));
extern struct hostclock hostclock;
void		hostclock_init(void);
uint64_t	hostclock_slow(void);
uint64_t	hostclock_refit(uint64_t capped);
bool		hostclock_tsc(void);
/* The current mapping as a record (pid 0); returns its gen. */
uint32_t	hostclock_record(struct rec_host_clock *out);

#define HOSTCLOCK_END(span)	((span) + ((span) >> 3))

/* ns of mapping mp at tick t (d = t - base_tsc), capped at its end. */
static inline uint64_t
hostclock_map_ns(const struct hostclock_map *mp, uint64_t d, uint64_t bn,
    uint64_t m, uint64_t span)
{
	if (API_UNLIKELY((int64_t)d < 0)) {
		/* Before the switch: the previous mapping (it ends here). */
		uint64_t pt = atomic_load_explicit(&mp->prev_tsc,
		    memory_order_relaxed), pn = atomic_load_explicit(
		    &mp->prev_ns, memory_order_relaxed), pm =
		    atomic_load_explicit(&mp->prev_mult, memory_order_relaxed),
		    dp = d + (atomic_load_explicit(&mp->base_tsc,
		    memory_order_relaxed) - pt), v;

		if ((int64_t)dp < 0)
			return pn;
		v = pn + (uint64_t)(((unsigned __int128)dp * pm) >> 32);
		return v < bn ? v : bn;
	}
	if (d > HOSTCLOCK_END(span))
		d = HOSTCLOCK_END(span);
	return bn + (uint64_t)(((unsigned __int128)d * m) >> 32);
}

/* 0 and the time in *ns; 1: past the mapping's period, a refit is due
 * (*ns still valid: capped); -1: not on the TSC now, or the mapping moved
 * under the read (try again). */
static inline int
hostclock_read(uint64_t *ns)
{
#if API_HAVE_TSC
	uint32_t s = atomic_load_explicit(&hostclock.seq, memory_order_acquire);
	const struct hostclock_map *mp = &hostclock.map[s & 1];
	uint64_t t, bt, bn, m, span, d, v;

	if (API_UNLIKELY(s == 0))
		return -1;
	/* Plain RDTSC: it may run a few tens of cycles ahead of the code
	 * before it.  RDTSCP or LFENCE+RDTSC (the vDSO's ordered read) cost
	 * here about what all of clock_gettime does (doc/trace-format.md). */
	t = __builtin_ia32_rdtsc();
	bt = atomic_load_explicit(&mp->base_tsc, memory_order_relaxed);
	bn = atomic_load_explicit(&mp->base_ns, memory_order_relaxed);
	m = atomic_load_explicit(&mp->mult, memory_order_relaxed);
	span = atomic_load_explicit(&mp->span, memory_order_relaxed);
	d = t - bt;
	v = API_LIKELY(d <= span) ? bn + (uint64_t)(((unsigned __int128)d *
	    m) >> 32) : hostclock_map_ns(mp, d, bn, m, span);
	atomic_thread_fence(memory_order_acquire);
	if (API_UNLIKELY(atomic_load_explicit(&hostclock.seq,
	    memory_order_relaxed) != s))
		return -1;
	*ns = v;
	return API_LIKELY(d <= span) || (int64_t)d < 0 ? 0 : 1;
#else
	(void)ns;
	return -1;
#endif
}

/* CLOCK_REALTIME ns, the clock of every record. */
static inline uint64_t
api_now(void)
{
	uint64_t ns;
	int rc = hostclock_read(&ns);

	if (API_LIKELY(rc == 0))
		return ns;
	return rc > 0 ? hostclock_refit(ns) : hostclock_slow();
}

/* api-intern.c: strings that live for the process. NULL → NULL. */
const char	*api_intern(const char *s);
const char	*api_intern_n(const char *s, size_t maxlen);

/* api-init.c: interposition checks and lazy symbol lookup. */
/* Whether dlsym(RTLD_DEFAULT, name) resolves into libmspti itself. */
bool		api_interposed(const char *name);
/* dlsym(RTLD_NEXT, name), cached by the caller in *slot. */
void		*api_real(_Atomic(void *) *slot, const char *name);
/* dlsym(RTLD_DEFAULT, name) for simulator-only helpers, NULL if absent. */
void		*api_optional(_Atomic(void *) *slot, const char *name);
/* A runtime function the agent itself calls (rtGetTaskIdAndStreamID...):
 * the runtime's, never our interposer, so it makes no record. */
void		*api_internal(_Atomic(void *) *slot, const char *name);
/* Start a helper thread with every signal blocked. */
int		api_thread_start(void *(*fn)(void *), void *arg);

/* callback.c */
extern _Atomic uint64_t callback_masks[MSPTI_CB_DOMAIN_SIZE];

static inline bool
callback_wanted(msptiCallbackDomain d, msptiCallbackId cbid)
{
	return (atomic_load_explicit(&callback_masks[d],
	    memory_order_relaxed) >> cbid) & 1;
}
void		callback_invoke(msptiCallbackDomain d, msptiCallbackId cbid,
		    const msptiCallbackData *data);

/*
 * intercept-common.c: what every interposer does around the real call.
 *
 * API records (all msptiActivityApi): every interposed call the
 * application makes gives one API record, and one more of the kind of its
 * layer:
 *   ACL_API      the ACL entry points (aclrt*: intercept-acl.c);
 *   NODE_API     the HCCL calls (Hccl*: intercept-hccl.c), the
 *                communication "nodes" of a graph;
 *   RUNTIME_API  the runtime-level calls (rt*: intercept-rt.c).
 * The agent's own runtime calls (rtGetTaskIdAndStreamID for the launch
 * join, rtProfilerTraceEx for device markers) bypass the interposers
 * (api_internal) and give none.  aclInit/aclFinalize are not interposed
 * (no callback id either), so they give no record.  A daemon session
 * asked for "api" (all four kinds) keeps only the API record of a call.
 */
struct icall {
	uint32_t		 wanted;	/* kinds wanted at ENTER */
	bool			 cb;		/* callbacks at ENTER/EXIT */
	msptiCallbackDomain	 domain;
	msptiCallbackId		 cbid;
	uint32_t		 api_kind_extra; /* ACL_API, NODE_API or
						  * RUNTIME_API: see above */
	const char		*name;
	const void		*params;
	const char		*symbol;
	uint64_t		 corr;
	uint64_t		 start;
	uint64_t		 end;		/* set by icall_done */
	uint64_t		 cbslot;	/* correlationData */
	bool			 devcall;	/* devtime_call_begin done */
	uint64_t		 outer_corr;	/* icall_open_corr before it */
};
/* The correlation id of the innermost interposed call open on this
 * thread (0: none): a daemon session writes that call's work records
 * with its API record (session.c). */
extern API_TLS uint64_t icall_open_corr;
/* True when anything (a kind, a callback) wants this call. */
bool		icall_enter(struct icall *c, msptiCallbackDomain d,
		    msptiCallbackId cbid, const char *name, const void *params,
		    const char *symbol);
/* Takes the end time right after the real call. */
static inline void
icall_done(struct icall *c)
{
	c->end = api_now();
}
/* EXIT callback and the API/external records. */
void		icall_exit(struct icall *c, const void *ret);
/*
 * The prologue every interposer shares.  It finds the real fn (returning
 * errret when the runtime lacks it), fills a struct fn_params from the
 * arguments, and forwards straight to real call when nothing wants the
 * call: that fast path must stay a tail call.  Otherwise the real call runs
 * between icall_enter and icall_done, and the interposer goes on with c and
 * ret in scope, adds its own records and ends with icall_exit(&c, &ret).
 */
#define ICALL_BEGIN(fn, errret, domain, cbid, symbol, call, ...)	\
	static _Atomic(void *) real_slot;				\
	__typeof__(&fn) real = (__typeof__(&fn))api_real(&real_slot, #fn); \
	struct fn##_params p = { __VA_ARGS__ };				\
	struct icall c;							\
	__typeof__(real call) ret;					\
									\
	if (API_UNLIKELY(real == NULL))					\
		return errret;						\
	if (API_LIKELY(!icall_enter(&c, domain, cbid, #fn, &p, symbol)))	\
		return real call;					\
	ret = real call;						\
	icall_done(&c)
/* Device of a stream (NULL: the thread's current device). */
uint32_t	icall_stream_device(void *stream);
uint32_t	icall_current_device(void);
void		icall_set_current_device(int32_t dev);
struct pending;
/* Starts the pending device join of the call c: a zeroed p of kind, on
 * stream (its device found by devtime_submit), with c's correlation id
 * and host times. */
void		icall_pending(struct pending *p, const struct icall *c,
		    uint32_t kind, void *stream);
/* The msPTI copy kind of an aclrtMemcpyKind. */
msptiActivityMemcpyKind icall_memcpy_kind(uint32_t k);

/* devtime.c: pending launches and the channel reader thread. */
#define PENDING_DEV_UNSET	0xffffffffu	/* devtime_submit sets device */
struct pending {
	uint32_t	 device;		/* PENDING_DEV_UNSET until submitted */
	uint32_t	 stream;
	uint32_t	 task;
	uint32_t	 kind;		/* MSPTI_ACTIVITY_KIND_* it stands for */
	uint32_t	 kinds;		/* in-process kinds wanted at the call
					 * (set by devtime_submit) */
	uint64_t	 corr;		/* MARKER: the marker id */
	const char	*name;		/* interned */
	const char	*comm_name;	/* HCCL: interned */
	uint64_t	 bytes;
	uint64_t	 count;
	uint32_t	 value;		/* MEMSET */
	uint32_t	 copy_kind;	/* MEMCPY: msptiActivityMemcpyKind */
	uint32_t	 data_type;	/* HCCL */
	uint8_t		 is_async;
	uint8_t		 in_call;	/* its call is marked for the
					 * in-process join (icall_enter) */
	uint64_t	 start;		/* the launch call, host ns */
	uint64_t	 end;
	void		*handle;	/* the call's stream (NULL: default) */
};
/* Records the ids of the calling thread's last submitted task, writes
 * the launch into a daemon session's ring (session_launch) when the
 * session wants the kind, and queues p for the in-process join when the
 * msPTI API wants it.  Returns the consumers no device record will come
 * to (the runtime cannot tell the task, no channel, the ring refused it):
 * the caller gives each of them a host-timed record instead, so none gets
 * two. */
#define DEVTIME_HOST_API	1u
#define DEVTIME_HOST_SESSION	2u
unsigned	devtime_submit(struct pending *p);
/* Whether device records can be produced (channel helpers present). */
bool		devtime_available(void);
/* devrec.c: a device task's record (start, end: host ns) emitted as the
 * activity records it stands for; p its launch when joined, else NULL. */
struct npusim_record;
void		devrec_emit(const struct npusim_record *rec,
		    const struct pending *p, uint64_t start, uint64_t end);
/* Around a call that may queue device work (icall_enter/icall_exit do
 * it when a device kind is wanted): its task's record, read before the
 * call has queued its entry, waits for the call to end.  begin returns
 * false when it could not mark the thread (no end then). */
bool		devtime_call_begin(void);
void		devtime_call_end(void);
/* Wakes the reader (masks changed). */
void		devtime_kick(void);
/* Drains the channel synchronously (bounded wait). */
void		devtime_drain(void);
void		devtime_note_device(uint32_t dev);
/* Device markers: stream device and id of the marker task, 0 on failure. */
bool		devtime_marker(uint64_t id, uint16_t flag, void *stream);
/* Clock model (exposed for tests): host ns for a device ns on dev. */
uint64_t	devtime_to_host(uint32_t dev, uint64_t device_ns);

/* mstx.c: marker metadata for the device record of marker id with
 * flag (consumed: each device record takes it once); *host_ts gets the
 * host record's timestamp.  False when unknown. */
bool		mstx_marker_take(uint64_t id, uint32_t flag, const char **name,
		    const char **domain, uint64_t *host_ts);
int		mstx_domain_set_enabled(const char *name, bool enabled);

/* steps.c: the synchronize hooks (intercept-acl.c), any thread. */
#define STEPS_SYNC_STREAM	1
#define STEPS_SYNC_DEVICE	2
void		steps_sync(const void *site, unsigned kind);
void		steps_after_fork_child(void);
extern API_TLS uint32_t steps_launches;	/* this thread's, since its sync */
static inline void
steps_launch(void)
{
	steps_launches++;
}

#endif

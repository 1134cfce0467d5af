/*
 * The record codec: compact binary records for everything a capture holds.
 *
 * Every record starts with an 8-byte header {u16 type, u16 size, u32 aux}.
 * size is the whole record in bytes, header included, a multiple of 8.
 * Fields are naturally aligned little-endian integers; the structs below are
 * the wire layout (checked with static assertions).  The header is also the
 * ring's commit word: a producer stores it last, with release semantics, and
 * type 0 means "not written yet".
 *
 * Activity record types carry the msPTI activity kind as their type number.
 * Strings are never inline in activity records: they are u32 ids defined by
 * REC_STRING_DEF records, interned per producer (an agent's ring) or per
 * trace file (the writer's global namespace).  Id 0 is "no string".  A
 * definition always precedes its first use in a ring or a file.
 *
 * Timestamps are u64 ns since the Unix epoch (CLOCK_REALTIME) unless the
 * record has REC_F_DEVICE_CLOCK set.  Device tasks are joined to the host
 * launches that caused them by (device, stream, task_id).
 *
 * Rings and files are untrusted input: record_validate() must accept a record
 * before anything reads its fields.
 */
#ifndef MSPTI_RECORD_H
#define MSPTI_RECORD_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "record encoding assumes a little-endian host"
#endif

#define REC_ALIGN		8
#define REC_HDR_SIZE		8
#define REC_MAX_SIZE		4096	/* largest valid record, any type */
#define REC_NONE		0xFFFFFFFFu	/* device/stream/task id: unknown */

/* Record types.  1..9 are the msPTI activity kinds. */
enum rec_type {
	REC_INVALID		= 0,	/* never valid: uncommitted ring slot */
	REC_MARKER		= 1,
	REC_KERNEL		= 2,
	REC_API			= 3,	/* also ACL_API, NODE_API, RUNTIME_API */
	REC_HCCL		= 4,
	REC_MEMORY		= 5,
	REC_MEMSET		= 6,
	REC_MEMCPY		= 7,
	REC_EXTERNAL_CORRELATION = 8,
	REC_COMMUNICATION	= 9,

	REC_PAD			= 32,	/* ring wrap filler; skipped */
	REC_STRING_DEF		= 33,
	REC_PROCESS		= 34,
	REC_THREAD		= 35,
	REC_CLOCK_SYNC		= 36,
	REC_COUNTER		= 37,
	REC_LOSS		= 38,
	REC_SESSION		= 39,
	REC_STEP		= 40,
	REC_HOST_CLOCK		= 41,
	REC_TYPE_MAX		= 42,	/* bound for per-type arrays */
};

/* Header aux flags for device work records (kernel, memcpy, memset, hccl,
 * communication, memory). */
#define REC_F_HOST_LAUNCH	0x1u	/* host-side launch: start/end are the
					   launch call; device timing unknown */
#define REC_F_DEVICE_CLOCK	0x2u	/* timestamps still in device clock */
#define REC_F_ASYNC		0x4u	/* memcpy/memset: the async variant */
#define REC_F_JOINED		0x8u	/* daemon joined device timing to the
					   host launch (pid/tid/correlation
					   filled from the launch) */
#define REC_F_WORK_MASK		0xFu

/* Loss stages, counted where the loss happens (REC_LOSS, trace footer). */
enum rec_loss_stage {
	LOSS_DEVICE_CHANNEL	= 0,	/* device profiling channel overrun */
	LOSS_AGENT_RING		= 1,	/* agent ring full */
	LOSS_DAEMON_REJECT	= 2,	/* daemon validation rejects */
	LOSS_DISK		= 3,	/* trace write failed */
	LOSS_AGENT_BUFFER	= 4,	/* agent had no buffer (in-process) */
	LOSS_DEVICE_UNMATCHED	= 5,	/* launches whose device task never
					   reached the daemon: no device
					   timing (lib/join host_only and
					   evicted) */
	LOSS_STAGE_MAX		= 6,
};

/* REC_SESSION events (in aux). */
enum rec_session_event {
	SESSION_EV_START	= 1,
	SESSION_EV_STOP		= 2,
	SESSION_EV_RETARGET	= 3,
	SESSION_EV_AGENT_JOIN	= 4,
	SESSION_EV_AGENT_LEAVE	= 5,
	SESSION_EV_SNAPSHOT	= 6,
	SESSION_EV_MAX		= 7,
};

struct rec_hdr {
	uint16_t	type;
	uint16_t	size;
	uint32_t	aux;
};

/* MSPTI_ACTIVITY_KIND_{API,ACL_API,NODE_API,RUNTIME_API} in kind. */
struct rec_api {
	struct rec_hdr	hdr;
	uint64_t	start;
	uint64_t	end;
	uint64_t	correlation_id;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	name_id;
	uint16_t	kind;		/* 3, 10, 11 or 12 */
	uint16_t	domain;		/* msptiCallbackDomain, 0 if none */
	uint32_t	cbid;		/* msptiCallbackId, 0 if none */
	uint32_t	reserved;
};

struct rec_kernel {
	struct rec_hdr	hdr;		/* aux: REC_F_* */
	uint64_t	start;
	uint64_t	end;
	uint64_t	correlation_id;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	device;
	uint32_t	stream;
	uint32_t	task_id;
	uint32_t	name_id;
	uint32_t	type_id;	/* string: "KERNEL_AICORE", ... */
	uint32_t	reserved;
};

struct rec_memcpy {
	struct rec_hdr	hdr;		/* aux: REC_F_* */
	uint64_t	start;
	uint64_t	end;
	uint64_t	correlation_id;
	uint64_t	bytes;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	device;
	uint32_t	stream;
	uint32_t	task_id;
	uint32_t	copy_kind;	/* msptiActivityMemcpyKind, 0..5 */
};

struct rec_memset {
	struct rec_hdr	hdr;		/* aux: REC_F_* */
	uint64_t	start;
	uint64_t	end;
	uint64_t	correlation_id;
	uint64_t	bytes;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	device;
	uint32_t	stream;
	uint32_t	task_id;
	uint32_t	value;
};

struct rec_memory {
	struct rec_hdr	hdr;		/* aux: REC_F_* */
	uint64_t	start;
	uint64_t	end;
	uint64_t	correlation_id;
	uint64_t	address;
	uint64_t	bytes;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	device;
	uint32_t	stream;
	uint16_t	op;		/* msptiActivityMemoryOperationType, 0..1 */
	uint16_t	mem_kind;	/* msptiActivityMemoryKind, 0..1 */
	uint32_t	reserved;
};

struct rec_hccl {
	struct rec_hdr	hdr;		/* aux: REC_F_* */
	uint64_t	start;
	uint64_t	end;
	uint64_t	correlation_id;
	double		bandwidth;	/* GB/s */
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	device;
	uint32_t	stream;
	uint32_t	task_id;
	uint32_t	name_id;
	uint32_t	comm_name_id;
	uint32_t	seq;		/* REC_SEQ below */
};

/* seq of rec_hccl and rec_communication: the collective's ordinal on its
 * communicator, counted from 1 at the communicator's creation, so the
 * same collective has the same seq on every rank whenever each capture
 * began.  0: not known (send/recv, or a source that does not count). */

struct rec_communication {
	struct rec_hdr	hdr;		/* aux: REC_F_* */
	uint64_t	start;
	uint64_t	end;
	uint64_t	correlation_id;
	uint64_t	count;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	device;
	uint32_t	stream;
	uint32_t	task_id;
	uint32_t	name_id;
	uint32_t	comm_name_id;
	uint32_t	alg_type_id;
	uint32_t	data_type;	/* msptiCommunicationDataType */
	uint32_t	seq;		/* as rec_hccl's */
};

/* The agent's step ranges from the synchronize pattern (agent/steps.c):
 * MSTX-like ranges named the step name, of this domain.  One whose END
 * has the WITHDRAWN domain was taken over by an MSTX step of the same
 * index (the process began marking steps): it is no step. */
#define REC_STEPS_SYNC_DOMAIN		"mspti.sync"
#define REC_STEPS_WITHDRAWN_DOMAIN	"mspti.sync.withdrawn"

/* One MSTX marker event.  The (pid, tid) pair applies to source HOST, the
 * (device, stream) pair to source DEVICE; the other pair is REC_NONE. */
struct rec_marker {
	struct rec_hdr	hdr;
	uint64_t	timestamp;
	uint64_t	id;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	device;
	uint32_t	stream;
	uint32_t	name_id;
	uint32_t	domain_id;
	uint32_t	flag;		/* msptiActivityFlag, one bit */
	uint32_t	source_kind;	/* 0 host, 1 device */
};

struct rec_external_correlation {
	struct rec_hdr	hdr;
	uint64_t	external_id;
	uint64_t	correlation_id;
	uint32_t	external_kind;	/* msptiExternalCorrelationKind, 1..4 */
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	reserved;
};

/* bytes[len] is followed by a NUL and zero padding to a multiple of 8;
 * the string holds no NUL itself.  Size is rec_string_def_size(len). */
struct rec_string_def {
	struct rec_hdr	hdr;
	uint32_t	id;
	uint32_t	len;
	char		bytes[];
};
#define REC_STRING_MAX	(REC_MAX_SIZE - sizeof(struct rec_string_def) - 1)

/* One traced process.  rank/local_rank/world_size are -1 when unknown. */
struct rec_process {
	struct rec_hdr	hdr;
	uint64_t	start_ns;	/* registration time */
	uint32_t	pid;
	uint32_t	uid;
	int32_t		rank;
	int32_t		local_rank;
	int32_t		world_size;
	uint32_t	job_id;		/* string ids */
	uint32_t	exe_id;
	uint32_t	cmdline_id;
};

struct rec_thread {
	struct rec_hdr	hdr;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	name_id;
	uint32_t	reserved;
};

/* Device clock model: host_ns = host_ref + (dev_ns - device_ref) * (1 + drift).
 * A plain sync pair has drift 0.  error_ns is the uncertainty of the pair. */
struct rec_clock_sync {
	struct rec_hdr	hdr;
	uint64_t	host_ref_ns;
	uint64_t	device_ref_ns;
	double		drift;
	double		error_ns;
	uint32_t	device;
	uint32_t	samples;
};

/* One sample on a counter track (device metrics, host cpu/mem per pid).
 * pid 0 / device REC_NONE when the track is not per process / per device. */
struct rec_counter {
	struct rec_hdr	hdr;
	uint64_t	timestamp;
	double		value;
	uint32_t	track_id;	/* string: "npu.util", "cpu.percent" */
	uint32_t	unit_id;	/* string: "%", "bytes", or 0 */
	uint32_t	pid;
	uint32_t	device;
};

/* count records of type lost_type (0: any) lost at stage, up to timestamp. */
struct rec_loss {
	struct rec_hdr	hdr;
	uint64_t	timestamp;
	uint64_t	count;
	uint32_t	stage;		/* enum rec_loss_stage */
	uint32_t	pid;
	uint32_t	lost_type;
	uint32_t	reserved;
};

/* aux: enum rec_session_event. */
struct rec_session {
	struct rec_hdr	hdr;
	uint64_t	timestamp;
	uint64_t	session_id;
	uint32_t	pid;		/* the agent, for JOIN/LEAVE; else 0 */
	uint32_t	detail_id;	/* string, e.g. "kinds=+communication" */
};

/* A training step, derived from the configured marker range. */
struct rec_step {
	struct rec_hdr	hdr;
	uint64_t	start;
	uint64_t	end;
	uint64_t	step;
	uint32_t	pid;
	uint32_t	name_id;
};

/*
 * How an agent reads its clock (agent/hostclock.c), written into its ring
 * each time that changes.  Its records' timestamps are CLOCK_REALTIME ns
 * either way; with HOST_CLOCK_TSC they were computed from the TSC as
 * base_ns + ((tsc - base_tsc) * mult >> 32), for tsc from base_tsc on,
 * until the next record of the pid.  timestamp is the agent's clock when
 * the record was written into the capture (so within the session's
 * window), bracket_ns the width of the CLOCK_REALTIME reference the
 * mapping was fitted to, correction_ns how far the mapping before it was
 * off at the refit (ref - old mapping): the error of that mapping's last
 * records, at most.  aux: enum rec_host_clock_src.
 */
enum rec_host_clock_src {
	HOST_CLOCK_REALTIME	= 1,	/* clock_gettime; TSC fields 0 */
	HOST_CLOCK_TSC		= 2,
};
struct rec_host_clock {
	struct rec_hdr	hdr;
	uint64_t	timestamp;
	uint64_t	base_tsc;
	uint64_t	base_ns;
	uint64_t	mult;		/* ns per tick, 32.32 fixed point */
	int64_t		correction_ns;
	uint32_t	pid;
	uint32_t	bracket_ns;
};

/* Largest fixed-size record (a stack buffer of this size holds any). */
#define REC_FIXED_MAX	80

/* Builds a header word; the record is size bytes of type. */
static inline void
rec_hdr_set(struct rec_hdr *h, unsigned type, size_t size, uint32_t aux)
{
	h->type = (uint16_t)type;
	h->size = (uint16_t)size;
	h->aux = aux;
}

/* Zeroes rec (a struct rec_* of sizeof size) and sets its header. */
#define REC_INIT(rec, type, aux) do {					\
	memset((rec), 0, sizeof(*(rec)));				\
	rec_hdr_set(&(rec)->hdr, (type), sizeof(*(rec)), (aux));	\
} while (0)

static inline size_t
rec_string_def_size(size_t len)
{
	return (sizeof(struct rec_string_def) + len + 1 + 7) & ~(size_t)7;
}

/* Returns the length record_string_def_encode() keeps of a len-byte string:
 * at most REC_STRING_MAX, not splitting a UTF-8 sequence, stopping at a NUL. */
size_t	record_string_fit(const char *s, size_t len);

/*
 * Encodes a STRING_DEF for s (len bytes, truncated by record_string_fit) into
 * buf.  Returns the record size, or 0 when bufsize is too small.  No
 * allocation; safe on a hot path.
 */
size_t	record_string_def_encode(void *buf, size_t bufsize, uint32_t id,
	    const char *s, size_t len);

/*
 * Checks that p holds one well-formed record within avail bytes: known type,
 * size a multiple of 8, exactly the type's size (STRING_DEF: consistent with
 * its len), within avail, reserved fields zero, enum values in range,
 * end >= start, finite floating point values.  String ids are not resolved.
 * p must be 8-byte aligned.  Returns 0, -EBADMSG (malformed), -EPROTO
 * (unknown type) or -EMSGSIZE (size beyond avail).
 */
int	record_validate(const void *p, size_t avail);
/* record_validate for a record whose framing the caller checked: its size
 * at least REC_HDR_SIZE, a multiple of REC_ALIGN, and within its buffer
 * (a reader's hot loop); the same result for such a record. */
int	record_validate_framed(const struct rec_hdr *h);

/* record_validate's field checks of the commonest types, inline for a
 * reader's hot loop (validate_fields in record.c is made of them). */
static inline int
record_check_kernel(const struct rec_kernel *r)
{
	return (r->hdr.aux & ~REC_F_WORK_MASK) || r->reserved ||
	    r->end < r->start ? -EBADMSG : 0;
}

static inline int
record_check_api(const struct rec_api *r)
{
	if (r->hdr.aux || r->reserved || r->end < r->start)
		return -EBADMSG;
	if (r->kind > 12 || !((0x1c08u >> r->kind) & 1))	/* 3, 10-12 */
		return -EBADMSG;
	return r->domain > 2 ? -EBADMSG : 0;
}

static inline int
record_check_marker(const struct rec_marker *r)
{
	if (r->hdr.aux || r->source_kind > 1)
		return -EBADMSG;
	/* Exactly one flag bit, one of the six msPTI marker flags. */
	return r->flag == 0 || r->flag > 32 || (r->flag & (r->flag - 1)) ?
	    -EBADMSG : 0;
}

/* record_validate_framed, the commonest types of the right size inline. */
static inline int
record_validate_framed_fast(const struct rec_hdr *h)
{
	if (h->type == REC_MARKER && h->size == sizeof(struct rec_marker))
		return record_check_marker((const struct rec_marker *)
		    (const void *)h);
	if (h->type == REC_KERNEL && h->size == sizeof(struct rec_kernel))
		return record_check_kernel((const struct rec_kernel *)
		    (const void *)h);
	if (h->type == REC_API && h->size == sizeof(struct rec_api))
		return record_check_api((const struct rec_api *)
		    (const void *)h);
	return record_validate_framed(h);
}

/* The fixed size of type (0 for unknown, and for variable-size types). */
size_t	record_size(unsigned type);

/* A short lowercase name for type ("kernel"), or NULL if unknown. */
const char	*record_type_name(unsigned type);

/* A short name for a loss stage ("agent_ring"), or NULL. */
const char	*record_loss_stage_name(unsigned stage);

/* The record's main timestamp (start or timestamp; 0 for types without). */
uint64_t	record_timestamp(const struct rec_hdr *h);

/* The pid a record belongs to (0 when none or not a per-process record). */
uint32_t	record_pid(const struct rec_hdr *h);
/* Sets that pid; -1 when the type has no pid field. */
int		record_set_pid(struct rec_hdr *h, uint32_t pid);

/*
 * Stores into offs[] the byte offsets of the u32 string-id fields of a
 * record of type (for remapping a producer's ids into a trace's ids) and
 * returns how many (at most REC_MAX_STR_FIELDS).  STRING_DEF's own id is
 * not included.
 */
#define REC_MAX_STR_FIELDS	4
int	record_string_fields(unsigned type, uint16_t offs[REC_MAX_STR_FIELDS]);

#endif

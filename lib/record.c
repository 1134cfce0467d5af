/* The record codec: sizes, validation and small helpers (see record.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "record.h"

#define SA(c)	_Static_assert(c, #c)
SA(sizeof(struct rec_hdr) == 8);
SA(sizeof(struct rec_api) == 56);
SA(sizeof(struct rec_kernel) == 64);
SA(sizeof(struct rec_memcpy) == 64);
SA(sizeof(struct rec_memset) == 64);
SA(sizeof(struct rec_memory) == 72);
SA(sizeof(struct rec_hccl) == 72);
SA(sizeof(struct rec_communication) == 80);
SA(sizeof(struct rec_marker) == 56);
SA(sizeof(struct rec_external_correlation) == 40);
SA(sizeof(struct rec_string_def) == 16);
SA(sizeof(struct rec_process) == 48);
SA(sizeof(struct rec_thread) == 24);
SA(sizeof(struct rec_clock_sync) == 48);
SA(sizeof(struct rec_counter) == 40);
SA(sizeof(struct rec_loss) == 40);
SA(sizeof(struct rec_session) == 32);
SA(sizeof(struct rec_step) == 40);
SA(sizeof(struct rec_host_clock) == 56);
SA(REC_FIXED_MAX == sizeof(struct rec_communication));
SA(REC_MAX_SIZE % 8 == 0 && REC_MAX_SIZE <= 0xFFF8);

/* Where a record keeps its pid and timestamp, and which u32 fields are
 * string ids; offsets of 0 mean "none" (the header is at 0). */
struct rec_info {
	const char	*name;
	uint16_t	 size;		/* fixed size; 0: variable */
	uint16_t	 ts_off;
	uint16_t	 pid_off;
	uint8_t		 nstr;
	uint16_t	 str_off[REC_MAX_STR_FIELDS];
};

#define OFF(t, f)	((uint16_t)offsetof(struct t, f))

static const struct rec_info rec_info[REC_TYPE_MAX] = {
	[REC_MARKER] = { "marker", sizeof(struct rec_marker),
	    OFF(rec_marker, timestamp), OFF(rec_marker, pid), 2,
	    { OFF(rec_marker, name_id), OFF(rec_marker, domain_id) } },
	[REC_KERNEL] = { "kernel", sizeof(struct rec_kernel),
	    OFF(rec_kernel, start), OFF(rec_kernel, pid), 2,
	    { OFF(rec_kernel, name_id), OFF(rec_kernel, type_id) } },
	[REC_API] = { "api", sizeof(struct rec_api),
	    OFF(rec_api, start), OFF(rec_api, pid), 1,
	    { OFF(rec_api, name_id) } },
	[REC_HCCL] = { "hccl", sizeof(struct rec_hccl),
	    OFF(rec_hccl, start), OFF(rec_hccl, pid), 2,
	    { OFF(rec_hccl, name_id), OFF(rec_hccl, comm_name_id) } },
	[REC_MEMORY] = { "memory", sizeof(struct rec_memory),
	    OFF(rec_memory, start), OFF(rec_memory, pid), 0, { 0 } },
	[REC_MEMSET] = { "memset", sizeof(struct rec_memset),
	    OFF(rec_memset, start), OFF(rec_memset, pid), 0, { 0 } },
	[REC_MEMCPY] = { "memcpy", sizeof(struct rec_memcpy),
	    OFF(rec_memcpy, start), OFF(rec_memcpy, pid), 0, { 0 } },
	[REC_EXTERNAL_CORRELATION] = { "external_correlation",
	    sizeof(struct rec_external_correlation), 0,
	    OFF(rec_external_correlation, pid), 0, { 0 } },
	[REC_COMMUNICATION] = { "communication",
	    sizeof(struct rec_communication),
	    OFF(rec_communication, start), OFF(rec_communication, pid), 3,
	    { OFF(rec_communication, name_id),
	      OFF(rec_communication, comm_name_id),
	      OFF(rec_communication, alg_type_id) } },
	[REC_PAD] = { "pad", 0, 0, 0, 0, { 0 } },
	[REC_STRING_DEF] = { "string_def", 0, 0, 0, 0, { 0 } },
	[REC_PROCESS] = { "process", sizeof(struct rec_process),
	    OFF(rec_process, start_ns), OFF(rec_process, pid), 3,
	    { OFF(rec_process, job_id), OFF(rec_process, exe_id),
	      OFF(rec_process, cmdline_id) } },
	[REC_THREAD] = { "thread", sizeof(struct rec_thread), 0,
	    OFF(rec_thread, pid), 1, { OFF(rec_thread, name_id) } },
	[REC_CLOCK_SYNC] = { "clock_sync", sizeof(struct rec_clock_sync),
	    OFF(rec_clock_sync, host_ref_ns), 0, 0, { 0 } },
	[REC_COUNTER] = { "counter", sizeof(struct rec_counter),
	    OFF(rec_counter, timestamp), OFF(rec_counter, pid), 2,
	    { OFF(rec_counter, track_id), OFF(rec_counter, unit_id) } },
	[REC_LOSS] = { "loss", sizeof(struct rec_loss),
	    OFF(rec_loss, timestamp), OFF(rec_loss, pid), 0, { 0 } },
	[REC_SESSION] = { "session", sizeof(struct rec_session),
	    OFF(rec_session, timestamp), OFF(rec_session, pid), 1,
	    { OFF(rec_session, detail_id) } },
	[REC_STEP] = { "step", sizeof(struct rec_step),
	    OFF(rec_step, start), OFF(rec_step, pid), 1,
	    { OFF(rec_step, name_id) } },
	[REC_HOST_CLOCK] = { "host_clock", sizeof(struct rec_host_clock),
	    OFF(rec_host_clock, timestamp), OFF(rec_host_clock, pid), 0,
	    { 0 } },
};

static const char *const loss_stage_names[LOSS_STAGE_MAX] = {
	[LOSS_DEVICE_CHANNEL] = "device_channel",
	[LOSS_AGENT_RING] = "agent_ring",
	[LOSS_DAEMON_REJECT] = "daemon_reject",
	[LOSS_DISK] = "disk",
	[LOSS_AGENT_BUFFER] = "agent_buffer",
	[LOSS_DEVICE_UNMATCHED] = "device_unmatched",
};

size_t
record_size(unsigned type)
{
	return type < REC_TYPE_MAX ? rec_info[type].size : 0;
}

const char *
record_type_name(unsigned type)
{
	return type < REC_TYPE_MAX ? rec_info[type].name : NULL;
}

const char *
record_loss_stage_name(unsigned stage)
{
	return stage < LOSS_STAGE_MAX ? loss_stage_names[stage] : NULL;
}

uint64_t
record_timestamp(const struct rec_hdr *h)
{
	uint64_t ts;

	if (h->type >= REC_TYPE_MAX || rec_info[h->type].ts_off == 0)
		return 0;
	memcpy(&ts, (const char *)h + rec_info[h->type].ts_off, sizeof ts);
	return ts;
}

uint32_t
record_pid(const struct rec_hdr *h)
{
	uint32_t pid;

	if (h->type >= REC_TYPE_MAX || rec_info[h->type].pid_off == 0)
		return 0;
	memcpy(&pid, (const char *)h + rec_info[h->type].pid_off, sizeof pid);
	return pid;
}

int
record_set_pid(struct rec_hdr *h, uint32_t pid)
{
	if (h->type >= REC_TYPE_MAX || rec_info[h->type].pid_off == 0)
		return -1;
	memcpy((char *)h + rec_info[h->type].pid_off, &pid, sizeof pid);
	return 0;
}

int
record_string_fields(unsigned type, uint16_t offs[REC_MAX_STR_FIELDS])
{
	int i, n;

	if (type >= REC_TYPE_MAX)
		return 0;
	n = rec_info[type].nstr;
	for (i = 0; i < n; i++)
		offs[i] = rec_info[type].str_off[i];
	return n;
}

size_t
record_string_fit(const char *s, size_t len)
{
	const char *nul;

	if (len > REC_STRING_MAX) {
		len = REC_STRING_MAX;
		/* Do not leave half of a UTF-8 sequence at the end. */
		while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
			len--;
	}
	if ((nul = memchr(s, '\0', len)) != NULL)
		len = (size_t)(nul - s);
	return len;
}

size_t
record_string_def_encode(void *buf, size_t bufsize, uint32_t id,
    const char *s, size_t len)
{
	struct rec_string_def *d = buf;
	size_t size;

	len = record_string_fit(s, len);
	size = rec_string_def_size(len);
	if (size > bufsize)
		return 0;
	rec_hdr_set(&d->hdr, REC_STRING_DEF, size, 0);
	d->id = id;
	d->len = (uint32_t)len;
	memcpy(d->bytes, s, len);
	memset(d->bytes + len, 0, size - sizeof(*d) - len);
	return size;
}

/* Each returns nonzero when the record's fields are impossible. */
static int
bad_interval(uint64_t start, uint64_t end)
{
	return end < start;
}

static int
bad_double(double d)
{
	return !isfinite(d);
}

static int
validate_string_def(const struct rec_string_def *d)
{
	size_t i;

	if (d->hdr.aux != 0 || d->id == 0 || d->len > REC_STRING_MAX ||
	    d->hdr.size != rec_string_def_size(d->len))
		return -EBADMSG;
	if (memchr(d->bytes, '\0', d->len) != NULL)
		return -EBADMSG;
	for (i = d->len; i < d->hdr.size - sizeof(*d); i++)
		if (d->bytes[i] != '\0')
			return -EBADMSG;
	return 0;
}

/* The per-type field checks; the size is already known to be right. */
static int
validate_fields(const struct rec_hdr *h)
{
	switch (h->type) {
	case REC_API:
		return record_check_api((const void *)h);
	case REC_KERNEL:
		return record_check_kernel((const void *)h);
	case REC_MEMCPY: {
		const struct rec_memcpy *r = (const void *)h;

		if ((h->aux & ~REC_F_WORK_MASK) || r->copy_kind > 5 ||
		    bad_interval(r->start, r->end))
			return -EBADMSG;
		return 0;
	}
	case REC_MEMSET: {
		const struct rec_memset *r = (const void *)h;

		if ((h->aux & ~REC_F_WORK_MASK) ||
		    bad_interval(r->start, r->end))
			return -EBADMSG;
		return 0;
	}
	case REC_MEMORY: {
		const struct rec_memory *r = (const void *)h;

		if ((h->aux & ~REC_F_WORK_MASK) || r->reserved || r->op > 1 ||
		    r->mem_kind > 1 || bad_interval(r->start, r->end))
			return -EBADMSG;
		return 0;
	}
	case REC_HCCL: {
		const struct rec_hccl *r = (const void *)h;

		if ((h->aux & ~REC_F_WORK_MASK) ||
		    bad_interval(r->start, r->end) || bad_double(r->bandwidth) ||
		    r->bandwidth < 0)
			return -EBADMSG;
		return 0;
	}
	case REC_COMMUNICATION: {
		const struct rec_communication *r = (const void *)h;

		if ((h->aux & ~REC_F_WORK_MASK) ||
		    bad_interval(r->start, r->end))
			return -EBADMSG;
		if (r->data_type > 17 && r->data_type != 0xFFFF)
			return -EBADMSG;
		return 0;
	}
	case REC_MARKER:
		return record_check_marker((const void *)h);
	case REC_EXTERNAL_CORRELATION: {
		const struct rec_external_correlation *r = (const void *)h;

		if (h->aux || r->reserved || r->external_kind < 1 ||
		    r->external_kind > 4)
			return -EBADMSG;
		return 0;
	}
	case REC_STRING_DEF:
		return validate_string_def((const void *)h);
	case REC_PROCESS: {
		const struct rec_process *r = (const void *)h;

		if (h->aux || r->rank < -1 || r->local_rank < -1 ||
		    r->world_size < -1 || r->world_size == 0 ||
		    (r->world_size > 0 && r->rank >= r->world_size))
			return -EBADMSG;
		return 0;
	}
	case REC_THREAD: {
		const struct rec_thread *r = (const void *)h;

		return h->aux || r->reserved ? -EBADMSG : 0;
	}
	case REC_CLOCK_SYNC: {
		const struct rec_clock_sync *r = (const void *)h;

		/* A drift beyond 1% is no clock, it is a bug. */
		if (h->aux || bad_double(r->drift) || bad_double(r->error_ns) ||
		    fabs(r->drift) > 0.01 || r->error_ns < 0)
			return -EBADMSG;
		return 0;
	}
	case REC_COUNTER: {
		const struct rec_counter *r = (const void *)h;

		if (h->aux || r->track_id == 0 || bad_double(r->value))
			return -EBADMSG;
		return 0;
	}
	case REC_LOSS: {
		const struct rec_loss *r = (const void *)h;

		if (h->aux || r->reserved || r->stage >= LOSS_STAGE_MAX ||
		    r->lost_type >= REC_TYPE_MAX)
			return -EBADMSG;
		return 0;
	}
	case REC_SESSION: {
		const struct rec_session *r = (const void *)h;

		if (h->aux == 0 || h->aux >= SESSION_EV_MAX || r->session_id == 0)
			return -EBADMSG;
		return 0;
	}
	case REC_STEP: {
		const struct rec_step *r = (const void *)h;

		if (h->aux || bad_interval(r->start, r->end))
			return -EBADMSG;
		return 0;
	}
	case REC_HOST_CLOCK: {
		const struct rec_host_clock *r = (const void *)h;

		if (h->aux == HOST_CLOCK_REALTIME)
			return r->base_tsc || r->base_ns || r->mult ? -EBADMSG : 0;
		/* A tick of 0 ns or of more than 1 us: no TSC. */
		if (h->aux != HOST_CLOCK_TSC || r->mult == 0 ||
		    r->mult > (1000ull << 32))
			return -EBADMSG;
		return 0;
	}
	case REC_PAD:
		return 0;
	}
	return -EPROTO;
}

/* The checks after the framing: the size of a fixed-size type, then the
 * fields.  The type is known. */
static inline int
validate_body(const struct rec_hdr *h)
{
	size_t want = rec_info[h->type].size;

	if (want != 0 && h->size != want)
		return -EBADMSG;
	if (h->type == REC_STRING_DEF && h->size < sizeof(struct rec_string_def))
		return -EBADMSG;
	return validate_fields(h);
}

static inline int
known_type(const struct rec_hdr *h)
{
	return h->type != REC_INVALID && h->type < REC_TYPE_MAX &&
	    rec_info[h->type].name != NULL;
}

int
record_validate(const void *p, size_t avail)
{
	const struct rec_hdr *h = p;

	if (p == NULL || avail < REC_HDR_SIZE)
		return -EMSGSIZE;
	if (!known_type(h))
		return -EPROTO;
	if (h->size < REC_HDR_SIZE || (h->size & (REC_ALIGN - 1)) ||
	    h->size > REC_MAX_SIZE)
		return -EBADMSG;
	if (h->size > avail)
		return -EMSGSIZE;
	return validate_body(h);
}

int
record_validate_framed(const struct rec_hdr *h)
{
	if (!known_type(h))
		return -EPROTO;
	if (h->size > REC_MAX_SIZE)
		return -EBADMSG;
	return validate_body(h);
}

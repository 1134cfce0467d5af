/*
 * devcol: device-side collection in msptid.  Reads the profiling channels of
 * the devices in use (libnpusim's reader, npusim/npusim.h), validates every
 * record, converts device time to host CLOCK_REALTIME with a per-device
 * least-squares clock model (lib/clocksync.h) and hands device tasks to the
 * caller.
 *
 * Channels are opened on demand and refcounted (devcol_use/devcol_unuse):
 * an open channel makes the device record tasks, so nothing is opened while
 * no session needs it.  A channel whose shared-memory object does not exist
 * yet (no process has used the device) is not created by the daemon (as
 * root it would be unreadable to the application); devcol retries on each
 * poll.  A missing, foreign or garbage channel is never fatal: it is
 * counted and skipped.
 *
 * Single-threaded: everything runs on the daemon's event loop.  devcol_poll
 * is one consumer: the session layer calls it (on its drain timer or when
 * woken) and routes the tasks to sessions by pid.  While any device is
 * used, an internal timer refreshes the clock models every
 * DEVCOL_CLOCK_MS; no timer runs when no device is used.
 */
#ifndef MSPTID_DEVCOL_H
#define MSPTID_DEVCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "clocksync.h"

#define DEVCOL_MAX_DEVICES	64
#define DEVCOL_NAME_LEN		64
#define DEVCOL_COMM_NAME_LEN	40
#define DEVCOL_CLOCK_MS		250
#define DEVCOL_ID_NONE		0xffffffffu

/* Task kinds (same values as enum npusim_task_kind). */
enum devcol_kind {
	DEVCOL_KERNEL = 1,
	DEVCOL_MEMCPY = 2,
	DEVCOL_MEMSET = 3,
	DEVCOL_COMM = 4,
	DEVCOL_MARKER = 5,
	DEVCOL_EVENT = 6,
};

/* One device task, times already in host CLOCK_REALTIME ns. */
struct devcol_task {
	uint64_t	start;		/* host ns */
	uint64_t	end;		/* host ns, >= start */
	uint64_t	dev_start;	/* device clock, as recorded */
	uint64_t	dev_end;
	uint32_t	device;
	uint32_t	stream;		/* device-wide stream id */
	uint32_t	task_id;
	uint32_t	pid;		/* submitting process */
	uint32_t	tid;		/* submitting thread */
	uint16_t	kind;		/* enum devcol_kind */
	uint16_t	kernel_type;	/* KERNEL: 0 AI_CORE, 1 AI_VECTOR, 2 AI_CPU */
	uint16_t	status;		/* 0 ok, else the task failed */
	uint16_t	tag_id;		/* MARKER */
	uint32_t	block_dim;	/* KERNEL */
	uint64_t	bytes;
	uint64_t	flops;		/* KERNEL */
	uint64_t	aicore_cycles;	/* KERNEL */
	uint64_t	mte_bytes;	/* KERNEL */
	uint32_t	memcpy_kind;	/* MEMCPY: aclrtMemcpyKind */
	uint32_t	data_type;	/* COMM: HcclDataType */
	uint32_t	reduce_op;	/* COMM: HcclReduceOp or DEVCOL_ID_NONE */
	uint32_t	algorithm;	/* COMM: 1 ring, 2 p2p */
	uint32_t	rank;		/* COMM */
	uint32_t	rank_size;	/* COMM */
	uint32_t	peer;		/* COMM: root/peer or DEVCOL_ID_NONE */
	uint32_t	comm_seq;	/* COMM: ordinal on the communicator */
	uint64_t	count;		/* COMM: elements */
	uint64_t	wait_ns;	/* COMM: waited for the slowest rank */
	uint64_t	marker_id;	/* MARKER: indexId */
	uint64_t	model_id;	/* MARKER */
	char		name[DEVCOL_NAME_LEN];		/* NUL-terminated */
	char		comm_name[DEVCOL_COMM_NAME_LEN];	/* COMM */
};

/* Per-device counters since the channel was (last) opened. */
struct devcol_stats {
	bool		open;		/* channel mapped and enabled */
	uint32_t	users;		/* devcol_use references */
	uint64_t	tasks;		/* delivered to the callback */
	uint64_t	filtered;	/* dropped by the pid filter */
	uint64_t	lost;		/* channel overrun / torn slots */
	uint64_t	bad;		/* records failing validation */
	uint64_t	open_failures;	/* channel missing or invalid */
	uint32_t	clock_samples;	/* pairs in the current fit */
};

struct devcol;

typedef void (*devcol_task_cb)(const struct devcol_task *t, void *arg);
/* Returns true to keep tasks of pid (submitted on device). */
typedef bool (*devcol_filter_cb)(uint32_t device, uint32_t pid, void *arg);

/* Returns a collector on base (caller frees with devcol_free), or NULL. */
struct devcol	*devcol_new(struct event_base *base);
/* Closes every channel; NULL is a no-op. */
void		 devcol_free(struct devcol *);

/*
 * Takes a reference on device's channel, opening it (enables recording) on
 * the first one.  Returns 0, or -EINVAL for a device out of range.  A
 * channel that cannot be opened yet is retried on every poll; the
 * reference holds either way.
 */
int		 devcol_use(struct devcol *, uint32_t device);
/* Drops a reference; the last one closes the channel. */
void		 devcol_unuse(struct devcol *, uint32_t device);

/* Sets the pid filter (NULL: every pid).  Tasks it refuses are counted
 * in devcol_stats.filtered and never reach the callback. */
void		 devcol_set_filter(struct devcol *, devcol_filter_cb, void *arg);

/*
 * Drains every open channel now, calling cb for each valid task of a
 * wanted pid, in channel order per device.  Refreshes the clock model
 * first.  Returns the number of tasks delivered.
 */
size_t		 devcol_poll(struct devcol *, devcol_task_cb cb, void *arg);
/* How full the fullest channel was when the last devcol_poll read it:
 * its backlog in thousandths of its capacity (1000: lapped, records
 * lost).  The caller polls sooner while channels fill fast. */
unsigned	 devcol_last_fill(const struct devcol *);
/* Whether a channel is in use (devcol_use'd): worth polling. */
bool		 devcol_in_use(const struct devcol *);

/* Channel overruns (records lost) on device since it was opened. */
uint64_t	 devcol_lost(struct devcol *, uint32_t device);
/* Fills *out; -EINVAL for a device out of range. */
int		 devcol_stats(struct devcol *, uint32_t device,
		     struct devcol_stats *out);

/*
 * Samples device's clock now and copies the current model to *out (for the
 * trace header and REC_CLOCK_SYNC records).  Returns 0, -EINVAL (device out
 * of range) or -EAGAIN (no clock sample available yet).
 */
int		 devcol_clock_model(struct devcol *, uint32_t device,
		     struct clock_model *out);

/* The shared-memory name of device's object what ("chan", "metrics") under
 * $NPUSIM_SHM_PREFIX, as npusimShmName builds it.  0 or -errno. */
int		 devcol_shm_name(char *buf, size_t len, uint32_t device,
		     const char *what);

/* Device ns to host ns with device's current model (identity without). */
uint64_t	 devcol_to_host(struct devcol *, uint32_t device,
		     uint64_t device_ns);

#endif

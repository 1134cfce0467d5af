/*
 * join: pairs host launches (from an agent ring: device, stream, task id,
 * correlation id, ...) with device tasks (from the device channel) by
 * (device, stream, task id), whichever arrives first.
 *
 * Each side waits in a hash table with an age list.  A match calls the emit
 * callback with both halves.  A device task that waited longer than
 * dev_timeout_ns is emitted alone (launch NULL: correlation id 0); a launch
 * that waited longer than host_timeout_ns is dropped and counted
 * host_only.  Memory is bounded: beyond max_dev / max_host waiting entries
 * the oldest is evicted (a device task is emitted alone, a launch dropped)
 * and counted.
 *
 * The capture's window, per stream: a device task with no launch whose
 * task id comes before the first launch seen on its (device, stream) was
 * queued before the capture began, and at join_flush one after the last
 * launch was queued after it ended; neither is emitted (dev_outside).
 * Task ids of a stream grow in submission order, so this holds however
 * deep the device queue was.  A stream with no launch keeps every task.
 *
 * A launch may declare ntasks > 1 (an HCCL call that queued several tasks
 * with consecutive task ids task_id .. task_id + ntasks - 1): each of its
 * tasks joins to the same launch.
 *
 * Device tasks are opaque to join: it copies dev_size bytes per task.
 * Time is passed in by the caller (host ns), so tests need no clock.
 * Not thread-safe: one owner.
 */
#ifndef MSPTI_JOIN_H
#define MSPTI_JOIN_H

#include <stddef.h>
#include <stdint.h>

/* The host half: what the daemon keeps of a launch record. */
struct join_launch {
	uint32_t	device;
	uint32_t	stream;
	uint32_t	task_id;	/* first task */
	uint32_t	ntasks;		/* tasks queued by the call; 0 means 1 */
	uint64_t	correlation_id;
	uint64_t	start;		/* launch call, host ns */
	uint64_t	end;
	uint32_t	pid;
	uint32_t	tid;
	uint32_t	kind;		/* record type of the launch (REC_KERNEL...) */
	uint32_t	name_id;	/* caller's string ids (api name, ...) */
	uint64_t	user;		/* opaque to join */
};

/* Called for each launch task that leaves the join without its device
 * task (the host timeout, an eviction, a replacement by another launch of
 * the key, a flush): every one counted in host_only, host_evicted or
 * host_inflight goes through it once, so a caller can count per kind. */
typedef void (*join_drop_cb)(const struct join_launch *launch, void *arg);

struct join_config {
	size_t		dev_size;	/* bytes per device task (required) */
	join_drop_cb	drop;		/* optional; gets join_new's arg */
	uint64_t	dev_timeout_ns;	/* 0: JOIN_DEV_TIMEOUT_NS */
	uint64_t	host_timeout_ns;	/* 0: JOIN_HOST_TIMEOUT_NS */
	size_t		max_dev;	/* 0: JOIN_MAX_DEV */
	size_t		max_host;	/* 0: JOIN_MAX_HOST */
};

#define JOIN_DEV_TIMEOUT_NS	2000000000ull	/* 2 s */
#define JOIN_HOST_TIMEOUT_NS	30000000000ull	/* 30 s: queues can be deep */
#define JOIN_MAX_DEV		65536
#define JOIN_MAX_HOST		262144

struct join_stats {
	uint64_t	matched;	/* device tasks emitted with a launch */
	uint64_t	dev_unmatched;	/* emitted alone after dev_timeout */
	uint64_t	dev_evicted;	/* emitted alone early: max_dev reached */
	uint64_t	host_only;	/* launch tasks never matched (timeout, flush) */
	uint64_t	host_inflight;	/* launch tasks join_flush_at dropped
					   that were younger than its window:
					   likely still queued on the device
					   (not in host_only) */
	uint64_t	host_evicted;	/* launch tasks dropped: max_host reached
					   (or no memory for one) */
	uint64_t	host_replaced;	/* a new launch reused a waiting key
					   (another correlation id: the old
					   one is also counted host_only) */
	uint64_t	dev_duplicate;	/* a device task reused a waiting key */
	uint64_t	dev_outside;	/* alone, and outside the launches of
					   its stream: not emitted */
	size_t		dev_waiting;	/* now */
	size_t		host_waiting;
	size_t		dev_spare;	/* entries kept for the next ones */
	size_t		host_spare;
};

struct join;

/* Called for every device task leaving the join: launch is NULL when the
 * task had no host launch.  Both pointers are valid during the call only. */
typedef void (*join_emit_cb)(const void *dev_task,
    const struct join_launch *launch, void *arg);

/* Returns a join (free with join_free), or NULL on a bad config / no
 * memory. */
struct join	*join_new(const struct join_config *, join_emit_cb, void *arg);
/* Frees without emitting (call join_flush first to emit); NULL is a no-op. */
void		 join_free(struct join *);

/* Adds a launch at host time now; emits every task it completes.
 * Returns 0 or -ENOMEM. */
int		 join_add_launch(struct join *, const struct join_launch *,
		     uint64_t now);
/* Adds a device task keyed (device, stream, task_id) at host time now; emits
 * it at once if its launch is waiting.  Returns 0 or -ENOMEM (the task is
 * then emitted alone). */
int		 join_add_task(struct join *, uint32_t device, uint32_t stream,
		     uint32_t task_id, const void *dev_task, uint64_t now);
/* Emits device tasks older than the timeout and drops old launches; ends
 * a spell: frees the spare entries beyond the most either table held in
 * this spell or the one before (at least 1,024).  Call it regularly (msptid
 * does after each device poll): until then what leaves is kept. */
void		 join_expire(struct join *, uint64_t now);
/* Emits every waiting device task alone, drops every launch (counted
 * host_only): end of a session. */
void		 join_flush(struct join *);
/* The same, but a launch added less than inflight_ns before now is
 * counted host_inflight instead (its task may simply not have run yet). */
void		 join_flush_at(struct join *, uint64_t now, uint64_t inflight_ns);

void		 join_get_stats(const struct join *, struct join_stats *out);
/* Calls cb for every launch task still waiting for its device task,
 * oldest first (what a flush would drop); cb must not change the join. */
void		 join_host_foreach(const struct join *,
		     void (*cb)(const struct join_launch *, void *), void *arg);
/* Whether a launch of the key waits for its device task. */
int		 join_has_launch(const struct join *, uint32_t device,
		     uint32_t stream, uint32_t task_id);
/* Whether task_id lies within the launches seen on (device, stream):
 * from the first to the last (ids compare modulo 2^32). */
int		 join_in_window(const struct join *, uint32_t device,
		     uint32_t stream, uint32_t task_id);
/* Calls cb with the first and last task id launched on every stream. */
void		 join_stream_foreach(const struct join *,
		     void (*cb)(uint32_t device, uint32_t stream, uint32_t first,
		     uint32_t last, void *), void *arg);

#endif

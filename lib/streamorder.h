/*
 * streamorder: a device stream runs its tasks one after the other, so
 * their host-time records must not overlap either.  Device times are
 * converted with a clock model that is refitted as samples come; two
 * back-to-back tasks converted under two fits can overlap (or part) in
 * host time.  streamorder_apply moves a task that started on the device
 * at or after its predecessor's end so that it does not start before the
 * predecessor's converted end, keeping its device duration.  Used by the
 * daemon's device collector (one table per device channel) and by the
 * agent's in-process reader, so both give the same times.
 *
 * Keyed by (pid, stream): stream ids are a process's own.  The table is
 * fixed (STREAMORDER_SLOTS per device, a few probes); a stream that finds
 * no slot takes over the least recently used of its probe window, which
 * at worst loses the rule for one task of the stream evicted.
 * Pure computation, no locking: one owner per table.
 */
#ifndef MSPTI_STREAMORDER_H
#define MSPTI_STREAMORDER_H

#include <stdbool.h>
#include <stdint.h>

#define STREAMORDER_SLOTS	256u	/* power of two */
#define STREAMORDER_PROBES	8u

struct streamorder_slot {
	uint32_t	pid;
	uint32_t	stream;
	uint64_t	dev_end;	/* device end of the stream's last task */
	uint64_t	end;		/* its host end, as emitted */
	uint64_t	used;		/* 0: free; else the table's clock */
};

struct streamorder {
	struct streamorder_slot	slot[STREAMORDER_SLOTS];
	uint64_t		clock;
};

/* Zeroed (or streamorder_init) is an empty table. */
void	streamorder_init(struct streamorder *);

/*
 * A task of (pid, stream) that ran from dev_start to dev_end on the
 * device, converted to host *start, *end (end >= start): moves both later
 * when the task would start before its predecessor's host end, and
 * remembers the task as the stream's last when it is the latest.
 * Records may come out of device order (the rule then leaves them).
 */
void	streamorder_apply(struct streamorder *, uint32_t pid, uint32_t stream,
	    uint64_t dev_start, uint64_t dev_end, uint64_t *start,
	    uint64_t *end);

#endif

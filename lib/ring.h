/*
 * The shared-memory ring between an agent (producers) and msptid (the
 * consumer).  One ring per (session, agent): a sealed memfd that the daemon
 * creates and maps, then passes to the agent, which maps it too.
 *
 * Producers (any number of threads of one agent, or processes sharing the
 * mapping) reserve space by CAS on the head counter, write the record body,
 * then publish it with a release store of its 8-byte header (the commit
 * word).  A full ring drops the record and counts it in the shared header;
 * producers never block and never wait for the consumer.
 *
 * The single consumer reads committed records in order, stops at the first
 * uncommitted one, copies each run of committed records out of the shared
 * memory (one memcpy per run), validates every record of the copy
 * (record_validate) and hands it to a callback, zeroes the space and
 * advances the tail.  Everything in the mapping is untrusted: the
 * consumer keeps its own tail and capacity, never reads outside the
 * mapping, and bounds the work of each drain.
 */
#ifndef MSPTI_RING_H
#define MSPTI_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

#define RING_MAGIC		0x474e49525450534dull	/* "MSPTRING" little-endian */
#define RING_VERSION		1
#define RING_HDR_SIZE		4096	/* the shared header page */
#define RING_MIN_CAPACITY	4096
#define RING_MAX_CAPACITY	(1ull << 30)
#define RING_DEFAULT_CAPACITY	(8u << 20)
#define RING_MAX_RESYNC		64	/* framing errors before "corrupt" */

/* Byte offsets of the shared header's fields (u64 unless noted), for tests
 * and tools that must look at a ring from outside. */
#define RING_OFF_MAGIC		0
#define RING_OFF_VERSION	8	/* u32 */
#define RING_OFF_HDR_SIZE	12	/* u32 */
#define RING_OFF_CAPACITY	16
#define RING_OFF_HEAD		128
#define RING_OFF_TAIL		256
#define RING_OFF_DROPS		384
#define RING_OFF_DROP_BYTES	392
#define RING_OFF_WAKE_ARMED	512	/* u32 */
#define RING_OFF_WAKE_THRESHOLD	520

struct ring;

struct ring_stats {
	uint64_t	capacity;
	uint64_t	pending;	/* bytes reserved, not yet drained */
	/* Reported by producers through the shared header (untrusted). */
	uint64_t	drops;		/* records dropped: ring full */
	uint64_t	drop_bytes;
	/* Counted by this process's consumer side. */
	uint64_t	records;	/* records delivered to callbacks */
	uint64_t	bytes;
	uint64_t	rejects;	/* records failing validation */
	uint64_t	reject_bytes;	/* incl. bytes skipped by resyncs */
	uint64_t	resyncs;	/* framing errors survived */
	bool		corrupt;	/* drain refuses to continue */
};

/*
 * Creates a ring with capacity bytes of data (a power of two within
 * [RING_MIN_CAPACITY, RING_MAX_CAPACITY]) as a sealed memfd (shrink, grow
 * and further sealing forbidden).  Stores the fd (O_CLOEXEC) in *fdp.
 * Returns 0 or -EINVAL / -errno.
 */
int	ring_create(size_t capacity, int *fdp);

/*
 * Maps the ring in fd after checking its seals, size (fstat), magic,
 * version and capacity.  The fd may be closed afterwards.  *ringp is freed
 * with ring_unmap.  Returns 0, -EPROTO (not a ring or wrong version),
 * -EINVAL (inconsistent size or seals) or -errno.
 */
int	ring_map(int fd, struct ring **ringp);

/* Unmaps; NULL is a no-op. */
void	ring_unmap(struct ring *ring);

/* The largest record this ring accepts (min(REC_MAX_SIZE, capacity / 4)). */
size_t	ring_max_record(const struct ring *ring);

/*
 * Producer side, lock-free.  ring_reserve finds len bytes (a multiple of 8,
 * header included) and returns in *pp where to write the record; the caller
 * fills bytes 8..len and then calls ring_commit with the header, which
 * publishes the record.  Every successful reserve must be committed, soon:
 * the consumer stops at an uncommitted record.  Returns 0, -ENOSPC (full:
 * dropped and counted), -EMSGSIZE (len too large; also counted) or -EINVAL.
 */
int	ring_reserve(struct ring *ring, size_t len, void **pp);
void	ring_commit(void *p, const struct rec_hdr *hdr);

/* Reserves, copies rec (rec->size bytes) and commits.  Same returns. */
int	ring_write(struct ring *ring, const void *rec);

/*
 * True when the producer that just wrote should wake the consumer (write
 * its eventfd): the consumer armed the wake and the ring holds at least the
 * threshold it asked for.  At most one caller sees true per arming.  When
 * not armed this is one relaxed load: call it after every write.
 */
bool	ring_needs_wake(struct ring *ring);

/*
 * Consumer side.  Arms the wake hint before the consumer sleeps: the next
 * producer that finds threshold bytes or more pending asks for a wake
 * (threshold 0: any record).  After arming, the consumer should check
 * ring_pending() once more, to catch records that raced the arming.
 */
void	ring_arm_wake(struct ring *ring, uint64_t threshold);

/* Bytes reserved by producers and not yet drained (capped at capacity). */
uint64_t	ring_pending(const struct ring *ring);

/*
 * Called with a private, validated copy of each record (8-byte aligned,
 * valid until the callback returns; the consumer's own memory, never the
 * shared mapping, so the callback may rewrite it in place).  PAD records
 * are not delivered.  Return 0 to go on, nonzero to stop after this record.
 */
typedef int (*ring_drain_cb)(const struct rec_hdr *rec, void *arg);

/*
 * Drains at most max committed records (and at most one capacity worth of
 * bytes).  Invalid records are skipped and counted; a framing error (a
 * size that cannot be right) skips everything up to the producers' head
 * and counts it; after RING_MAX_RESYNC of those, or a head that is not
 * within one capacity of the tail, the ring is marked corrupt.  Returns the
 * number of records delivered, or -EBADMSG when the ring is corrupt.
 */
int	ring_drain(struct ring *ring, ring_drain_cb cb, void *arg, size_t max);

/* Counters: consumer side from this process, producer side from the
 * shared header. */
void	ring_get_stats(const struct ring *ring, struct ring_stats *st);

/* Text for the negative errno-style codes above. */
const char	*ring_strerror(int err);

#endif

/*
 * The shared-memory ring between an agent (producers) and msptid (the
 * consumer).  One ring per (session, agent): a sealed memfd that the daemon
 * creates and maps, then passes to the agent, which maps it too.
 *
 * A ring is a set of segments of the same capacity (format version 2).
 * Segment 0 is shared: any number of producers reserve space in it by CAS
 * on its head.  Segments 1..nseg-1 are per thread: a producing thread
 * claims a free one on its first record (ring_producer_claim) and is then
 * its only producer, so it reserves with plain loads and stores on cache
 * lines no other producer touches; a thread that finds none free, or a
 * nested call (a signal handler inside the sink), writes to segment 0.
 * Every segment counts its own drops (ring full), so loss is exact per
 * segment.  A producer writes the record body, then publishes it with a
 * release store of its 8-byte header (the commit word).  Producers never
 * block and never wait for the consumer.
 *
 * The single consumer drains the segments one after another (the merge:
 * records keep their order within a segment, segments are interleaved per
 * drain), reads committed records in order, stops at the first
 * uncommitted one, copies each run of committed records out of the shared
 * memory (one memcpy per run), validates every record of the copy
 * (record_validate) and hands it to a callback, zeroes the space and
 * advances the segment's tail.  Everything in the mapping is untrusted:
 * the consumer keeps its own tails and geometry, never reads outside the
 * mapping, and bounds the work of each drain.
 */
#ifndef MSPTI_RING_H
#define MSPTI_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "record.h"

#define RING_MAGIC		0x474e49525450534dull	/* "MSPTRING" little-endian */
#define RING_VERSION		2	/* 1: one segment, no nseg field */
#define RING_HDR_SIZE		4096	/* the shared header page */
#define RING_MIN_CAPACITY	4096
#define RING_MAX_CAPACITY	(1ull << 30)
#define RING_DEFAULT_CAPACITY	(8u << 20)
#define RING_MAX_RESYNC		64	/* framing errors before "corrupt" */
#define RING_MAX_SEGMENTS	64
#define RING_DEFAULT_SEGMENTS	9	/* the shared one and 8 per thread */

/* Byte offsets of the shared header's fields (u64 unless noted), for tests
 * and tools that must look at a ring from outside.  Segment i (header page
 * then capacity bytes of data) starts at i * (RING_HDR_SIZE + capacity);
 * head to wake_threshold are per segment, at these offsets in its header
 * page; magic, version, hdr_size, capacity and nseg count in segment 0's
 * only. */
#define RING_OFF_MAGIC		0
#define RING_OFF_VERSION	8	/* u32 */
#define RING_OFF_HDR_SIZE	12	/* u32 */
#define RING_OFF_CAPACITY	16	/* of each segment */
#define RING_OFF_NSEG		24	/* u32: segments in the file */
#define RING_OFF_HEAD		128
#define RING_OFF_TAIL		256
#define RING_OFF_DROPS		384
#define RING_OFF_DROP_BYTES	392
#define RING_OFF_WAKE_ARMED	512	/* u32 */
#define RING_OFF_WAKE_THRESHOLD	520

struct ring;

/*
 * One thread's handle on the segment it writes to (its own memory, never
 * shared).  Filled by ring_producer_claim; the fields are ring.c's (and
 * the inline fast paths' below: ring_preserve, ring_pneeds_wake).
 */
struct ring_producer {
	struct ring	*ring;
	void		*sh;		/* the segment's shared header */
	uint8_t		*data;
	uint64_t	 mask;
	uint64_t	 maxrec;
	uint64_t	 head;		/* own head (the shared one is a copy) */
	uint64_t	 tail;		/* the consumer's tail, as last read */
	uint64_t	 lim;		/* head it may reach without a look */
	uint64_t	 wake_at;	/* head below which no wake is due */
	unsigned	 seg;		/* 0: the shared segment */
};

struct ring_stats {
	uint64_t	capacity;	/* of one segment */
	uint32_t	segments;
	uint64_t	pending;	/* all segments */	/* bytes reserved, not yet drained */
	/* Reported by producers through the shared headers (untrusted),
	 * summed over the segments. */
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

/* ring_create with nseg segments of capacity bytes each (1..
 * RING_MAX_SEGMENTS); ring_create makes one. */
int	ring_create_segs(size_t capacity, unsigned nseg, int *fdp);

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

/* Segments in the ring (1..RING_MAX_SEGMENTS). */
unsigned	ring_segments(const struct ring *ring);

/* Faults in segment seg's pages (once per mapping; ring_map does none,
 * ring_producer_claim the one it claims): a caller off the hot path may
 * do it ahead of the threads that will write there (the agent does the
 * shared segment and the first claimed one once it has acked the start;
 * the daemon, which only reads, none). */
void	ring_populate(struct ring *ring, unsigned seg);

/*
 * Producer side, lock-free, on the shared segment 0.  ring_reserve finds len bytes (a multiple of 8,
 * header included) and returns in *pp where to write the record; the caller
 * fills bytes 8..len and then calls ring_commit with the header, which
 * publishes the record.  Every successful reserve must be committed, soon:
 * the consumer stops at an uncommitted record.  Returns 0, -ENOSPC (full:
 * dropped and counted), -EMSGSIZE (len too large; also counted) or -EINVAL.
 */
int	ring_reserve(struct ring *ring, size_t len, void **pp);
static inline void
ring_commit(void *p, const struct rec_hdr *hdr)
{
	uint64_t word;

	memcpy(&word, hdr, sizeof word);
	/* Release: the record's bytes before its header. */
	__atomic_store_n((uint64_t *)p, word, __ATOMIC_RELEASE);
}

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
 * Per-thread producers.  ring_producer_claim gives p a segment of its own
 * (the lowest free one; its pages are faulted in now, unless
 * ring_populate did it or the ring is lazy) or, when all are taken, the
 * shared segment 0; returns the segment.
 * One thread, and no nested call, may use p at a time.  ring_producer_
 * release frees the segment for another thread (once p is no longer used).
 * ring_preserve, ring_pcommit (= ring_commit), ring_pwrite and
 * ring_pneeds_wake are the calls above on p's segment.
 */
unsigned	ring_producer_claim(struct ring *ring, struct ring_producer *p);
/* With lazy set, ring_producer_claim leaves a segment's pages to fault in
 * on use, for the owner to ring_populate from a thread of its own (a
 * segment is megabytes: populating it took the claiming thread ~5 ms). */
void	ring_set_lazy(struct ring *ring, bool lazy);
/*
 * Lazy rings, progressively: a short capture writes far less than a
 * segment, and populating all of it (then freeing it at the end) cost
 * milliseconds of CPU per segment and session.  ring_populate_ahead
 * populates segment seg to four times its producer's head plus 1 MiB, from
 * one thread off the hot path; a producer whose head passes half the
 * populated part on its first lap calls the hook (from its write, at most
 * once a chunk of 256 KiB: it must be cheap and must not write to the
 * ring), whose owner then calls ring_populate_ahead.
 * Pages not populated yet fault in as they are written.
 * ring_populated: the data bytes of seg populated so far.
 */
typedef void (*ring_populate_fn)(struct ring *ring, unsigned seg, void *arg);
void	ring_set_populate_hook(struct ring *ring, ring_populate_fn fn,
	    void *arg);
void	ring_populate_ahead(struct ring *ring, unsigned seg);
uint64_t	ring_populated(const struct ring *ring, unsigned seg);
/* The least that ring_populate_ahead gives seg (bytes, at most a
 * capacity; set before producers start): e.g. what was written there in
 * the process's previous session, so that a thread that writes a burst
 * at the start of every session has its pages ready for it. */
void	ring_set_populate_hint(struct ring *ring, unsigned seg,
	    uint64_t bytes);
/* Bytes producers reserved in seg so far (its head, as this process
 * mapped it). */
uint64_t	ring_written(const struct ring *ring, unsigned seg);
/* Sets p up on the shared segment 0 (any number of threads may use it). */
void	ring_producer_shared(struct ring *ring, struct ring_producer *p);
void	ring_producer_release(struct ring_producer *p);
int	ring_preserve_slow(struct ring_producer *p, size_t len, void **pp);
bool	ring_pneeds_wake_slow(struct ring_producer *p);
/* ring_pwrite, but a full segment does not count a drop (for what is not
 * a record of its own, e.g. a STRING_DEF: the caller then drops the record
 * that needed it with ring_pdrop, so the loss counts records, once each). */
int	ring_pwrite_nodrop(struct ring_producer *p, const void *rec);
void	ring_pdrop(struct ring_producer *p, size_t len);

#define RING_PREFETCH	512	/* bytes ahead of the head a producer prefetches */

/* ring_preserve: its common case inline (the MSTX hot path), a record
 * that fits below what p may reach without a look, no wrap; the rest,
 * the shared segment and a bad length out of line (ring_preserve_slow).
 * The shared head is a copy of p's (ring.c), stored as the slow path
 * stores it. */
static inline int
ring_preserve(struct ring_producer *p, size_t len, void **pp)
{
	uint64_t h = p->head, off = h & p->mask;

	if (__builtin_expect(p->seg == 0 || len < REC_HDR_SIZE || (len & 7) ||
	    len > p->maxrec || off + len > p->mask + 1 || h + len > p->lim,
	    0))
		return ring_preserve_slow(p, len, pp);
	p->head = h + len;
	__atomic_store_n((uint64_t *)(void *)((char *)p->sh + RING_OFF_HEAD),
	    h + len, __ATOMIC_RELAXED);
	*pp = p->data + off;
	/* The first lap over a fresh segment misses on every line else. */
	__builtin_prefetch(p->data + ((h + len + RING_PREFETCH) & p->mask),
	    1, 3);
	return 0;
}

/* ring_pwrite: ring_preserve, the record's bytes past its header, the
 * header (inline, as ring_preserve). */
static inline int
ring_pwrite(struct ring_producer *p, const void *rec)
{
	const struct rec_hdr *h = rec;
	void *q;
	int rc;

	if ((rc = ring_preserve(p, h->size, &q)) != 0)
		return rc;
	memcpy((uint8_t *)q + REC_HDR_SIZE, (const uint8_t *)rec + REC_HDR_SIZE,
	    h->size - REC_HDR_SIZE);
	ring_commit(q, h);
	return 0;
}

/* ring_pneeds_wake inline: the wake is not armed (the consumer is
 * draining), or armed and the head is short of where the threshold was
 * when the producer last looked (ring_pneeds_wake_slow). */
static inline bool
ring_pneeds_wake(struct ring_producer *p)
{
	if (!__atomic_load_n((uint32_t *)(void *)((char *)p->sh +
	    RING_OFF_WAKE_ARMED), __ATOMIC_RELAXED) || p->head < p->wake_at)
		return false;
	return ring_pneeds_wake_slow(p);
}

/*
 * Consumer side.  Arms the wake hint of every segment before the consumer
 * sleeps: the next producer that finds threshold bytes or more pending in
 * its segment asks for a wake
 * (threshold 0: any record).  After arming, the consumer should check
 * ring_pending() once more, to catch records that raced the arming.
 * The threshold must not fall while producers write: a producer below
 * it remembers the head at which it may next be due (tail + threshold;
 * the tail only grows) and does not look again before.
 */
void	ring_arm_wake(struct ring *ring, uint64_t threshold);

/* Bytes reserved by producers and not yet drained (each segment's capped at
 * its capacity), all segments. */
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
 * bytes per segment), the segments in turn (the first one rotates from
 * call to call).  Invalid records are skipped and counted; a framing error (a
 * size that cannot be right) skips everything up to the producers' head
 * and counts it; after RING_MAX_RESYNC of those, or a head that is not
 * within one capacity of the tail, the ring is marked corrupt.  Returns the
 * number of records delivered, or -EBADMSG when the ring is corrupt.
 */
int	ring_drain(struct ring *ring, ring_drain_cb cb, void *arg, size_t max);

/* Counters: consumer side from this process, producer side from the
 * shared header. */
void	ring_get_stats(const struct ring *ring, struct ring_stats *st);

/* One segment's own drop counters (shared header, untrusted); -EINVAL for
 * a segment the ring does not have. */
int	ring_seg_drops(const struct ring *ring, unsigned seg, uint64_t *drops,
	    uint64_t *drop_bytes);

/* Text for the negative errno-style codes above. */
const char	*ring_strerror(int err);

#endif

/*
 * The shared-memory ring (see ring.h for the contract).
 *
 * Layout of the memfd: nseg segments, each one header page (struct
 * ring_shared) then capacity bytes of data, capacity a power of two.  In
 * each segment head and tail are byte counters that only grow; a
 * position's offset in the data is counter & (capacity-1).
 *
 * Memory ordering, written once here (per segment):
 * - A producer loads tail with acquire before it writes into space that the
 *   consumer freed; the consumer zeroes that space before it stores tail
 *   with release.  So a producer never sees stale bytes of an old record
 *   become visible after its own.
 * - A producer reserves by moving head (CAS in the shared segment 0, a
 *   plain store by the owner of a per-thread one; relaxed: head carries no
 *   data), writes the body, then stores the 8-byte header with release.
 *   The consumer loads the header with acquire; nonzero means the body is
 *   complete.
 * - Record space is zero while free, so "header word == 0" is "not yet
 *   committed".  A record never straddles the end of the data: a producer
 *   whose record would, reserves the rest of the lap too and fills it with a
 *   REC_PAD record (always shorter than the record, so it fits in u16).
 * - The owner of a per-thread segment keeps its own head and the last tail
 *   it read, and reads the consumer's tail again only when that old tail
 *   says the segment is full: its hot path touches only its own lines.
 *   Which segments are owned is the producing process's private bitmap,
 *   never the shared memory.
 *
 * The consumer trusts nothing in the mapping: it keeps its own tails and
 * geometry, bounds every loop by the head it read once per drain, which
 * must be within one capacity, and never validates or delivers shared
 * bytes: it finds a run of committed records by their headers (acquire
 * loads), copies the run into private memory in one memcpy, and checks the
 * framing and every record again in that copy.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "ring.h"

/* Bytes the consumer copies out of the ring at once (>= REC_MAX_SIZE). */
#define RING_BATCH	65536
_Static_assert(RING_BATCH >= REC_MAX_SIZE, "ring batch");

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

/* Counters written by different sides sit on separate cache-line pairs.
 * The geometry counts in segment 0's header only. */
struct ring_shared {
	uint64_t		magic;
	uint32_t		version;
	uint32_t		hdr_size;
	uint64_t		capacity;
	uint32_t		nseg;
	uint32_t		pad0;
	alignas(128) _Atomic uint64_t	head;		/* producers */
	alignas(128) _Atomic uint64_t	tail;		/* consumer */
	alignas(128) _Atomic uint64_t	drops;		/* producers, rarely */
	_Atomic uint64_t	drop_bytes;
	alignas(128) _Atomic uint32_t	wake_armed;	/* consumer arms */
	_Atomic uint64_t	wake_threshold;
};

_Static_assert(sizeof(struct ring_shared) <= RING_HDR_SIZE, "ring header");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "atomic u64");
#define RING_OFF_OK(f, o) \
	_Static_assert(offsetof(struct ring_shared, f) == (o), #f)
RING_OFF_OK(magic, RING_OFF_MAGIC);
RING_OFF_OK(version, RING_OFF_VERSION);
RING_OFF_OK(hdr_size, RING_OFF_HDR_SIZE);
RING_OFF_OK(capacity, RING_OFF_CAPACITY);
RING_OFF_OK(nseg, RING_OFF_NSEG);
RING_OFF_OK(head, RING_OFF_HEAD);
RING_OFF_OK(tail, RING_OFF_TAIL);
RING_OFF_OK(drops, RING_OFF_DROPS);
RING_OFF_OK(drop_bytes, RING_OFF_DROP_BYTES);
RING_OFF_OK(wake_armed, RING_OFF_WAKE_ARMED);
RING_OFF_OK(wake_threshold, RING_OFF_WAKE_THRESHOLD);

struct ring_seg {
	struct ring_shared	*sh;
	uint8_t			*data;
	uint64_t		 tail;		/* consumer side, private */
};

struct ring {
	/* Read by producers of segment 0 on every write: keep together. */
	struct ring_shared	*sh;		/* segment 0's */
	uint8_t			*data;
	uint64_t		 cap;
	uint64_t		 mask;
	size_t			 maxrec;
	size_t			 maplen;
	unsigned		 nseg;
	/* Producer side: per-thread segments taken (bit i: segment i). */
	alignas(64) _Atomic uint64_t claimed;
	bool			 lazy;		/* claim leaves populating to
						   the owner (ring_set_lazy) */
	/* The data bytes of each segment this process populated so far
	 * (the capacity: all of it), and, lazy, who hears that a producer
	 * came near their end (ring_set_populate_hook). */
	_Atomic uint64_t	 pop_to[RING_MAX_SEGMENTS];
	uint64_t		 pop_hint[RING_MAX_SEGMENTS];
	ring_populate_fn	 pop_fn;
	void			*pop_arg;
	/* Consumer side, private. */
	alignas(64) unsigned	 next;		/* segment drained first */
	struct ring_stats	 st;
	uint64_t		 batch[RING_BATCH / 8];	/* private copy */
	struct ring_seg		 seg[];
};

/* Lazy rings: ring_populate_ahead populates a segment to four times its
 * producer's head plus 1 MiB (RING_POP_FIRST), in chunks, and the
 * producer asks for more once its head passes half the populated part:
 * a thread that writes little takes 1 MiB, one that writes fast is kept
 * ahead of, with a lead that doubles each time. */
#define RING_POP_CHUNK	(256u << 10)
#define RING_POP_FIRST	(4 * RING_POP_CHUNK)
_Static_assert(RING_POP_CHUNK >= 2 * REC_MAX_SIZE, "populate chunk");

static int
is_pow2(uint64_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

int
ring_create_segs(size_t capacity, unsigned nseg, int *fdp)
{
	struct ring_shared sh;
	int fd, err;

	if (fdp == NULL || !is_pow2(capacity) || capacity < RING_MIN_CAPACITY ||
	    capacity > RING_MAX_CAPACITY || nseg < 1 ||
	    nseg > RING_MAX_SEGMENTS)
		return -EINVAL;
	fd = memfd_create("mspti-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1)
		return -errno;
	if (ftruncate(fd, (off_t)((RING_HDR_SIZE + capacity) * nseg)) == -1)
		goto fail;
	memset(&sh, 0, sizeof sh);
	sh.magic = RING_MAGIC;
	sh.version = RING_VERSION;
	sh.hdr_size = RING_HDR_SIZE;
	sh.capacity = capacity;
	sh.nseg = nseg;
	/* Every segment's header says the same (for tools); the counters
	 * start at 0 with the file. */
	for (unsigned i = 0; i < nseg; i++)
		if (pwrite(fd, &sh, offsetof(struct ring_shared, head),
		    (off_t)((RING_HDR_SIZE + capacity) * i)) !=
		    (ssize_t)offsetof(struct ring_shared, head)) {
			if (errno == 0)
				errno = EIO;
			goto fail;
		}
	/* A peer that could shrink the file could make our accesses SIGBUS. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
	    == -1)
		goto fail;
	*fdp = fd;
	return 0;
fail:
	err = -errno;
	close(fd);
	return err;
}

int
ring_create(size_t capacity, int *fdp)
{
	return ring_create_segs(capacity, 1, fdp);
}

int
ring_map(int fd, struct ring **ringp)
{
	volatile struct ring_shared *vh;
	struct ring *r;
	struct ring_shared *sh;
	struct stat sb;
	uint64_t cap;
	uint32_t nseg;
	size_t len;
	int seals;

	if (ringp == NULL)
		return -EINVAL;
	*ringp = NULL;
	if (fstat(fd, &sb) == -1)
		return -errno;
	if (!S_ISREG(sb.st_mode) || sb.st_size <= RING_HDR_SIZE ||
	    (uint64_t)sb.st_size > (RING_HDR_SIZE + RING_MAX_CAPACITY) *
	    (uint64_t)RING_MAX_SEGMENTS)
		return -EINVAL;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals == -1 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
	    (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EINVAL;
	len = (size_t)sb.st_size;
	/* Not populated: per-thread segments get their pages when claimed. */
	sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (sh == MAP_FAILED)
		return -errno;
	/* Read the geometry once; from now on only our copy counts. */
	vh = (volatile struct ring_shared *)sh;
	cap = vh->capacity;
	nseg = vh->nseg;
	if (vh->magic != RING_MAGIC || vh->version != RING_VERSION ||
	    vh->hdr_size != RING_HDR_SIZE) {
		munmap(sh, len);
		return -EPROTO;
	}
	if (!is_pow2(cap) || cap < RING_MIN_CAPACITY ||
	    cap > RING_MAX_CAPACITY || nseg < 1 || nseg > RING_MAX_SEGMENTS ||
	    (RING_HDR_SIZE + cap) * nseg != len) {
		munmap(sh, len);
		return -EINVAL;
	}
	if ((r = calloc(1, sizeof(*r) + nseg * sizeof(r->seg[0]))) == NULL) {
		munmap(sh, len);
		return -ENOMEM;
	}
	r->sh = sh;
	r->data = (uint8_t *)sh + RING_HDR_SIZE;
	r->cap = cap;
	r->mask = cap - 1;
	r->maxrec = cap / 4 < REC_MAX_SIZE ? cap / 4 : REC_MAX_SIZE;
	r->maplen = len;
	r->nseg = nseg;
	for (unsigned i = 0; i < nseg; i++) {
		struct ring_seg *sg = &r->seg[i];

		sg->sh = (struct ring_shared *)(void *)((uint8_t *)sh +
		    (RING_HDR_SIZE + cap) * i);
		sg->data = (uint8_t *)sg->sh + RING_HDR_SIZE;
		sg->tail = atomic_load_explicit(&sg->sh->tail,
		    memory_order_acquire);
	}
	r->st.capacity = cap;
	r->st.segments = nseg;
	*ringp = r;
	return 0;
}

void
ring_unmap(struct ring *r)
{
	if (r == NULL)
		return;
	munmap(r->sh, r->maplen);
	free(r);
}

size_t
ring_max_record(const struct ring *r)
{
	return r->maxrec;
}

unsigned
ring_segments(const struct ring *r)
{
	return r->nseg;
}

void
ring_populate(struct ring *r, unsigned seg)
{
	/* Once: the first caller to mark it whole does it. */
	if (seg >= r->nseg || atomic_exchange_explicit(&r->pop_to[seg], r->cap,
	    memory_order_relaxed) >= r->cap)
		return;
	/* Best effort: an older kernel faults on first touch instead. */
	(void)madvise(r->seg[seg].sh, RING_HDR_SIZE + r->cap,
	    MADV_POPULATE_WRITE);
}

void
ring_populate_ahead(struct ring *r, unsigned seg)
{
	uint64_t from, to, h;

	if (seg >= r->nseg)
		return;
	from = atomic_load_explicit(&r->pop_to[seg], memory_order_relaxed);
	if (from >= r->cap)
		return;
	/* The producer's head (its own copy in the header, relaxed: a
	 * hint).  Past the first lap every page was written already. */
	h = atomic_load_explicit(&r->seg[seg].sh->head, memory_order_relaxed);
	to = h >= r->cap / 4 ? r->cap : ((4 * h + RING_POP_CHUNK - 1) &
	    ~(uint64_t)(RING_POP_CHUNK - 1)) + RING_POP_FIRST;
	if (to < r->pop_hint[seg])
		to = (r->pop_hint[seg] + RING_POP_CHUNK - 1) &
		    ~(uint64_t)(RING_POP_CHUNK - 1);
	if (to > r->cap)
		to = r->cap;
	if (to <= from)
		return;
	/* The header page with the first chunk. */
	if (from == 0)
		(void)madvise(r->seg[seg].sh, RING_HDR_SIZE + to,
		    MADV_POPULATE_WRITE);
	else
		(void)madvise(r->seg[seg].data + from, to - from,
		    MADV_POPULATE_WRITE);
	atomic_store_explicit(&r->pop_to[seg], to, memory_order_relaxed);
}

uint64_t
ring_populated(const struct ring *r, unsigned seg)
{
	return seg < r->nseg ? atomic_load_explicit(
	    &((struct ring *)r)->pop_to[seg], memory_order_relaxed) : 0;
}

void
ring_set_lazy(struct ring *r, bool lazy)
{
	r->lazy = lazy;
}

void
ring_set_populate_hint(struct ring *r, unsigned seg, uint64_t bytes)
{
	if (seg < r->nseg)
		r->pop_hint[seg] = bytes < r->cap ? bytes : r->cap;
}

uint64_t
ring_written(const struct ring *r, unsigned seg)
{
	return seg < r->nseg ? atomic_load_explicit(&r->seg[seg].sh->head,
	    memory_order_relaxed) : 0;
}

void
ring_set_populate_hook(struct ring *r, ring_populate_fn fn, void *arg)
{
	r->pop_fn = fn;
	r->pop_arg = arg;
}

/*
 * The head up to which p writes without a second look (ring_preserve_):
 * the end of the space free by the tail it knows; on a lazy ring's
 * first lap, also half the populated part, where it asks the hook for
 * more (not answered yet: again a chunk later).
 */
static uint64_t
ring_plim(struct ring_producer *p)
{
	struct ring *r = p->ring;
	uint64_t lim = p->tail + p->mask + 1, pop, mark;

	if (!r->lazy || p->head >= r->cap)
		return lim;
	pop = atomic_load_explicit(&r->pop_to[p->seg], memory_order_relaxed);
	if (pop >= r->cap)
		return lim;
	mark = pop / 2;
	if (p->head >= mark) {
		if (r->pop_fn != NULL)
			r->pop_fn(r, p->seg, r->pop_arg);
		mark = p->head + RING_POP_CHUNK;
	}
	return mark < lim ? mark : lim;
}

static void
ring_count_drop(struct ring *r, size_t len)
{
	atomic_fetch_add_explicit(&r->sh->drops, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->sh->drop_bytes, len, memory_order_relaxed);
}

static inline void
ring_store_word(void *p, uint64_t word)
{
	atomic_store_explicit((_Atomic uint64_t *)p, word, memory_order_release);
}

static int ring_reserve_(struct ring *r, size_t len, void **pp, bool count);

int
ring_reserve(struct ring *r, size_t len, void **pp)
{
	return ring_reserve_(r, len, pp, true);
}

/* ring_reserve; a full ring counts the drop only when count is set. */
static int
ring_reserve_(struct ring *r, size_t len, void **pp, bool count)
{
	struct ring_shared *sh = r->sh;
	uint64_t h, t, off, pad, need;
	unsigned stale = 0;

	if (__builtin_expect(len < REC_HDR_SIZE || (len & 7), 0))
		return -EINVAL;
	if (__builtin_expect(len > r->maxrec, 0)) {
		ring_count_drop(r, len);
		return -EMSGSIZE;
	}
	h = atomic_load_explicit(&sh->head, memory_order_relaxed);
	for (;;) {
		off = h & r->mask;
		pad = off + len > r->cap ? r->cap - off : 0;
		need = pad + len;
		t = atomic_load_explicit(&sh->tail, memory_order_acquire);
		if (__builtin_expect((int64_t)(h - t) < 0, 0)) {
			/* Our head is older than the tail: reload, a bounded
			 * number of times (a broken tail must not trap us). */
			if (++stale > 8) {
				if (count)
					ring_count_drop(r, len);
				return -ENOSPC;
			}
			h = atomic_load_explicit(&sh->head,
			    memory_order_relaxed);
			continue;
		}
		if (__builtin_expect(h - t > r->cap - need, 0)) {
			if (count)
				ring_count_drop(r, len);
			return -ENOSPC;
		}
		if (atomic_compare_exchange_weak_explicit(&sh->head, &h,
		    h + need, memory_order_relaxed, memory_order_relaxed))
			break;
	}
	if (pad != 0)
		ring_store_word(r->data + off,
		    REC_PAD | (uint64_t)pad << 16);
	*pp = r->data + ((h + pad) & r->mask);
	/* Ask for the lines the next records go to: the first lap over a
	 * fresh ring misses the cache on every line otherwise. */
	__builtin_prefetch(r->data + ((h + need + RING_PREFETCH) & r->mask),
	    1, 3);
	return 0;
}

int
ring_write(struct ring *r, const void *rec)
{
	const struct rec_hdr *h = rec;
	void *p;
	int rc;

	if ((rc = ring_reserve(r, h->size, &p)) != 0)
		return rc;
	memcpy((uint8_t *)p + REC_HDR_SIZE, (const uint8_t *)rec + REC_HDR_SIZE,
	    h->size - REC_HDR_SIZE);
	ring_commit(p, h);
	return 0;
}

/* Bytes of segment sh between tail and head h (capped at cap). */
static inline uint64_t
ring_seg_pending(const struct ring_shared *sh, uint64_t h, uint64_t cap)
{
	uint64_t t = atomic_load_explicit(&((struct ring_shared *)sh)->tail,
	    memory_order_acquire);

	return h - t > cap ? cap : h - t;
}

uint64_t
ring_pending(const struct ring *r)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < r->nseg; i++) {
		struct ring_shared *sh = r->seg[i].sh;

		sum += ring_seg_pending(sh, atomic_load_explicit(&sh->head,
		    memory_order_acquire), r->cap);
	}
	return sum;
}

/* The wake test of one segment whose head is h (see ring_needs_wake). */
static inline bool
ring_seg_needs_wake(struct ring_shared *sh, uint64_t h, uint64_t cap)
{
	if (__builtin_expect(!atomic_load_explicit(&sh->wake_armed,
	    memory_order_relaxed), 1))
		return false;
	if (ring_seg_pending(sh, h, cap) < atomic_load_explicit(
	    &sh->wake_threshold, memory_order_relaxed))
		return false;
	return atomic_exchange_explicit(&sh->wake_armed, 0,
	    memory_order_acq_rel) != 0;
}

bool
ring_needs_wake(struct ring *r)
{
	return ring_seg_needs_wake(r->sh, atomic_load_explicit(&r->sh->head,
	    memory_order_acquire), r->cap);
}

void
ring_arm_wake(struct ring *r, uint64_t threshold)
{
	for (unsigned i = 0; i < r->nseg; i++) {
		struct ring_shared *sh = r->seg[i].sh;

		atomic_store_explicit(&sh->wake_threshold, threshold,
		    memory_order_relaxed);
		atomic_store_explicit(&sh->wake_armed, 1, memory_order_seq_cst);
	}
}

unsigned
ring_producer_claim(struct ring *r, struct ring_producer *p)
{
	uint64_t c, all, free_;
	unsigned i = 0;

	all = r->nseg >= 64 ? ~1ull : ((1ull << r->nseg) - 1) & ~1ull;
	c = atomic_load_explicit(&r->claimed, memory_order_relaxed);
	for (;;) {
		free_ = ~c & all;
		if (free_ == 0) {
			i = 0;
			break;
		}
		i = (unsigned)__builtin_ctzll(free_);
		/* Acquire: the last owner's head store came before its
		 * release of the bit. */
		if (atomic_compare_exchange_weak_explicit(&r->claimed, &c,
		    c | 1ull << i, memory_order_acq_rel, memory_order_relaxed))
			break;
	}
	memset(p, 0, sizeof(*p));
	p->ring = r;
	p->seg = i;
	p->sh = r->seg[i].sh;
	p->data = r->seg[i].data;
	p->mask = r->mask;
	p->maxrec = r->maxrec;
	if (i != 0) {
		struct ring_shared *sh = p->sh;

		p->head = atomic_load_explicit(&sh->head, memory_order_relaxed);
		p->tail = atomic_load_explicit(&sh->tail, memory_order_acquire);
		/* Its pages now rather than one fault per page on the hot
		 * path (unless done already, or the owner does it). */
		if (!r->lazy)
			ring_populate(r, i);
		p->lim = ring_plim(p);
	}
	return i;
}

void
ring_producer_shared(struct ring *r, struct ring_producer *p)
{
	memset(p, 0, sizeof(*p));
	p->ring = r;
	p->sh = r->sh;
	p->data = r->data;
	p->mask = r->mask;
	p->maxrec = r->maxrec;
}

void
ring_producer_release(struct ring_producer *p)
{
	if (p->ring != NULL && p->seg != 0)
		atomic_fetch_and_explicit(&p->ring->claimed, ~(1ull << p->seg),
		    memory_order_release);
	p->ring = NULL;
}

/* A drop in a segment only its owner writes: no read-modify-write. */
static void
ring_pcount_drop(struct ring_shared *sh, size_t len)
{
	atomic_store_explicit(&sh->drops, atomic_load_explicit(&sh->drops,
	    memory_order_relaxed) + 1, memory_order_relaxed);
	atomic_store_explicit(&sh->drop_bytes, atomic_load_explicit(
	    &sh->drop_bytes, memory_order_relaxed) + len, memory_order_relaxed);
}

/* ring_preserve; a full segment counts the drop only when count is set. */
static inline int
ring_preserve_(struct ring_producer *p, size_t len, void **pp, bool count)
{
	struct ring_shared *sh = p->sh;
	uint64_t h, off, pad, need, cap = p->mask + 1;

	if (__builtin_expect(p->seg == 0, 0))
		return ring_reserve_(p->ring, len, pp, count);
	if (__builtin_expect(len < REC_HDR_SIZE || (len & 7), 0))
		return -EINVAL;
	if (__builtin_expect(len > p->maxrec, 0)) {
		ring_pcount_drop(sh, len);
		return -EMSGSIZE;
	}
	h = p->head;
	off = h & p->mask;
	pad = off + len > cap ? cap - off : 0;
	need = pad + len;
	if (__builtin_expect(h + need > p->lim, 0)) {
		if (h - p->tail > cap - need) {
			/* Full by the tail we knew: read the consumer's
			 * again.  One ahead of our head is broken; it
			 * counts as full. */
			p->tail = atomic_load_explicit(&sh->tail,
			    memory_order_acquire);
			if ((int64_t)(h - p->tail) < 0 ||
			    h - p->tail > cap - need) {
				if (count)
					ring_pcount_drop(sh, len);
				return -ENOSPC;
			}
		}
		p->lim = ring_plim(p);
	}
	if (pad != 0)
		ring_store_word(p->data + off, REC_PAD | (uint64_t)pad << 16);
	p->head = h + need;
	atomic_store_explicit(&sh->head, h + need, memory_order_relaxed);
	*pp = p->data + ((h + pad) & p->mask);
	__builtin_prefetch(p->data + ((h + need + RING_PREFETCH) & p->mask),
	    1, 3);
	return 0;
}

int
ring_preserve_slow(struct ring_producer *p, size_t len, void **pp)
{
	return ring_preserve_(p, len, pp, true);
}

static int
ring_pwrite_(struct ring_producer *p, const void *rec, bool count)
{
	const struct rec_hdr *h = rec;
	void *q;
	int rc;

	if ((rc = ring_preserve_(p, h->size, &q, count)) != 0)
		return rc;
	memcpy((uint8_t *)q + REC_HDR_SIZE, (const uint8_t *)rec + REC_HDR_SIZE,
	    h->size - REC_HDR_SIZE);
	ring_commit(q, h);
	return 0;
}

int
ring_pwrite_nodrop(struct ring_producer *p, const void *rec)
{
	return ring_pwrite_(p, rec, false);
}

void
ring_pdrop(struct ring_producer *p, size_t len)
{
	if (p->seg == 0)
		ring_count_drop(p->ring, len);
	else
		ring_pcount_drop(p->sh, len);
}

bool
ring_pneeds_wake_slow(struct ring_producer *p)
{
	struct ring_shared *sh = p->sh;
	uint64_t t, thr, pend;

	if (__builtin_expect(p->seg == 0, 0))
		return ring_needs_wake(p->ring);
	if (!atomic_load_explicit(&sh->wake_armed, memory_order_relaxed))
		return false;
	t = atomic_load_explicit(&sh->tail, memory_order_acquire);
	thr = atomic_load_explicit(&sh->wake_threshold, memory_order_relaxed);
	pend = p->head - t > p->mask + 1 ? p->mask + 1 : p->head - t;
	if (pend < thr) {
		/* Nothing to ask before the head reaches tail + threshold:
		 * the tail only grows and the threshold stays (ring.h). */
		if (p->head >= t)
			p->wake_at = t + thr;
		return false;
	}
	return atomic_exchange_explicit(&sh->wake_armed, 0,
	    memory_order_acq_rel) != 0;
}

/* Zeroes the data of sg between counters from and to (at most one
 * capacity). */
static void
ring_zero(struct ring *r, struct ring_seg *sg, uint64_t from, uint64_t to)
{
	uint64_t n = to - from, off = from & r->mask, first;

	if (n == 0)
		return;
	if (n > r->cap)
		n = r->cap;
	first = r->cap - off < n ? r->cap - off : n;
	memset(sg->data + off, 0, first);
	if (n > first)
		memset(sg->data, 0, n - first);
}

/* Frees the consumed space [*zfrom, t) of sg and publishes t as its tail. */
static void
ring_release(struct ring *r, struct ring_seg *sg, uint64_t *zfrom, uint64_t t)
{
	ring_zero(r, sg, *zfrom, t);
	*zfrom = t;
	sg->tail = t;
	atomic_store_explicit(&sg->sh->tail, t, memory_order_release);
}
/*
 * Delivers the records of the private copy r->batch[0, span): the copy's
 * framing is checked again (a producer may have rewritten the shared bytes
 * after the acquire loads that found them committed).  Returns the bytes
 * consumed: span, or less when the callback asked to stop.
 */
static uint64_t
ring_deliver(struct ring *r, uint64_t span, ring_drain_cb cb, void *arg,
    size_t *np, int *stopp)
{
	const uint8_t *b = (const uint8_t *)r->batch;
	uint64_t p = 0, word;
	unsigned type, size;

	while (p < span) {
		memcpy(&word, b + p, sizeof word);
		type = word & 0xFFFF;
		size = (word >> 16) & 0xFFFF;
		if (size < REC_HDR_SIZE || (size & 7) || size > span - p) {
			/* Rewritten under us: the rest of the copy is lost. */
			r->st.rejects++;
			r->st.reject_bytes += span - p;
			return span;
		}
		if (type != REC_PAD) {
			/* Framed above: record_validate's result. */
			if (record_validate_framed_fast((const struct rec_hdr *)
			    (const void *)(b + p)) == 0) {
				r->st.records++;
				r->st.bytes += size;
				(*np)++;
				p += size;
				if ((*stopp = cb((const struct rec_hdr *)
				    (b + p - size), arg)) != 0)
					return p;
				continue;
			}
			r->st.rejects++;
			r->st.reject_bytes += size;
		}
		p += size;
	}
	return span;
}

/* Drains segment sg (ring_drain's rules); adds to *np, sets *stopp when
 * the callback asked to stop.  -EBADMSG when the ring became corrupt. */
static int
ring_drain_seg(struct ring *r, struct ring_seg *sg, ring_drain_cb cb,
    void *arg, size_t max, size_t *np, int *stopp)
{
	uint64_t h, t, zfrom, off, room, lim, span, word;
	size_t n = *np, k;
	unsigned type, size;
	int stop = 0;
	bool more, broken;

	h = atomic_load_explicit(&sg->sh->head, memory_order_acquire);
	t = zfrom = sg->tail;
	if (h - t > r->cap) {
		r->st.corrupt = true;
		return -EBADMSG;
	}
	more = true;
	while (t != h && n < max && !stop && more) {
		/*
		 * 1. Walk the shared headers from t (acquire: a nonzero one
		 * makes its body visible) to find a run of committed records,
		 * within this lap and at most RING_BATCH bytes.
		 */
		off = t & r->mask;
		room = r->cap - off < h - t ? r->cap - off : h - t;
		lim = room < RING_BATCH ? room : RING_BATCH;
		span = 0;
		k = 0;
		broken = false;
		while (span < lim && n + k < max) {
			word = atomic_load_explicit((_Atomic uint64_t *)
			    (sg->data + off + span), memory_order_acquire);
			if (word == 0) {
				more = false;	/* not committed yet */
				break;
			}
			type = word & 0xFFFF;
			size = (word >> 16) & 0xFFFF;
			if (size < REC_HDR_SIZE || (size & 7) ||
			    size > room - span ||
			    (type != REC_PAD && size > r->maxrec)) {
				broken = true;
				break;
			}
			if (span + size > lim) {
				if (span == 0) {
					/* A PAD longer than a batch: skip
					 * it without copying. */
					t += size;
					span = UINT64_MAX;
				}
				break;
			}
			span += size;
			if (type != REC_PAD)
				k++;
		}
		if (span == UINT64_MAX)
			continue;
		/*
		 * 2. One copy of the run into private memory; 3. check and
		 * deliver from there, never from the shared bytes.
		 */
		if (span > 0) {
			memcpy(r->batch, sg->data + off, span);
			t += ring_deliver(r, span, cb, arg, &n, &stop);
		}
		if (broken && !stop) {
			/* The framing is lost: skip what producers have
			 * reserved so far and start again at their head. */
			r->st.resyncs++;
			r->st.rejects++;
			r->st.reject_bytes += h - t;
			t = h;
			if (r->st.resyncs > RING_MAX_RESYNC)
				r->st.corrupt = true;
			break;
		}
		/* Free space early when a drain runs long. */
		if (t - zfrom >= r->cap / 4)
			ring_release(r, sg, &zfrom, t);
	}
	ring_release(r, sg, &zfrom, t);
	*np = n;
	*stopp = stop;
	return 0;
}

int
ring_drain(struct ring *r, ring_drain_cb cb, void *arg, size_t max)
{
	size_t n = 0;
	int stop = 0;
	unsigned first = r->next;

	if (r->st.corrupt)
		return -EBADMSG;
	/* The merge: every segment in turn, a different one first each
	 * time, so no thread's segment waits behind the others for ever. */
	r->next = first + 1 < r->nseg ? first + 1 : 0;
	for (unsigned k = 0; k < r->nseg && n < max && !stop; k++) {
		unsigned i = first + k < r->nseg ? first + k : first + k - r->nseg;

		if (ring_drain_seg(r, &r->seg[i], cb, arg, max, &n, &stop) != 0)
			return -EBADMSG;
	}
	return (int)(n > INT32_MAX ? INT32_MAX : n);
}

void
ring_get_stats(const struct ring *r, struct ring_stats *st)
{
	uint64_t d, b;

	*st = r->st;
	st->capacity = r->cap;
	st->segments = r->nseg;
	st->pending = ring_pending(r);
	st->drops = st->drop_bytes = 0;
	for (unsigned i = 0; i < r->nseg; i++) {
		(void)ring_seg_drops(r, i, &d, &b);
		st->drops += d;
		st->drop_bytes += b;
	}
}

int
ring_seg_drops(const struct ring *r, unsigned seg, uint64_t *drops,
    uint64_t *drop_bytes)
{
	if (seg >= r->nseg)
		return -EINVAL;
	*drops = atomic_load_explicit(&r->seg[seg].sh->drops,
	    memory_order_relaxed);
	*drop_bytes = atomic_load_explicit(&r->seg[seg].sh->drop_bytes,
	    memory_order_relaxed);
	return 0;
}

const char *
ring_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -ENOSPC:
		return "ring full, record dropped";
	case -EMSGSIZE:
		return "record larger than the ring accepts";
	case -EBADMSG:
		return "ring corrupt";
	case -EPROTO:
		return "not an mspti ring, or another version";
	case -EINVAL:
		return "invalid ring size, seals or argument";
	}
	return err < 0 ? strerror(-err) : "unknown error";
}

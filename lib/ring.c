/*
 * The shared-memory ring (see ring.h for the contract).
 *
 * Layout of the memfd: one header page (struct ring_shared), then capacity
 * bytes of data, capacity a power of two.  head and tail are byte counters
 * that only grow; a position's offset in the data is counter & (capacity-1).
 *
 * Memory ordering, written once here:
 * - A producer loads tail with acquire before it writes into space that the
 *   consumer freed; the consumer zeroes that space before it stores tail
 *   with release.  So a producer never sees stale bytes of an old record
 *   become visible after its own.
 * - A producer reserves by CAS on head (relaxed: head carries no data), writes
 *   the body, then stores the 8-byte header with release.  The consumer
 *   loads the header with acquire; nonzero means the body is complete.
 * - Record space is zero while free, so "header word == 0" is "not yet
 *   committed".  A record never straddles the end of the data: a producer
 *   whose record would, reserves the rest of the lap too and fills it with a
 *   REC_PAD record (always shorter than the record, so it fits in u16).
 *
 * The consumer trusts nothing in the mapping: it keeps its own tail and
 * capacity, bounds every loop by the head it read once per drain, which
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

/* Counters written by different sides sit on separate cache-line pairs. */
struct ring_shared {
	uint64_t		magic;
	uint32_t		version;
	uint32_t		hdr_size;
	uint64_t		capacity;
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
RING_OFF_OK(head, RING_OFF_HEAD);
RING_OFF_OK(tail, RING_OFF_TAIL);
RING_OFF_OK(drops, RING_OFF_DROPS);
RING_OFF_OK(drop_bytes, RING_OFF_DROP_BYTES);
RING_OFF_OK(wake_armed, RING_OFF_WAKE_ARMED);
RING_OFF_OK(wake_threshold, RING_OFF_WAKE_THRESHOLD);

struct ring {
	/* Read by producers on every write: keep together. */
	struct ring_shared	*sh;
	uint8_t			*data;
	uint64_t		 cap;
	uint64_t		 mask;
	size_t			 maxrec;
	size_t			 maplen;
	/* Consumer side, private. */
	uint64_t		 tail;
	struct ring_stats	 st;
	uint64_t		 batch[RING_BATCH / 8];	/* private copy */
};

#define RING_PREFETCH	512	/* bytes ahead of the head a producer prefetches */

static int
is_pow2(uint64_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

int
ring_create(size_t capacity, int *fdp)
{
	struct ring_shared *sh;
	int fd, err;

	if (fdp == NULL || !is_pow2(capacity) || capacity < RING_MIN_CAPACITY ||
	    capacity > RING_MAX_CAPACITY)
		return -EINVAL;
	fd = memfd_create("mspti-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1)
		return -errno;
	if (ftruncate(fd, (off_t)(RING_HDR_SIZE + capacity)) == -1)
		goto fail;
	sh = mmap(NULL, RING_HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fd, 0);
	if (sh == MAP_FAILED)
		goto fail;
	sh->magic = RING_MAGIC;
	sh->version = RING_VERSION;
	sh->hdr_size = RING_HDR_SIZE;
	sh->capacity = capacity;
	atomic_store(&sh->head, 0);
	atomic_store(&sh->tail, 0);
	munmap(sh, RING_HDR_SIZE);
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
ring_map(int fd, struct ring **ringp)
{
	struct ring *r;
	struct ring_shared *sh;
	struct stat sb;
	uint64_t cap;
	size_t len;
	int seals;

	if (ringp == NULL)
		return -EINVAL;
	*ringp = NULL;
	if (fstat(fd, &sb) == -1)
		return -errno;
	if (!S_ISREG(sb.st_mode) || sb.st_size <= RING_HDR_SIZE ||
	    (uint64_t)sb.st_size > RING_HDR_SIZE + RING_MAX_CAPACITY)
		return -EINVAL;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals == -1 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
	    (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EINVAL;
	len = (size_t)sb.st_size;
	sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
	    fd, 0);
	if (sh == MAP_FAILED)
		return -errno;
	/* Read the geometry once; from now on only our copy counts. */
	cap = ((volatile struct ring_shared *)sh)->capacity;
	if (((volatile struct ring_shared *)sh)->magic != RING_MAGIC ||
	    ((volatile struct ring_shared *)sh)->version != RING_VERSION ||
	    ((volatile struct ring_shared *)sh)->hdr_size != RING_HDR_SIZE) {
		munmap(sh, len);
		return -EPROTO;
	}
	if (!is_pow2(cap) || cap < RING_MIN_CAPACITY ||
	    cap > RING_MAX_CAPACITY || RING_HDR_SIZE + cap != len) {
		munmap(sh, len);
		return -EINVAL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		munmap(sh, len);
		return -ENOMEM;
	}
	r->sh = sh;
	r->data = (uint8_t *)sh + RING_HDR_SIZE;
	r->cap = cap;
	r->mask = cap - 1;
	r->maxrec = cap / 4 < REC_MAX_SIZE ? cap / 4 : REC_MAX_SIZE;
	r->maplen = len;
	r->tail = atomic_load_explicit(&sh->tail, memory_order_acquire);
	r->st.capacity = cap;
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

int
ring_reserve(struct ring *r, size_t len, void **pp)
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
				ring_count_drop(r, len);
				return -ENOSPC;
			}
			h = atomic_load_explicit(&sh->head,
			    memory_order_relaxed);
			continue;
		}
		if (__builtin_expect(h - t > r->cap - need, 0)) {
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

void
ring_commit(void *p, const struct rec_hdr *hdr)
{
	uint64_t word;

	memcpy(&word, hdr, sizeof word);
	ring_store_word(p, word);
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

uint64_t
ring_pending(const struct ring *r)
{
	uint64_t h, t;

	t = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
	h = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	return h - t > r->cap ? r->cap : h - t;
}

bool
ring_needs_wake(struct ring *r)
{
	struct ring_shared *sh = r->sh;

	if (__builtin_expect(!atomic_load_explicit(&sh->wake_armed,
	    memory_order_relaxed), 1))
		return false;
	if (ring_pending(r) < atomic_load_explicit(&sh->wake_threshold,
	    memory_order_relaxed))
		return false;
	return atomic_exchange_explicit(&sh->wake_armed, 0,
	    memory_order_acq_rel) != 0;
}

void
ring_arm_wake(struct ring *r, uint64_t threshold)
{
	atomic_store_explicit(&r->sh->wake_threshold, threshold,
	    memory_order_relaxed);
	atomic_store_explicit(&r->sh->wake_armed, 1, memory_order_seq_cst);
}

/* Zeroes the data between counters from and to (at most one capacity). */
static void
ring_zero(struct ring *r, uint64_t from, uint64_t to)
{
	uint64_t n = to - from, off = from & r->mask, first;

	if (n == 0)
		return;
	if (n > r->cap)
		n = r->cap;
	first = r->cap - off < n ? r->cap - off : n;
	memset(r->data + off, 0, first);
	if (n > first)
		memset(r->data, 0, n - first);
}

/* Frees the consumed space [*zfrom, t) and publishes t as the tail. */
static void
ring_release(struct ring *r, uint64_t *zfrom, uint64_t t)
{
	ring_zero(r, *zfrom, t);
	*zfrom = t;
	r->tail = t;
	atomic_store_explicit(&r->sh->tail, t, memory_order_release);
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
			if (record_validate(b + p, size) == 0) {
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

int
ring_drain(struct ring *r, ring_drain_cb cb, void *arg, size_t max)
{
	uint64_t h, t, zfrom, off, room, lim, span, word;
	size_t n = 0, k;
	unsigned type, size;
	int stop = 0;
	bool more, broken;

	if (r->st.corrupt)
		return -EBADMSG;
	h = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	t = zfrom = r->tail;
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
			    (r->data + off + span), memory_order_acquire);
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
			memcpy(r->batch, r->data + off, span);
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
			ring_release(r, &zfrom, t);
	}
	ring_release(r, &zfrom, t);
	return (int)(n > INT32_MAX ? INT32_MAX : n);
}

void
ring_get_stats(const struct ring *r, struct ring_stats *st)
{
	*st = r->st;
	st->capacity = r->cap;
	st->pending = ring_pending(r);
	st->drops = atomic_load_explicit(&r->sh->drops, memory_order_relaxed);
	st->drop_bytes = atomic_load_explicit(&r->sh->drop_bytes,
	    memory_order_relaxed);
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

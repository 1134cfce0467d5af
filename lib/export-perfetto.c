/*
 * Perfetto protobuf export: the protobuf encoding is written by hand (a
 * varint writer), following proto/perfetto/trace.proto.
 *
 * Every track (a thread, a device stream, a counter) is its own packet
 * sequence, as Perfetto's SDK writes one sequence per thread: the
 * sequence's first packet clears its incremental state
 * (SEQ_INCREMENTAL_STATE_CLEARED), sets its defaults (the track, and the
 * sequence-scoped incremental clock 64 for timestamps) and a ClockSnapshot
 * that maps clock 64 to CLOCK_REALTIME.  Its event packets then carry a
 * timestamp delta from the previous one, the interned ids of names,
 * categories, annotation names and string values (defined once per
 * sequence in InternedData, before their first use), and
 * SEQ_NEEDS_INCREMENTAL_STATE.  An event earlier than its sequence's last
 * one (an MSTX range is emitted at its end with its start time) carries an
 * absolute CLOCK_REALTIME timestamp instead.  Track and process
 * descriptors are on sequence 1, which needs no incremental state.
 *
 * The packets are written in batches of PF_OUT_SIZE bytes, each deflated
 * into one TracePacket.compressed_packets (a zlib stream, as Perfetto's
 * service compresses its buffers): a slice is two packets of ~12-30 bytes,
 * the same few fields over and over, which deflate shrinks 4-9x.
 * Level 1 of ISA-L's igzip where it is built in (~2x libdeflate's level
 * 1, which is ~2.4x zlib's level 1), else libdeflate's: deflate is still
 * the export's largest cost.  With more than one CPU a pool of workers
 * deflates batches while the walk fills the next; the batches are written
 * in order.  MSPTI_PERFETTO_DEFLATE=0 writes them plain (for readers
 * without zlib), MSPTI_PERFETTO_THREADS=N sets the workers.
 *
 * The walk fills a batch buffer a worker read before.  Where their CPUs
 * share no cache, each line it writes was first taken back from the
 * worker's: the export took 1.77 s for 1.34 s on the jittered 4M-record
 * file (doc/benchmarks.md, eighteenth pass).  So a worker evicts the batch
 * from the caches once it has deflated it (util_cache_evict), which costs
 * the worker, whose deflate keeps up with the walk, about 1 % where they
 * share it.  MSPTI_PERFETTO_EVICT=0 leaves the batches cached.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_ISAL
#include <isa-l/igzip_lib.h>
#else
#include <libdeflate.h>
#endif

#include "export.h"
#include "export-int.h"
#include "util.h"

#define PF_ATTR	__attribute__((visibility("default")))
#define PF_SEQ	1		/* descriptors; tracks count from 2 */
/* perfetto.protos.BuiltinClock: our timestamps are CLOCK_REALTIME ns. */
#define PF_CLOCK_REALTIME	1
/* The first sequence-scoped clock id (64..127): incremental ns. */
#define PF_CLOCK_INCR		64
/* TracePacket.sequence_flags. */
#define PF_SEQ_CLEARED		1
#define PF_SEQ_NEEDS		2
/* CounterDescriptor.Unit: UNIT_SIZE_BYTES. */
#define PF_UNIT_BYTES		3
/* InternedData fields, one iid space per field (the ids are global: the
 * same iid is the same string on every sequence). */
enum { PF_I_CAT, PF_I_NAME, PF_I_ANAME, PF_I_SVAL, PF_I_N };
static const unsigned pf_ifield[PF_I_N] = { 1, 2, 3, 29 };

#define PF_OUT_SIZE	(1u << 18)
/* Deflate workers at most, and batches in flight per worker. */
#define PF_WORKERS_MAX	8
#define PF_SLOTS_PER	2

/* One batch of packets and its deflated form. */
struct pf_slot {
	uint8_t		*in, *z;
	size_t		 nin, nz;
	enum { PF_FREE, PF_FILLED, PF_BUSY, PF_DONE } st;
};

struct pf_buf {
	uint8_t	b[4096];
	size_t	n;
};
/* The longest interned string: a slice's few strings fit one pf_buf. */
#define PF_STR_MAX	1024

/* A set of nonzero 64-bit keys (open addressing). */
struct pf_set {
	uint64_t	*v;
	size_t		 n, cap;
};

struct pf_str {
	char		*s;
	size_t		 len;
	uint64_t	 h;
	uint32_t	 iid;
	uint32_t	 seq[2];	/* sequences that have it defined (a
					   host and a device track alternate) */
};

/* Strings of one InternedData field: content -> iid. */
struct pf_strtab {
	struct pf_str	*v;
	size_t		 n, cap;
	uint32_t	 next;
	/* Pointer -> entry, checked by content (callers pass the same few
	 * pointers over and over, some to buffers they reuse). */
	struct {
		const char	*p;
		size_t		 i;
		unsigned	 gen;	/* ex.gen when p was a walk's stable
					   string (0: checked by content) */
	}		 pc[64];
};

/* One track's packet sequence. */
struct pf_seq {
	uint64_t	 uid;
	uint64_t	 last;		/* clock 64 now */
	uint32_t	 seq;
};

struct pf {
	struct ex	*x;
	/* The track of the last event: (pid, tid, counter) -> sequence. */
	uint32_t	 lt_pid, lt_tid;
	bool		 lt_counter;
	char		 lt_cname[128];
	struct pf_seq	*lt_seq;
	/* Thread and stream tracks by (pid, tid), direct-mapped: the walk
	 * alternates a host and a device track record by record. */
	struct {
		uint32_t	 pid, tid;
		struct pf_seq	*s;
	}		 tc[16];
	struct pf_set	 seen;		/* track uuids declared */
	struct pf_set	 defined;	/* (sequence, field, iid) defined */
	struct pf_strtab str[PF_I_N];
	struct pf_seq	*seqs;		/* by uid, open addressing */
	size_t		 nseq, cseq;
	uint32_t	 nextseq;
	struct pf_buf	 in;		/* this packet's InternedData */
	uint8_t		*out;		/* buffered output (out0 or a slot) */
	uint8_t		*out0;
	size_t		 nout;
	/* Deflate (zc NULL: plain).  With more than one CPU, nz workers
	 * deflate batches while the walk fills the next: a ring of PF_SLOTS
	 * batches (bounded memory), filled at fill, taken by the workers at
	 * take, written here in order at wr once deflated. */
	struct pf_z	*zc;
	uint8_t		*zout;
	size_t		 zcap;
	unsigned	 nz;
	pthread_t	 zthr[PF_WORKERS_MAX];
	pthread_mutex_t	 zmtx;
	pthread_cond_t	 zwork, zdone;
	struct pf_slot	*slot;
	unsigned	 nslot, fill, take, wr;
	bool		 zstop, zinit;
	bool		 zevict;		/* workers evict what they read */
};

static inline void
pf_varint(struct pf_buf *b, uint64_t v)
{
	if (b->n + 10 > sizeof(b->b))
		return;
	while (v >= 0x80) {
		b->b[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->b[b->n++] = (uint8_t)v;
}

static inline void
pf_tag(struct pf_buf *b, unsigned field, unsigned wt)
{
	pf_varint(b, (uint64_t)field << 3 | wt);
}

static inline void
pf_uint(struct pf_buf *b, unsigned field, uint64_t v)
{
	pf_tag(b, field, 0);
	pf_varint(b, v);
}

static void
pf_fixed64(struct pf_buf *b, unsigned field, uint64_t v)
{
	uint8_t le[8];

	pf_tag(b, field, 1);
	if (b->n + 8 > sizeof(b->b))
		return;
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	memcpy(b->b + b->n, le, 8);
	b->n += 8;
}

static void
pf_double(struct pf_buf *b, unsigned field, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	pf_fixed64(b, field, v);
}

static void
pf_bytes(struct pf_buf *b, unsigned field, const void *p, size_t n)
{
	if (b->n + n + 16 > sizeof(b->b))
		n = sizeof(b->b) > b->n + 16 ? sizeof(b->b) - b->n - 16 : 0;
	pf_tag(b, field, 2);
	pf_varint(b, n);
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
pf_str(struct pf_buf *b, unsigned field, const char *s)
{
	pf_bytes(b, field, s, strlen(s));
}


/*
 * One deflater (zlib stream, level 1): ISA-L's igzip where configure
 * found it (about twice libdeflate's speed on these packets, ~13% larger
 * output), else libdeflate.  Not shared between threads.
 */
#ifdef HAVE_ISAL
struct pf_z {
	uint8_t			lb[ISAL_DEF_LVL1_DEFAULT];	/* level 1's tables */
	struct isal_zstream	st;	/* ~80 KB: here, not on a thread's stack
					 * (the walk's may be an application's) */
};

static struct pf_z *
pf_z_new(void)
{
	return malloc(sizeof(struct pf_z));
}

static void
pf_z_free(struct pf_z *z)
{
	free(z);
}

/* Room for any batch's stream (stored blocks at worst). */
static size_t
pf_z_bound(size_t n)
{
	return n + n / 8 + 1024;
}

/* n bytes at b deflated into out (cap bytes): the length, 0 when it does
 * not fit (the batch is written plain then). */
static size_t
pf_deflate(struct pf_z *z, const uint8_t *b, size_t n, uint8_t *out,
    size_t cap)
{
	struct isal_zstream *st = &z->st;

	isal_deflate_stateless_init(st);
	st->level = 1;
	st->level_buf = z->lb;
	st->level_buf_size = sizeof(z->lb);
	st->gzip_flag = IGZIP_ZLIB;
	st->next_in = (uint8_t *)(uintptr_t)b;
	st->avail_in = (uint32_t)n;
	st->next_out = out;
	st->avail_out = (uint32_t)cap;
	st->end_of_stream = 1;
	st->flush = NO_FLUSH;
	return isal_deflate_stateless(st) == COMP_OK ? st->total_out : 0;
}
#else
struct pf_z {
	struct libdeflate_compressor *c;
};

static struct pf_z *
pf_z_new(void)
{
	struct pf_z *z = malloc(sizeof(*z));

	if (z != NULL && (z->c = libdeflate_alloc_compressor(1)) == NULL) {
		free(z);
		z = NULL;
	}
	return z;
}

static void
pf_z_free(struct pf_z *z)
{
	if (z != NULL)
		libdeflate_free_compressor(z->c);
	free(z);
}

static size_t
pf_z_bound(size_t n)
{
	return libdeflate_zlib_compress_bound(NULL, n);
}

static size_t
pf_deflate(struct pf_z *z, const uint8_t *b, size_t n, uint8_t *out,
    size_t cap)
{
	return libdeflate_zlib_compress(z->c, b, n, out, cap);
}
#endif

/* Writes a batch: deflated (zn bytes at z) as one compressed_packets
 * packet, or plain. */
static void
pf_write(struct pf *p, const uint8_t *b, size_t n, const uint8_t *z,
    size_t zn)
{
	uint8_t hdr[24], *o;

	if (zn == 0) {
		fwrite(b, 1, n, p->x->out);
		return;
	}
	/* Trace.packet { compressed_packets = 50 (bytes) }. */
	o = hdr;
	*o++ = 1 << 3 | 2;
	o = util_varint_put(o, 2 + util_varint_len(zn) + zn);
	*o++ = (uint8_t)(0x80 | ((50 << 3 | 2) & 0x7f));
	*o++ = (uint8_t)((50 << 3 | 2) >> 7);
	o = util_varint_put(o, zn);
	fwrite(hdr, 1, (size_t)(o - hdr), p->x->out);
	fwrite(z, 1, zn, p->x->out);
}

/* A deflate worker: takes the filled batches in ring order, each with
 * its own compressor. */
static void *
pf_worker(void *arg)
{
	struct pf *p = arg;
	struct pf_z *zc = pf_z_new();

	pthread_mutex_lock(&p->zmtx);
	for (;;) {
		struct pf_slot *sl = &p->slot[p->take];

		while (sl->st != PF_FILLED && !p->zstop) {
			pthread_cond_wait(&p->zwork, &p->zmtx);
			sl = &p->slot[p->take];
		}
		if (sl->st != PF_FILLED)
			break;
		sl->st = PF_BUSY;
		p->take = (p->take + 1) % p->nslot;
		pthread_mutex_unlock(&p->zmtx);
		/* No compressor of our own (out of memory): plain. */
		sl->nz = zc != NULL ? pf_deflate(zc, sl->in, sl->nin, sl->z,
		    p->zcap) : 0;
		if (p->zevict)
			util_cache_evict(sl->in, sl->nin);
		pthread_mutex_lock(&p->zmtx);
		sl->st = PF_DONE;
		pthread_cond_broadcast(&p->zdone);
	}
	pthread_mutex_unlock(&p->zmtx);
	pf_z_free(zc);
	return NULL;
}

/* Writes the deflated batches at wr, in order; with until, waits until
 * that slot is free.  Called with zmtx held. */
static void
pf_drain(struct pf *p, struct pf_slot *until)
{
	for (;;) {
		struct pf_slot *sl = &p->slot[p->wr];

		while (sl->st == PF_DONE) {
			pthread_mutex_unlock(&p->zmtx);
			pf_write(p, sl->in, sl->nin, sl->z, sl->nz);
			pthread_mutex_lock(&p->zmtx);
			sl->st = PF_FREE;
			p->wr = (p->wr + 1) % p->nslot;
			sl = &p->slot[p->wr];
		}
		if (until == NULL ? sl->st == PF_FREE : until->st == PF_FREE)
			return;
		pthread_cond_wait(&p->zdone, &p->zmtx);
	}
}

/* Hands the batch to the workers and goes on in the next free slot;
 * without workers, deflates and writes it here. */
static void
pf_flush(struct pf *p)
{
	if (p->nout == 0)
		return;
	if (p->nz == 0) {
		pf_write(p, p->out, p->nout, p->zout, p->zc == NULL ? 0 :
		    pf_deflate(p->zc, p->out, p->nout, p->zout, p->zcap));
		p->nout = 0;
		return;
	}
	pthread_mutex_lock(&p->zmtx);
	p->slot[p->fill].nin = p->nout;
	p->slot[p->fill].st = PF_FILLED;
	pthread_cond_signal(&p->zwork);
	p->fill = (p->fill + 1) % p->nslot;
	pf_drain(p, &p->slot[p->fill]);
	pthread_mutex_unlock(&p->zmtx);
	p->out = p->slot[p->fill].in;
	p->nout = 0;
}

/* The last batch written, the workers gone. */
static void
pf_finish(struct pf *p)
{
	pf_flush(p);
	if (p->nz == 0)
		return;
	pthread_mutex_lock(&p->zmtx);
	pf_drain(p, NULL);
	p->zstop = true;
	pthread_cond_broadcast(&p->zwork);
	pthread_mutex_unlock(&p->zmtx);
	for (unsigned i = 0; i < p->nz; i++)
		pthread_join(p->zthr[i], NULL);
	p->nz = 0;
}

/* Deflate workers: MSPTI_PERFETTO_THREADS, else one per online CPU but
 * the walk's, at most PF_WORKERS_MAX (0: deflate on the walk's thread). */
static unsigned
pf_nworkers(void)
{
	const char *v = getenv("MSPTI_PERFETTO_THREADS");
	long n;

	if (v != NULL && *v != '\0')
		n = strtol(v, NULL, 10);
	else
		n = sysconf(_SC_NPROCESSORS_ONLN) - 1;
	return n <= 0 ? 0 : n > PF_WORKERS_MAX ? PF_WORKERS_MAX : (unsigned)n;
}

/* Starts n workers and their slots; false (none started) without
 * memory or threads. */
static bool
pf_start_workers(struct pf *p, unsigned n)
{
	const char *ev;
	sigset_t old;

	p->nslot = n * PF_SLOTS_PER + 1;
	if ((p->slot = calloc(p->nslot, sizeof(*p->slot))) == NULL)
		return false;
	for (unsigned i = 0; i < p->nslot; i++)
		if ((p->slot[i].in = malloc(PF_OUT_SIZE)) == NULL ||
		    (p->slot[i].z = malloc(p->zcap)) == NULL)
			return false;
	pthread_mutex_init(&p->zmtx, NULL);
	pthread_cond_init(&p->zwork, NULL);
	pthread_cond_init(&p->zdone, NULL);
	p->zinit = true;
	ev = getenv("MSPTI_PERFETTO_EVICT");
	p->zevict = util_cache_evict_ok() && !(ev != NULL &&
	    strcmp(ev, "0") == 0);
	/* The Python extension runs us inside an application: its signals
	 * stay with its own threads. */
	util_block_async_signals(&old);
	for (p->nz = 0; p->nz < n; p->nz++)
		if (pthread_create(&p->zthr[p->nz], NULL, pf_worker, p) != 0)
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (p->nz == 0)
		return false;
	p->out = p->slot[0].in;
	return true;
}

/* Writes one TracePacket (body in pkt) as Trace.packet (field 1). */
static void
pf_packet(struct pf *p, const struct pf_buf *pkt)
{
	uint8_t *o;
	uint64_t v = pkt->n;

	if (p->nout + pkt->n + 16 > PF_OUT_SIZE)
		pf_flush(p);
	o = p->out + p->nout;
	*o++ = 1 << 3 | 2;
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	memcpy(o, pkt->b, pkt->n);
	p->nout = (size_t)(o - p->out) + pkt->n;
}

static inline size_t
pf_slot(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

/* Adds key (nonzero) to s: true if it was not there. */
static bool
pf_first(struct pf_set *s, uint64_t key)
{
	size_t i;

	if (s->n * 2 >= s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		uint64_t *nv = calloc(nc, sizeof(uint64_t));

		if (nv == NULL)
			abort();
		for (size_t j = 0; j < s->cap; j++)
			if (s->v[j]) {
				i = pf_slot(s->v[j], nc);
				while (nv[i])
					i = (i + 1) & (nc - 1);
				nv[i] = s->v[j];
			}
		free(s->v);
		s->v = nv;
		s->cap = nc;
	}
	i = pf_slot(key, s->cap);
	while (s->v[i]) {
		if (s->v[i] == key)
			return false;
		i = (i + 1) & (s->cap - 1);
	}
	s->v[i] = key;
	s->n++;
	return true;
}

/* A string's hash, 8 bytes at a time. */
static uint64_t
pf_strhash(const char *s, size_t n)
{
	size_t i;
	uint64_t h = 0x9ae16a3b2f90404full ^ n, w;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	if (i < n) {
		w = 0;
		memcpy(&w, s + i, n - i);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	return h | 1;
}

/*
 * The iid of string s (len bytes) in field f, defined in this packet's
 * InternedData (p->in) if sequence seq has not had it yet.
 */
static inline uint32_t
pf_intern_x(struct pf *p, uint32_t seq, int f, const char *s, size_t len,
    bool lit)
{
	struct pf_strtab *t = &p->str[f];
	struct pf_str *e;
	size_t i, pci = ((uintptr_t)s * 0x9e3779b97f4a7c15ull >> 58);
	uint64_t h;

	/* A packet's InternedData lives in a 4 KiB buffer: each string is
	 * kept to PF_STR_MAX bytes, shortened on a UTF-8 character boundary
	 * (pf_bytes would cut an entry after its inner length). */
	if (len > PF_STR_MAX) {
		len = PF_STR_MAX;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}

	/* A literal's pointer is its content: no compare. */
	if (t->pc[pci].p == s && (e = &t->v[t->pc[pci].i])->len == len &&
	    (lit || memcmp(e->s, s, len) == 0)) {
		if (e->seq[0] == seq || e->seq[1] == seq)
			return e->iid;
		goto found;
	}
	h = pf_strhash(s, len);
	if (t->n * 2 >= t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		struct pf_str *nv = calloc(nc, sizeof(*nv));

		if (nv == NULL)
			abort();
		for (size_t j = 0; j < t->cap; j++)
			if (t->v[j].s != NULL) {
				i = pf_slot(t->v[j].h, nc);
				while (nv[i].s != NULL)
					i = (i + 1) & (nc - 1);
				nv[i] = t->v[j];
			}
		free(t->v);
		t->v = nv;
		t->cap = nc;
		memset(t->pc, 0, sizeof(t->pc));
	}
	for (i = pf_slot(h, t->cap); (e = &t->v[i])->s != NULL;
	    i = (i + 1) & (t->cap - 1))
		if (e->h == h && e->len == len && memcmp(e->s, s, len) == 0)
			goto found;
	if ((e->s = malloc(len + 1)) == NULL)
		abort();
	memcpy(e->s, s, len);
	e->s[len] = '\0';
	e->len = len;
	e->h = h;
	e->iid = ++t->next;
	t->n++;
found:
	t->pc[pci].p = s;
	t->pc[pci].i = (size_t)(e - t->v);
	t->pc[pci].gen = p->x->stable ? p->x->gen : 0;
	if (e->seq[0] != seq) {
		e->seq[1] = e->seq[0];
		e->seq[0] = seq;
	}
	if (pf_first(&p->defined, (uint64_t)seq << 34 |
	    (uint64_t)f << 32 | e->iid)) {
		struct pf_buf d;

		d.n = 0;
		/* EventCategory, EventName, DebugAnnotationName and
		 * InternedString all are { iid = 1; name/str = 2; }. */
		pf_uint(&d, 1, e->iid);
		pf_bytes(&d, 2, e->s, e->len);
		pf_bytes(&p->in, pf_ifield[f], d.b, d.n);
	}
	return e->iid;
}

/* s is a string literal (or text that never changes while we run). */
static uint32_t
pf_intern_lit(struct pf *p, uint32_t seq, int f, const char *s, size_t len)
{
	return pf_intern_x(p, seq, f, s, len, true);
}

/*
 * As pf_intern_n, for a string the walk hands over: while it says its
 * strings are stable (ex.stable: the trace reader's, which stay where
 * they are until its file is done), a pointer seen in this file is its
 * string, neither measured nor compared again.
 */
static inline uint32_t
pf_intern_walk(struct pf *p, uint32_t seq, int f, const char *s,
    size_t len)
{
	struct pf_strtab *t = &p->str[f];
	size_t pci = ((uintptr_t)s * 0x9e3779b97f4a7c15ull >> 58);

	if (p->x->stable && t->pc[pci].p == s && t->pc[pci].gen == p->x->gen) {
		struct pf_str *e = &t->v[t->pc[pci].i];

		if (e->seq[0] == seq || e->seq[1] == seq)
			return e->iid;
		len = e->len;
	} else if (len == SIZE_MAX)
		len = strlen(s);
	return pf_intern_x(p, seq, f, s, len, false);
}

static uint32_t
pf_intern(struct pf *p, uint32_t seq, int f, const char *s)
{
	return pf_intern_walk(p, seq, f, s, SIZE_MAX);
}

/* The uuid of t (declaring it and its process on first use). */
static uint64_t
pf_track(struct pf *p, const struct ex_track *t, const char *counter,
    const char *unit)
{
	uint64_t puid = (0x5000000000000000ull | t->pid) * 0x100000001b3ull;
	uint64_t uid = util_fnv64(puid ^ ((uint64_t)t->tid << 1), counter,
	    counter ? strlen(counter) : 0);
	struct pf_buf b, d, pd;

	puid |= 1;
	uid |= 1;
	if (pf_first(&p->seen, puid)) {
		b.n = d.n = pd.n = 0;
		pf_uint(&pd, 1, t->pid & 0x7fffffff);
		pf_str(&pd, 6, t->pname);
		pf_uint(&d, 1, puid);
		pf_bytes(&d, 3, pd.b, pd.n);
		pf_uint(&b, 10, PF_SEQ);
		pf_bytes(&b, 60, d.b, d.n);
		pf_packet(p, &b);
	}
	if (pf_first(&p->seen, uid)) {
		b.n = d.n = pd.n = 0;
		pf_uint(&d, 1, uid);
		if (counter == NULL && t->os_pid != 0) {
			/* A real thread: ThreadDescriptor (pid, tid, name);
			 * it belongs to its process by pid. */
			pf_uint(&pd, 1, t->os_pid & 0x7fffffff);
			pf_uint(&pd, 2, t->tid);
			pf_str(&pd, 5, t->tname);
			pf_bytes(&d, 4, pd.b, pd.n);
		} else {
			pf_str(&d, 2, counter ? counter : t->tname);
			pf_uint(&d, 5, puid);
		}
		if (counter) {
			/* CounterDescriptor: unit (bytes) or unit_name. */
			pd.n = 0;
			if (unit != NULL && strcmp(unit, "bytes") == 0)
				pf_uint(&pd, 3, PF_UNIT_BYTES);
			else if (unit != NULL)
				pf_str(&pd, 6, unit);
			pf_bytes(&d, 8, pd.b, pd.n);
		}
		pf_uint(&b, 10, PF_SEQ);
		pf_bytes(&b, 60, d.b, d.n);
		pf_packet(p, &b);
	}
	return uid;
}

/*
 * The sequence of track uid, started (state cleared, defaults, clock
 * snapshot at ts) on first use.
 */
static struct pf_seq *
pf_seq(struct pf *p, uint64_t uid, uint64_t ts)
{
	struct pf_buf b, d, e;
	struct pf_seq *s;
	size_t i;

	if (p->nseq * 2 >= p->cseq) {
		size_t nc = p->cseq ? p->cseq * 2 : 64;
		struct pf_seq *nv = calloc(nc, sizeof(*nv));

		if (nv == NULL)
			abort();
		for (size_t j = 0; j < p->cseq; j++)
			if (p->seqs[j].uid) {
				i = pf_slot(p->seqs[j].uid, nc);
				while (nv[i].uid)
					i = (i + 1) & (nc - 1);
				nv[i] = p->seqs[j];
			}
		free(p->seqs);
		p->seqs = nv;
		p->cseq = nc;
		p->lt_seq = NULL;
		memset(p->tc, 0, sizeof(p->tc));
	}
	for (i = pf_slot(uid, p->cseq); (s = &p->seqs[i])->uid;
	    i = (i + 1) & (p->cseq - 1))
		if (s->uid == uid)
			return s;
	s->uid = uid;
	s->seq = p->nextseq++;
	s->last = ts;
	p->nseq++;
	b.n = d.n = e.n = 0;
	pf_uint(&b, 8, ts);
	pf_uint(&b, 58, PF_CLOCK_REALTIME);
	pf_uint(&b, 10, s->seq);
	pf_uint(&b, 13, PF_SEQ_CLEARED);
	/* TracePacketDefaults: clock 64, TrackEventDefaults.track_uuid. */
	pf_uint(&e, 11, uid);
	pf_uint(&d, 58, PF_CLOCK_INCR);
	pf_bytes(&d, 11, e.b, e.n);
	pf_bytes(&b, 59, d.b, d.n);
	/* ClockSnapshot: clock 64 (incremental) is CLOCK_REALTIME at ts. */
	d.n = 0;
	e.n = 0;
	pf_uint(&e, 1, PF_CLOCK_REALTIME);
	pf_uint(&e, 2, ts);
	pf_bytes(&d, 1, e.b, e.n);
	e.n = 0;
	pf_uint(&e, 1, PF_CLOCK_INCR);
	pf_uint(&e, 2, ts);
	pf_uint(&e, 3, 1);
	pf_bytes(&d, 1, e.b, e.n);
	pf_bytes(&b, 6, d.b, d.n);
	pf_packet(p, &b);
	return s;
}

/* The sequence of track t (of counter, if not NULL). */
static struct pf_seq *
pf_seq_of(struct pf *p, const struct ex_track *t, const char *counter,
    const char *unit, uint64_t ts)
{
	struct pf_seq *s;

	if (counter == NULL) {
		unsigned i = (t->pid * 31u + t->tid) & 15u;

		if (p->tc[i].s != NULL && p->tc[i].pid == t->pid &&
		    p->tc[i].tid == t->tid)
			return p->tc[i].s;
		s = pf_seq(p, pf_track(p, t, NULL, NULL), ts);
		/* pf_seq may have moved every sequence (and cleared tc). */
		p->tc[i].pid = t->pid;
		p->tc[i].tid = t->tid;
		p->tc[i].s = s;
		return s;
	}
	if (p->lt_seq != NULL && p->lt_pid == t->pid && p->lt_tid == t->tid &&
	    p->lt_counter == (counter != NULL) && (counter == NULL ||
	    strcmp(counter, p->lt_cname) == 0))
		return p->lt_seq;
	s = pf_seq(p, pf_track(p, t, counter, unit), ts);
	p->lt_seq = s;
	p->lt_pid = t->pid;
	p->lt_tid = t->tid;
	p->lt_counter = counter != NULL;
	if (counter != NULL && strlen(counter) >= sizeof(p->lt_cname))
		p->lt_seq = NULL;	/* not cached */
	else if (counter != NULL)
		strcpy(p->lt_cname, counter);
	return s;
}

/* Copies n bytes; up to 64 as one fixed-size copy (inlined: both
 * buffers have 64 bytes of slack past n), else memcpy. */
static inline uint8_t *
pf_copy(uint8_t *o, const uint8_t *b, size_t n)
{
	if (n <= 64)
		memcpy(o, b, 64);
	else
		memcpy(o, b, n);
	return o + n;
}

/* One event packet on sequence s: body ev (a TrackEvent), with the
 * InternedData gathered in p->in; written straight into the output. */
static void
pf_event(struct pf *p, struct pf_seq *s, uint64_t ts, const struct pf_buf *ev)
{
	uint64_t tv;
	size_t total;
	uint8_t *o;
	bool abs = ts < s->last;

	if (abs)
		tv = ts;
	else {
		tv = ts - s->last;
		s->last = ts;
	}
	/* timestamp (8), [clock 58], sequence id (10), flags (13). */
	total = 1 + util_varint_len(tv) + (abs ? 3 : 0) + 1 +
	    util_varint_len(s->seq) + 2 + 1 + util_varint_len(ev->n) + ev->n;
	if (p->in.n > 0)
		total += 1 + util_varint_len(p->in.n) + p->in.n;
	if (p->nout + total + 16 + 64 > PF_OUT_SIZE)
		pf_flush(p);
	o = p->out + p->nout;
	*o++ = 1 << 3 | 2;
	o = util_varint_put(o, total);
	*o++ = 8 << 3;
	o = util_varint_put(o, tv);
	if (abs) {
		*o++ = (uint8_t)(0x80 | ((58 << 3) & 0x7f));
		*o++ = (58 << 3) >> 7;
		*o++ = PF_CLOCK_REALTIME;
	}
	*o++ = 10 << 3;
	o = util_varint_put(o, s->seq);
	*o++ = 13 << 3;
	*o++ = PF_SEQ_NEEDS;
	if (p->in.n > 0) {
		*o++ = 12 << 3 | 2;
		o = util_varint_put(o, p->in.n);
		o = pf_copy(o, p->in.b, p->in.n);
		p->in.n = 0;
	}
	*o++ = 11 << 3 | 2;
	o = util_varint_put(o, ev->n);
	o = pf_copy(o, ev->b, ev->n);
	p->nout = (size_t)(o - p->out);
}

/*
 * The slice's args as DebugAnnotations, so both formats carry the same
 * arguments (correlation_id, bytes, ...).  Names and string values are
 * interned; a %.3f double is the value Chrome's text says.
 */
static void
pf_args(struct pf *p, uint32_t seq, struct pf_buf *ev,
    const struct ex_arg *a, unsigned na)
{
	for (unsigned i = 0; i < na; i++) {
		uint8_t *o, *lenp;
		char num[400];

		if (ev->n + 32 > sizeof(ev->b))
			return;
		/* debug_annotations (4) { name_iid = 1; value }: the body
		 * is under 128 bytes, so its length is one byte. */
		o = ev->b + ev->n;
		*o++ = 4 << 3 | 2;
		lenp = o++;
		*o++ = 1 << 3;
		o = util_varint_put(o, pf_intern_lit(p, seq, PF_I_ANAME,
		    a[i].key, a[i].klen));
		if (a[i].kind == EX_ARG_U64) {
			*o++ = 3 << 3;
			o = util_varint_put(o, a[i].v.u);
		} else if (a[i].kind == EX_ARG_STR) {
			*o++ = (uint8_t)(0x80 | ((17 << 3) & 0x7f));
			*o++ = (17 << 3) >> 7;
			o = util_varint_put(o, pf_intern_walk(p, seq, PF_I_SVAL,
			    a[i].v.s, a[i].slen == EX_SLEN_UNKNOWN ? SIZE_MAX :
			    a[i].slen));
		} else {
			double d;
			uint64_t v;

			snprintf(num, sizeof(num), "%.3f", a[i].v.d);
			d = strtod(num, NULL);
			memcpy(&v, &d, sizeof(v));
			*o++ = 5 << 3 | 1;
			for (int k = 0; k < 8; k++)
				*o++ = (uint8_t)(v >> (8 * k));
		}
		*lenp = (uint8_t)(o - lenp - 1);
		ev->n = (size_t)(o - ev->b);
	}
}

static void
pf_slice(struct ex *x, const struct ex_track *t, const char *name,
    const char *cat, uint64_t ts, uint64_t dur, uint64_t flow_out,
    uint64_t flow_in, const struct ex_arg *args, unsigned na)
{
	struct pf *p = x->priv;
	struct pf_seq *s = pf_seq_of(p, t, NULL, NULL, ts);
	struct pf_buf ev;
	uint8_t *o = ev.b;

	/* TrackEvent { type (9) = SLICE_BEGIN, category_iids (3),
	 * name_iid (10), debug_annotations (4), flow_ids (47, fixed64),
	 * terminating_flow_ids (48, fixed64) }, written without the
	 * bounds checks of pf_uint: it is far below the buffer's size. */
	*o++ = 9 << 3;
	*o++ = 1;
	*o++ = 3 << 3;
	o = util_varint_put(o, pf_intern_lit(p, s->seq, PF_I_CAT, cat,
	    strlen(cat)));
	*o++ = 10 << 3;
	o = util_varint_put(o, pf_intern(p, s->seq, PF_I_NAME, name));
	ev.n = (size_t)(o - ev.b);
	pf_args(p, s->seq, &ev, args, na);
	if (flow_out) {
		pf_fixed64(&ev, 47, flow_out);
		x->flows++;
	}
	if (flow_in)
		pf_fixed64(&ev, 48, flow_in);
	pf_event(p, s, ts, &ev);
	x->events++;
	ev.b[0] = 9 << 3;
	ev.b[1] = 2;		/* SLICE_END */
	ev.n = 2;
	pf_event(p, s, ts + dur, &ev);
}

static void
pf_instant(struct ex *x, const struct ex_track *t, const char *name,
    uint64_t ts)
{
	struct pf *p = x->priv;
	struct pf_seq *s = pf_seq_of(p, t, NULL, NULL, ts);
	struct pf_buf ev;

	ev.n = 0;
	pf_uint(&ev, 9, 3);
	pf_uint(&ev, 10, pf_intern(p, s->seq, PF_I_NAME, name));
	pf_event(p, s, ts, &ev);
	x->events++;
}

static void
pf_counter(struct ex *x, const struct ex_track *t, const char *name,
    const char *unit, uint64_t ts, double v)
{
	struct pf *p = x->priv;
	struct pf_seq *s = pf_seq_of(p, t, name, unit, ts);
	struct pf_buf ev;

	ev.n = 0;
	pf_uint(&ev, 9, 4);
	pf_double(&ev, 44, v);
	pf_event(p, s, ts, &ev);
	x->events++;
}

/*
 * The first packet: a ClockSnapshot that makes CLOCK_REALTIME the trace
 * clock (each track's sequence maps its own clock to it).
 */
static void
pf_clock(struct pf *p)
{
	struct pf_buf b, cs, c;

	b.n = cs.n = c.n = 0;
	pf_uint(&c, 1, PF_CLOCK_REALTIME);
	pf_uint(&c, 2, p->x->a->base_ts);
	pf_bytes(&cs, 1, c.b, c.n);
	pf_uint(&cs, 2, PF_CLOCK_REALTIME);
	pf_bytes(&b, 6, cs.b, cs.n);
	pf_uint(&b, 10, PF_SEQ);
	pf_uint(&b, 13, PF_SEQ_CLEARED);
	pf_packet(p, &b);
}

static const struct ex_emit pf_emit = { pf_slice, pf_instant, pf_counter };

PF_ATTR int
export_perfetto(struct analysis *a, FILE *out)
{
	struct pf *p;
	struct ex x;
	const char *v;
	unsigned n;
	int rc;

	memset(&x, 0, sizeof(x));
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->out0 = malloc(PF_OUT_SIZE)) == NULL) {
		free(p);
		return -ENOMEM;
	}
	p->out = p->out0;
	p->x = &x;
	p->nextseq = PF_SEQ + 1;
	/* Level 1: higher levels cost 2x the CPU for a few percent. */
	v = getenv("MSPTI_PERFETTO_DEFLATE");
	if ((v == NULL || strcmp(v, "0") != 0) &&
	    (p->zc = pf_z_new()) != NULL) {
		p->zcap = pf_z_bound(PF_OUT_SIZE);
		if ((p->zout = malloc(p->zcap)) == NULL) {
			pf_z_free(p->zc);
			free(p->out0);
			free(p);
			return -ENOMEM;
		}
	}
	if (p->zc != NULL && (n = pf_nworkers()) > 0 &&
	    !pf_start_workers(p, n) && p->nz == 0)
		p->out = p->out0;	/* deflate here */
	x.a = a;
	x.out = out;
	x.em = &pf_emit;
	x.priv = p;
	pf_clock(p);
	rc = ex_walk(&x);
	pf_finish(p);
	for (int f = 0; f < PF_I_N; f++) {
		for (size_t i = 0; i < p->str[f].cap; i++)
			free(p->str[f].v[i].s);
		free(p->str[f].v);
	}
	free(p->seen.v);
	free(p->defined.v);
	free(p->seqs);
	free(p->out0);
	if (p->slot != NULL) {
		for (unsigned i = 0; i < p->nslot; i++) {
			free(p->slot[i].in);
			free(p->slot[i].z);
		}
		free(p->slot);
	}
	if (p->zinit) {
		pthread_mutex_destroy(&p->zmtx);
		pthread_cond_destroy(&p->zwork);
		pthread_cond_destroy(&p->zdone);
	}
	pf_z_free(p->zc);
	free(p->zout);
	free(p);
	if (rc == 0 && (fflush(out) != 0 || ferror(out)))
		rc = -EIO;
	return rc;
}

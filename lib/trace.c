/* Trace file code shared by the writer and the reader: CRC-32C, errors. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "util.h"

_Static_assert(sizeof(struct trace_file_hdr) == 40, "file header");
_Static_assert(sizeof(struct trace_tlv) == 8, "tlv");
_Static_assert(sizeof(struct trace_chunk_hdr) == 48, "chunk header");
_Static_assert(sizeof(struct trace_footer_hdr) == 48, "footer header");
_Static_assert(sizeof(struct trace_index_entry) == 32, "index entry");
_Static_assert(sizeof(struct trace_trailer) == 24, "trailer");

/* Slicing-by-8 tables for the reflected Castagnoli polynomial. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_init(void)
{
	uint32_t c;
	unsigned i, j;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			crc_table[j][i] = (crc_table[j - 1][i] >> 8) ^
			    crc_table[0][crc_table[j - 1][i] & 0xFF];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CRC_HW 1
/* The SSE4.2 instruction, used when the CPU has it. */
__attribute__((target("sse4.2")))
static uint32_t
crc32c_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;
	uint64_t v;

	while (len > 0 && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t
trace_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t v;

	crc = ~crc;
#ifdef HAVE_CRC_HW
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc32c_hw(crc, p, len);
#endif
	pthread_once(&crc_once, crc_init);
	while (len >= 8) {
		memcpy(&v, p, 8);
		v ^= crc;
		crc = crc_table[7][v & 0xFF] ^
		    crc_table[6][(v >> 8) & 0xFF] ^
		    crc_table[5][(v >> 16) & 0xFF] ^
		    crc_table[4][(v >> 24) & 0xFF] ^
		    crc_table[3][(v >> 32) & 0xFF] ^
		    crc_table[2][(v >> 40) & 0xFF] ^
		    crc_table[1][(v >> 48) & 0xFF] ^
		    crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
	return ~crc;
}

/*
 * The next delta-coded record of the len bytes at buf from *pp on (records
 * not coded are stepped over): its words, with *tp its type, *np its coded
 * words' bound (its words, at most TRACE_DELTA_WORDS) and *mp how many of
 * them have a previous word (pn[type]: the previous record's bound, 0 for
 * none).  NULL at the end, or where a size does not frame the buffer (*pp
 * stops there).
 */
static inline uint64_t *
delta_next(uint8_t *buf, size_t len, size_t *pp, const uint8_t *pn,
    unsigned *tp, size_t *np, size_t *mp)
{
	for (;;) {
		const struct rec_hdr *h = (const void *)(buf + *pp);
		size_t size;

		if (len - *pp < REC_HDR_SIZE)
			return NULL;
		size = h->size;
		if (size < REC_HDR_SIZE || (size & 7) || size > len - *pp)
			return NULL;
		*pp += size;
		if (h->type >= TRACE_DELTA_TYPES || h->type == REC_STRING_DEF)
			continue;
		*tp = h->type;
		*np = size / 8 < TRACE_DELTA_WORDS ? size / 8 :
		    TRACE_DELTA_WORDS;
		*mp = pn[h->type] < *np ? pn[h->type] : *np;
		return (uint64_t *)(void *)h;
	}
}

/* Words 1..m of a record less those of the previous one of its type,
 * which become the record's. */
static inline void
delta_sub(uint64_t *w, uint64_t *prev, size_t m)
{
	for (size_t i = 1; i < m; i++) {
		uint64_t v = w[i];

		w[i] = v - prev[i];
		prev[i] = v;
	}
}

void
trace_delta_encode(void *buf, size_t len)
{
	/* The previous record of each type as it was before coding, and its
	 * coded words (0: none yet). */
	uint64_t prev[TRACE_DELTA_TYPES][TRACE_DELTA_WORDS];
	uint8_t pn[TRACE_DELTA_TYPES] = { 0 };
	size_t p = 0, n, m;
	uint64_t *w;
	unsigned t;

	while ((w = delta_next(buf, len, &p, pn, &t, &n, &m)) != NULL) {
		if (m == n && n == 8)	/* the common sizes, unrolled */
			delta_sub(w, prev[t], 8);
		else if (m == n && n == 7)
			delta_sub(w, prev[t], 7);
		else {
			delta_sub(w, prev[t], m);
			for (size_t i = m > 1 ? m : 1; i < n; i++)
				prev[t][i] = w[i];
		}
		pn[t] = (uint8_t)n;
	}
}

/* Two words plus two, in one SSE2 (NEON) add where the target has one:
 * a kernel's seven coded words are one add and three of these. */
typedef uint64_t tr_v2 __attribute__((vector_size(16)));

static inline void
delta_add2(uint64_t *w, const uint64_t *prev)
{
	tr_v2 a, b;

	memcpy(&a, w, sizeof(a));
	memcpy(&b, prev, sizeof(b));
	a += b;
	memcpy(w, &a, sizeof(a));
}

/* Words 1..m of a record plus those of the previous one of its type. */
static inline void
delta_add(uint64_t *w, const uint64_t *prev, size_t m)
{
	if (m == 8) {	/* the common sizes, unrolled */
		w[1] += prev[1];
		delta_add2(w + 2, prev + 2);
		delta_add2(w + 4, prev + 4);
		delta_add2(w + 6, prev + 6);
	} else if (m == 7) {
		delta_add2(w + 1, prev + 1);
		delta_add2(w + 3, prev + 3);
		delta_add2(w + 5, prev + 5);
	} else
		for (size_t i = 1; i < m; i++)
			w[i] += prev[i];
}

/* Decoding in place: the previous record of a type is already decoded,
 * so it is read where it lies (one store a word). */
int
trace_delta_decode(void *buf, size_t len)
{
	const uint64_t *prev[TRACE_DELTA_TYPES];
	uint8_t pn[TRACE_DELTA_TYPES] = { 0 };
	size_t p = 0, n, m;
	uint64_t *w;
	unsigned t;

	while ((w = delta_next(buf, len, &p, pn, &t, &n, &m)) != NULL) {
		delta_add(w, prev[t], m);
		prev[t] = w;
		pn[t] = (uint8_t)n;
	}
	return p == len ? 0 : -EBADMSG;
}

/*
 * A chunk's records as the reader takes them, in one pass while each is
 * in cache: delta-decoded in place (when delta), then checked as
 * record_validate does, REC_PAD refused.  *nrec gets the count, *ndefs
 * the STRING_DEFs among them.  0, or -EBADMSG at the first bad one.
 */
/*
 * trace_chunk_decode's short way for the record at h when it is of type t
 * (a kernel or an API call: its size fixed) after one of its type: its
 * header's first four bytes ts (type and size, little-endian) one
 * compare, room the bytes left in the chunk.  1: not such a record; 0:
 * decoded and checked; -EBADMSG: a bad field.
 */
static inline __attribute__((always_inline)) int
dec_short(struct rec_hdr *h, uint32_t ts, size_t room,
    const uint64_t **prev, const uint8_t *pn, unsigned t)
{
	size_t size = t == REC_KERNEL ? sizeof(struct rec_kernel) :
	    sizeof(struct rec_api);
	uint64_t *w = (uint64_t *)(void *)h;

	if (ts != (t | (uint32_t)size << 16) || room < size ||
	    pn[t] != size / 8)
		return 1;
	delta_add(w, prev[t], size / 8);
	prev[t] = w;
	return t == REC_KERNEL ? record_check_kernel((const void *)h) :
	    record_check_api((const void *)h);
}

int
trace_chunk_decode(void *buf, size_t len, bool delta, uint32_t *nrec,
    uint32_t *ndefs)
{
	const uint64_t *prev[TRACE_DELTA_TYPES];
	uint8_t pn[TRACE_DELTA_TYPES] = { 0 }, *b = buf;
	uint32_t n = 0, defs = 0;
	size_t p = 0;
	int rc;

	while (p < len) {
		struct rec_hdr *h = (void *)(b + p);
		size_t size, words, m;
		uint64_t *w;
		uint32_t ts;

		if (len - p < REC_HDR_SIZE)
			return -EBADMSG;
		/* Most records are kernels and API calls, each of its type's
		 * size after one of the same: their words' count known, the
		 * type and size one compare. */
		memcpy(&ts, h, sizeof(ts));
		if (delta && ((rc = dec_short(h, ts, len - p, prev, pn,
		    REC_KERNEL)) <= 0 || (rc = dec_short(h, ts, len - p, prev,
		    pn, REC_API)) <= 0)) {
			if (rc < 0)
				return -EBADMSG;
			p += h->size;
			n++;
			continue;
		}
		size = h->size;
		if (size < REC_HDR_SIZE || (size & 7) || size > len - p)
			return -EBADMSG;
		if (delta && h->type < TRACE_DELTA_TYPES &&
		    h->type != REC_STRING_DEF) {
			w = (uint64_t *)(void *)h;
			words = size / 8 < TRACE_DELTA_WORDS ? size / 8 :
			    TRACE_DELTA_WORDS;
			m = pn[h->type] < words ? pn[h->type] : words;
			delta_add(w, prev[h->type], m);
			prev[h->type] = w;
			pn[h->type] = (uint8_t)words;
		}
		if (record_validate_framed_fast(h) != 0 || h->type == REC_PAD)
			return -EBADMSG;
		defs += h->type == REC_STRING_DEF;
		p += size;
		n++;
	}
	*nrec = n;
	*ndefs = defs;
	return 0;
}

const char *
trace_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EPROTO:
		return "not an mspti trace, or another version";
	case -EBADMSG:
		return "corrupt trace data";
	case -ENOSPC:
		return "no space left on device (trace incomplete)";
	case -EFBIG:
		return "file too large (trace incomplete)";
	case -E2BIG:
		return "too many distinct strings in one trace";
	case -EINVAL:
		return "invalid argument (trace fd must be at offset 0)";
	case -ETIMEDOUT:
		return UTIL_FIFO_NO_WRITER;
	case -ENXIO:
		return "not a regular file (a FIFO, device or socket)";
	}
	return err < 0 ? strerror(-err) : "unknown error";
}

char *
trace_arena_dup(struct trace_arena **ap, const char *s, size_t len)
{
	struct trace_arena *a = *ap;
	size_t cap;
	char *p;

	if (a == NULL || a->cap - a->used < len + 1) {
		cap = len + 1 > 65536 ? len + 1 : 65536;
		if ((a = malloc(sizeof(*a) + cap)) == NULL)
			return NULL;
		a->next = *ap;
		a->used = 0;
		a->cap = cap;
		*ap = a;
	}
	p = a->mem + a->used;
	memcpy(p, s, len);
	p[len] = '\0';
	a->used += len + 1;
	return p;
}

void
trace_arena_free(struct trace_arena *a)
{
	struct trace_arena *next;

	for (; a != NULL; a = next) {
		next = a->next;
		free(a);
	}
}

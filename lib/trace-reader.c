/*
 * The trace reader (see trace.h, doc/trace-format.md).
 *
 * A file is untrusted input.  The reader holds one chunk at a time (at most
 * TRACE_CHUNK_MAX raw bytes plus its compressed frame), checks every size
 * against its bound before allocating, checks CRCs before decompressing,
 * and validates every record of a chunk before delivering any of them, so a
 * chunk is delivered whole or not at all.
 *
 * With trace_reader_set_threads, worker threads read, check and
 * decompress the chunks ahead of the one being delivered (a fixed window
 * of chunks in flight).  Only what does not depend on earlier chunks is
 * done there; the string-id rule and every error are handled in order by
 * the caller's thread, and a chunk the workers did not find whole and
 * valid is read again by the serial path, so the records, errors and
 * stats are those of the serial reader.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_d_forceIgnoreChecksum */
#include <zstd.h>

#include "trace.h"
#include "util.h"

#define FOOTER_MAX	(64u << 20)

/* Fuzzing builds ignore checksums so that mutations reach the parsers
 * behind them. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CRC_MATCH(a, b)	((void)(a), (void)(b), 1)
#else
#define CRC_MATCH(a, b)	((a) == (b))
#endif
#define SCAN_BLOCK	65536
#define RD_THREADS_MAX	16

/* A chunk read ahead by a worker. */
struct rd_slot {
	int		 state;		/* RS_* */
	uint64_t	 off, next;
	struct trace_chunk_hdr ch;
	uint8_t		*comp, *raw;
	size_t		 compcap, rawcap;
	bool		 ok;		/* whole and every record valid */
	uint32_t	 ndefs;		/* STRING_DEF records in it */
	struct trace_chunk_aux aux;	/* the chunk function's */
};

/* RS_HELD: delivered by trace_reader_next_chunk, not done yet. */
enum { RS_FREE, RS_QUEUED, RS_BUSY, RS_DONE, RS_HELD };

struct rd_pool {
	pthread_mutex_t	 mu;
	pthread_cond_t	 work, done;
	pthread_t	 th[RD_THREADS_MAX];
	unsigned	 nth;
	struct rd_slot	*slots;
	unsigned	 nslots;
	unsigned	 head;		/* next slot delivered (ring order) */
	unsigned	 qhead;		/* next slot a worker takes */
	unsigned	 tail;		/* next slot filled */
	unsigned	 inflight;	/* filled, not yet delivered */
	int		 cur;		/* slot being delivered, -1: none */
	uint64_t	 next_off;	/* next chunk to read ahead; 0: none */
	bool		 stop;
	int		 evict;		/* rd_evict_force() */
	struct trace_reader *r;
};

struct trace_reader {
	int		 fd;
	int		 own_fd;
	int		 seekable;
	uint64_t	 off;		/* next chunk header */
	uint64_t	 pos;		/* stream position (not seekable) */
	ZSTD_DCtx	*dctx;
	bool		 delta;		/* TRACE_F_DELTA: decode chunks */

	uint8_t		*comp;
	size_t		 compcap;
	uint8_t		*raw;		/* 8-byte aligned (malloc) */
	size_t		 rawcap;
	size_t		 rawlen;
	size_t		 rpos;
	const uint8_t	*data;		/* chunk delivered: raw or a slot's */
	uint32_t	 nrec;		/* its records */
	uint32_t	 ndefs;		/* its STRING_DEF records */
	struct rd_pool	*pool;		/* NULL: serial */
	bool		 chunks;	/* delivering whole chunks */
	trace_chunk_fn	 chunk_fn;
	struct trace_chunk_aux aux;	/* its output on the serial path */
	int		 held;		/* the slot just delivered so, or -1 */
	unsigned	 hold;		/* chunks the caller may hold */

	struct trace_header	 hdr;
	struct trace_kv		*kv;
	struct rec_clock_sync	*clocks;

	int		 have_footer;
	uint64_t	 footer_off;
	struct trace_footer	 footer;
	struct trace_index_entry *index;

	const char	**strs;		/* strs[id], id 1..nstrs; NULL: lost */
	uint32_t	 nstrs;
	size_t		 strcap;
	uint64_t	 str_gap;	/* ids a skipped chunk may have defined */
	struct trace_arena *arena;	/* owns hdr strings and strs[] */

	struct trace_reader_stats st;
	char		 err[192];
};

static void
reader_err(struct trace_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
reader_err(struct trace_reader *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
}

/*
 * A chunk's frame is decompressed only after its CRC-32C matched, and
 * every record it yields is validated: zstd's own XXH64 content checksum,
 * when the writer put one in, would hash the whole output once more (15 %
 * of the decompression) to guard what the CRC already guards.  msptid's
 * files have none (doc/trace-format.md), so files with and without it
 * are checked alike.
 */
static void
reader_dctx_tune(ZSTD_DCtx *dctx)
{
#ifdef ZSTD_d_forceIgnoreChecksum
	ZSTD_DCtx_setParameter(dctx, ZSTD_d_forceIgnoreChecksum,
	    ZSTD_d_ignoreChecksum);
#else
	(void)dctx;
#endif
}

/* Reads up to len bytes at off; returns the count (short only at the end
 * of the file) or -errno.  A stream only goes forward. */
static ssize_t
rd_at(struct trace_reader *r, uint64_t off, void *buf, size_t len)
{
	uint8_t skip[4096];
	size_t done = 0;
	ssize_t n;

	if (!r->seekable) {
		if (off < r->pos)
			return -ESPIPE;
		while (r->pos < off) {
			n = read(r->fd, skip, off - r->pos < sizeof skip ?
			    off - r->pos : sizeof skip);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			if (n == 0)
				return 0;
			r->pos += (uint64_t)n;
		}
	}
	while (done < len) {
		if (r->seekable)
			n = pread(r->fd, (uint8_t *)buf + done, len - done,
			    (off_t)(off + done));
		else
			n = read(r->fd, (uint8_t *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
		if (!r->seekable)
			r->pos += (uint64_t)n;
	}
	return (ssize_t)done;
}

/* Parses the TLVs of a header whose size and CRC are checked. */
static int
header_parse(struct trace_reader *r, const uint8_t *buf, size_t size)
{
	struct trace_tlv t;
	size_t pos, step, nkv = 0, nclk = 0, pass;
	const char *v, *nul;
	int end;

	/* Pass 0 counts, pass 1 fills. */
	for (pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			r->kv = calloc(nkv ? nkv : 1, sizeof(*r->kv));
			r->clocks = calloc(nclk ? nclk : 1, sizeof(*r->clocks));
			if (r->kv == NULL || r->clocks == NULL)
				return -ENOMEM;
			nkv = nclk = 0;
		}
		end = 0;
		for (pos = sizeof(struct trace_file_hdr); pos + sizeof t <= size;
		    pos += step) {
			memcpy(&t, buf + pos, sizeof t);
			if (t.len > size - pos - sizeof t)
				return -EBADMSG;
			step = sizeof t + ((t.len + 7) & ~(size_t)7);
			if (step > size - pos)
				return -EBADMSG;
			v = (const char *)buf + pos + sizeof t;
			if (t.tag == TRACE_TAG_END) {
				end = 1;
				break;
			}
			switch (t.tag) {
			case TRACE_TAG_HOSTNAME:
			case TRACE_TAG_PRODUCER:
				if (pass == 0)
					break;
				v = trace_arena_dup(&r->arena, v, t.len);
				if (v == NULL)
					return -ENOMEM;
				if (t.tag == TRACE_TAG_HOSTNAME)
					r->hdr.hostname = v;
				else
					r->hdr.producer = v;
				break;
			case TRACE_TAG_CONFIG:
				if ((nul = memchr(v, '\0', t.len)) == NULL)
					return -EBADMSG;
				if (pass == 1) {
					r->kv[nkv].key = trace_arena_dup(
					    &r->arena, v, (size_t)(nul - v));
					r->kv[nkv].value = trace_arena_dup(
					    &r->arena, nul + 1,
					    t.len - (size_t)(nul - v) - 1);
					if (r->kv[nkv].key == NULL ||
					    r->kv[nkv].value == NULL)
						return -ENOMEM;
				}
				nkv++;
				break;
			case TRACE_TAG_CLOCK_SYNC:
				if (t.len != sizeof(struct rec_clock_sync))
					return -EBADMSG;
				if (pass == 1) {
					memcpy(&r->clocks[nclk], v, t.len);
					if (r->clocks[nclk].hdr.type !=
					    REC_CLOCK_SYNC ||
					    record_validate(&r->clocks[nclk],
					    t.len) != 0)
						return -EBADMSG;
				}
				nclk++;
				break;
			default:
				break;	/* unknown tags are skipped */
			}
		}
		if (!end)
			return -EBADMSG;
	}
	r->hdr.config = r->kv;
	r->hdr.nconfig = nkv;
	r->hdr.clocks = r->clocks;
	r->hdr.nclocks = nclk;
	return 0;
}

static int
header_read(struct trace_reader *r)
{
	struct trace_file_hdr fh;
	uint8_t *buf;
	uint32_t crc;
	ssize_t n;
	int rc;

	n = rd_at(r, 0, &fh, sizeof fh);
	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof fh || memcmp(fh.magic, TRACE_MAGIC, 8) != 0)
		return -EPROTO;
	if (fh.version < TRACE_VERSION_MIN || fh.version > TRACE_VERSION ||
	    (fh.flags & ~TRACE_F_DELTA))
		return -EPROTO;
	r->delta = (fh.flags & TRACE_F_DELTA) != 0;
	if (fh.size < sizeof fh + sizeof(struct trace_tlv) ||
	    fh.size > TRACE_HEADER_MAX || (fh.size & 7))
		return -EBADMSG;
	if ((buf = malloc(fh.size)) == NULL)
		return -ENOMEM;
	memcpy(buf, &fh, sizeof fh);
	n = rd_at(r, sizeof fh, buf + sizeof fh, fh.size - sizeof fh);
	if (n < 0 || (size_t)n != fh.size - sizeof fh) {
		free(buf);
		return n < 0 ? (int)n : -EBADMSG;
	}
	memset(buf + offsetof(struct trace_file_hdr, crc), 0, 4);
	crc = trace_crc32c(0, buf, fh.size);
	if (!CRC_MATCH(crc, fh.crc)) {
		free(buf);
		return -EBADMSG;
	}
	r->hdr.created_ns = fh.created_ns;
	r->hdr.session_id = fh.session_id;
	r->hdr.hostname = "";
	r->hdr.producer = "";
	rc = header_parse(r, buf, fh.size);
	free(buf);
	r->off = fh.size;
	return rc;
}

/* Reads and checks the footer at off; fills r->footer and the index.
 * first, when not NULL, holds the footer's first bytes, already read from a
 * stream. */
static int
footer_read(struct trace_reader *r, uint64_t off, const void *first)
{
	struct trace_footer_hdr fh;
	const uint8_t *p;
	uint8_t *buf;
	uint64_t need;
	uint32_t crc, i;
	ssize_t n;

	if (first != NULL) {
		memcpy(&fh, first, sizeof fh);
	} else {
		n = rd_at(r, off, &fh, sizeof fh);
		if (n < 0)
			return (int)n;
		if ((size_t)n < sizeof fh)
			return -ENODATA;
	}
	if (memcmp(fh.magic, TRACE_FOOTER_MAGIC, 8) != 0)
		return -EBADMSG;
	if (fh.ntypes > 1024 || fh.nstages > 64 || fh.size > FOOTER_MAX)
		return -EBADMSG;
	need = sizeof fh + 8ull * fh.ntypes + 8ull * fh.nstages +
	    fh.chunks * (uint64_t)sizeof(struct trace_index_entry);
	if (fh.chunks > FOOTER_MAX || need != fh.size)
		return -EBADMSG;
	if ((buf = malloc(fh.size)) == NULL)
		return -ENOMEM;
	memcpy(buf, &fh, sizeof fh);
	n = rd_at(r, off + sizeof fh, buf + sizeof fh, fh.size - sizeof fh);
	if (n < 0 || (size_t)n != fh.size - sizeof fh) {
		free(buf);
		return n < 0 ? (int)n : -ENODATA;
	}
	memset(buf + offsetof(struct trace_footer_hdr, crc), 0, 4);
	crc = trace_crc32c(0, buf, fh.size);
	if (!CRC_MATCH(crc, fh.crc)) {
		free(buf);
		return -EBADMSG;
	}
	free(r->index);
	r->index = malloc(fh.chunks ? fh.chunks * sizeof(*r->index) : 1);
	if (r->index == NULL) {
		free(buf);
		return -ENOMEM;
	}
	memset(&r->footer, 0, sizeof r->footer);
	r->footer.end_ns = fh.end_ns;
	r->footer.records = fh.records;
	r->footer.chunks = fh.chunks;
	p = buf + sizeof fh;
	for (i = 0; i < fh.ntypes; i++, p += 8)
		if (i < REC_TYPE_MAX)
			memcpy(&r->footer.counts[i], p, 8);
	for (i = 0; i < fh.nstages; i++, p += 8)
		if (i < LOSS_STAGE_MAX)
			memcpy(&r->footer.losses[i], p, 8);
	memcpy(r->index, p, fh.chunks * sizeof(*r->index));
	free(buf);
	r->have_footer = 1;
	r->footer_off = off;
	return 0;
}

/* Finds the footer through the trailer at the end of a seekable file. */
static void
trailer_read(struct trace_reader *r)
{
	struct trace_trailer tr;
	struct stat sb;

	if (fstat(r->fd, &sb) == -1 || (uint64_t)sb.st_size < r->off + sizeof tr)
		return;
	if (rd_at(r, (uint64_t)sb.st_size - sizeof tr, &tr, sizeof tr) !=
	    (ssize_t)sizeof tr)
		return;
	if (memcmp(tr.magic, TRACE_TRAILER_MAGIC, 8) != 0 ||
	    !CRC_MATCH(tr.crc, trace_crc32c(0, &tr,
	    offsetof(struct trace_trailer, crc))))
		return;
	if (tr.footer_offset < r->off ||
	    tr.footer_offset + tr.footer_size + sizeof tr != (uint64_t)sb.st_size)
		return;
	if (footer_read(r, tr.footer_offset, NULL) != 0)
		r->have_footer = 0;
}

static void pool_free(struct rd_pool *);

void
trace_reader_close(struct trace_reader *r)
{
	if (r == NULL)
		return;
	pool_free(r->pool);
	if (r->own_fd)
		close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	free(r->comp);
	free(r->raw);
	free(r->aux.p);
	free(r->kv);
	free(r->clocks);
	free(r->index);
	free(r->strs);
	trace_arena_free(r->arena);
	free(r);
}

int
trace_reader_open_fd(int fd, struct trace_reader **rp)
{
	struct trace_reader *r;
	struct stat sb;
	int rc;

	if (rp == NULL || fd < 0)
		return -EINVAL;
	*rp = NULL;
	if (fstat(fd, &sb) == -1)
		return -errno;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return -ENOMEM;
	r->fd = fd;
	r->seekable = S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode);
	if (!r->seekable)
		r->pos = 0;
	if ((r->dctx = ZSTD_createDCtx()) == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	reader_dctx_tune(r->dctx);
	if ((rc = header_read(r)) != 0)
		goto fail;
	if (r->seekable)
		trailer_read(r);
	r->st.offset = r->off;
	*rp = r;
	return 0;
fail:
	trace_reader_close(r);
	return rc;
}

int
trace_reader_open(const char *path, struct trace_reader **rp)
{
	int fd, rc;

	/* A FIFO nobody writes to: an error after a while, not a wait. */
	if ((fd = util_open_input(path)) < 0)
		return fd;
	if ((rc = trace_reader_open_fd(fd, rp)) != 0) {
		close(fd);
		return rc;
	}
	(*rp)->own_fd = 1;
	return 0;
}

static int
chunk_hdr_ok(const struct trace_chunk_hdr *ch)
{
	struct trace_chunk_hdr c = *ch;

	c.hdr_crc = 0;
	return ch->magic == TRACE_CHUNK_MAGIC &&
	    CRC_MATCH(trace_crc32c(0, &c, sizeof c), ch->hdr_crc);
}

/*
 * Looks for the next chunk header (valid CRC) or footer magic at or after
 * from, in a seekable file.  Returns its offset, or 0 if none.
 */
static uint64_t
scan_next(struct trace_reader *r, uint64_t from)
{
	static const uint8_t cmagic[4] = { 'C', 'H', 'N', 'K' };
	struct trace_chunk_hdr ch;
	uint8_t *blk;
	ssize_t n;
	size_t i;
	uint64_t found = 0;

	if (!r->seekable || (blk = malloc(SCAN_BLOCK)) == NULL)
		return 0;
	for (;;) {
		n = rd_at(r, from, blk, SCAN_BLOCK);
		if (n < 8)
			break;
		for (i = 0; i + 8 <= (size_t)n; i++) {
			if (memcmp(blk + i, TRACE_FOOTER_MAGIC, 8) == 0) {
				found = from + i;
				goto out;
			}
			if (memcmp(blk + i, cmagic, 4) == 0 &&
			    rd_at(r, from + i, &ch, sizeof ch) ==
			    (ssize_t)sizeof ch && chunk_hdr_ok(&ch)) {
				found = from + i;
				goto out;
			}
		}
		from += (uint64_t)n - 7;	/* a magic may straddle blocks */
	}
out:
	free(blk);
	return found;
}

static int
grow(uint8_t **bufp, size_t *capp, size_t need)
{
	uint8_t *p;

	if (need <= *capp)
		return 0;
	if ((p = malloc(need)) == NULL)
		return -ENOMEM;
	free(*bufp);
	*bufp = p;
	*capp = need;
	return 0;
}

/* The chunk at off is unusable: count it, say why, and find the next. */
static int
chunk_corrupt(struct trace_reader *r, uint64_t off, uint64_t next,
    const char *why)
{
	r->st.corrupt_chunks++;
	/* Its string definitions are lost: the next ones may leave a gap. */
	r->str_gap += TRACE_CHUNK_MAX / rec_string_def_size(0);
	reader_err(r, "chunk %llu at offset %llu: %s",
	    (unsigned long long)(r->st.chunks + r->st.corrupt_chunks - 1),
	    (unsigned long long)off, why);
	if (next == 0 && (next = scan_next(r, off + 1)) == 0) {
		r->st.done = true;
		r->st.truncated = !r->have_footer;
	}
	r->off = next;
	return -EBADMSG;
}

/*
 * Checks the string ids of a decompressed chunk whose records are valid
 * (trace_chunk_decode); 0 or -EBADMSG.  They must go on from the last one
 * defined, or jump by at most as many as the chunks skipped as corrupt
 * could have defined.
 */
static int
chunk_check(struct trace_reader *r, const uint8_t *raw, size_t len,
    uint32_t records)
{
	const struct rec_hdr *h;
	uint64_t nextid = (uint64_t)r->nstrs + 1, gap = r->str_gap, id;
	uint32_t n = 0;
	size_t p = 0;

	while (p < len) {
		h = (const struct rec_hdr *)(raw + p);
		if (h->type == REC_STRING_DEF) {
			id = ((const struct rec_string_def *)h)->id;
			if (id < nextid || id > nextid + gap ||
			    id > TRACE_STRINGS_MAX)
				return -EBADMSG;
			nextid = id + 1;
			gap = 0;
		}
		p += h->size;
		n++;
	}
	if (n != records)
		return -EBADMSG;
	if (gap == 0)
		r->str_gap = 0;
	return 0;
}

/* Loads the next chunk: 1, 0 at the end, or a negative error. */
static int
chunk_load(struct trace_reader *r)
{
	struct trace_chunk_hdr ch;
	uint64_t off = r->off, next;
	uint32_t nrec, ndefs;
	size_t got;
	ssize_t n;
	int rc;

	n = rd_at(r, off, &ch, sizeof ch);
	if (n < 0) {
		reader_err(r, "read at offset %llu: %s",
		    (unsigned long long)off, strerror((int)-n));
		r->st.done = true;
		return (int)n;
	}
	if (n >= 8 && memcmp(&ch, TRACE_FOOTER_MAGIC, 8) == 0) {
		r->st.done = true;
		if (r->have_footer && r->footer_off == off)
			return 0;
		rc = (size_t)n < sizeof ch ? -ENODATA :
		    footer_read(r, off, &ch);
		if (rc == -ENODATA) {
			r->st.truncated = true;
			return 0;
		}
		if (rc != 0) {
			r->st.truncated = true;
			reader_err(r, "footer at offset %llu: %s",
			    (unsigned long long)off, trace_strerror(rc));
			return rc;
		}
		return 0;
	}
	if ((size_t)n < sizeof ch) {
		/* Ends before a whole chunk header: the writer stopped. */
		r->st.done = true;
		r->st.truncated = true;
		return 0;
	}
	if (!chunk_hdr_ok(&ch))
		return chunk_corrupt(r, off, 0, "bad chunk header");
	next = off + sizeof ch + ch.comp_size;
	if (ch.raw_size > TRACE_CHUNK_MAX || (ch.raw_size & 7) ||
	    ch.comp_size > ZSTD_compressBound(TRACE_CHUNK_MAX) ||
	    ch.records > ch.raw_size / 8 || ch.comp_size == 0)
		return chunk_corrupt(r, off, next, "impossible sizes");
	if (grow(&r->comp, &r->compcap, ch.comp_size) != 0 ||
	    grow(&r->raw, &r->rawcap, ch.raw_size ? ch.raw_size : 8) != 0) {
		r->st.done = true;
		return -ENOMEM;
	}
	n = rd_at(r, off + sizeof ch, r->comp, ch.comp_size);
	if (n < 0) {
		r->st.done = true;
		return (int)n;
	}
	if ((size_t)n < ch.comp_size) {
		r->st.done = true;
		r->st.truncated = true;
		return 0;
	}
	if (!CRC_MATCH(trace_crc32c(0, r->comp, ch.comp_size), ch.data_crc))
		return chunk_corrupt(r, off, next, "data checksum mismatch");
	got = ZSTD_decompressDCtx(r->dctx, r->raw, ch.raw_size, r->comp,
	    ch.comp_size);
	if (ZSTD_isError(got) || got != ch.raw_size)
		return chunk_corrupt(r, off, next, "bad zstd frame");
	if (trace_chunk_decode(r->raw, got, r->delta, &nrec, &ndefs) != 0 ||
	    nrec != ch.records || (ndefs > 0 && chunk_check(r, r->raw, got,
	    ch.records) != 0))
		return chunk_corrupt(r, off, next, "invalid records");
	r->rawlen = ch.raw_size;
	r->rpos = 0;
	r->data = r->raw;
	r->nrec = ch.records;
	r->ndefs = ndefs;
	r->off = next;
	r->st.chunks++;
	r->st.offset = next;
	return 1;
}

/* Records a STRING_DEF already checked by chunk_check. */
static int
string_add(struct trace_reader *r, const struct rec_string_def *d)
{
	const char **n;
	size_t cap;
	uint32_t i;

	if ((size_t)d->id + 1 > r->strcap) {
		cap = r->strcap ? r->strcap * 2 : 1024;
		if (cap < (size_t)d->id + 1)
			cap = (size_t)d->id + 1;
		if ((n = realloc(r->strs, cap * sizeof(*n))) == NULL)
			return -ENOMEM;
		r->strs = n;
		r->strcap = cap;
	}
	for (i = r->nstrs + 1; i < d->id; i++)
		r->strs[i] = NULL;	/* defined in a chunk that was lost */
	r->strs[d->id] = trace_arena_dup(&r->arena, d->bytes, d->len);
	if (r->strs[d->id] == NULL)
		return -ENOMEM;
	r->nstrs = d->id;
	return 0;
}

/* ---- read-ahead workers ---- */

/* A chunk's sizes as chunk_load accepts them. */
static bool
chunk_sizes_ok(const struct trace_chunk_hdr *ch)
{
	return !(ch->raw_size > TRACE_CHUNK_MAX || (ch->raw_size & 7) ||
	    ch->comp_size > ZSTD_compressBound(TRACE_CHUNK_MAX) ||
	    ch->records > ch->raw_size / 8 || ch->comp_size == 0);
}

/*
 * A slot's buffer was last read by the thread the chunks go to, on another
 * CPU.  When the two CPUs share no cache (two sockets, two dies, or two
 * vCPUs the host placed so), each line zstd then writes has first to be
 * taken back from that CPU's caches, a snoop a line: the worker ran at 2.5
 * times its cost, and a one-file report on two threads took longer than
 * on one (doc/benchmarks.md, eighteenth pass).  Evicting the buffer from
 * every cache first (util_cache_evict) sends its writes to memory as to a
 * fresh buffer.  Where the CPUs share a cache that costs the worker about
 * a third more instead.  Which case holds can change while a report runs
 * (a host moves its vCPUs), so each worker measures its CPU time a byte
 * each way: the way it takes, on every chunk (a running mean), and the
 * other on one chunk at the start of every period, which is 8 chunks
 * after a change of way and doubles up to RD_TUNE_PERIOD while the way
 * holds (rd_tune_pick).
 * MSPTI_READER_EVICT=0 never evicts, =1 always does.
 */
#define RD_TUNE_PERIOD	128

struct rd_tune {
	int		 force;		/* -1: measure; else 0 or 1 */
	unsigned	 skip;		/* chunks before measuring */
	unsigned	 n;		/* chunks into the period */
	unsigned	 period;
	double		 cost[2];	/* ns a byte, kept / evicted; 0: none */
	bool		 evict;		/* the way taken */
};

/* The way the environment and the CPU leave: -1 to measure, else 0 or
 * 1 (read on the thread that starts the workers, not on theirs). */
static int
rd_evict_force(void)
{
	const char *e = getenv("MSPTI_READER_EVICT");

	if (!util_cache_evict_ok() || (e != NULL && strcmp(e, "0") == 0))
		return 0;
	return e != NULL && strcmp(e, "1") == 0 ? 1 : -1;
}

/* A worker's tuning.  The first nslots chunks go into buffers no one has
 * read yet, and the next ones may still grow theirs: the first 2 x nslots
 * tell nothing. */
static void
rd_tune_init(struct rd_tune *t, int force, unsigned nslots)
{
	memset(t, 0, sizeof(*t));
	t->force = force;
	t->skip = 2 * nslots;
	t->period = 8;
}

/* Whether to evict before the next chunk: each way once, then the cheaper
 * but for a chunk the other way at the start of each period. */
static bool
rd_tune_pick(const struct rd_tune *t)
{
	if (t->force >= 0)
		return t->force == 1;
	if (t->skip > 0 || t->cost[0] == 0)
		return false;
	if (t->cost[1] == 0)
		return true;
	return t->n == 0 ? !t->evict : t->evict;
}

/* A chunk of bytes took ns of the worker's CPU, evicted or not. */
static void
rd_tune_note(struct rd_tune *t, bool evict, uint64_t ns, size_t bytes)
{
	double c = (double)(ns + 1) / (double)(bytes + 1);
	bool cheaper;

	if (t->force >= 0)
		return;
	if (t->skip > 0) {
		t->skip--;
		return;
	}
	if (t->cost[evict] == 0 || evict != t->evict)
		t->cost[evict] = c;	/* the first, or a probe: afresh */
	else
		t->cost[evict] += (c - t->cost[evict]) / 4;
	if (t->cost[0] == 0 || t->cost[1] == 0)
		return;
	cheaper = t->cost[1] < t->cost[0];
	if (cheaper != t->evict) {
		t->evict = cheaper;
		t->period = 8;
		t->n = 1;
		return;
	}
	if (++t->n >= t->period) {
		t->n = 0;
		if (t->period < RD_TUNE_PERIOD)
			t->period *= 2;
	}
}

/* A worker's part: read, CRC, decompress, validate every record. */
static void
slot_work(struct trace_reader *r, ZSTD_DCtx *dctx, struct rd_slot *sl,
    bool evict)
{
	const struct trace_chunk_hdr *ch = &sl->ch;
	uint32_t n;
	size_t got;
	ssize_t rn;

	sl->ok = false;
	sl->ndefs = 0;
	if (grow(&sl->comp, &sl->compcap, ch->comp_size) != 0 ||
	    grow(&sl->raw, &sl->rawcap, ch->raw_size ? ch->raw_size : 8) != 0)
		return;
	rn = rd_at(r, sl->off + sizeof(*ch), sl->comp, ch->comp_size);
	if (rn < 0 || (size_t)rn < ch->comp_size ||
	    !CRC_MATCH(trace_crc32c(0, sl->comp, ch->comp_size), ch->data_crc))
		return;
	if (evict)
		util_cache_evict(sl->raw, ch->raw_size);
	got = ZSTD_decompressDCtx(dctx, sl->raw, ch->raw_size, sl->comp,
	    ch->comp_size);
	if (ZSTD_isError(got) || got != ch->raw_size ||
	    trace_chunk_decode(sl->raw, got, r->delta, &n, &sl->ndefs) != 0)
		return;
	sl->ok = n == ch->records;
	/* While the records are in this CPU's cache. */
	if (sl->ok && r->chunk_fn != NULL) {
		sl->aux.len = 0;
		r->chunk_fn(sl->raw, got, n, &sl->aux);
	}
}

static void *
pool_worker(void *arg)
{
	struct rd_pool *pl = arg;
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	struct rd_slot *sl;
	struct rd_tune tune;

	if (dctx != NULL)
		reader_dctx_tune(dctx);
	rd_tune_init(&tune, pl->evict, pl->nslots);
	pthread_mutex_lock(&pl->mu);
	for (;;) {
		while (!pl->stop &&
		    pl->slots[pl->qhead].state != RS_QUEUED)
			pthread_cond_wait(&pl->work, &pl->mu);
		if (pl->stop)
			break;
		sl = &pl->slots[pl->qhead];
		pl->qhead = (pl->qhead + 1) % pl->nslots;
		sl->state = RS_BUSY;
		pthread_mutex_unlock(&pl->mu);
		if (dctx != NULL) {
			bool evict = rd_tune_pick(&tune);
			uint64_t t0 = util_clock_ns(CLOCK_THREAD_CPUTIME_ID);

			slot_work(pl->r, dctx, sl, evict);
			rd_tune_note(&tune, evict, util_clock_ns(
			    CLOCK_THREAD_CPUTIME_ID) - t0, sl->ch.raw_size);
		} else
			sl->ok = false;
		pthread_mutex_lock(&pl->mu);
		sl->state = RS_DONE;
		pthread_cond_broadcast(&pl->done);
	}
	pthread_mutex_unlock(&pl->mu);
	ZSTD_freeDCtx(dctx);
	return NULL;
}

/* Fills free slots with the chunks that follow (their headers are read
 * here, in order); stops at anything that is not a plain good chunk. */
static void
pool_fill(struct rd_pool *pl)
{
	struct trace_reader *r = pl->r;
	struct trace_chunk_hdr ch;
	bool queued = false;

	while (pl->next_off != 0 && pl->inflight < pl->nslots) {
		struct rd_slot *sl = &pl->slots[pl->tail];
		ssize_t n;
		int st;

		/* A chunk the caller holds (trace_reader_next_chunk) keeps
		 * its slot until done: the window waits for it. */
		pthread_mutex_lock(&pl->mu);
		st = sl->state;
		pthread_mutex_unlock(&pl->mu);
		if (st != RS_FREE)
			break;
		n = rd_at(r, pl->next_off, &ch, sizeof(ch));

		if (n != (ssize_t)sizeof(ch) || !chunk_hdr_ok(&ch) ||
		    !chunk_sizes_ok(&ch)) {
			pl->next_off = 0;	/* the serial path decides */
			break;
		}
		sl->off = pl->next_off;
		sl->ch = ch;
		sl->next = sl->off + sizeof(ch) + ch.comp_size;
		pthread_mutex_lock(&pl->mu);
		sl->state = RS_QUEUED;
		pthread_mutex_unlock(&pl->mu);
		pl->tail = (pl->tail + 1) % pl->nslots;
		pl->inflight++;
		pl->next_off = sl->next;
		queued = true;
	}
	if (queued) {
		pthread_mutex_lock(&pl->mu);
		pthread_cond_broadcast(&pl->work);
		pthread_mutex_unlock(&pl->mu);
	}
}

/* Waits for every slot in flight and forgets them. */
static void
pool_reset(struct rd_pool *pl)
{
	pthread_mutex_lock(&pl->mu);
	for (unsigned i = 0; i < pl->nslots; i++) {
		while (pl->slots[i].state == RS_QUEUED ||
		    pl->slots[i].state == RS_BUSY) {
			if (pl->slots[i].state == RS_QUEUED) {
				/* Not taken yet: take it back. */
				pl->slots[i].state = RS_FREE;
				break;
			}
			pthread_cond_wait(&pl->done, &pl->mu);
		}
		if (pl->slots[i].state != RS_HELD)
			pl->slots[i].state = RS_FREE;
	}
	/* From the next slot delivered on: the slots before it that the
	 * caller still holds (trace_reader_next_chunk) come free in that
	 * order, after the ones ahead. */
	pl->qhead = pl->tail = pl->head;
	pl->inflight = 0;
	pl->cur = -1;
	pthread_mutex_unlock(&pl->mu);
}

static void
pool_free(struct rd_pool *pl)
{
	if (pl == NULL)
		return;
	pthread_mutex_lock(&pl->mu);
	pl->stop = true;
	pthread_cond_broadcast(&pl->work);
	pthread_mutex_unlock(&pl->mu);
	for (unsigned i = 0; i < pl->nth; i++)
		pthread_join(pl->th[i], NULL);
	for (unsigned i = 0; i < pl->nslots; i++) {
		free(pl->slots[i].comp);
		free(pl->slots[i].raw);
		free(pl->slots[i].aux.p);
	}
	free(pl->slots);
	pthread_cond_destroy(&pl->work);
	pthread_cond_destroy(&pl->done);
	pthread_mutex_destroy(&pl->mu);
	free(pl);
}

int
trace_reader_set_threads(struct trace_reader *r, unsigned n)
{
	struct rd_pool *pl;
	sigset_t old;

	if (r->pool != NULL || n == 0 || !r->seekable || r->st.done)
		return 0;
	if (n > RD_THREADS_MAX)
		n = RD_THREADS_MAX;
	if ((pl = calloc(1, sizeof(*pl))) == NULL)
		return -ENOMEM;
	pl->r = r;
	pl->evict = rd_evict_force();
	pl->nslots = 2 * n + 1 + r->hold;
	pl->cur = -1;
	if ((pl->slots = calloc(pl->nslots, sizeof(*pl->slots))) == NULL) {
		free(pl);
		return -ENOMEM;
	}
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->work, NULL);
	pthread_cond_init(&pl->done, NULL);
	/* Inside an application (the Python extension) its signals stay
	 * with its own threads. */
	util_block_async_signals(&old);
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&pl->th[i], NULL, pool_worker, pl) != 0)
			break;
		pl->nth++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pl->nth == 0) {
		pool_free(pl);
		return 0;	/* serial it is */
	}
	r->pool = pl;
	/* Start reading ahead at once (the caller may still be busy with
	 * another file). */
	pl->next_off = r->off;
	pool_fill(pl);
	return 0;
}

/*
 * The next chunk through the workers: 1 (r->data is it), or what the
 * serial chunk_load returns for a chunk they could not take.
 */
static int
pool_next(struct trace_reader *r)
{
	struct rd_pool *pl = r->pool;
	struct rd_slot *sl;
	int rc;

	if (pl->cur >= 0) {
		pthread_mutex_lock(&pl->mu);
		pl->slots[pl->cur].state = RS_FREE;
		pthread_mutex_unlock(&pl->mu);
		pl->cur = -1;
		pl->head = (pl->head + 1) % pl->nslots;
		pl->inflight--;
	}
	pool_fill(pl);
	if (pl->inflight == 0 && r->chunks && pl->next_off != 0) {
		/* Every slot is held: wait for the oldest to be done. */
		pthread_mutex_lock(&pl->mu);
		while (pl->slots[pl->tail].state == RS_HELD)
			pthread_cond_wait(&pl->done, &pl->mu);
		pthread_mutex_unlock(&pl->mu);
		pool_fill(pl);
	}
	if (pl->inflight == 0)
		goto serial;
	sl = &pl->slots[pl->head];
	pthread_mutex_lock(&pl->mu);
	while (sl->state != RS_DONE)
		pthread_cond_wait(&pl->done, &pl->mu);
	pthread_mutex_unlock(&pl->mu);
	if (!sl->ok || sl->off != r->off || (sl->ndefs > 0 &&
	    chunk_check(r, sl->raw, sl->ch.raw_size, sl->ch.records) != 0))
		goto serial;
	if (r->chunks) {
		/* The caller's until trace_reader_chunk_done. */
		pthread_mutex_lock(&pl->mu);
		sl->state = RS_HELD;
		pthread_mutex_unlock(&pl->mu);
		r->held = (int)pl->head;
		pl->head = (pl->head + 1) % pl->nslots;
		pl->inflight--;
	} else
		pl->cur = (int)pl->head;
	r->data = sl->raw;
	r->nrec = sl->ch.records;
	r->ndefs = sl->ndefs;
	r->rawlen = sl->ch.raw_size;
	r->rpos = 0;
	r->off = sl->next;
	r->st.chunks++;
	r->st.offset = sl->next;
	pool_fill(pl);
	return 1;
serial:
	/* Whatever the workers made of what follows is dropped: the serial
	 * path may resynchronise elsewhere. */
	pool_reset(pl);
	rc = chunk_load(r);
	pl->next_off = r->st.done ? 0 : r->off;
	if (rc == 1)
		pool_fill(pl);
	return rc;
}

int
trace_reader_next(struct trace_reader *r, const struct rec_hdr **recp)
{
	const struct rec_hdr *h;
	int rc;

	for (;;) {
		if (r->rpos < r->rawlen) {
			h = (const struct rec_hdr *)(r->data + r->rpos);
			r->rpos += h->size;
			if (h->type == REC_STRING_DEF &&
			    (rc = string_add(r, (const void *)h)) != 0)
				return rc;
			r->st.records++;
			*recp = h;
			return 1;
		}
		if (r->st.done)
			return 0;
		if ((rc = r->pool != NULL ? pool_next(r) : chunk_load(r)) <= 0)
			return rc;
	}
}

void
trace_reader_set_chunk_fn(struct trace_reader *r, trace_chunk_fn fn)
{
	if (r->pool == NULL)
		r->chunk_fn = fn;
}

void
trace_reader_hold(struct trace_reader *r, unsigned n)
{
	r->hold = n > 64 ? 64 : n;
}

int
trace_reader_next_chunk(struct trace_reader *r, struct trace_chunk *c)
{
	int rc;

	memset(c, 0, sizeof(*c));
	c->slot = -1;
	r->chunks = true;
	r->held = -1;
	if (r->st.done)
		return 0;
	if ((rc = r->pool != NULL ? pool_next(r) : chunk_load(r)) <= 0)
		return rc;
	c->data = r->data;
	c->len = r->rawlen;
	c->records = r->nrec;
	if (r->held >= 0) {
		struct rd_slot *sl = &r->pool->slots[r->held];

		c->slot = r->held;
		if (r->chunk_fn != NULL) {
			c->aux = sl->aux.p;
			c->auxlen = sl->aux.len;
		}
	} else {
		/* The serial path's buffers go with the chunk; the next
		 * load allocates others. */
		c->own = r->raw;
		r->raw = NULL;
		r->rawcap = 0;
		if (r->chunk_fn != NULL) {
			r->aux.len = 0;
			r->chunk_fn(c->data, c->len, c->records, &r->aux);
			c->aux = c->own_aux = r->aux.p;
			c->auxlen = r->aux.len;
			memset(&r->aux, 0, sizeof(r->aux));
		}
	}
	r->held = -1;
	r->rpos = r->rawlen;
	r->data = NULL;
	r->st.records += c->records;
	for (size_t at = 0; r->ndefs > 0 && at < c->len;) {
		const struct rec_hdr *h = (const void *)(c->data + at);

		if (h->type == REC_STRING_DEF &&
		    (rc = string_add(r, (const void *)h)) != 0) {
			trace_reader_chunk_done(r, c);
			return rc;
		}
		at += h->size;
	}
	return 1;
}

void
trace_reader_chunk_done(struct trace_reader *r, struct trace_chunk *c)
{
	if (c->slot >= 0 && r->pool != NULL) {
		struct rd_pool *pl = r->pool;

		pthread_mutex_lock(&pl->mu);
		pl->slots[c->slot].state = RS_FREE;
		pthread_cond_broadcast(&pl->done);
		pthread_mutex_unlock(&pl->mu);
	}
	free(c->own);
	free(c->own_aux);
	c->own = NULL;
	c->own_aux = NULL;
	c->aux = NULL;
	c->slot = -1;
	c->data = NULL;
}

const char *
trace_reader_string(const struct trace_reader *r, uint32_t id)
{
	if (id == 0)
		return "";
	return id <= r->nstrs ? r->strs[id] : NULL;
}

const struct trace_header *
trace_reader_header(const struct trace_reader *r)
{
	return &r->hdr;
}

const struct trace_footer *
trace_reader_footer(const struct trace_reader *r)
{
	return r->have_footer ? &r->footer : NULL;
}

const struct trace_index_entry *
trace_reader_index(const struct trace_reader *r, size_t *n)
{
	*n = r->have_footer ? (size_t)r->footer.chunks : 0;
	return r->have_footer ? r->index : NULL;
}

void
trace_reader_get_stats(const struct trace_reader *r,
    struct trace_reader_stats *st)
{
	*st = r->st;
}

const char *
trace_reader_error(const struct trace_reader *r)
{
	return r->err;
}

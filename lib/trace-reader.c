/*
 * The trace reader (see trace.h, doc/trace-format.md).
 *
 * A file is untrusted input.  The reader holds one chunk at a time (at most
 * TRACE_CHUNK_MAX raw bytes plus its compressed frame), checks every size
 * against its bound before allocating, checks CRCs before decompressing,
 * and validates every record of a chunk before delivering any of them, so a
 * chunk is delivered whole or not at all.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_d_forceIgnoreChecksum */
#endif
#include <zstd.h>

#include "trace.h"

#define FOOTER_MAX	(64u << 20)

/* Fuzzing builds ignore checksums so that mutations reach the parsers
 * behind them. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CRC_MATCH(a, b)	((void)(a), (void)(b), 1)
#else
#define CRC_MATCH(a, b)	((a) == (b))
#endif
#define SCAN_BLOCK	65536

struct trace_reader {
	int		 fd;
	int		 own_fd;
	int		 seekable;
	uint64_t	 off;		/* next chunk header */
	uint64_t	 pos;		/* stream position (not seekable) */
	ZSTD_DCtx	*dctx;

	uint8_t		*comp;
	size_t		 compcap;
	uint8_t		*raw;		/* 8-byte aligned (malloc) */
	size_t		 rawcap;
	size_t		 rawlen;
	size_t		 rpos;

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
	if (fh.version != TRACE_VERSION)
		return -EPROTO;
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

void
trace_reader_close(struct trace_reader *r)
{
	if (r == NULL)
		return;
	if (r->own_fd)
		close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	free(r->comp);
	free(r->raw);
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
#if defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION) && \
    defined(ZSTD_d_forceIgnoreChecksum)
	ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_forceIgnoreChecksum,
	    ZSTD_d_ignoreChecksum);
#endif
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

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -errno;
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
 * Checks every record of the decompressed chunk; 0 or -EBADMSG.  String ids
 * must go on from the last one defined, or jump by at most as many as the
 * chunks skipped as corrupt could have defined.
 */
static int
chunk_check(struct trace_reader *r, uint32_t records)
{
	const struct rec_hdr *h;
	uint64_t nextid = (uint64_t)r->nstrs + 1, gap = r->str_gap, id;
	uint32_t n = 0;
	size_t p = 0;

	while (p < r->rawlen) {
		h = (const struct rec_hdr *)(r->raw + p);
		if (record_validate(h, r->rawlen - p) != 0 ||
		    h->type == REC_PAD)
			return -EBADMSG;
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
	r->rawlen = ch.raw_size;
	r->rpos = 0;
	if (chunk_check(r, ch.records) != 0) {
		r->rawlen = 0;
		return chunk_corrupt(r, off, next, "invalid records");
	}
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

int
trace_reader_next(struct trace_reader *r, const struct rec_hdr **recp)
{
	const struct rec_hdr *h;
	int rc;

	for (;;) {
		if (r->rpos < r->rawlen) {
			h = (const struct rec_hdr *)(r->raw + r->rpos);
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
		if ((rc = chunk_load(r)) <= 0)
			return rc;
	}
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

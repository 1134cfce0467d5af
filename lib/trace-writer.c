/*
 * The trace writer (see trace.h, doc/trace-format.md).
 *
 * Records are copied into a raw chunk buffer; when it reaches
 * TRACE_CHUNK_SIZE the chunk is compressed into one zstd frame and written
 * with its header in one call.  Per-chunk counts are merged into the totals
 * only once the chunk is on disk, so the footer counts exactly what a reader
 * will find.  The first write error is sticky: the partial chunk is cut off
 * again (regular files), and every later record is counted as lost.
 *
 * Async mode (trace_writer_set_async, msptid's sessions): the caller's
 * thread only builds chunks; a writer thread of this writer compresses
 * them and does every write(2), fsync and close, so neither compression
 * nor a slow or stalled disk holds the caller up (msptid's drain runs on
 * at the rate of a copy, zstd on another core).  Built chunks wait in a
 * queue bounded in bytes; a chunk that does not fit is not written and
 * its records count as lost (LOSS_DISK).  The thread owns the file
 * offset, the index, the totals (under mu) and the compressor (zmu: a
 * late trace_writer_tune); the caller owns the chunk being built.  Closing
 * is two steps: trace_writer_close_start queues the footer and returns a
 * descriptor that turns readable once the thread is done, then
 * trace_writer_close_finish collects the result.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <zstd.h>

#include "trace.h"

struct strent {
	uint64_t	 hash;
	const char	*s;		/* in the arena, NUL-terminated */
	uint32_t	 len;
	uint32_t	 id;		/* 0: empty slot */
};

/* One queued write of an async writer: a chunk, bytes, or the end. */
struct wq_item {
	struct wq_item	*next;
	/* CHUNK: comp holds the chunk as built (comp_len bytes), the
	 * thread compresses it; RAW: bytes written as they are. */
	enum { WQ_CHUNK, WQ_RAW, WQ_FOOTER } kind;
	uint8_t		*comp;
	size_t		 comp_len;
	uint32_t	 nrec;
	uint32_t	 rawlen;
	uint64_t	 first_ts, last_ts;
	uint64_t	 counts[REC_TYPE_MAX];
	struct trace_footer f;
};

struct trace_writer {
	int		 fd;
	int		 seekable;
	int		 error;
	uint64_t	 off;		/* end of the last complete write */
	ZSTD_CCtx	*cctx;

	uint8_t		*raw;		/* the chunk being built */
	size_t		 rawlen;
	size_t		 rawcap;
	uint8_t		*comp;
	size_t		 compcap;
	uint32_t	 nrec;
	uint64_t	 first_ts;
	uint64_t	 last_ts;
	uint64_t	 chunk_counts[REC_TYPE_MAX];

	uint64_t	 counts[REC_TYPE_MAX];
	uint64_t	 records;
	uint64_t	 chunks;
	uint64_t	 raw_bytes;
	uint64_t	 lost;

	struct trace_index_entry *index;
	size_t		 nindex;
	size_t		 capindex;

	struct strent	*strs;		/* open addressing, power of two */
	size_t		 strcap;
	uint32_t	 nstrs;
	struct trace_arena *arena;

	/* Async mode. */
	bool		 async;
	pthread_t	 thr;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	struct wq_item	*qhead, **qtail;
	size_t		 queued, max_queued;	/* bytes of chunks waiting */
	uint8_t		*spare;		/* a chunk buffer the thread is done
					   with (under mu) */
	pthread_mutex_t	 zmu;		/* cctx: the thread's, and tune's */
	uint64_t	 alost;		/* records the thread could not write */
	_Atomic int	 aerror;	/* the thread's first write error */
	int		 done_fd;	/* eventfd: readable once it ended */
	bool		 abandon;	/* aborted: the thread frees w */
	bool		 finished;	/* the thread wrote the end and left */
	bool		 closing;
	int		 close_rc;
};

static void	writer_free(struct trace_writer *);
static int	writer_chunk(struct trace_writer *);

/* Writes len bytes of iov at w->off (pwrite) or to the stream; returns 0 or
 * -errno (a short write becomes -ENOSPC). */
static int
writer_put(struct trace_writer *w, struct iovec *iov, int iovcnt)
{
	size_t total = 0, done = 0;
	ssize_t n;
	int i;

	for (i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	while (done < total) {
		if (w->seekable)
			n = pwritev(w->fd, iov, iovcnt, (off_t)(w->off + done));
		else
			n = writev(w->fd, iov, iovcnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENOSPC;
		done += (size_t)n;
		/* Advance the iovecs past what was written. */
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	if (w->async)
		pthread_mutex_lock(&w->mu);
	w->off += total;
	if (w->async)
		pthread_mutex_unlock(&w->mu);
	return 0;
}

/* Records a write error: cuts a partial write off a regular file so that
 * what stays is a clean prefix, and makes the error sticky. */
static int
writer_fail(struct trace_writer *w, int err)
{
	if (w->error == 0)
		w->error = err;
	if (w->seekable && ftruncate(w->fd, (off_t)w->off) == -1) {
		/* Nothing better to do: the reader stops at the bad tail. */
	}
	return w->error;
}

static void
put_tlv(uint8_t *buf, size_t *pos, unsigned tag, const void *val, size_t len)
{
	struct trace_tlv t = { .tag = (uint16_t)tag, .len = (uint32_t)len };

	memcpy(buf + *pos, &t, sizeof t);
	*pos += sizeof t;
	if (len > 0)
		memcpy(buf + *pos, val, len);
	*pos += len;
	while (*pos & 7)
		buf[(*pos)++] = 0;
}

/* Encodes hdr into a malloc'd buffer (*outp, freed by the caller). */
static int
header_encode(const struct trace_header *hdr, uint8_t **outp, size_t *lenp)
{
	struct trace_file_hdr fh;
	size_t size, pos, i, kl, vl;
	uint8_t *buf, *kv;
	uint32_t crc;

#define TLVSZ(n)	(sizeof(struct trace_tlv) + (((n) + 7) & ~(size_t)7))
	size = sizeof fh + TLVSZ(0);
	if (hdr->hostname)
		size += TLVSZ(strlen(hdr->hostname));
	if (hdr->producer)
		size += TLVSZ(strlen(hdr->producer));
	for (i = 0; i < hdr->nconfig; i++) {
		if (hdr->config[i].key == NULL || hdr->config[i].value == NULL)
			return -EINVAL;
		size += TLVSZ(strlen(hdr->config[i].key) + 1 +
		    strlen(hdr->config[i].value));
	}
	for (i = 0; i < hdr->nclocks; i++) {
		if (record_validate(&hdr->clocks[i], sizeof(hdr->clocks[i])) ||
		    hdr->clocks[i].hdr.type != REC_CLOCK_SYNC)
			return -EINVAL;
		size += TLVSZ(sizeof(struct rec_clock_sync));
	}
#undef TLVSZ
	if (size > TRACE_HEADER_MAX)
		return -EINVAL;
	if ((buf = calloc(1, size)) == NULL)
		return -ENOMEM;
	memset(&fh, 0, sizeof fh);
	memcpy(fh.magic, TRACE_MAGIC, 8);
	fh.version = TRACE_VERSION;
	fh.flags = TRACE_F_DELTA;
	fh.size = (uint32_t)size;
	fh.created_ns = hdr->created_ns;
	fh.session_id = hdr->session_id;
	memcpy(buf, &fh, sizeof fh);
	pos = sizeof fh;
	if (hdr->hostname)
		put_tlv(buf, &pos, TRACE_TAG_HOSTNAME, hdr->hostname,
		    strlen(hdr->hostname));
	if (hdr->producer)
		put_tlv(buf, &pos, TRACE_TAG_PRODUCER, hdr->producer,
		    strlen(hdr->producer));
	for (i = 0; i < hdr->nconfig; i++) {
		kl = strlen(hdr->config[i].key);
		vl = strlen(hdr->config[i].value);
		if ((kv = malloc(kl + 1 + vl + 1)) == NULL) {
			free(buf);
			return -ENOMEM;
		}
		memcpy(kv, hdr->config[i].key, kl + 1);
		memcpy(kv + kl + 1, hdr->config[i].value, vl);
		put_tlv(buf, &pos, TRACE_TAG_CONFIG, kv, kl + 1 + vl);
		free(kv);
	}
	for (i = 0; i < hdr->nclocks; i++)
		put_tlv(buf, &pos, TRACE_TAG_CLOCK_SYNC, &hdr->clocks[i],
		    sizeof(hdr->clocks[i]));
	put_tlv(buf, &pos, TRACE_TAG_END, NULL, 0);
	crc = trace_crc32c(0, buf, size);
	memcpy(buf + offsetof(struct trace_file_hdr, crc), &crc, sizeof crc);
	*outp = buf;
	*lenp = size;
	return 0;
}

/* trace_writer_open, and with max_queued > 0 trace_writer_open_async. */
static int
writer_open(int fd, const struct trace_header *hdr, int level,
    size_t max_queued, struct trace_writer **wp)
{
	struct trace_writer *w;
	struct iovec iov;
	struct stat sb;
	struct wq_item *q;
	uint8_t *hbuf = NULL;
	size_t hlen;
	off_t pos;
	int rc;

	if (wp == NULL || hdr == NULL || fd < 0)
		return -EINVAL;
	*wp = NULL;
	if (fstat(fd, &sb) == -1)
		return -errno;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -ENOMEM;
	w->fd = fd;
	w->done_fd = -1;
	w->seekable = S_ISREG(sb.st_mode);
	if (w->seekable) {
		pos = lseek(fd, 0, SEEK_CUR);
		if (pos != 0) {
			rc = -EINVAL;
			goto fail;
		}
	}
	w->rawcap = TRACE_CHUNK_SIZE + REC_MAX_SIZE;
	w->compcap = ZSTD_compressBound(w->rawcap);
	w->raw = malloc(w->rawcap);
	w->comp = malloc(w->compcap);
	w->cctx = ZSTD_createCCtx();
	w->strcap = 1024;
	w->strs = calloc(w->strcap, sizeof(*w->strs));
	if (w->raw == NULL || w->comp == NULL || w->cctx == NULL ||
	    w->strs == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel,
	    level != 0 ? level : 1);
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);
	if ((rc = header_encode(hdr, &hbuf, &hlen)) != 0)
		goto fail;
	if (max_queued > 0) {
		/* Even the header is the thread's to write. */
		if ((q = calloc(1, sizeof(*q))) == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
		if ((rc = trace_writer_set_async(w, max_queued)) != 0) {
			free(q);
			goto fail;
		}
		q->kind = WQ_RAW;
		q->comp = hbuf;
		q->comp_len = hlen;
		pthread_mutex_lock(&w->mu);
		w->queued += hlen;
		*w->qtail = q;
		w->qtail = &q->next;
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
		*wp = w;
		return 0;
	}
	iov.iov_base = hbuf;
	iov.iov_len = hlen;
	if ((rc = writer_put(w, &iov, 1)) != 0) {
		writer_fail(w, rc);
		goto fail;
	}
	free(hbuf);
	*wp = w;
	return 0;
fail:
	free(hbuf);
	trace_writer_abort(w);
	return rc;
}

int
trace_writer_open(int fd, const struct trace_header *hdr, int level,
    struct trace_writer **wp)
{
	return writer_open(fd, hdr, level, 0, wp);
}

int
trace_writer_open_async(int fd, const struct trace_header *hdr, int level,
    size_t max_queued, struct trace_writer **wp)
{
	return writer_open(fd, hdr, level, max_queued ? max_queued : 1, wp);
}

/* Frees w without writing anything more; NULL is a no-op.  An async
 * writer's thread may be stuck in a write: it is told to stop and frees
 * w itself when it gets out. */
void
trace_writer_abort(struct trace_writer *w)
{
	if (w == NULL)
		return;
	if (w->async) {
		bool finished;

		pthread_mutex_lock(&w->mu);
		w->abandon = true;
		finished = w->finished;
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
		if (!finished) {
			pthread_detach(w->thr);
			return;
		}
		/* It is gone already: nobody else frees w. */
		pthread_join(w->thr, NULL);
	}
	writer_free(w);
}

static void
writer_free(struct trace_writer *w)
{
	struct wq_item *q;

	while ((q = w->qhead) != NULL) {
		w->qhead = q->next;
		free(q->comp);
		free(q);
	}
	if (w->async) {
		pthread_mutex_destroy(&w->mu);
		pthread_mutex_destroy(&w->zmu);
		pthread_cond_destroy(&w->cv);
		close(w->fd);		/* our dup */
		if (w->done_fd >= 0)
			close(w->done_fd);
	}
	ZSTD_freeCCtx(w->cctx);
	free(w->raw);
	free(w->spare);
	free(w->comp);
	free(w->index);
	free(w->strs);
	trace_arena_free(w->arena);
	free(w);
}

/* Async: hands the chunk as built to the thread (the caller goes on in
 * a buffer the thread is done with, or a new one), or counts it lost
 * when the queue is full (the disk or the compression that far behind). */
static void
writer_enqueue(struct trace_writer *w)
{
	struct wq_item *q = NULL;
	uint8_t *next;

	pthread_mutex_lock(&w->mu);
	if (w->queued + w->rawlen > w->max_queued ||
	    (q = calloc(1, sizeof(*q))) == NULL) {
		pthread_mutex_unlock(&w->mu);
		w->lost += w->nrec;
		return;
	}
	next = w->spare;
	w->spare = NULL;
	pthread_mutex_unlock(&w->mu);
	if (next == NULL && (next = malloc(w->rawcap)) == NULL) {
		free(q);
		w->lost += w->nrec;
		return;
	}
	q->kind = WQ_CHUNK;
	q->comp = w->raw;
	q->comp_len = w->rawlen;
	w->raw = next;
	q->nrec = w->nrec;
	q->rawlen = (uint32_t)w->rawlen;
	q->first_ts = w->first_ts;
	q->last_ts = w->last_ts;
	memcpy(q->counts, w->chunk_counts, sizeof(q->counts));
	pthread_mutex_lock(&w->mu);
	w->queued += q->comp_len;
	*w->qtail = q;
	w->qtail = &q->next;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* The writer thread: one chunk at a time, compressed here and written at
 * the end of the file so far; its buffer is kept for the caller's next
 * chunk or freed. */
static void
writer_thread_chunk(struct trace_writer *w, struct wq_item *q)
{
	struct trace_chunk_hdr ch;
	struct trace_index_entry *ie;
	struct iovec iov[2];
	uint64_t at = w->off;
	size_t comp = 0;
	int rc = atomic_load(&w->aerror);

	if (rc == 0) {
		trace_delta_encode(q->comp, q->comp_len);
		pthread_mutex_lock(&w->zmu);
		comp = ZSTD_compress2(w->cctx, w->comp, w->compcap, q->comp,
		    q->comp_len);
		pthread_mutex_unlock(&w->zmu);
		if (ZSTD_isError(comp))
			rc = -EIO;
	}
	if (rc == 0 && w->nindex == w->capindex) {
		size_t ncap = w->capindex ? w->capindex * 2 : 64;

		pthread_mutex_lock(&w->mu);
		ie = realloc(w->index, ncap * sizeof(*ie));
		if (ie != NULL) {
			w->index = ie;
			w->capindex = ncap;
		}
		pthread_mutex_unlock(&w->mu);
		if (ie == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0) {
		memset(&ch, 0, sizeof ch);
		ch.magic = TRACE_CHUNK_MAGIC;
		ch.seq = w->chunks;
		ch.comp_size = (uint32_t)comp;
		ch.raw_size = q->rawlen;
		ch.records = q->nrec;
		ch.data_crc = trace_crc32c(0, w->comp, comp);
		ch.first_ts = q->first_ts;
		ch.last_ts = q->last_ts;
		ch.hdr_crc = trace_crc32c(0, &ch, sizeof ch);
		iov[0] = (struct iovec){ &ch, sizeof ch };
		iov[1] = (struct iovec){ w->comp, comp };
		rc = writer_put(w, iov, 2);
	}
	pthread_mutex_lock(&w->mu);
	w->queued -= q->comp_len;
	if (w->spare == NULL) {
		w->spare = q->comp;
		q->comp = NULL;
	}
	if (rc != 0) {
		int zero = 0;

		w->alost += q->nrec;
		atomic_compare_exchange_strong(&w->aerror, &zero, rc);
		if (w->seekable && ftruncate(w->fd, (off_t)at) == -1) {
			/* The reader stops at the bad tail. */
		}
		w->off = at;
	} else {
		ie = &w->index[w->nindex++];
		ie->offset = at;
		ie->first_ts = q->first_ts;
		ie->last_ts = q->last_ts;
		ie->records = q->nrec;
		ie->raw_size = q->rawlen;
		w->chunks++;
		w->records += q->nrec;
		w->raw_bytes += q->rawlen;
		for (int i = 0; i < REC_TYPE_MAX; i++)
			w->counts[i] += q->counts[i];
	}
	pthread_mutex_unlock(&w->mu);
}

static int	writer_footer(struct trace_writer *, const struct trace_footer *);

static void *
writer_thread(void *arg)
{
	struct trace_writer *w = arg;
	struct wq_item *q;
	uint64_t one = 1;
	int rc;

	for (;;) {
		pthread_mutex_lock(&w->mu);
		while (w->qhead == NULL && !w->abandon)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->abandon) {
			pthread_mutex_unlock(&w->mu);
			writer_free(w);
			return NULL;
		}
		q = w->qhead;
		if ((w->qhead = q->next) == NULL)
			w->qtail = &w->qhead;
		pthread_mutex_unlock(&w->mu);
		if (q->kind == WQ_RAW) {
			struct iovec iov = { q->comp, q->comp_len };
			int zero = 0;

			if (atomic_load(&w->aerror) == 0 &&
			    (rc = writer_put(w, &iov, 1)) != 0)
				atomic_compare_exchange_strong(&w->aerror,
				    &zero, rc);
			pthread_mutex_lock(&w->mu);
			w->queued -= q->comp_len;
			pthread_mutex_unlock(&w->mu);
		}
		if (q->kind != WQ_FOOTER) {
			if (q->kind == WQ_CHUNK)
				writer_thread_chunk(w, q);
			free(q->comp);
			free(q);
			continue;
		}
		/* The end: footer (every chunk before it is written or
		 * counted lost), fsync, and say so. */
		pthread_mutex_lock(&w->mu);
		w->lost += w->alost;
		w->alost = 0;
		pthread_mutex_unlock(&w->mu);
		rc = atomic_load(&w->aerror);
		if ((rc = writer_footer(w, &q->f)) != 0) {
			if (w->seekable && ftruncate(w->fd, (off_t)w->off) == -1) {
				/* as above */
			}
		} else if (fsync(w->fd) == -1 && errno != EINVAL &&
		    errno != EROFS)
			rc = -errno;
		free(q);
		pthread_mutex_lock(&w->mu);
		w->close_rc = atomic_load(&w->aerror) != 0 ?
		    atomic_load(&w->aerror) : rc;
		if (w->abandon) {
			pthread_mutex_unlock(&w->mu);
			writer_free(w);
			return NULL;
		}
		w->finished = true;
		pthread_mutex_unlock(&w->mu);
		(void)!write(w->done_fd, &one, sizeof(one));
		return NULL;
	}
}

int
trace_writer_set_async(struct trace_writer *w, size_t max_queued)
{
	int fd;

	if (w->async)
		return 0;
	/* Flushed first: what the caller wrote so far stays in order. */
	if (w->nrec > 0 && writer_chunk(w) != 0)
		return w->error;
	if ((fd = fcntl(w->fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return -errno;
	if ((w->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		close(fd);
		return -errno;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_mutex_init(&w->zmu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->qtail = &w->qhead;
	w->max_queued = max_queued;
	w->fd = fd;
	w->async = true;
	if (pthread_create(&w->thr, NULL, writer_thread, w) != 0) {
		w->async = false;
		pthread_mutex_destroy(&w->mu);
		pthread_mutex_destroy(&w->zmu);
		pthread_cond_destroy(&w->cv);
		close(w->done_fd);
		w->done_fd = -1;
		close(fd);
		return -EAGAIN;
	}
	return 0;
}

int
trace_writer_close_start(struct trace_writer *w,
    const struct trace_footer *footer)
{
	struct wq_item *q;

	if (!w->async || w->closing)
		return -EINVAL;
	writer_chunk(w);
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return -ENOMEM;
	q->kind = WQ_FOOTER;
	if (footer != NULL)
		q->f = *footer;
	w->closing = true;
	pthread_mutex_lock(&w->mu);
	*w->qtail = q;
	w->qtail = &q->next;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return w->done_fd;
}

int
trace_writer_close_finish(struct trace_writer *w,
    struct trace_writer_stats *st)
{
	int rc;

	pthread_join(w->thr, NULL);
	rc = w->error != 0 ? w->error : w->close_rc;
	if (st != NULL) {
		trace_writer_get_stats(w, st);
		st->error = rc;
	}
	writer_free(w);
	return rc;
}

/* Compresses and writes the current chunk; on success merges its counts. */
static int
writer_chunk(struct trace_writer *w)
{
	struct trace_chunk_hdr ch;
	struct trace_index_entry *ie;
	struct iovec iov[2];
	size_t comp, ncap;
	int rc, i;

	if (w->async && w->error == 0)
		w->error = atomic_load(&w->aerror);
	if (w->nrec == 0)
		return w->error;
	if (w->error != 0) {
		w->lost += w->nrec;
		goto reset;
	}
	if (!w->async && w->nindex == w->capindex) {
		ncap = w->capindex ? w->capindex * 2 : 64;
		ie = realloc(w->index, ncap * sizeof(*ie));
		if (ie == NULL) {
			w->lost += w->nrec;
			writer_fail(w, -ENOMEM);
			goto reset;
		}
		w->index = ie;
		w->capindex = ncap;
	}
	if (w->async) {
		writer_enqueue(w);
		goto reset;
	}
	trace_delta_encode(w->raw, w->rawlen);
	comp = ZSTD_compress2(w->cctx, w->comp, w->compcap, w->raw, w->rawlen);
	if (ZSTD_isError(comp)) {
		w->lost += w->nrec;
		writer_fail(w, -EIO);
		goto reset;
	}
	memset(&ch, 0, sizeof ch);
	ch.magic = TRACE_CHUNK_MAGIC;
	ch.seq = w->chunks;
	ch.comp_size = (uint32_t)comp;
	ch.raw_size = (uint32_t)w->rawlen;
	ch.records = w->nrec;
	ch.data_crc = trace_crc32c(0, w->comp, comp);
	ch.first_ts = w->first_ts;
	ch.last_ts = w->last_ts;
	ch.hdr_crc = trace_crc32c(0, &ch, sizeof ch);
	ie = &w->index[w->nindex];
	ie->offset = w->off;
	ie->first_ts = w->first_ts;
	ie->last_ts = w->last_ts;
	ie->records = w->nrec;
	ie->raw_size = (uint32_t)w->rawlen;
	iov[0].iov_base = &ch;
	iov[0].iov_len = sizeof ch;
	iov[1].iov_base = w->comp;
	iov[1].iov_len = comp;
	if ((rc = writer_put(w, iov, 2)) != 0) {
		w->lost += w->nrec;
		writer_fail(w, rc);
		goto reset;
	}
	w->nindex++;
	w->chunks++;
	w->records += w->nrec;
	w->raw_bytes += w->rawlen;
	for (i = 0; i < REC_TYPE_MAX; i++)
		w->counts[i] += w->chunk_counts[i];
reset:
	memset(w->chunk_counts, 0, sizeof(w->chunk_counts));
	w->rawlen = 0;
	w->nrec = 0;
	w->first_ts = w->last_ts = 0;
	return w->error;
}

/* Appends a record known to be valid to the chunk being built. */
static int
writer_append(struct trace_writer *w, const struct rec_hdr *h)
{
	uint64_t ts;

	if (w->error != 0) {
		w->lost++;
		return w->error;
	}
	if (w->rawlen + h->size > TRACE_CHUNK_SIZE && w->nrec > 0) {
		writer_chunk(w);
		if (w->error != 0) {
			w->lost++;
			return w->error;
		}
	}
	memcpy(w->raw + w->rawlen, h, h->size);
	w->rawlen += h->size;
	w->nrec++;
	w->chunk_counts[h->type]++;
	if ((ts = record_timestamp(h)) != 0) {
		if (w->first_ts == 0 || ts < w->first_ts)
			w->first_ts = ts;
		if (ts > w->last_ts)
			w->last_ts = ts;
	}
	return 0;
}

int
trace_writer_add(struct trace_writer *w, const void *rec)
{
	const struct rec_hdr *h = rec;

	/* record_validate(rec, h->size), the common types inline. */
	if (h->size < REC_HDR_SIZE || (h->size & (REC_ALIGN - 1)) ||
	    record_validate_framed_fast(h) != 0 || h->type == REC_PAD)
		return -EBADMSG;
	return writer_append(w, h);
}

int
trace_writer_add_valid(struct trace_writer *w, const struct rec_hdr *rec)
{
	return writer_append(w, rec);
}

int
trace_writer_tune(struct trace_writer *w, int level, bool checksum)
{
	int rc = 0;

	if (level != 0 && (level < ZSTD_minCLevel() ||
	    level > ZSTD_maxCLevel()))
		return -EINVAL;
	/* An async writer's thread compresses with cctx. */
	if (w->async)
		pthread_mutex_lock(&w->zmu);
	if ((level != 0 && ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx,
	    ZSTD_c_compressionLevel, level))) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag,
	    checksum ? 1 : 0)))
		rc = -EINVAL;
	if (w->async)
		pthread_mutex_unlock(&w->zmu);
	return rc;
}

/* 64-bit FNV-1a: short strings, good enough spread for the table. */
static uint64_t
str_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (len-- > 0) {
		h ^= (unsigned char)*s++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static int
strtab_grow(struct trace_writer *w)
{
	struct strent *n;
	size_t cap = w->strcap * 2, i, j;

	if ((n = calloc(cap, sizeof(*n))) == NULL)
		return -ENOMEM;
	for (i = 0; i < w->strcap; i++) {
		if (w->strs[i].id == 0)
			continue;
		for (j = w->strs[i].hash & (cap - 1); n[j].id != 0;
		    j = (j + 1) & (cap - 1))
			;
		n[j] = w->strs[i];
	}
	free(w->strs);
	w->strs = n;
	w->strcap = cap;
	return 0;
}

int
trace_writer_intern(struct trace_writer *w, const char *s, size_t len,
    uint32_t *idp)
{
	uint64_t buf[REC_MAX_SIZE / 8];
	struct strent *e;
	uint64_t h;
	size_t i;
	int rc;

	*idp = 0;
	if (w->error != 0)
		return w->error;
	len = record_string_fit(s, len);
	if (len == 0)
		return 0;
	if ((size_t)(w->nstrs + 1) * 2 > w->strcap && strtab_grow(w) != 0 &&
	    (size_t)w->nstrs + 2 >= w->strcap)
		return -ENOMEM;	/* keep a free slot: probing must end */
	h = str_hash(s, len);
	for (i = h & (w->strcap - 1); w->strs[i].id != 0;
	    i = (i + 1) & (w->strcap - 1)) {
		e = &w->strs[i];
		if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0) {
			*idp = e->id;
			return 0;
		}
	}
	if (w->nstrs >= TRACE_STRINGS_MAX)
		return -E2BIG;
	e = &w->strs[i];
	if ((e->s = trace_arena_dup(&w->arena, s, len)) == NULL)
		return -ENOMEM;
	e->hash = h;
	e->len = (uint32_t)len;
	e->id = ++w->nstrs;
	record_string_def_encode(buf, sizeof buf, e->id, s, len);
	*idp = e->id;
	if ((rc = writer_append(w, (const struct rec_hdr *)buf)) != 0)
		return rc;
	return 0;
}

int
trace_writer_flush(struct trace_writer *w)
{
	return writer_chunk(w);
}

/* Writes footer and trailer at w->off. */
static int
writer_footer(struct trace_writer *w, const struct trace_footer *in)
{
	struct trace_footer_hdr fh;
	struct trace_trailer tr;
	struct iovec iov[5];
	uint64_t losses[LOSS_STAGE_MAX];
	size_t size;
	uint32_t crc;
	int i;

	memset(losses, 0, sizeof losses);
	if (in != NULL)
		memcpy(losses, in->losses, sizeof losses);
	losses[LOSS_DISK] += w->lost;
	size = sizeof fh + sizeof(w->counts) + sizeof losses +
	    w->nindex * sizeof(*w->index);
	memset(&fh, 0, sizeof fh);
	memcpy(fh.magic, TRACE_FOOTER_MAGIC, 8);
	fh.size = (uint32_t)size;
	fh.end_ns = in != NULL ? in->end_ns : 0;
	fh.records = w->records;
	fh.chunks = w->nindex;
	fh.ntypes = REC_TYPE_MAX;
	fh.nstages = LOSS_STAGE_MAX;
	crc = trace_crc32c(0, &fh, sizeof fh);
	crc = trace_crc32c(crc, w->counts, sizeof(w->counts));
	crc = trace_crc32c(crc, losses, sizeof losses);
	crc = trace_crc32c(crc, w->index, w->nindex * sizeof(*w->index));
	fh.crc = crc;
	memset(&tr, 0, sizeof tr);
	tr.footer_offset = w->off;
	tr.footer_size = (uint32_t)size;
	memcpy(tr.magic, TRACE_TRAILER_MAGIC, 8);
	tr.crc = trace_crc32c(0, &tr, offsetof(struct trace_trailer, crc));
	iov[0] = (struct iovec){ &fh, sizeof fh };
	iov[1] = (struct iovec){ w->counts, sizeof(w->counts) };
	iov[2] = (struct iovec){ losses, sizeof losses };
	iov[3] = (struct iovec){ w->index, w->nindex * sizeof(*w->index) };
	iov[4] = (struct iovec){ &tr, sizeof tr };
	i = writer_put(w, iov, 5);
	return i;
}

int
trace_writer_close(struct trace_writer *w, const struct trace_footer *footer,
    struct trace_writer_stats *st)
{
	int rc, err;

	if (w == NULL)
		return -EINVAL;
	if (w->async) {
		struct pollfd pf;

		if ((pf.fd = trace_writer_close_start(w, footer)) < 0) {
			trace_writer_abort(w);
			return pf.fd;
		}
		pf.events = POLLIN;
		while (poll(&pf, 1, -1) < 0 && errno == EINTR)
			;
		return trace_writer_close_finish(w, st);
	}
	writer_chunk(w);
	err = w->error;
	/* Even after a write error, a footer that fits makes the file
	 * complete, with the loss counted in it. */
	if ((rc = writer_footer(w, footer)) != 0)
		writer_fail(w, rc);
	else if (fsync(w->fd) == -1 && errno != EINVAL && errno != EROFS)
		writer_fail(w, -errno);
	if (err == 0)
		err = w->error;
	if (st != NULL)
		trace_writer_get_stats(w, st);
	trace_writer_abort(w);
	return err;
}

void
trace_writer_get_stats(const struct trace_writer *w,
    struct trace_writer_stats *st)
{
	struct trace_writer *mw = (struct trace_writer *)w;

	memset(st, 0, sizeof(*st));
	if (w->async)
		pthread_mutex_lock(&mw->mu);
	st->records = w->records;
	st->chunks = w->chunks;
	st->raw_bytes = w->raw_bytes;
	st->pending_bytes = w->rawlen;
	/* Queued chunks are as good as written for a size limit. */
	st->file_bytes = w->off + w->queued;
	st->queued_bytes = w->queued;
	st->lost = w->lost + w->alost;
	st->strings = w->nstrs;
	st->error = w->error != 0 ? w->error : atomic_load(&mw->aerror);
	if (w->async)
		pthread_mutex_unlock(&mw->mu);
}

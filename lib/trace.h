/*
 * Trace files: a header, zstd-compressed chunks of records, a footer and a
 * trailer.  doc/trace-format.md is the byte-level specification.
 *
 * The writer buffers records into chunks of about TRACE_CHUNK_SIZE bytes,
 * compresses and appends each; it interns strings into the trace's own id
 * namespace and emits their STRING_DEF records before first use.  Write
 * errors (disk full) are sticky: later records are counted as lost, and
 * close still tries to leave a readable file with a footer.
 *
 * The reader streams one chunk at a time in bounded memory.  A file without
 * a footer (the writer was killed) reads up to its last complete chunk and
 * reports truncated; a corrupted chunk is reported and skipped when its
 * header is intact.
 */
#ifndef MSPTI_TRACE_H
#define MSPTI_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

/* Written: 3 (chunks delta-coded, TRACE_F_DELTA).  Read: 1 to 3 (2:
 * REC_HOST_CLOCK records may appear). */
#define TRACE_VERSION		3
#define TRACE_VERSION_MIN	1
#define TRACE_F_DELTA		0x1u	/* file header flag: chunks delta-coded */
#define TRACE_DELTA_TYPES	64	/* types below this are delta-coded, */
#define TRACE_DELTA_WORDS	16	/* in their first 16 8-byte words */
#define TRACE_CHUNK_SIZE	(1u << 20)	/* writer's target, raw bytes */
#define TRACE_CHUNK_MAX		(8u << 20)	/* reader's bound, raw bytes */
#define TRACE_HEADER_MAX	(1u << 20)
#define TRACE_STRINGS_MAX	(1u << 24)	/* distinct strings per trace */

struct trace_kv {
	const char	*key;
	const char	*value;
};

/* The file header.  In a reader, everything points into reader memory. */
struct trace_header {
	uint64_t		 created_ns;
	uint64_t		 session_id;
	const char		*hostname;
	const char		*producer;	/* "msptid 0.1.0" */
	const struct trace_kv	*config;	/* session config */
	size_t			 nconfig;
	const struct rec_clock_sync *clocks;	/* initial clock models */
	size_t			 nclocks;
};

/* The footer.  counts[] and records are filled by the writer; the caller of
 * trace_writer_close supplies end_ns and the losses it knows of (the writer
 * adds its own LOSS_DISK). */
struct trace_footer {
	uint64_t	end_ns;
	uint64_t	records;
	uint64_t	chunks;
	uint64_t	counts[REC_TYPE_MAX];
	uint64_t	losses[LOSS_STAGE_MAX];
};

/* One chunk as the footer's index lists it. */
struct trace_index_entry {
	uint64_t	offset;		/* of the chunk header in the file */
	uint64_t	first_ts;	/* min record timestamp, 0 if none */
	uint64_t	last_ts;	/* max record timestamp */
	uint32_t	records;
	uint32_t	raw_size;
};

struct trace_writer;

struct trace_writer_stats {
	uint64_t	records;	/* written in complete chunks */
	uint64_t	chunks;
	uint64_t	raw_bytes;	/* of the records in complete chunks */
	uint64_t	pending_bytes;	/* records in the chunk being built */
	uint64_t	file_bytes;	/* bytes of the file so far (async:
					   with what waits to be written) */
	uint64_t	queued_bytes;	/* async: chunks waiting for the disk */
	uint64_t	lost;		/* records lost to write errors */
	uint64_t	strings;	/* interned strings */
	int		error;		/* first write error, or 0 */
};

/*
 * Writes the header to fd (a regular file at offset 0, or a pipe) and
 * returns a writer in *wp, freed by trace_writer_close or _abort.  level is
 * the zstd level (0: default 1).  fd stays the caller's.
 * Returns 0, -EINVAL, -ENOMEM or the write error (-ENOSPC, -EIO, ...).
 */
int	trace_writer_open(int fd, const struct trace_header *hdr, int level,
	    struct trace_writer **wp);

/*
 * Appends a copy of one record (validated with record_validate).  String
 * ids in it must already be this trace's (trace_writer_intern).  Returns 0,
 * -EBADMSG (invalid record, not written, not counted as lost) or the
 * sticky write error (the record is counted as lost).
 */
int	trace_writer_add(struct trace_writer *w, const void *rec);

/*
 * trace_writer_add for a record the caller has already passed through
 * record_validate (e.g. a ring_drain copy, string ids rewritten since) and
 * that is not REC_PAD: the same without validating again.  Returns 0 or the
 * sticky write error (the record is counted as lost).
 */
int	trace_writer_add_valid(struct trace_writer *w, const struct rec_hdr *rec);

/*
 * Compression of the chunks written from now on: the zstd level (0: keep
 * the current one; negative levels are zstd's fast levels) and whether each
 * frame carries zstd's XXH64 content checksum (on by default; the chunk's
 * CRC-32C over the frame and the reader's record checks stay either way,
 * see doc/trace-format.md).  Returns 0 or -EINVAL (level out of zstd's
 * range).
 */
int	trace_writer_tune(struct trace_writer *w, int level, bool checksum);

/*
 * Returns in *idp the trace-global id of s (len bytes, truncated as
 * record_string_fit does), emitting its STRING_DEF on first use.  Id 0 is
 * returned for an empty string.  Returns 0, -ENOMEM, -E2BIG (too many
 * strings) or the sticky write error.
 */
int	trace_writer_intern(struct trace_writer *w, const char *s, size_t len,
	    uint32_t *idp);

/* Compresses and writes the records buffered so far as a chunk (no fsync).
 * Returns 0 or the sticky write error. */
int	trace_writer_flush(struct trace_writer *w);

/*
 * Flushes, writes the footer (its counts, records and chunks are filled
 * from what was written; footer may be NULL) and the trailer, fsyncs, and
 * frees w.  When stats is not NULL it receives the final counters.  Returns
 * 0 or the first error; on error the file is still readable up to its last
 * complete chunk.
 */
int	trace_writer_close(struct trace_writer *w, const struct trace_footer *footer,
	    struct trace_writer_stats *stats);

/* Frees w without writing anything more; NULL is a no-op. */
void	trace_writer_abort(struct trace_writer *w);

/*
 * Async mode: from now on a thread of w does every write, fsync and close
 * on a duplicate of its descriptor, and compresses the chunks, so the
 * caller never waits for the disk or for zstd.  At most max_queued bytes
 * of chunks (as built, before compression) wait for it; a chunk beyond
 * that is not written and its records count as lost (LOSS_DISK).
 * Returns 0 or a negative errno (w stays synchronous).
 */
int	trace_writer_set_async(struct trace_writer *w, size_t max_queued);
/* trace_writer_open in async mode from the start: the header too is
 * written by the thread, so opening never waits for the disk either. */
int	trace_writer_open_async(int fd, const struct trace_header *hdr,
	    int level, size_t max_queued, struct trace_writer **wp);
/*
 * Closing an async writer without waiting: queues the last chunk and the
 * footer, and returns a descriptor that turns readable once the thread
 * wrote them (or failed); then trace_writer_close_finish frees w and
 * returns what trace_writer_close would.  trace_writer_close on an async
 * writer does both, waiting.  close_start returns -EINVAL for a
 * synchronous writer.
 */
int	trace_writer_close_start(struct trace_writer *w,
	    const struct trace_footer *footer);
int	trace_writer_close_finish(struct trace_writer *w,
	    struct trace_writer_stats *stats);

void	trace_writer_get_stats(const struct trace_writer *w,
	    struct trace_writer_stats *st);

struct trace_reader;

struct trace_reader_stats {
	uint64_t	records;	/* delivered */
	uint64_t	chunks;		/* complete, valid chunks read */
	uint64_t	corrupt_chunks;
	uint64_t	bad_records;	/* in otherwise valid chunks */
	uint64_t	offset;		/* where reading stands */
	bool		truncated;	/* ended without a footer */
	bool		done;
};

/*
 * Opens path (or fd, which stays the caller's and must stay open until
 * close) and reads the header; when the file is seekable, the footer too.
 * *rp is freed with trace_reader_close.  Returns 0, -EPROTO (not a trace
 * or another version), -EBADMSG (corrupt header), -ENOMEM, -ETIMEDOUT (a
 * FIFO no writer wrote to: util_open_input) or -errno.
 */
int	trace_reader_open(const char *path, struct trace_reader **rp);
int	trace_reader_open_fd(int fd, struct trace_reader **rp);
void	trace_reader_close(struct trace_reader *r);

/*
 * Reads ahead with n worker threads (0: serial, the default; at most 16),
 * a window of 2n+1 chunks in flight, starting at once.  Records, errors
 * and stats stay exactly those of the serial reader.  A stream (not
 * seekable) stays serial.  0 or -ENOMEM.
 */
int	trace_reader_set_threads(struct trace_reader *r, unsigned n);

/*
 * Stores in *recp the next record (valid until the next call) and returns
 * 1; returns 0 at the end (check truncated in the stats), or -EBADMSG for a
 * corrupted chunk (trace_reader_error says what and where; calling again
 * goes on with the next chunk when it can be found, else returns 0).
 * Other negative errnos are read errors.  STRING_DEF records are delivered
 * too, after the reader has recorded them.
 */
int	trace_reader_next(struct trace_reader *r, const struct rec_hdr **recp);

/*
 * Whole chunks instead of records, for callers that hand a chunk's
 * records to several threads: *c gets the next chunk's records (c->data,
 * c->len bytes, c->records of them, back to back, every one checked and
 * string definitions recorded) and 1 is returned; 0 and the errors are
 * trace_reader_next's.  The chunk stays valid, whatever is read next,
 * until trace_reader_chunk_done(r, c), which any thread may call; every
 * chunk must be done before trace_reader_close.  A reader delivers
 * records or chunks, not both.  Holding many chunks at once stalls the
 * read-ahead (its window is its slots: see trace_reader_hold).
 */
/* What a chunk function made of a chunk: len bytes at p (cap
 * allocated, with malloc: the function may grow it, and it is reused
 * for later chunks). */
struct trace_chunk_aux {
	void		*p;
	size_t		 len, cap;
};
struct trace_chunk {
	const uint8_t	*data;
	size_t		 len;
	uint32_t	 records;
	const void	*aux;		/* the chunk function's, or NULL */
	size_t		 auxlen;
	int		 slot;		/* the read-ahead's, -1: none */
	uint8_t		*own;		/* else the buffer, freed when done */
	void		*own_aux;
};
int	trace_reader_next_chunk(struct trace_reader *r, struct trace_chunk *c);
void	trace_reader_chunk_done(struct trace_reader *r, struct trace_chunk *c);

/*
 * Before trace_reader_set_threads: fn runs on every chunk's records
 * (data, len bytes, records of them, checked) once decoded, on the
 * read-ahead's threads (serial: in trace_reader_next_chunk), and leaves
 * in *aux what trace_reader_next_chunk delivers as c->aux, c->auxlen:
 * an index of the chunk, say, built while its bytes are in cache.  Its
 * aux->p is valid until the chunk is done.
 */
typedef void	(*trace_chunk_fn)(const uint8_t *data, size_t len,
	    uint32_t records, struct trace_chunk_aux *aux);
void	trace_reader_set_chunk_fn(struct trace_reader *r, trace_chunk_fn fn);

/*
 * Before trace_reader_set_threads: the caller will hold up to n chunks at
 * once, so the read-ahead gets n more slots (its window stays 2 threads
 * + 1 chunks ahead of them).
 */
void	trace_reader_hold(struct trace_reader *r, unsigned n);

/* The string defined so far with id (id 0: ""), or NULL: not defined yet,
 * or defined in a chunk that was skipped as corrupt. */
const char	*trace_reader_string(const struct trace_reader *r, uint32_t id);

const struct trace_header	*trace_reader_header(const struct trace_reader *r);

/* The footer, once known: at open for a seekable complete file, else once
 * the stream reaches it.  NULL for a truncated file. */
const struct trace_footer	*trace_reader_footer(const struct trace_reader *r);

/* The footer's chunk index (NULL, 0 without a footer). */
const struct trace_index_entry	*trace_reader_index(const struct trace_reader *r,
	    size_t *n);

void	trace_reader_get_stats(const struct trace_reader *r,
	    struct trace_reader_stats *st);

/* A message about the last error (e.g. "chunk 12 at offset 123: checksum
 * mismatch"), or "" when none. */
const char	*trace_reader_error(const struct trace_reader *r);

/* Text for the negative errno-style codes of this module. */
const char	*trace_strerror(int err);

/*
 * The delta coding of a chunk's records (doc/trace-format.md): every 8-byte
 * word after the header, among a record's first TRACE_DELTA_WORDS, is
 * stored as its difference from the same word of the chunk's previous
 * record of that type (types below TRACE_DELTA_TYPES but STRING_DEF).
 * Consecutive records of a type differ little, so the coded chunk is mostly
 * zeros: zstd compresses it several times smaller and decompresses it
 * faster.  Both work in place on len bytes (a multiple of 8) of records;
 * encode trusts its input, decode returns -EBADMSG when a record's size
 * does not frame the buffer (the words before it are decoded).
 */
void	trace_delta_encode(void *buf, size_t len);
int	trace_delta_decode(void *buf, size_t len);
int	trace_chunk_decode(void *buf, size_t len, bool delta, uint32_t *nrec,
	    uint32_t *ndefs);

/* CRC-32C (Castagnoli) of buf, continuing from crc (start with 0). */
uint32_t	trace_crc32c(uint32_t crc, const void *buf, size_t len);

/* The string arena of a writer or reader: blocks of at least 64 KiB,
 * freed all at once. */
struct trace_arena {
	struct trace_arena	*next;
	size_t			 used;
	size_t			 cap;
	char			 mem[];
};
/* Copies s[len] and a NUL into the arena at *ap (NULL: empty), which
 * owns the copy; NULL when out of memory. */
char	*trace_arena_dup(struct trace_arena **ap, const char *s, size_t len);
void	trace_arena_free(struct trace_arena *a);

/*
 * On-disk structures (little-endian, see doc/trace-format.md).  Exposed for
 * tests and tools; users go through the writer and reader.
 */
#define TRACE_MAGIC		"MSPTITRC"
#define TRACE_FOOTER_MAGIC	"MSPTIFTR"
#define TRACE_TRAILER_MAGIC	"MSPTIEND"
#define TRACE_CHUNK_MAGIC	0x4b4e4843u	/* "CHNK" */

enum trace_tag {
	TRACE_TAG_END		= 0,
	TRACE_TAG_HOSTNAME	= 1,
	TRACE_TAG_PRODUCER	= 2,
	TRACE_TAG_CONFIG	= 3,	/* key NUL value */
	TRACE_TAG_CLOCK_SYNC	= 4,	/* one struct rec_clock_sync */
};

struct trace_file_hdr {
	char		magic[8];
	uint16_t	version;
	uint16_t	flags;
	uint32_t	size;		/* header incl. TLVs, multiple of 8 */
	uint64_t	created_ns;
	uint64_t	session_id;
	uint32_t	crc;		/* CRC-32C of size bytes, crc = 0 */
	uint32_t	reserved;
};

struct trace_tlv {
	uint16_t	tag;
	uint16_t	reserved;
	uint32_t	len;		/* value bytes, then zero pad to 8 */
};

struct trace_chunk_hdr {
	uint32_t	magic;
	uint32_t	hdr_crc;	/* CRC-32C of these 48 bytes, hdr_crc = 0 */
	uint64_t	seq;		/* 0, 1, 2, ... */
	uint32_t	comp_size;	/* zstd frame that follows */
	uint32_t	raw_size;
	uint32_t	records;
	uint32_t	data_crc;	/* CRC-32C of the zstd frame */
	uint64_t	first_ts;
	uint64_t	last_ts;
};

struct trace_footer_hdr {
	char		magic[8];
	uint32_t	size;		/* footer incl. arrays and index */
	uint32_t	crc;		/* CRC-32C of size bytes, crc = 0 */
	uint64_t	end_ns;
	uint64_t	records;
	uint64_t	chunks;
	uint32_t	ntypes;		/* u64 counts[ntypes] follow */
	uint32_t	nstages;	/* then u64 losses[nstages] */
	/* then struct trace_index_entry index[chunks] */
};

struct trace_trailer {
	uint64_t	footer_offset;
	uint32_t	footer_size;
	uint32_t	crc;		/* CRC-32C of the first 12 bytes */
	char		magic[8];
};

#endif

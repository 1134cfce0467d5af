/*
 * Fuzz target for the trace reader: the input is a whole trace file.  The
 * reader must return errors, never crash, never loop, and every record it
 * delivers must pass record_validate.  Read again by whole chunks
 * (trace_reader_next_chunk, two held at a time), it must deliver the
 * same records, the same errors and the same stats.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "trace.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* FNV-1a over what a reader delivered, in order. */
static void
sum(uint64_t *h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
}

/* The chunks of fd: their records' sum, and the reader's stats. */
static void
by_chunks(int fd, uint64_t *h, struct trace_reader_stats *st)
{
	struct trace_reader *r;
	struct trace_chunk c, held[2];
	unsigned nheld = 0;
	int rc, errors = 0;

	if (trace_reader_open_fd(fd, &r) != 0)
		return;
	while ((rc = trace_reader_next_chunk(r, &c)) != 0) {
		uint32_t n = 0;
		size_t at = 0;

		if (rc < 0) {
			sum(h, &rc, sizeof(rc));
			if (++errors > 100000)
				abort();
			continue;
		}
		while (at < c.len) {
			const struct rec_hdr *rh = (const void *)(c.data + at);

			if (c.len - at < sizeof(*rh) || rh->size > c.len - at ||
			    record_validate(rh, rh->size) != 0)
				abort();
			sum(h, &rc, sizeof(rc));
			sum(h, rh, rh->size);
			at += rh->size;
			n++;
		}
		if (n != c.records)
			abort();
		if (nheld == 2) {
			trace_reader_chunk_done(r, &held[0]);
			held[0] = held[1];
			nheld--;
		}
		held[nheld++] = c;
	}
	while (nheld > 0)
		trace_reader_chunk_done(r, &held[--nheld]);
	trace_reader_get_stats(r, st);
	trace_reader_close(r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_reader_stats cst;
	uint64_t h1 = 14695981039346656037ull, h2 = h1;
	bool opened = false;
	struct trace_reader *r;
	struct trace_reader_stats st;
	const struct rec_hdr *h;
	const struct trace_index_entry *ix;
	size_t n;
	int fd, rc, errors = 0;

	if ((fd = memfd_create("fuzz", MFD_CLOEXEC)) == -1)
		return 0;
	if (size > 0 && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	if (trace_reader_open_fd(fd, &r) == 0) {
		opened = true;
		(void)trace_reader_header(r);
		(void)trace_reader_footer(r);
		ix = trace_reader_index(r, &n);
		(void)ix;
		for (;;) {
			rc = trace_reader_next(r, &h);
			if (rc == 0)
				break;
			sum(&h1, &rc, sizeof(rc));
			if (rc < 0) {
				/* Each error moves forward; a bounded
				 * number of chunks fits in the input. */
				if (++errors > 100000)
					abort();
				continue;
			}
			if (record_validate(h, h->size) != 0)
				abort();
			sum(&h1, h, h->size);
			if (h->type == REC_API)
				(void)trace_reader_string(r,
				    ((const struct rec_api *)(const void *)h)->name_id);
		}
		trace_reader_get_stats(r, &st);
		trace_reader_close(r);
	}
	if (opened) {
		memset(&cst, 0, sizeof(cst));
		by_chunks(fd, &h2, &cst);
		if (h1 != h2 || memcmp(&cst, &st, sizeof(st)) != 0)
			abort();
	}
	close(fd);
	return 0;
}

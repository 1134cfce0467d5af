/*
 * Fuzz target for the trace reader: the input is a whole trace file.  The
 * reader must return errors, never crash, never loop, and every record it
 * delivers must pass record_validate.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

#include "trace.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
		(void)trace_reader_header(r);
		(void)trace_reader_footer(r);
		ix = trace_reader_index(r, &n);
		(void)ix;
		for (;;) {
			rc = trace_reader_next(r, &h);
			if (rc == 0)
				break;
			if (rc < 0) {
				/* Each error moves forward; a bounded
				 * number of chunks fits in the input. */
				if (++errors > 100000)
					abort();
				continue;
			}
			if (record_validate(h, h->size) != 0)
				abort();
			if (h->type == REC_API)
				(void)trace_reader_string(r,
				    ((const struct rec_api *)(const void *)h)->name_id);
		}
		trace_reader_get_stats(r, &st);
		trace_reader_close(r);
	}
	close(fd);
	return 0;
}

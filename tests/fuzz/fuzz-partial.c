/*
 * Fuzz target for the partial-result reader (analysis_partial_decode):
 * the input is one partial result.  Its checksum is made right first, so
 * every mutation reaches the field checks; the reader must refuse or
 * accept, never crash, and an accepted partial must run.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct analysis *a;
	uint8_t *b;
	char err[256];
	size_t used;

	if (size > (4u << 20) || (b = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(b, data, size);
	if (size >= 21) {
		uint64_t h = 14695981039346656037ull;
		size_t plen = size - 21;

		b[9] = (uint8_t)plen;
		b[10] = (uint8_t)(plen >> 8);
		b[11] = (uint8_t)(plen >> 16);
		b[12] = (uint8_t)(plen >> 24);
		for (size_t i = 13; i < size - 8; i++)
			h = (h ^ b[i]) * 1099511628211ull;
		for (int i = 0; i < 8; i++)
			b[size - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
	}
	if ((a = analysis_new(NULL)) != NULL) {
		if (analysis_partial_decode(a, b, size, &used, err,
		    sizeof(err)) == 0)
			analysis_run(a);
		analysis_free(a);
	}
	free(b);
	return 0;
}

/* The API tests' buffer callbacks (api-collect.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "api-collect.h"

pthread_mutex_t got_mtx = PTHREAD_MUTEX_INITIALIZER;
uint8_t *got;
size_t got_len;
_Atomic int api_collect_none;
static size_t got_cap, buf_size;

static void
api_collect_req(uint8_t **buffer, size_t *size, size_t *maxrec)
{
	*maxrec = 0;
	if (atomic_load(&api_collect_none)) {
		*buffer = NULL;
		*size = 0;
		return;
	}
	*size = buf_size;
	*buffer = aligned_alloc(8, *size);
}

void
api_collect_append(const uint8_t *buffer, size_t valid)
{
	pthread_mutex_lock(&got_mtx);
	if (got_len + valid > got_cap) {
		got_cap = (got_len + valid) * 2;
		got = realloc(got, got_cap);
	}
	memcpy(got + got_len, buffer, valid);
	got_len += valid;
	pthread_mutex_unlock(&got_mtx);
}

static void
api_collect_done(uint8_t *buffer, size_t size, size_t valid)
{
	(void)size;
	api_collect_append(buffer, valid);
	free(buffer);
}

msptiResult
api_collect_register(size_t bufsize)
{
	buf_size = bufsize;
	return msptiActivityRegisterCallbacks(api_collect_req,
	    api_collect_done);
}

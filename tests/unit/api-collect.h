/*
 * The msPTI buffer callbacks of the in-process API tests: every buffer
 * libmspti hands back is appended to one growing array, got[0, got_len)
 * (under got_mtx while deliveries may still come), read with
 * msptiActivityGetNextRecord.
 */
#ifndef MSPTI_TEST_API_COLLECT_H
#define MSPTI_TEST_API_COLLECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mspti/mspti.h"

extern pthread_mutex_t	 got_mtx;
extern uint8_t		*got;
extern size_t		 got_len;
/* While set, the buffer request gives no buffer (a tool out of memory). */
extern _Atomic int	 api_collect_none;

/* Appends valid bytes of records to got (a test's own callback). */
void		api_collect_append(const uint8_t *buffer, size_t valid);
/* Registers the callbacks; each buffer asked for is bufsize bytes. */
msptiResult	api_collect_register(size_t bufsize);

#endif

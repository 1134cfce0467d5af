/*
 * Fuzz target for the ring consumer and the record validator.  The input
 * plays a hostile producer: its first 8 bytes become the shared head
 * counter, the rest is copied over the ring's data.  The consumer must
 * deliver only valid records, end every drain and never touch memory
 * outside the mapping.  The input is also fed to record_validate directly.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "ring.h"

#define FUZZ_RING_CAP	4096

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
fuzz_cb(const struct rec_hdr *h, void *arg)
{
	if (record_validate(h, h->size) != 0 || h->type == REC_PAD)
		abort();
	(*(unsigned *)arg)++;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t vbuf[REC_MAX_SIZE / 8 + 1];
	struct ring *ring = NULL;
	struct ring_stats st;
	struct rec_api rec;
	uint8_t *raw;
	uint64_t head;
	unsigned got = 0, i;
	size_t n;
	int fd;

	/* The validator on its own (it needs 8-byte alignment). */
	n = size < sizeof vbuf ? size : sizeof vbuf;
	memcpy(vbuf, data, n);
	(void)record_validate(vbuf, n);

	if (ring_create(FUZZ_RING_CAP, &fd) != 0)
		return 0;
	if (ring_map(fd, &ring) != 0)
		goto out;
	raw = mmap(NULL, RING_HDR_SIZE + FUZZ_RING_CAP, PROT_READ | PROT_WRITE,
	    MAP_SHARED, fd, 0);
	if (raw == MAP_FAILED)
		goto out;
	if (size >= 8) {
		memcpy(&head, data, 8);
		memcpy(raw + RING_OFF_HEAD, &head, 8);
		n = size - 8 < FUZZ_RING_CAP ? size - 8 : FUZZ_RING_CAP;
		memcpy(raw + RING_HDR_SIZE, data + 8, n);
	}
	for (i = 0; i < 4; i++)
		if (ring_drain(ring, fuzz_cb, &got, SIZE_MAX) < 0)
			break;
	ring_get_stats(ring, &st);
	if (st.records != got)
		abort();
	/* Producer calls on what is left must stay in bounds too. */
	REC_INIT(&rec, REC_API, 0);
	rec.kind = 3;
	for (i = 0; i < 80; i++)
		(void)ring_write(ring, &rec);
	(void)ring_needs_wake(ring);
	(void)ring_drain(ring, fuzz_cb, &got, SIZE_MAX);
	munmap(raw, RING_HDR_SIZE + FUZZ_RING_CAP);
out:
	ring_unmap(ring);
	close(fd);
	return 0;
}

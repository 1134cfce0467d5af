/*
 * Fuzz target for the ring consumer and the record validator.  The input
 * plays a hostile producer on a ring of FUZZ_RING_SEGS segments: its first
 * 8 bytes become segment 0's shared head counter, the next FUZZ_RING_CAP
 * bytes are copied over segment 0's data; what follows goes the same way
 * (head, then data) to the last segment, a per-thread one.  The consumer
 * must deliver only valid records, end every drain and never touch memory
 * outside the mapping; a per-thread producer and the shared one then
 * write into what is left.  The input is also fed to record_validate
 * directly.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "ring.h"

#define FUZZ_RING_CAP	4096
#define FUZZ_RING_SEGS	3
#define FUZZ_SEG_LEN	(RING_HDR_SIZE + FUZZ_RING_CAP)

/* Copies head and data from in (n bytes) into the segment at seg. */
static size_t
fuzz_fill(uint8_t *seg, const uint8_t *in, size_t n)
{
	uint64_t head;
	size_t k;

	if (n < 8)
		return n;
	memcpy(&head, in, 8);
	memcpy(seg + RING_OFF_HEAD, &head, 8);
	k = n - 8 < FUZZ_RING_CAP ? n - 8 : FUZZ_RING_CAP;
	memcpy(seg + RING_HDR_SIZE, in + 8, k);
	return 8 + k;
}

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
	struct ring_producer prod;
	struct ring_stats st;
	struct rec_api rec;
	uint8_t *raw;
	unsigned got = 0, i;
	size_t n;
	int fd;

	/* The validator on its own (it needs 8-byte alignment). */
	n = size < sizeof vbuf ? size : sizeof vbuf;
	memcpy(vbuf, data, n);
	(void)record_validate(vbuf, n);

	if (ring_create_segs(FUZZ_RING_CAP, FUZZ_RING_SEGS, &fd) != 0)
		return 0;
	if (ring_map(fd, &ring) != 0)
		goto out;
	raw = mmap(NULL, FUZZ_SEG_LEN * FUZZ_RING_SEGS, PROT_READ | PROT_WRITE,
	    MAP_SHARED, fd, 0);
	if (raw == MAP_FAILED)
		goto out;
	n = fuzz_fill(raw, data, size);
	(void)fuzz_fill(raw + FUZZ_SEG_LEN * (FUZZ_RING_SEGS - 1), data + n,
	    size - n);
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
	/* Claims segment 1, then the last (hostile) one. */
	for (unsigned k = 0; k + 1 < FUZZ_RING_SEGS; k++) {
		(void)ring_producer_claim(ring, &prod);
		for (i = 0; i < 80; i++)
			(void)ring_pwrite(&prod, &rec);
		(void)ring_pneeds_wake(&prod);
	}
	(void)ring_drain(ring, fuzz_cb, &got, SIZE_MAX);
	ring_get_stats(ring, &st);
	if (st.records != got)
		abort();
	munmap(raw, FUZZ_SEG_LEN * FUZZ_RING_SEGS);
out:
	ring_unmap(ring);
	close(fd);
	return 0;
}

/*
 * Ring append cost: ns per record for one and two producer threads, with
 * and without a consumer draining at the same time.  Prints figures only.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"

#define BATCH	256

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct prod {
	struct ring	*ring;
	uint64_t	 n;
	uint32_t	 id;
	double		*samples;	/* ns per record, per batch */
	size_t		 nsamples;
	uint64_t	 dropped;
};

static atomic_int go;

/* Appends n API records the way the agent will: fill a stack record,
 * ring_write, ring_needs_wake.  Times batches of BATCH appends. */
static void *
producer(void *p)
{
	struct prod *a = p;
	struct rec_api r;
	uint64_t i, t0, seq = 0;
	size_t b;

	while (!atomic_load(&go))
		;
	for (b = 0; b < a->nsamples; b++) {
		t0 = now_ns();
		for (i = 0; i < BATCH; i++, seq++) {
			REC_INIT(&r, REC_API, 0);
			r.start = seq;
			r.end = seq + 100;
			r.correlation_id = seq;
			r.pid = a->id;
			r.tid = a->id;
			r.name_id = 1;
			r.kind = 3;
			if (ring_write(a->ring, &r) != 0)
				a->dropped++;
			(void)ring_needs_wake(a->ring);
		}
		a->samples[b] = (double)(now_ns() - t0) / BATCH;
	}
	return NULL;
}

struct cons {
	struct ring	*ring;
	atomic_int	 stop;
	uint64_t	 n;
};

static int
count_cb(const struct rec_hdr *h, void *arg)
{
	(void)h;
	(*(uint64_t *)arg)++;
	return 0;
}

static void *
consumer(void *p)
{
	struct cons *c = p;

	while (!atomic_load(&c->stop))
		if (ring_drain(c->ring, count_cb, &c->n, 65536) == 0)
			usleep(100);
	while (ring_drain(c->ring, count_cb, &c->n, SIZE_MAX) > 0)
		;
	return NULL;
}

static void
run(const char *label, size_t cap, int nprod, uint64_t per, int with_consumer)
{
	struct prod pr[4];
	struct cons c;
	struct ring *ring;
	struct ring_stats st;
	pthread_t pt[4], ct;
	double *all, med, p99;
	size_t nall = 0;
	uint64_t t0, t1;
	int fd, k;

	if (ring_create(cap, &fd) != 0 || ring_map(fd, &ring) != 0) {
		fprintf(stderr, "bench-ring: cannot create a ring\n");
		exit(1);
	}
	close(fd);
	memset(&c, 0, sizeof c);
	c.ring = ring;
	atomic_store(&go, 0);
	if (with_consumer)
		pthread_create(&ct, NULL, consumer, &c);
	for (k = 0; k < nprod; k++) {
		pr[k] = (struct prod){ ring, per, (uint32_t)k + 1, NULL,
		    per / BATCH, 0 };
		pr[k].samples = calloc(pr[k].nsamples, sizeof(double));
		pthread_create(&pt[k], NULL, producer, &pr[k]);
	}
	t0 = now_ns();
	atomic_store(&go, 1);
	for (k = 0; k < nprod; k++)
		pthread_join(pt[k], NULL);
	t1 = now_ns();
	atomic_store(&c.stop, 1);
	if (with_consumer)
		pthread_join(ct, NULL);
	ring_get_stats(ring, &st);
	all = calloc((size_t)nprod * pr[0].nsamples, sizeof(double));
	for (k = 0; k < nprod; k++) {
		memcpy(all + nall, pr[k].samples,
		    pr[k].nsamples * sizeof(double));
		nall += pr[k].nsamples;
		free(pr[k].samples);
	}
	qsort(all, nall, sizeof(double), cmp_double);
	med = all[nall / 2];
	p99 = all[nall * 99 / 100];
	printf("%-44s median %6.1f ns/rec  p99 %7.1f  aggregate %6.1f Mrec/s"
	    "  drops %llu\n", label, med, p99,
	    (double)(per * (uint64_t)nprod) / (double)(t1 - t0) * 1e3,
	    (unsigned long long)st.drops);
	free(all);
	ring_unmap(ring);
}

int
main(void)
{
	printf("ring append (56-byte API record, ring_write + ring_needs_wake;"
	    " target <= 50 ns median)\n");
	run("1 thread, no consumer, 64M ring", 64u << 20, 1, 1u << 20, 0);
	run("1 thread + consumer, 8M ring", RING_DEFAULT_CAPACITY, 1,
	    10u << 20, 1);
	run("2 threads, no consumer, 128M ring", 128u << 20, 2, 1u << 20, 0);
	run("2 threads + consumer, 8M ring", RING_DEFAULT_CAPACITY, 2,
	    5u << 20, 1);
	return 0;
}

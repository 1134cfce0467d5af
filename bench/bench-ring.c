/*
 * Ring append cost: ns per record per producer thread (1, 2, 4 and 8
 * threads), with and without a consumer draining at the same time, each
 * thread on its own segment (ring_producer_claim, what the agent does) and,
 * for comparison, all threads on the one shared segment (ring_write: the
 * ring before per-thread segments).  Prints figures only.
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
#define MAXPROD	8

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
	int		 own;		/* 1: own segment, 0: the shared one */
	double		 median;	/* of this thread's batches */
};

static atomic_int go;

/* Appends n API records the way the agent does: fill a stack record,
 * ring_pwrite (or ring_write), then the wake check.  Times batches of
 * BATCH appends. */
static void *
producer(void *p)
{
	struct prod *a = p;
	struct ring_producer rp;
	struct rec_api r;
	uint64_t i, t0, seq = 0;
	size_t b;

	if (a->own)
		(void)ring_producer_claim(a->ring, &rp);
	else
		ring_producer_shared(a->ring, &rp);
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
			if (ring_pwrite(&rp, &r) != 0)
				a->dropped++;
			(void)ring_pneeds_wake(&rp);
		}
		a->samples[b] = (double)(now_ns() - t0) / BATCH;
	}
	ring_producer_release(&rp);
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
run(const char *label, size_t cap, int nprod, uint64_t per, int with_consumer,
    int own)
{
	struct prod pr[MAXPROD];
	struct cons c;
	struct ring *ring;
	struct ring_stats st;
	pthread_t pt[MAXPROD], ct;
	double *all, med, p99, worst = 0;
	size_t nall = 0;
	uint64_t t0, t1;
	int fd, k;
	char lab[96];

	if (ring_create_segs(cap, own ? RING_DEFAULT_SEGMENTS : 1, &fd) != 0 ||
	    ring_map(fd, &ring) != 0) {
		fprintf(stderr, "bench-ring: cannot create a ring\n");
		exit(1);
	}
	close(fd);
	/* As the agent does once a start is acked: the shared segment's
	 * pages, not a fault per page in the timed writes. */
	ring_populate(ring, 0);
	memset(&c, 0, sizeof c);
	c.ring = ring;
	atomic_store(&go, 0);
	if (with_consumer)
		pthread_create(&ct, NULL, consumer, &c);
	for (k = 0; k < nprod; k++) {
		memset(&pr[k], 0, sizeof pr[k]);
		pr[k].ring = ring;
		pr[k].n = per;
		pr[k].id = (uint32_t)k + 1;
		pr[k].nsamples = per / BATCH;
		pr[k].own = own;
		pr[k].samples = calloc(pr[k].nsamples, sizeof(double));
		pthread_create(&pt[k], NULL, producer, &pr[k]);
	}
	usleep(20000);		/* every thread has claimed its segment */
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
		qsort(pr[k].samples, pr[k].nsamples, sizeof(double),
		    cmp_double);
		if (pr[k].samples[pr[k].nsamples / 2] > worst)
			worst = pr[k].samples[pr[k].nsamples / 2];
		free(pr[k].samples);
	}
	qsort(all, nall, sizeof(double), cmp_double);
	med = all[nall / 2];
	p99 = all[nall * 99 / 100];
	snprintf(lab, sizeof lab, "%s, %d thread%s%s", label, nprod,
	    nprod > 1 ? "s" : "", with_consumer ? " + consumer" : "");
	printf("%-50s median %6.1f ns/rec  p99 %7.1f  slowest thread %6.1f"
	    "  aggregate %6.1f Mrec/s  drops %llu\n", lab, med, p99, worst,
	    (double)(per * (uint64_t)nprod) / (double)(t1 - t0) * 1e3,
	    (unsigned long long)st.drops);
	free(all);
	ring_unmap(ring);
}

int
main(void)
{
	static const int nthreads[] = { 1, 2, 4, 8 };

	printf("ring append (56-byte API record, ring_pwrite + wake check;"
	    " per-thread ns per record over batches of %d: median, p99, the\n"
	    "slowest thread's median; target <= 50 ns median, every thread as"
	    " fast as one alone; %ld CPUs here)\n", BATCH,
	    sysconf(_SC_NPROCESSORS_ONLN));
	/* The figures of the ring before per-thread segments, kept. */
	run("shared segment, 64M", 64u << 20, 1, 1u << 20, 0, 0);
	run("shared segment, 8M", RING_DEFAULT_CAPACITY, 1, 10u << 20, 1, 0);
	run("shared segment, 128M", 128u << 20, 2, 1u << 20, 0, 0);
	run("shared segment, 8M", RING_DEFAULT_CAPACITY, 2, 5u << 20, 1, 0);
	for (size_t i = 0; i < sizeof nthreads / sizeof nthreads[0]; i++)
		run("own segments, 16M each", 16u << 20, nthreads[i],
		    256u << 10, 0, 1);
	for (size_t i = 0; i < sizeof nthreads / sizeof nthreads[0]; i++)
		run("own segments, 8M each", RING_DEFAULT_CAPACITY,
		    nthreads[i], 2u << 20, 1, 1);
	for (size_t i = 1; i < sizeof nthreads / sizeof nthreads[0]; i++)
		run("shared segment, 8M", RING_DEFAULT_CAPACITY,
		    nthreads[i], 2u << 20, 1, 0);
	return 0;
}

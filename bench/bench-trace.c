/*
 * Ring to trace file throughput: one producer thread writes a realistic
 * mix of records into a default-size ring, the consumer drains them into a
 * zstd trace file.  Prints records/s with the loss, bytes per record, the
 * stop-to-finalized latency for 1M records and the reader's speed.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"
#include "trace.h"

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool async_writer;	/* as msptid writes, else synchronous */

struct prod {
	struct ring	*ring;
	uint64_t	 n;
	uint64_t	 ok;
	_Atomic uint64_t ns;		/* set when done */
	double		 rate;		/* records/s; 0: as fast as it can */
};

/* Kernel launches with their API calls, a memcpy now and then: what a
 * training step looks like from the host. */
static void *
producer(void *p)
{
	struct prod *a = p;
	struct rec_api api;
	struct rec_kernel k;
	struct rec_memcpy m;
	uint64_t i, ts = 1700000000000000000ull, t0 = now_ns();
	double ns_per = a->rate > 0 ? 1e9 / a->rate : 0;

	for (i = 0; i < a->n; i++) {
		/* Paced in batches of 64, like an application would be. */
		if (ns_per > 0 && i % 64 == 0)
			while ((double)(now_ns() - t0) < (double)i * ns_per)
				;
		ts += 700 + (i * 7) % 300;
		if (i % 3 == 0) {
			REC_INIT(&api, REC_API, 0);
			api.start = ts;
			api.end = ts + 400;
			api.correlation_id = i / 3 + 1;
			api.pid = 4242;
			api.tid = 4243 + (uint32_t)(i % 2);
			api.name_id = 1 + (uint32_t)(i % 5);
			api.kind = 3;
			a->ok += ring_write(a->ring, &api) == 0;
		} else if (i % 50 == 1) {
			REC_INIT(&m, REC_MEMCPY, REC_F_HOST_LAUNCH);
			m.start = ts;
			m.end = ts + 9000;
			m.correlation_id = i / 3 + 1;
			m.bytes = 1 << 20;
			m.pid = 4242;
			m.tid = 4243;
			m.stream = 2;
			m.task_id = (uint32_t)i;
			m.copy_kind = 2;
			a->ok += ring_write(a->ring, &m) == 0;
		} else {
			REC_INIT(&k, REC_KERNEL, REC_F_HOST_LAUNCH);
			k.start = ts;
			k.end = ts + 300;
			k.correlation_id = i / 3 + 1;
			k.pid = 4242;
			k.tid = 4243;
			k.stream = 1 + (uint32_t)(i % 2);
			k.task_id = (uint32_t)i;
			k.name_id = 6 + (uint32_t)(i % 40);
			k.type_id = 50;
			a->ok += ring_write(a->ring, &k) == 0;
		}
		(void)ring_needs_wake(a->ring);
	}
	atomic_store(&a->ns, now_ns() - t0);
	return NULL;
}

static int
write_cb(const struct rec_hdr *h, void *arg)
{
	return trace_writer_add(arg, h) != 0;
}

static struct trace_writer *
open_writer(const char *path, int *fdp)
{
	struct trace_header h;
	struct trace_writer *w;
	uint32_t id;
	char name[32];
	int fd, i;

	memset(&h, 0, sizeof h);
	h.hostname = "bench";
	h.producer = "bench-trace";
	h.session_id = 1;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	/* msptid's writer: async (its thread compresses and writes, a 64 MiB
	 * queue), without zstd's XXH64 (session-sink.c). */
	if (fd < 0 || (async_writer ? trace_writer_open_async(fd, &h, 0,
	    64u << 20, &w) != 0 || trace_writer_tune(w, 0, false) != 0 :
	    trace_writer_open(fd, &h, 0, &w) != 0)) {
		perror(path);
		exit(1);
	}
	for (i = 0; i < 60; i++) {
		snprintf(name, sizeof name, "aclnnKernel_%d", i);
		trace_writer_intern(w, name, strlen(name), &id);
	}
	*fdp = fd;
	return w;
}

/* A producer at rate (0: flat out) and the consumer draining into the file
 * as the daemon would (woken when the ring is half full, else every 1 ms). */
static void
throughput(const char *path, uint64_t n, double rate)
{
	struct trace_writer_stats ws;
	struct ring_stats rs;
	struct trace_writer *w;
	struct ring *ring;
	struct prod pr;
	pthread_t pt;
	uint64_t t0, t1, tc;
	int fd, rfd;

	if (ring_create(RING_DEFAULT_CAPACITY, &rfd) != 0 ||
	    ring_map(rfd, &ring) != 0)
		exit(1);
	close(rfd);
	ring_populate(ring, 0);		/* as the agent after its start */
	w = open_writer(path, &fd);
	pr = (struct prod){ ring, n, 0, 0, rate };
	t0 = now_ns();
	pthread_create(&pt, NULL, producer, &pr);
	for (;;) {
		int got = ring_drain(ring, write_cb, w, 65536);

		if (got == 0) {
			if (atomic_load(&pr.ns) != 0 && ring_pending(ring) == 0)
				break;
			if (ring_pending(ring) < RING_DEFAULT_CAPACITY / 2)
				usleep(1000);
		}
	}
	pthread_join(pt, NULL);
	t1 = now_ns();
	trace_writer_close(w, NULL, &ws);
	tc = now_ns();
	ring_get_stats(ring, &rs);
	if (rate > 0)
		printf("offered %5.1f Mrec/s:", rate / 1e6);
	else
		printf("offered   max       :");
	printf(" written %5.2f Mrec/s, %llu of %llu records, %llu dropped"
	    " (%.3f%%)\n", (double)rs.records / (double)(t1 - t0) * 1e3,
	    (unsigned long long)rs.records, (unsigned long long)n,
	    (unsigned long long)rs.drops,
	    100.0 * (double)rs.drops / (double)n);
	if (rate != 0)
		goto out;
	printf("file: %.2f bytes/record (%.1f raw), %llu chunks,"
	    " %.1f MB, close %.1f ms\n",
	    (double)ws.file_bytes / (double)ws.records,
	    (double)ws.raw_bytes / (double)ws.records,
	    (unsigned long long)ws.chunks, (double)ws.file_bytes / 1e6,
	    (double)(tc - t1) / 1e6);
out:
	close(fd);
	ring_unmap(ring);
}

/* Writer alone: how many records per second the drain side can take. */
static void
writer_only(const char *path, uint64_t n)
{
	struct trace_writer_stats ws;
	struct trace_writer *w;
	struct rec_kernel k;
	uint64_t i, t0, t1;
	int fd;

	w = open_writer(path, &fd);
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		REC_INIT(&k, REC_KERNEL, REC_F_HOST_LAUNCH);
		k.start = 1700000000000000000ull + i * 800;
		k.end = k.start + 300;
		k.correlation_id = i;
		k.pid = 4242;
		k.tid = 4243;
		k.stream = 1;
		k.task_id = (uint32_t)i;
		k.name_id = 1 + (uint32_t)(i % 60);
		trace_writer_add(w, &k);
	}
	t1 = now_ns();
	trace_writer_close(w, NULL, &ws);
	printf("writer alone: %.2f Mrec/s (validate, copy, zstd, write)\n",
	    (double)n / (double)(t1 - t0) * 1e3);
	close(fd);
}

/* Stop latency: 1M records produced, the ring still full of them; time
 * from "stop" to a finalized, fsynced file. */
static void
stop_latency(const char *path)
{
	struct trace_writer_stats ws;
	struct trace_writer *w;
	struct ring *ring;
	struct prod pr;
	uint64_t t0, t1, t2;
	int fd, rfd;
	const uint64_t n = 1000000;

	if (ring_create(64u << 20, &rfd) != 0 || ring_map(rfd, &ring) != 0)
		exit(1);
	close(rfd);
	ring_populate(ring, 0);		/* as the agent after its start */
	w = open_writer(path, &fd);
	/* Stream mode: most of the records were drained before stop. */
	pr = (struct prod){ ring, n - 100000, 0, 0, 0 };
	producer(&pr);
	while (ring_drain(ring, write_cb, w, SIZE_MAX) > 0)
		;
	/* The last 100k are still in the ring when stop comes. */
	pr = (struct prod){ ring, 100000, 0, 0, 0 };
	producer(&pr);
	t0 = now_ns();
	while (ring_drain(ring, write_cb, w, SIZE_MAX) > 0)
		;
	t1 = now_ns();
	trace_writer_close(w, NULL, &ws);
	t2 = now_ns();
	printf("stop -> finalized, 1M records (100k still in ring): %.1f ms"
	    " (drain %.1f, flush+footer+fsync %.1f)\n",
	    (double)(t2 - t0) / 1e6, (double)(t1 - t0) / 1e6,
	    (double)(t2 - t1) / 1e6);
	close(fd);
	ring_unmap(ring);
}

static void
read_speed(const char *path)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	uint64_t n = 0, t0, t1;

	if (trace_reader_open(path, &r) != 0)
		return;
	t0 = now_ns();
	while (trace_reader_next(r, &h) == 1)
		n++;
	t1 = now_ns();
	trace_reader_close(r);
	printf("reader: %.2f Mrec/s (%llu records)\n",
	    (double)n / (double)(t1 - t0) * 1e3, (unsigned long long)n);
}

int
main(void)
{
	static const double rates[] = { 2e6, 5e6, 8e6, 12e6 };
	char path[] = "/tmp/bench-trace.XXXXXX";
	size_t i;
	int fd;

	if ((fd = mkstemp(path)) < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);

	printf("ring -> trace file, one producer thread, default 8M ring,"
	    " zstd level 1 (target: >= 5 Mrec/s with zero loss)\n");
	for (i = 0; i < sizeof rates / sizeof rates[0]; i++)
		throughput(path, (uint64_t)(rates[i] / 2), rates[i]);
	throughput(path, 5000000, 0);
	read_speed(path);
	/* The same with msptid's writer: the drain only copies, zstd runs
	 * on the writer's thread. */
	printf("the same into msptid's writer (async: zstd on its thread, no "
	    "XXH64; target >= 5 Mrec/s with zero loss)\n");
	async_writer = true;
	for (i = 0; i < sizeof rates / sizeof rates[0]; i++)
		throughput(path, (uint64_t)(rates[i] / 2), rates[i]);
	throughput(path, 5000000, 0);
	async_writer = false;
	writer_only(path, 5000000);
	stop_latency(path);
	unlink(path);
	return 0;
}

/* bench-report: analysis throughput (records/s, one core), fed directly and
 * read from a trace file, and export time and size against record count.
 * Prints figures; never fails on time.  Files go to $TMPDIR (/tmp) and are
 * removed. */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "analysis.h"
#include "export.h"
#include "export-int.h"
#include "trace.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the process (all threads): on a shared machine the
 * records per CPU second say more than the wall-clock rate. */
static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Where the synthetic records go: a direct source, a trace writer, or
 * (neither) memory, to be interleaved with other ranks' (node_file). */
struct sink {
	struct analysis_source	*src;
	struct trace_writer	*w;
	uint8_t			*buf;
	size_t			 len, cap;
};

static void
put(struct sink *k, const void *rec)
{
	if (k->src == NULL && k->w == NULL) {
		size_t n = ((const struct rec_hdr *)rec)->size;

		if (k->len + n > k->cap) {
			k->cap = k->cap ? 2 * k->cap : 1 << 20;
			if ((k->buf = realloc(k->buf, k->cap)) == NULL) {
				perror("bench-report");
				exit(1);
			}
		}
		memcpy(k->buf + k->len, rec, n);
		k->len += n;
	} else if (k->src != NULL)
		analysis_source_add(k->src, rec);
	else {
		int rc = trace_writer_add(k->w, rec);

		if (rc != 0) {
			fprintf(stderr, "bench-report: trace write failed "
			    "(type %u): %s\n", ((const struct rec_hdr *)rec)->type,
			    trace_strerror(rc));
			exit(1);
		}
	}
}

static const char *const names[] = { NULL, "step", "MatMul", "AI_CORE",
    "Add", "AI_VECTOR", "aclrtLaunchKernel", "HcclAllReduce", "comm0",
    "ring" };

/* Jittered workload: times vary as in a real capture (set by main). */
static bool jitter;
static uint64_t jitter_state = 0x9e3779b97f4a7c15ull;

/* t plus up to +-12.5 % of it (xorshift64) when jittered, else t. */
static uint64_t
jit(uint64_t t)
{
	uint64_t x = jitter_state;

	if (!jitter)
		return t;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	jitter_state = x;
	return t - t / 8 + x % (t / 4 + 1);
}

/* The next of a jitter sequence of its own (xorshift64): t plus up to
 * +-12.5 % of it. */
static uint64_t
jit_common(uint64_t *state, uint64_t t)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return t - t / 8 + x % (t / 4 + 1);
}

/*
 * About n records of a training-like mix: per step a "step" range, 32
 * launches (API + kernel, two op types), one all-reduce.  Jittered: every
 * duration and gap varies, and the thread ids alternate, so consecutive
 * records differ as in a real capture.  With world > 1 the ranks leave
 * each all-reduce together, as a job's do: the steps follow a clock
 * common to the ranks (jittered by a sequence of its own, the same for
 * every rank), each step's all-reduce ends 420 us into it on every rank
 * give or take 1 us, and the step ends 440 us in; between, each rank's
 * times vary on their own.  (Before, each rank's times drifted apart
 * step by step, so no collective's ends agreed, and the final pass's
 * clock alignment spent its worst case on them: about half of that pass
 * over 4 files.)
 */
static void
workload_rank(struct sink *k, uint64_t n, int rank, int world)
{
	struct rec_process pr;
	struct rec_kernel kr;
	struct rec_api api;
	struct rec_marker m;
	struct rec_communication c;
	uint64_t t = 1700000000000000000ull, done = 0, corr = 1, step = 1;
	uint64_t tstep = t, common = 0x2545f4914f6cdd1dull;

	REC_INIT(&pr, REC_PROCESS, 0);
	pr.pid = (uint32_t)rank + 1;
	pr.rank = rank;
	pr.local_rank = rank;
	pr.world_size = world;
	put(k, &pr);
	REC_INIT(&kr, REC_KERNEL, 0);
	REC_INIT(&api, REC_API, 0);
	REC_INIT(&m, REC_MARKER, 0);
	REC_INIT(&c, REC_COMMUNICATION, 0);
	kr.pid = api.pid = m.pid = c.pid = (uint32_t)rank + 1;
	api.name_id = 6;
	api.kind = 3;
	m.name_id = 1;
	c.name_id = 7;
	c.comm_name_id = 8;
	c.alg_type_id = 9;
	c.count = 1 << 20;
	while (done < n) {
		if (world > 1)
			t = tstep;
		m.id = step;
		m.timestamp = t;
		m.flag = 2;
		put(k, &m);
		for (int i = 0; i < 32; i++) {
			api.start = t;
			api.end = t + jit(2000);
			api.tid = jitter ? (uint32_t)rank + 1 + (i & 1) : 0;
			api.correlation_id = kr.correlation_id = corr++;
			kr.start = t + jit(5000);
			kr.end = kr.start + jit(10000);
			kr.name_id = i % 4 ? 2 : 4;
			kr.type_id = i % 4 ? 3 : 5;
			t += jit(10000);
			put(k, &api);
			put(k, &kr);
		}
		c.start = t + jit(6000);
		c.end = c.start + jit(44000);
		if (world > 1) {
			/* 32 launches take at most 360 us: the all-reduce
			 * starts before 367 us. */
			c.end = tstep + 420000 + jit(1000) - 500;
			t = tstep + 440000;
			tstep += jit_common(&common, 480000);
		}
		c.correlation_id = corr++;
		put(k, &c);
		if (world == 1)
			t += jit(60000);
		m.timestamp = t;
		m.flag = 4;
		put(k, &m);
		step++;
		done += 67;
	}
}

static void
workload(struct sink *k, uint64_t n)
{
	workload_rank(k, n, 0, 1);
}

static void
direct(uint64_t n)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = analysis_source_new(a, "bench", NULL);
	struct sink k = { NULL, NULL, NULL, 0, 0 };
	struct analysis_totals tot;
	double t0, t1;

	/* The records are made first, into memory: the jittered ones' random
	 * times cost a 64-bit division each, which was timed as analysis. */
	workload(&k, n);
	for (uint32_t i = 1; i < sizeof(names) / sizeof(names[0]); i++)
		analysis_source_string(src, i, names[i]);
	t0 = now();
	for (size_t p = 0; p < k.len;
	    p += ((const struct rec_hdr *)(k.buf + p))->size)
		analysis_source_add(src, (const void *)(k.buf + p));
	analysis_run(a);
	t1 = now();
	free(k.buf);
	analysis_get_totals(a, &tot);
	printf("report, fed directly: %9llu records in %7.3f s: %6.1f M "
	    "records/s%s\n", (unsigned long long)tot.records, t1 - t0,
	    (double)tot.records / (t1 - t0) / 1e6, jitter ? " (jittered "
	    "times: the analysis alone, no reading)" : "");
	analysis_free(a);
}

/*
 * A large job's collectives, fed directly: nr ranks on nodes of 8, each
 * in "world", its node's tensor-parallel group ("tp<node>", 8 ranks) and
 * its data-parallel group ("dp<local rank>", nr / 8 ranks), ncoll
 * all-reduces in each, a step range around each round.  What it times is
 * analysis_run over them: the communication tables and the clock
 * alignment across every rank, the part of a cluster report that one
 * host does.
 */
static void
many_ranks(int nr, int ncoll)
{
	struct analysis *a = analysis_new(NULL);
	double t0, t1, c0, c1;

	for (int r = 0; r < nr; r++) {
		char host[32], name[32];
		struct analysis_source *src;
		struct rec_process p;
		uint32_t comm[3];

		snprintf(host, sizeof(host), "node%d", r / 8);
		src = analysis_source_new(a, "bench", host);
		analysis_source_string(src, 1, "HcclAllReduce");
		analysis_source_string(src, 2, "step");
		analysis_source_string(src, 3, "world");
		snprintf(name, sizeof(name), "tp%d", r / 8);
		analysis_source_string(src, 4, name);
		snprintf(name, sizeof(name), "dp%d", r % 8);
		analysis_source_string(src, 5, name);
		comm[0] = 3;
		comm[1] = 4;
		comm[2] = 5;
		REC_INIT(&p, REC_PROCESS, 0);
		p.pid = 1000 + (uint32_t)r;
		p.rank = r;
		p.local_rank = r % 8;
		p.world_size = nr;
		analysis_source_add(src, &p.hdr);
		for (int k = 0; k < ncoll; k++) {
			uint64_t t = 1700000000000000000ull +
			    (uint64_t)k * 1000000;
			struct rec_marker m;

			REC_INIT(&m, REC_MARKER, 0);
			m.pid = p.pid;
			m.id = (uint64_t)k + 1;
			m.name_id = 2;
			m.flag = 2;		/* range start */
			m.timestamp = t;
			analysis_source_add(src, &m.hdr);
			for (int c = 0; c < 3; c++) {
				struct rec_communication x;

				REC_INIT(&x, REC_COMMUNICATION, 0);
				x.pid = p.pid;
				x.start = t + (uint64_t)c * 300000 +
				    (uint64_t)(r % 7) * 1000;
				x.end = t + (uint64_t)c * 300000 + 200000;
				x.name_id = 1;
				x.comm_name_id = comm[c];
				x.count = 1 << 20;
				x.seq = (uint32_t)k + 1;
				analysis_source_add(src, &x.hdr);
			}
			m.flag = 4;		/* range end */
			m.timestamp = t + 999000;
			analysis_source_add(src, &m.hdr);
		}
	}
	c0 = cpu_now();
	t0 = now();
	analysis_run(a);
	t1 = now();
	c1 = cpu_now();
	printf("report, final pass over %d ranks (3 communicators each, %d "
	    "collectives in each): %.3f s, CPU %.3f s\n", nr, ncoll, t1 - t0,
	    c1 - c0);
	analysis_free(a);
}

/* A trace writer on path (fd in *fdp), names[] interned first: their
 * ids are their indexes. */
static struct trace_writer *
bench_writer(const char *path, int *fdp)
{
	struct trace_header h;
	struct trace_writer *w;
	uint32_t id;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	memset(&h, 0, sizeof(h));
	h.hostname = "bench";
	h.producer = "bench-report";
	if (fd < 0 || trace_writer_open(fd, &h, 0, &w) != 0) {
		perror(path);
		exit(1);
	}
	for (uint32_t i = 1; i < sizeof(names) / sizeof(names[0]); i++)
		if (trace_writer_intern(w, names[i], strlen(names[i]),
		    &id) != 0 || id != i) {
			fputs("bench-report: unexpected string id\n", stderr);
			exit(1);
		}
	*fdp = fd;
	return w;
}

static void
bench_writer_close(struct trace_writer *w, int fd, const char *path)
{
	if (trace_writer_close(w, NULL, NULL) != 0 || close(fd) != 0) {
		perror(path);
		exit(1);
	}
}

/* Writes the workload to path. */
static void
write_trace_rank(const char *path, uint64_t n, int rank, int world)
{
	struct sink k = { NULL, NULL, NULL, 0, 0 };
	int fd;

	k.w = bench_writer(path, &fd);
	workload_rank(&k, n, rank, world);
	bench_writer_close(k.w, fd, path);
}

/*
 * One node's capture: ranks processes of n records in all in one file,
 * as msptid writes it (each agent's ring drained in turn: runs of a few
 * hundred records a process), the ranks' steps in step.
 */
static void
write_trace_node(const char *path, uint64_t n, int ranks)
{
	struct sink k = { NULL, NULL, NULL, 0, 0 }, r[8];
	size_t at[8] = { 0 };
	bool more = true;
	int fd;

	k.w = bench_writer(path, &fd);
	for (int i = 0; i < ranks && i < 8; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		jitter_state += 0x632be59bd9b4e019ull;
		workload_rank(&r[i], n / (uint64_t)ranks, i, ranks);
	}
	while (more) {
		more = false;
		for (int i = 0; i < ranks && i < 8; i++)
			for (int c = 0; c < 256 && at[i] < r[i].len; c++) {
				const struct rec_hdr *rh = (const void *)
				    (r[i].buf + at[i]);

				put(&k, rh);
				at[i] += rh->size;
				more = true;
			}
	}
	for (int i = 0; i < ranks && i < 8; i++)
		free(r[i].buf);
	bench_writer_close(k.w, fd, path);
}

static void
write_trace(const char *path, uint64_t n)
{
	write_trace_rank(path, n, 0, 1);
}

static long long
fsize(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static long long
dsize(const char *dir)
{
	static const char *const f[] = { "op_summary", "op_statistic",
	    "api_statistic", "communication_statistic",
	    "communication_matrix", "step_trace", "memcpy", "memory",
	    "launch_statistic", "slow_rank", "advice", "summary" };
	char p[600];
	long long s = 0, x;

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if ((size_t)snprintf(p, sizeof(p), "%.500s/%s.csv", dir,
		    f[i]) >= sizeof(p))
			continue;
		if ((x = fsize(p)) > 0)
			s += x;
	}
	return s;
}

static void
rmdir_csv(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench-report: cannot remove %s\n", dir);
}

static void
null_slice(struct ex *x, const struct ex_track *t, const char *name,
    const char *cat, uint64_t ts, uint64_t dur, uint64_t flow_out,
    uint64_t flow_in, const struct ex_arg *args, unsigned nargs)
{
	(void)t, (void)name, (void)cat, (void)ts, (void)dur, (void)flow_out;
	(void)flow_in, (void)args, (void)nargs;
	x->events++;
}

static void
null_instant(struct ex *x, const struct ex_track *t, const char *name,
    uint64_t ts)
{
	(void)t, (void)name, (void)ts;
	x->events++;
}

static void
null_counter(struct ex *x, const struct ex_track *t, const char *name,
    const char *unit, uint64_t ts, double v)
{
	(void)t, (void)name, (void)unit, (void)ts, (void)v;
	x->events++;
}

/* The exporters' shared walk with an emitter that writes nothing: what
 * re-reading the file and making the tracks costs every format. */
static void
walk_alone(struct analysis *a, uint64_t records)
{
	static const struct ex_emit em = { null_slice, null_instant,
	    null_counter };
	struct ex x;
	double t0, c0;

	memset(&x, 0, sizeof(x));
	x.a = a;
	x.em = &em;
	c0 = cpu_now();
	t0 = now();
	ex_walk(&x);
	printf("export walk alone     %9llu records in %7.3f s: %6.2f M "
	    "records/s wall, %6.2f M records/s of CPU time\n",
	    (unsigned long long)records, now() - t0, (double)records /
	    (now() - t0) / 1e6, (double)records / (cpu_now() - c0) / 1e6);
}

/* The same file read alone, on this thread (zstd, delta decoding and
 * the record checks: what every report pays before its analysis), in
 * CPU time: the floor under the report's rate per core. */
static void
read_alone(const char *path)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	uint64_t n = 0;
	double c0 = cpu_now(), c;
	int rc;

	if ((rc = trace_reader_open(path, &r)) != 0) {
		fprintf(stderr, "bench-report: %s: %s\n", path,
		    trace_strerror(rc));
		exit(1);
	}
	while ((rc = trace_reader_next(r, &h)) == 1)
		n++;
	trace_reader_close(r);
	c = cpu_now() - c0;
	if (rc != 0) {
		fprintf(stderr, "bench-report: %s: %s\n", path,
		    trace_strerror(rc));
		exit(1);
	}
	printf("read alone, no analysis: %6llu records in %7.3f s of CPU: "
	    "%6.1f M records/s (%.1f ns a record: the report's floor)\n",
	    (unsigned long long)n, c, (double)n / c / 1e6, c * 1e9 /
	    (double)n);
}

/* Of that floor, zstd's part: every chunk's frame decompressed, nothing
 * decoded or checked (the file's layout: doc/trace-format.md). */
static void
zstd_alone(const char *path)
{
	struct trace_file_hdr fh;
	struct trace_chunk_hdr ch;
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	uint8_t *comp = NULL, *raw = NULL;
	size_t compcap = 0, rawcap = 0;
	uint64_t n = 0, bytes = 0;
	double c = 0, c0;
	FILE *f = fopen(path, "rb");

	if (f == NULL || dctx == NULL || fread(&fh, sizeof(fh), 1, f) != 1 ||
	    fseek(f, (long)fh.size, SEEK_SET) != 0) {
		fprintf(stderr, "bench-report: %s: cannot read\n", path);
		exit(1);
	}
	while (fread(&ch, sizeof(ch), 1, f) == 1 &&
	    ch.magic == TRACE_CHUNK_MAGIC) {
		if (ch.comp_size > compcap)
			comp = realloc(comp, compcap = ch.comp_size);
		if (ch.raw_size > rawcap)
			raw = realloc(raw, rawcap = ch.raw_size);
		if (comp == NULL || raw == NULL ||
		    fread(comp, 1, ch.comp_size, f) != ch.comp_size) {
			fprintf(stderr, "bench-report: %s: short chunk\n",
			    path);
			exit(1);
		}
		c0 = cpu_now();
		if (ZSTD_isError(ZSTD_decompressDCtx(dctx, raw, ch.raw_size,
		    comp, ch.comp_size))) {
			fprintf(stderr, "bench-report: %s: bad frame\n", path);
			exit(1);
		}
		c += cpu_now() - c0;
		n += ch.records;
		bytes += ch.raw_size;
	}
	fclose(f);
	ZSTD_freeDCtx(dctx);
	free(comp);
	free(raw);
	printf("  of which zstd:        %6llu records in %7.3f s of CPU: "
	    "%.1f ns a record, %.0f MB/s of its output\n",
	    (unsigned long long)n, c, c * 1e9 / (double)n,
	    (double)bytes / c / 1e6);
}

static void
from_file(const char *path, uint64_t n, bool exports)
{
	struct analysis_opts o;
	struct analysis *a;
	struct analysis_totals tot;
	char out[512];
	double t0, t1;

	analysis_opts_init(&o);
	o.keep_segments = exports;
	t0 = now();
	write_trace(path, n);
	t1 = now();
	printf("trace written:        %9llu records in %7.3f s, %lld bytes "
	    "(%.2f bytes/record)%s\n", (unsigned long long)n, t1 - t0,
	    fsize(path), (double)fsize(path) / (double)n, jitter ?
	    " (jittered times)" : "");
	a = analysis_new(&o);
	t0 = now();
	analysis_add_file(a, path);
	analysis_run(a);
	t1 = now();
	analysis_get_totals(a, &tot);
	printf("report, from file:    %9llu records in %7.3f s: %6.1f M "
	    "records/s%s\n", (unsigned long long)tot.records, t1 - t0,
	    (double)tot.records / (t1 - t0) / 1e6, jitter ? " (jittered "
	    "times) [target >= 30 per core]" : "");
	if (jitter) {
		read_alone(path);
		zstd_alone(path);
	}
	if (exports) {
		/* Perfetto twice: deflate on the default pool of workers,
		 * then on the walk's thread (0 workers), side by side. */
		static const char *const fmt[] = { "chrome", "perfetto",
		    "csv", "perfetto" };

		walk_alone(a, tot.records);
		for (int i = 0; i < 4; i++) {
			FILE *f = NULL;
			long long sz;
			int rc;

			const char *only = getenv("BENCH_EXPORT_ONLY");
			double c0, c1;

			if (only != NULL && strcmp(only, "1") != 0 &&
			    strcmp(only, fmt[i]) != 0)
				continue;
			snprintf(out, sizeof(out), "%s.%s", path, fmt[i]);
			if (i == 3)
				setenv("MSPTI_PERFETTO_THREADS", "0", 1);
			c0 = cpu_now();
			t0 = now();
			if (i == 2)
				rc = export_csv(a, out);
			else if ((f = fopen(out, "wb")) == NULL)
				rc = -errno;
			else {
				rc = i == 0 ? export_chrome(a, f) :
				    export_perfetto(a, f);
				if (fclose(f) != 0 && rc == 0)
					rc = -EIO;
			}
			t1 = now();
			c1 = cpu_now();
			unsetenv("MSPTI_PERFETTO_THREADS");
			sz = i == 2 ? dsize(out) : fsize(out);
			printf("export %-8s      %9llu records in %7.3f s: "
			    "%lld bytes (%.1f bytes/record)%s%s\n", fmt[i],
			    (unsigned long long)tot.records, t1 - t0, sz,
			    (double)sz / (double)tot.records,
			    i == 1 ? " (deflate workers: one per other CPU)" :
			    i == 3 ? " (deflate on the walk's thread)" : "",
			    rc ? " FAILED" : "");
			printf("export %-8s      %6.2f M records/s wall, %6.2f M "
			    "records/s of CPU time%s\n", fmt[i],
			    (double)tot.records / (t1 - t0) / 1e6,
			    (double)tot.records / (c1 - c0) / 1e6, i == 0 ?
			    " [target >= 3]" : i == 1 || i == 3 ? " [target >= "
			    "5; <= 25 bytes/record]" : "");
			if (i == 2)
				rmdir_csv(out);
			else
				unlink(out);
		}
	}
	analysis_free(a);
	unlink(path);
}

static double
thread_cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Report over nf rank files of n records each with --jobs 1, 2 and 4
 * (analysis_opts.jobs): wall-clock records/s and the ratio to jobs 1,
 * best of 3.  On a loaded machine the wall clock says little, so also the
 * CPU time of the analysing thread (the critical path: the workers read
 * ahead of it) and what an idle machine would give, CPU of --jobs 1 over
 * that critical path.
 */
static void
multi_run(char **pv, int nf, bool merged, const char *what, size_t nj)
{
	static const unsigned jobs[] = { 1, 2, 4, 8 };
	double base = 0, cpu1 = 0, fcpu[8] = { 0 }, fin = 0;

	/* Merged: each file's analysis alone on this thread's CPU clock (a
	 * worker's share), best of 3, for the idle-machine estimate. */
	for (int i = 0; merged && i < nf; i++)
		for (int rep = 0; rep < 3; rep++) {
			struct analysis *a = analysis_new(NULL);
			double m0 = thread_cpu_now(), m;

			analysis_add_file(a, pv[i]);
			m = thread_cpu_now() - m0;
			analysis_free(a);
			if (fcpu[i] == 0 || m < fcpu[i])
				fcpu[i] = m;
		}

	for (size_t j = 0; j < nj && j < sizeof(jobs) / sizeof(jobs[0]); j++) {
		double best = 0, cpu = 0, crit = 0;
		uint64_t recs = 0;
		unsigned threads = 1;

		for (int rep = 0; rep < 3; rep++) {
			struct analysis_opts o;
			struct analysis *a;
			struct analysis_totals tot;
			double t0, c0, t1, m0, m, r0;

			analysis_opts_init(&o);
			o.jobs = jobs[j];
			a = analysis_new(&o);
			c0 = cpu_now();
			m0 = thread_cpu_now();
			t0 = now();
			if (merged)
				analysis_add_files_merged(a, pv, (size_t)nf);
			else
				analysis_add_files(a, pv, (size_t)nf);
			r0 = now();
			analysis_run(a);
			t1 = now();
			if (fin == 0 || t1 - r0 < fin)
				fin = t1 - r0;
			m = thread_cpu_now() - m0;
			analysis_get_totals(a, &tot);
			recs = tot.records;
			threads = tot.threads;
			if (best == 0 || t1 - t0 < best)
				best = t1 - t0;
			if (crit == 0 || m < crit) {
				crit = m;
				cpu = cpu_now() - c0;
			}
			analysis_free(a);
		}
		if (j == 0) {
			base = best;
			cpu1 = cpu;
		}
		if (merged) {
			/* Idle machine: the workers take the files in order
			 * (each the next when free), the calling thread's
			 * own CPU (merging, analysis_run) after them: an
			 * upper bound, merging overlaps the workers. */
			double load[8] = { 0 }, span = 0, path;

			for (int i = 0; i < nf; i++) {
				unsigned w = 0;

				for (unsigned k = 1; k < jobs[j] && k < 8; k++)
					if (load[k] < load[w])
						w = k;
				load[w] += fcpu[i];
			}
			for (unsigned k = 0; k < 8; k++)
				if (load[k] > span)
					span = load[k];
			/* One worker: all on the calling thread (the reader's
			 * threads decompressing ahead). */
			path = jobs[j] > 1 && nf > 1 ? span + crit : crit;
			if (j == 0)
				cpu1 = path;
			/* A file in several threads: the calling thread
			 * is one of them, the estimate does not hold. */
			printf("report (per-file partials, merged), %s, "
			    "--jobs %u: %9llu records in %7.3f s: %6.1f M "
			    "records/s wall (x%.2f of --jobs 1); CPU %.3f s: "
			    "%.1f M records/s per core; ", what, jobs[j],
			    (unsigned long long)recs, best, (double)recs /
			    best / 1e6, base / best, cpu, (double)recs / cpu /
			    1e6);
			if (threads > 1)
				printf("%u threads on the file\n", threads);
			else
				printf("critical path %.3f s: x%.2f on an idle "
				    "machine\n", path, cpu1 / path);
		} else
			printf("report, %s, --jobs %u: %9llu records in "
			    "%7.3f s: %6.1f M records/s wall (x%.2f of --jobs "
			    "1); CPU %.3f s, analysing thread %.3f s: %.1f M "
			    "records/s of it, x%.2f on an idle machine",
			    what, jobs[j], (unsigned long long)recs, best,
			    (double)recs / best / 1e6, base / best, cpu, crit,
			    (double)recs / crit / 1e6, cpu1 / crit);
		if (!merged && threads > 1)
			/* The calling thread is the first of them; the
			 * others took as many processes. */
			printf(" (the first of %u analysing the file)\n",
			    threads);
		else if (!merged)
			printf("\n");
	}
	/* analysis_run: what no --jobs spreads (clock alignment, steps,
	 * verdicts, tables), the Amdahl term of the scaling above. */
	if (!merged)
		printf("report, %s: final pass on one thread (alignment, "
		    "steps, tables) %.3f s, %.1f %% of --jobs 1\n", what, fin,
		    100 * fin / base);
}

/* The same files analysed in one pass (the reader's threads decompress
 * ahead: msptictl report before the partial results) and as per-file
 * partials in threads merged in order (msptictl report now). */
static void
multi(const char *tmp, int nf, uint64_t n)
{
	char paths[8][512], *pv[8];

	jitter = true;	/* delta-coded regular times read for nothing */
	for (int i = 0; i < nf; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/bench-report-m%d-%d."
		    "trace", tmp, (int)getpid(), i);
		write_trace_rank(paths[i], n, i, nf);
		pv[i] = paths[i];
	}
	jitter = false;
	multi_run(pv, nf, false, nf > 1 ? "4 files" : "1 file ", 3);
	multi_run(pv, nf, true, nf > 1 ? "4 files" : "1 file ", 3);
	if (nf == 1) {
		/* The reader's buffers evicted before reuse always and
		 * never (each worker measures which costs less otherwise:
		 * lib/trace-reader.c). */
		setenv("MSPTI_READER_EVICT", "1", 1);
		multi_run(pv, nf, false, "1 file, buffers always evicted", 3);
		setenv("MSPTI_READER_EVICT", "0", 1);
		multi_run(pv, nf, false, "1 file, buffers never evicted", 3);
		unsetenv("MSPTI_READER_EVICT");
	}
	for (int i = 0; i < nf; i++)
		unlink(paths[i]);
}

/* One node's file of 4 ranks (n records in all): its processes dealt
 * out to the threads (analysis-shard.c). */
static void
node(const char *tmp, uint64_t n)
{
	char path[512], *pv[1] = { path };

	snprintf(path, sizeof(path), "%s/bench-report-node%d.trace", tmp,
	    (int)getpid());
	jitter = true;
	write_trace_node(path, n, 4);
	jitter = false;
	read_alone(path);
	/* --jobs 8: 4 threads analyse (one a rank), 3 read. */
	multi_run(pv, 1, false, "1 node file (4 ranks)", 4);
	multi_run(pv, 1, true, "1 node file (4 ranks)", 4);
	unlink(path);
}

int
main(int argc, char **argv)
{
	static const uint64_t sizes[] = { 1000000, 4000000 };
	static const uint64_t ex_sizes[] = { 100000, 1000000 };
	const char *tmp = getenv("TMPDIR");
	char path[512];
	bool only;

	if (tmp == NULL || *tmp == '\0')
		tmp = "/tmp";
	/* bench-report --write FILE N [RANK WORLD]: only write the workload
	 * (for profiling msptictl on it; BENCH_JITTER=1: jittered). */
	/* bench-report --write-node FILE N RANKS: one node's file. */
	if (argc >= 5 && strcmp(argv[1], "--write-node") == 0) {
		jitter = true;
		write_trace_node(argv[2], strtoull(argv[3], NULL, 10),
		    atoi(argv[4]));
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "--write") == 0) {
		jitter = getenv("BENCH_JITTER") != NULL;
		/* Ranks written one per run jitter apart, as multi()'s do. */
		if (argc >= 6)
			jitter_state += 0x632be59bd9b4e019ull *
			    (uint64_t)atoi(argv[4]);
		write_trace_rank(argv[2], strtoull(argv[3], NULL, 10),
		    argc >= 6 ? atoi(argv[4]) : 0, argc >= 6 ? atoi(argv[5]) :
		    1);
		return 0;
	}
	/* BENCH_EXPORT_ONLY=1 (or =chrome, perfetto, csv: that one): the
	 * export figures alone (for profiling); =jobs: the multi-file and
	 * many-rank figures; =ranks: the many-rank one. */
	only = getenv("BENCH_EXPORT_ONLY") != NULL;
	for (size_t i = 0; i < 2 && !only; i++)
		direct(sizes[i]);
	if (!only) {
		jitter = true;
		direct(sizes[1]);
		jitter = false;
	}
	for (size_t i = 0; i < 2 && !only; i++) {
		snprintf(path, sizeof(path), "%s/bench-report-%d-%llu.trace",
		    tmp, (int)getpid(), (unsigned long long)sizes[i]);
		from_file(path, sizes[i], false);
	}
	/* The same with times that vary as a real capture's do: the trace's
	 * delta coding makes the regular workload compress far better than
	 * real traces do, so this is the figure to read. */
	for (int rep = 0; rep < 2 && !only; rep++) {
		jitter = true;
		snprintf(path, sizeof(path), "%s/bench-report-j-%d.trace",
		    tmp, (int)getpid());
		from_file(path, sizes[1], false);
		jitter = false;
	}
	if (!only || strcmp(getenv("BENCH_EXPORT_ONLY"), "jobs") == 0) {
		printf("(report threads: %ld online CPUs; the files have "
		    "jittered times)\n", sysconf(_SC_NPROCESSORS_ONLN));
		multi(tmp, 1, 4000000);
		multi(tmp, 4, 1000000);
		node(tmp, 4000000);
	}
	if (!only || strcmp(getenv("BENCH_EXPORT_ONLY"), "jobs") == 0 ||
	    strcmp(getenv("BENCH_EXPORT_ONLY"), "ranks") == 0)
		many_ranks(1024, 100);
	for (size_t i = 0; i < 2 && (!only ||
	    (strcmp(getenv("BENCH_EXPORT_ONLY"), "jobs") != 0 &&
	    strcmp(getenv("BENCH_EXPORT_ONLY"), "ranks") != 0)); i++) {
		snprintf(path, sizeof(path), "%s/bench-report-ex-%d-%llu.trace",
		    tmp, (int)getpid(), (unsigned long long)ex_sizes[i]);
		from_file(path, ex_sizes[i], true);
	}
	return 0;
}

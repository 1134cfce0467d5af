/*
 * Partial results of the analysis engine: per-input partials merged in
 * order print exactly what one pass over all the input prints (every
 * table, text and JSON, and the warnings), through memory and through the
 * wire format; a damaged or forged partial is refused with a one-line
 * reason and never crashes the reader.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "record.h"
#include "trace.h"

#define T0	1700000000000000000ull
#define US	1000ull
#define NRANK	4

/* String ids of every source (the same names, on purpose). */
static const char *const names[] = { NULL, "step", "MatMul", "AI_CORE",
    "HcclAllReduce", "comm0", "aclrtLaunchKernel", "Add", "AI_VECTOR",
    "AI_CPU", "dataload", "MatMulV2", "HcclBroadcast", "job1", "train",
    "comm1", "HcclSend" };

/* Where feed's records go: a direct source, a trace file, or (mem)
 * memory, for write_node to interleave. */
struct sink {
	struct analysis_source	*src;
	struct trace_writer	*w;
	uint64_t		 losses[LOSS_STAGE_MAX];
	bool			 mem;
	uint8_t			*buf;
	size_t			 len, cap;
};

static void
add(struct sink *k, struct rec_hdr *h)
{
	if (k->mem) {
		if (k->len + h->size > k->cap) {
			k->cap = k->cap ? 2 * k->cap : 4096;
			k->buf = realloc(k->buf, k->cap);
			ck_assert_ptr_nonnull(k->buf);
		}
		memcpy(k->buf + k->len, h, h->size);
		k->len += h->size;
	} else if (k->src != NULL)
		ck_assert_int_eq(analysis_source_add(k->src, h), 0);
	else
		ck_assert_msg(trace_writer_add(k->w, h) == 0, "write type %u",
		    h->type);
}

/*
 * One rank's records: steps, kernels launched by an API (the same kernel
 * name with another core type on rank 2, a kernel named like the
 * collective on ranks 1 and 3, whose first collective launch on rank 3
 * comes before its own kernel of that name), collectives on one
 * communicator whose end times agree across ranks up to a host clock skew, memcpy, memory, a data
 * loading range, and losses.
 */
static void
feed_to(struct sink *src, int r)
{
	uint32_t pid = 100u + (uint32_t)r;
	int64_t skew = r >= 2 ? 3000 * (int64_t)US : 0;	/* other host */
	uint64_t corr = 1, losses[LOSS_STAGE_MAX] = { 0 };
	struct rec_process p;

	for (uint32_t i = 1; i < sizeof(names) / sizeof(names[0]); i++) {
		uint32_t id;

		if (src->mem)
			continue;	/* the file's, in this order */
		if (src->src != NULL)
			ck_assert_int_eq(analysis_source_string(src->src, i,
			    names[i]), 0);
		else {
			ck_assert_int_eq(trace_writer_intern(src->w, names[i],
			    strlen(names[i]), &id), 0);
			ck_assert_uint_eq(id, i);
		}
	}
	REC_INIT(&p, REC_PROCESS, 0);
	p.pid = pid;
	p.rank = r;
	p.local_rank = r % 2;
	p.world_size = NRANK;
	p.job_id = 13;
	p.exe_id = 14;
	add(src, &p.hdr);
	for (int st = 0; st < 6; st++) {
		uint64_t b = T0 + (uint64_t)((int64_t)st * 2000 * (int64_t)US +
		    skew);
		uint64_t work = (uint64_t)(r == 1 ? 900 : 500) * US;
		struct rec_marker m;
		struct rec_api api;
		struct rec_kernel k;
		struct rec_communication c;
		struct rec_memcpy mc;
		struct rec_memory mem;

		REC_INIT(&m, REC_MARKER, 0);
		m.pid = pid;
		m.timestamp = b;
		m.id = (uint64_t)st + 1;
		m.name_id = 1;
		m.flag = 2u;
		add(src, &m.hdr);
		if (st == 2) {		/* data loading, 50 us */
			m.id = 1000;
			m.name_id = 10;
			m.timestamp = b + 1 * US;
			add(src, &m.hdr);
			m.flag = 4u;
			m.timestamp = b + 51 * US;
			add(src, &m.hdr);
			m.flag = 2u;
		}
		for (int j = 0; j < 3; j++) {
			uint64_t ks = b + (uint64_t)(10 + j * 200) * US;

			REC_INIT(&api, REC_API, 0);
			api.kind = 3;
			api.pid = pid;
			api.start = ks - 8 * US;
			api.end = ks - (uint64_t)(2 + j + r) * US;
			api.name_id = 6;
			api.correlation_id = corr;
			add(src, &api.hdr);
			REC_INIT(&k, REC_KERNEL, 0);
			k.pid = pid;
			k.start = ks;
			k.end = ks + work / 3 + (uint64_t)(j * 7 + st) * US;
			k.name_id = ((r == 3 && st > 0) || r == 1) && j == 2 ?
			    4 : (j == 1 ? 7 : 2);
			k.type_id = j == 1 ? 8 : (r == 2 ? 9 : 3);
			k.correlation_id = corr++;
			add(src, &k.hdr);
		}
		/* A kernel whose name the trace never defined (a file's
		 * writer refuses that: no name there). */
		REC_INIT(&k, REC_KERNEL, 0);
		k.pid = pid;
		k.start = b + 640 * US;
		k.end = b + 650 * US;
		k.name_id = src->src != NULL ? 99 : 0;
		k.type_id = 3;
		add(src, &k.hdr);
		REC_INIT(&c, REC_COMMUNICATION, 0);
		c.pid = pid;
		c.start = b + (uint64_t)(r == 1 ? 1000 : 700) * US;
		c.end = b + 1500 * US;
		c.name_id = st % 3 == 2 ? 12 : 4;
		c.comm_name_id = 5;
		c.count = 1u << (20 + r);
		c.data_type = 0;
		c.correlation_id = corr;
		add(src, &c.hdr);
		REC_INIT(&api, REC_API, 0);
		api.kind = 3;
		api.pid = pid;
		api.start = c.start - 5 * US;
		api.end = c.start - 1 * US;
		api.name_id = 6;
		api.correlation_id = corr++;
		add(src, &api.hdr);
		REC_INIT(&mc, REC_MEMCPY, 0);
		mc.pid = pid;
		mc.start = b + 1600 * US;
		mc.end = b + 1650 * US;
		mc.copy_kind = 2;
		mc.bytes = 1000u + (uint64_t)r;
		add(src, &mc.hdr);
		REC_INIT(&mem, REC_MEMORY, 0);
		mem.pid = pid;
		mem.device = (uint32_t)(r % 2);
		mem.start = mem.end = b + 1700 * US;
		mem.bytes = (uint64_t)(st + 1 + r) << 20;
		mem.op = st % 2;	/* alloc, free, ... */
		add(src, &mem.hdr);
		m.flag = 4u;
		m.name_id = 1;
		m.id = (uint64_t)st + 1;
		m.timestamp = b + 1900 * US;
		add(src, &m.hdr);
	}
	if (r == 2) {
		losses[1] = 7;
		if (src->src != NULL)
			analysis_source_losses(src->src, losses);
		memcpy(src->losses, losses, sizeof(losses));
	}
}

static void
feed(struct analysis_source *src, int r)
{
	struct sink k = { .src = src };

	feed_to(&k, r);
}

/* Rank r's records as a trace file at path (its losses in the footer). */
static void
write_rank(const char *path, int r)
{
	struct trace_header h;
	struct trace_footer ft;
	struct sink k = { 0 };
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	memset(&h, 0, sizeof(h));
	h.hostname = r >= 2 ? "h2" : "h1";
	h.producer = "check_analysis_partial";
	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &k.w), 0);
	feed_to(&k, r);
	memset(&ft, 0, sizeof(ft));
	memcpy(ft.losses, k.losses, sizeof(ft.losses));
	ck_assert_int_eq(trace_writer_close(k.w, &ft, NULL), 0);
	ck_assert_int_eq(close(fd), 0);
}

/* Every table as JSON and as text, and the warnings, in one string. */
static char *
dump(struct analysis *a)
{
	char *buf = NULL;
	size_t len = 0, nw;
	FILE *f = open_memstream(&buf, &len);
	const char *const *w;

	ck_assert_int_eq(analysis_run(a), 0);
	for (int s = 0; s < ANALYSIS_SECTION_MAX; s++) {
		fprintf(f, "== %s\n", analysis_section_name(s));
		ck_assert_int_eq(table_print(analysis_table(a, s), TABLE_JSON,
		    f), 0);
		ck_assert_int_eq(analysis_print_text(a, s, f), 0);
	}
	w = analysis_warnings(a, &nw);
	for (size_t i = 0; i < nw; i++)
		fprintf(f, "warning: %s\n", w[i]);
	fclose(f);
	return buf;
}

static struct analysis *
one_pass(void)
{
	struct analysis *a = analysis_new(NULL);

	for (int r = 0; r < NRANK; r++) {
		char name[32];

		snprintf(name, sizeof(name), "rank%d", r);
		feed(analysis_source_new(a, name, r >= 2 ? "h2" : "h1"), r);
	}
	return a;
}

static struct analysis *
part(int r)
{
	struct analysis *a = analysis_new(NULL);
	char name[32];

	snprintf(name, sizeof(name), "rank%d", r);
	feed(analysis_source_new(a, name, r >= 2 ? "h2" : "h1"), r);
	return a;
}

/* Encodes part r. */
static void *
wire(int r, size_t *len)
{
	struct analysis *a = part(r);
	void *buf;

	ck_assert_int_eq(analysis_partial_encode(a, &buf, len), 0);
	analysis_free(a);
	return buf;
}

START_TEST(test_merge_equals_one_pass)
{
	struct analysis *a = one_pass(), *m = analysis_new(NULL);
	char *want = dump(a), *got;

	/* The fixture exercises what merging must get right. */
	ck_assert_ptr_nonnull(strstr(want, "\"Slow Votes\":6"));
	ck_assert_ptr_nonnull(strstr(want, "\"Aligned\":\"yes\""));
	ck_assert_ptr_nonnull(strstr(want, "records lost at agent_ring"));
	for (int r = 0; r < NRANK; r++) {
		struct analysis *p = part(r);

		ck_assert_int_eq(analysis_merge(m, p), 0);
		analysis_free(p);
	}
	got = dump(m);
	ck_assert_str_eq(got, want);
	free(got);
	analysis_free(m);
	/* Merging merged partials ((0+1)+(2+3)) is the same again. */
	m = analysis_new(NULL);
	for (int h = 0; h < 2; h++) {
		struct analysis *g = part(2 * h), *p = part(2 * h + 1);

		ck_assert_int_eq(analysis_merge(g, p), 0);
		analysis_free(p);
		ck_assert_int_eq(analysis_merge(m, g), 0);
		analysis_free(g);
	}
	got = dump(m);
	ck_assert_str_eq(got, want);
	free(got);
	analysis_free(m);
	free(want);
	analysis_free(a);
}
END_TEST

START_TEST(test_wire_equals_one_pass)
{
	struct analysis *a = one_pass(), *m = analysis_new(NULL);
	char *want = dump(a), *got, err[256];
	unsigned char *all = NULL;
	size_t nall = 0, off = 0;

	/* Concatenated partials, as a node sends them. */
	for (int r = 0; r < NRANK; r++) {
		size_t len;
		void *b = wire(r, &len);

		/* Bounded: a few hundred bytes per step of a rank here. */
		ck_assert_uint_lt(len, 16384);
		all = realloc(all, nall + len);
		memcpy(all + nall, b, len);
		nall += len;
		free(b);
	}
	while (off < nall) {
		size_t used = 0;

		ck_assert_msg(analysis_partial_decode(m, all + off, nall - off,
		    &used, err, sizeof(err)) == 0, "decode: %s", err);
		off += used;
	}
	ck_assert_uint_eq(analysis_partial_ranks(m), NRANK);
	got = dump(m);
	ck_assert_str_eq(got, want);
	free(got);
	analysis_free(m);
	free(all);
	free(want);
	analysis_free(a);
}
END_TEST

/* Decoding then encoding again gives the same bytes. */
START_TEST(test_wire_roundtrip)
{
	size_t len, len2;
	void *b = wire(3, &len), *b2;
	struct analysis *m = analysis_new(NULL);
	char err[256];

	ck_assert_int_eq(analysis_partial_decode(m, b, len, NULL, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(analysis_partial_encode(m, &b2, &len2), 0);
	ck_assert_uint_eq(len, len2);
	ck_assert_int_eq(memcmp(b, b2, len), 0);
	free(b);
	free(b2);
	analysis_free(m);
}
END_TEST

static uint64_t
fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* Rewrites the checksum so that the reader's own checks are reached. */
static void
reseal(unsigned char *b, size_t len)
{
	uint64_t h = fnv(b + 13, len - 21);

	for (int i = 0; i < 8; i++)
		b[len - 8 + (size_t)i] = (unsigned char)(h >> (8 * i));
}

static void
expect_bad(const unsigned char *b, size_t len, const char *what)
{
	struct analysis *m = analysis_new(NULL);
	char err[256] = "";
	int rc = analysis_partial_decode(m, b, len, NULL, err, sizeof(err));

	ck_assert_msg(rc == -EBADMSG, "%s: accepted (%d)", what, rc);
	ck_assert_msg(*err && strchr(err, '\n') == NULL, "%s: reason '%s'",
	    what, err);
	/* Nothing of it was merged. */
	ck_assert_uint_eq(analysis_partial_ranks(m), 0);
	analysis_free(m);
}

START_TEST(test_corrupt_rejected)
{
	size_t len;
	unsigned char *b = wire(1, &len), *c = malloc(len);
	struct analysis_opts o;
	struct analysis *m;
	char err[256];
	unsigned seed = 1;

	memcpy(c, b, len);
	c[0] ^= 1;
	expect_bad(c, len, "magic");
	memcpy(c, b, len);
	c[8] = 99;
	expect_bad(c, len, "version");
	expect_bad(b, len - 1, "truncated");
	expect_bad(b, 10, "short");
	/* Any flipped payload byte: the checksum. */
	for (size_t i = 13; i < len; i += 7) {
		memcpy(c, b, len);
		c[i] ^= 0x40;
		expect_bad(c, len, "flipped byte");
	}
	/* Forged payloads with a valid checksum: the field checks.  Cutting
	 * the payload short anywhere is always caught. */
	for (size_t cut = 13; cut < len - 8; cut += 5) {
		unsigned char *f = malloc(cut + 8);

		memcpy(f, b, cut);
		f[9] = (unsigned char)(cut - 13);
		f[10] = (unsigned char)((cut - 13) >> 8);
		f[11] = f[12] = 0;
		reseal(f, cut + 8);
		expect_bad(f, cut + 8, "cut payload");
		free(f);
	}
	/* Random bytes: refused or accepted, never a crash (ASan). */
	for (int t = 0; t < 2000; t++) {
		memcpy(c, b, len);
		for (int k = 0; k < 3; k++)
			c[13 + (size_t)rand_r(&seed) % (len - 21)] =
			    (unsigned char)rand_r(&seed);
		reseal(c, len);
		m = analysis_new(NULL);
		if (analysis_partial_decode(m, c, len, NULL, err,
		    sizeof(err)) == 0)
			ck_assert_int_eq(analysis_run(m), 0);
		analysis_free(m);
	}
	/* Made with other options: refused, not silently merged. */
	analysis_opts_init(&o);
	o.step_marker = "iteration";
	m = analysis_new(&o);
	ck_assert_int_eq(analysis_partial_decode(m, b, len, NULL, err,
	    sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "step-marker"));
	analysis_free(m);
	free(b);
	free(c);
}
END_TEST

/* msptictl report's path (each file its own partial, in threads, merged
 * in order) prints what one pass over the same files prints. */
START_TEST(test_files_merged_equal_one_pass)
{
	char dir[] = "/tmp/check-partial-XXXXXX", paths[NRANK][64];
	char *pv[NRANK + 1], *want, *got;
	struct analysis_opts o;
	struct analysis *a;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (int r = 0; r < NRANK; r++) {
		snprintf(paths[r], sizeof(paths[r]), "%s/rank%d.trace", dir, r);
		write_rank(paths[r], r);
		pv[r] = paths[r];
	}
	pv[NRANK] = (char *)"/nonexistent/trace";	/* warned, in order */
	analysis_opts_init(&o);
	a = analysis_new(&o);
	ck_assert_uint_eq(analysis_add_files(a, pv, NRANK + 1), NRANK);
	want = dump(a);
	analysis_free(a);
	ck_assert_ptr_nonnull(strstr(want, "records lost at agent_ring"));
	ck_assert_ptr_nonnull(strstr(want, "cannot read"));
	for (unsigned j = 1; j <= 4; j += 3) {
		o.jobs = j;
		a = analysis_new(&o);
		ck_assert_uint_eq(analysis_add_files_merged(a, pv, NRANK + 1),
		    NRANK);
		got = dump(a);
		ck_assert_msg(strcmp(got, want) == 0, "--jobs %u differs", j);
		free(got);
		analysis_free(a);
	}
	free(want);
	for (int r = 0; r < NRANK; r++)
		unlink(paths[r]);
	rmdir(dir);
}
END_TEST

/* xorshift64 */
static uint64_t
rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * One node's file: the four ranks' records (feed_to) interleaved in runs
 * of 1 to 24 records at random, chunks cut at random, and between them
 * what decides which thread analyses a record: records of pid 0 (the
 * process of the record before), a process's first record with pid 0,
 * host launches, device-side markers, losses, an agent's leave naming
 * its steps, a clock model with device-clock kernels after it, a string
 * defined mid-file, device memory of two ranks on one device, and a
 * fifth process that turns up past the first chunk.  late_ranks: the first
 * chunk holds rank 0's records alone (the other ranks registered later).
 */
static void
write_node(const char *path, uint64_t seed, bool late_ranks)
{
	struct trace_header h;
	struct trace_footer ft;
	struct sink k = { 0 }, r[NRANK];
	size_t at[NRANK] = { 0 };
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	uint32_t id, late = 0, leave = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), left;

	ck_assert_int_ge(fd, 0);
	memset(&h, 0, sizeof(h));
	h.hostname = "node";
	h.producer = "check_analysis_partial";
	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &k.w), 0);
	for (uint32_t i = 1; i < sizeof(names) / sizeof(names[0]); i++) {
		ck_assert_int_eq(trace_writer_intern(k.w, names[i],
		    strlen(names[i]), &id), 0);
		ck_assert_uint_eq(id, i);
	}
	memset(r, 0, sizeof(r));
	for (int i = 0; i < NRANK; i++) {
		r[i].mem = true;
		feed_to(&r[i], i);
	}
	{
		/* A process first seen through a record of pid 0. */
		struct rec_api api;

		REC_INIT(&api, REC_API, 0);
		api.kind = 3;
		api.start = T0 - 50 * US;
		api.end = T0 - 49 * US;
		api.name_id = 6;
		add(&k, &api.hdr);
	}
	if (late_ranks) {
		for (int c = 0; c < 40 && at[0] < r[0].len; c++) {
			const struct rec_hdr *rh = (const void *)(r[0].buf +
			    at[0]);

			add(&k, (struct rec_hdr *)(uintptr_t)rh);
			at[0] += rh->size;
		}
		ck_assert_int_eq(trace_writer_flush(k.w), 0);
	}
	for (int n = 0;; n++) {
		int i = (int)(rnd(&x) % NRANK), run = 1 + (int)(rnd(&x) % 24);
		uint64_t t = T0 + (uint64_t)n * 7 * US;

		for (left = 0; left < NRANK && at[(i + left) % NRANK] ==
		    r[(i + left) % NRANK].len; left++)
			;
		if (left == NRANK)
			break;
		i = (i + left) % NRANK;
		for (int c = 0; c < run && at[i] < r[i].len; c++) {
			const struct rec_hdr *rh = (const void *)(r[i].buf +
			    at[i]);

			add(&k, (struct rec_hdr *)(uintptr_t)rh);
			at[i] += rh->size;
		}
		switch (rnd(&x) % 16) {
		case 0: {	/* pid 0: rank i's (the last looked up) */
			struct rec_kernel kr;

			REC_INIT(&kr, REC_KERNEL, 0);
			kr.start = t;
			kr.end = t + 3 * US;
			kr.name_id = 2;
			kr.type_id = 3;
			add(&k, &kr.hdr);
			break;
		}
		case 1: {	/* device memory, pid 0, on rank 0's device */
			struct rec_memory mem;

			REC_INIT(&mem, REC_MEMORY, 0);
			mem.start = mem.end = t;
			mem.bytes = (rnd(&x) % 64 + 1) << 20;
			mem.op = (uint16_t)(rnd(&x) % 2);
			add(&k, &mem.hdr);
			break;
		}
		case 2: {	/* a host launch: counted, no process */
			struct rec_kernel kr;

			REC_INIT(&kr, REC_KERNEL, REC_F_HOST_LAUNCH);
			kr.pid = 100u + (uint32_t)(rnd(&x) % NRANK);
			kr.start = t;
			kr.end = t + US;
			kr.name_id = 7;
			kr.type_id = 8;
			add(&k, &kr.hdr);
			break;
		}
		case 3: {	/* a device-side copy of a marker */
			struct rec_marker m;

			REC_INIT(&m, REC_MARKER, 0);
			m.pid = 100u + (uint32_t)(rnd(&x) % NRANK);
			m.timestamp = t;
			m.source_kind = 1;
			m.name_id = 1;
			m.flag = 2;
			add(&k, &m.hdr);
			break;
		}
		case 4: {
			struct rec_loss l;

			REC_INIT(&l, REC_LOSS, 0);
			l.timestamp = t;
			l.count = 3;
			l.stage = 1;
			l.pid = 100u + (uint32_t)(rnd(&x) % NRANK);
			add(&k, &l.hdr);
			break;
		}
		case 5: {	/* a clock model, then device-clock work */
			struct rec_clock_sync cs;
			struct rec_kernel kr;

			REC_INIT(&cs, REC_CLOCK_SYNC, 0);
			cs.host_ref_ns = T0 + (rnd(&x) % 1000) * US;
			cs.device_ref_ns = 5000000;
			cs.drift = 1e-6;
			cs.device = 0;
			add(&k, &cs.hdr);
			REC_INIT(&kr, REC_KERNEL, REC_F_DEVICE_CLOCK);
			kr.pid = 100u + (uint32_t)i;
			kr.start = 5000000 + (rnd(&x) % 1000) * US;
			kr.end = kr.start + 20 * US;
			kr.name_id = 11;
			kr.type_id = 3;
			add(&k, &kr.hdr);
			break;
		}
		case 6: {	/* a name defined mid-file, and a fifth process */
			struct rec_kernel kr;

			if (late == 0)
				ck_assert_int_eq(trace_writer_intern(k.w,
				    "LateOp", 6, &late), 0);
			REC_INIT(&kr, REC_KERNEL, 0);
			kr.pid = n % 2 ? 300 : 100u + (uint32_t)i;
			kr.start = t;
			kr.end = t + 9 * US;
			kr.name_id = late;
			kr.type_id = 3;
			add(&k, &kr.hdr);
			break;
		}
		case 8: {	/* launches of APIs and collectives that are
				   no kernel's: first seen in rank order */
			struct rec_api api;
			struct rec_communication c;
			uint64_t corr = 1000000 + (uint64_t)n;

			REC_INIT(&api, REC_API, 0);
			api.kind = 3;
			api.pid = 100u + (uint32_t)i;
			api.start = t;
			api.end = t + 2 * US;
			api.name_id = (uint32_t)(13 + i);
			api.correlation_id = corr;
			add(&k, &api.hdr);
			REC_INIT(&c, REC_COMMUNICATION, 0);
			c.pid = api.pid;
			c.start = t + 3 * US;
			c.end = t + 5 * US;
			c.name_id = (uint32_t)(13 + (i + 1) % NRANK);
			c.comm_name_id = 15;
			c.count = 8;
			c.correlation_id = corr;
			add(&k, &c.hdr);
			break;
		}
		case 7: {	/* an agent leaving a steps window */
			struct rec_session se;

			if (leave == 0)
				ck_assert_int_eq(trace_writer_intern(k.w,
				    "left; steps 3..5", 16, &leave), 0);
			REC_INIT(&se, REC_SESSION, SESSION_EV_AGENT_LEAVE);
			se.timestamp = t;
			se.session_id = 1;
			se.pid = 100u + (uint32_t)(rnd(&x) % NRANK);
			se.detail_id = leave;
			add(&k, &se.hdr);
			break;
		}
		default:
			break;
		}
		if (rnd(&x) % 8 == 0)
			ck_assert_int_eq(trace_writer_flush(k.w), 0);
	}
	for (int i = 0; i < NRANK; i++)
		free(r[i].buf);
	memset(&ft, 0, sizeof(ft));
	ck_assert_int_eq(trace_writer_close(k.w, &ft, NULL), 0);
	ck_assert_int_eq(close(fd), 0);
}

/* One node's file analysed by 1 to 4 threads (its processes dealt out
 * among them, jobs 2 to 7): the same report, and the same partial, byte
 * for byte. */
START_TEST(test_node_file_threads)
{
	char path[] = "/tmp/check-partial-node-XXXXXX";
	int fd = mkstemp(path);
	unsigned used = 0;

	ck_assert_int_ge(fd, 0);
	close(fd);
	for (uint64_t seed = 1; seed <= 12; seed++) {
		struct analysis_opts o;
		struct analysis *a;
		struct analysis_totals t;
		char *want, *got;
		void *wb, *gb;
		size_t wl, gl;

		write_node(path, seed, false);
		analysis_opts_init(&o);
		o.jobs = 1;
		a = analysis_new(&o);
		ck_assert_int_eq(analysis_add_file(a, path), 0);
		ck_assert_int_eq(analysis_partial_encode(a, &wb, &wl), 0);
		analysis_free(a);
		a = analysis_new(&o);
		ck_assert_int_eq(analysis_add_file(a, path), 0);
		analysis_get_totals(a, &t);
		ck_assert_uint_eq(t.threads, 1);
		want = dump(a);
		analysis_free(a);
		/* The fixture reaches what the threads must agree on. */
		ck_assert_ptr_nonnull(strstr(want, "LateOp"));
		ck_assert_ptr_nonnull(strstr(want, "AI_CPU"));
		/* jobs 2, 3, 5, 7: 1, 2, 3, 4 threads analysing. */
		for (unsigned j = 2; j <= 7; j += j < 3 ? 1 : 2) {
			o.jobs = j;
			a = analysis_new(&o);
			ck_assert_int_eq(analysis_add_file(a, path), 0);
			analysis_get_totals(a, &t);
			ck_assert_uint_le(t.threads, j);
			if (t.threads > used)
				used = t.threads;
			got = dump(a);
			ck_assert_msg(strcmp(got, want) == 0, "seed %llu, %u "
			    "threads (jobs %u) differ from one", (unsigned long
			    long)seed, t.threads, j);
			free(got);
			analysis_free(a);
			a = analysis_new(&o);
			ck_assert_int_eq(analysis_add_file(a, path), 0);
			ck_assert_int_eq(analysis_partial_encode(a, &gb, &gl),
			    0);
			ck_assert_msg(gl == wl && memcmp(gb, wb, wl) == 0,
			    "seed %llu, jobs %u: the partial differs",
			    (unsigned long long)seed, j);
			free(gb);
			analysis_free(a);
		}
		free(wb);
		free(want);
	}
	/* Several threads did analyse the file. */
	ck_assert_uint_eq(used, 4);
	unlink(path);
}
END_TEST

/* A node's file whose first chunk holds one rank (the others registered
 * later) still gets a thread a process up to what --jobs allows, with
 * the report one thread gives; a file of one process gets one. */
START_TEST(test_node_file_late_ranks)
{
	char path[] = "/tmp/check-partial-node-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	for (uint64_t seed = 1; seed <= 3; seed++) {
		struct analysis_opts o;
		struct analysis *a;
		struct analysis_totals t;
		char *want, *got;

		write_node(path, seed, true);
		analysis_opts_init(&o);
		o.jobs = 1;
		a = analysis_new(&o);
		ck_assert_int_eq(analysis_add_file(a, path), 0);
		want = dump(a);
		analysis_free(a);
		/* jobs 3 and 7: 2 and 4 analysing threads. */
		for (unsigned j = 3; j <= 7; j += 4) {
			o.jobs = j;
			a = analysis_new(&o);
			ck_assert_int_eq(analysis_add_file(a, path), 0);
			analysis_get_totals(a, &t);
			ck_assert_uint_eq(t.threads, j == 3 ? 2 : 4);
			got = dump(a);
			ck_assert_msg(strcmp(got, want) == 0, "seed %llu, jobs "
			    "%u differs from one thread", (unsigned long
			    long)seed, j);
			free(got);
			analysis_free(a);
		}
		free(want);
	}
	/* One process: one thread analyses it, whatever --jobs says. */
	write_rank(path, 1);
	for (unsigned j = 1; j <= 7; j += 6) {
		struct analysis_opts o;
		struct analysis *a;
		struct analysis_totals t;

		analysis_opts_init(&o);
		o.jobs = j;
		a = analysis_new(&o);
		ck_assert_int_eq(analysis_add_file(a, path), 0);
		analysis_get_totals(a, &t);
		ck_assert_uint_eq(t.threads, 1);
		analysis_free(a);
	}
	unlink(path);
}
END_TEST

/*
 * A long capture: rank r of 2 (hosts h1, h2) with NCOLL all-reduces on
 * comm0 carrying their seq, rank 1 arriving late by a few hundred ns in
 * a pattern of 5, ends together, and one send on comm1 without a seq
 * every 10th; a step every 4 all-reduces (22,500 of them).
 */
#define NCOLL	90000

static void
feed_long(struct analysis_source *src, int r, bool steps)
{
	uint32_t pid = 200u + (uint32_t)r;
	struct rec_process p;
	struct rec_marker m;
	struct rec_communication c;

	for (uint32_t i = 1; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_int_eq(analysis_source_string(src, i, names[i]), 0);
	REC_INIT(&p, REC_PROCESS, 0);
	p.pid = pid;
	p.rank = r;
	p.world_size = 2;
	ck_assert_int_eq(analysis_source_add(src, &p.hdr), 0);
	REC_INIT(&m, REC_MARKER, 0);
	m.pid = pid;
	m.name_id = 1;
	REC_INIT(&c, REC_COMMUNICATION, 0);
	c.pid = pid;
	c.count = 1u << 20;
	for (uint32_t k = 0; k < NCOLL; k++) {
		uint64_t b = T0 + (uint64_t)k * 10 * US;

		if (steps && k % 4 == 0) {
			if (k > 0) {
				m.flag = 4u;
				m.timestamp = b - 1;
				ck_assert_int_eq(analysis_source_add(src,
				    &m.hdr), 0);
			}
			m.flag = 2u;
			m.id = k / 4 + 1;
			m.timestamp = b;
			ck_assert_int_eq(analysis_source_add(src, &m.hdr), 0);
		}
		c.name_id = 4;
		c.comm_name_id = 5;
		c.seq = k + 1;
		c.start = b + 100 + (r == 1 ? (uint64_t)(k % 5) * 200 : 0);
		c.end = b + 8 * US;
		ck_assert_int_eq(analysis_source_add(src, &c.hdr), 0);
		if (k % 10 == 9) {
			c.name_id = 16;
			c.comm_name_id = 15;
			c.seq = 0;
			c.start = b + 8 * US + 100;
			c.end = b + 9 * US;
			ck_assert_int_eq(analysis_source_add(src, &c.hdr), 0);
		}
	}
	m.flag = 4u;
	m.timestamp = T0 + (uint64_t)NCOLL * 10 * US;
	if (steps)
		ck_assert_int_eq(analysis_source_add(src, &m.hdr), 0);
}

static struct analysis *
long_part(const struct analysis_opts *o, int r, bool steps)
{
	struct analysis *a = analysis_new(o);

	feed_long(analysis_source_new(a, r ? "rank1" : "rank0",
	    r ? "h2" : "h1"), r, steps);
	return a;
}

/* The report's options in o; ox the same without caps (every one kept,
 * as before sampling). */
static void
long_opts(struct analysis_opts *o, struct analysis_opts *ox)
{
	analysis_opts_init(o);
	o->coll_cap = ANALYSIS_COLL_CAP;
	o->step_cap = ANALYSIS_STEP_CAP;
	*ox = *o;
	ox->coll_cap = ox->step_cap = 0;
}

/* Every collective and step (options o, no caps): the analysis of both
 * ranks, and in len[r] the size of rank r's partial. */
static struct analysis *
long_exact(const struct analysis_opts *o, bool steps, size_t len[2])
{
	struct analysis *a = analysis_new(o);

	for (int r = 0; r < 2; r++) {
		struct analysis *p = long_part(o, r, steps);
		void *buf;

		feed_long(analysis_source_new(a, r ? "rank1" : "rank0",
		    r ? "h2" : "h1"), r, steps);
		ck_assert_int_eq(analysis_partial_encode(p, &buf, &len[r]), 0);
		free(buf);
		analysis_free(p);
	}
	ck_assert_int_eq(analysis_run(a), 0);
	return a;
}

/* The central report of both ranks with options o, and that of their
 * partials through the wire, which must be the same; each partial's size
 * in len[r]. */
static char *
long_both(const struct analysis_opts *o, bool steps, size_t len[2],
    struct analysis **ap)
{
	struct analysis *a = analysis_new(o), *m = analysis_new(o);
	char *want, *got, err[256];

	for (int r = 0; r < 2; r++)
		feed_long(analysis_source_new(a, r ? "rank1" : "rank0",
		    r ? "h2" : "h1"), r, steps);
	want = dump(a);
	for (int r = 0; r < 2; r++) {
		struct analysis *p = long_part(o, r, steps);
		void *buf;
		size_t used;

		ck_assert_int_eq(analysis_partial_encode(p, &buf, &len[r]), 0);
		ck_assert_msg(analysis_partial_decode(m, buf, len[r], &used,
		    err, sizeof(err)) == 0, "decode: %s", err);
		ck_assert_uint_eq(used, len[r]);
		free(buf);
		analysis_free(p);
	}
	got = dump(m);
	ck_assert_str_eq(got, want);
	free(got);
	analysis_free(m);
	*ap = a;
	return want;
}

/* The cell of table s in the row whose first cell is row, column col. */
static double
cell(struct analysis *a, enum analysis_section s, const char *row,
    const char *col)
{
	const struct table *t = analysis_table(a, s);
	size_t c;

	for (c = 0; strcmp(table_col(t, c), col) != 0; c++)
		ck_assert_str_ne(table_col(t, c), "");
	for (size_t i = 0; i < table_nrows(t); i++)
		if (strcmp(table_cell(t, i, 0, NULL), row) == 0)
			return strtod(table_cell(t, i, c, NULL), NULL);
	ck_abort_msg("no row %s", row);
	return 0;
}

/* Wait and transit of the sample within 3% of every collective's (rank
 * 0 waits 0..800 ns in turn). */
static void
long_close(struct analysis *a, struct analysis *x)
{
	double w = cell(a, ANALYSIS_COMM, "HcclAllReduce", "Wait Time(us)");
	double wx = cell(x, ANALYSIS_COMM, "HcclAllReduce", "Wait Time(us)");
	double t = cell(a, ANALYSIS_COMM, "HcclAllReduce",
	    "Transit Time(us)");
	double tx = cell(x, ANALYSIS_COMM, "HcclAllReduce",
	    "Transit Time(us)");

	ck_assert_double_eq_tol(wx, NCOLL * 0.4, 1e-6);
	ck_assert_msg(fabs(w - wx) <= 0.03 * wx, "wait %f, all %f", w, wx);
	ck_assert_msg(fabs(t - tx) <= 0.03 * tx, "transit %f, all %f", t, tx);
}

/*
 * Over the report's caps a rank's collectives and steps are sampled alike
 * on every rank: each rank's partial result stays under 1 MB (it was over
 * with every one), the distributed report (partials through the wire)
 * prints exactly what the central one prints, and the sampled counts,
 * wait, transit and step figures are those of every one.
 */
START_TEST(test_long_capture_bounded)
{
	struct analysis_opts o, ox;
	struct analysis *a, *x;
	size_t len[2], lx[2];
	char *want;

	long_opts(&o, &ox);
	want = long_both(&o, true, len, &a);
	x = long_exact(&ox, true, lx);
	for (int r = 0; r < 2; r++) {
		/* Every one would not fit; the sample does. */
		ck_assert_msg(lx[r] > 1048576, "unsampled %zu bytes", lx[r]);
		ck_assert_msg(len[r] <= 1048576 / 2, "sampled %zu bytes",
		    len[r]);
	}
	/* 22,500 steps (1 in 4 would do) holding 99,000 collectives (1 in
	 * 8): steps 8, 16, ... with all they hold; none outside steps. */
	ck_assert_msg(strstr(want, "steps sampled (a rank has over 8192 steps "
	    "or 16384 collectives in them): ") != NULL && strstr(want, "index "
	    "is a multiple of 8 (the same on every rank), each counted 8 "
	    "times;") != NULL, "%.2000s", want);
	ck_assert_ptr_null(strstr(want, "outside steps sampled"));
	free(want);
	/* Counts: 90000 and 9000 a rank, those of 2,812 of 22,500 steps
	 * counted 8 times each. */
	ck_assert_double_eq(cell(a, ANALYSIS_COMM, "HcclAllReduce", "Count"),
	    2.0 * 2812 * 4 * 8);
	ck_assert_double_eq_tol(cell(a, ANALYSIS_COMM, "HcclSend", "Count"),
	    2.0 * NCOLL / 10, 2.0 * NCOLL / 10 * 0.01);
	ck_assert_double_eq(cell(x, ANALYSIS_COMM, "HcclAllReduce", "Count"),
	    2.0 * NCOLL);
	long_close(a, x);
	/* Steps: every one counted, 1 in 8 shown (numbered 8, 16, ...)
	 * with exact figures, averages those of every step. */
	ck_assert_double_eq(cell(a, ANALYSIS_RANKS, "1", "Steps"),
	    NCOLL / 4);
	ck_assert_uint_eq(table_nrows(analysis_table(a, ANALYSIS_STEPS)),
	    2 * 2812);
	ck_assert_str_eq(table_cell(analysis_table(a, ANALYSIS_STEPS), 0, 1,
	    NULL), "8");
	ck_assert_uint_eq(table_nrows(analysis_table(x, ANALYSIS_STEPS)),
	    2 * NCOLL / 4);
	ck_assert_double_eq_tol(cell(a, ANALYSIS_RANKS, "0",
	    "Step Time Avg(us)"), cell(x, ANALYSIS_RANKS, "0",
	    "Step Time Avg(us)"), 1e-3);
	ck_assert_double_eq_tol(cell(a, ANALYSIS_RANKS, "0", "Wait Avg(us)"),
	    cell(x, ANALYSIS_RANKS, "0", "Wait Avg(us)"), 0.02);
	analysis_free(x);
	analysis_free(a);
}
END_TEST

/* A rank without steps: its collectives are sampled by key alike (1 in
 * 8 of each communicator), the two reports are the same, and the counts,
 * wait and transit those of every collective. */
START_TEST(test_long_nosteps_bounded)
{
	struct analysis_opts o, ox;
	struct analysis *a, *x;
	size_t len[2], lx[2];
	char *want;

	long_opts(&o, &ox);
	want = long_both(&o, false, len, &a);
	x = long_exact(&ox, false, lx);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(len[r] <= 1048576 / 4 && lx[r] > 1048576,
		    "sampled %zu bytes, all %zu", len[r], lx[r]);
	ck_assert_msg(strstr(want, "collectives outside steps sampled: 1 in 8 "
	    "instances") != NULL, "%.2000s", want);
	ck_assert_ptr_null(strstr(want, "steps sampled ("));
	free(want);
	ck_assert_double_eq(cell(a, ANALYSIS_COMM, "HcclAllReduce", "Count"),
	    2.0 * NCOLL);
	ck_assert_double_eq(cell(a, ANALYSIS_COMM, "HcclSend", "Count"),
	    2.0 * NCOLL / 10);
	long_close(a, x);
	analysis_free(x);
	analysis_free(a);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("analysis_partial");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_merge_equals_one_pass);
	tcase_add_test(tc, test_wire_equals_one_pass);
	tcase_add_test(tc, test_wire_roundtrip);
	tcase_add_test(tc, test_corrupt_rejected);
	tcase_add_test(tc, test_files_merged_equal_one_pass);
	tcase_add_test(tc, test_node_file_threads);
	tcase_add_test(tc, test_node_file_late_ranks);
	tcase_add_test(tc, test_long_capture_bounded);
	tcase_add_test(tc, test_long_nosteps_bounded);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/*
 * lib/analysis on constructed records: overlap, step breakdown, op and
 * launch statistics, memcpy bandwidth, memory peak, slow-rank verdict,
 * missing ranks and losses, advisor rules, and the bounded sweep.
 * Times are in ns; tables print us with 3 decimals, so every expected
 * value is exact.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "util.h"

#define US	1000ull		/* ns per us */
#define T0	1000000000000ull

static int
col_of(const struct table *t, const char *name)
{
	for (size_t c = 0; c < table_ncols(t); c++)
		if (strcmp(table_col(t, c), name) == 0)
			return (int)c;
	ck_abort_msg("no column '%s' in %s", name, table_name(t));
	return -1;
}

/* The cell of column col in the row whose column key equals val. */
static double
cell(struct analysis *a, enum analysis_section s, const char *key,
    const char *val, const char *col)
{
	const struct table *t = analysis_table(a, s);
	int k, c;

	ck_assert_ptr_nonnull(t);
	k = col_of(t, key);
	c = col_of(t, col);
	for (size_t r = 0; r < table_nrows(t); r++)
		if (strcmp(table_cell(t, r, (size_t)k, NULL), val) == 0)
			return strtod(table_cell(t, r, (size_t)c, NULL), NULL);
	ck_abort_msg("no row %s=%s in %s", key, val, table_name(t));
	return 0;
}

/* The step row (rank, step) of the steps table. */
static double
step_cell(struct analysis *a, int rank, int step, const char *col)
{
	const struct table *t = analysis_table(a, ANALYSIS_STEPS);
	int kr = col_of(t, "Rank"), ks = col_of(t, "Step"), c = col_of(t, col);

	for (size_t r = 0; r < table_nrows(t); r++)
		if (atoi(table_cell(t, r, (size_t)kr, NULL)) == rank &&
		    atoi(table_cell(t, r, (size_t)ks, NULL)) == step)
			return strtod(table_cell(t, r, (size_t)c, NULL), NULL);
	ck_abort_msg("no step row rank %d step %d", rank, step);
	return 0;
}

static bool
has_advice(struct analysis *a, const char *rule, const char *sev)
{
	size_t n;
	const struct analysis_advice *v = analysis_advice(a, &n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].rule, rule) == 0 &&
		    (sev == NULL || strcmp(v[i].severity, sev) == 0))
			return true;
	return false;
}

/* Record builders.  String ids: 1 step, 2 MatMul, 3 AI_CORE, 4 AllReduce,
 * 5 comm0, 6 aclrtLaunchKernel, 7 Add, 8 AI_VECTOR, 9 TopK, 10 AI_CPU,
 * 11 dataload, 12 aclrtMalloc, 13 aclrtSynchronizeStream. */
static struct analysis_source *
src_new(struct analysis *a, const char *host, uint32_t pid, int rank,
    int world)
{
	static const char *const s[] = { NULL, "step", "MatMul", "AI_CORE",
	    "HcclAllReduce", "comm0", "aclrtLaunchKernel", "Add", "AI_VECTOR",
	    "TopK", "AI_CPU", "dataload", "aclrtMalloc",
	    "aclrtSynchronizeStream" };
	struct analysis_source *src = analysis_source_new(a, "test", host);
	struct rec_process p;

	ck_assert_ptr_nonnull(src);
	for (uint32_t i = 1; i < sizeof(s) / sizeof(s[0]); i++)
		ck_assert_int_eq(analysis_source_string(src, i, s[i]), 0);
	if (rank >= 0) {
		REC_INIT(&p, REC_PROCESS, 0);
		p.pid = pid;
		p.rank = rank;
		p.local_rank = rank;
		p.world_size = world;
		ck_assert_int_eq(analysis_source_add(src, &p.hdr), 0);
	}
	return src;
}

static void
kernel(struct analysis_source *src, uint32_t pid, uint64_t s, uint64_t e,
    uint32_t name, uint32_t type, uint64_t corr)
{
	struct rec_kernel k;

	REC_INIT(&k, REC_KERNEL, 0);
	k.pid = pid;
	k.start = T0 + s;
	k.end = T0 + e;
	k.name_id = name;
	k.type_id = type;
	k.correlation_id = corr;
	ck_assert_int_eq(analysis_source_add(src, &k.hdr), 0);
}

/* A collective of count bytes; seq: its record's ordinal on the
 * communicator (0: none); corr: its launch's correlation id (0: none). */
static void
comm_launched(struct analysis_source *src, uint32_t pid, uint64_t s,
    uint64_t e, uint64_t count, uint32_t seq, uint64_t corr)
{
	struct rec_communication c;

	REC_INIT(&c, REC_COMMUNICATION, 0);
	c.pid = pid;
	c.start = T0 + s;
	c.end = T0 + e;
	c.name_id = 4;
	c.comm_name_id = 5;
	c.count = count;
	c.data_type = 0;		/* 1 byte */
	c.seq = seq;
	c.correlation_id = corr;
	ck_assert_int_eq(analysis_source_add(src, &c.hdr), 0);
}

static void
comm_seq(struct analysis_source *src, uint32_t pid, uint64_t s, uint64_t e,
    uint64_t count, uint32_t seq)
{
	comm_launched(src, pid, s, e, count, seq, 0);
}

static void
comm(struct analysis_source *src, uint32_t pid, uint64_t s, uint64_t e,
    uint64_t count)
{
	comm_seq(src, pid, s, e, count, 0);
}

static void
api(struct analysis_source *src, uint32_t pid, uint64_t s, uint64_t e,
    uint32_t name, uint64_t corr)
{
	struct rec_api r;

	REC_INIT(&r, REC_API, 0);
	r.pid = pid;
	r.start = T0 + s;
	r.end = T0 + e;
	r.name_id = name;
	r.correlation_id = corr;
	ck_assert_int_eq(analysis_source_add(src, &r.hdr), 0);
}

static void
marker(struct analysis_source *src, uint32_t pid, uint64_t ts, uint64_t id,
    uint32_t name, int start)
{
	struct rec_marker m;

	REC_INIT(&m, REC_MARKER, 0);
	m.pid = pid;
	m.timestamp = T0 + ts;
	m.id = id;
	m.name_id = name;
	m.flag = start ? 2u : 4u;
	ck_assert_int_eq(analysis_source_add(src, &m.hdr), 0);
}

static void
range(struct analysis_source *src, uint32_t pid, uint64_t s, uint64_t e,
    uint64_t id, uint32_t name)
{
	marker(src, pid, s, id, name, 1);
	marker(src, pid, e, id, name, 0);
}

static struct analysis *
run(struct analysis *a)
{
	ck_assert_int_eq(analysis_run(a), 0);
	return a;
}

/* An HCCL task of the HCCL layer (the step's communication when a
 * process has no msPTI COMMUNICATION record). */
static void
hccl(struct analysis_source *src, uint32_t pid, uint64_t s, uint64_t e)
{
	struct rec_hccl h;

	REC_INIT(&h, REC_HCCL, 0);
	h.pid = pid;
	h.start = T0 + s;
	h.end = T0 + e;
	h.name_id = 4;
	h.comm_name_id = 5;
	h.bandwidth = 1.0;
	ck_assert_int_eq(analysis_source_add(src, &h.hdr), 0);
}

/* Kernels that overlap and touch each other before a collective: compute
 * [0,60) [40,100) [100,120) and [150,250), the collective [80,180) (msPTI
 * COMMUNICATION when !h, else HCCL), step [0,300) (us).  Compute 220,
 * communication 100, overlapped 40 + 30, not overlapped 30, free 50.
 * The kernels that extend the open compute segment must extend its
 * unions with communication too. */
static void
overlap_run_case(int h)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	range(src, 7, 0, 300 * US, 1, 1);
	kernel(src, 7, 0, 60 * US, 2, 3, 0);
	kernel(src, 7, 40 * US, 100 * US, 2, 3, 0);
	kernel(src, 7, 100 * US, 120 * US, 2, 3, 0);
	if (h)
		hccl(src, 7, 80 * US, 180 * US);
	else
		comm(src, 7, 80 * US, 180 * US, 4096);
	kernel(src, 7, 150 * US, 250 * US, 2, 3, 0);
	run(a);
	ck_assert_double_eq(step_cell(a, 0, 1, "Computing(us)"), 220);
	ck_assert_double_eq(step_cell(a, 0, 1, "Communication(us)"), 100);
	ck_assert_double_eq(step_cell(a, 0, 1, "Overlapped(us)"), 70);
	ck_assert_double_eq(step_cell(a, 0, 1,
	    "Communication(Not Overlapped)(us)"), 30);
	ck_assert_double_eq(step_cell(a, 0, 1, "Free(us)"), 50);
	analysis_free(a);
}

/* compute [0,100) and [150,250), comm [80,180), step [0,300) (us):
 * compute 200, comm 100, overlapped 50, not overlapped 50, free 50. */
static void
overlap_case(int order)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	range(src, 7, 0, 300 * US, 1, 1);
	if (order == 0) {
		kernel(src, 7, 0, 100 * US, 2, 3, 0);
		comm(src, 7, 80 * US, 180 * US, 4096);
		kernel(src, 7, 150 * US, 250 * US, 2, 3, 0);
	} else {		/* completion order, devices first */
		kernel(src, 7, 150 * US, 250 * US, 2, 3, 0);
		kernel(src, 7, 0, 100 * US, 2, 3, 0);
		comm(src, 7, 80 * US, 180 * US, 4096);
	}
	run(a);
	ck_assert_double_eq(step_cell(a, 0, 1, "Step Time(us)"), 300);
	ck_assert_double_eq(step_cell(a, 0, 1, "Computing(us)"), 200);
	ck_assert_double_eq(step_cell(a, 0, 1, "Communication(us)"), 100);
	ck_assert_double_eq(step_cell(a, 0, 1, "Overlapped(us)"), 50);
	ck_assert_double_eq(step_cell(a, 0, 1,
	    "Communication(Not Overlapped)(us)"), 50);
	ck_assert_double_eq(step_cell(a, 0, 1, "Free(us)"), 50);
	analysis_free(a);
}

/*
 * A step open over more device segments than the reorder ring and the
 * pending queue hold: past the bound each new segment forces the oldest
 * out, before the step is known.  The queue's compaction must stay
 * amortized O(1) a segment; it moved the whole queue (2^18 segments, 6
 * MiB) on every push once full, so a report of a long step slowed to a
 * crawl.  The step, found after its first segments went, is counted and
 * warned about: its breakdown misses them.
 */
START_TEST(test_pending_queue_linear)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);
	uint64_t n = AN_REORDER_MAX + AN_PENDING_MAX + 2000;
	size_t nw;

	marker(src, 7, 0, 1, 1, 1);
	for (uint64_t i = 0; i < n; i++)
		kernel(src, 7, i * 10 * US, i * 10 * US + 5 * US, 2, 3, 0);
	marker(src, 7, n * 10 * US, 1, 1, 0);
	run(a);
	ck_assert_uint_eq(a->nproc, 1);
	ck_assert_uint_eq(a->proc[0]->forced, 1);
	ck_assert_double_lt(step_cell(a, 0, 1, "Computing(us)"),
	    (double)n * 5);
	ck_assert_ptr_nonnull(strstr(analysis_warnings(a, &nw)[0],
	    "approximate"));
	ck_assert_msg(a->proc[0]->pq_moved <= n, "%llu segments moved for "
	    "%llu pushed", (unsigned long long)a->proc[0]->pq_moved,
	    (unsigned long long)n);
	analysis_free(a);
}
END_TEST

START_TEST(test_overlap)
{
	overlap_case(0);
	overlap_case(1);
	overlap_run_case(0);
	overlap_run_case(1);
}
END_TEST

/* Two steps, two ranks; work that straddles a step boundary is split. */
START_TEST(test_steps_per_rank)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *s0 = src_new(a, "h", 10, 0, 2);
	struct analysis_source *s1 = src_new(a, "h", 11, 1, 2);

	range(s0, 10, 0, 100 * US, 1, 1);
	range(s0, 10, 100 * US, 300 * US, 2, 1);
	kernel(s0, 10, 10 * US, 30 * US, 2, 3, 0);
	kernel(s0, 10, 90 * US, 120 * US, 2, 3, 0);	/* 10 + 20 */
	kernel(s0, 10, 200 * US, 260 * US, 2, 3, 0);
	range(s1, 11, 0, 100 * US, 1, 1);
	range(s1, 11, 100 * US, 200 * US, 2, 1);
	range(s1, 11, 20 * US, 45 * US, 3, 11);		/* data loading */
	kernel(s1, 11, 50 * US, 100 * US, 2, 3, 0);
	run(a);
	ck_assert_double_eq(step_cell(a, 0, 1, "Computing(us)"), 30);
	ck_assert_double_eq(step_cell(a, 0, 2, "Computing(us)"), 80);
	ck_assert_double_eq(step_cell(a, 0, 2, "Free(us)"), 120);
	ck_assert_double_eq(step_cell(a, 1, 1, "Computing(us)"), 50);
	ck_assert_double_eq(step_cell(a, 1, 1, "Data Loading(us)"), 25);
	ck_assert_double_eq(step_cell(a, 1, 2, "Step Time(us)"), 100);
	ck_assert_double_eq(step_cell(a, 1, 2, "Computing(us)"), 0);
	analysis_free(a);
}
END_TEST

START_TEST(test_op_statistic)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	kernel(src, 7, 0, 100 * US, 2, 3, 0);
	kernel(src, 7, 100 * US, 300 * US, 2, 3, 0);
	kernel(src, 7, 300 * US, 600 * US, 2, 3, 0);
	kernel(src, 7, 600 * US, 650 * US, 7, 8, 0);
	run(a);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "MatMul",
	    "Count"), 3);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "MatMul",
	    "Total Time(us)"), 600);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "MatMul",
	    "Min Time(us)"), 100);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "MatMul",
	    "Max Time(us)"), 300);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "MatMul",
	    "Avg Time(us)"), 200);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "MatMul",
	    "Ratio(%)"), 92.31);	/* 600 / 650 */
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "Add",
	    "Count"), 1);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "Add",
	    "Ratio(%)"), 7.69);
	{
		const struct table *t = analysis_table(a, ANALYSIS_OPS);

		/* Sorted by total, largest first. */
		ck_assert_str_eq(table_cell(t, 0, 0, NULL), "MatMul");
		ck_assert_str_eq(table_cell(t, 0, 1, NULL), "AI_CORE");
	}
	analysis_free(a);
}
END_TEST

/* The op and API caches go by the source's own string ids: a name id
 * with another type is another op, and an id a direct feed gives another
 * string, or defines after a record used it, names another op and API
 * from then on. */
START_TEST(test_op_cache_by_local_id)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	kernel(src, 7, 0, 100 * US, 2, 3, 0);		/* MatMul, AI_CORE */
	kernel(src, 7, 100 * US, 150 * US, 2, 8, 0);	/* MatMul, AI_VECTOR */
	api(src, 7, 0, 10 * US, 6, 0);
	ck_assert_int_eq(analysis_source_string(src, 2, "Conv2D"), 0);
	ck_assert_int_eq(analysis_source_string(src, 6, "aclrtMemcpy"), 0);
	kernel(src, 7, 200 * US, 230 * US, 2, 8, 0);	/* Conv2D, AI_VECTOR */
	api(src, 7, 20 * US, 50 * US, 6, 0);
	kernel(src, 7, 300 * US, 340 * US, 20, 3, 0);	/* "", AI_CORE */
	api(src, 7, 60 * US, 100 * US, 21, 0);		/* "" */
	ck_assert_int_eq(analysis_source_string(src, 20, "Late"), 0);
	ck_assert_int_eq(analysis_source_string(src, 21, "aclLate"), 0);
	kernel(src, 7, 400 * US, 460 * US, 20, 3, 0);	/* Late, AI_CORE */
	api(src, 7, 110 * US, 160 * US, 21, 0);
	run(a);
	{
		/* Each op once, with its one kernel's time. */
		static const struct {
			const char *name, *type;
			double max;
		} want[] = { { "MatMul", "AI_CORE", 100 },
		    { "MatMul", "AI_VECTOR", 50 },
		    { "Conv2D", "AI_VECTOR", 30 }, { "", "AI_CORE", 40 },
		    { "Late", "AI_CORE", 60 } };
		const struct table *t = analysis_table(a, ANALYSIS_OPS);
		int kn = col_of(t, "OP Type"), kt = col_of(t, "Core Type");
		int kc = col_of(t, "Count"), kx = col_of(t, "Max Time(us)");
		unsigned seen = 0;

		ck_assert_uint_eq(table_nrows(t), 5);
		for (size_t r = 0; r < 5; r++) {
			const char *n = table_cell(t, r, (size_t)kn, NULL);
			const char *ty = table_cell(t, r, (size_t)kt, NULL);
			double max = strtod(table_cell(t, r, (size_t)kx,
			    NULL), NULL);

			ck_assert_str_eq(table_cell(t, r, (size_t)kc, NULL),
			    "1");
			for (unsigned w = 0; w < 5; w++)
				if (strcmp(n, want[w].name) == 0 &&
				    strcmp(ty, want[w].type) == 0 &&
				    max == want[w].max)
					seen |= 1u << w;
		}
		ck_assert_uint_eq(seen, 31);
	}
	ck_assert_double_eq(cell(a, ANALYSIS_APIS, "API Name", "aclLate",
	    "Max(us)"), 50);
	ck_assert_double_eq(cell(a, ANALYSIS_APIS, "API Name", "",
	    "Max(us)"), 40);
	ck_assert_double_eq(cell(a, ANALYSIS_APIS, "API Name",
	    "aclrtLaunchKernel", "Count"), 1);
	ck_assert_double_eq(cell(a, ANALYSIS_APIS, "API Name",
	    "aclrtLaunchKernel", "Max(us)"), 10);
	ck_assert_double_eq(cell(a, ANALYSIS_APIS, "API Name",
	    "aclrtMemcpy", "Count"), 1);
	ck_assert_double_eq(cell(a, ANALYSIS_APIS, "API Name",
	    "aclrtMemcpy", "Max(us)"), 30);
	analysis_free(a);
}
END_TEST

/* Launch delay = kernel start - API end, joined by correlation id, in
 * either arrival order. */
START_TEST(test_launch)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	api(src, 7, 0, 10 * US, 6, 1);
	kernel(src, 7, 30 * US, 50 * US, 2, 3, 1);	/* delay 20 */
	kernel(src, 7, 300 * US, 320 * US, 2, 3, 2);	/* device first */
	api(src, 7, 50 * US, 60 * US, 6, 2);		/* delay 240 */
	api(src, 7, 400 * US, 410 * US, 6, 3);		/* never runs */
	run(a);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", "2",
	    "Launch Delay Avg(us)"), 130);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", "2",
	    "Launch Delay Max(us)"), 240);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", "2",
	    "CPU Runtime Avg(us)"), 10);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", "2",
	    "Delay > thr"), 1);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH_OUTLIERS,
	    "Correlation ID", "2", "Launch Delay(us)"), 240);
	ck_assert(has_advice(a, "launch_delay", NULL));
	analysis_free(a);
}
END_TEST

/* A second process in an existing source (one file, several processes). */
static void
proc_add(struct analysis_source *src, uint32_t pid, int rank, int world)
{
	struct rec_process p;

	REC_INIT(&p, REC_PROCESS, 0);
	p.pid = pid;
	p.rank = rank;
	p.local_rank = rank;
	p.world_size = world;
	ck_assert_int_eq(analysis_source_add(src, &p.hdr), 0);
}

/* Correlation ids are per process: two processes of one file both use
 * id 1; each launch joins its own process's kernel. */
START_TEST(test_launch_join_per_process)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 2);

	proc_add(src, 8, 1, 2);
	api(src, 7, 0, 10 * US, 6, 1);
	api(src, 8, 0, 50 * US, 6, 1);
	kernel(src, 7, 30 * US, 40 * US, 2, 3, 1);	/* rank 0: delay 20 */
	kernel(src, 8, 100 * US, 110 * US, 7, 8, 1);	/* rank 1: delay 50 */
	run(a);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", "2",
	    "CPU Runtime Avg(us)"), 30);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", "2",
	    "Launch Delay Max(us)"), 50);
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", "2",
	    "Launch Delay Avg(us)"), 35);
	/* The op table's host time is each op's own launch. */
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "MatMul",
	    "Host Launch Total(us)"), 10);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "Add",
	    "Host Launch Total(us)"), 50);
	analysis_free(a);
}
END_TEST

/* Eight processes launching at once, each kernel 4096 launches behind
 * its API (msptid writes device records after the device ran them, so
 * a launch waits in the join a while): every launch joins its kernel,
 * whatever the other processes' correlation ids are.  One table keyed
 * by (id, pid) for all of a file's processes lost the launches whose
 * slot another process took meanwhile, so a node's file reported fewer
 * launches on one thread than on several (each with fewer processes). */
START_TEST(test_launch_join_many_processes)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 100, 0, 8);
	const uint64_t n = 20000, lag = 4096;
	char want[32];

	for (uint32_t q = 1; q < 8; q++)
		proc_add(src, 100 + q, (int)q, 8);
	for (uint64_t i = 1; i <= n + lag; i++)
		for (uint32_t q = 0; q < 8; q++) {
			uint64_t t = i * 20 * US;

			if (i <= n)
				api(src, 100 + q, t, t + 2 * US, 6, i);
			if (i > lag)
				kernel(src, 100 + q, t, t + 5 * US, 2, 3,
				    i - lag);
		}
	run(a);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)(8 * n));
	ck_assert_double_eq(cell(a, ANALYSIS_LAUNCH, "Launches", want,
	    "CPU Runtime Avg(us)"), 2);
	analysis_free(a);
}
END_TEST

/* Device work launched before any kernel of its name ran (a collective
 * named like a kernel that comes later): its launch time waits for that
 * op, whatever the order, so the op's host time does not depend on how
 * a file was cut or shared among threads. */
START_TEST(test_launch_before_its_op)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	api(src, 7, 0, 10 * US, 6, 1);
	comm_launched(src, 7, 20 * US, 30 * US, 8, 0, 1);	/* no op */
	api(src, 7, 40 * US, 45 * US, 6, 2);
	kernel(src, 7, 50 * US, 60 * US, 4, 3, 2);
	run(a);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "HcclAllReduce",
	    "Host Launch Total(us)"), 15);
	ck_assert_double_eq(cell(a, ANALYSIS_OPS, "OP Type", "HcclAllReduce",
	    "Host Launch Avg(us)"), 7.5);
	analysis_free(a);
}
END_TEST

/* A process with neither steps nor device work (a launcher) has no step
 * row; one with device work but no markers has one whole-capture row. */
START_TEST(test_no_step_row_for_a_launcher)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);
	const struct table *t;

	proc_add(src, 9, -1, 0);
	api(src, 9, 0, 5 * US, 12, 0);
	range(src, 7, 0, 100 * US, 1, 1);
	range(src, 7, 100 * US, 200 * US, 2, 1);
	kernel(src, 7, 10 * US, 20 * US, 2, 3, 0);
	run(a);
	t = analysis_table(a, ANALYSIS_STEPS);
	ck_assert_uint_eq(table_nrows(t), 2);
	analysis_free(a);

	a = analysis_new(NULL);
	src = src_new(a, "h", 7, 0, 1);
	kernel(src, 7, 10 * US, 20 * US, 2, 3, 0);
	run(a);
	t = analysis_table(a, ANALYSIS_STEPS);
	ck_assert_uint_eq(table_nrows(t), 1);
	analysis_free(a);
}
END_TEST

/* A step range stays paired however many ranges open inside it. */
START_TEST(test_many_open_ranges)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);
	const struct table *t;

	marker(src, 7, 0, 1, 1, 1);			/* step opens */
	for (uint64_t i = 0; i < 200; i++)
		marker(src, 7, (1 + i) * US, 100 + i, 7, 1);
	kernel(src, 7, 300 * US, 400 * US, 2, 3, 0);
	for (uint64_t i = 200; i-- > 0;)
		marker(src, 7, (500 + i) * US, 100 + i, 7, 0);
	marker(src, 7, 1000 * US, 1, 1, 0);		/* step closes */
	run(a);
	t = analysis_table(a, ANALYSIS_STEPS);
	ck_assert_uint_eq(table_nrows(t), 1);
	ck_assert_double_eq(step_cell(a, 0, 1, "Step Time(us)"), 1000);
	ck_assert_double_eq(step_cell(a, 0, 1, "Computing(us)"), 100);
	analysis_free(a);
}
END_TEST

static void
memcpy_rec(struct analysis_source *src, uint64_t s, uint64_t e,
    uint64_t bytes, uint32_t kind)
{
	struct rec_memcpy m;

	REC_INIT(&m, REC_MEMCPY, 0);
	m.pid = 7;
	m.start = T0 + s;
	m.end = T0 + e;
	m.bytes = bytes;
	m.copy_kind = kind;
	ck_assert_int_eq(analysis_source_add(src, &m.hdr), 0);
}

START_TEST(test_memcpy_bandwidth)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	memcpy_rec(src, 0, 1000, 1000000, 2);		/* HTOD 1000 GB/s */
	memcpy_rec(src, 5000, 6000, 1000000, 2);
	memcpy_rec(src, 10000, 14000, 2000000, 3);	/* DTOH 500 GB/s */
	memcpy_rec(src, 20000, 21000, 1024, 4);		/* DTOD aligned */
	run(a);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMCPY, "Direction", "HTOD",
	    "Count"), 2);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMCPY, "Direction", "HTOD",
	    "Bandwidth(GB/s)"), 1000);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMCPY, "Direction", "DTOH",
	    "Bandwidth(GB/s)"), 500);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMCPY, "Direction", "DTOD",
	    "Bandwidth(GB/s)"), 1.024);
	/* 1000000 % 512 != 0: HTOD and DTOH misaligned, not DTOD. */
	ck_assert(has_advice(a, "byte_alignment", "Medium"));
	analysis_free(a);
}
END_TEST

static void
mem_rec(struct analysis_source *src, uint64_t t, uint64_t mib, int op)
{
	struct rec_memory m;

	REC_INIT(&m, REC_MEMORY, 0);
	m.pid = 7;
	m.device = 3;
	m.start = T0 + t;
	m.end = T0 + t + 10;
	m.bytes = mib << 20;
	m.op = (uint16_t)op;
	ck_assert_int_eq(analysis_source_add(src, &m.hdr), 0);
}

START_TEST(test_memory_peak)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);

	kernel(src, 7, 0, 10, 2, 3, 0);		/* base time: T0 */
	mem_rec(src, 1000, 100, 0);
	mem_rec(src, 2000, 200, 0);		/* peak 300 at 2.010 us */
	mem_rec(src, 3000, 100, 1);
	mem_rec(src, 4000, 50, 0);		/* 250 */
	run(a);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMORY, "Device_id", "3",
	    "Peak(MB)"), 300);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMORY, "Device_id", "3",
	    "In Use at End(MB)"), 250);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMORY, "Device_id", "3",
	    "Allocations"), 3);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMORY, "Device_id", "3",
	    "Frees"), 1);
	ck_assert_double_eq(cell(a, ANALYSIS_MEMORY, "Device_id", "3",
	    "Peak Time(us)"), 2.01);
	analysis_free(a);
}
END_TEST

/*
 * Three ranks, 4 steps of 1000 us; each step computes then all-reduces.
 * Rank 1 computes 600 us, the others 300 us, so everyone else waits for
 * rank 1 in the collective (its communication time is the smallest).
 * With link = true, every rank computes 300 us, then runs a send/recv
 * op: 10 us on ranks 0 and 1, 500 us on rank 2 (its slow link), and the
 * others wait for rank 2 in the all-reduce.
 */
static struct analysis *
multi_rank(bool link, const char *host2)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *s[3];

	for (int r = 0; r < 3; r++)
		s[r] = src_new(a, r == 2 ? host2 : "h", (uint32_t)(100 + r),
		    r, 3);
	for (int st = 0; st < 4; st++) {
		uint64_t b = (uint64_t)st * 1000 * US;
		uint64_t cend[3], last = 0, end;

		for (int r = 0; r < 3; r++) {
			uint64_t c = (!link && r == 1) ? 600 : 300;

			range(s[r], (uint32_t)(100 + r), b, b + 1000 * US,
			    (uint64_t)st + 1, 1);
			kernel(s[r], (uint32_t)(100 + r), b, b + c * US, 2,
			    3, 0);
			cend[r] = b + c * US;
			if (link) {
				struct rec_communication p2p;
				uint64_t d = (r == 2 ? 500 : 10) * US;

				REC_INIT(&p2p, REC_COMMUNICATION, 0);
				p2p.pid = (uint32_t)(100 + r);
				p2p.start = T0 + cend[r];
				p2p.end = T0 + cend[r] + d;
				p2p.name_id = 6;	/* a second op */
				p2p.comm_name_id = 5;
				p2p.count = 4096;
				ck_assert_int_eq(analysis_source_add(s[r],
				    &p2p.hdr), 0);
				cend[r] += d;
			}
			if (cend[r] > last)
				last = cend[r];
		}
		end = last + 100 * US;
		for (int r = 0; r < 3; r++)
			comm(s[r], (uint32_t)(100 + r), cend[r], end, 1 << 20);
	}
	return run(a);
}

START_TEST(test_slow_rank_compute)
{
	struct analysis *a = multi_rank(false, "h");
	struct analysis_verdict v;

	analysis_verdict(a, &v);
	ck_assert_int_eq(v.rank, 1);
	ck_assert_str_eq(v.cause, "compute");
	/* 300 us more compute than the median, of a 1000 us step. */
	ck_assert_double_eq_tol(v.share, 0.3, 1e-9);
	/* Every instance: rank 1's time is the smallest, one vote each. */
	ck_assert_double_eq(cell(a, ANALYSIS_RANKS, "Rank", "1",
	    "Slow Votes"), 4);
	ck_assert_double_eq(cell(a, ANALYSIS_RANKS, "Rank", "0",
	    "Slow Votes"), 0);
	ck_assert(has_advice(a, "slow_rank", "High"));
	analysis_free(a);
}
END_TEST

START_TEST(test_slow_rank_link)
{
	struct analysis *a = multi_rank(true, "h");
	struct analysis_verdict v;

	analysis_verdict(a, &v);
	ck_assert_int_eq(v.rank, 2);
	ck_assert_str_eq(v.cause, "link");
	analysis_free(a);
}
END_TEST

/*
 * The communication matrix of a job with several communicators: 8 ranks
 * on two hosts (0-3, 4-7), "world" with all of them, "tp0"/"tp1" with
 * each host's four, "dp0"/"dp1" with ranks {0, 4} and {1, 5}.  Every
 * rank sends to the next rank of each of its communicators (the first
 * after the last), over RDMA where that rank is on the other host, an
 * all-reduce's 2(n-1)/n of its bytes.
 */
START_TEST(test_comm_matrix_groups)
{
	static const char *const cname[] = { "world", "tp0", "tp1", "dp0",
	    "dp1" };
	static const int members[5][8] = {
		{ 0, 1, 2, 3, 4, 5, 6, 7 }, { 0, 1, 2, 3, -1 },
		{ 4, 5, 6, 7, -1 }, { 0, 4, -1 }, { 1, 5, -1 },
	};
	struct analysis *a = analysis_new(NULL);
	const struct table *t;
	size_t rows = 0;

	for (int r = 0; r < 8; r++) {
		struct analysis_source *src = src_new(a, r < 4 ? "h0" : "h1",
		    (uint32_t)(100 + r), r, 8);

		for (uint32_t i = 0; i < 5; i++)
			ck_assert_int_eq(analysis_source_string(src, 20 + i,
			    cname[i]), 0);
		for (int c = 0; c < 5; c++)
			for (int k = 0; k < 8 && members[c][k] >= 0; k++) {
				struct rec_communication x;

				if (members[c][k] != r)
					continue;
				REC_INIT(&x, REC_COMMUNICATION, 0);
				x.pid = (uint32_t)(100 + r);
				x.start = T0 + (uint64_t)c * 100 * US;
				x.end = x.start + 50 * US;
				x.name_id = 4;		/* HcclAllReduce */
				x.comm_name_id = 20 + (uint32_t)c;
				x.count = 1 << 20;
				x.data_type = 0;
				x.seq = 1;
				ck_assert_int_eq(analysis_source_add(src,
				    &x.hdr), 0);
			}
	}
	run(a);
	t = analysis_table(a, ANALYSIS_COMM_MATRIX);
	ck_assert_ptr_nonnull(t);
	for (int c = 0; c < 5; c++) {
		int n = 0;

		while (n < 8 && members[c][n] >= 0)
			n++;
		for (int k = 0; k < n; k++) {
			int src = members[c][k], dst = members[c][(k + 1) % n];
			char want_src[8], want_dst[8], mb[32];
			size_t row;

			snprintf(want_src, sizeof(want_src), "%d", src);
			snprintf(want_dst, sizeof(want_dst), "%d", dst);
			snprintf(mb, sizeof(mb), "%.3f", 2.0 * (n - 1) / n);
			for (row = 0; row < table_nrows(t); row++)
				if (strcmp(table_cell(t, row, col_of(t,
				    "Group"), NULL), cname[c]) == 0 &&
				    strcmp(table_cell(t, row, col_of(t,
				    "Src Rank"), NULL), want_src) == 0)
					break;
			ck_assert_msg(row < table_nrows(t), "no link of rank "
			    "%d in %s", src, cname[c]);
			ck_assert_str_eq(table_cell(t, row, col_of(t,
			    "Dst Rank"), NULL), want_dst);
			ck_assert_str_eq(table_cell(t, row, col_of(t,
			    "Transport"), NULL), (src < 4) == (dst < 4) ?
			    "HCCS" : "RDMA");
			ck_assert_str_eq(table_cell(t, row, col_of(t,
			    "Transit Size(MB)"), NULL), mb);
			rows++;
		}
	}
	ck_assert_uint_eq(table_nrows(t), rows);
	analysis_free(a);
}
END_TEST

/* Clock alignment between hosts: rank 2's clock runs 5 ms ahead. */
START_TEST(test_balanced_and_aligned)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *s[2];
	struct analysis_verdict v;

	for (int r = 0; r < 2; r++)
		s[r] = src_new(a, r ? "h2" : "h1", (uint32_t)(100 + r), r, 2);
	for (int st = 0; st < 3; st++) {
		uint64_t b = (uint64_t)st * 1000 * US;

		for (int r = 0; r < 2; r++) {
			uint64_t off = r ? 5000 * US : 0;

			kernel(s[r], (uint32_t)(100 + r), off + b,
			    off + b + 300 * US, 2, 3, 0);
			comm(s[r], (uint32_t)(100 + r), off + b + 300 * US,
			    off + b + 400 * US, 1 << 20);
		}
	}
	run(a);
	analysis_verdict(a, &v);
	ck_assert_int_eq(v.rank, -1);
	ck_assert_double_eq(cell(a, ANALYSIS_RANKS, "Rank", "1",
	    "Clock Skew(us)"), -5000);
	ck_assert_str_eq(table_cell(analysis_table(a, ANALYSIS_RANKS), 1,
	    (size_t)col_of(analysis_table(a, ANALYSIS_RANKS), "Aligned"),
	    NULL), "yes");
	/* Rank 0 is on the reference host: aligned too, by an offset of 0. */
	ck_assert_str_eq(table_cell(analysis_table(a, ANALYSIS_RANKS), 0,
	    (size_t)col_of(analysis_table(a, ANALYSIS_RANKS), "Aligned"),
	    NULL), "yes");
	analysis_free(a);
}
END_TEST

/*
 * Rank 0's capture holds collective 1 of the communicator, rank 1's only
 * 2 and 3 (it began later).  Collective 1's last arrival is unknown: its
 * 100 us are Unmatched, neither transit nor wait, and it casts no vote;
 * 2 and 3 split as usual (rank 0 waits 50 us, each rank transfers 50).
 */
START_TEST(test_collective_on_some_ranks)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *s0 = src_new(a, "h", 100, 0, 2);
	struct analysis_source *s1 = src_new(a, "h", 101, 1, 2);
	const char *const *w;
	bool said = false;
	size_t nw;

	comm_seq(s0, 100, 0, 100 * US, 4096, 1);
	comm_seq(s0, 100, 1000 * US, 1100 * US, 4096, 2);
	comm_seq(s0, 100, 2000 * US, 2100 * US, 4096, 3);
	comm_seq(s1, 101, 1050 * US, 1100 * US, 4096, 2);
	comm_seq(s1, 101, 2050 * US, 2100 * US, 4096, 3);
	run(a);
	ck_assert_double_eq(cell(a, ANALYSIS_COMM, "OP Type", "HcclAllReduce",
	    "Transit Time(us)"), 200);
	ck_assert_double_eq(cell(a, ANALYSIS_COMM, "OP Type", "HcclAllReduce",
	    "Unmatched Time(us)"), 100);
	ck_assert_double_eq(cell(a, ANALYSIS_COMM, "OP Type", "HcclAllReduce",
	    "Wait Time(us)"), 100);
	ck_assert_double_eq(cell(a, ANALYSIS_COMM, "OP Type", "HcclAllReduce",
	    "Idle Time(us)"), 0);
	ck_assert_double_eq(cell(a, ANALYSIS_RANKS, "Rank", "1",
	    "Slow Votes"), 2);
	ck_assert_double_eq(cell(a, ANALYSIS_RANKS, "Rank", "0",
	    "Slow Votes"), 0);
	w = analysis_warnings(a, &nw);
	for (size_t i = 0; i < nw; i++)
		said |= strstr(w[i], "1 collective instance(s) (0.100 ms in "
		    "all ranks) were captured on only some") != NULL;
	ck_assert_msg(said, "no warning of the unmatched collective");
	analysis_free(a);
}
END_TEST

START_TEST(test_missing_rank_and_losses)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_totals t;
	size_t nw;
	const char *const *w;
	bool missing = false;

	src_new(a, "h", 100, 0, 4);
	src_new(a, "h", 101, 1, 4);
	run(a);
	analysis_get_totals(a, &t);
	ck_assert_uint_eq(t.ranks_seen, 2);
	ck_assert_uint_eq(t.world_size, 4);
	ck_assert(t.partial);
	w = analysis_warnings(a, &nw);
	for (size_t i = 0; i < nw; i++)
		if (strstr(w[i], "MISSING RANKS: 2 of 4") &&
		    strstr(w[i], "rank 2,3"))
			missing = true;
	ck_assert(missing);
	ck_assert(has_advice(a, "partial_input", "High"));
	analysis_free(a);

	/* Complete: not partial. */
	a = analysis_new(NULL);
	src_new(a, "h", 100, 0, 2);
	src_new(a, "h", 101, 1, 2);
	run(a);
	analysis_get_totals(a, &t);
	ck_assert(!t.partial);
	ck_assert_uint_eq(analysis_warnings(a, &nw)[0] == NULL, 1);
	analysis_free(a);

	/* Losses: a LOSS record and footer counts. */
	a = analysis_new(NULL);
	{
		struct analysis_source *src = src_new(a, "h", 100, 0, 1);
		struct rec_loss l;
		uint64_t f[LOSS_STAGE_MAX] = { 0 };

		REC_INIT(&l, REC_LOSS, 0);
		l.stage = LOSS_AGENT_RING;
		l.count = 7;
		ck_assert_int_eq(analysis_source_add(src, &l.hdr), 0);
		f[LOSS_DISK] = 5;
		analysis_source_losses(src, f);
	}
	run(a);
	analysis_get_totals(a, &t);
	ck_assert(t.partial);
	ck_assert_uint_eq(t.lost, 12);
	analysis_free(a);
}
END_TEST

START_TEST(test_advisor)
{
	struct analysis_opts o;
	struct analysis *a;
	struct analysis_source *src;
	uint64_t t = 0;

	analysis_opts_init(&o);
	a = analysis_new(&o);
	src = src_new(a, "h", 7, 0, 1);
	/* 3 steps: 15 ms before the first device work (dataloader), one
	 * 300 ms idle gap (host gap), AI_CPU TopK, 12 ms of aclrtMalloc,
	 * a sync per launch, small misaligned collectives. */
	for (int st = 0; st < 3; st++) {
		uint64_t b = t;

		marker(src, 7, b, (uint64_t)st + 1, 1, 1);
		api(src, 7, b + 15000 * US, b + 15010 * US, 6,
		    (uint64_t)st + 1);
		kernel(src, 7, b + 15020 * US, b + 16000 * US, 9, 10,
		    (uint64_t)st + 1);
		api(src, 7, b + 16000 * US, b + 16001 * US, 13, 0);
		api(src, 7, b + 16001 * US, b + 20001 * US, 12, 0);
		comm(src, 7, b + 16000 * US, b + 16100 * US, 1000);
		kernel(src, 7, b + (st == 1 ? 316100 : 16100) * US,
		    b + (st == 1 ? 316200 : 16200) * US, 2, 3, 0);
		t = b + (st == 1 ? 316300 : 16300) * US;
		marker(src, 7, t, (uint64_t)st + 1, 1, 0);
	}
	run(a);
	ck_assert(has_advice(a, "aicpu_ops", "High"));
	ck_assert(has_advice(a, "dataloader", "Medium"));
	ck_assert(has_advice(a, "host_gap", "Medium"));
	ck_assert(has_advice(a, "malloc_free", NULL));
	ck_assert(has_advice(a, "sync_stream", NULL));
	ck_assert(has_advice(a, "small_packets", NULL));
	ck_assert(has_advice(a, "byte_alignment", NULL));
	analysis_free(a);

	/* None of them on a clean capture. */
	a = analysis_new(&o);
	src = src_new(a, "h", 7, 0, 1);
	for (int st = 0; st < 3; st++) {
		uint64_t b = (uint64_t)st * 1000 * US;

		range(src, 7, b, b + 1000 * US, (uint64_t)st + 1, 1);
		api(src, 7, b, b + 10 * US, 6, (uint64_t)st + 1);
		kernel(src, 7, b + 20 * US, b + 900 * US, 2, 3,
		    (uint64_t)st + 1);
	}
	run(a);
	{
		size_t n;

		analysis_advice(a, &n);
		ck_assert_uint_eq(n, 0);
	}
	analysis_free(a);
}
END_TEST

/*
 * Bounded memory: 200k steps of 4 kernels each, host records keeping
 * pace; the reorder ring and the pending queue stay small, and the
 * per-step sums are still exact.
 */
START_TEST(test_bounded)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);
	struct an_proc *p = NULL;
	size_t rb_max = 0, pq_max = 0;
	const uint64_t n = 200000;

	for (uint64_t st = 0; st < n; st++) {
		uint64_t b = st * 100 * US;

		marker(src, 7, b, st + 1, 1, 1);
		api(src, 7, b, b + US, 6, 0);
		for (int k = 0; k < 4; k++)
			kernel(src, 7, b + (uint64_t)(10 + 20 * k) * US,
			    b + (uint64_t)(20 + 20 * k) * US, 2, 3, 0);
		marker(src, 7, b + 100 * US, st + 1, 1, 0);
		if (p == NULL)
			p = a->proc[0];
		if (p->rb_cap > rb_max)
			rb_max = p->rb_cap;
		if (p->pq_cap > pq_max)
			pq_max = p->pq_cap;
	}
	/* 5 s of reorder window is 50k steps = 200k intervals: within the
	 * cap, far below the trace. */
	ck_assert_uint_le(rb_max, AN_REORDER_MAX);
	ck_assert_uint_lt(rb_max, n * 4);
	ck_assert_uint_le(pq_max, 65536);
	run(a);
	ck_assert_uint_eq(p->late, 0);
	ck_assert_uint_eq(p->forced, 0);
	ck_assert_double_eq(step_cell(a, 0, 1, "Computing(us)"), 40);
	ck_assert_double_eq(step_cell(a, 0, (int)n, "Computing(us)"), 40);
	ck_assert_double_eq(step_cell(a, 0, 12345, "Free(us)"), 60);
	analysis_free(a);
}
END_TEST

/*
 * A rank doing 100k device tasks a second, in order: 5 s of reorder
 * window (500k intervals) is past the ring's cap, so the earliest are
 * processed early.  In order that is exact: no interval late, no step
 * counted as forced, no warning, the sums to the ns.  The old sweep
 * counted every early one and called the breakdown approximate.
 */
START_TEST(test_ring_cap_in_order)
{
	struct analysis *a = analysis_new(NULL);
	struct analysis_source *src = src_new(a, "h", 7, 0, 1);
	const uint64_t n = 150000;
	size_t nw;

	for (uint64_t st = 0; st < n; st++) {
		uint64_t b = st * 40 * US;

		marker(src, 7, b, st + 1, 1, 1);
		for (int k = 0; k < 4; k++)
			kernel(src, 7, b + (uint64_t)(2 + 9 * k) * US,
			    b + (uint64_t)(7 + 9 * k) * US, 2, 3, 0);
		marker(src, 7, b + 40 * US, st + 1, 1, 0);
	}
	ck_assert_uint_eq(a->proc[0]->rb_cap, AN_REORDER_MAX);
	run(a);
	ck_assert_uint_eq(a->proc[0]->late, 0);
	ck_assert_uint_eq(a->proc[0]->forced, 0);
	analysis_warnings(a, &nw);
	ck_assert_uint_eq(nw, 0);
	ck_assert_double_eq(step_cell(a, 0, 1, "Computing(us)"), 20);
	ck_assert_double_eq(step_cell(a, 0, (int)n, "Computing(us)"), 20);
	ck_assert_double_eq(step_cell(a, 0, 77777, "Free(us)"), 20);
	analysis_free(a);
}
END_TEST

/*
 * msptid writes a device task that waited for its launch up to about 2 s
 * after later work (lib/join dev_timeout, then a drain tick).  Records
 * late by 3 s are within the default window: exact, no warning.  A 1 s
 * window loses them (which proves the feed is out of order).
 */
static struct analysis *
late_feed(uint64_t reorder_ns)
{
	struct analysis_opts o;
	struct analysis *a;
	struct analysis_source *src;
	const uint64_t ms = 1000 * US, nsteps = 600, lag = 300; /* 3 s */

	analysis_opts_init(&o);
	o.reorder_ns = reorder_ns;
	a = analysis_new(&o);
	src = src_new(a, "h", 7, 0, 1);
	for (uint64_t st = 0; st < nsteps + lag; st++) {
		uint64_t b = st * 10 * ms;

		if (st < nsteps) {
			marker(src, 7, b, st + 1, 1, 1);
			kernel(src, 7, b + 1 * ms, b + 2 * ms, 2, 3, 0);
			marker(src, 7, b + 10 * ms, st + 1, 1, 0);
		}
		/* The second kernel of the first 10 steps, 3 s late. */
		if (st >= lag && st - lag < 10) {
			uint64_t c = (st - lag) * 10 * ms;

			kernel(src, 7, c + 5 * ms, c + 6 * ms, 2, 3, 0);
		}
	}
	return run(a);
}

START_TEST(test_late_3s)
{
	struct analysis *a = late_feed(0);
	size_t nw;

	ck_assert_uint_eq(a->proc[0]->late, 0);
	ck_assert_uint_eq(a->proc[0]->forced, 0);
	analysis_warnings(a, &nw);
	ck_assert_uint_eq(nw, 0);
	for (int st = 1; st <= 10; st++)
		ck_assert_double_eq(step_cell(a, 0, st, "Computing(us)"), 2000);
	ck_assert_double_eq(step_cell(a, 0, 11, "Computing(us)"), 1000);
	analysis_free(a);

	a = late_feed(1000000000ull);
	ck_assert_uint_gt(a->proc[0]->late, 0);
	analysis_warnings(a, &nw);
	ck_assert_uint_eq(nw, 1);
	analysis_free(a);
}
END_TEST

/* table_num prints what printf's "%.*f" prints, for any value. */
START_TEST(test_table_num)
{
	static const char *const cols[] = { "v" };
	struct table *t = table_new("t", "t", 1, cols);
	unsigned seed = 7;
	size_t n = 0;
	double vals[60000];
	int precs[60000];

	for (int i = 0; i < 60000; i++) {
		double v;

		switch (i % 6) {
		case 0:		/* ns as us */
			v = (double)(rand_r(&seed) % 2000000000) / 1e3;
			break;
		case 1:		/* ties and near-ties of the rounding */
			v = (double)(rand_r(&seed) % 100000) / 8.0 +
			    (double)(rand_r(&seed) % 3 - 1) * 1e-12;
			break;
		case 2:
			v = -(double)rand_r(&seed) / 7.0;
			break;
		case 3:		/* large: printf's path */
			v = (double)rand_r(&seed) * 1e6;
			break;
		case 4:
			v = (double)rand_r(&seed) / (double)RAND_MAX;
			break;
		default:
			v = i % 12 == 5 ? -0.0 : -1e-9 * (double)(i % 7);
			break;
		}
		vals[n] = v;
		precs[n] = i % 5;
		table_row(t);
		table_num(t, v, precs[n]);
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		char want[64];

		snprintf(want, sizeof(want), "%.*f", precs[i], vals[i]);
		ck_assert_msg(strcmp(table_cell(t, i, 0, NULL), want) == 0,
		    "%.17g prec %d: %s, printf %s", vals[i], precs[i],
		    table_cell(t, i, 0, NULL), want);
	}
	table_free(t);
}
END_TEST

/* table_u64 and table_i64 print what printf prints; cells of any length
 * (one past the arena's block size) and empty ones keep their text. */
START_TEST(test_table_ints)
{
	static const char *const cols[] = { "u", "i", "s" };
	static const uint64_t edge[] = { 0, 1, 9, 10, 99, 100, 99999999,
	    100000000, 4294967295ull, 4294967296ull, 9999999999999999999ull,
	    10000000000000000000ull, UINT64_MAX };
	struct table *t = table_new("t", "t", 3, cols);
	unsigned seed = 11;
	size_t n = 20000, big = (64u << 10) + 17;
	char *s = malloc(big + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, 'x', big);
	s[big] = '\0';
	for (size_t i = 0; i < n; i++) {
		uint64_t u = i < nitems(edge) ? edge[i] :
		    ((uint64_t)rand_r(&seed) << 33) ^ (uint64_t)rand_r(&seed)
		    >> (i % 60);

		table_row(t);
		table_u64(t, u);
		table_i64(t, i == 1 ? INT64_MIN : i == 2 ? INT64_MAX :
		    (int64_t)u);
		table_str(t, i == 3 ? s : i % 2 ? "" : "cell");
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t u = strtoull(table_cell(t, i, 0, NULL), NULL, 10);
		char want[32];

		snprintf(want, sizeof(want), "%" PRIu64, u);
		ck_assert_str_eq(table_cell(t, i, 0, NULL), want);
		if (i < nitems(edge))
			ck_assert(u == edge[i]);
		snprintf(want, sizeof(want), "%" PRId64, i == 1 ? INT64_MIN :
		    i == 2 ? INT64_MAX : (int64_t)u);
		ck_assert_str_eq(table_cell(t, i, 1, NULL), want);
		ck_assert_str_eq(table_cell(t, i, 2, NULL), i == 3 ? s :
		    i % 2 ? "" : "cell");
	}
	table_free(t);
	free(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("analysis");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_overlap);
	tcase_add_test(tc, test_pending_queue_linear);
	tcase_add_test(tc, test_steps_per_rank);
	tcase_add_test(tc, test_op_statistic);
	tcase_add_test(tc, test_op_cache_by_local_id);
	tcase_add_test(tc, test_launch_join_per_process);
	tcase_add_test(tc, test_launch_join_many_processes);
	tcase_add_test(tc, test_launch_before_its_op);
	tcase_add_test(tc, test_no_step_row_for_a_launcher);
	tcase_add_test(tc, test_many_open_ranges);
	tcase_add_test(tc, test_launch);
	tcase_add_test(tc, test_memcpy_bandwidth);
	tcase_add_test(tc, test_memory_peak);
	tcase_add_test(tc, test_slow_rank_compute);
	tcase_add_test(tc, test_slow_rank_link);
	tcase_add_test(tc, test_comm_matrix_groups);
	tcase_add_test(tc, test_balanced_and_aligned);
	tcase_add_test(tc, test_collective_on_some_ranks);
	tcase_add_test(tc, test_missing_rank_and_losses);
	tcase_add_test(tc, test_advisor);
	tcase_add_test(tc, test_bounded);
	tcase_add_test(tc, test_ring_cap_in_order);
	tcase_add_test(tc, test_late_3s);
	tcase_add_test(tc, test_table_num);
	tcase_add_test(tc, test_table_ints);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

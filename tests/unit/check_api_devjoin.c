/*
 * The in-process device join, exactly: every MEMCPY, MEMSET and KERNEL a
 * program launches is delivered once, joined to its own call (its
 * correlation id), or counted in msptiActivityGetNumDroppedRecords -
 * with copies and sets on several streams from several threads, streams
 * destroyed and created again, and FlushAll called by another thread
 * while the launches go on (the pattern of a FlushPeriod worker or a
 * Python monitor's delivery thread).  Also: tasks of one stream never
 * overlap in the records, whatever the clock model says.  Linked with
 * libmspti ahead of libnpusim (the link-time form of LD_PRELOAD).
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#include "mspti/mspti.h"
#include "api-collect.h"
#include "sim-prefix.h"

static void
setup(void)
{
	sim_prefix_set("dj");
	ck_assert_int_eq(api_collect_register(16 * 1024),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
}

static void
teardown(void)
{
	aclrtResetDevice(0);
	aclFinalize();
	sim_device_unlink(0);
}

/* ---- every copy, set and kernel once ---- */

#define THREADS		4
#define ITERS		400
#define RECREATE	100	/* a thread's stream is replaced this often */

static _Atomic int workers_left;
static aclrtFuncHandle tiny;

struct worker {
	int		 id;
	aclrtStream	 shared;	/* threads 2 and 3 share one stream */
	int		 fail;
};

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	static char host[THREADS][8192];
	aclrtStream s = NULL;
	void *dev = NULL;
	int i;

	if (aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtMalloc(&dev, 8192, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
		w->fail = 1;
	for (i = 0; i < ITERS && !w->fail; i++) {
		if (w->shared != NULL)
			s = w->shared;
		else if (i % RECREATE == 0) {
			if (s != NULL && aclrtDestroyStream(s) != ACL_SUCCESS)
				w->fail = 1;
			if (aclrtCreateStream(&s) != ACL_SUCCESS)
				w->fail = 1;
		}
		if (aclrtMemcpyAsync(dev, 8192, host[w->id], 1024 + i,
		    ACL_MEMCPY_HOST_TO_DEVICE, s) != ACL_SUCCESS ||
		    aclrtMemsetAsync(dev, 8192, i & 0xff, 512 + i, s) !=
		    ACL_SUCCESS ||
		    aclrtLaunchKernel(tiny, 1, NULL, 0, s) != ACL_SUCCESS)
			w->fail = 1;
		/* Synchronous ones now and then (the default stream). */
		if (i % 16 == 0 &&
		    (aclrtMemcpy(host[w->id], 8192, dev, 256,
		    ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS ||
		    aclrtMemset(dev, 8192, 1, 128) != ACL_SUCCESS))
			w->fail = 1;
		if (i % 32 == 31 && aclrtSynchronizeStream(s) != ACL_SUCCESS)
			w->fail = 1;
	}
	if (s != NULL && aclrtSynchronizeStream(s) != ACL_SUCCESS)
		w->fail = 1;
	if (w->shared == NULL && s != NULL)
		aclrtDestroyStream(s);
	aclrtFree(dev);
	atomic_fetch_sub(&workers_left, 1);
	return NULL;
}

/* FlushAll over and over while the workers launch. */
static void *
flusher_main(void *arg)
{
	(void)arg;
	while (atomic_load(&workers_left) > 0)
		msptiActivityFlushAll(1);
	return NULL;
}

/* Device-record kinds checked, with their calls' API names. */
static const struct {
	msptiActivityKind	 kind;
	const char		*api[2];
} checked[] = {
	{ MSPTI_ACTIVITY_KIND_MEMCPY, { "aclrtMemcpyAsync", "aclrtMemcpy" } },
	{ MSPTI_ACTIVITY_KIND_MEMSET, { "aclrtMemsetAsync", "aclrtMemset" } },
	{ MSPTI_ACTIVITY_KIND_KERNEL, { "aclrtLaunchKernel", NULL } },
};

static uint64_t
rec_corr(const msptiActivity *r)
{
	switch (r->kind) {
	case MSPTI_ACTIVITY_KIND_MEMCPY:
		return ((const msptiActivityMemcpy *)r)->correlationId;
	case MSPTI_ACTIVITY_KIND_MEMSET:
		return ((const msptiActivityMemset *)r)->correlationId;
	case MSPTI_ACTIVITY_KIND_KERNEL:
		return ((const msptiActivityKernel *)r)->correlationId;
	default:
		return 0;
	}
}

static unsigned
rec_stream(const msptiActivity *r)
{
	switch (r->kind) {
	case MSPTI_ACTIVITY_KIND_MEMCPY:
		return ((const msptiActivityMemcpy *)r)->streamId;
	case MSPTI_ACTIVITY_KIND_MEMSET:
		return ((const msptiActivityMemset *)r)->streamId;
	case MSPTI_ACTIVITY_KIND_KERNEL:
		return ((const msptiActivityKernel *)r)->ds.streamId;
	default:
		return 0;
	}
}

/*
 * One round: the workers and the flusher, then a final FlushAll; returns
 * a description of what is wrong, or NULL.  Every call of a checked kind
 * (its API record) must have exactly one record with its correlation id,
 * or be counted dropped; no record may lack a call.
 */
static const char *
devjoin_round(char *why, size_t len)
{
	struct worker w[THREADS];
	pthread_t t[THREADS], f;
	aclrtStream shared;
	msptiActivity *r;
	uint64_t max_corr = 0, c;
	uint8_t *api_kind, *seen;
	size_t k, i, calls[3] = { 0 }, ok[3] = { 0 }, stray[3] = { 0 },
	    twice[3] = { 0 }, dropped[3] = { 0 }, d0[3] = { 0 };

	for (k = 0; k < 3; k++)
		msptiActivityGetNumDroppedRecords(checked[k].kind, &d0[k]);
	pthread_mutex_lock(&got_mtx);
	got_len = 0;
	pthread_mutex_unlock(&got_mtx);
	ck_assert_int_eq(aclrtCreateStream(&shared), ACL_SUCCESS);
	atomic_store(&workers_left, THREADS);
	for (i = 0; i < THREADS; i++) {
		w[i].id = (int)i;
		w[i].shared = i >= 2 ? shared : NULL;
		w[i].fail = 0;
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main,
		    &w[i]), 0);
	}
	ck_assert_int_eq(pthread_create(&f, NULL, flusher_main, NULL), 0);
	for (i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(!w[i].fail, "worker %zu: %s", i,
		    aclGetRecentErrMsg());
	}
	pthread_join(f, NULL);
	ck_assert_int_eq(aclrtSynchronizeDevice(), ACL_SUCCESS);
	aclrtDestroyStream(shared);
	msptiActivityFlushAll(1);

	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_API &&
		    ((msptiActivityApi *)r)->correlationId > max_corr)
			max_corr = ((msptiActivityApi *)r)->correlationId;
	api_kind = calloc(max_corr + 1, 1);
	seen = calloc(max_corr + 1, 1);
	ck_assert_ptr_nonnull(api_kind);
	ck_assert_ptr_nonnull(seen);
	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		const char *name;

		if (r->kind != MSPTI_ACTIVITY_KIND_API)
			continue;
		name = ((msptiActivityApi *)r)->name;
		for (k = 0; k < 3; k++)
			if (strcmp(name, checked[k].api[0]) == 0 ||
			    (checked[k].api[1] != NULL &&
			    strcmp(name, checked[k].api[1]) == 0)) {
				api_kind[((msptiActivityApi *)r)->
				    correlationId] = (uint8_t)(k + 1);
				calls[k]++;
			}
	}
	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		for (k = 0; k < 3; k++) {
			if (r->kind != checked[k].kind)
				continue;
			c = rec_corr(r);
			if (c == 0 || c > max_corr || api_kind[c] != k + 1) {
				if (stray[k]++ == 0)
					fprintf(stderr, "stray kind %d corr %llu "
					    "(call kind %d) stream %u\n", (int)r->kind,
					    (unsigned long long)c, c <= max_corr ?
					    api_kind[c] : -1, rec_stream(r));
			}
			else if (seen[c]++)
				twice[k]++;
			else
				ok[k]++;
		}
	free(api_kind);
	free(seen);
	for (k = 0; k < 3; k++) {
		msptiActivityGetNumDroppedRecords(checked[k].kind, &dropped[k]);
		dropped[k] -= d0[k];
	}
	for (k = 0; k < 3; k++)
		if (ok[k] + dropped[k] != calls[k] || stray[k] || twice[k] ||
		    calls[k] == 0) {
			snprintf(why, len, "kind %d: %zu calls, %zu delivered "
			    "joined, %zu counted dropped, %zu without their "
			    "call, %zu twice", (int)checked[k].kind, calls[k],
			    ok[k], dropped[k], stray[k], twice[k]);
			return why;
		}
	return NULL;
}

START_TEST(test_exactly_once)
{
	char why[256];
	const char *bad = NULL;
	int round, failed = 0;

	ck_assert_int_eq(npusimKernelRegister("tiny", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 2000, &tiny), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMCPY),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMSET),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	/* Races are timing: several rounds make one likely to show. */
	for (round = 0; round < 4; round++)
		if (devjoin_round(why, sizeof(why)) != NULL) {
			failed++;
			if (bad == NULL)
				bad = strdup(why);
		}
	ck_assert_msg(failed == 0, "%d of 4 rounds wrong; first: %s", failed,
	    bad);
}
END_TEST

/* ---- a record whose call is over waits for every earlier push ---- */

/*
 * The pending queue is a multi-producer ring popped in order: a thread
 * preempted between reserving its cell and publishing it hides every
 * later cell from the reader.  Here thread "dt-stall" is held in that
 * window (MSPTI_TEST_DEVTIME_PUBLISH_DELAY_MS) while this thread makes a
 * synchronous copy: its record is read after its call returned, but its
 * entry sits behind the held cell.  It must still be joined to its call.
 */
static void
setup_stall(void)
{
	setenv("MSPTI_TEST_DEVTIME_PUBLISH_DELAY_MS", "600", 1);
	setup();
}

static void *
stall_main(void *arg)
{
	static char host[4096];
	void *dev = arg;
	aclrtStream s;

	pthread_setname_np(pthread_self(), "dt-stall");
	if (aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS)
		return (void *)1;
	atomic_store(&workers_left, 1);
	if (aclrtMemcpyAsync(dev, 4096, host, 1024, ACL_MEMCPY_HOST_TO_DEVICE,
	    s) != ACL_SUCCESS || aclrtSynchronizeStream(s) != ACL_SUCCESS)
		return (void *)1;
	aclrtDestroyStream(s);
	return NULL;
}

START_TEST(test_held_cell)
{
	static char host[4096];
	const struct timespec pause = { 0, 100000000 };
	void *dev, *ret;
	pthread_t t;
	msptiActivity *r = NULL;
	uint64_t sync_corr = 0, async_corr = 0, c;
	size_t n = 0, joined = 0, alone = 0;

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMCPY),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclrtMalloc(&dev, 8192, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_SUCCESS);
	atomic_store(&workers_left, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, stall_main, dev), 0);
	while (atomic_load(&workers_left) == 0)
		nanosleep(&pause, NULL);
	/* The other thread is inside its copy call, most likely held. */
	nanosleep(&pause, NULL);
	ck_assert_int_eq(aclrtMemcpy(host, 4096, (char *)dev + 4096, 512,
	    ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
	/* The reader sees this copy's record with its call over. */
	msptiActivityFlushAll(1);
	pthread_join(t, &ret);
	ck_assert_ptr_null(ret);
	ck_assert_int_eq(aclrtSynchronizeDevice(), ACL_SUCCESS);
	msptiActivityFlushAll(1);
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_API) {
			const msptiActivityApi *a = (const msptiActivityApi *)r;

			if (strcmp(a->name, "aclrtMemcpy") == 0)
				sync_corr = a->correlationId;
			else if (strcmp(a->name, "aclrtMemcpyAsync") == 0)
				async_corr = a->correlationId;
		}
	ck_assert_uint_ne(sync_corr, 0);
	ck_assert_uint_ne(async_corr, 0);
	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		if (r->kind != MSPTI_ACTIVITY_KIND_MEMCPY)
			continue;
		n++;
		c = ((const msptiActivityMemcpy *)r)->correlationId;
		if (c == sync_corr || c == async_corr)
			joined++;
		else if (c == 0)
			alone++;
	}
	ck_assert_msg(n == 2 && joined == 2, "%zu MEMCPY records, %zu joined "
	    "to their call, %zu without it", n, joined, alone);
	aclrtFree(dev);
}
END_TEST

/* ---- one stream's tasks never overlap ---- */

/*
 * Kernels queued back to back (each starts on the device where the last
 * one ended) in rounds, a FlushAll after each: every flush samples the
 * device clock and refits the model, so consecutive kernels are converted
 * under different fits.  The device clock runs 2000 ppm fast, beyond
 * what the fit's slope may take, so each refit moves the mapping back by
 * microseconds; still no record may start before its predecessor on the
 * stream ended.
 */
#define ORDER_ROUNDS	40
#define ORDER_PER	50

static void
setup_fast_clock(void)
{
	setenv("NPUSIM_CLOCK_DRIFT_PPM", "2000", 1);
	setup();
}

START_TEST(test_stream_order)
{
	aclrtFuncHandle k;
	aclrtStream s;
	msptiActivity *r = NULL;
	msptiActivityKernel **v;
	size_t n = 0, i, j, overlaps = 0;
	uint64_t worst = 0;

	ck_assert_int_eq(npusimKernelRegister("b2b", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 200000, &k), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	for (i = 0; i < ORDER_ROUNDS; i++) {
		for (j = 0; j < ORDER_PER; j++)
			ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, s),
			    ACL_SUCCESS);
		/* The device is still busy: the next round queues behind. */
		msptiActivityFlushAll(1);
	}
	ck_assert_int_eq(aclrtSynchronizeStream(s), ACL_SUCCESS);
	msptiActivityFlushAll(1);
	v = calloc(ORDER_ROUNDS * ORDER_PER, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_KERNEL &&
		    n < ORDER_ROUNDS * ORDER_PER)
			v[n++] = (msptiActivityKernel *)r;
	ck_assert_uint_eq(n, ORDER_ROUNDS * ORDER_PER);
	/* Launch order is device order on one stream. */
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && v[j]->correlationId <
		    v[j - 1]->correlationId; j--) {
			msptiActivityKernel *x = v[j];

			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	for (i = 1; i < n; i++)
		if (v[i]->start < v[i - 1]->end) {
			overlaps++;
			if (v[i - 1]->end - v[i]->start > worst)
				worst = v[i - 1]->end - v[i]->start;
		}
	for (i = 0; i < n; i++)
		ck_assert_uint_gt(v[i]->end, v[i]->start);
	ck_assert_msg(overlaps == 0, "%zu of %zu kernels start before their "
	    "predecessor on the stream ended (by up to %llu ns)", overlaps, n,
	    (unsigned long long)worst);
	free(v);
	aclrtDestroyStream(s);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("api_devjoin");
	TCase *tc = tcase_create("join");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_exactly_once);
	suite_add_tcase(s, tc);
	tc = tcase_create("held");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup_stall, teardown);
	tcase_add_test(tc, test_held_cell);
	suite_add_tcase(s, tc);
	tc = tcase_create("order");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup_fast_clock, teardown);
	tcase_add_test(tc, test_stream_order);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

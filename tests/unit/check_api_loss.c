/*
 * No record lost without a counter saying so: deep device queues, Disable
 * before the device finishes, MSTX marks outstanding in any number, a
 * tool that gives no buffer, and a forked child.  Linked with libmspti
 * ahead of libnpusim (the link-time form of LD_PRELOAD).
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
#include <sys/wait.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"
#include "api-collect.h"
#include "sim-prefix.h"

#define BUF_SIZE	(64u * 1024u * 1024u)

static size_t
count_kind(msptiActivityKind kind)
{
	msptiActivity *r = NULL;
	size_t n = 0;

	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == kind)
			n++;
	return n;
}

static aclrtStream stream;

static void
setup(void)
{
	sim_prefix_set("loss");
	ck_assert_int_eq(api_collect_register(BUF_SIZE),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&stream), ACL_SUCCESS);
}

static void
teardown(void)
{
	aclrtDestroyStream(stream);
	aclrtResetDevice(0);
	aclFinalize();
	sim_device_unlink(0);
}

/*
 * 200,000 short kernels launched back to back, one synchronize: every
 * KERNEL record arrives, each with the API record of its launch.  The
 * device channel is made large enough for the whole run, so what is
 * tested is the agent's own pending tables.
 */
#define DEEP	200000u

START_TEST(test_deep_queue)
{
	aclrtFuncHandle k;
	msptiActivity *r = NULL;
	uint8_t *api_seen, *kern_seen;
	uint64_t max_corr = 0, corr;
	size_t nk = 0, i, unmatched = 0;
	size_t dropped = 1;

	ck_assert_int_eq(npusimKernelRegister("tiny", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 1000, &k), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	for (i = 0; i < DEEP; i++)
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, stream),
		    ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_API &&
		    ((msptiActivityApi *)r)->correlationId > max_corr)
			max_corr = ((msptiActivityApi *)r)->correlationId;
	api_seen = calloc(max_corr + 1, 1);
	kern_seen = calloc(max_corr + 1, 1);
	ck_assert_ptr_nonnull(api_seen);
	ck_assert_ptr_nonnull(kern_seen);
	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_API &&
		    strcmp(((msptiActivityApi *)r)->name,
		    "aclrtLaunchKernel") == 0)
			api_seen[((msptiActivityApi *)r)->correlationId] = 1;
	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		if (r->kind != MSPTI_ACTIVITY_KIND_KERNEL)
			continue;
		nk++;
		corr = ((msptiActivityKernel *)r)->correlationId;
		if (corr == 0 || corr > max_corr || !api_seen[corr] ||
		    kern_seen[corr])
			unmatched++;
		else
			kern_seen[corr] = 1;
	}
	ck_assert_uint_eq(
	    msptiActivityGetNumDroppedRecords(MSPTI_ACTIVITY_KIND_KERNEL,
	    &dropped), MSPTI_SUCCESS);
	ck_assert_msg(nk == DEEP && unmatched == 0,
	    "%zu kernel records of %u, %zu without their own launch, "
	    "dropped counter %zu", nk, DEEP, unmatched, dropped);
	ck_assert_uint_eq(dropped, 0);
	free(api_seen);
	free(kern_seen);
}
END_TEST

/*
 * The phase pattern: Enable; run; Disable; FlushAll delivers every kernel
 * launched while the kind was on, also those the device finishes after
 * the Disable; launches after it give none.
 */
START_TEST(test_disable_then_flush)
{
	aclrtFuncHandle k;
	size_t i;

	ck_assert_int_eq(npusimKernelRegister("phase", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 2000000, &k), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, stream),
		    ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityDisable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushAll(0), MSPTI_SUCCESS);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_KERNEL), 20);

	/* Disabled while the device still has 20 x 2 ms queued. */
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, stream),
		    ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityDisable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	for (i = 0; i < 5; i++)		/* not recorded */
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, stream),
		    ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushAll(0), MSPTI_SUCCESS);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_KERNEL), 40);
}
END_TEST

START_TEST(test_marker_domain_empty)
{
	ck_assert_int_eq(msptiActivityEnableMarkerDomain(""),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityDisableMarkerDomain(""),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityEnableMarkerDomain(NULL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityDisableMarkerDomain("d"), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnableMarkerDomain("d"), MSPTI_SUCCESS);
}
END_TEST

/*
 * MSTX: a device range keeps its name and domain, and its END, however
 * many marks and ranges come between (here more than 65,536, from two
 * threads); a device marker is never earlier than its host record.
 */
#define MANY	70000u

static void *
marker_thread(void *arg)
{
	mstxDomainHandle_t d = arg;
	unsigned i;

	for (i = 0; i < MANY / 2; i++)
		mstxDomainMarkA(d, "noise", NULL);
	return NULL;
}

START_TEST(test_mstx_outstanding)
{
	static mstxRangeId ids[MANY];
	mstxDomainHandle_t dom, noise;
	msptiActivity *r = NULL;
	mstxRangeId first;
	pthread_t t;
	size_t i, dev_start = 0, dev_end = 0, host_end = 0, ranges_ok = 0;
	uint64_t host_start_ts = 0;
	char name[32];

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	dom = mstxDomainCreateA("dom");
	noise = mstxDomainCreateA("noise");
	ck_assert_ptr_nonnull(dom);
	first = mstxDomainRangeStartA(dom, "first", stream);
	ck_assert_uint_ne(first, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, marker_thread, noise), 0);
	marker_thread(noise);
	pthread_join(t, NULL);
	/* As many ranges open at once, ended afterwards. */
	for (i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "r%zu", i % 100);
		ids[i] = mstxDomainRangeStartA(noise, name, NULL);
	}
	for (i = 0; i < MANY; i++)
		mstxDomainRangeEnd(noise, ids[i]);
	mstxDomainRangeEnd(dom, first);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		msptiActivityMarker *m = (msptiActivityMarker *)r;

		if (r->kind != MSPTI_ACTIVITY_KIND_MARKER)
			continue;
		if (m->id == first && m->sourceKind ==
		    MSPTI_ACTIVITY_SOURCE_KIND_HOST &&
		    m->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE)
			host_start_ts = m->timestamp;
		if (m->id != first && (m->flag & MSPTI_ACTIVITY_FLAG_MARKER_END) &&
		    m->name != NULL && m->name[0] == 'r' &&
		    m->domain != NULL && strcmp(m->domain, "noise") == 0)
			ranges_ok++;
		if (m->id != first)
			continue;
		ck_assert_ptr_nonnull(m->name);
		ck_assert_ptr_nonnull(m->domain);
		ck_assert_str_eq(m->name, "first");
		ck_assert_str_eq(m->domain, "dom");
		if (m->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_HOST) {
			if (m->flag == MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE)
				host_end++;
			continue;
		}
		if (m->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE)
			dev_start++;
		else if (m->flag == MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE)
			dev_end++;
	}
	ck_assert_uint_eq(host_end, 1);
	ck_assert_uint_eq(dev_start, 1);
	ck_assert_uint_eq(dev_end, 1);
	ck_assert_uint_eq(ranges_ok, MANY);
	/* Every device marker at or after its host record. */
	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		msptiActivityMarker *m = (msptiActivityMarker *)r;

		if (r->kind == MSPTI_ACTIVITY_KIND_MARKER && m->id == first &&
		    m->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE &&
		    m->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE)
			ck_assert_uint_ge(m->timestamp, host_start_ts);
	}
}
END_TEST

/* Device START never earlier than host START, over n ranges spaced by
 * gap_us. */
static void
check_marker_order(size_t n, unsigned gap_us)
{
	msptiActivity *r = NULL;
	uint64_t *host_ts;
	size_t i, checked = 0;
	mstxRangeId first = 0, id;

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	for (i = 0; i < n; i++) {
		id = mstxRangeStartA("ordered", stream);
		if (first == 0)
			first = id;
		mstxRangeEnd(id);
		if (gap_us != 0)
			usleep(gap_us);
	}
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	host_ts = calloc(n, sizeof(*host_ts));
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		msptiActivityMarker *m = (msptiActivityMarker *)r;

		if (r->kind == MSPTI_ACTIVITY_KIND_MARKER &&
		    m->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_HOST &&
		    m->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE &&
		    m->id >= first && m->id < first + n)
			host_ts[m->id - first] = m->timestamp;
	}
	r = NULL;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		msptiActivityMarker *m = (msptiActivityMarker *)r;

		if (r->kind == MSPTI_ACTIVITY_KIND_MARKER &&
		    m->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE &&
		    m->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE &&
		    m->id >= first && m->id < first + n) {
			ck_assert_uint_ne(host_ts[m->id - first], 0);
			ck_assert_msg(m->timestamp >=
			    host_ts[m->id - first],
			    "device START %llu ns before its host START",
			    (unsigned long long)(host_ts[m->id - first] -
			    m->timestamp));
			checked++;
		}
	}
	ck_assert_uint_eq(checked, n);
	free(host_ts);
}

START_TEST(test_device_marker_order)
{
	check_marker_order(2000, 0);
}
END_TEST

/* The same with a device clock running 2000 ppm slow: the host-time
 * model lags behind it, and must still not put a device START first. */
static void
setup_slow_clock(void)
{
	setenv("NPUSIM_CLOCK_DRIFT_PPM", "-2000", 1);
	setup();
}

START_TEST(test_device_marker_order_drift)
{
	check_marker_order(300, 2000);
}
END_TEST

/* A tool that gives no buffer loses records, and the counter says how
 * many, per kind. */
START_TEST(test_dropped_counted)
{
	size_t before = 0, after = 0, total0 = 0, total1 = 0, other = 0;
	size_t free_b, total_b;
	int i;

	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_COUNT, &before), MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_API, NULL), MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_API, &before), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_INVALID, &total0), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	atomic_store(&api_collect_none, 1);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &free_b,
		    &total_b), ACL_SUCCESS);
	atomic_store(&api_collect_none, 0);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_API, &after), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_INVALID, &total1), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_KERNEL, &other), MSPTI_SUCCESS);
	ck_assert_uint_eq(after - before, 10);
	ck_assert_uint_eq(total1 - total0, 10);
	ck_assert_uint_eq(other, 0);
}
END_TEST

/* A forked child delivers none of the records its parent had buffered. */
START_TEST(test_fork_parent_records)
{
	size_t free_b, total_b;
	pid_t pid;
	int status, i;

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &free_b,
		    &total_b), ACL_SUCCESS);
	mstxMarkA("parent", NULL);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		msptiActivity *r = NULL;
		size_t theirs = 0, mine = 0;

		alarm(20);
		got_len = 0;
		mstxMarkA("child", NULL);
		msptiActivityFlushAll(1);
		while (msptiActivityGetNextRecord(got, got_len, &r) ==
		    MSPTI_SUCCESS) {
			msptiActivityMarker *m = (msptiActivityMarker *)r;

			if (r->kind == MSPTI_ACTIVITY_KIND_API &&
			    ((msptiActivityApi *)r)->pt.processId !=
			    (uint32_t)getpid())
				theirs++;
			if (r->kind == MSPTI_ACTIVITY_KIND_MARKER) {
				if (strcmp(m->name, "child") == 0)
					mine++;
				else
					theirs++;
			}
		}
		if (theirs != 0)
			fprintf(stderr, "child delivered %zu parent records\n",
			    theirs);
		_exit(theirs == 0 && mine == 1 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the child delivered its parent's records");
	/* The parent still has its own. */
	msptiActivityFlushAll(1);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_API), 5);
}
END_TEST

/*
 * A device channel far too small for the run overruns: whatever is lost
 * is counted for KERNEL, so delivered + dropped accounts for every launch
 * (no loss is silent).  Holds whether or not the reader kept up.
 */
static void
setup_small_channel(void)
{
	setenv("NPUSIM_CHANNEL_RECORDS", "16", 1);
	setup();
}

START_TEST(test_channel_overrun_counted)
{
	aclrtFuncHandle k;
	size_t before = 0, after = 0, n, i, launched = 20000;

	ck_assert_int_eq(npusimKernelRegister("burst", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 1000, &k), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_KERNEL, &before), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	for (i = 0; i < launched; i++)
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, stream),
		    ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	n = count_kind(MSPTI_ACTIVITY_KIND_KERNEL);
	ck_assert_int_eq(msptiActivityGetNumDroppedRecords(
	    MSPTI_ACTIVITY_KIND_KERNEL, &after), MSPTI_SUCCESS);
	ck_assert_msg(n + (after - before) == launched,
	    "%zu delivered + %zu counted lost != %zu launched", n,
	    after - before, launched);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("api_loss");
	TCase *tc = tcase_create("loss");
	SRunner *sr;
	int failed;

	/* The whole deep run fits the device channel: what is tested is the
	 * agent's pending tables, not the simulator's ring. */
	setenv("NPUSIM_CHANNEL_RECORDS", "524288", 1);
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_deep_queue);
	tcase_add_test(tc, test_disable_then_flush);
	tcase_add_test(tc, test_marker_domain_empty);
	tcase_add_test(tc, test_mstx_outstanding);
	tcase_add_test(tc, test_device_marker_order);
	tcase_add_test(tc, test_dropped_counted);
	tcase_add_test(tc, test_fork_parent_records);
	suite_add_tcase(s, tc);
	tc = tcase_create("drift");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup_slow_clock, teardown);
	tcase_add_test(tc, test_device_marker_order_drift);
	suite_add_tcase(s, tc);
	tc = tcase_create("overrun");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup_small_channel, teardown);
	tcase_add_test(tc, test_channel_overrun_counted);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

/*
 * check_sim_channel.c - the device profiling channel and metrics page:
 * records match what was launched, device timestamps carry the clock
 * offset, several processes write one channel, and a slow reader detects
 * its overrun.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <npusim/npusim.h>
#include <runtime/rt.h>

#define MAXREC 4096

static char			 base_prefix[64];
static struct npusim_record	 recs[MAXREC];

/* Each test uses its own shm prefix so capacities and heads are fresh. */
static void
use_prefix(const char *tag)
{
	char	p[128];

	snprintf(p, sizeof p, "%s-%s", base_prefix, tag);
	setenv("NPUSIM_SHM_PREFIX", p, 1);
}

static void
unlink_prefix(const char *tag)
{
	char	name[160];
	int	d;

	for (d = 0; d < 2; d++) {
		snprintf(name, sizeof name, "/%s-%s-dev%d-chan", base_prefix,
		    tag, d);
		shm_unlink(name);
		snprintf(name, sizeof name, "/%s-%s-dev%d-metrics",
		    base_prefix, tag, d);
		shm_unlink(name);
	}
}

static uint64_t
mono_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/* Read until n records arrived or a second passed. */
static int
drain(struct npusim_channel_reader *r, int want, uint64_t *lost)
{
	uint64_t	l, deadline = mono_ns() + 1000000000ULL;
	int		n = 0, got;

	*lost = 0;
	while (n < want && mono_ns() < deadline) {
		got = npusim_channel_read(r, recs + n, MAXREC - (size_t)n, &l);
		ck_assert_int_ge(got, 0);
		n += got;
		*lost += l;
		if (got == 0)
			usleep(1000);
	}
	return (n);
}

START_TEST(test_records)
{
	struct npusim_channel_reader	 r;
	aclrtFuncHandle			 mm, relu;
	aclrtStream			 s;
	aclrtEvent			 ev;
	char				*dev, host[1024];
	uint32_t			 tid[5], sid[5];
	uint64_t			 lost, rt, d0, d1, dur;
	int32_t				 stream_id;
	int				 n;

	use_prefix("rec");
	ck_assert_int_eq(npusim_channel_open(0, &r), 0);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(npusimKernelRegister("MatMul", NPUSIM_KERNEL_AI_CORE,
	    1e9, 1e6, 100000, &mm), ACL_SUCCESS);
	ck_assert_int_eq(npusimKernelRegister("Relu", NPUSIM_KERNEL_AI_VECTOR,
	    1e6, 8e6, 0, &relu), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtStreamGetId(s, &stream_id), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateEvent(&ev), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMalloc((void **)&dev, sizeof host,
	    ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
	ck_assert_int_eq(npusimReadClock(0, &rt, &d0), ACL_SUCCESS);

	ck_assert_int_eq(aclrtLaunchKernel(mm, 24, NULL, 0, s), ACL_SUCCESS);
	rtGetTaskIdAndStreamID(&tid[0], &sid[0]);
	ck_assert_int_eq(aclrtLaunchKernel(relu, 8, NULL, 0, s), ACL_SUCCESS);
	rtGetTaskIdAndStreamID(&tid[1], &sid[1]);
	ck_assert_int_eq(aclrtMemcpyAsync(dev, sizeof host, host, sizeof host,
	    ACL_MEMCPY_HOST_TO_DEVICE, s), ACL_SUCCESS);
	rtGetTaskIdAndStreamID(&tid[2], &sid[2]);
	ck_assert_int_eq(rtProfilerTraceEx(42, 7, 3, s), RT_ERROR_NONE);
	rtGetTaskIdAndStreamID(&tid[3], &sid[3]);
	ck_assert_int_eq(aclrtRecordEvent(ev, s), ACL_SUCCESS);
	rtGetTaskIdAndStreamID(&tid[4], &sid[4]);
	ck_assert_int_eq(aclrtSynchronizeStream(s), ACL_SUCCESS);
	ck_assert_int_eq(npusimReadClock(0, &rt, &d1), ACL_SUCCESS);

	n = drain(&r, 5, &lost);
	ck_assert_int_eq(n, 5);
	ck_assert_uint_eq(lost, 0);

	ck_assert_int_eq(recs[0].kind, NPUSIM_TASK_KERNEL);
	ck_assert_str_eq(recs[0].name, "MatMul");
	ck_assert_int_eq(recs[0].kernel_type, NPUSIM_KERNEL_AI_CORE);
	ck_assert_uint_eq(recs[0].block_dim, 24);
	ck_assert_uint_eq(recs[0].flops, 1000000000ULL);
	ck_assert_int_eq(recs[1].kind, NPUSIM_TASK_KERNEL);
	ck_assert_str_eq(recs[1].name, "Relu");
	ck_assert_int_eq(recs[1].kernel_type, NPUSIM_KERNEL_AI_VECTOR);
	ck_assert_int_eq(recs[2].kind, NPUSIM_TASK_MEMCPY);
	ck_assert_uint_eq(recs[2].bytes, sizeof host);
	ck_assert_uint_eq(recs[2].memcpy_kind, ACL_MEMCPY_HOST_TO_DEVICE);
	ck_assert_int_eq(recs[3].kind, NPUSIM_TASK_MARKER);
	ck_assert_uint_eq(recs[3].marker_id, 42);
	ck_assert_uint_eq(recs[3].model_id, 7);
	ck_assert_uint_eq(recs[3].tag_id, 3);
	ck_assert_int_eq(recs[4].kind, NPUSIM_TASK_EVENT);
	for (n = 0; n < 5; n++) {
		ck_assert_int_eq(recs[n].device, 0);
		ck_assert_uint_eq(recs[n].stream_id, (uint32_t)stream_id);
		ck_assert_uint_eq(recs[n].stream_id, sid[n]);
		ck_assert_uint_eq(recs[n].task_id, tid[n]);
		ck_assert_int_eq(recs[n].pid, (int32_t)getpid());
		ck_assert_uint_le(recs[n].start_ns, recs[n].end_ns);
		/* Device-clock times fall inside the device-clock window. */
		ck_assert_uint_ge(recs[n].start_ns, d0);
		ck_assert_uint_le(recs[n].end_ns, d1);
		if (n > 0)
			ck_assert_uint_ge(recs[n].start_ns,
			    recs[n - 1].end_ns);
	}
	/* Durations are the model's (times ppm-level drift). */
	dur = recs[0].end_ns - recs[0].start_ns;
	ck_assert_msg(dur >= 100000 && dur <= 100100, "MatMul %llu",
	    (unsigned long long)dur);
	dur = recs[1].end_ns - recs[1].start_ns;
	ck_assert_msg(dur + 100 >= npusimKernelDuration(relu) &&
	    dur <= npusimKernelDuration(relu) + 100, "Relu %llu vs %llu",
	    (unsigned long long)dur,
	    (unsigned long long)npusimKernelDuration(relu));
	ck_assert_uint_eq(recs[3].start_ns, recs[3].end_ns);
	npusim_channel_close(&r);
	unlink_prefix("rec");
}
END_TEST

START_TEST(test_clock_in_records)
{
	struct npusim_channel_reader	r;
	struct npusim_clock_sample	cs;
	aclrtFuncHandle			k;
	uint64_t			m0, lost;
	int64_t				skew;
	int				i;

	use_prefix("clk");
	setenv("NPUSIM_CLOCK_OFFSET_NS", "3000000000", 1);
	setenv("NPUSIM_CLOCK_DRIFT_PPM", "200", 1);
	ck_assert_int_eq(npusim_channel_open(1, &r), 0);
	ck_assert_int_eq(aclrtSetDevice(1), ACL_SUCCESS);
	ck_assert_int_eq(npusimKernelRegister("K", NPUSIM_KERNEL_AI_CORE, 0,
	    0, 50000, &k), ACL_SUCCESS);
	m0 = mono_ns();
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, NULL), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	ck_assert_int_eq(drain(&r, 1, &lost), 1);
	/* start - mono = offset (3 s + 137 us) + mono * 201 ppm. */
	skew = (int64_t)(recs[0].start_ns - m0) - 3000137000LL -
	    (int64_t)((double)m0 * 201e-6);
	ck_assert_msg(skew >= -1000 && skew < 500000000LL, "skew %lld",
	    (long long)skew);
	/* The header's clock samples are refreshed and consistent. */
	for (i = 0; i < 200; i++) {
		if (npusim_channel_clock(&r, &cs) == 0)
			break;
		usleep(5000);
	}
	ck_assert_int_eq(npusim_channel_clock(&r, &cs), 0);
	skew = (int64_t)(cs.device_ns - cs.host_monotonic_ns) -
	    3000137000LL - (int64_t)((double)cs.host_monotonic_ns * 201e-6);
	ck_assert_msg(skew >= -1000 && skew <= 1000, "sample skew %lld",
	    (long long)skew);
	ck_assert(cs.host_realtime_ns > cs.host_monotonic_ns);
	npusim_channel_close(&r);
	unlink_prefix("clk");
}
END_TEST

START_TEST(test_overrun)
{
	struct npusim_channel_reader	r;
	aclrtFuncHandle			k;
	uint64_t			lost;
	int				i, n;

	use_prefix("ovr");
	setenv("NPUSIM_CHANNEL_RECORDS", "64", 1);
	ck_assert_int_eq(npusim_channel_open(0, &r), 0);
	ck_assert_uint_eq(r.hdr->capacity, 64);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(npusimKernelRegister("Tiny", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 1, &k), ACL_SUCCESS);
	for (i = 0; i < 500; i++)
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, NULL),
		    ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	/* The reader slept through 500 records of a 64-slot ring. */
	n = npusim_channel_read(&r, recs, MAXREC, &lost);
	ck_assert_int_le(n, 64);
	ck_assert_uint_ge(lost, 436);
	ck_assert_uint_eq((uint64_t)n + lost, 500);
	ck_assert_uint_eq(recs[n - 1].task_id, recs[0].task_id + (uint32_t)n -
	    1);
	npusim_channel_close(&r);
	unlink_prefix("ovr");
}
END_TEST

START_TEST(test_disabled_and_multiwriter)
{
	struct npusim_channel_reader	r;
	aclrtFuncHandle			k;
	pid_t				pid[2];
	uint64_t			lost;
	int				i, j, n, status, mine[2] = { 0, 0 };

	use_prefix("mw");
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(npusimKernelRegister("Early", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 1000, &k), ACL_SUCCESS);
	/* Nobody is reading: nothing is recorded. */
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, NULL), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	ck_assert_int_eq(npusim_channel_open(0, &r), 0);
	ck_assert_uint_ge(r.hdr->dropped_disabled, 1);
	ck_assert_int_eq(npusim_channel_read(&r, recs, MAXREC, &lost), 0);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		ck_assert_int_ne(pid[i], -1);
		if (pid[i] == 0) {
			aclrtFuncHandle	kk;
			aclrtStream	s;

			if (aclrtSetDevice(0) != 0 || aclrtCreateStream(&s) ||
			    npusimKernelRegister("Child", NPUSIM_KERNEL_AI_CORE,
			    0, 0, 2000, &kk))
				_exit(1);
			for (j = 0; j < 100; j++)
				if (aclrtLaunchKernel(kk, 1, NULL, 0, s))
					_exit(1);
			_exit(aclrtSynchronizeStream(s) == 0 ? 0 : 1);
		}
	}
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	n = drain(&r, 200, &lost);
	ck_assert_int_eq(n, 200);
	ck_assert_uint_eq(lost, 0);
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(recs[i].name, "Child");
		for (j = 0; j < 2; j++)
			if (recs[i].pid == pid[j])
				mine[j]++;
	}
	ck_assert_int_eq(mine[0], 100);
	ck_assert_int_eq(mine[1], 100);
	npusim_channel_close(&r);
	unlink_prefix("mw");
}
END_TEST

START_TEST(test_metrics)
{
	struct npusim_metrics_snapshot	m;
	aclrtFuncHandle			k;
	void				*p;
	int				i, ok = 0;

	use_prefix("met");
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMalloc(&p, 1U << 20, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_SUCCESS);
	ck_assert_int_eq(npusimKernelRegister("Busy", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 400000000ULL, &k), ACL_SUCCESS);
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, NULL), ACL_SUCCESS);
	/* Sample while the device is busy; the sampler runs every 20 ms. */
	for (i = 0; i < 30 && !ok; i++) {
		usleep(10000);
		if (npusim_metrics_read(0, &m) == 0 && m.utilization > 0.3 &&
		    m.tasks_launched >= 1 && m.mem_used >= (1U << 20))
			ok = 1;
	}
	ck_assert_msg(ok, "util %f launched %llu mem %llu", m.utilization,
	    (unsigned long long)m.tasks_launched,
	    (unsigned long long)m.mem_used);
	ck_assert(m.power_w > 80.0);
	ck_assert(m.temperature_c >= 35.0);
	ck_assert_uint_ge(m.processes, 1);
	ck_assert_uint_gt(m.mem_total, m.mem_used);
	ck_assert_int_eq(npusim_metrics_read(9, &m), -EINVAL);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	unlink_prefix("met");
}
END_TEST

static Suite *
sim_channel_suite(void)
{
	Suite	*s = suite_create("sim_channel");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_records);
	tcase_add_test(tc, test_clock_in_records);
	tcase_add_test(tc, test_overrun);
	tcase_add_test(tc, test_disabled_and_multiwriter);
	tcase_add_test(tc, test_metrics);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	snprintf(base_prefix, sizeof base_prefix, "npusimtest-ch-%d",
	    (int)getpid());
	setenv("NPUSIM_DEVICES", "2", 1);
	unsetenv("NPUSIM_CLOCK_OFFSET_NS");
	unsetenv("NPUSIM_CLOCK_DRIFT_PPM");
	unsetenv("NPUSIM_TIME_SCALE");
	unsetenv("NPUSIM_CHANNEL_RECORDS");
	sr = srunner_create(sim_channel_suite());
	/* Every test needs a fresh process: the library reads env once. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? 0 : 1);
}

/*
 * The agent's clock (agent/hostclock.c) in a real agent process: MARKER
 * timestamps lie within HC_BOUND_NS of CLOCK_REALTIME read around each
 * call, never go back within a thread or across a hand-off between two
 * threads, across several refits (MSPTI_CLOCK_REFIT_MS=20).  main() runs
 * the suite twice, in child processes: with the default clock (the TSC
 * where it is usable) and with MSPTI_CLOCK=realtime (clock_gettime); the
 * agent reads the variables once, at its start.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"
#include "api-collect.h"

/* Stated bound on |mapped TSC - CLOCK_REALTIME|: loose on purpose (a
 * preempted read widens the bracket, not the error). */
#define HC_BOUND_NS	1000000ull
#define HC_MARKS	3000
#define nitems_(a)	(sizeof(a) / sizeof((a)[0]))

static uint64_t
realtime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The markers collected, in delivery order (per thread: call order). */
static size_t
markers(msptiActivityMarker **out, size_t max)
{
	msptiActivity *r = NULL;
	size_t n = 0;

	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_MARKER && n < max)
			out[n++] = (msptiActivityMarker *)r;
	return n;
}

static void
start(void)
{
	got_len = 0;
	ck_assert_int_eq(api_collect_register(1 << 20),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
}

/* Brackets every mark with CLOCK_REALTIME; sleeps now and then so the
 * marks span several refit periods. */
START_TEST(test_bound_and_order)
{
	static uint64_t before[HC_MARKS], after[HC_MARKS];
	static msptiActivityMarker *m[HC_MARKS];
	uint64_t worst = 0;
	size_t n;

	start();
	for (int i = 0; i < HC_MARKS; i++) {
		before[i] = realtime();
		mstxMarkA("hc", NULL);
		after[i] = realtime();
		if (i % 30 == 29)
			usleep(2000);
	}
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	n = markers(m, HC_MARKS);
	ck_assert_uint_eq(n, HC_MARKS);
	for (size_t i = 0; i < n; i++) {
		uint64_t ts = m[i]->timestamp, e = ts < before[i] ?
		    before[i] - ts : ts > after[i] ? ts - after[i] : 0;

		if (e > worst)
			worst = e;
		ck_assert_msg(e <= HC_BOUND_NS, "mark %zu: %llu ns outside "
		    "[%llu, %llu] (bound %llu)", i, (unsigned long long)ts,
		    (unsigned long long)before[i],
		    (unsigned long long)after[i], HC_BOUND_NS);
		if (i > 0)
			ck_assert_msg(ts >= m[i - 1]->timestamp, "mark %zu goes "
			    "back %llu ns", i, (unsigned long long)
			    (m[i - 1]->timestamp - ts));
	}
	printf("clock %s: largest distance from CLOCK_REALTIME %llu ns\n",
	    getenv("MSPTI_CLOCK") ? getenv("MSPTI_CLOCK") : "default",
	    (unsigned long long)worst);
}
END_TEST

/* Two threads take turns: each mark follows the other thread's. */
static pthread_mutex_t turn_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
static int turn, turns_left = 600;

static void *
taker(void *arg)
{
	int me = (int)(intptr_t)arg;

	pthread_mutex_lock(&turn_mtx);
	for (;;) {
		while (turn != me && turns_left > 0)
			pthread_cond_wait(&turn_cv, &turn_mtx);
		if (turns_left <= 0)
			break;
		mstxMarkA(me ? "b" : "a", NULL);
		turns_left--;
		if (turns_left % 50 == 0)
			usleep(3000);
		turn = !me;
		pthread_cond_broadcast(&turn_cv);
	}
	pthread_mutex_unlock(&turn_mtx);
	return NULL;
}

START_TEST(test_handoff_order)
{
	static msptiActivityMarker *m[700];
	static msptiActivityMarker *a[700], *b[700];
	pthread_t t[2];
	size_t n, na = 0, nb = 0, ia = 0, ib = 0;
	uint64_t last = 0;

	start();
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, taker,
		    (void *)(intptr_t)i), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	n = markers(m, 700);
	ck_assert_uint_eq(n, 600);
	/* Each thread's marks in call order; the turns alternate a, b. */
	for (size_t i = 0; i < n; i++) {
		if (strcmp(m[i]->name, "a") == 0)
			a[na++] = m[i];
		else
			b[nb++] = m[i];
	}
	ck_assert_uint_eq(na, 300);
	ck_assert_uint_eq(nb, 300);
	for (size_t k = 0; k < n; k++) {
		msptiActivityMarker *x = k % 2 == 0 ? a[ia++] : b[ib++];

		ck_assert_msg(x->timestamp >= last, "turn %zu goes back %llu "
		    "ns", k, (unsigned long long)(last - x->timestamp));
		last = x->timestamp;
	}
}
END_TEST

/* Threads read the clock as fast as they can (marks) across many refits
 * (every 20 ms): each thread's timestamps never go back, whether a read
 * meets a refit in progress, a mapping past its period or the switch to
 * the next one. */
#define HAMMER_THREADS	3
#define HAMMER_MARKS	50000		/* ~5 us apart: ~15 refits */
#define HAMMER_GAP_NS	5000

/* Marks a few us apart, all threads at once: a refit (200 us with the
 * test's delay) comes while the others read. */
static void *
hammer(void *arg)
{
	char name[8];

	snprintf(name, sizeof(name), "h%d", (int)(intptr_t)arg);
	for (int i = 0; i < HAMMER_MARKS; i++) {
		uint64_t until = realtime() + HAMMER_GAP_NS;

		mstxMarkA(name, NULL);
		while (realtime() < until)
			;
	}
	return NULL;
}

START_TEST(test_hammer_refits)
{
	static msptiActivityMarker *m[HAMMER_THREADS * HAMMER_MARKS + 16];
	uint64_t last[HAMMER_THREADS] = { 0 }, back = 0, worst = 0;
	size_t n, per[HAMMER_THREADS] = { 0 };
	pthread_t t[HAMMER_THREADS];

	start();
	for (int i = 0; i < HAMMER_THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, hammer,
		    (void *)(intptr_t)i), 0);
	for (int i = 0; i < HAMMER_THREADS; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	n = markers(m, nitems_(m));
	ck_assert_uint_eq(n, HAMMER_THREADS * HAMMER_MARKS);
	for (size_t i = 0; i < n; i++) {
		int k = m[i]->name[1] - '0';

		ck_assert(k >= 0 && k < HAMMER_THREADS);
		per[k]++;
		if (m[i]->timestamp < last[k]) {
			back++;
			if (last[k] - m[i]->timestamp > worst)
				worst = last[k] - m[i]->timestamp;
		} else
			last[k] = m[i]->timestamp;
	}
	for (int k = 0; k < HAMMER_THREADS; k++)
		ck_assert_uint_eq(per[k], HAMMER_MARKS);
	ck_assert_msg(back == 0, "%llu marks went back in their thread, by "
	    "up to %llu ns", (unsigned long long)back,
	    (unsigned long long)worst);
}
END_TEST

static int
run_suite(void)
{
	Suite *s = suite_create("hostclock");
	TCase *tc = tcase_create("clock");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bound_and_order);
	tcase_add_test(tc, test_handoff_order);
	tcase_add_test(tc, test_hammer_refits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	static const char *const modes[] = { NULL, "realtime" };
	int bad = 0;

	(void)argc;
	if (getenv("CHECK_HOSTCLOCK_CHILD") != NULL)
		return run_suite();
	for (size_t i = 0; i < 2; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			return 1;
		if (pid == 0) {
			setenv("CHECK_HOSTCLOCK_CHILD", "1", 1);
			setenv("MSPTI_CLOCK_REFIT_MS", "20", 1);
			/* The mapping 300 us ahead of CLOCK_REALTIME: a read
			 * that falls back to clock_gettime shows. */
			setenv("MSPTI_TEST_TSC_OFFSET_NS", "300000", 1);
			/* Each refit takes 200 us (preempted): the other
			 * threads read the clock meanwhile. */
			setenv("MSPTI_TEST_REFIT_DELAY_US", "200", 1);
			if (modes[i] != NULL)
				setenv("MSPTI_CLOCK", modes[i], 1);
			else
				unsetenv("MSPTI_CLOCK");
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "check_hostclock: clock %s failed\n",
			    modes[i] ? modes[i] : "default");
			bad = 1;
		}
	}
	return bad;
}

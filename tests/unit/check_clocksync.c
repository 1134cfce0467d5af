/* lib/clocksync: exact fits on synthetic pairs, and recovery of a known
 * offset and drift from the simulator's device clock. */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <npusim/npusim.h>

#include "clocksync.h"

/* host = 1.7e18 + t, device = 5e9 + t * (1 + 25e-6): drift of the model
 * (host per device ns) is 1 / (1 + 25e-6) - 1. */
START_TEST(synthetic_exact)
{
	struct clocksync cs;
	const double dd = 25e-6;
	uint64_t h0 = 1700000000000000000ull, d0 = 5000000000ull, t;
	int i;

	clocksync_init(&cs);
	ck_assert(!clocksync_ready(&cs));
	ck_assert_uint_eq(clock_model_to_host(&cs.model, 123), 123);
	for (i = 0; i < 100; i++) {
		t = (uint64_t)i * 50000000ull;		/* 5 s in all */
		ck_assert(clocksync_add(&cs, h0 + t,
		    d0 + t + (uint64_t)llround((double)t * dd), 0));
	}
	ck_assert(clocksync_ready(&cs));
	ck_assert_uint_eq(cs.model.samples, CLOCKSYNC_SAMPLES);
	ck_assert_double_eq_tol(cs.model.drift, 1.0 / (1.0 + dd) - 1.0, 1e-9);
	ck_assert_double_lt(cs.model.error_ns, 2.0);
	/* Map a device time 10 s after the start, beyond the samples. */
	t = 10000000000ull;
	ck_assert_int_lt(llabs((long long)(clock_model_to_host(&cs.model,
	    d0 + t + (uint64_t)llround((double)t * dd)) - (h0 + t))), 3);
}
END_TEST

/*
 * A pair whose host read was preempted (a loaded machine: the bracket
 * around the device read took 3 ms, so its midpoint is 1.5 ms off) is
 * one sample in 64: it must not move the line.  A plain least-squares
 * fit moves the offset by ~23 us and tilts the drift.
 */
START_TEST(preempted_pair_ignored)
{
	struct clocksync cs;
	const double dd = 25e-6;
	uint64_t h0 = 1700000000000000000ull, d0 = 5000000000ull, t;

	clocksync_init(&cs);
	for (int i = 0; i < 64; i++) {
		t = (uint64_t)i * 10000000ull;		/* 640 ms */
		/* 1 us of ordinary pairing noise, alternating. */
		clocksync_add(&cs, h0 + t + (i % 2 ? 1000 : 0) +
		    (i == 40 ? 1500000 : 0),
		    d0 + t + (uint64_t)llround((double)t * dd), 0);
	}
	ck_assert_uint_eq(cs.model.samples, 63);
	/* The alternating noise alone tilts the line by 0.07 ppm. */
	ck_assert_double_eq_tol(cs.model.drift, 1.0 / (1.0 + dd) - 1.0, 2e-7);
	t = 320000000ull;
	ck_assert_int_lt(llabs((long long)(clock_model_to_host(&cs.model,
	    d0 + t + (uint64_t)llround((double)t * dd)) - (h0 + t + 500))),
	    600);
	ck_assert_double_lt(cs.model.error_ns, 600.0);
}
END_TEST

START_TEST(short_span_offset_only)
{
	struct clocksync cs;

	clocksync_init(&cs);
	/* 100 ms of samples: too short for a slope, offset only. */
	for (int i = 0; i < 10; i++)
		clocksync_add(&cs, 1000000000000ull + i * 10000000ull,
		    77 + i * 10000000ull + i * 1000, 0);
	ck_assert_double_eq(cs.model.drift, 0.0);
	ck_assert_uint_eq(cs.model.samples, 10);
	/* The line passes through the newest pair, not the pairs' mean (a
	 * device 100 ppm fast would be 4.5 us off at the newest pair). */
	ck_assert_uint_eq(clock_model_to_host(&cs.model,
	    77 + 90000000ull + 9000), 1000000000000ull + 90000000ull);
}
END_TEST

/*
 * A capture's first samples: the device runs 25 ppm fast, a pair comes
 * every 20 ms (the simulator's header refresh), each host read the
 * midpoint of a bracket BR ns wide and off by up to BR / 2.  Device
 * times from 20 ms before the newest pair to 40 ms after it (what a
 * drain converts) map within 150 ns from the third pair on, within the
 * drift times 60 ms before: a model that keeps the mean offset of the
 * pairs (no drift yet) is off by the drift times half their span.
 */
#define YOUNG_BR	60
static void
young_fit(uint32_t br, int64_t later_tol, int64_t early_tol)
{
	struct clocksync cs;
	const double dd = 25e-6;
	uint64_t h0 = 1700000000000000000ull, d0 = 5000000000ull;
	uint64_t x = 88172645463325252ull;

	clocksync_init(&cs);
	for (int k = 0; k < 12; k++) {
		uint64_t t = (uint64_t)k * 20000000ull;
		int64_t noise, worst = 0;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		noise = (int64_t)(x % (YOUNG_BR + 1)) - YOUNG_BR / 2;
		ck_assert(clocksync_add(&cs, h0 + t + (uint64_t)noise,
		    d0 + t + (uint64_t)llround((double)t * dd), br));
		for (int64_t q = -20000000; q <= 40000000; q += 5000000) {
			int64_t u = (int64_t)t + q, e;

			if (u < 0)
				continue;
			e = (int64_t)(clock_model_to_host(&cs.model, d0 +
			    (uint64_t)u + (uint64_t)llround((double)u * dd)) -
			    (h0 + (uint64_t)u));
			if (llabs(e) > worst)
				worst = llabs(e);
		}
		ck_assert_msg(worst <= (k >= 2 ? later_tol : early_tol),
		    "pair %d (bracket %u ns): a device time maps %lld ns off",
		    k + 1, br, (long long)worst);
	}
}

START_TEST(young_fit_brackets)
{
	young_fit(YOUNG_BR, 150, 1600);
}
END_TEST

/* Pairs of unknown quality: no slope before 200 ms, but the offset is the
 * newest pair's, so a device time is off by at most the drift times the
 * 40 ms since it (plus the pairing noise). */
START_TEST(young_fit_unknown)
{
	young_fit(0, 1100, 1600);
}
END_TEST

START_TEST(duplicates_and_reset)
{
	struct clocksync cs;

	clocksync_init(&cs);
	ck_assert(clocksync_add(&cs, 1000, 2000, 0));
	ck_assert(!clocksync_add(&cs, 1000, 2000, 0));	/* same header sample */
	ck_assert(!clocksync_add(&cs, 0, 3000, 0));
	ck_assert(!clocksync_add(&cs, 1000, 0, 0));
	ck_assert_uint_eq(cs.rejected, 3);
	ck_assert(clocksync_add(&cs, 1500, 2500, 0));
	ck_assert_uint_eq(cs.model.samples, 2);
	/* Device clock went back: reset, new epoch. */
	ck_assert(clocksync_add(&cs, 10000, 100, 0));
	ck_assert_uint_eq(cs.model.samples, 1);
	ck_assert_uint_eq(clock_model_to_host(&cs.model, 150), 10050);
}
END_TEST

START_TEST(absurd_slope_rejected)
{
	struct clocksync cs;

	clocksync_init(&cs);
	/* A device running 2x fast is not a clock we believe: drift 0. */
	for (int i = 0; i < 10; i++)
		clocksync_add(&cs, 1000000000000ull + i * 100000000ull,
		    1 + i * 200000000ull, 0);
	ck_assert_double_eq(cs.model.drift, 0.0);
}
END_TEST

/* clock_round is llround: halves away from zero, on either side of 0,
 * near 2^52 where doubles stop having fractions, and on random products
 * of the kind clock_model_to_host forms (offset times a small drift). */
START_TEST(round_is_llround)
{
	static const double fixed[] = { 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5,
	    -2.5, 0.49999999999999994, -0.49999999999999994, 1e-300,
	    4503599627370495.5, -4503599627370495.5, 4503599627370497.0,
	    9007199254740993.0, -9007199254740993.0, 1e18, -1e18 };
	uint64_t x = 0x2545f4914f6cdd1dull;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		ck_assert_msg(clock_round(fixed[i]) == llround(fixed[i]),
		    "clock_round(%.17g) = %lld, llround %lld", fixed[i],
		    (long long)clock_round(fixed[i]), llround(fixed[i]));
	for (int i = 0; i < 1000000; i++) {
		double y;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		switch (i % 3) {
		case 0:	/* a device offset times a drift */
			y = (double)(int64_t)(x >> 20) * ((double)(int32_t)x *
			    1e-15);
			break;
		case 1:	/* an exact half */
			y = (double)((int64_t)(x >> 12) - (1ll << 51)) / 2.0;
			break;
		default:	/* any magnitude */
			y = ldexp((double)(int64_t)x, -(int)(x % 80));
			break;
		}
		ck_assert_msg(clock_round(y) == llround(y),
		    "clock_round(%.17g) = %lld, llround %lld", y,
		    (long long)clock_round(y), llround(y));
	}
}
END_TEST

/* The simulator's device clock (NPUSIM_CLOCK_OFFSET_NS, _DRIFT_PPM set in
 * main before its first call): pairs 50 ms apart over 2 s give the drift
 * within a few ppm and map a fresh pair within tens of µs. */
START_TEST(sim_clock)
{
	struct clocksync cs;
	struct timespec ts = { 0, 50000000 };
	uint64_t h, d;
	double want;
	int64_t off, ppb;

	ck_assert_int_eq(npusimClockParams(1, &off, &ppb), ACL_SUCCESS);
	ck_assert_int_eq(off, 3000000000ll + 137000);
	ck_assert_int_eq(ppb, 40000 + 1000);
	want = 1.0 / (1.0 + (double)ppb * 1e-9) - 1.0;
	clocksync_init(&cs);
	for (int i = 0; i < 41; i++) {
		ck_assert_int_eq(npusimReadClock(1, &h, &d), ACL_SUCCESS);
		clocksync_add(&cs, h, d, 0);
		nanosleep(&ts, NULL);
	}
	ck_assert_double_eq_tol(cs.model.drift, want, 10e-6);
	ck_assert_int_eq(npusimReadClock(1, &h, &d), ACL_SUCCESS);
	ck_assert_int_lt(llabs((long long)(clock_model_to_host(&cs.model, d) -
	    h)), 200000);
	/* Offset only would be off by the drift times the device time. */
	fprintf(stderr, "sim clock: drift %.3f ppm (want %.3f), rms %.0f ns\n",
	    cs.model.drift * 1e6, want * 1e6, cs.model.error_ns);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("clocksync");
	TCase *tc = tcase_create("clocksync");
	SRunner *sr;
	char prefix[64];
	int failed;

	snprintf(prefix, sizeof(prefix), "check-clocksync-%ld", (long)getpid());
	setenv("NPUSIM_SHM_PREFIX", prefix, 1);
	setenv("NPUSIM_CLOCK_OFFSET_NS", "3000000000", 1);
	setenv("NPUSIM_CLOCK_DRIFT_PPM", "40", 1);
	tcase_add_test(tc, synthetic_exact);
	tcase_add_test(tc, short_span_offset_only);
	tcase_add_test(tc, preempted_pair_ignored);
	tcase_add_test(tc, young_fit_brackets);
	tcase_add_test(tc, young_fit_unknown);
	tcase_add_test(tc, duplicates_and_reset);
	tcase_add_test(tc, absurd_slope_rejected);
	tcase_add_test(tc, round_is_llround);
	tcase_add_test(tc, sim_clock);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

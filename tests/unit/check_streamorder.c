/*
 * lib/streamorder: the one rule msptid's device collector and the agent's
 * in-process reader apply to converted device times - a stream's tasks
 * never overlap in host time, a moved task keeps its duration, and
 * nothing else moves.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "streamorder.h"

static struct streamorder so;

static void
apply(uint32_t pid, uint32_t stream, uint64_t ds, uint64_t de, uint64_t hs,
    uint64_t he, uint64_t *s, uint64_t *e)
{
	*s = hs;
	*e = he;
	streamorder_apply(&so, pid, stream, ds, de, s, e);
}

/* Back to back on the device, the second converted 300 ns early (a
 * refit): it starts where the first ended and keeps its 1000 ns. */
START_TEST(back_to_back)
{
	uint64_t s, e;

	streamorder_init(&so);
	apply(7, 1, 1000, 2000, 501000, 502000, &s, &e);
	ck_assert_uint_eq(s, 501000);
	ck_assert_uint_eq(e, 502000);
	apply(7, 1, 2000, 3000, 501700, 502700, &s, &e);
	ck_assert_uint_eq(s, 502000);
	ck_assert_uint_eq(e, 503000);
	/* The next one is measured from the moved end. */
	apply(7, 1, 3000, 4000, 502700, 503700, &s, &e);
	ck_assert_uint_eq(s, 503000);
	ck_assert_uint_eq(e, 504000);
}
END_TEST

/* A gap stays a gap; an end before its start is clamped. */
START_TEST(gaps_and_clamp)
{
	uint64_t s, e;

	streamorder_init(&so);
	apply(7, 1, 1000, 2000, 11000, 12000, &s, &e);
	apply(7, 1, 5000, 6000, 15100, 16100, &s, &e);
	ck_assert_uint_eq(s, 15100);
	ck_assert_uint_eq(e, 16100);
	apply(7, 1, 7000, 7000, 17000, 16990, &s, &e);
	ck_assert_uint_eq(s, 17000);
	ck_assert_uint_eq(e, 17000);
}
END_TEST

/* Another stream, or the same stream id of another process, is not held
 * back; a record that comes late (an earlier task) is left alone and
 * does not become the stream's last. */
START_TEST(keys_and_order)
{
	uint64_t s, e;

	streamorder_init(&so);
	apply(7, 1, 1000, 2000, 1000, 2000, &s, &e);
	apply(7, 2, 1500, 2500, 1500, 2500, &s, &e);
	ck_assert_uint_eq(s, 1500);
	apply(8, 1, 1500, 2500, 1500, 2500, &s, &e);
	ck_assert_uint_eq(s, 1500);
	apply(7, 1, 200, 900, 200, 900, &s, &e);
	ck_assert_uint_eq(s, 200);
	ck_assert_uint_eq(e, 900);
	apply(7, 1, 2000, 3000, 1900, 2900, &s, &e);
	ck_assert_uint_eq(s, 2000);
	ck_assert_uint_eq(e, 3000);
}
END_TEST

/* Far more streams than slots: no crash, and a stream used again right
 * away still has its last task. */
START_TEST(many_streams)
{
	uint64_t s, e;

	streamorder_init(&so);
	for (uint32_t i = 0; i < 10 * STREAMORDER_SLOTS; i++) {
		apply(i % 13, i, 1000, 2000, 1000, 2000, &s, &e);
		apply(i % 13, i, 2000, 3000, 1990, 2990, &s, &e);
		ck_assert_uint_eq(s, 2000);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("streamorder");
	TCase *tc = tcase_create("streamorder");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, back_to_back);
	tcase_add_test(tc, gaps_and_clamp);
	tcase_add_test(tc, keys_and_order);
	tcase_add_test(tc, many_streams);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * agent/stepdet.c: step boundaries from the synchronize pattern.  Each
 * case feeds the tokens a loop's synchronizes would make (call site,
 * launches since the previous one) and checks which of them close a step
 * and the step index after each.
 */
#include "config.h"

#include <check.h>
#include <string.h>

#include "agent.h"

enum { SA = 0xa0, SB = 0xb0, SE = 0xe0, SS = 0x50, SW = 0x70, SC = 0xc0 };

struct tok {
	uint64_t	site;
	uint32_t	launches;
};

#define MAXFEED	512
struct run {
	size_t		n;
	int		ret[MAXFEED];
	uint64_t	steps[MAXFEED];	/* the index after each feed */
	struct stepdet	d;
};

static void
feed(struct run *r, const struct tok *t, size_t n, unsigned times)
{
	for (unsigned k = 0; k < times; k++)
		for (size_t i = 0; i < n; i++) {
			ck_assert_uint_lt(r->n, MAXFEED);
			r->ret[r->n] = stepdet_feed(&r->d, t[i].site,
			    t[i].launches);
			r->steps[r->n] = r->d.steps;
			r->n++;
		}
}

static void
run_init(struct run *r)
{
	memset(r, 0, sizeof(*r));
	stepdet_init(&r->d);
}

/* Once locked, exactly the feeds listed in is_step[] close a step. */
static void
expect_steps_after(const struct run *r, size_t from, const bool *is_step)
{
	for (size_t i = from; i < r->n; i++)
		ck_assert_msg(((r->ret[i] & STEPDET_STEP) != 0) == is_step[i],
		    "feed %zu: ret %d, want step %d", i, r->ret[i],
		    is_step[i]);
}

/* One synchronize per iteration: locked after five, counted from the
 * first; every later one is a step. */
START_TEST(one_sync_per_step)
{
	static const struct tok it[] = { { SB, 10 } };
	struct run r;

	run_init(&r);
	feed(&r, it, 1, 12);
	for (size_t i = 0; i < 4; i++)
		ck_assert_uint_eq(r.steps[i], 0);
	ck_assert_int_eq(r.ret[4], STEPDET_STEP | STEPDET_LOCKED);
	ck_assert_uint_eq(r.steps[4], 5);
	for (size_t i = 5; i < 12; i++) {
		ck_assert_int_eq(r.ret[i], STEPDET_STEP);
		ck_assert_uint_eq(r.steps[i], i + 1);
	}
}
END_TEST

/* Two synchronizes per step (after the forward pass, loss.item(); at the
 * end): the one closing the most launches is the boundary, only it. */
START_TEST(two_syncs_per_step)
{
	static const struct tok it[] = { { SA, 4 }, { SB, 6 } };
	bool is_step[16];
	struct run r;

	run_init(&r);
	feed(&r, it, 2, 8);
	for (size_t i = 0; i < 16; i++)
		is_step[i] = (i & 1) != 0;
	ck_assert_uint_eq(r.steps[4], 0);
	ck_assert(r.ret[5] & STEPDET_LOCKED);
	ck_assert_uint_eq(r.steps[5], 3);
	expect_steps_after(&r, 5, is_step);
	ck_assert_uint_eq(r.d.steps, 8);
	ck_assert(r.d.by_site);
}
END_TEST

/* Many synchronizes per step (a loop that reads back each layer's loss,
 * a pipeline stage per micro-batch): 20, and STEPDET_PMAX, still lock after
 * three iterations, with the step closed by the sync after most launches. */
static void
many_syncs(unsigned per)
{
	struct tok it[64];
	bool is_step[MAXFEED];
	struct run r;

	ck_assert_uint_le(per, 64);
	for (unsigned i = 0; i < per; i++) {
		it[i].site = 0x1000 + i;
		it[i].launches = 1 + i % 3;
	}
	it[per - 1].launches = 40;	/* the optimizer's step */
	run_init(&r);
	feed(&r, it, per, 6);
	for (size_t i = 0; i < r.n; i++)
		is_step[i] = i % per == per - 1;
	ck_assert_msg(r.ret[3 * per - 1] & STEPDET_LOCKED,
	    "%u syncs a step: not locked after three iterations", per);
	ck_assert_uint_eq(r.steps[3 * per - 1], 3);
	expect_steps_after(&r, 3 * per - 1, is_step);
	ck_assert_uint_eq(r.d.steps, 6);
}

START_TEST(many_syncs_per_step)
{
	many_syncs(20);
	many_syncs(STEPDET_PMAX);
}
END_TEST

/* Setup synchronizes (weights in), then a warm-up iteration that differs
 * (compilation: more launches, closed by the same call): it is step 0,
 * setup is not a step. */
START_TEST(warmup_differs)
{
	static const struct tok setup[] = { { SS, 1 }, { SS, 1 } };
	static const struct tok warm[] = { { SA, 14 }, { SB, 6 } };
	static const struct tok it[] = { { SA, 4 }, { SB, 6 } };
	struct run r;

	run_init(&r);
	feed(&r, setup, 2, 1);
	feed(&r, warm, 2, 1);
	feed(&r, it, 2, 6);
	/* Locked in the third regular iteration, counting the warm-up. */
	ck_assert(r.ret[8] & STEPDET_LOCKED);
	ck_assert_uint_eq(r.steps[8], 3);
	ck_assert_int_eq(r.ret[9], STEPDET_STEP);
	ck_assert_uint_eq(r.steps[9], 4);
	ck_assert_uint_eq(r.d.steps, 7);
	ck_assert_uint_eq(r.steps[3], 0);
}
END_TEST

/* An eval iteration closed by the same call with other kernels counts
 * as a step; one closed elsewhere folds into the step it lies in; one
 * with extra synchronizes of its own does not lose the lock. */
START_TEST(eval_iteration)
{
	static const struct tok train[] = { { SB, 40 } };
	static const struct tok eval_same[] = { { SB, 12 } };
	static const struct tok eval_other[] = { { SE, 12 } };
	static const struct tok two[] = { { SA, 10 }, { SB, 30 } };
	static const struct tok eval_two[] = { { SE, 5 }, { SE, 5 }, { SB, 8 } };
	struct run r;

	run_init(&r);
	feed(&r, train, 1, 6);
	feed(&r, eval_same, 1, 1);
	feed(&r, train, 1, 3);
	ck_assert_uint_eq(r.d.steps, 10);

	run_init(&r);
	feed(&r, train, 1, 6);
	feed(&r, eval_other, 1, 1);
	ck_assert_int_eq(r.ret[6], 0);
	feed(&r, train, 1, 3);
	ck_assert_uint_eq(r.d.steps, 9);

	run_init(&r);
	feed(&r, two, 2, 5);
	feed(&r, eval_two, 3, 1);
	feed(&r, two, 2, 3);
	ck_assert_uint_eq(r.d.steps, 9);
	ck_assert_uint_eq(r.d.period, 2);
}
END_TEST

/* Both synchronizes from one helper (one call site): the boundary is told
 * apart by its launches. */
START_TEST(one_site_twice)
{
	static const struct tok it[] = { { SS, 4 }, { SS, 6 } };
	bool is_step[20];
	struct run r;

	run_init(&r);
	feed(&r, it, 2, 10);
	ck_assert(!r.d.by_site);
	ck_assert_uint_eq(r.d.ctx, 1);
	for (size_t i = 0; i < 20; i++)
		is_step[i] = (i & 1) != 0;
	expect_steps_after(&r, 5, is_step);
	ck_assert_uint_eq(r.d.steps, 10);
}
END_TEST

/* Equal tokens twice in a period: the boundary is the same one of them
 * whatever phase the stream began in (every rank picks the same), once
 * per period. */
START_TEST(equal_tokens_phase)
{
	static const struct tok per[] = { { SS, 30 }, { SS, 30 }, { SS, 5 } };
	static const struct tok skew[] = { { SS, 30 }, { SS, 5 } };
	struct run a, b;
	size_t i;

	run_init(&a);
	feed(&a, per, 3, 6);
	ck_assert_uint_eq(a.d.ctx, 2);
	/* The second stream starts one token later in the period. */
	run_init(&b);
	feed(&b, skew, 2, 1);
	feed(&b, per, 3, 6);
	for (i = 0; i < 18; i++)
		if (a.ret[i] & STEPDET_STEP)
			break;
	ck_assert_uint_lt(i, 18);
	/* a's boundaries are at period offset i % 3; b's at the same
	 * offset of the same tokens, shifted by the two it began with. */
	for (size_t j = 9; j < 18; j++)
		ck_assert_int_eq((a.ret[j] & STEPDET_STEP) != 0,
		    (b.ret[j + 2] & STEPDET_STEP) != 0);
	/* The first period's boundary has no predecessor to tell it. */
	ck_assert_uint_eq(a.d.steps, 5);
}
END_TEST

/* Synchronizes that close no launch are no loop. */
START_TEST(no_launches)
{
	static const struct tok it[] = { { SS, 0 } };
	struct run r;

	run_init(&r);
	feed(&r, it, 1, 20);
	ck_assert_uint_eq(r.d.period, 0);
	ck_assert_uint_eq(r.d.steps, 0);
}
END_TEST

/* A pattern that stops (another phase of the job) is dropped after
 * STEPDET_LOST synchronizes and the new one is found, its boundaries
 * since the last one counted: no step is lost. */
START_TEST(pattern_changes)
{
	static const struct tok a[] = { { SA, 20 } };
	static const struct tok c[] = { { SC, 50 } };
	struct run r;

	run_init(&r);
	feed(&r, a, 1, 6);
	ck_assert_uint_eq(r.d.steps, 6);
	feed(&r, c, 1, STEPDET_LOST + 8);
	ck_assert_uint_eq(r.d.steps, 6 + STEPDET_LOST + 8);
	ck_assert_uint_eq(r.d.pat[0].site, SC);
}
END_TEST

/* A long warm-up of irregular synchronizes, beyond the history: the count
 * starts from what the history still holds, the same on every rank. */
START_TEST(long_irregular_prefix)
{
	struct run r;
	struct tok t;

	run_init(&r);
	for (unsigned i = 0; i < 100; i++) {
		t.site = SW;
		t.launches = i + 1;	/* never periodic */
		feed(&r, &t, 1, 1);
	}
	ck_assert_uint_eq(r.d.period, 0);
	t.site = SB;
	t.launches = 10;
	feed(&r, &t, 1, 5);
	ck_assert_uint_eq(r.d.steps, 5);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("stepdet");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, one_sync_per_step);
	tcase_add_test(tc, two_syncs_per_step);
	tcase_add_test(tc, many_syncs_per_step);
	tcase_add_test(tc, warmup_differs);
	tcase_add_test(tc, eval_iteration);
	tcase_add_test(tc, one_site_twice);
	tcase_add_test(tc, equal_tokens_phase);
	tcase_add_test(tc, no_launches);
	tcase_add_test(tc, pattern_changes);
	tcase_add_test(tc, long_irregular_prefix);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

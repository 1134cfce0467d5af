/* lib/join: both arrival orders, multi-task launches, timeouts, bounds,
 * keys that collide leaving in random order. */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "join.h"

struct dtask {
	uint32_t	device, stream, task;
	uint64_t	value;
};

#define MAXOUT	64
struct out {
	size_t		n;
	struct dtask	dev[MAXOUT];
	uint64_t	corr[MAXOUT];	/* 0: unmatched */
};

static void
emit(const void *d, const struct join_launch *l, void *arg)
{
	struct out *o = arg;

	ck_assert_uint_lt(o->n, MAXOUT);
	memcpy(&o->dev[o->n], d, sizeof(struct dtask));
	o->corr[o->n] = l != NULL ? l->correlation_id : 0;
	o->n++;
}

static struct join *
mk(struct out *o, size_t max_dev, size_t max_host)
{
	struct join_config cfg = {
		.dev_size = sizeof(struct dtask),
		.dev_timeout_ns = 100,
		.host_timeout_ns = 1000,
		.max_dev = max_dev,
		.max_host = max_host,
	};
	struct join *j;

	memset(o, 0, sizeof(*o));
	j = join_new(&cfg, emit, o);
	ck_assert_ptr_nonnull(j);
	return j;
}

static struct join_launch
launch(uint32_t dev, uint32_t stream, uint32_t task, uint64_t corr)
{
	struct join_launch l;

	memset(&l, 0, sizeof(l));
	l.device = dev;
	l.stream = stream;
	l.task_id = task;
	l.correlation_id = corr;
	l.pid = 42;
	return l;
}

static void
add_task(struct join *j, uint32_t dev, uint32_t stream, uint32_t task,
    uint64_t value, uint64_t now)
{
	struct dtask d = { dev, stream, task, value };

	ck_assert_int_eq(join_add_task(j, dev, stream, task, &d, now), 0);
}

START_TEST(host_first)
{
	struct out o;
	struct join *j = mk(&o, 0, 0);
	struct join_launch l = launch(1, 2, 3, 77);
	struct join_stats st;

	ck_assert_int_eq(join_add_launch(j, &l, 0), 0);
	ck_assert_uint_eq(o.n, 0);
	add_task(j, 1, 2, 3, 1000, 5);
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.corr[0], 77);
	ck_assert_uint_eq(o.dev[0].value, 1000);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.matched, 1);
	ck_assert_uint_eq(st.dev_waiting + st.host_waiting, 0);
	join_free(j);
}
END_TEST

START_TEST(device_first)
{
	struct out o;
	struct join *j = mk(&o, 0, 0);
	struct join_launch l = launch(1, 2, 3, 78);

	add_task(j, 1, 2, 3, 1001, 0);
	add_task(j, 1, 2, 4, 1002, 0);
	ck_assert_uint_eq(o.n, 0);
	ck_assert_int_eq(join_add_launch(j, &l, 10), 0);
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.corr[0], 78);
	ck_assert_uint_eq(o.dev[0].task, 3);
	/* Same key on another device or stream does not match. */
	l = launch(2, 2, 4, 79);
	join_add_launch(j, &l, 10);
	l = launch(1, 3, 4, 80);
	join_add_launch(j, &l, 10);
	ck_assert_uint_eq(o.n, 1);
	l = launch(1, 2, 4, 81);
	join_add_launch(j, &l, 10);
	ck_assert_uint_eq(o.n, 2);
	ck_assert_uint_eq(o.corr[1], 81);
	join_free(j);
}
END_TEST

START_TEST(multi_task_launch)
{
	struct out o;
	struct join *j = mk(&o, 0, 0);
	struct join_launch l = launch(0, 5, 10, 90);
	struct join_stats st;

	add_task(j, 0, 5, 11, 1, 0);		/* before the launch */
	l.ntasks = 3;
	join_add_launch(j, &l, 1);
	ck_assert_uint_eq(o.n, 1);
	add_task(j, 0, 5, 10, 2, 2);
	add_task(j, 0, 5, 12, 3, 2);
	add_task(j, 0, 5, 13, 4, 2);		/* not part of it */
	ck_assert_uint_eq(o.n, 3);
	for (size_t i = 0; i < 3; i++)
		ck_assert_uint_eq(o.corr[i], 90);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.matched, 3);
	ck_assert_uint_eq(st.dev_waiting, 1);
	join_free(j);
}
END_TEST

START_TEST(timeouts)
{
	struct out o;
	struct join *j = mk(&o, 0, 0);
	struct join_launch l = launch(0, 1, 1, 5);
	struct join_stats st;

	add_task(j, 0, 1, 100, 7, 0);
	join_add_launch(j, &l, 0);
	join_expire(j, 99);
	ck_assert_uint_eq(o.n, 0);
	join_expire(j, 100);			/* device side: 100 ns */
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.corr[0], 0);
	ck_assert_uint_eq(o.dev[0].value, 7);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.dev_unmatched, 1);
	ck_assert_uint_eq(st.host_waiting, 1);
	join_expire(j, 1000);			/* host side: 1000 ns */
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_only, 1);
	ck_assert_uint_eq(st.host_waiting, 0);
	/* A task arriving after its launch expired goes out alone. */
	add_task(j, 0, 1, 1, 8, 1001);
	join_flush(j);
	ck_assert_uint_eq(o.n, 2);
	ck_assert_uint_eq(o.corr[1], 0);
	join_free(j);
}
END_TEST

START_TEST(bounded)
{
	struct out o;
	struct join *j = mk(&o, 4, 3);
	struct join_launch l;
	struct join_stats st;
	uint32_t i;

	for (i = 0; i < 6; i++)
		add_task(j, 0, 0, i, i, i);
	/* Two oldest evicted (emitted alone) to stay within 4. */
	ck_assert_uint_eq(o.n, 2);
	ck_assert_uint_eq(o.dev[0].task, 0);
	ck_assert_uint_eq(o.dev[1].task, 1);
	for (i = 0; i < 5; i++) {
		l = launch(1, 0, i, 100 + i);
		join_add_launch(j, &l, i);
	}
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.dev_evicted, 2);
	ck_assert_uint_eq(st.host_evicted, 2);
	ck_assert_uint_eq(st.host_waiting, 3);
	ck_assert_uint_eq(st.dev_waiting, 4);
	/* The surviving launches still join. */
	add_task(j, 1, 0, 4, 44, 10);
	ck_assert_uint_eq(o.corr[o.n - 1], 104);
	join_flush(j);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_only, 2);
	ck_assert_uint_eq(st.dev_waiting + st.host_waiting, 0);
	ck_assert_uint_eq(o.n, 2 + 1 + 4);
	join_free(j);
}
END_TEST

START_TEST(many)
{
	/* Growth of the tables and matching at scale, interleaved orders. */
	static struct out o;	/* counts only */
	struct join_config cfg = { .dev_size = sizeof(struct dtask) };
	struct join *j;
	struct join_stats st;
	uint32_t i;

	(void)o;
	j = join_new(&cfg, emit, &o);
	ck_assert_ptr_nonnull(j);
	for (i = 0; i < 100000; i++) {
		struct dtask d = { i % 8, i % 13, i, i };
		struct join_launch l = launch(i % 8, i % 13, i, i + 1);

		if (i & 1) {
			join_add_task(j, d.device, d.stream, d.task, &d, 0);
		} else
			join_add_launch(j, &l, 0);
	}
	for (i = 0; i < 100000; i++) {
		struct dtask d = { i % 8, i % 13, i, i };
		struct join_launch l = launch(i % 8, i % 13, i, i + 1);

		o.n = 0;
		if (i & 1)
			join_add_launch(j, &l, 0);
		else
			join_add_task(j, d.device, d.stream, d.task, &d, 0);
		ck_assert_uint_eq(o.n, 1);
		ck_assert_uint_eq(o.corr[0], i + 1);
	}
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.matched, 100000);
	ck_assert_uint_eq(st.dev_waiting + st.host_waiting, 0);
	join_free(j);
}
END_TEST

/*
 * Entries come and go in bursts (a ring drain adds thousands of launches,
 * a device poll takes them back): what leaves is kept, and join_expire
 * (the end of a spell) frees the spare entries beyond the most the table
 * held in that spell or the one before, down to 1,024; so bursts of up to
 * that size allocate nothing, and memory follows the load down.
 */
static void
burst(struct join *j, struct out *o, uint32_t *task, uint32_t n,
    size_t spare_before, size_t spare_after)
{
	struct join_stats st;
	uint32_t first = *task;

	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_spare, spare_before);
	for (uint32_t k = 0; k < n; k++, (*task)++) {
		struct join_launch l = launch(0, 1, *task, *task + 1);

		join_add_launch(j, &l, 0);
	}
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_waiting, n);
	/* Taken from the spares while there were any. */
	ck_assert_uint_eq(st.host_spare, spare_before > n ? spare_before - n :
	    0);
	for (uint32_t t = first; t < *task; t++) {
		struct dtask d = { 0, 1, t, t };

		o->n = 0;
		join_add_task(j, 0, 1, t, &d, 0);
		ck_assert_uint_eq(o->n, 1);
	}
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_waiting, 0);
	ck_assert_uint_eq(st.host_spare, spare_before > n ? spare_before : n);
	join_expire(j, 1);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_spare, spare_after);
}

START_TEST(spare_follows_bursts)
{
	static struct out o;	/* counts only */
	struct join_config cfg = { .dev_size = sizeof(struct dtask) };
	struct join *j = join_new(&cfg, emit, &o);
	struct join_stats st;
	uint32_t task = 0;

	ck_assert_ptr_nonnull(j);
	burst(j, &o, &task, 5000, 0, 5000);
	burst(j, &o, &task, 5000, 5000, 5000);
	/* A smaller burst: the spell before still asks for 5,000. */
	burst(j, &o, &task, 2000, 5000, 5000);
	burst(j, &o, &task, 5000, 5000, 5000);
	/* Quiet spells: down to the last burst, then to the floor. */
	join_expire(j, 2);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_spare, 5000);
	burst(j, &o, &task, 1500, 5000, 1500);
	join_expire(j, 3);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_spare, 1500);
	join_expire(j, 4);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_spare, 1024);
	ck_assert_uint_eq(st.matched, 18500);
	join_free(j);
}
END_TEST

/*
 * Keys that collide, taken out in random order while others come in: a
 * model of what waits checked against join_has_launch (the tables'
 * deletion moves later slots back; a slot moved wrongly leaves a waiting
 * launch unfindable, or a gone one findable).
 */
START_TEST(random_order)
{
	static struct out o;
	struct join_config cfg = { .dev_size = sizeof(struct dtask) };
	enum { N = 6000 };
	static uint32_t key[N][3];
	static bool waiting[N];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct join_stats st;
	struct join *j;
	size_t nwait = 0, matched = 0;

	j = join_new(&cfg, emit, &o);
	ck_assert_ptr_nonnull(j);
	for (size_t step = 0; step < 4 * N; step++) {
		size_t i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (size_t)(x % N);
		if (!waiting[i]) {
			struct join_launch l;

			/* Few devices and streams, tasks from a small range:
			 * many keys share a home slot. */
			key[i][0] = (uint32_t)(x >> 20) % 3;
			key[i][1] = (uint32_t)(x >> 24) % 5;
			key[i][2] = (uint32_t)i * 7u;
			l = launch(key[i][0], key[i][1], key[i][2], i + 1);
			ck_assert_int_eq(join_add_launch(j, &l, 0), 0);
			waiting[i] = true;
			nwait++;
		} else {
			struct dtask d = { key[i][0], key[i][1], key[i][2], i };

			o.n = 0;
			ck_assert_int_eq(join_add_task(j, d.device, d.stream,
			    d.task, &d, 0), 0);
			ck_assert_uint_eq(o.n, 1);
			ck_assert_uint_eq(o.corr[0], i + 1);
			waiting[i] = false;
			nwait--;
			matched++;
		}
		if (step % 997 != 0 && step != 4 * N - 1)
			continue;
		for (size_t k = 0; k < N; k++)
			if (key[k][1] != 0 || key[k][2] != 0 || waiting[k])
				ck_assert_int_eq(join_has_launch(j, key[k][0],
				    key[k][1], key[k][2]), waiting[k]);
	}
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_waiting, nwait);
	ck_assert_uint_eq(st.matched, matched);
	ck_assert_uint_eq(st.dev_waiting, 0);
	join_free(j);
}
END_TEST

START_TEST(bad_config)
{
	struct join_config cfg = { .dev_size = 0 };

	ck_assert_ptr_null(join_new(&cfg, emit, NULL));
	cfg.dev_size = 8;
	ck_assert_ptr_null(join_new(&cfg, NULL, NULL));
	join_free(NULL);
}
END_TEST

/* At the end, launches younger than the window are in flight, not lost. */
START_TEST(flush_inflight)
{
	struct out o;
	struct join *j = mk(&o, 0, 0);
	struct join_launch l;
	struct join_stats st;

	l = launch(0, 0, 1, 11);
	join_add_launch(j, &l, 4500);
	l = launch(0, 0, 2, 12);
	join_add_launch(j, &l, 5200);
	l = launch(0, 0, 3, 13);
	join_add_launch(j, &l, 5900);
	join_flush_at(j, 6000, 1000);	/* 4500 is old; 5200, 5900 young */
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.host_only, 1);
	ck_assert_uint_eq(st.host_inflight, 2);
	ck_assert_uint_eq(st.host_waiting, 0);
	ck_assert_uint_eq(o.n, 0);
	join_free(j);
}
END_TEST

static void
count_kind(const struct join_launch *l, void *arg)
{
	uint64_t *n = arg;

	ck_assert_uint_lt(l->kind, 8);
	n[l->kind]++;
}

/* The launches still waiting, by kind: what finalizing counts lost;
 * matched ones and every task of a multi-task launch are accounted. */
START_TEST(host_foreach)
{
	struct out o;
	struct join *j = mk(&o, 0, 0);
	struct join_launch l;
	uint64_t n[8] = { 0 };

	l = launch(0, 0, 1, 11);
	l.kind = 2;
	join_add_launch(j, &l, 10);
	l = launch(0, 0, 2, 12);
	l.kind = 7;
	join_add_launch(j, &l, 11);
	l = launch(0, 1, 5, 13);
	l.kind = 4;
	l.ntasks = 3;
	join_add_launch(j, &l, 12);
	add_task(j, 0, 0, 1, 1, 13);	/* the kernel's task came */
	join_host_foreach(j, count_kind, n);
	ck_assert_uint_eq(n[2], 0);
	ck_assert_uint_eq(n[7], 1);
	ck_assert_uint_eq(n[4], 3);
	ck_assert_uint_eq(o.n, 1);
	join_free(j);
}
END_TEST

/*
 * The capture's window: on a stream whose launches the capture holds,
 * device tasks queued before its first launch (work submitted before the
 * capture began, run after it) and, at the end, after its last launch
 * (submitted after the capture) are not emitted; a task between two
 * launches without one of its own is (work the agent does not see), and
 * so is every task of a stream with no launch at all.
 */
START_TEST(capture_window)
{
	struct out o;
	struct join *j = mk(&o, 0, 0);
	struct join_launch l;
	struct join_stats st;
	uint32_t t;

	for (t = 7; t <= 9; t++)
		add_task(j, 0, 5, t, t, 0);
	l = launch(0, 5, 10, 110);
	join_add_launch(j, &l, 0);
	l = launch(0, 5, 12, 112);
	join_add_launch(j, &l, 0);
	for (t = 10; t <= 14; t++)
		add_task(j, 0, 5, t, t, 50);
	add_task(j, 0, 6, 3, 3, 50);
	ck_assert_uint_eq(o.n, 2);		/* 10 and 12, joined */
	join_expire(j, 100);			/* 7..9: before the window */
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.dev_outside, 3);
	ck_assert_uint_eq(st.dev_unmatched, 0);
	ck_assert_uint_eq(o.n, 2);
	join_expire(j, 150);			/* 11, 13, 14, stream 6: alone */
	ck_assert_uint_eq(o.n, 6);
	add_task(j, 0, 5, 15, 15, 200);		/* after the last launch */
	add_task(j, 0, 5, 4, 4, 200);		/* before the first */
	add_task(j, 0, 6, 4, 4, 200);		/* a stream with no launch */
	join_flush(j);
	join_get_stats(j, &st);
	ck_assert_uint_eq(st.dev_outside, 5);
	ck_assert_uint_eq(o.n, 7);
	ck_assert_uint_eq(o.dev[6].stream, 6);
	ck_assert_uint_eq(o.dev[6].task, 4);
	ck_assert_uint_eq(st.matched, 2);
	join_free(j);
}
END_TEST

/* Every launch task that leaves without its device task reaches the drop
 * callback once, with its kind: timeout, eviction, replacement by another
 * launch of the key, flush; the calls sum to the stats. */
static uint64_t drops[8];

static void
drop(const struct join_launch *l, void *arg)
{
	(void)arg;
	ck_assert_uint_lt(l->kind, 8);
	drops[l->kind]++;
}

START_TEST(drop_per_kind)
{
	struct join_config cfg = {
		.dev_size = sizeof(struct dtask),
		.dev_timeout_ns = 100,
		.host_timeout_ns = 1000,
		.max_host = 4,
		.drop = drop,
	};
	struct out o;
	struct join *j;
	struct join_launch l;
	struct join_stats st;
	uint64_t sum = 0;

	memset(&o, 0, sizeof(o));
	memset(drops, 0, sizeof(drops));
	j = join_new(&cfg, emit, &o);
	ck_assert_ptr_nonnull(j);
	/* Two of kind 2 expire (host timeout). */
	for (uint32_t t = 0; t < 2; t++) {
		l = launch(0, 1, t, t + 1);
		l.kind = 2;
		ck_assert_int_eq(join_add_launch(j, &l, 0), 0);
	}
	join_expire(j, 5000);
	ck_assert_uint_eq(drops[2], 2);
	/* Six of kind 7 in a join of 4: two evicted. */
	for (uint32_t t = 10; t < 16; t++) {
		l = launch(0, 1, t, t + 1);
		l.kind = 7;
		ck_assert_int_eq(join_add_launch(j, &l, 6000), 0);
	}
	ck_assert_uint_eq(drops[7], 2);
	/* Another launch (kind 3) on a waiting key: the old one is lost; the
	 * same launch again is not. */
	l = launch(0, 1, 15, 99);
	l.kind = 3;
	ck_assert_int_eq(join_add_launch(j, &l, 6000), 0);
	ck_assert_int_eq(join_add_launch(j, &l, 6000), 0);
	ck_assert_uint_eq(drops[7], 3);
	ck_assert(join_has_launch(j, 0, 1, 15));
	ck_assert(!join_has_launch(j, 0, 1, 9));
	ck_assert(join_in_window(j, 0, 1, 9));
	ck_assert(!join_in_window(j, 0, 1, 16));
	ck_assert(!join_in_window(j, 0, 2, 9));
	/* One matched: no drop.  The rest go at the flush. */
	add_task(j, 0, 1, 14, 0, 6000);
	join_flush_at(j, 6000, 10);
	ck_assert_uint_eq(drops[7], 5);
	ck_assert_uint_eq(drops[3], 1);
	join_get_stats(j, &st);
	for (size_t i = 0; i < 8; i++)
		sum += drops[i];
	ck_assert_uint_eq(sum, st.host_only + st.host_evicted +
	    st.host_inflight);
	ck_assert_uint_eq(st.matched, 1);
	join_free(j);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("join");
	TCase *tc = tcase_create("join");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, host_first);
	tcase_add_test(tc, device_first);
	tcase_add_test(tc, multi_task_launch);
	tcase_add_test(tc, timeouts);
	tcase_add_test(tc, bounded);
	tcase_add_test(tc, flush_inflight);
	tcase_add_test(tc, host_foreach);
	tcase_add_test(tc, many);
	tcase_add_test(tc, spare_follows_bursts);
	tcase_add_test(tc, random_order);
	tcase_add_test(tc, bad_config);
	tcase_add_test(tc, capture_window);
	tcase_add_test(tc, drop_per_kind);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

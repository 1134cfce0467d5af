/*
 * daemon/devcol against real libnpusim processes: a forked child opens a
 * device and launches kernels on command; the parent (which never calls
 * the simulator itself) reads the channel with devcol.  Checks host-time
 * conversion against the child's own clock readings, the clock model's
 * drift, the pid filter, overrun counting with a tiny channel, how full
 * the channel was at each poll, and that a missing or garbage channel is
 * harmless.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#include "devcol.h"

#define CHAN_RECORDS	64
#define KERNEL_NS	2000000ull

static char prefix[64];

struct child {
	pid_t	pid;
	int	cmd;	/* parent -> child */
	int	rep;	/* child -> parent */
};

struct report {
	uint64_t	t0, t1;		/* realtime around launch..sync */
	int		rc;
};

static uint64_t
now_rt(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* The child: device 0, one kernel; commands "L n" (launch n kernels of
 * KERNEL_NS and sync), "F n" (n 1 µs kernels), "Q". */
static void
child_main(int cmd, int rep)
{
	aclrtFuncHandle k, fast;
	aclrtStream s;
	struct report r;
	char c;
	uint32_t n;

	if (aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    npusimKernelRegister("DevcolKernel", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    KERNEL_NS, &k) != ACL_SUCCESS ||
	    npusimKernelRegister("Tiny", NPUSIM_KERNEL_AI_VECTOR, 0, 0, 1000,
	    &fast) != ACL_SUCCESS)
		_exit(10);
	memset(&r, 0, sizeof(r));
	if (write(rep, &r, sizeof(r)) != sizeof(r))	/* ready */
		_exit(11);
	while (read(cmd, &c, 1) == 1) {
		if (c == 'Q')
			break;
		if (read(cmd, &n, sizeof(n)) != sizeof(n))
			_exit(12);
		r.t0 = now_rt();
		for (uint32_t i = 0; i < n; i++)
			r.rc |= aclrtLaunchKernel(c == 'L' ? k : fast, 1, NULL,
			    0, s);
		r.rc |= aclrtSynchronizeStream(s);
		r.t1 = now_rt();
		if (write(rep, &r, sizeof(r)) != sizeof(r))
			_exit(13);
	}
	_exit(0);
}

static void
child_start(struct child *ch)
{
	int a[2], b[2];
	struct report r;

	ck_assert_int_eq(pipe(a), 0);
	ck_assert_int_eq(pipe(b), 0);
	ch->pid = fork();
	ck_assert_int_ge(ch->pid, 0);
	if (ch->pid == 0) {
		close(a[1]);
		close(b[0]);
		child_main(a[0], b[1]);
	}
	close(a[0]);
	close(b[1]);
	ch->cmd = a[1];
	ch->rep = b[0];
	ck_assert_int_eq(read(ch->rep, &r, sizeof(r)), sizeof(r));
}

static struct report
child_do(struct child *ch, char c, uint32_t n)
{
	struct report r;

	ck_assert_int_eq(write(ch->cmd, &c, 1), 1);
	ck_assert_int_eq(write(ch->cmd, &n, sizeof(n)), sizeof(n));
	ck_assert_int_eq(read(ch->rep, &r, sizeof(r)), sizeof(r));
	ck_assert_int_eq(r.rc, 0);
	return r;
}

static void
child_stop(struct child *ch)
{
	int st;

	ck_assert_int_eq(write(ch->cmd, "Q", 1), 1);
	ck_assert_int_eq(waitpid(ch->pid, &st, 0), ch->pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(ch->cmd);
	close(ch->rep);
}

static void
unlink_shm(void)
{
	char name[128];

	for (uint32_t d = 0; d < 2; d++) {
		if (devcol_shm_name(name, sizeof(name), d, "chan") == 0)
			shm_unlink(name);
		if (devcol_shm_name(name, sizeof(name), d, "metrics") == 0)
			shm_unlink(name);
	}
}

#define MAXT	1024
struct got {
	size_t			n;
	struct devcol_task	t[MAXT];
};

static void
collect(const struct devcol_task *t, void *arg)
{
	struct got *g = arg;

	if (g->n < MAXT)
		g->t[g->n] = *t;
	g->n++;
}

static bool
refuse_all(uint32_t device, uint32_t pid, void *arg)
{
	(void)device;
	(void)pid;
	(void)arg;
	return false;
}

START_TEST(missing_channel)
{
	struct event_base *b = event_base_new();
	struct devcol *dc = devcol_new(b);
	struct devcol_stats st;
	struct clock_model m;
	char name[128];

	unlink_shm();
	ck_assert_ptr_nonnull(dc);
	ck_assert_int_eq(devcol_use(dc, 0), 0);
	ck_assert_int_eq(devcol_use(dc, DEVCOL_MAX_DEVICES), -EINVAL);
	ck_assert_uint_eq(devcol_poll(dc, collect, NULL), 0);
	ck_assert_int_eq(devcol_stats(dc, 0, &st), 0);
	ck_assert(!st.open);
	ck_assert_uint_eq(st.users, 1);
	ck_assert_int_eq(devcol_clock_model(dc, 0, &m), -EAGAIN);
	/* The daemon never creates a device's objects. */
	ck_assert_int_eq(devcol_shm_name(name, sizeof(name), 0, "chan"), 0);
	ck_assert_int_eq(shm_open(name, O_RDONLY, 0), -1);
	ck_assert_int_eq(errno, ENOENT);
	devcol_unuse(dc, 0);
	devcol_unuse(dc, 0);		/* extra unuse is harmless */
	devcol_free(dc);
	devcol_free(NULL);
	event_base_free(b);
}
END_TEST

START_TEST(garbage_channel)
{
	struct event_base *b = event_base_new();
	struct devcol *dc = devcol_new(b);
	struct npusim_channel_header *h;
	struct npusim_record *r;
	struct devcol_stats st;
	struct got *g = calloc(1, sizeof(*g));
	char name[128];
	size_t size = sizeof(*h) + 16 * sizeof(*r);
	unsigned char *p;
	int fd;

	unlink_shm();
	ck_assert_int_eq(devcol_shm_name(name, sizeof(name), 0, "chan"), 0);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	close(fd);
	srand(7);
	for (size_t i = 0; i < size; i++)
		p[i] = (unsigned char)rand();

	/* Random bytes: refused and counted, never fatal. */
	ck_assert_int_eq(devcol_use(dc, 0), 0);
	devcol_poll(dc, collect, g);
	devcol_stats(dc, 0, &st);
	ck_assert(!st.open);
	ck_assert_uint_ge(st.open_failures, 1);
	devcol_unuse(dc, 0);

	/* A valid header but garbage records and a huge capacity claim
	 * written after open: bad records counted, no out-of-bounds read. */
	h = (struct npusim_channel_header *)p;
	memset(p, 0, size);
	h->version = NPUSIM_SHM_VERSION;
	h->header_size = sizeof(*h);
	h->record_size = sizeof(*r);
	h->capacity = 16;
	h->device = 0;
	h->magic = NPUSIM_CHANNEL_MAGIC;
	ck_assert_int_eq(devcol_use(dc, 0), 0);
	devcol_stats(dc, 0, &st);
	ck_assert(st.open);
	ck_assert_uint_eq(h->enable_count, 1);
	r = (struct npusim_record *)(p + sizeof(*h));
	for (uint64_t i = 0; i < 10; i++) {
		memset(&r[i], 0xff, sizeof(*r));
		r[i].stamp = i + 1;
		r[i].kind = (uint16_t)(i < 5 ? 99 : NPUSIM_TASK_KERNEL);
		r[i].device = 0;
		r[i].pid = 1234;
		r[i].kernel_type = 0;
		r[i].start_ns = 100;
		r[i].end_ns = i < 8 ? 200 : 50;	/* end < start: bad */
	}
	h->head = 10;
	h->capacity = 1u << 30;
	devcol_poll(dc, collect, g);
	devcol_stats(dc, 0, &st);
	ck_assert_uint_eq(st.bad, 7);
	ck_assert_uint_eq(st.tasks, 3);
	ck_assert_uint_eq(g->n, 3);
	ck_assert_uint_eq(g->t[0].name[DEVCOL_NAME_LEN - 1], '\0');
	/* A head far ahead: counted as lost, not read past the ring. */
	h->head = 1000000;
	devcol_poll(dc, collect, g);
	ck_assert_uint_ge(devcol_lost(dc, 0), 1000000 - 16 - 10);
	devcol_unuse(dc, 0);
	ck_assert_uint_eq(h->enable_count, 0);
	munmap(p, size);
	unlink_shm();
	devcol_free(dc);
	event_base_free(b);
	free(g);
}
END_TEST

/* Polls until want tasks came (bounded), sleeping between polls. */
static void
poll_until(struct devcol *dc, struct got *g, size_t want)
{
	for (int i = 0; i < 400 && g->n < want; i++) {
		devcol_poll(dc, collect, g);
		if (g->n < want)
			nap_ms(25);
	}
}

/*
 * A forked process launches kernels on the simulator; devcol reads them
 * from the channel, its clock model from the header's pairs.  In the
 * second run every 3rd pair is taken as if its thread was preempted for
 * 2 ms (NPUSIM_TEST_CLOCK_PREEMPT: its host time 1 ms off, its bracket
 * saying so): the host times still land within 2 us of the child's
 * launch..sync window.
 */
START_TEST(real_tasks)
{
	struct event_base *b = event_base_new();
	struct devcol *dc = devcol_new(b);
	struct got *g = calloc(1, sizeof(*g));
	struct devcol_stats st;
	struct clock_model m;
	struct child ch;
	struct report r;
	double want;
	const uint64_t tol = 2000;	/* clock model vs. host readings */

	if (_i == 1)
		setenv("NPUSIM_TEST_CLOCK_PREEMPT", "3", 1);
	unlink_shm();
	child_start(&ch);
	ck_assert_int_eq(devcol_use(dc, 0), 0);
	devcol_stats(dc, 0, &st);
	ck_assert(st.open);
	/* Let the model see 1.5 s of the child's clock samples. */
	for (int i = 0; i < 30; i++) {
		devcol_poll(dc, collect, g);
		nap_ms(50);
	}
	ck_assert_uint_eq(g->n, 0);
	ck_assert_int_eq(devcol_clock_model(dc, 0, &m), 0);
	want = 1.0 / (1.0 + 40e-6) - 1.0;
	fprintf(stderr, "devcol clock: %u samples, drift %.3f ppm (want %.3f), "
	    "rms %.0f ns\n", m.samples, m.drift * 1e6, want * 1e6, m.error_ns);
	ck_assert_uint_ge(m.samples, 10);
	ck_assert_double_eq_tol(m.drift, want, 15e-6);

	r = child_do(&ch, 'L', 20);
	poll_until(dc, g, 20);
	ck_assert_uint_eq(g->n, 20);
	for (size_t i = 0; i < 20; i++) {
		const struct devcol_task *t = &g->t[i];

		ck_assert_uint_eq(t->pid, (uint32_t)ch.pid);
		ck_assert_uint_eq(t->device, 0);
		ck_assert_uint_eq(t->kind, DEVCOL_KERNEL);
		ck_assert_str_eq(t->name, "DevcolKernel");
		/* The device clock runs 40 ppm fast; host time does not. */
		ck_assert_uint_eq(t->dev_end - t->dev_start,
		    KERNEL_NS + KERNEL_NS * 40 / 1000000);
		/* Host times within the child's launch..sync window. */
		ck_assert_uint_ge(t->start + tol, r.t0);
		ck_assert_uint_le(t->end, r.t1 + tol);
		ck_assert_uint_ge(t->end - t->start, KERNEL_NS - 200);
		ck_assert_uint_le(t->end - t->start, KERNEL_NS + 200);
		if (i > 0) {
			ck_assert_uint_eq(t->stream, g->t[0].stream);
			ck_assert_uint_gt(t->task_id, g->t[i - 1].task_id);
			ck_assert_uint_ge(t->start, g->t[i - 1].end);
		}
	}
	ck_assert_uint_le(g->t[19].end - g->t[0].start, r.t1 - r.t0 + tol);

	/* The pid filter drops (and counts) what nobody wants. */
	devcol_set_filter(dc, refuse_all, NULL);
	child_do(&ch, 'L', 5);
	for (int i = 0; i < 400; i++) {
		devcol_poll(dc, collect, g);
		devcol_stats(dc, 0, &st);
		if (st.filtered >= 5)
			break;
		nap_ms(25);
	}
	ck_assert_uint_eq(st.filtered, 5);
	ck_assert_uint_eq(g->n, 20);
	devcol_set_filter(dc, NULL, NULL);
	/* Nothing new since: an empty channel. */
	devcol_poll(dc, collect, g);
	ck_assert_uint_eq(devcol_last_fill(dc), 0);

	/* How full the channel was when read (msptid polls sooner while it
	 * fills fast): 16 of 64 slots, a quarter. */
	g->n = 0;
	child_do(&ch, 'F', 16);
	devcol_poll(dc, collect, g);
	ck_assert_uint_eq(g->n, 16);
	ck_assert_uint_eq(devcol_last_fill(dc), 250);
	devcol_poll(dc, collect, g);
	ck_assert_uint_eq(devcol_last_fill(dc), 0);

	/* A reader that does not keep up: 500 tasks into a 64-slot channel
	 * before the next poll.  Every one is either read or counted. */
	g->n = 0;
	child_do(&ch, 'F', 500);
	devcol_poll(dc, collect, g);
	devcol_stats(dc, 0, &st);
	ck_assert_uint_eq(g->n, CHAN_RECORDS);
	ck_assert_uint_eq(devcol_lost(dc, 0), 500 - CHAN_RECORDS);
	ck_assert_uint_eq(st.lost + g->n, 500);
	ck_assert_uint_eq(devcol_last_fill(dc), 1000);	/* lapped */

	child_stop(&ch);
	devcol_unuse(dc, 0);
	devcol_free(dc);
	event_base_free(b);
	unlink_shm();
	free(g);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("devcol");
	TCase *tc = tcase_create("devcol");
	SRunner *sr;
	int failed;

	snprintf(prefix, sizeof(prefix), "check-devcol-%ld", (long)getpid());
	setenv("NPUSIM_SHM_PREFIX", prefix, 1);
	setenv("NPUSIM_CLOCK_OFFSET_NS", "2500000000", 1);
	setenv("NPUSIM_CLOCK_DRIFT_PPM", "40", 1);
	setenv("NPUSIM_CHANNEL_RECORDS", "64", 1);
	setenv("NPUSIM_DEVICES", "2", 1);
	tcase_add_test(tc, missing_channel);
	tcase_add_test(tc, garbage_channel);
	tcase_add_loop_test(tc, real_tasks, 0, 2);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unlink_shm();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * bench-sim.c - how fast libnpusim simulates: kernels per second of host
 * wall time for a long stream of tiny kernels (launch-bound: the device
 * waits for the host) and of longer ones (the host runs ahead; queue
 * depth permitting), with recording off and with a reader draining the
 * profiling channel.  Also what fraction of the modelled span the device
 * was busy, and the largest gap between two kernels in the records.
 * Then collectives between rank processes: host wall time per all_reduce
 * against the modelled time (the host waits for the data really moved).
 * Last, how late after the modelled end a host wait returns.
 * Prints figures only.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>

static uint64_t
clock_ns(clockid_t id)
{
	struct timespec	ts;

	clock_gettime(id, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

static uint64_t
now_ns(void)
{
	return (clock_ns(CLOCK_MONOTONIC));
}

/* A reader draining the channel while the kernels run. */
struct drainer {
	struct npusim_channel_reader	 r;
	volatile int			 stop;
	uint64_t			 n, lost;
	uint64_t			 first, last, busy, max_gap, prev_end;
};

static void
drainer_note(struct drainer *d, const struct npusim_record *rec)
{
	if (d->n == 0)
		d->first = rec->start_ns;
	else if (rec->start_ns > d->prev_end &&
	    rec->start_ns - d->prev_end > d->max_gap)
		d->max_gap = rec->start_ns - d->prev_end;
	d->prev_end = rec->end_ns;
	d->last = rec->end_ns;
	d->busy += rec->end_ns - rec->start_ns;
	d->n++;
}

static void *
drainer_main(void *arg)
{
	static struct npusim_record	 buf[4096];
	struct drainer			*d = arg;
	uint64_t			 lost;
	int				 n, i, idle = 0;

	for (;;) {
		n = npusim_channel_read(&d->r, buf, 4096, &lost);
		if (n < 0)
			break;
		d->lost += lost;
		for (i = 0; i < n; i++)
			drainer_note(d, &buf[i]);
		if (n == 0) {
			if (d->stop && ++idle > 50)
				break;
			usleep(1000);
		} else
			idle = 0;
	}
	return (NULL);
}

static int
run(const char *label, uint64_t kernel_ns, long count, int record)
{
	struct drainer	 d;
	pthread_t	 th;
	aclrtFuncHandle	 k;
	aclrtStream	 s;
	uint64_t	 t0, tl, t1, c0, cl, sleeps;
	long		 i;
	double		 wall;

	memset(&d, 0, sizeof d);
	if (npusimKernelRegister(label, NPUSIM_KERNEL_AI_CORE, 0, 0,
	    kernel_ns, &k) != ACL_SUCCESS || aclrtCreateStream(&s) !=
	    ACL_SUCCESS)
		return (1);
	if (record) {
		if (npusim_channel_open(0, &d.r) != 0 ||
		    pthread_create(&th, NULL, drainer_main, &d) != 0)
			return (1);
	}
	sleeps = npusimHostSleeps();
	t0 = now_ns();
	c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (i = 0; i < count; i++)
		if (aclrtLaunchKernel(k, 1, NULL, 0, s) != ACL_SUCCESS)
			return (1);
	tl = now_ns();
	cl = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (aclrtSynchronizeStream(s) != ACL_SUCCESS)
		return (1);
	t1 = now_ns();
	wall = (double)(t1 - t0) / 1e9;
	/* Launch rate: the host side; total: until the sync returned,
	 * which waits for the modelled end. */
	printf("%-20s %8ld x %6llu ns: %6.2f M kernels/s (launch %6.2f M/s, "
	    "%4.0f ns CPU each), %.3f s wall, model %.3f s, %llu sleeps",
	    label, count, (unsigned long long)kernel_ns,
	    (double)count / wall / 1e6,
	    (double)count / ((double)(tl - t0) / 1e9) / 1e6,
	    (double)(cl - c0) / (double)count, wall,
	    (double)count * (double)kernel_ns / 1e9,
	    (unsigned long long)(npusimHostSleeps() - sleeps));
	if (record) {
		d.stop = 1;
		pthread_join(th, NULL);
		npusim_channel_close(&d.r);
		printf("\n%20s %8llu records (%llu lost), device busy %.1f%% "
		    "of its span, largest gap %llu ns", "",
		    (unsigned long long)d.n, (unsigned long long)d.lost,
		    d.last > d.first ? 100.0 * (double)d.busy /
		    (double)(d.last - d.first) : 0.0,
		    (unsigned long long)d.max_gap);
	}
	printf("\n");
	fflush(stdout);
	return (aclrtDestroyStream(s) != ACL_SUCCESS);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/*
 * A training step's end: a kernel, a 4-byte copy into host memory and a
 * synchronize, steps times.  How long after the copy's modelled end
 * (its record, device clock) the synchronize returned (the device clock
 * read at once): the host's wake-up latency, which every step pays.
 */
static int
host_wait(long steps)
{
	static struct npusim_record	 buf[64];
	struct npusim_channel_reader	 r;
	aclrtFuncHandle			 k;
	aclrtStream			 s;
	uint64_t			*late, rt, d1, lost, sleeps, v = 0;
	void				*dev;
	long				 i, m = 0;
	int				 n, j, bad = 0;

	if ((late = calloc((size_t)steps, sizeof *late)) == NULL ||
	    npusimKernelRegister("stepend", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    200000, &k) != ACL_SUCCESS || aclrtCreateStream(&s) !=
	    ACL_SUCCESS || aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST)
	    != ACL_SUCCESS || npusim_channel_open(0, &r) != 0) {
		free(late);
		return (1);
	}
	sleeps = npusimHostSleeps();
	for (i = 0; i < steps && !bad; i++) {
		bad = aclrtLaunchKernel(k, 1, NULL, 0, s) != ACL_SUCCESS ||
		    aclrtMemcpyAsync(&v, sizeof v, dev, sizeof v,
		    ACL_MEMCPY_DEVICE_TO_HOST, s) != ACL_SUCCESS ||
		    aclrtSynchronizeStream(s) != ACL_SUCCESS ||
		    npusimReadClock(0, &rt, &d1) != ACL_SUCCESS;
		while (!bad && (n = npusim_channel_read(&r, buf, 64,
		    &lost)) > 0)
			for (j = 0; j < n; j++)
				if (buf[j].kind == NPUSIM_TASK_MEMCPY &&
				    buf[j].end_ns <= d1 && m < steps)
					late[m++] = d1 - buf[j].end_ns;
	}
	npusim_channel_close(&r);
	if (!bad && m > 0) {
		qsort(late, (size_t)m, sizeof *late, cmp_u64);
		printf("host wait after a step's copy into host memory, %ld "
		    "steps: returns %.1f us after the modelled end (median; "
		    "p10 %.1f, p90 %.1f), %.2f sleeps a step\n", m,
		    (double)late[m / 2] / 1e3, (double)late[m / 10] / 1e3,
		    (double)late[m * 9 / 10] / 1e3,
		    (double)(npusimHostSleeps() - sleeps) / (double)steps);
	}
	free(late);
	bad |= aclrtFree(dev) != ACL_SUCCESS;
	return (bad | (aclrtDestroyStream(s) != ACL_SUCCESS));
}

/* One rank: reps all_reduces of count elements of type dt; prints. */
static int
coll_rank(uint32_t r, uint32_t n, HcclRootInfo *root, uint64_t count,
    HcclDataType dt, size_t esz, const char *tname, int reps)
{
	HcclComm	 comm;
	aclrtStream	 s;
	void		*buf;
	uint64_t	 t0, t1;
	double		 model;
	int		 i;

	if (aclrtSetDevice((int32_t)r) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    HcclCommInitRootInfo(n, root, r, &comm) != HCCL_SUCCESS ||
	    (buf = calloc(count, esz)) == NULL)
		return (1);
	/* One to warm up (page faults), then the timed ones. */
	if (HcclAllReduce(buf, buf, count, dt, HCCL_REDUCE_SUM, comm, s) ||
	    aclrtSynchronizeStream(s))
		return (1);
	t0 = now_ns();
	for (i = 0; i < reps; i++)
		if (HcclAllReduce(buf, buf, count, dt, HCCL_REDUCE_SUM, comm,
		    s) != HCCL_SUCCESS || aclrtSynchronizeStream(s) !=
		    ACL_SUCCESS)
			return (1);
	t1 = now_ns();
	model = (2.0 * (n - 1) / n * (double)(count * esz) / 25e9 * 1e9 +
	    2.0 * (n - 1) * 2000.0) / 1e3;
	if (r == 0)
		printf("all_reduce %u ranks %8llu x %s: %9.1f us host per op, "
		    "model %7.1f us\n", n, (unsigned long long)count, tname,
		    (double)(t1 - t0) / reps / 1e3, model);
	fflush(stdout);
	HcclCommDestroy(comm);
	return (0);
}

static int
coll(uint32_t n, uint64_t count, HcclDataType dt, size_t esz,
    const char *tname, int reps)
{
	HcclRootInfo	root;
	pid_t		pid[8];
	uint32_t	i;
	int		st, bad = 0;

	if (HcclGetRootInfo(&root) != HCCL_SUCCESS)
		return (1);
	fflush(stdout);		/* not copied into the children */
	for (i = 0; i < n; i++) {
		if ((pid[i] = fork()) == -1)
			return (1);
		if (pid[i] == 0)
			_exit(coll_rank(i, n, &root, count, dt, esz, tname,
			    reps));
	}
	for (i = 0; i < n; i++)
		if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			bad = 1;
	return (bad);
}

static char	shm_prefix[64];

/* Remove this run's device objects (also on SIGINT/SIGTERM). */
static void
cleanup(void)
{
	char	name[128];
	int	i;

	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof name, "/%s-dev%d-chan", shm_prefix, i);
		shm_unlink(name);
		snprintf(name, sizeof name, "/%s-dev%d-metrics", shm_prefix,
		    i);
		shm_unlink(name);
	}
}

static void
on_signal(int sig)
{
	cleanup();
	_exit(128 + sig);
}

int
main(int argc, char **argv)
{
	long	n = argc > 1 ? atol(argv[1]) : 1000000;
	int	bad = 0;

	snprintf(shm_prefix, sizeof shm_prefix, "npusimbench-%d",
	    (int)getpid());
	setenv("NPUSIM_SHM_PREFIX", shm_prefix, 1);
	/* A closed pipe (| head) must not skip the cleanup. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	setenv("NPUSIM_CHANNEL_RECORDS", "65536", 1);
	unsetenv("NPUSIM_TIME_SCALE");
	if (n <= 0)
		n = 1000000;
	setenv("NPUSIM_DEVICES", "4", 1);
	/* Ranks fork first: a process must not fork after opening a
	 * device. */
	printf("collectives (rank processes, host wall time)\n");
	bad |= coll(2, 1U << 20, HCCL_DATA_TYPE_FP16, 2, "fp16", 20);
	bad |= coll(2, 1U << 20, HCCL_DATA_TYPE_FP32, 4, "fp32", 20);
	bad |= coll(4, 1U << 18, HCCL_DATA_TYPE_FP32, 4, "fp32", 20);
	if (aclrtSetDevice(0) != ACL_SUCCESS) {
		fprintf(stderr, "bench-sim: no simulated device\n");
		return (1);
	}
	printf("simulator throughput (one stream, host wall time)\n");
	bad |= run("tiny, not recorded", 100, n, 0);
	bad |= run("tiny, recorded", 100, n, 1);
	bad |= run("10us, not recorded", 10000, n / 10, 0);
	bad |= run("10us, recorded", 10000, n / 10, 1);
	bad |= host_wait(2000);
	aclFinalize();
	cleanup();
	if (bad)
		fprintf(stderr, "bench-sim: a simulator call failed\n");
	return (bad);
}

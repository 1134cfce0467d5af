/*
 * check_sim_hccl.c - HCCL collectives across real rank processes: data
 * is right for every op and the main types, a slow rank shows up as wait
 * time on the others, and a dead or missing rank is an error, not a hang.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>

#define NR 3

static char	prefix[64];

typedef int (*rank_fn)(uint32_t, uint32_t, HcclComm, aclrtStream);

static uint64_t
mono_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/* Fork n ranks running fn on device = rank; 0 if all exit 0. */
static int
run_ranks(uint32_t n, rank_fn fn)
{
	HcclRootInfo	root;
	pid_t		pid[8];
	uint32_t	i;
	int		status, bad = 0;

	ck_assert_int_eq(HcclGetRootInfo(&root), HCCL_SUCCESS);
	for (i = 0; i < n; i++) {
		pid[i] = fork();
		ck_assert_int_ne(pid[i], -1);
		if (pid[i] == 0) {
			HcclComm	comm;
			aclrtStream	s;

			if (aclrtSetDevice((int32_t)i) != ACL_SUCCESS ||
			    aclrtCreateStream(&s) != ACL_SUCCESS)
				_exit(10);
			if (HcclCommInitRootInfo(n, &root, i, &comm) !=
			    HCCL_SUCCESS)
				_exit(11);
			_exit(fn(i, n, comm, s));
		}
	}
	for (i = 0; i < n; i++) {
		waitpid(pid[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "rank %u: status %d\n", i, status);
			bad = 1;
		}
	}
	return (bad);
}

static int
sync_ok(aclrtStream s)
{
	return (aclrtSynchronizeStream(s) == ACL_SUCCESS);
}

/* fp32 sum across rounds, and max/min/prod, int32, fp16, bf16, int8. */
static int
rank_allreduce(uint32_t r, uint32_t n, HcclComm comm, aclrtStream s)
{
	size_t		 big = 1500000, i;	/* > one 4 MiB round */
	float		*f = malloc(big * sizeof *f);
	int32_t		 iv[4], io[4];
	uint16_t	 h[2], hb[2];
	int8_t		 c[2];
	float		 fo[3], fi[3];

	if (f == NULL)
		return (1);
	for (i = 0; i < big; i++)
		f[i] = (float)(r + 1) * (float)(i % 7);
	if (HcclAllReduce(f, f, big, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
	    comm, s) != HCCL_SUCCESS || !sync_ok(s))
		return (2);
	for (i = 0; i < big; i += 997)
		if (f[i] != (float)(n * (n + 1) / 2) * (float)(i % 7))
			return (3);
	fi[0] = fi[1] = fi[2] = (float)r + 2.0f;
	if (HcclAllReduce(fi, fo, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX,
	    comm, s) || HcclAllReduce(fi + 1, fo + 1, 1, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_MIN, comm, s) || HcclAllReduce(fi + 2, fo + 2, 1,
	    HCCL_DATA_TYPE_FP32, HCCL_REDUCE_PROD, comm, s) || !sync_ok(s))
		return (4);
	if (fo[0] != (float)n + 1.0f || fo[1] != 2.0f || fo[2] != 24.0f)
		return (5);
	for (i = 0; i < 4; i++)
		iv[i] = (int32_t)r - 1;
	if (HcclAllReduce(iv, io, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM,
	    comm, s) || HcclAllReduce(iv + 1, io + 1, 1, HCCL_DATA_TYPE_INT32,
	    HCCL_REDUCE_MAX, comm, s) || HcclAllReduce(iv + 2, io + 2, 1,
	    HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MIN, comm, s) ||
	    HcclAllReduce(iv + 3, io + 3, 1, HCCL_DATA_TYPE_INT32,
	    HCCL_REDUCE_PROD, comm, s) || !sync_ok(s))
		return (6);
	if (io[0] != 0 || io[1] != 1 || io[2] != -1 || io[3] != 0)
		return (7);
	h[0] = 0x3c00;		/* fp16 1.0 */
	hb[0] = 0x3f80;		/* bf16 1.0 */
	c[0] = 5;
	if (HcclAllReduce(h, h + 1, 1, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM,
	    comm, s) || HcclAllReduce(hb, hb + 1, 1, HCCL_DATA_TYPE_BFP16,
	    HCCL_REDUCE_SUM, comm, s) || HcclAllReduce(c, c + 1, 1,
	    HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, comm, s) || !sync_ok(s))
		return (8);
	/* 3.0 in fp16 and bf16; 15 in int8. */
	if (h[1] != 0x4200 || hb[1] != 0x4040 || c[1] != 15)
		return (9);
	/* An fp16 sum of exactly zero is +0.0 (was 0x3800, 0.5). */
	h[0] = r == 0 ? 0x3c00 : r == 1 ? 0xbc00 : 0x0000;	/* 1, -1, 0 */
	if (HcclAllReduce(h, h + 1, 1, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM,
	    comm, s) || !sync_ok(s))
		return (8);
	if (h[1] != 0x0000) {
		fprintf(stderr, "rank %u: fp16 1 + -1 + 0 = %#06x\n", r,
		    (unsigned)h[1]);
		return (9);
	}
	free(f);
	return (0);
}

static int
rank_collectives(uint32_t r, uint32_t n, HcclComm comm, aclrtStream s)
{
	int32_t		 b[4], g[NR * 2], rs[NR * 2], rso[2], a2a[NR],
			 a2o[NR], sc[NR], sco, red;
	uint64_t	 sc_[NR], sd[NR], rc[NR], rd[NR];
	int32_t		 vin[NR * NR], vout[NR * NR];
	HcclSendRecvItem it[2];
	int32_t		 tok, got = -1, left = -1, right = -1;
	HcclResult	 hr = HCCL_SUCCESS;
	aclError	 ae = ACL_SUCCESS;
	uint32_t	 i, rk, sz;

	if (HcclGetRankId(comm, &rk) || rk != r || HcclGetRankSize(comm, &sz) ||
	    sz != n)
		return (1);
	/* Broadcast from rank 1. */
	for (i = 0; i < 4; i++)
		b[i] = r == 1 ? 100 + (int32_t)i : -1;
	if (HcclBroadcast(b, 4, HCCL_DATA_TYPE_INT32, 1, comm, s) ||
	    !sync_ok(s) || b[3] != 103)
		return (2);
	/* AllGather of two ints per rank. */
	rs[0] = (int32_t)r * 10;
	rs[1] = (int32_t)r * 10 + 1;
	if (HcclAllGather(rs, g, 2, HCCL_DATA_TYPE_INT32, comm, s) ||
	    !sync_ok(s))
		return (3);
	for (i = 0; i < n; i++)
		if (g[2 * i] != (int32_t)i * 10 || g[2 * i + 1] !=
		    (int32_t)i * 10 + 1)
			return (4);
	/* ReduceScatter: block j of every rank sums into rank j. */
	for (i = 0; i < n * 2; i++)
		rs[i] = (int32_t)i;
	if (HcclReduceScatter(rs, rso, 2, HCCL_DATA_TYPE_INT32,
	    HCCL_REDUCE_SUM, comm, s) || !sync_ok(s) ||
	    rso[0] != (int32_t)(n * 2 * r) || rso[1] != (int32_t)(n *
	    (2 * r + 1)))
		return (5);
	/* Reduce to rank 0. */
	tok = (int32_t)r + 1;
	red = -1;
	if (HcclReduce(&tok, &red, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 0,
	    comm, s) || !sync_ok(s) || (r == 0 && red != (int32_t)(n * (n +
	    1) / 2)) || (r != 0 && red != -1))
		return (6);
	/* AlltoAll: element j goes to rank j. */
	for (i = 0; i < n; i++)
		a2a[i] = (int32_t)(r * 100 + i);
	if (HcclAlltoAll(a2a, 1, HCCL_DATA_TYPE_INT32, a2o, 1,
	    HCCL_DATA_TYPE_INT32, comm, s) || !sync_ok(s))
		return (7);
	for (i = 0; i < n; i++)
		if (a2o[i] != (int32_t)(i * 100 + r))
			return (8);
	/*
	 * AlltoAllV: rank r sends j+1 copies of r to rank j, block j of
	 * NR slots (j+1 <= NR, so every count fits its block); what lies
	 * past a received count stays untouched.
	 */
	for (i = 0; i < n; i++) {
		sc_[i] = i + 1;
		sd[i] = i * NR;
		rc[i] = r + 1;
		rd[i] = i * NR;
	}
	for (i = 0; i < NR * NR; i++) {
		vin[i] = (int32_t)r;
		vout[i] = -1;
	}
	if (HcclAlltoAllV(vin, sc_, sd, HCCL_DATA_TYPE_INT32, vout, rc, rd,
	    HCCL_DATA_TYPE_INT32, comm, s) || !sync_ok(s))
		return (9);
	for (i = 0; i < n * NR; i++)
		if (vout[i] != (i % NR <= r ? (int32_t)(i / NR) : -1))
			return (10);
	/* Scatter from rank 2. */
	for (i = 0; i < n; i++)
		sc[i] = 7 * (int32_t)i;
	if (HcclScatter(sc, &sco, 1, HCCL_DATA_TYPE_INT32, 2, comm, s) ||
	    !sync_ok(s) || sco != 7 * (int32_t)r)
		return (11);
	if (HcclBarrier(comm, s) || !sync_ok(s))
		return (12);
	/* Send/recv around a ring, even ranks sending first. */
	tok = 1000 + (int32_t)r;
	if (r % 2 == 0) {
		if (HcclSend(&tok, 1, HCCL_DATA_TYPE_INT32, (r + 1) % n, comm,
		    s) || HcclRecv(&got, 1, HCCL_DATA_TYPE_INT32, (r + n - 1) %
		    n, comm, s))
			return (13);
	} else if (HcclRecv(&got, 1, HCCL_DATA_TYPE_INT32, (r + n - 1) % n,
	    comm, s) || HcclSend(&tok, 1, HCCL_DATA_TYPE_INT32, (r + 1) % n,
	    comm, s))
		return (13);
	if (!sync_ok(s) || got != 1000 + (int32_t)((r + n - 1) % n))
		return (14);
	/* BatchSendRecv: swap with both neighbours at once. */
	memset(it, 0, sizeof it);
	it[0].sendRecvType = HCCL_SEND;
	it[0].buf = &tok;
	it[0].count = 1;
	it[0].dataType = HCCL_DATA_TYPE_INT32;
	it[0].remoteRank = (r + 1) % n;
	it[1].sendRecvType = HCCL_RECV;
	it[1].buf = &left;
	it[1].count = 1;
	it[1].dataType = HCCL_DATA_TYPE_INT32;
	it[1].remoteRank = (r + n - 1) % n;
	if ((hr = HcclBatchSendRecv(it, 2, comm, s)) != HCCL_SUCCESS ||
	    (ae = aclrtSynchronizeStream(s)) != ACL_SUCCESS ||
	    left != 1000 + (int32_t)((r + n - 1) % n)) {
		fprintf(stderr, "rank %u: batch send/recv %d, sync %d, got "
		    "%d\n", r, (int)hr, (int)ae, (int)left);
		return (15);
	}
	(void)right;
	return (HcclCommDestroy(comm) == HCCL_SUCCESS ? 0 : 16);
}

START_TEST(test_allreduce)
{
	ck_assert_int_eq(run_ranks(NR, rank_allreduce), 0);
}
END_TEST

START_TEST(test_collectives)
{
	ck_assert_int_eq(run_ranks(NR, rank_collectives), 0);
}
END_TEST

/* Slow rank 1: kernels take 10x; the others wait for it. */
static int
rank_slow(uint32_t r, uint32_t n, HcclComm comm, aclrtStream s)
{
	struct npusim_channel_reader	 rd;
	struct npusim_record		 rec[64];
	aclrtFuncHandle			 k;
	uint64_t			 lost, deadline;
	float				 x[16] = { 0 };
	int				 i, got = 0, found = -1;

	if (npusim_channel_open((int32_t)r, &rd) != 0 ||
	    npusimKernelRegister("Compute", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    4000000, &k) != ACL_SUCCESS)
		return (20);
	for (i = 0; i < 3; i++)
		aclrtLaunchKernel(k, 1, NULL, 0, s);
	if (HcclAllReduce(x, x, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm,
	    s) || !sync_ok(s))
		return (21);
	deadline = mono_ns() + 2000000000ULL;
	while (found < 0 && mono_ns() < deadline) {
		i = npusim_channel_read(&rd, rec + got, 64 - (size_t)got,
		    &lost);
		if (i < 0)
			return (22);
		for (got += i, i = 0; i < got; i++)
			if (rec[i].kind == NPUSIM_TASK_COMM)
				found = i;
		usleep(1000);
	}
	if (found < 0)
		return (23);
	if (strcmp(rec[found].name, "HcclAllReduce") != 0 ||
	    rec[found].rank != r || rec[found].rank_size != n ||
	    rec[found].count != 16 || rec[found].data_type !=
	    HCCL_DATA_TYPE_FP32 || rec[found].algorithm !=
	    NPUSIM_COMM_ALG_RING || rec[found].comm_name[0] == '\0')
		return (24);
	/* Others wait ~108 ms for rank 1's 120 ms; rank 1 barely waits. */
	if (r != 1 && rec[found].wait_ns < 50000000ULL)
		return (25);
	if (r == 1 && rec[found].wait_ns > 40000000ULL)
		return (26);
	npusim_channel_close(&rd);
	return (0);
}

START_TEST(test_slow_rank)
{
	setenv("NPUSIM_SLOW_RANK", "1", 1);
	setenv("NPUSIM_SLOW_FACTOR", "10", 1);
	ck_assert_int_eq(run_ranks(NR, rank_slow), 0);
}
END_TEST

/* Device-clock length of a monotonic interval on device dev. */
static uint64_t
dev_len(int32_t dev, uint64_t ns)
{
	int64_t	drift = 0;

	npusimClockParams(dev, NULL, &drift);
	return ((uint64_t)llround((double)ns * (1.0 + (double)drift / 1e9)));
}

static int
near(uint64_t got, uint64_t want)
{
	return (got + 2 >= want && got <= want + 2);
}

/*
 * Collectives take the model's time: a 1 s kernel and a barrier line
 * both ranks up at one modelled instant, then rank 1 computes 100 ms more.
 * Its all_reduce (1M fp16) starts 100 ms after rank 0's: rank 0 waits
 * exactly that long, and both transfers last the ring model, 2(n-1)/n *
 * B / 25 GB/s + 2(n-1) * 2 us.  A second, larger all_reduce right behind
 * starts together on both ranks: no wait, and bytes / duration is the
 * link bandwidth (to within the 4 us of latency).
 */
static int
rank_model(uint32_t r, uint32_t n, HcclComm comm, aclrtStream s)
{
	struct npusim_channel_reader	 rd;
	struct npusim_record		 rec[16], *ar[2];
	aclrtFuncHandle			 head, late;
	uint64_t			 lost, deadline, model[2], b[2], len;
	size_t				 cnt[2] = { 1U << 20, 4U << 20 };
	void				*buf[2];
	double				 gbs;
	int				 i, got = 0, nar = 0;

	if (n != 2)
		return (40);
	if (npusim_channel_open((int32_t)r, &rd) != 0 ||
	    npusimKernelRegister("Head", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    1000000000, &head) != ACL_SUCCESS ||
	    npusimKernelRegister("Late", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    100000000, &late) != ACL_SUCCESS)
		return (41);
	b[0] = cnt[0] * 2;	/* fp16 */
	b[1] = cnt[1] * 4;	/* fp32 */
	for (i = 0; i < 2; i++) {
		if ((buf[i] = calloc(1, b[i])) == NULL)
			return (42);
		model[i] = (uint64_t)((double)b[i] / 25e9 * 1e9 + 4000.0);
	}
	if (aclrtLaunchKernel(head, 1, NULL, 0, s) || HcclBarrier(comm, s) ||
	    (r == 1 && aclrtLaunchKernel(late, 1, NULL, 0, s)) ||
	    HcclAllReduce(buf[0], buf[0], cnt[0], HCCL_DATA_TYPE_FP16,
	    HCCL_REDUCE_SUM, comm, s) || HcclAllReduce(buf[1], buf[1],
	    cnt[1], HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s) ||
	    !sync_ok(s))
		return (43);
	deadline = mono_ns() + 5000000000ULL;
	while (nar < 2 && mono_ns() < deadline) {
		i = npusim_channel_read(&rd, rec + got, 16 - (size_t)got,
		    &lost);
		if (i < 0)
			return (44);
		for (nar = 0, got += i, i = 0; i < got; i++)
			if (rec[i].kind == NPUSIM_TASK_COMM &&
			    strcmp(rec[i].name, "HcclAllReduce") == 0 &&
			    nar < 2)
				ar[nar++] = &rec[i];
		usleep(1000);
	}
	npusim_channel_close(&rd);
	if (nar < 2)
		return (45);
	for (i = 0; i < 2; i++) {
		if (ar[i]->bytes != b[i])
			return (46);
		len = ar[i]->end_ns - ar[i]->start_ns;
		if (!near(len - dev_len((int32_t)r, ar[i]->wait_ns),
		    dev_len((int32_t)r, model[i]))) {
			fprintf(stderr, "rank %u all_reduce %d: %llu ns "
			    "(wait %llu), model %llu\n", r, i,
			    (unsigned long long)len,
			    (unsigned long long)ar[i]->wait_ns,
			    (unsigned long long)model[i]);
			return (47);
		}
	}
	if (ar[0]->wait_ns != (r == 0 ? 100000000ULL : 0)) {
		fprintf(stderr, "rank %u waited %llu ns\n", r,
		    (unsigned long long)ar[0]->wait_ns);
		return (48);
	}
	if (ar[1]->wait_ns != 0 || ar[1]->start_ns != ar[0]->end_ns)
		return (49);
	/* HcclData.bandwidth, as the agent computes it: bytes / ns. */
	gbs = (double)ar[1]->bytes / (double)(ar[1]->end_ns -
	    ar[1]->start_ns);
	if (gbs < 25.0 * 0.99 || gbs > 25.0) {
		fprintf(stderr, "rank %u: %.3f GB/s\n", r, gbs);
		return (50);
	}
	free(buf[0]);
	free(buf[1]);
	return (0);
}

START_TEST(test_model_time)
{
	ck_assert_int_eq(run_ranks(2, rank_model), 0);
}
END_TEST

/*
 * Waiting for a late rank is not device work: rank 1 computes 1.5 s
 * first, rank 0 goes straight into the all_reduce.  Rank 0's metrics
 * page reads 0% while it waits (every window inside the wait), rank 1's
 * 100%.
 */
static int
rank_wait_idle(uint32_t r, uint32_t n, HcclComm comm, aclrtStream s)
{
	struct npusim_metrics_snapshot	 m;
	aclrtFuncHandle			 k;
	uint64_t			 rt, t0, from, to, deadline;
	float				 x[16] = { 0 };
	int				 seen = 0, ok = 0;

	(void)n;
	if (npusimKernelRegister("Late", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    1500000000, &k) != ACL_SUCCESS)
		return (70);
	/* Line up on a barrier first, so both start at one instant. */
	if (HcclBarrier(comm, s) || !sync_ok(s) ||
	    npusimReadClock((int32_t)r, &rt, &t0) != ACL_SUCCESS)
		return (71);
	if (r == 1 && aclrtLaunchKernel(k, 1, NULL, 0, s))
		return (72);
	if (HcclAllReduce(x, x, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
	    comm, s))
		return (73);
	from = t0 + 200000000;
	to = t0 + 1300000000;
	deadline = mono_ns() + 10000000000ULL;
	while (!ok && mono_ns() < deadline) {
		usleep(2000);
		if (npusim_metrics_read((int32_t)r, &m) != 0 ||
		    m.device_ns <= from)
			continue;
		if (m.device_ns >= to)
			break;
		if (seen++ == 0) {
			from = m.device_ns;	/* the next window starts here */
			continue;
		}
		ok = 1;
	}
	if (!ok)
		return (74);
	if (r == 0 && m.utilization != 0.0) {
		fprintf(stderr, "rank 0 waiting: utilization %f\n",
		    m.utilization);
		return (75);
	}
	if (r == 1 && m.utilization < 0.999) {
		fprintf(stderr, "rank 1 computing: utilization %f\n",
		    m.utilization);
		return (76);
	}
	return (sync_ok(s) ? 0 : 77);
}

START_TEST(test_wait_not_busy)
{
	ck_assert_int_eq(run_ranks(2, rank_wait_idle), 0);
}
END_TEST

/*
 * A rank that has finished its part may exit: ranks 1 and 2 still trade
 * a message after rank 0 is gone (rank 1 sends late, so rank 2 waits and
 * checks its peers meanwhile).  Only the peer a send/recv needs matters.
 */
static int
rank_p2p_after_exit(uint32_t r, uint32_t n, HcclComm comm, aclrtStream s)
{
	int32_t	v = -1;

	(void)n;
	if (r == 0)
		_exit(0);
	if (r == 1) {
		usleep(300000);
		v = 77;
		if (HcclSend(&v, 1, HCCL_DATA_TYPE_INT32, 2, comm, s) ||
		    !sync_ok(s))
			return (60);
		return (0);
	}
	if (HcclRecv(&v, 1, HCCL_DATA_TYPE_INT32, 1, comm, s))
		return (61);
	if (!sync_ok(s)) {
		fprintf(stderr, "rank 2: recv failed with rank 0 gone\n");
		return (62);
	}
	return (v == 77 ? 0 : 63);
}

START_TEST(test_p2p_after_exit)
{
	ck_assert_int_eq(run_ranks(3, rank_p2p_after_exit), 0);
}
END_TEST

/* Rank 1 dies after joining; rank 0's collective must fail promptly. */
static int
rank_dies(uint32_t r, uint32_t n, HcclComm comm, aclrtStream s)
{
	float		x = 1;
	uint64_t	t0;
	aclError	e;

	if (r == 1)
		_exit(0);
	t0 = mono_ns();
	if (HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
	    comm, s) != HCCL_SUCCESS)
		return (30);
	e = aclrtSynchronizeStream(s);
	if (e == ACL_SUCCESS)
		return (31);
	/* Detected as a dead peer, well before the 20 s timeout. */
	if (mono_ns() - t0 > 10000000000ULL)
		return (32);
	/* The comm is now broken for good. */
	return (HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_SUM, comm, s) == HCCL_E_REMOTE ? 0 : 33);
}

START_TEST(test_rank_dies)
{
	setenv("NPUSIM_HCCL_TIMEOUT_S", "20", 1);
	ck_assert_int_eq(run_ranks(2, rank_dies), 0);
}
END_TEST

START_TEST(test_init_timeout)
{
	HcclRootInfo	root;
	HcclComm	comm;
	uint64_t	t0;

	setenv("NPUSIM_HCCL_TIMEOUT_S", "0.5", 1);
	ck_assert_int_eq(HcclGetRootInfo(&root), HCCL_SUCCESS);
	t0 = mono_ns();
	ck_assert_int_eq(HcclCommInitRootInfo(2, &root, 0, &comm),
	    HCCL_E_TIMEOUT);
	ck_assert(mono_ns() - t0 >= 400000000ULL);
}
END_TEST

START_TEST(test_bad_params)
{
	HcclRootInfo	root;
	HcclComm	comm;
	float		x;
	void		*junk = (void *)(uintptr_t)0xbad0;

	memset(&root, 0, sizeof root);
	ck_assert_int_eq(HcclCommInitRootInfo(2, &root, 0, &comm),
	    HCCL_E_PARA);
	ck_assert_int_eq(HcclGetRootInfo(&root), HCCL_SUCCESS);
	ck_assert_int_eq(HcclCommInitRootInfo(2, &root, 2, &comm),
	    HCCL_E_PARA);
	ck_assert_int_eq(HcclCommInitRootInfo(0, &root, 0, &comm),
	    HCCL_E_PARA);
	ck_assert_int_eq(HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_SUM, NULL, NULL), HCCL_E_PTR);
	ck_assert_int_eq(HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_SUM, junk, NULL), HCCL_E_PARA);
	ck_assert_int_eq(HcclAllReduce(NULL, &x, 1, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_SUM, junk, NULL), HCCL_E_PTR);
	ck_assert_int_eq(HcclCommDestroy(junk), HCCL_E_PARA);
	ck_assert_int_eq(HcclBarrier(junk, NULL), HCCL_E_PARA);
}
END_TEST

/* A single-rank comm checks types and ops without forking. */
START_TEST(test_single_rank_params)
{
	HcclRootInfo	root;
	HcclComm	comm;
	float		x = 2, y = 0;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(HcclGetRootInfo(&root), HCCL_SUCCESS);
	ck_assert_int_eq(HcclCommInitRootInfo(1, &root, 0, &comm),
	    HCCL_SUCCESS);
	ck_assert_int_eq(HcclAllReduce(&x, &y, 1, (HcclDataType)77,
	    HCCL_REDUCE_SUM, comm, NULL), HCCL_E_PARA);
	ck_assert_int_eq(HcclAllReduce(&x, &y, 1, HCCL_DATA_TYPE_FP32,
	    (HcclReduceOp)9, comm, NULL), HCCL_E_PARA);
	ck_assert_int_eq(HcclAllReduce(&x, &y, 1, HCCL_DATA_TYPE_INT128,
	    HCCL_REDUCE_SUM, comm, NULL), HCCL_E_NOT_SUPPORT);
	ck_assert_int_eq(HcclBroadcast(&x, 1, HCCL_DATA_TYPE_FP32, 3, comm,
	    NULL), HCCL_E_PARA);
	ck_assert_int_eq(HcclSend(&x, 1, HCCL_DATA_TYPE_FP32, 0, comm, NULL),
	    HCCL_E_PARA);
	ck_assert_int_eq(HcclAllReduce(&x, &y, 1, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_SUM, comm, NULL), HCCL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	ck_assert(y == 2.0f);
	ck_assert_int_eq(HcclCommDestroy(comm), HCCL_SUCCESS);
}
END_TEST

static Suite *
sim_hccl_suite(void)
{
	Suite	*s = suite_create("sim_hccl");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 40);
	tcase_add_test(tc, test_allreduce);
	tcase_add_test(tc, test_collectives);
	tcase_add_test(tc, test_slow_rank);
	tcase_add_test(tc, test_model_time);
	tcase_add_test(tc, test_rank_dies);
	tcase_add_test(tc, test_p2p_after_exit);
	tcase_add_test(tc, test_wait_not_busy);
	tcase_add_test(tc, test_init_timeout);
	tcase_add_test(tc, test_bad_params);
	tcase_add_test(tc, test_single_rank_params);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr;
	char	 name[128];
	int	 failed, d;

	snprintf(prefix, sizeof prefix, "npusimtest-hc-%d", (int)getpid());
	setenv("NPUSIM_SHM_PREFIX", prefix, 1);
	setenv("NPUSIM_DEVICES", "4", 1);
	unsetenv("NPUSIM_SLOW_RANK");
	unsetenv("NPUSIM_SLOW_LINK");
	unsetenv("NPUSIM_LINK_BW_GBS");
	unsetenv("NPUSIM_TIME_SCALE");
	unsetenv("NPUSIM_HCCL_TIMEOUT_S");
	sr = srunner_create(sim_hccl_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (d = 0; d < 4; d++) {
		snprintf(name, sizeof name, "/%s-dev%d-chan", prefix, d);
		shm_unlink(name);
		snprintf(name, sizeof name, "/%s-dev%d-metrics", prefix, d);
		shm_unlink(name);
	}
	return (failed == 0 ? 0 : 1);
}

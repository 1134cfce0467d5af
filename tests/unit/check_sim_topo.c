/*
 * check_sim_topo.c - the simulator's topology: nodes x devices, fast
 * links inside a node, the network across nodes.  The cost model
 * (sim/sim-topo.c, built in) gives the ring's time at the slowest link
 * crossed; then real rank processes told they are on two nodes
 * (NPUSIM_NODE) rendezvous through a file (NPUSIM_COMM_DIR), and their
 * all-reduce records last exactly the model at the configured RoCE link,
 * while two ranks of one node run at the node's link; send/recv take
 * the link between their two ranks.
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>

#include "../../sim/sim.h"
#include "sim-prefix.h"

START_TEST(test_nodes)
{
	uint64_t	n[4];

	n[0] = n[1] = sim_topo_hash("node1");
	n[2] = n[3] = sim_topo_hash("node2");
	ck_assert(n[0] != n[2]);
	ck_assert_uint_eq(sim_topo_nodes(n, 4), 2);
	ck_assert_uint_eq(sim_topo_nodes(n, 2), 1);
	ck_assert_uint_eq(sim_topo_nodes(n + 1, 2), 2);
	ck_assert_uint_eq(sim_topo_nodes(n, 0), 0);
	ck_assert(sim_topo_hash("") != 0);
}
END_TEST

START_TEST(test_ring_link)
{
	struct sim_link	hccs = { 50e9, 2000 }, roce = { 10e9, 15000 }, l;

	l = sim_topo_ring_link(1, &hccs, &roce, 0);
	ck_assert(l.bw == 50e9 && l.lat_ns == 2000);
	/* Across nodes: the slowest link crossed, bandwidth and latency. */
	l = sim_topo_ring_link(2, &hccs, &roce, 0);
	ck_assert(l.bw == 10e9 && l.lat_ns == 15000);
	/* A "network" faster than the node's links never speeds it up. */
	l = sim_topo_ring_link(3, &roce, &hccs, 0);
	ck_assert(l.bw == 10e9 && l.lat_ns == 15000);
	/* A slow link, slower still, wins; one faster does not. */
	l = sim_topo_ring_link(2, &hccs, &roce, 2.5e9);
	ck_assert(l.bw == 2.5e9);
	l = sim_topo_ring_link(2, &hccs, &roce, 20e9);
	ck_assert(l.bw == 10e9);
}
END_TEST

START_TEST(test_coll_ns)
{
	struct sim_link	l = { 10e9, 15000 };

	/* all-reduce 4 ranks, 16 MB: 2*3/4 * 16e6 / 10e9 s + 6 hops. */
	ck_assert_uint_eq(sim_topo_coll_ns(SIM_COMM_ALLREDUCE, 4, 16000000,
	    l), 2400000 + 90000);
	ck_assert_uint_eq(sim_topo_coll_ns(SIM_COMM_BROADCAST, 4, 10000000,
	    l), 1000000 + 45000);
	ck_assert_uint_eq(sim_topo_coll_ns(SIM_COMM_ALLGATHER, 4, 40000000,
	    l), 3000000 + 45000);
	ck_assert_uint_eq(sim_topo_coll_ns(SIM_COMM_BARRIER, 4, 0, l),
	    90000);
	ck_assert_uint_eq(sim_topo_coll_ns(SIM_COMM_ALLREDUCE, 1, 1 << 20,
	    l), 15000);
}
END_TEST

static char	dir[256];
static int	p2p;		/* the ranks send/recv instead of all-reduce */

/* A root info made where the test process never loads the simulator's
 * environment (children must read their own NPUSIM_NODE). */
static void
make_root(HcclRootInfo *root)
{
	int	fd[2], st;
	pid_t	pid;

	ck_assert_int_eq(pipe(fd), 0);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		close(fd[0]);
		if (HcclGetRootInfo(root) != HCCL_SUCCESS ||
		    write(fd[1], root, sizeof *root) != (ssize_t)sizeof *root)
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	ck_assert_int_eq(read(fd[0], root, sizeof *root),
	    (ssize_t)sizeof *root);
	close(fd[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static uint64_t
mono_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/*
 * One rank: on node `node`, device r; a barrier lines the ranks up, then
 * an all-reduce of 4M fp32; its record (less the wait) must last want_ns
 * of modelled time.
 */
static int
rank_main(uint32_t r, uint32_t n, const char *node, const HcclRootInfo *root,
    uint64_t want_ns)
{
	struct npusim_channel_reader	 rd;
	struct npusim_record		 rec[16];
	aclrtStream			 s;
	HcclComm			 comm;
	uint64_t			 lost, deadline, len;
	int64_t				 drift = 0;
	size_t				 cnt = 4U << 20;
	float				*buf;
	int				 i, got = 0;

	setenv("NPUSIM_NODE", node, 1);
	if ((buf = calloc(cnt, sizeof *buf)) == NULL)
		return (20);
	if (aclrtSetDevice((int32_t)r) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    npusim_channel_open((int32_t)r, &rd) != 0)
		return (21);
	if (HcclCommInitRootInfo(n, root, r, &comm) != HCCL_SUCCESS)
		return (22);
	if (HcclBarrier(comm, s) != HCCL_SUCCESS)
		return (23);
	if (p2p ? (r == 0 ? HcclSend(buf, cnt, HCCL_DATA_TYPE_FP32, 1, comm,
	    s) : HcclRecv(buf, cnt, HCCL_DATA_TYPE_FP32, 0, comm, s)) :
	    HcclAllReduce(buf, buf, cnt, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_SUM, comm, s))
		return (23);
	if (aclrtSynchronizeStream(s) != ACL_SUCCESS)
		return (23);
	deadline = mono_ns() + 5000000000ULL;
	for (;;) {
		if (mono_ns() > deadline)
			return (24);
		if ((i = npusim_channel_read(&rd, rec + got, 16 - (size_t)got,
		    &lost)) < 0)
			return (25);
		got += i;
		for (i = 0; i < got; i++)
			if (rec[i].kind == NPUSIM_TASK_COMM &&
			    strcmp(rec[i].name, p2p ? (r == 0 ? "HcclSend" :
			    "HcclRecv") : "HcclAllReduce") == 0 &&
			    rec[i].pid == (int32_t)getpid())
				break;
		if (i < got)
			break;
		if (got == 16)
			got = 0;
		usleep(1000);
	}
	npusimClockParams((int32_t)r, NULL, &drift);
	/* Device-clock length: the wait (monotonic ns) and the model both
	 * run at the device's drift. */
	len = rec[i].end_ns - rec[i].start_ns;
	want_ns = (uint64_t)llround((double)(want_ns + rec[i].wait_ns) *
	    (1.0 + (double)drift / 1e9));
	if (len + 3 < want_ns || len > want_ns + 3) {
		fprintf(stderr, "rank %u on %s: all_reduce %llu ns, model "
		    "%llu\n", r, node, (unsigned long long)len,
		    (unsigned long long)want_ns);
		return (26);
	}
	npusim_channel_close(&rd);
	HcclCommDestroy(comm);
	free(buf);
	return (0);
}

/* n ranks; rank i on nodes[i]; all must see want_ns. */
static void
run(uint32_t n, const char *const *nodes, uint64_t want_ns)
{
	HcclRootInfo	root;
	pid_t		pid[4];
	uint32_t	i;
	int		st, bad = 0;
	DIR		*d;
	struct dirent	*e;

	make_root(&root);
	ck_assert(strstr(root.internal, dir) != NULL);
	for (i = 0; i < n; i++) {
		pid[i] = fork();
		ck_assert_int_ne(pid[i], -1);
		if (pid[i] == 0)
			_exit(rank_main(i, n, nodes[i], &root, want_ns));
	}
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(waitpid(pid[i], &st, 0), pid[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "rank %u: status %d\n", i, st);
			bad++;
		}
	}
	ck_assert_int_eq(bad, 0);
	/* The rendezvous file is gone once everyone joined. */
	ck_assert_ptr_nonnull(d = opendir(dir));
	while ((e = readdir(d)) != NULL)
		ck_assert_msg(e->d_name[0] == '.', "left %s", e->d_name);
	closedir(d);
}

/* 4 ranks on 2 nodes: the ring crosses RoCE (10 GB/s, 15 us a hop). */
START_TEST(test_two_nodes)
{
	static const char *const nodes[] = { "nA", "nA", "nB", "nB" };
	struct sim_link	roce = { 10e9, 15000 };

	run(4, nodes, sim_topo_coll_ns(SIM_COMM_ALLREDUCE, 4,
	    (4U << 20) * 4, roce));
}
END_TEST

/* Send/recv between two nodes: B / 10 GB/s + one 15 us hop; between
 * two devices of one node: B / 50 GB/s + 2 us. */
START_TEST(test_p2p)
{
	static const char *const two[] = { "nA", "nB" }, *const one[] = {
	    "nA", "nA" };
	double	b = (4U << 20) * 4.0;

	p2p = 1;
	run(2, two, (uint64_t)(b / 10e9 * 1e9 + 15000));
	run(2, one, (uint64_t)(b / 50e9 * 1e9 + 2000));
}
END_TEST

/* 2 ranks of one node: HCCS (50 GB/s, 2 us). */
START_TEST(test_one_node)
{
	static const char *const nodes[] = { "nA", "nA" };
	struct sim_link	hccs = { 50e9, 2000 };

	run(2, nodes, sim_topo_coll_ns(SIM_COMM_ALLREDUCE, 2,
	    (4U << 20) * 4, hccs));
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("sim_topo");
	TCase	*tc = tcase_create("core");
	SRunner	*sr;
	char	 name[160];
	int	 failed, dv;

	sim_prefix_set("topo");
	snprintf(dir, sizeof dir, "/tmp/npusim-topo-%d", (int)getpid());
	if (mkdir(dir, 0700) != 0) {
		perror(dir);
		return (1);
	}
	setenv("NPUSIM_COMM_DIR", dir, 1);
	setenv("NPUSIM_DEVICES", "4", 1);
	setenv("NPUSIM_LINK_BW_GBS", "50", 1);
	setenv("NPUSIM_LINK_LAT_US", "2", 1);
	setenv("NPUSIM_ROCE_BW_GBS", "10", 1);
	setenv("NPUSIM_ROCE_LAT_US", "15", 1);
	unsetenv("NPUSIM_SLOW_LINK");
	unsetenv("NPUSIM_TIME_SCALE");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_nodes);
	tcase_add_test(tc, test_ring_link);
	tcase_add_test(tc, test_coll_ns);
	tcase_add_test(tc, test_two_nodes);
	tcase_add_test(tc, test_one_node);
	tcase_add_test(tc, test_p2p);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (dv = 0; dv < 4; dv++) {
		npusimShmName(name, sizeof name, dv, "chan");
		shm_unlink(name);
		npusimShmName(name, sizeof name, dv, "metrics");
		shm_unlink(name);
	}
	rmdir(dir);
	return (failed == 0 ? 0 : 1);
}

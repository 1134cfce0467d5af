/*
 * npusim-dist - an N-rank data-parallel training job on the simulated
 * NPU: one process per rank (RANK, LOCAL_RANK and WORLD_SIZE set), each
 * running forward and backward kernels and an HcclAllReduce of its
 * gradients per step (--grads N fp32 elements, 1 MiB by default).
 * --slow-rank R makes rank R compute slower, so the others wait for it in
 * the all-reduce.  --steps 0 runs until SIGTERM or SIGINT, which the
 * parent forwards to the ranks; exit status is 0 only if every rank
 * succeeded.
 *
 * --launched runs one rank of a job a launcher started (srun, torchrun):
 * rank, world size and local rank from RANK/WORLD_SIZE/LOCAL_RANK, else
 * SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; rank 0 publishes the HCCL root
 * info as a file in NPUSIM_COMM_DIR (a directory every rank sees, on
 * every node), as a real job passes it through its store.
 *
 * --scenario NAME runs a workload of the scenario library instead
 * (scenario.c, doc/npusim.md): a richer op mix, every collective kind,
 * and one injected fault whose ground truth --truth prints as JSON.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>

#include "example.h"

#define DIST_GRADS	(256U * 1024)	/* fp32 gradient elements (1 MiB) */
#define DIST_GRADS_MAX	(64U << 20)	/* --grads: at most 256 MiB */
#define DIST_MAX_RANKS	64

#define DIST_USAGE	"[--ranks N | --launched] [--steps S] [--slow-rank R]" \
	"\n    [--grads N]"

static int	dist_device = -1;	/* -1: rank % devices */
static size_t	dist_grads = DIST_GRADS;	/* --grads */
static char	dist_root_path[512];	/* --launched rank 0: the root info */

/* Every rank joined the comm, so every rank read the root info: rank 0
 * removes its file (not left behind if the job is killed later). */
static void
dist_root_done(void)
{
	if (dist_root_path[0] != '\0') {
		(void)unlink(dist_root_path);
		dist_root_path[0] = '\0';
	}
}

static int
dist_set_device(int rank)
{
	uint32_t	ndev;

	if (aclrtGetDeviceCount(&ndev) != ACL_SUCCESS || ndev == 0)
		return (1);
	return (example_check(aclrtSetDevice((dist_device >= 0 ?
	    dist_device : rank) % (int)ndev), "aclrtSetDevice"));
}

/* The first of two environment variables that is set, as an int. */
static int
dist_env2(const char *a, const char *b, int def)
{
	const char	*s = getenv(a);

	if (s == NULL || *s == '\0')
		s = getenv(b);
	return (s == NULL || *s == '\0' ? def : atoi(s));
}

/*
 * The root info's rendezvous for a launched job: rank 0 makes it and
 * publishes it (write, then rename: never seen half written), the others
 * wait for it.  The name is the job's (Slurm job and step, else the
 * launcher's run id), so concurrent jobs never meet.  The file is 0600,
 * made under a fresh name (mkstemp: no planted file or link is written
 * through), and read only when this user owns it.
 */
static int
dist_root_exchange(int rank, HcclRootInfo *root, char *path, size_t len)
{
	const char	*dir = getenv("NPUSIM_COMM_DIR"), *job, *step;
	char		 tmp[600];
	struct stat	 st;
	double		 t0;
	ssize_t		 got;
	int		 fd;

	if (dir == NULL || dir[0] != '/') {
		fprintf(stderr, "npusim-dist: --launched with more than one "
		    "rank needs NPUSIM_COMM_DIR (a directory all ranks "
		    "share)\n");
		return (1);
	}
	if ((job = getenv("SLURM_JOB_ID")) != NULL) {
		step = getenv("SLURM_STEP_ID");
		snprintf(path, len, "%s/rootinfo-%s.%s", dir, job,
		    step != NULL ? step : "0");
	} else if ((job = getenv("TORCHELASTIC_RUN_ID")) != NULL ||
	    (job = getenv("MSPTI_JOB_ID")) != NULL)
		snprintf(path, len, "%s/rootinfo-%s", dir, job);
	else {
		fprintf(stderr, "npusim-dist: --launched needs SLURM_JOB_ID, "
		    "TORCHELASTIC_RUN_ID or MSPTI_JOB_ID to name the job\n");
		return (1);
	}
	if (rank == 0) {
		if (HcclGetRootInfo(root) != HCCL_SUCCESS)
			return (1);
		snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
		if ((fd = mkstemp(tmp)) == -1 ||
		    write(fd, root, sizeof *root) != (ssize_t)sizeof *root ||
		    close(fd) != 0 || rename(tmp, path) != 0) {
			perror(tmp);
			if (fd != -1)
				unlink(tmp);
			return (1);
		}
		return (0);
	}
	for (t0 = example_now_ms(); !example_stop; usleep(10000)) {
		/* O_NONBLOCK: a FIFO there must not stop us in open(2). */
		if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
		    O_NONBLOCK)) != -1) {
			got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
			    st.st_uid == geteuid() ?
			    read(fd, root, sizeof *root) : -1;
			close(fd);
			if (got == (ssize_t)sizeof *root)
				return (0);
		}
		if (example_now_ms() - t0 > 60000) {
			fprintf(stderr, "rank %d: no root info at %s after "
			    "60 s\n", rank, path);
			return (1);
		}
	}
	return (1);
}

static void
dist_setenv_int(const char *name, int v)
{
	char	buf[32];

	snprintf(buf, sizeof buf, "%d", v);
	setenv(name, buf, 1);
}

/* Body of one rank process running a scenario; its exit status. */
static int
dist_scenario_rank(const struct scenario *sc, int rank, HcclRootInfo *root)
{
	struct scenario_rank	*w = NULL;
	aclrtStream		 s = NULL;
	HcclComm		 comm = NULL;
	HcclResult		 hr;
	uint64_t		 range;
	long			 step;
	double			 t0;
	int			 rc = 1;

	example_signals();
	if (dist_set_device(rank))
		return (1);
	if ((hr = HcclCommInitRootInfo((uint32_t)sc->ranks, root,
	    (uint32_t)rank, &comm)) != HCCL_SUCCESS) {
		fprintf(stderr, "rank %d: HcclCommInitRootInfo: %d\n", rank,
		    hr);
		return (1);
	}
	dist_root_done();
	if (example_check(aclrtCreateStream(&s), "aclrtCreateStream") ||
	    (w = scenario_rank_new(sc, rank, comm, s)) == NULL)
		goto out;
	for (step = 1; sc->steps == 0 || step <= sc->steps; step++) {
		if (example_stop)
			break;
		t0 = example_now_ms();
		range = example_range_start("step", NULL);
		if (scenario_step(w, step) != 0) {
			if (example_stop)
				break;
			goto out;
		}
		example_range_end(range);
		printf("rank %d step %ld: %.4f ms\n", rank, step,
		    example_now_ms() - t0);
		fflush(stdout);
	}
	rc = 0;
out:
	scenario_rank_free(w);
	if (s != NULL)
		aclrtDestroyStream(s);
	if (comm != NULL)
		HcclCommDestroy(comm);
	aclFinalize();
	return (rc);
}

/* Body of one rank process; returns its exit status. */
static int
dist_rank(int rank, int nranks, long steps, HcclRootInfo *root)
{
	aclrtFuncHandle	 fwd, bwd, opt;
	aclrtStream	 s = NULL;
	HcclComm	 comm = NULL;
	HcclResult	 hr;
	float		*host = NULL, want;
	void		*grads = NULL;
	long		 step;
	size_t		 i;
	uint64_t	 range;
	double		 t0, t1;
	int		 l, rc = 1, bad = 0;

	example_signals();
	if (dist_set_device(rank))
		return (1);
	if ((hr = HcclCommInitRootInfo((uint32_t)nranks, root,
	    (uint32_t)rank, &comm)) != HCCL_SUCCESS) {
		fprintf(stderr, "rank %d: HcclCommInitRootInfo: %d\n", rank,
		    hr);
		return (1);
	}
	dist_root_done();
	fwd = example_kernel("MatMulForward", NPUSIM_KERNEL_AI_CORE, 6e9, 8e6);
	bwd = example_kernel("MatMulBackward", NPUSIM_KERNEL_AI_CORE, 1.2e10,
	    1.6e7);
	opt = example_kernel("ApplyAdam", NPUSIM_KERNEL_AI_VECTOR, 4e6, 8e6);
	if (example_check(aclrtCreateStream(&s), "aclrtCreateStream") ||
	    example_check(aclrtMalloc(&grads, dist_grads * sizeof(float),
	    ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") ||
	    example_check(aclrtMallocHost((void **)&host, dist_grads *
	    sizeof(float)), "aclrtMallocHost"))
		goto out;
	for (step = 1; steps == 0 || step <= steps; step++) {
		if (example_stop)
			break;
		t0 = example_now_ms();
		range = example_range_start("step", NULL);
		for (i = 0; i < dist_grads; i++)
			host[i] = (float)(rank + 1);
		if (example_check(aclrtMemcpyAsync(grads, dist_grads *
		    sizeof(float), host, dist_grads * sizeof(float),
		    ACL_MEMCPY_HOST_TO_DEVICE, s), "memcpy"))
			goto out;
		for (l = 0; l < 4; l++)
			aclrtLaunchKernel(fwd, 32, NULL, 0, s);
		for (l = 0; l < 4; l++)
			aclrtLaunchKernel(bwd, 32, NULL, 0, s);
		if ((hr = HcclAllReduce(grads, grads, dist_grads,
		    HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s)) !=
		    HCCL_SUCCESS) {
			fprintf(stderr, "rank %d: HcclAllReduce: %d\n", rank,
			    hr);
			goto out;
		}
		aclrtLaunchKernel(opt, 16, NULL, 0, s);
		aclrtMemcpyAsync(host, dist_grads * sizeof(float), grads,
		    dist_grads * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST, s);
		if (aclrtSynchronizeStream(s) != ACL_SUCCESS) {
			/* A peer stopping first is not a failure when asked. */
			if (example_stop)
				break;
			fprintf(stderr, "rank %d: step %ld failed: %s\n",
			    rank, step, aclGetRecentErrMsg());
			goto out;
		}
		example_range_end(range);
		want = (float)nranks * (float)(nranks + 1) / 2.0f;
		for (i = 0; i < dist_grads; i += 4097)
			if (fabsf(host[i] - want) > 1e-3f)
				bad = 1;
		if (bad) {
			fprintf(stderr, "rank %d: wrong all-reduce result\n",
			    rank);
			goto out;
		}
		t1 = example_now_ms();
		printf("rank %d step %ld: %.4f ms\n", rank, step, t1 - t0);
		fflush(stdout);
	}
	rc = 0;
out:
	if (grads != NULL)
		aclrtFree(grads);
	if (host != NULL)
		aclrtFreeHost(host);
	if (s != NULL)
		aclrtDestroyStream(s);
	if (comm != NULL)
		HcclCommDestroy(comm);
	aclFinalize();
	return (rc);
}

/* --grads N: 1 to DIST_GRADS_MAX elements, or a one-line error. */
static int
dist_parse_grads(const char *arg)
{
	unsigned long long	 v;
	char			*end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' ||
	    v < 1 || v > DIST_GRADS_MAX) {
		fprintf(stderr, "npusim-dist: --grads %s: not a count of "
		    "gradient elements from 1 to %u\n", arg, DIST_GRADS_MAX);
		return (-1);
	}
	dist_grads = (size_t)v;
	return (0);
}

/* --launched: this process is one rank; its exit status. */
static int
dist_launched(const struct scenario *sc, int nranks, long steps)
{
	HcclRootInfo	root;
	int		rank, rc;

	rank = dist_env2("RANK", "SLURM_PROCID", 0);
	dist_device = dist_env2("LOCAL_RANK", "SLURM_LOCALID", rank);
	if (rank < 0 || rank >= nranks || dist_device < 0) {
		fprintf(stderr, "npusim-dist: rank %d of %d, local rank %d: "
		    "bad launcher environment\n", rank, nranks, dist_device);
		return (2);
	}
	/* The agent and the simulator read RANK (the slow rank is matched
	 * against the comm's rank anyway). */
	dist_setenv_int("RANK", rank);
	dist_setenv_int("LOCAL_RANK", dist_device);
	dist_setenv_int("WORLD_SIZE", nranks);
	example_signals();
	if (nranks == 1) {
		if (HcclGetRootInfo(&root) != HCCL_SUCCESS)
			return (1);
	} else if (dist_root_exchange(rank, &root, dist_root_path,
	    sizeof dist_root_path) != 0)
		return (1);
	if (rank != 0)
		dist_root_path[0] = '\0';
	rc = sc->kind != SCENARIO_NONE ? dist_scenario_rank(sc, rank, &root) :
	    dist_rank(rank, nranks, steps, &root);
	/* A rank 0 whose comm never formed: the name goes anyway. */
	dist_root_done();
	return (rc);
}

int
main(int argc, char **argv)
{
	static const struct option	 opts[] = {
		{ "ranks", required_argument, NULL, 'n' },
		{ "steps", required_argument, NULL, 's' },
		{ "slow-rank", required_argument, NULL, 'r' },
		{ "launched", no_argument, NULL, 'L' },
		{ "grads", required_argument, NULL, 'g' },
		EXAMPLE_LONGOPTS,
		SCENARIO_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	struct scenario			 sc;
	HcclRootInfo			 root;
	pid_t				 pids[DIST_MAX_RANKS], pid;
	long				 steps = 10;
	int				 nranks = 2, slow = -1, ch, i, status;
	int				 left, failed = 0, forwarded = 0;
	int				 launched = 0, grads_set = 0;

	scenario_init(&sc, 1, nranks, steps);
	while ((ch = getopt_long(argc, argv, "n:s:r:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			nranks = atoi(optarg);
			sc.ranks = nranks;
			break;
		case 's':
			steps = strtol(optarg, NULL, 10);
			sc.steps = steps;
			break;
		case 'r':
			slow = atoi(optarg);
			sc.slow_rank = slow;
			break;
		case 'L':
			launched = 1;
			break;
		case 'g':
			if (dist_parse_grads(optarg) != 0)
				return (2);
			grads_set = 1;
			break;
		default:
			if (scenario_option(&sc, ch, optarg) != 0)
				example_option("npusim-dist", DIST_USAGE, ch);
		}
	}
	if (launched) {
		nranks = dist_env2("WORLD_SIZE", "SLURM_NTASKS", 1);
		sc.ranks = nranks;
	}
	/* A scenario file may have set them too; the last setting wins. */
	nranks = sc.ranks;
	steps = sc.steps;
	slow = sc.slow_rank;
	if (nranks < 1 || nranks > DIST_MAX_RANKS || steps < 0 ||
	    slow >= nranks || optind != argc)
		example_usage("npusim-dist", DIST_USAGE, 2);
	if (sc.kind != SCENARIO_NONE && grads_set) {
		fprintf(stderr, "npusim-dist: --grads does not apply to a "
		    "scenario (it sizes its own tensors)\n");
		return (2);
	}
	if (sc.kind != SCENARIO_NONE) {
		/* Before the library reads its environment. */
		if (scenario_prepare(&sc) != 0)
			return (2);
		if (sc.truth) {
			scenario_truth(&sc, stdout);
			return (0);
		}
	} else if (sc.truth) {
		fprintf(stderr, "--truth needs --scenario\n");
		return (2);
	} else if (slow >= 0)
		/* Before the library reads its environment (it does so
		 * once). */
		dist_setenv_int("NPUSIM_SLOW_RANK", slow);
	if (launched)
		return (dist_launched(&sc, nranks, steps));
	if (HcclGetRootInfo(&root) != HCCL_SUCCESS) {
		fprintf(stderr, "HcclGetRootInfo failed\n");
		return (1);
	}
	example_signals();
	fflush(stdout);
	for (i = 0; i < nranks; i++) {
		if ((pid = fork()) == -1) {
			perror("fork");
			nranks = i;
			failed = 1;
			break;
		}
		if (pid == 0) {
			dist_setenv_int("RANK", i);
			dist_setenv_int("LOCAL_RANK", i);
			dist_setenv_int("WORLD_SIZE", nranks);
			_exit(sc.kind != SCENARIO_NONE ?
			    dist_scenario_rank(&sc, i, &root) :
			    dist_rank(i, nranks, steps, &root));
		}
		pids[i] = pid;
	}
	for (left = nranks; left > 0;) {
		if (example_stop && !forwarded) {
			for (i = 0; i < nranks; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGTERM);
			forwarded = 1;
		}
		pid = waitpid(-1, &status, 0);
		if (pid == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < nranks; i++) {
			if (pids[i] != pid)
				continue;
			pids[i] = 0;
			left--;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "rank %d failed (status %d)\n",
				    i, status);
				failed = 1;
			}
		}
	}
	return (failed ? 1 : 0);
}

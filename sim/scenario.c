/*
 * scenario.c - workloads with known answers for the npusim examples.
 *
 * A scenario is one training step's op mix (26 distinct kernels, the
 * collectives broadcast, all-gather, all-to-all, batched send/recv, send,
 * recv, reduce-scatter and all-reduce) plus at most one injected fault.
 * Every fault is sized the same way: the faulty rank spends fault_pct
 * percent of a step's modelled compute time extra, in the fault's own
 * category (device compute, link transfer, data loading, host launch
 * gaps), so scores at a given size compare across scenarios.  The truth
 * (--truth) is printed from the same numbers the run uses.
 *
 * Compute faults are built from kernel variants registered with a fixed
 * duration (a multiple of the base kernel's modelled one), so a rank's
 * kernels can be slower in some steps and not others; the slow link uses
 * NPUSIM_SLOW_LINK.  The simulator reads its environment once, at the
 * first call, so scenario_prepare measures the cost model in a child
 * process and sets the environment before the program's first call.
 */
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>

#include "example.h"
#include "util.h"

#define SCN_LEVEL_PCT	0.25	/* variant granularity, percent */
#define SCN_LEVELS	400	/* variants for -100%..+100% */
#define SCN_TINY	32	/* tiny kernels launched per step */
#define SCN_TINY_NS	500	/* their modelled duration */
#define SCN_LAYERS	4
#define SCN_HBM_BPS	1.6e12	/* HBM bandwidth of the model (bytes/s) */

/* Elements of the collectives' buffers (fp16 unless noted). */
#define SCN_BCAST_N	1024		/* fp32, from rank 0 */
#define SCN_AG_N	(32U << 10)	/* all-gather, per rank */
#define SCN_A2A_N	(16U << 10)	/* all-to-all, per peer */
#define SCN_PIPE_N	(256U << 10)	/* batched send/recv to neighbours */
#define SCN_P2P_N	(4U << 10)	/* plain send/recv */
#define SCN_RS_N	(32U << 10)	/* reduce-scatter, per rank */
#define SCN_AR_N	1024		/* fp32 all-reduce (grad norm) */

/* Roles of a kernel in the faults. */
#define SCN_MEM		0x1	/* memory-bound variant (memory-bound) */
#define SCN_FALLBACK	0x2	/* AI_CPU fallback (aicpu) */

enum scn_k {
	K_EMBED, K_LN, K_QKV, K_ROPE, K_BMM_QK, K_SOFTMAX, K_DROPOUT,
	K_BMM_AV, K_PROJ, K_ADD, K_TOPK, K_NONZERO, K_SCATTER, K_FFN_UP,
	K_GELU, K_FFN_DOWN, K_LOSS, K_LOSS_GRAD, K_GRAD_X, K_GRAD_W,
	K_GELU_GRAD, K_SOFTMAX_GRAD, K_LN_GRAD, K_REDUCE_SUM, K_CAST,
	K_ADAMW, K_TINY, K_NKERN
};

static const struct scn_kdef {
	const char	*name;
	int		 type;
	double		 flops, bytes;
	uint32_t	 blocks;
	int		 roles;
} scn_kdefs[K_NKERN] = {
	/* Vector ops move more bytes than they compute, so they are
	 * memory-bound on the model (bytes / 1.6 TB/s), matmuls compute-
	 * bound (flops / 256 TFLOP/s): tens to ~160 us each. */
	[K_EMBED] = { "Embedding", NPUSIM_KERNEL_AI_VECTOR, 4e6, 24e6, 16,
	    SCN_MEM },
	[K_LN] = { "LayerNorm", NPUSIM_KERNEL_AI_VECTOR, 2e7, 16e6, 16,
	    SCN_MEM },
	[K_QKV] = { "MatMulQKV", NPUSIM_KERNEL_AI_CORE, 3e10, 24e6, 32, 0 },
	[K_ROPE] = { "RotaryEmbedding", NPUSIM_KERNEL_AI_VECTOR, 1e7, 12e6,
	    16, SCN_MEM },
	[K_BMM_QK] = { "BatchMatMulQK", NPUSIM_KERNEL_AI_CORE, 1.5e10, 16e6,
	    32, 0 },
	[K_SOFTMAX] = { "SoftmaxV2", NPUSIM_KERNEL_AI_VECTOR, 3e7, 24e6, 16,
	    SCN_MEM },
	[K_DROPOUT] = { "DropoutDoMask", NPUSIM_KERNEL_AI_VECTOR, 8e6, 16e6,
	    16, SCN_MEM },
	[K_BMM_AV] = { "BatchMatMulAV", NPUSIM_KERNEL_AI_CORE, 1.5e10, 16e6,
	    32, 0 },
	[K_PROJ] = { "MatMulOut", NPUSIM_KERNEL_AI_CORE, 1e10, 12e6, 32, 0 },
	[K_ADD] = { "Add", NPUSIM_KERNEL_AI_VECTOR, 6e6, 24e6, 16, SCN_MEM },
	[K_TOPK] = { "MoeGatingTopK", NPUSIM_KERNEL_AI_VECTOR, 4e6, 8e6, 8,
	    SCN_FALLBACK },
	[K_NONZERO] = { "NonZero", NPUSIM_KERNEL_AI_VECTOR, 2e6, 8e6, 8,
	    SCN_FALLBACK },
	[K_SCATTER] = { "ScatterNdUpdate", NPUSIM_KERNEL_AI_VECTOR, 2e6,
	    12e6, 8, SCN_FALLBACK },
	[K_FFN_UP] = { "MatMulFFNUp", NPUSIM_KERNEL_AI_CORE, 4e10, 32e6, 32,
	    0 },
	[K_GELU] = { "FastGelu", NPUSIM_KERNEL_AI_VECTOR, 3e7, 32e6, 16,
	    SCN_MEM },
	[K_FFN_DOWN] = { "MatMulFFNDown", NPUSIM_KERNEL_AI_CORE, 4e10, 32e6,
	    32, 0 },
	[K_LOSS] = { "SoftmaxCrossEntropy", NPUSIM_KERNEL_AI_VECTOR, 2e7,
	    16e6, 16, SCN_MEM },
	[K_LOSS_GRAD] = { "SoftmaxCrossEntropyGrad", NPUSIM_KERNEL_AI_VECTOR,
	    2e7, 16e6, 16, SCN_MEM },
	[K_GRAD_X] = { "MatMulGradInput", NPUSIM_KERNEL_AI_CORE, 3e10, 24e6,
	    32, 0 },
	[K_GRAD_W] = { "MatMulGradWeight", NPUSIM_KERNEL_AI_CORE, 3e10, 24e6,
	    32, 0 },
	[K_GELU_GRAD] = { "FastGeluGrad", NPUSIM_KERNEL_AI_VECTOR, 3e7, 32e6,
	    16, SCN_MEM },
	[K_SOFTMAX_GRAD] = { "SoftmaxGrad", NPUSIM_KERNEL_AI_VECTOR, 3e7,
	    24e6, 16, SCN_MEM },
	[K_LN_GRAD] = { "LayerNormGrad", NPUSIM_KERNEL_AI_VECTOR, 3e7, 24e6,
	    16, SCN_MEM },
	[K_REDUCE_SUM] = { "ReduceSum", NPUSIM_KERNEL_AI_VECTOR, 8e6, 16e6,
	    16, SCN_MEM },
	[K_CAST] = { "Cast", NPUSIM_KERNEL_AI_VECTOR, 4e6, 16e6, 16,
	    SCN_MEM },
	[K_ADAMW] = { "ApplyAdamW", NPUSIM_KERNEL_AI_VECTOR, 4e7, 48e6, 24,
	    SCN_MEM },
	[K_TINY] = { "Fill", NPUSIM_KERNEL_AI_VECTOR, 0, 0, 1, 0 },
};

static const struct scn_def {
	const char	*name;
	const char	*cause;		/* what a correct verdict says */
	double		 fault_pct;	/* default size */
	int		 rank_fault;	/* one rank has it */
	const char	*what;
} scn_defs[SCENARIO_MAX] = {
	[SCENARIO_BALANCED] = { "balanced", NULL, 0, 0,
	    "every rank runs the same work" },
	[SCENARIO_SLOW_COMPUTE] = { "slow-compute", "compute", 10, 1,
	    "the slow rank's kernels take fault-pct longer" },
	[SCENARIO_SLOW_LINK] = { "slow-link", "link", 20, 1,
	    "the slow rank's link is slower (NPUSIM_SLOW_LINK): its "
	    "send/recv to its neighbours takes fault-pct of the step's "
	    "compute longer" },
	[SCENARIO_HOST_BOUND] = { "host-bound", "data loading", 20, 1,
	    "the slow rank loads data (a dataload range on the host) "
	    "for fault-pct of the step's compute before each step" },
	[SCENARIO_LAUNCH_BOUND] = { "launch-bound", "host/launch", 20, 1,
	    "the slow rank's host is late with each of its tiny kernels, "
	    "so its device idles for fault-pct of the step's compute" },
	[SCENARIO_AICPU] = { "aicpu", "compute", 20, 1,
	    "the slow rank runs MoeGatingTopK, NonZero and "
	    "ScatterNdUpdate on AI_CPU (fallback), fault-pct longer in all" },
	[SCENARIO_MEMORY_BOUND] = { "memory-bound", "compute", 20, 1,
	    "the slow rank's vector kernels move more bytes (memory-bound), "
	    "fault-pct longer in all" },
	[SCENARIO_ROTATING] = { "rotating", NULL, 20, 0,
	    "in step k rank (k-1) mod ranks computes fault-pct slower: a "
	    "rotating straggler, no rank is slow overall" },
	[SCENARIO_JITTER] = { "jitter", NULL, 5, 0,
	    "every rank's compute varies by up to +-fault-pct per step "
	    "(uniform, independent): noise, no slow rank" },
};

struct scn_kern {
	aclrtFuncHandle	 base;
	uint64_t	 d0;		/* modelled ns, scaled */
	aclrtFuncHandle	 fault;		/* AI_CPU / memory-bound variant */
	aclrtFuncHandle	*var;		/* 2 * SCN_LEVELS + 1, lazily */
};

struct scenario_rank {
	const struct scenario	*sc;
	int			 rank, nranks;
	HcclComm		 comm;
	aclrtStream		 s;
	struct scn_kern		 k[K_NKERN];
	int			 level;		/* this step's compute scale */
	void			*in, *host_in, *loss;
	void			*bc, *ag_s, *ag_r, *a2a_s, *a2a_r;
	void			*pipe_s, *pipe_r, *p2p_s, *p2p_r;
	void			*rs_s, *rs_r, *ar;
	float			*host_loss;
};

#define SCN_IN_BYTES	(256U << 10)
#define SCN_LOSS_BYTES	512	/* loss and metrics, copied out per step */

const char *
scenario_name(enum scenario_kind k)
{
	if (k <= SCENARIO_NONE || k >= SCENARIO_MAX)
		return ("none");
	return (scn_defs[k].name);
}

void
scenario_list(FILE *f)
{
	for (int k = SCENARIO_NONE + 1; k < SCENARIO_MAX; k++)
		fprintf(f, "%-14s %s (default fault-pct %g)\n",
		    scn_defs[k].name, scn_defs[k].what, scn_defs[k].fault_pct);
}

void
scenario_init(struct scenario *sc, int multi, int ranks, long steps)
{
	memset(sc, 0, sizeof *sc);
	sc->kind = SCENARIO_NONE;
	sc->ranks = ranks;
	sc->steps = steps;
	sc->slow_rank = -1;
	sc->fault_pct = -1;
	sc->seed = 1;
	sc->multi = multi;
	sc->time_scale = 1;
}

static int
scn_number(const char *what, const char *s, double min, double max,
    double *out)
{
	char	*end;
	double	 v;

	errno = 0;
	v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || errno != 0 || !(v >= min) ||
	    !(v <= max)) {
		fprintf(stderr, "%s: '%s' is not a number in [%g, %g]\n", what,
		    s, min, max);
		return (-1);
	}
	*out = v;
	return (0);
}

/* One setting by its option name (as on the command line, no dashes). */
static int
scn_set(struct scenario *sc, const char *key, const char *val)
{
	double	v;
	int	k;

	if (strcmp(key, "scenario") == 0) {
		for (k = SCENARIO_NONE + 1; k < SCENARIO_MAX; k++)
			if (strcmp(val, scn_defs[k].name) == 0)
				break;
		if (k == SCENARIO_MAX) {
			fprintf(stderr, "unknown scenario '%s' (try "
			    "--list-scenarios)\n", val);
			return (-1);
		}
		sc->kind = (enum scenario_kind)k;
	} else if (strcmp(key, "fault-pct") == 0) {
		if (scn_number(key, val, 0, 100, &sc->fault_pct) != 0)
			return (-1);
	} else if (strcmp(key, "jitter-pct") == 0) {
		if (scn_number(key, val, 0, 50, &sc->jitter_pct) != 0)
			return (-1);
	} else if (strcmp(key, "seed") == 0) {
		if (scn_number(key, val, 0, 9007199254740992.0, &v) != 0)
			return (-1);
		sc->seed = (uint64_t)v;
	} else if (strcmp(key, "slow-rank") == 0) {
		if (scn_number(key, val, 0, 1 << 20, &v) != 0)
			return (-1);
		sc->slow_rank = (int)v;
	} else if (strcmp(key, "ranks") == 0) {
		if (scn_number(key, val, 1, 1 << 20, &v) != 0)
			return (-1);
		sc->ranks = (int)v;
	} else if (strcmp(key, "steps") == 0) {
		if (scn_number(key, val, 0, 1e15, &v) != 0)
			return (-1);
		sc->steps = (long)v;
	} else {
		fprintf(stderr, "unknown scenario setting '%s'\n", key);
		return (-1);
	}
	return (0);
}

/* A getopt_long value from SCENARIO_LONGOPTS: 0 taken, -1 bad, 1 not
 * ours. */
int
scenario_option(struct scenario *sc, int ch, const char *arg)
{
	switch (ch - SCENARIO_OPT_BASE) {
	case 0:
		return (scn_set(sc, "scenario", arg));
	case 1:
		return (scn_set(sc, "fault-pct", arg));
	case 2:
		return (scn_set(sc, "jitter-pct", arg));
	case 3:
		return (scn_set(sc, "seed", arg));
	case 4:
		return (scenario_file(sc, arg));
	case 5:
		sc->truth = 1;
		return (0);
	case 6:
		scenario_list(stdout);
		exit(0);
	}
	return (1);
}

/*
 * A scenario file: "key = value" (or "key value") lines with the option
 * names, '#' comments.  Settings apply in order, like options.
 */
int
scenario_file(struct scenario *sc, const char *path)
{
	FILE	*f;
	char	 line[512], *p, *key, *val, *e;
	int	 fd, n = 0, rc = 0;

	/* A FIFO nobody writes to: an error, not a wait. */
	if ((fd = util_open_input(path)) >= 0 &&
	    (f = fdopen(fd, "r")) == NULL) {
		close(fd);
		fd = -ENOMEM;
	}
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, util_input_strerror(fd));
		return (-1);
	}
	while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
		n++;
		if ((p = strchr(line, '#')) != NULL)
			*p = '\0';
		for (key = line; isspace((unsigned char)*key); key++)
			;
		if (*key == '\0')
			continue;
		for (p = key; *p != '\0' && *p != '=' &&
		    !isspace((unsigned char)*p); p++)
			;
		val = p;
		while (*val != '\0' && (isspace((unsigned char)*val) ||
		    *val == '='))
			val++;
		*p = '\0';
		for (e = val + strlen(val); e > val &&
		    isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		if (*val == '\0') {
			fprintf(stderr, "%s:%d: '%s' has no value\n", path, n,
			    key);
			rc = -1;
		} else if (scn_set(sc, key, val) != 0) {
			fprintf(stderr, "%s:%d: bad line\n", path, n);
			rc = -1;
		}
	}
	fclose(f);
	return (rc);
}

/* The rank that carries the fault (rank faults only), else -1. */
int
scenario_slow_rank(const struct scenario *sc)
{
	if (sc->kind <= SCENARIO_NONE || !scn_defs[sc->kind].rank_fault)
		return (-1);
	if (sc->slow_rank >= 0)
		return (sc->slow_rank);
	return (sc->ranks > 1 ? 1 : 0);
}

static double
scn_fault(const struct scenario *sc)
{
	if (sc->fault_pct >= 0)
		return (sc->fault_pct);
	return (sc->kind > SCENARIO_NONE ? scn_defs[sc->kind].fault_pct : 0);
}

/* Deterministic uniform [0, 1) from (seed, rank, step). */
static double
scn_uniform(uint64_t seed, int rank, long step)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ULL ^
	    ((uint64_t)(uint32_t)rank << 40) ^ (uint64_t)step;

	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return ((double)(z >> 11) / 9007199254740992.0);
}

/* Compute scale of (rank, step) in SCN_LEVEL_PCT levels. */
static int
scn_level(const struct scenario *sc, int rank, long step)
{
	double	pct = 0, j = sc->jitter_pct;
	long	lv;

	if (sc->kind == SCENARIO_JITTER)
		j += scn_fault(sc);
	if (j > 0)
		pct += (2 * scn_uniform(sc->seed, rank, step) - 1) * j;
	if (sc->kind == SCENARIO_SLOW_COMPUTE &&
	    rank == scenario_slow_rank(sc))
		pct += scn_fault(sc);
	if (sc->kind == SCENARIO_ROTATING && sc->ranks > 0 &&
	    (step - 1) % sc->ranks == rank)
		pct += scn_fault(sc);
	lv = lround(pct / SCN_LEVEL_PCT);
	if (lv > SCN_LEVELS)
		lv = SCN_LEVELS;
	if (lv < -SCN_LEVELS + 1)
		lv = -SCN_LEVELS + 1;
	return ((int)lv);
}

/*
 * The kernels' launches in one step, in order; the step's compute is
 * their modelled sum.  scn_program(NULL, ...) counts.
 */
static const enum scn_k scn_fwd[] = { K_LN, K_QKV, K_ROPE, K_BMM_QK,
    K_SOFTMAX, K_DROPOUT, K_BMM_AV, K_PROJ, K_ADD, K_LN, K_FFN_UP, K_GELU,
    K_FFN_DOWN, K_ADD };
static const enum scn_k scn_bwd[] = { K_GRAD_X, K_GRAD_W, K_GELU_GRAD,
    K_GRAD_X, K_GRAD_W, K_LN_GRAD, K_ADD, K_GRAD_X, K_GRAD_W, K_SOFTMAX_GRAD,
    K_GRAD_X, K_GRAD_W, K_GRAD_X, K_GRAD_W, K_LN_GRAD, K_REDUCE_SUM };

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* How many launches of kernel k one step has. */
static unsigned
scn_launches(enum scn_k k)
{
	unsigned n = 0;

	for (size_t i = 0; i < NELEM(scn_fwd); i++)
		n += scn_fwd[i] == k;
	for (size_t i = 0; i < NELEM(scn_bwd); i++)
		n += scn_bwd[i] == k;
	n *= SCN_LAYERS;
	switch (k) {
	case K_EMBED: case K_TOPK: case K_NONZERO: case K_SCATTER:
	case K_LOSS: case K_LOSS_GRAD: case K_CAST: case K_ADAMW:
		n += 1;
		break;
	case K_TINY:
		n += SCN_TINY;
		break;
	default:
		break;
	}
	return (n);
}

/* Modelled figures of the base op mix, from the simulator itself. */
struct scn_model {
	double		ts;		/* NPUSIM_TIME_SCALE as applied */
	uint64_t	compute_ns;	/* per step */
};

static int
scn_model_here(struct scn_model *m)
{
	aclrtFuncHandle	h;
	uint64_t	d;

	memset(m, 0, sizeof *m);
	if (npusimKernelRegister("scenario-probe", NPUSIM_KERNEL_AI_VECTOR, 0,
	    0, 1000000, &h) != ACL_SUCCESS)
		return (-1);
	m->ts = (double)npusimKernelDuration(h) / 1e6;
	for (int k = 0; k < K_NKERN; k++) {
		const struct scn_kdef *kd = &scn_kdefs[k];

		if (npusimKernelRegister(kd->name, (enum npusim_kernel_type)
		    kd->type, kd->flops, kd->bytes, k == K_TINY ? SCN_TINY_NS :
		    0, &h) != ACL_SUCCESS)
			return (-1);
		d = npusimKernelDuration(h);
		m->compute_ns += d * scn_launches((enum scn_k)k);
	}
	return (0);
}

/* The model measured in a child, so this process's first simulator call
 * still sees the environment set afterwards. */
static int
scn_model_child(struct scn_model *m)
{
	int	fd[2], st;
	pid_t	pid;
	ssize_t	n;

	if (pipe(fd) != 0)
		return (-1);
	fflush(NULL);
	if ((pid = fork()) == -1) {
		close(fd[0]);
		close(fd[1]);
		return (-1);
	}
	if (pid == 0) {
		close(fd[0]);
		if (scn_model_here(m) != 0)
			_exit(1);
		_exit(write(fd[1], m, sizeof *m) == (ssize_t)sizeof *m ? 0 : 1);
	}
	close(fd[1]);
	n = read(fd[0], m, sizeof *m);
	close(fd[0]);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof *m || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return (-1);
	return (0);
}

static double
scn_env_double(const char *name, double def)
{
	const char	*s = getenv(name);
	char		*end;
	double		 v;

	if (s == NULL || *s == '\0')
		return (def);
	v = strtod(s, &end);
	return (*end == '\0' && v > 0 ? v : def);
}

/* Bytes one rank's batched pipeline send/recv moves (both directions). */
static double
scn_pipe_bytes(void)
{
	return (2.0 * SCN_PIPE_N * 2);
}

/*
 * Checks the settings, measures the model and sets the simulator's
 * environment.  Call before any simulator call.  0 or -1 (said why).
 */
int
scenario_prepare(struct scenario *sc)
{
	struct scn_model	m;
	double			p, bw, t, d;
	char			buf[64];

	if (sc->kind == SCENARIO_NONE)
		return (0);
	if (!sc->multi && sc->ranks != 1) {
		fprintf(stderr, "this program runs one rank (ranks = %d)\n",
		    sc->ranks);
		return (-1);
	}
	if (sc->slow_rank >= sc->ranks) {
		fprintf(stderr, "slow rank %d is not below ranks %d\n",
		    sc->slow_rank, sc->ranks);
		return (-1);
	}
	p = scn_fault(sc);
	if (sc->kind == SCENARIO_SLOW_COMPUTE && !(p > 0 && p <= 50)) {
		fprintf(stderr, "slow-compute takes --fault-pct in (0, 50]\n");
		return (-1);
	}
	if (scn_model_child(&m) != 0) {
		fprintf(stderr, "cannot measure the simulator's cost model\n");
		return (-1);
	}
	sc->time_scale = m.ts;
	sc->compute_ns = m.compute_ns;
	sc->extra_ns = scn_defs[sc->kind].rank_fault ||
	    sc->kind == SCENARIO_ROTATING ?
	    (uint64_t)llround((double)m.compute_ns * p / 100.0) : 0;
	/* The scenario owns the simulator's fault knobs. */
	unsetenv("NPUSIM_SLOW_RANK");
	unsetenv("NPUSIM_SLOW_LINK");
	if (sc->kind == SCENARIO_SLOW_LINK && sc->ranks > 1) {
		/* R's batched send/recv (B bytes) takes B / bw + 2 us; find
		 * the bandwidth that makes it extra_ns longer.  Collectives
		 * of the comm also run at it (a ring runs at its slowest),
		 * on every rank alike. */
		bw = scn_env_double("NPUSIM_LINK_BW_GBS", 25.0) * 1e9;
		t = scn_pipe_bytes() / bw;
		d = (double)sc->extra_ns / 1e9 / (m.ts > 0 ? m.ts : 1);
		sc->slow_link_gbs = d > 0 ? scn_pipe_bytes() / (t + d) / 1e9 :
		    bw / 1e9;
		snprintf(buf, sizeof buf, "%d", scenario_slow_rank(sc));
		setenv("NPUSIM_SLOW_LINK", buf, 1);
		snprintf(buf, sizeof buf, "%.9g", sc->slow_link_gbs);
		setenv("NPUSIM_SLOW_LINK_BW_GBS", buf, 1);
	}
	return (0);
}

/* The ground truth as one JSON object (one line, then a newline). */
void
scenario_truth(const struct scenario *sc, FILE *f)
{
	const struct scn_def	*d = &scn_defs[sc->kind];
	int			 r = scenario_slow_rank(sc);
	int			 slow = r >= 0 && sc->ranks > 1;
	unsigned		 nk = 0, nl = 0;

	if (sc->kind == SCENARIO_NONE) {
		fprintf(f, "{\"scenario\":\"none\"}\n");
		return;
	}
	for (int k = 0; k < K_NKERN; k++) {
		nk += scn_launches((enum scn_k)k) > 0;
		nl += scn_launches((enum scn_k)k);
	}
	fprintf(f, "{\"scenario\":\"%s\",\"ranks\":%d,\"steps\":%ld,"
	    "\"seed\":%llu,\"fault_pct\":%g,\"jitter_pct\":%g,",
	    d->name, sc->ranks, sc->steps, (unsigned long long)sc->seed,
	    scn_fault(sc), sc->jitter_pct + (sc->kind == SCENARIO_JITTER ?
	    scn_fault(sc) : 0));
	fprintf(f, "\"fault_ranks\":[");
	if (r >= 0)
		fprintf(f, "%d", r);
	fprintf(f, "],\"slow_ranks\":[");
	if (slow)
		fprintf(f, "%d", r);
	fprintf(f, "],\"cause\":");
	if (slow && d->cause != NULL)
		fprintf(f, "\"%s\"", d->cause);
	else
		fprintf(f, "null");
	fprintf(f, ",\"fault\":\"%s\",\"time_scale\":%g,"
	    "\"compute_ns_per_step\":%llu,\"extra_ns_per_step\":%llu,"
	    "\"distinct_kernels\":%u,\"launches_per_step\":%u",
	    d->what, sc->time_scale, (unsigned long long)sc->compute_ns,
	    (unsigned long long)sc->extra_ns, nk, nl);
	if (sc->kind == SCENARIO_SLOW_LINK)
		fprintf(f, ",\"slow_link_gbs\":%.6g", sc->slow_link_gbs);
	if (sc->kind == SCENARIO_AICPU)
		fprintf(f, ",\"advice\":[\"aicpu_ops\"]");
	fprintf(f, ",\"collectives\":[%s]", sc->multi && sc->ranks > 1 ?
	    "\"HcclBroadcast\",\"HcclAllGather\",\"HcclAlltoAll\","
	    "\"HcclBatchSendRecv\",\"HcclSend\",\"HcclRecv\","
	    "\"HcclReduceScatter\",\"HcclAllReduce\"" : "");
	/* Per-step expectations where they vary. */
	if ((sc->kind == SCENARIO_ROTATING || sc->kind == SCENARIO_JITTER ||
	    sc->jitter_pct > 0) && sc->steps > 0 &&
	    (long)sc->ranks * sc->steps <= 4096) {
		fprintf(f, ",\"per_step\":[");
		for (long s = 1; s <= sc->steps; s++) {
			fprintf(f, "%s{\"step\":%ld", s > 1 ? "," : "", s);
			if (sc->kind == SCENARIO_ROTATING)
				fprintf(f, ",\"slow_rank\":%ld",
				    (s - 1) % sc->ranks);
			fprintf(f, ",\"compute_scale_pct\":[");
			for (int k = 0; k < sc->ranks; k++)
				fprintf(f, "%s%g", k ? "," : "",
				    scn_level(sc, k, s) * SCN_LEVEL_PCT);
			fprintf(f, "]}");
		}
		fprintf(f, "]");
	}
	fprintf(f, "}\n");
}

static void *
scn_dev(size_t bytes)
{
	void	*p = NULL;

	if (aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
		return (NULL);
	aclrtMemset(p, bytes, 0, bytes);
	return (p);
}

/* The variant of k at level lv (fixed duration), registered once. */
static aclrtFuncHandle
scn_variant(struct scenario_rank *r, enum scn_k k, int lv)
{
	struct scn_kern		*kk = &r->k[k];
	const struct scn_kdef	*kd = &scn_kdefs[k];
	double			 ns;
	aclrtFuncHandle		 h;

	if (kk->var == NULL &&
	    (kk->var = calloc(2 * SCN_LEVELS + 1, sizeof *kk->var)) == NULL)
		return (kk->base);
	if (kk->var[lv + SCN_LEVELS] != NULL)
		return (kk->var[lv + SCN_LEVELS]);
	ns = (double)kk->d0 / r->sc->time_scale *
	    (1.0 + lv * SCN_LEVEL_PCT / 100.0);
	if (npusimKernelRegister(kd->name, (enum npusim_kernel_type)kd->type,
	    kd->flops, kd->bytes, ns >= 1 ? (uint64_t)llround(ns) : 1, &h) !=
	    ACL_SUCCESS)
		return (kk->base);
	kk->var[lv + SCN_LEVELS] = h;
	return (h);
}

/* Registers the faulty rank's AI_CPU or memory-bound variant of k, if
 * the scenario has one for it.  0 or -1. */
static int
scn_fault_variant(struct scenario_rank *r, enum scn_k k)
{
	const struct scenario	*sc = r->sc;
	const struct scn_kdef	*kd = &scn_kdefs[k];
	unsigned		 n = 0;
	double			 extra, target, bytes;
	aclrtFuncHandle		 h;
	int			 role;

	role = sc->kind == SCENARIO_AICPU ? SCN_FALLBACK :
	    sc->kind == SCENARIO_MEMORY_BOUND ? SCN_MEM : 0;
	if (role == 0 || !(kd->roles & role) || r->rank !=
	    scenario_slow_rank(sc) || sc->extra_ns == 0)
		return (0);
	for (int j = 0; j < K_NKERN; j++)
		if (scn_kdefs[j].roles & role)
			n += scn_launches((enum scn_k)j);
	/* Spread the fault evenly over the role's launches. */
	extra = (double)sc->extra_ns / (double)n;
	target = ((double)r->k[k].d0 + extra) / sc->time_scale;
	if (role == SCN_FALLBACK) {
		if (npusimKernelRegister(kd->name, NPUSIM_KERNEL_AI_CPU,
		    kd->flops, kd->bytes, (uint64_t)llround(target), &h) !=
		    ACL_SUCCESS)
			return (-1);
	} else {
		/* More bytes on a memory-bound kernel: the roofline gives
		 * the extra time; fixed only if the model disagrees. */
		bytes = kd->bytes + extra / sc->time_scale / 1e9 * SCN_HBM_BPS;
		if (npusimKernelRegister(kd->name, (enum npusim_kernel_type)
		    kd->type, kd->flops, bytes, 0, &h) != ACL_SUCCESS)
			return (-1);
		if (fabs((double)npusimKernelDuration(h) / sc->time_scale -
		    target) > 0.01 * extra / sc->time_scale + 1 &&
		    npusimKernelRegister(kd->name, (enum npusim_kernel_type)
		    kd->type, kd->flops, bytes, (uint64_t)llround(target),
		    &h) != ACL_SUCCESS)
			return (-1);
	}
	r->k[k].fault = h;
	return (0);
}

/* Allocates a rank's kernels and buffers (after aclrtSetDevice). */
struct scenario_rank *
scenario_rank_new(const struct scenario *sc, int rank, HcclComm comm,
    aclrtStream s)
{
	struct scenario_rank	*r;
	size_t			 n = (size_t)(sc->ranks > 0 ? sc->ranks : 1);

	if ((r = calloc(1, sizeof *r)) == NULL)
		return (NULL);
	r->sc = sc;
	r->rank = rank;
	r->nranks = (int)n;
	r->comm = comm;
	r->s = s;
	for (int k = 0; k < K_NKERN; k++) {
		const struct scn_kdef *kd = &scn_kdefs[k];

		if (npusimKernelRegister(kd->name, (enum npusim_kernel_type)
		    kd->type, kd->flops, kd->bytes, k == K_TINY ?
		    SCN_TINY_NS : 0, &r->k[k].base) != ACL_SUCCESS ||
		    (r->k[k].d0 = npusimKernelDuration(r->k[k].base)) == 0)
			goto fail;
	}
	for (int k = 0; k < K_NKERN; k++)
		if (scn_fault_variant(r, (enum scn_k)k) != 0)
			goto fail;
	/* Host delays of the faults are sleeps: keep them to size. */
	if (rank == scenario_slow_rank(sc))
		prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	if (aclrtMallocHost(&r->host_in, SCN_IN_BYTES) != ACL_SUCCESS ||
	    aclrtMallocHost((void **)&r->host_loss, SCN_LOSS_BYTES) !=
	    ACL_SUCCESS)
		goto fail;
	if ((r->in = scn_dev(SCN_IN_BYTES)) == NULL ||
	    (r->loss = scn_dev(SCN_LOSS_BYTES)) == NULL)
		goto fail;
	if (comm != NULL && (
	    (r->bc = scn_dev(SCN_BCAST_N * 4)) == NULL ||
	    (r->ag_s = scn_dev(SCN_AG_N * 2)) == NULL ||
	    (r->ag_r = scn_dev(n * SCN_AG_N * 2)) == NULL ||
	    (r->a2a_s = scn_dev(n * SCN_A2A_N * 2)) == NULL ||
	    (r->a2a_r = scn_dev(n * SCN_A2A_N * 2)) == NULL ||
	    (r->pipe_s = scn_dev(SCN_PIPE_N * 2)) == NULL ||
	    (r->pipe_r = scn_dev(SCN_PIPE_N * 2)) == NULL ||
	    (r->p2p_s = scn_dev(SCN_P2P_N * 2)) == NULL ||
	    (r->p2p_r = scn_dev(SCN_P2P_N * 2)) == NULL ||
	    (r->rs_s = scn_dev(n * SCN_RS_N * 2)) == NULL ||
	    (r->rs_r = scn_dev(SCN_RS_N * 2)) == NULL ||
	    (r->ar = scn_dev(SCN_AR_N * 4)) == NULL))
		goto fail;
	return (r);
fail:
	fprintf(stderr, "rank %d: cannot set up the scenario: %s\n", rank,
	    aclGetRecentErrMsg());
	scenario_rank_free(r);
	return (NULL);
}

void
scenario_rank_free(struct scenario_rank *r)
{
	void	*bufs[14];

	if (r == NULL)
		return;
	memcpy(bufs, (void *[]){ r->in, r->loss, r->bc, r->ag_s, r->ag_r,
	    r->a2a_s, r->a2a_r, r->pipe_s, r->pipe_r, r->p2p_s, r->p2p_r,
	    r->rs_s, r->rs_r, r->ar }, sizeof bufs);
	for (size_t i = 0; i < NELEM(bufs); i++)
		if (bufs[i] != NULL)
			aclrtFree(bufs[i]);
	if (r->host_in != NULL)
		aclrtFreeHost(r->host_in);
	if (r->host_loss != NULL)
		aclrtFreeHost(r->host_loss);
	for (int k = 0; k < K_NKERN; k++)
		free(r->k[k].var);	/* kernels live as long as the process */
	free(r);
}

static int
scn_launch(struct scenario_rank *r, enum scn_k k)
{
	aclrtFuncHandle	h = r->k[k].base;

	if (r->k[k].fault != NULL)
		h = r->k[k].fault;
	else if (r->level != 0 && k != K_TINY)
		h = scn_variant(r, k, r->level);
	return (example_check(aclrtLaunchKernel(h, scn_kdefs[k].blocks, NULL,
	    0, r->s), scn_kdefs[k].name));
}

static int
scn_hccl(struct scenario_rank *r, HcclResult hr, const char *what)
{
	if (hr == HCCL_SUCCESS)
		return (0);
	fprintf(stderr, "rank %d: %s: %s\n", r->rank, what,
	    HcclGetErrorString(hr));
	return (-1);
}

/* Sleeps until t0 + ns (CLOCK_MONOTONIC): deadlines from one start do
 * not add up each wake-up's lateness. */
static void
scn_sleep_until(const struct timespec *t0, uint64_t ns)
{
	struct timespec	ts = *t0;

	ts.tv_sec += (time_t)(ns / 1000000000U);
	ts.tv_nsec += (long)(ns % 1000000000U);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	    EINTR && !example_stop)
		;
}

static void
scn_sleep(uint64_t ns)
{
	struct timespec	ts = { (time_t)(ns / 1000000000U),
	    (long)(ns % 1000000000U) };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !example_stop)
		;
}

/* Neighbour exchange: the batched pipeline send/recv, then a plain
 * send/recv pair (even ranks send first, so the ring cannot deadlock). */
static int
scn_p2p(struct scenario_rank *r)
{
	uint32_t	 next = (uint32_t)((r->rank + 1) % r->nranks);
	uint32_t	 prev = (uint32_t)((r->rank + r->nranks - 1) %
			    r->nranks);
	HcclSendRecvItem it[2] = {
		{ HCCL_SEND, r->pipe_s, SCN_PIPE_N, HCCL_DATA_TYPE_FP16, next },
		{ HCCL_RECV, r->pipe_r, SCN_PIPE_N, HCCL_DATA_TYPE_FP16, prev },
	};
	int		 rc = 0;

	rc |= scn_hccl(r, HcclBatchSendRecv(it, 2, r->comm, r->s),
	    "HcclBatchSendRecv");
	if (r->rank % 2 == 0) {
		rc |= scn_hccl(r, HcclSend(r->p2p_s, SCN_P2P_N,
		    HCCL_DATA_TYPE_FP16, next, r->comm, r->s), "HcclSend");
		rc |= scn_hccl(r, HcclRecv(r->p2p_r, SCN_P2P_N,
		    HCCL_DATA_TYPE_FP16, prev, r->comm, r->s), "HcclRecv");
	} else {
		rc |= scn_hccl(r, HcclRecv(r->p2p_r, SCN_P2P_N,
		    HCCL_DATA_TYPE_FP16, prev, r->comm, r->s), "HcclRecv");
		rc |= scn_hccl(r, HcclSend(r->p2p_s, SCN_P2P_N,
		    HCCL_DATA_TYPE_FP16, next, r->comm, r->s), "HcclSend");
	}
	return (rc);
}

/*
 * One step (1-based), synchronized at its end.  The caller brackets it
 * with the "step" range.  0 or -1.
 */
int
scenario_step(struct scenario_rank *r, long step)
{
	const struct scenario	*sc = r->sc;
	int			 slow = r->rank == scenario_slow_rank(sc);
	int			 coll = r->comm != NULL && r->nranks > 1;
	int			 launch_bound = slow &&
				    sc->kind == SCENARIO_LAUNCH_BOUND;
	int			 rc = 0;
	uint64_t		 id;

	r->level = scn_level(sc, r->rank, step);
	/* Data loading: the next batch is prepared on the host. */
	id = example_range_start("dataload", NULL);
	memset(r->host_in, (int)(step & 0xff), SCN_IN_BYTES);
	if (slow && sc->kind == SCENARIO_HOST_BOUND)
		scn_sleep(sc->extra_ns);
	example_range_end(id);
	/* Tiny kernels: the launch-bound rank launches them first, with
	 * host time before each, so its device idles; the others queue
	 * them behind the first matmul, where their launches cost no
	 * device time. */
	if (launch_bound) {
		struct timespec t0;

		/* The host is busy elsewhere before each launch (it sleeps,
		 * so it takes no CPU from the other ranks of a small
		 * machine). */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < SCN_TINY; i++) {
			scn_sleep_until(&t0, sc->extra_ns * (uint64_t)(i + 1) /
			    SCN_TINY);
			rc |= scn_launch(r, K_TINY);
		}
	}
	rc |= example_check(aclrtMemcpyAsync(r->in, SCN_IN_BYTES, r->host_in,
	    SCN_IN_BYTES, ACL_MEMCPY_HOST_TO_DEVICE, r->s), "memcpy H2D");
	if (coll)
		rc |= scn_hccl(r, HcclBroadcast(r->bc, SCN_BCAST_N,
		    HCCL_DATA_TYPE_FP32, 0, r->comm, r->s), "HcclBroadcast");
	rc |= scn_launch(r, K_EMBED);
	if (coll)
		rc |= scn_hccl(r, HcclAllGather(r->ag_s, r->ag_r, SCN_AG_N,
		    HCCL_DATA_TYPE_FP16, r->comm, r->s), "HcclAllGather");
	for (int l = 0; l < SCN_LAYERS; l++) {
		for (size_t i = 0; i < NELEM(scn_fwd); i++) {
			rc |= scn_launch(r, scn_fwd[i]);
			if (l == 0 && i == 1 && !launch_bound)
				for (int t = 0; t < SCN_TINY; t++)
					rc |= scn_launch(r, K_TINY);
		}
		if (l == 0) {
			/* Mixture-of-experts routing: dispatch tokens. */
			rc |= scn_launch(r, K_TOPK);
			rc |= scn_launch(r, K_NONZERO);
			if (coll)
				rc |= scn_hccl(r, HcclAlltoAll(r->a2a_s,
				    SCN_A2A_N, HCCL_DATA_TYPE_FP16, r->a2a_r,
				    SCN_A2A_N, HCCL_DATA_TYPE_FP16, r->comm,
				    r->s), "HcclAlltoAll");
			rc |= scn_launch(r, K_SCATTER);
		}
	}
	if (coll)
		rc |= scn_p2p(r);
	rc |= scn_launch(r, K_LOSS);
	rc |= scn_launch(r, K_LOSS_GRAD);
	for (int l = 0; l < SCN_LAYERS; l++)
		for (size_t i = 0; i < NELEM(scn_bwd); i++)
			rc |= scn_launch(r, scn_bwd[i]);
	if (coll) {
		rc |= scn_hccl(r, HcclReduceScatter(r->rs_s, r->rs_r,
		    SCN_RS_N, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, r->comm,
		    r->s), "HcclReduceScatter");
		rc |= scn_hccl(r, HcclAllReduce(r->ar, r->ar, SCN_AR_N,
		    HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, r->comm, r->s),
		    "HcclAllReduce");
	}
	rc |= scn_launch(r, K_CAST);
	rc |= scn_launch(r, K_ADAMW);
	rc |= example_check(aclrtMemcpyAsync(r->host_loss, SCN_LOSS_BYTES,
	    r->loss, SCN_LOSS_BYTES, ACL_MEMCPY_DEVICE_TO_HOST, r->s),
	    "memcpy D2H");
	if (rc != 0)
		return (-1);
	if (aclrtSynchronizeStream(r->s) != ACL_SUCCESS) {
		if (!example_stop)
			fprintf(stderr, "rank %d: step %ld failed: %s\n",
			    r->rank, step, aclGetRecentErrMsg());
		return (-1);
	}
	return (0);
}

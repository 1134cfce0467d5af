/*
 * npusim-train - a single-device training loop on the simulated NPU.
 *
 * Each step copies a batch in, runs a forward and backward pass with a
 * realistic op mix, applies an optimizer step and copies the loss out.
 * Steps are MSTX ranges named "step" when a profiling agent is present.
 * --steps 0 runs until SIGTERM or SIGINT, then exits 0.
 *
 * --scenario NAME runs a workload of the scenario library instead
 * (scenario.c, doc/npusim.md) on this one rank: its op mix and fault,
 * without the collectives; --truth prints the ground truth as JSON.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#include "example.h"

#define TRAIN_LAYERS	4
#define TRAIN_BATCH	(1U << 20)	/* bytes copied in per step */

struct train_kernels {
	aclrtFuncHandle	conv, matmul, softmax, layernorm, add, mul, relu,
			gelu, adam, shape;
};

#define TRAIN_USAGE	"[--steps N] [--device D]"

static void
train_register(struct train_kernels *k)
{
	/* Costs give tens of microseconds per op on the default model. */
	k->conv = example_kernel("Conv2D", NPUSIM_KERNEL_AI_CORE, 6e9, 8e6);
	k->matmul = example_kernel("MatMul", NPUSIM_KERNEL_AI_CORE, 4e9, 6e6);
	k->softmax = example_kernel("Softmax", NPUSIM_KERNEL_AI_VECTOR, 2e7,
	    16e6);
	k->layernorm = example_kernel("LayerNorm", NPUSIM_KERNEL_AI_VECTOR,
	    3e7, 12e6);
	k->add = example_kernel("Add", NPUSIM_KERNEL_AI_VECTOR, 1e6, 6e6);
	k->mul = example_kernel("Mul", NPUSIM_KERNEL_AI_VECTOR, 1e6, 6e6);
	k->relu = example_kernel("Relu", NPUSIM_KERNEL_AI_VECTOR, 1e6, 4e6);
	k->gelu = example_kernel("Gelu", NPUSIM_KERNEL_AI_VECTOR, 8e6, 4e6);
	k->adam = example_kernel("ApplyAdam", NPUSIM_KERNEL_AI_VECTOR, 4e7,
	    32e6);
	k->shape = example_kernel("DynamicShape", NPUSIM_KERNEL_AI_CPU, 1e5,
	    1e3);
}

static int
train_launch(aclrtFuncHandle k, uint32_t blocks, aclrtStream s)
{
	return (example_check(aclrtLaunchKernel(k, blocks, NULL, 0, s),
	    "aclrtLaunchKernel"));
}

/* One training step; 0 or -1. */
static int
train_step(struct train_kernels *k, aclrtStream s, void *host_in,
    void *dev_in, void *dev_loss, float *loss)
{
	int	l, rc = 0;

	rc |= example_check(aclrtMemcpyAsync(dev_in, TRAIN_BATCH, host_in,
	    TRAIN_BATCH, ACL_MEMCPY_HOST_TO_DEVICE, s), "memcpy H2D");
	rc |= train_launch(k->shape, 1, s);
	for (l = 0; l < TRAIN_LAYERS; l++) {
		rc |= train_launch(k->conv, 32, s);
		rc |= train_launch(k->layernorm, 16, s);
		rc |= train_launch(k->relu, 16, s);
		rc |= train_launch(k->matmul, 32, s);
		rc |= train_launch(k->add, 16, s);
		rc |= train_launch(k->gelu, 16, s);
	}
	rc |= train_launch(k->softmax, 16, s);
	for (l = 0; l < TRAIN_LAYERS; l++) {
		rc |= train_launch(k->matmul, 32, s);
		rc |= train_launch(k->matmul, 32, s);
		rc |= train_launch(k->mul, 16, s);
		rc |= train_launch(k->conv, 32, s);
	}
	rc |= train_launch(k->adam, 24, s);
	rc |= example_check(aclrtMemcpyAsync(loss, sizeof *loss, dev_loss,
	    sizeof *loss, ACL_MEMCPY_DEVICE_TO_HOST, s), "memcpy D2H");
	rc |= example_check(aclrtSynchronizeStream(s),
	    "aclrtSynchronizeStream");
	return (rc ? -1 : 0);
}

int
main(int argc, char **argv)
{
	static const struct option	 opts[] = {
		{ "steps", required_argument, NULL, 's' },
		{ "device", required_argument, NULL, 'd' },
		EXAMPLE_LONGOPTS,
		SCENARIO_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	struct scenario			 sc;
	struct scenario_rank		*w = NULL;
	struct train_kernels		 k;
	aclrtStream			 s = NULL;
	void				*host_in = NULL, *dev_in = NULL;
	void				*dev_loss = NULL;
	float				 loss = 0;
	long				 steps = 10, step;
	int				 dev = 0, ch, rc = 1;
	uint64_t			 range;
	double				 t0, t1, total = 0;

	scenario_init(&sc, 0, 1, steps);
	while ((ch = getopt_long(argc, argv, "s:d:h", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			steps = strtol(optarg, NULL, 10);
			sc.steps = steps;
			break;
		case 'd':
			dev = atoi(optarg);
			break;
		default:
			if (scenario_option(&sc, ch, optarg) != 0)
				example_option("npusim-train", TRAIN_USAGE, ch);
		}
	}
	steps = sc.steps;
	if (steps < 0 || optind != argc)
		example_usage("npusim-train", TRAIN_USAGE, 2);
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
	}
	example_signals();
	if (example_check(aclInit(NULL), "aclInit") != 0 ||
	    example_check(aclrtSetDevice(dev), "aclrtSetDevice") != 0)
		return (1);
	train_register(&k);
	if (example_check(aclrtCreateStream(&s), "aclrtCreateStream") ||
	    example_check(aclrtMallocHost(&host_in, TRAIN_BATCH),
	    "aclrtMallocHost") ||
	    example_check(aclrtMalloc(&dev_in, TRAIN_BATCH,
	    ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") ||
	    example_check(aclrtMalloc(&dev_loss, 64,
	    ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc"))
		goto out;
	if (sc.kind != SCENARIO_NONE &&
	    (w = scenario_rank_new(&sc, 0, NULL, s)) == NULL)
		goto out;
	memset(host_in, 1, TRAIN_BATCH);
	for (step = 1; steps == 0 || step <= steps; step++) {
		if (example_stop)
			break;
		t0 = example_now_ms();
		range = example_range_start("step", NULL);
		if (w != NULL ? scenario_step(w, step) != 0 :
		    train_step(&k, s, host_in, dev_in, dev_loss, &loss) != 0) {
			if (example_stop)
				break;
			goto out;
		}
		example_range_end(range);
		t1 = example_now_ms();
		total += t1 - t0;
		printf("step %ld: %.4f ms\n", step, t1 - t0);
		fflush(stdout);
	}
	if (step > 1)
		printf("steps %ld mean %.3f ms\n", step - 1,
		    total / (double)(step - 1));
	rc = 0;
out:
	scenario_rank_free(w);
	if (dev_in != NULL)
		aclrtFree(dev_in);
	if (dev_loss != NULL)
		aclrtFree(dev_loss);
	if (host_in != NULL)
		aclrtFreeHost(host_in);
	if (s != NULL)
		aclrtDestroyStream(s);
	aclrtResetDevice(dev);
	aclFinalize();
	return (rc);
}

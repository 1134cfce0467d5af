/*
 * sync-ranks: a training loop that marks no MSTX step, for the tests of
 * step indices from the synchronize pattern (sync-steps.sh).
 *
 *   sync-ranks [--mode one|two|helper] [--iters N] [--period-us P]
 *       [--go G] [--until F] [--mstx-from I]
 *
 * Setup copies two buffers in, each followed by its own synchronize.
 * Iteration i (from 0) launches a tag kernel "it<i % 256>", three "fwd",
 * five "bwd" and one "opt" kernel, so a trace says which iterations it
 * holds; iteration 0 also launches ten "compile" kernels (a warm-up that
 * differs).  --mode one synchronizes once, at the end of the iteration;
 * two also after the forward kernels, from another call site; helper
 * does both through one function (one call site).  Then it sleeps P us
 * (2000).  --iters 0 (default) runs until F exists; --go G waits for G
 * to exist before the first iteration.  --mstx-from I marks iterations
 * I and later as MSTX ranges named "step" (from the tag kernel to the
 * step's synchronize), as a process does that starts marking its steps
 * in the middle of its run; the agent's MSTX, found by dlsym, or none.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#define TAGS	256

static aclrtStream stream;

static int
check(aclError e, const char *what)
{
	if (e == ACL_SUCCESS)
		return 0;
	fprintf(stderr, "sync-ranks: %s: %s\n", what, aclGetRecentErrMsg());
	exit(1);
}

static aclrtFuncHandle
kernel(const char *name)
{
	aclrtFuncHandle h;

	check(npusimKernelRegister(name, NPUSIM_KERNEL_AI_CORE, 0, 0, 20000,
	    &h), name);
	return h;
}

static void
launch(aclrtFuncHandle k, int n)
{
	while (n-- > 0)
		check(aclrtLaunchKernel(k, 1, NULL, 0, stream), "launch");
}

/* The one call site of --mode helper. */
static __attribute__((noinline)) void
sync_helper(void)
{
	check(aclrtSynchronizeStream(stream), "sync");
	__asm__ volatile("" ::: "memory");
}

/* MSTX ranges through the agent's symbols (none without the agent). */
static uint64_t
range_start(const char *msg)
{
	uint64_t (*f)(const char *, void *);
	void *p = dlsym(RTLD_DEFAULT, "mstxRangeStartA");

	if (p == NULL)
		return 0;
	memcpy(&f, &p, sizeof(p));
	return f(msg, NULL);
}

static void
range_end(uint64_t id)
{
	void (*f)(uint64_t);
	void *p = dlsym(RTLD_DEFAULT, "mstxRangeEnd");

	if (p == NULL || id == 0)
		return;
	memcpy(&f, &p, sizeof(p));
	f(id);
}

int
main(int argc, char **argv)
{
	aclrtFuncHandle tags[TAGS], fwd, bwd, opt, compile;
	const char *mode = "one", *go = NULL, *until = NULL;
	long iters = 0, period = 2000, mstx_from = -1;
	uint64_t range = 0;
	void *dev, *host;
	struct stat st;
	char name[16];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--mode") == 0)
			mode = argv[i + 1];
		else if (strcmp(argv[i], "--iters") == 0)
			iters = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--period-us") == 0)
			period = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--go") == 0)
			go = argv[i + 1];
		else if (strcmp(argv[i], "--until") == 0)
			until = argv[i + 1];
		else if (strcmp(argv[i], "--mstx-from") == 0)
			mstx_from = atol(argv[i + 1]);
		else {
			fprintf(stderr, "sync-ranks: unknown option %s\n",
			    argv[i]);
			return 2;
		}
	}
	if (strcmp(mode, "one") != 0 && strcmp(mode, "two") != 0 &&
	    strcmp(mode, "helper") != 0) {
		fprintf(stderr, "sync-ranks: --mode one|two|helper\n");
		return 2;
	}
	check(aclInit(NULL), "aclInit");
	check(aclrtSetDevice(0), "aclrtSetDevice");
	check(aclrtCreateStream(&stream), "aclrtCreateStream");
	for (int t = 0; t < TAGS; t++) {
		snprintf(name, sizeof(name), "it%d", t);
		tags[t] = kernel(name);
	}
	fwd = kernel("fwd");
	bwd = kernel("bwd");
	opt = kernel("opt");
	compile = kernel("compile");
	/* Setup: the weights come in, synchronized one by one. */
	check(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST), "malloc");
	check(aclrtMallocHost(&host, 4096), "malloc host");
	memset(host, 1, 4096);
	for (int b = 0; b < 2; b++) {
		check(aclrtMemcpyAsync(dev, 4096, host, 4096,
		    ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy");
		check(aclrtSynchronizeStream(stream), "setup sync");
	}
	while (go != NULL && stat(go, &st) != 0)
		usleep(10000);
	for (long i = 0; iters == 0 || i < iters; i++) {
		if (mstx_from >= 0 && i >= mstx_from)
			range = range_start("step");
		launch(tags[i % TAGS], 1);
		launch(fwd, 3);
		if (i == 0)
			launch(compile, 10);
		if (strcmp(mode, "two") == 0)
			check(aclrtSynchronizeStream(stream), "fwd sync");
		else if (strcmp(mode, "helper") == 0)
			sync_helper();
		launch(bwd, 5);
		launch(opt, 1);
		if (strcmp(mode, "helper") == 0)
			sync_helper();
		else
			check(aclrtSynchronizeStream(stream), "step sync");
		range_end(range);
		range = 0;
		usleep((useconds_t)period);
		if (until != NULL && (i & 7) == 0 && stat(until, &st) == 0)
			break;
	}
	aclrtFreeHost(host);
	aclrtFree(dev);
	aclrtDestroyStream(stream);
	aclrtResetDevice(0);
	aclFinalize();
	return 0;
}

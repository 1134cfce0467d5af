/*
 * example.c - helpers shared by the npusim example workloads: signals,
 * time, kernels, and MSTX ranges resolved at run time.
 *
 * The MSTX functions come from the profiling agent (libmspti.so) when it
 * is preloaded or linked; looking them up with dlsym(RTLD_DEFAULT) lets
 * the same binary run with or without it.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npusim/npusim.h>

#include "example.h"

volatile sig_atomic_t example_stop;

typedef uint64_t (*example_start_fn)(const char *, aclrtStream);
typedef void (*example_end_fn)(uint64_t);

static int			example_resolved;
static example_start_fn		example_start;
static example_end_fn		example_end;

static void
example_on_signal(int sig)
{
	example_stop = 1;
}

void
example_signals(void)
{
	struct sigaction	sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = example_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

double
example_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6);
}

static void
example_resolve(void)
{
	void	*p;

	if (example_resolved)
		return;
	example_resolved = 1;
	/* Function pointers through a data pointer, as dlsym requires. */
	if ((p = dlsym(RTLD_DEFAULT, "mstxRangeStartA")) != NULL)
		memcpy(&example_start, &p, sizeof p);
	if ((p = dlsym(RTLD_DEFAULT, "mstxRangeEnd")) != NULL)
		memcpy(&example_end, &p, sizeof p);
}

/* Start an MSTX range if an agent provides MSTX; 0 otherwise. */
uint64_t
example_range_start(const char *msg, aclrtStream stream)
{
	example_resolve();
	if (example_start == NULL)
		return (0);
	return (example_start(msg, stream));
}

void
example_range_end(uint64_t id)
{
	example_resolve();
	if (example_end != NULL && id != 0)
		example_end(id);
}

/* Register a kernel or exit: the examples cannot run without it. */
aclrtFuncHandle
example_kernel(const char *name, int type, double flops, double bytes)
{
	aclrtFuncHandle	h;

	if (npusimKernelRegister(name, (enum npusim_kernel_type)type, flops,
	    bytes, 0, &h) != ACL_SUCCESS) {
		fprintf(stderr, "cannot register kernel %s\n", name);
		exit(1);
	}
	return (h);
}

/* Report a failed call; returns -1 on failure so callers can bail out. */
int
example_check(aclError e, const char *what)
{
	if (e == ACL_SUCCESS)
		return (0);
	fprintf(stderr, "%s failed: %d %s\n", what, e, aclGetRecentErrMsg());
	return (-1);
}

/*
 * The end of an example's option loop for what its own options and the
 * scenario's are not: --help prints the usage on stdout and --version
 * the version, both exit 0; anything else (getopt_long said why) prints
 * the usage on stderr and exits 2.
 */
void
example_option(const char *prog, const char *usage, int ch)
{
	if (ch == EXAMPLE_OPT_VERSION) {
		printf("%s %s\n", prog, PACKAGE_VERSION);
		exit(0);
	}
	example_usage(prog, usage, ch == 'h' ? 0 : 2);
}

/* The usage: on stdout and exit 0 when asked for, else stderr and 2. */
void
example_usage(const char *prog, const char *usage, int code)
{
	fprintf(code == 0 ? stdout : stderr, "usage: %s %s\n    %s\n"
	    "    [-h|--help] [--version]\n", prog, usage, SCENARIO_USAGE);
	exit(code);
}

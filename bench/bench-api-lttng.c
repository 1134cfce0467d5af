/*
 * The LTTng-UST side of bench-api: ns per tracepoint with no session
 * (disabled) and, when lttng-sessiond is running with the event enabled
 * (api-lttng.sh does that if lttng-tools is installed), per event.
 * Compiled by bench/api-lttng.sh, not by make: liblttng-ust is optional.
 */
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "api-lttng-tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int
main(int argc, char **argv)
{
	long i, n = argc > 2 ? atol(argv[2]) : 20000000;
	const char *label = argc > 1 ? argv[1] : "disabled";
	double t, best = 1e30;
	int r;

	for (r = 0; r < 5; r++) {
		t = now();
		for (i = 0; i < n; i++)
			lttng_ust_tracepoint(mspti_bench, mark, "bench");
		t = (now() - t) / (double)n;
		if (t < best)
			best = t;
	}
	printf("lttng-ust %s tracepoint: %6.2f ns\n", label, best);
	return 0;
}

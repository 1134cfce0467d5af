/*
 * The LTTng-UST side of bench-api: ns per tracepoint with no session
 * (disabled) and, when lttng-sessiond is running with the event enabled
 * (api-lttng.sh does that if lttng-tools is installed), per event.
 * Compiled by bench/api-lttng.sh, not by make: liblttng-ust is optional.
 * Prints the median of 7 runs; with 7 samples the p99 is the slowest.
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

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of 7 runs of n tracepoints, ns per call, as bench-api does. */
int
main(int argc, char **argv)
{
	long i, n = argc > 2 ? atol(argv[2]) : 20000000;
	const char *label = argc > 1 ? argv[1] : "disabled";
	double t, r[7];
	int k;

	for (k = 0; k < 7; k++) {
		t = now();
		for (i = 0; i < n; i++)
			lttng_ust_tracepoint(mspti_bench, mark, "bench");
		r[k] = (now() - t) / (double)n;
	}
	qsort(r, 7, sizeof(r[0]), cmp);
	printf("lttng-ust %s tracepoint: %6.2f ns (median of 7, p99 %6.2f)\n",
	    label, r[3], r[6]);
	return 0;
}

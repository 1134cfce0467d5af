/*
 * clock-marks BATCHES GOFILE: waits until GOFILE exists, then for each
 * batch i reads CLOCK_REALTIME, calls mstxMarkA("b<i>") 100 times, reads
 * CLOCK_REALTIME again and prints "i before after"; 2 ms between
 * batches, so the marks span many of the agent's clock refits.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mstx/ms_tools_ext.h"

static uint64_t
realtime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int
main(int argc, char **argv)
{
	long n;

	if (argc != 3 || (n = atol(argv[1])) < 1) {
		fprintf(stderr, "usage: clock-marks BATCHES GOFILE\n");
		return 2;
	}
	while (access(argv[2], F_OK) != 0)
		usleep(10000);
	for (long i = 0; i < n; i++) {
		char name[24];
		uint64_t a, b;

		snprintf(name, sizeof name, "b%ld", i);
		a = realtime();
		for (int k = 0; k < 100; k++)
			mstxMarkA(name, NULL);
		b = realtime();
		printf("%ld %llu %llu\n", i, (unsigned long long)a,
		    (unsigned long long)b);
		usleep(2000);
	}
	return 0;
}

/*
 * Clock offset estimation (lib/clockalign) on synthetic collectives: H
 * hosts x 8 ranks with host clocks up to +-10 ms off, each all-reduce
 * entered with up to 1 ms of jitter and every end read with +-2 us of
 * noise.  Prints per size the estimation time, the worst recovery error,
 * the largest stated uncertainty and how many hosts' errors the stated
 * uncertainty covers.  Figures only.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clockalign.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
one(uint32_t nhosts, uint32_t per, uint32_t ncoll)
{
	size_t n = (size_t)nhosts * per * ncoll, k = 0;
	struct clockalign_sample *s = malloc(n * sizeof(*s));
	int64_t *skew = malloc(nhosts * sizeof(*skew));
	int64_t *arr = malloc((size_t)nhosts * per * sizeof(*arr));
	int64_t t = 1700000000000000000ll, worst = 0, unc = 0;
	uint32_t covered = 0;
	struct clockalign ca;
	double t0, t1;

	if (s == NULL || skew == NULL || arr == NULL) {
		printf("clockalign: out of memory\n");
		exit(1);
	}
	for (uint32_t h = 0; h < nhosts; h++)
		skew[h] = h == 0 ? 0 : (int64_t)(rnd() % 20000001) - 10000000;
	for (uint32_t c = 0; c < ncoll; c++) {
		int64_t last = 0, end;

		for (uint32_t r = 0; r < nhosts * per; r++) {
			arr[r] = t + (int64_t)(rnd() % 1000000);
			if (arr[r] > last)
				last = arr[r];
		}
		end = last + 50000;
		for (uint32_t r = 0; r < nhosts * per; r++) {
			uint32_t h = r / per;

			s[k++] = (struct clockalign_sample){ r, h, 1, c,
			    (uint64_t)(arr[r] + skew[h]), (uint64_t)(end +
			    skew[h] + (int64_t)(rnd() % 4001) - 2000) };
		}
		t = end + 1000000;
	}
	t0 = now_ms();
	if (clockalign_estimate(s, n, nhosts, 0, &ca) != 0) {
		printf("clockalign: estimate failed\n");
		exit(1);
	}
	t1 = now_ms();
	for (uint32_t h = 1; h < nhosts; h++) {
		int64_t e = llabs(ca.host[h].offset_ns + skew[h]);

		if (e > worst)
			worst = e;
		if (ca.host[h].uncertainty_ns > unc)
			unc = ca.host[h].uncertainty_ns;
		covered += e <= ca.host[h].uncertainty_ns;
	}
	printf("clockalign: %u hosts x %u ranks, %u all-reduces (%zu samples): "
	    "%.1f ms; worst error %.3f us, largest stated +- %.3f us, "
	    "covered %u of %u hosts\n", nhosts, per, ncoll, n, t1 - t0,
	    (double)worst / 1e3, (double)unc / 1e3, covered, nhosts - 1);
	clockalign_free(&ca);
	free(s);
	free(skew);
	free(arr);
}

int
main(void)
{
	one(2, 2, 500);
	one(64, 8, 200);
	one(1000, 8, 50);
	return 0;
}

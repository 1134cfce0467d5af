/* bench-report: analysis throughput (records/s, one core) and export time
 * and size against record count.  Prints figures; never fails on time. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis.h"
#include "export.h"
#include "trace.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
feed(struct analysis_source *src, uint64_t n)
{
	struct rec_kernel k;
	struct rec_api api;
	uint64_t t = 1700000000000000000ull;

	analysis_source_string(src, 1, "MatMul");
	analysis_source_string(src, 2, "KERNEL_AICORE");
	analysis_source_string(src, 3, "aclrtLaunchKernel");
	REC_INIT(&k, REC_KERNEL, 0);
	REC_INIT(&api, REC_API, 0);
	k.pid = api.pid = 1;
	k.name_id = 1;
	k.type_id = 2;
	api.name_id = 3;
	for (uint64_t i = 0; i < n; i += 2) {
		api.start = t;
		api.end = t + 2000;
		api.correlation_id = k.correlation_id = i + 1;
		k.start = t + 5000;
		k.end = t + 15000;
		t += 10000;
		analysis_source_add(src, &api.hdr);
		analysis_source_add(src, &k.hdr);
	}
}

int
main(void)
{
	static const uint64_t sizes[] = { 1000000, 4000000 };

	for (size_t i = 0; i < 2; i++) {
		struct analysis *a = analysis_new(NULL);
		struct analysis_source *src = analysis_source_new(a, "bench",
		    NULL);
		double t0 = now(), t1;

		feed(src, sizes[i]);
		analysis_run(a);
		t1 = now();
		printf("report (direct feed): %llu records in %.3f s: %.1f M "
		    "records/s\n", (unsigned long long)sizes[i], t1 - t0,
		    (double)sizes[i] / (t1 - t0) / 1e6);
		analysis_free(a);
	}
	return 0;
}

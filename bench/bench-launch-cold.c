/*
 * Helper of bench/overhead.sh (not a benchmark by itself: bench/run.sh
 * skips it): aclrtLaunchKernel called with cold caches, as a framework
 * calls it between stretches of its own work (on the PyTorch bridge a
 * ResNet-50 step makes a runtime call every ~30 us, into caches the
 * interpreter has refilled).  Before each launch it writes one byte in
 * every cache line of EVICT_KIB KiB (1024: twice a core's L2 here), then
 * times the call alone; after every 64 launches (and an untimed
 * synchronize) it prints "step N: X ms", X the 64 calls' time.  Runs
 * until killed, or for STEPS such steps.
 *
 *   bench-launch-cold [EVICT_KIB [STEPS]]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#include "util.h"

#define PER_STEP	64

int
main(int argc, char **argv)
{
	size_t evict = (size_t)(argc > 1 ? atol(argv[1]) : 1024) * 1024;
	long steps = argc > 2 ? atol(argv[2]) : 0;
	volatile unsigned char *buf;
	aclrtFuncHandle k;
	aclrtStream s;

	if (evict == 0 || (buf = calloc(1, evict)) == NULL) {
		fputs("usage: bench-launch-cold [EVICT_KIB [STEPS]]\n", stderr);
		return 2;
	}
	if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    npusimKernelRegister("aclnnConvolution_cold_bench",
	    NPUSIM_KERNEL_AI_CORE, 0, 0, 2000, &k) != ACL_SUCCESS) {
		fprintf(stderr, "bench-launch-cold: %s\n",
		    aclGetRecentErrMsg());
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (long n = 0; steps == 0 || n < steps; n++) {
		uint64_t in_calls = 0, t0;

		for (int i = 0; i < PER_STEP; i++) {
			for (size_t j = 0; j < evict; j += 64)
				buf[j]++;
			t0 = util_monotonic_ns();
			if (aclrtLaunchKernel(k, 1, NULL, 0, s) != ACL_SUCCESS) {
				fprintf(stderr, "bench-launch-cold: launch: "
				    "%s\n", aclGetRecentErrMsg());
				return 1;
			}
			in_calls += util_monotonic_ns() - t0;
		}
		if (aclrtSynchronizeStream(s) != ACL_SUCCESS) {
			fprintf(stderr, "bench-launch-cold: synchronize: %s\n",
			    aclGetRecentErrMsg());
			return 1;
		}
		printf("step %ld: %.4f ms\n", n, (double)in_calls / 1e6);
	}
	return 0;
}

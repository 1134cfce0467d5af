/*
 * Helper of bench/session.sh (not a benchmark by itself: bench/run.sh
 * skips it): an application that launches LAUNCHES kernels on the
 * simulated NPU, cycling through NAMES kernels of distinct names (as long
 * as a real model's: "aclnnFusedMatmul_00042_bf16_..."), 5 us each,
 * synchronizing every 256 launches.  Under a capture of the kernel kind
 * every launch is a device record that msptid joins to its launch and
 * names: the figure is msptid's CPU per record as NAMES grows.
 *
 *   bench-session-kernels NAMES LAUNCHES
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

int
main(int argc, char **argv)
{
	aclrtFuncHandle *k;
	aclrtStream s;
	long names, n;

	if (argc != 3 || (names = atol(argv[1])) < 1 || names > 100000 ||
	    (n = atol(argv[2])) < 1) {
		fputs("usage: bench-session-kernels NAMES LAUNCHES\n", stderr);
		return 2;
	}
	if ((k = calloc((size_t)names, sizeof(*k))) == NULL ||
	    aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS) {
		fprintf(stderr, "bench-session-kernels: %s\n",
		    aclGetRecentErrMsg());
		return 1;
	}
	for (long i = 0; i < names; i++) {
		char name[96];

		snprintf(name, sizeof(name), "aclnnFusedMatmul_%05ld_bf16_"
		    "high_precision_tiling_%ld", i, i % 7);
		if (npusimKernelRegister(name, NPUSIM_KERNEL_AI_CORE, 0, 0,
		    5000, &k[i]) != ACL_SUCCESS) {
			fprintf(stderr, "bench-session-kernels: register: %s\n",
			    aclGetRecentErrMsg());
			return 1;
		}
	}
	for (long i = 0; i < n; i++) {
		if (aclrtLaunchKernel(k[i % names], 1, NULL, 0, s) !=
		    ACL_SUCCESS || ((i % 256 == 255 || i == n - 1) &&
		    aclrtSynchronizeStream(s) != ACL_SUCCESS)) {
			fprintf(stderr, "bench-session-kernels: launch: %s\n",
			    aclGetRecentErrMsg());
			return 1;
		}
	}
	free(k);
	return 0;
}

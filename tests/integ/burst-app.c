/*
 * burst-app: a device that sits idle and then completes tasks fast, for
 * session-devjoin.sh (msptid must poll a channel in use soon enough after
 * an idle spell, before a burst laps it).
 *
 *   burst-app BURSTS KERNELS KERNEL_NS IDLE_MS
 *
 * BURSTS times: IDLE_MS of nothing, then KERNELS kernels of KERNEL_NS
 * each launched back to back on one stream, synchronized every 256.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

int
main(int argc, char **argv)
{
	struct timespec idle;
	aclrtFuncHandle k;
	aclrtStream s;
	long bursts, n, ns, ms;

	if (argc != 5 || (bursts = atol(argv[1])) < 1 ||
	    (n = atol(argv[2])) < 1 || (ns = atol(argv[3])) < 1 ||
	    (ms = atol(argv[4])) < 0) {
		fputs("usage: burst-app BURSTS KERNELS KERNEL_NS IDLE_MS\n",
		    stderr);
		return 2;
	}
	if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    npusimKernelRegister("burst", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    (uint64_t)ns, &k) != ACL_SUCCESS) {
		fprintf(stderr, "burst-app: %s\n", aclGetRecentErrMsg());
		return 1;
	}
	idle.tv_sec = ms / 1000;
	idle.tv_nsec = ms % 1000 * 1000000;
	for (long b = 0; b < bursts; b++) {
		nanosleep(&idle, NULL);
		for (long i = 0; i < n; i++)
			if (aclrtLaunchKernel(k, 1, NULL, 0, s) != ACL_SUCCESS ||
			    ((i % 256 == 255 || i == n - 1) &&
			    aclrtSynchronizeStream(s) != ACL_SUCCESS)) {
				fprintf(stderr, "burst-app: %s\n",
				    aclGetRecentErrMsg());
				return 1;
			}
	}
	return 0;
}

/*
 * inflight-app: launches long kernels that are still queued on the device
 * when a capture stops, for session-inflight.sh.
 *
 *   inflight-app --go G --done D [--kernels N] [--kernel-ms MS]
 *
 * Sets up device 0 and a stream, waits for file G to exist, runs one
 * kernel "warmup" of 1 ms to its end (the capture has seen a device task
 * of this process), launches N kernels "inflight" of MS ms each back to
 * back on the stream (N 4, MS 200), creates file D and then waits for SIGTERM without synchronizing:
 * the device works through its queue on its own.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

static volatile sig_atomic_t stop;

static void
on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int
main(int argc, char **argv)
{
	const char *go = NULL, *done = NULL;
	long n = 4, ms = 200;
	aclrtFuncHandle k, w;
	aclrtStream s;
	struct stat st;
	int fd;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--go") == 0)
			go = argv[i + 1];
		else if (strcmp(argv[i], "--done") == 0)
			done = argv[i + 1];
		else if (strcmp(argv[i], "--kernels") == 0)
			n = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--kernel-ms") == 0)
			ms = atol(argv[i + 1]);
	}
	if (go == NULL || done == NULL || n <= 0 || ms <= 0) {
		fprintf(stderr, "usage: inflight-app --go G --done D "
		    "[--kernels N] [--kernel-ms MS]\n");
		return 2;
	}
	signal(SIGTERM, on_term);
	if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    npusimKernelRegister("inflight", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    (uint64_t)ms * 1000000u, &k) != ACL_SUCCESS ||
	    npusimKernelRegister("warmup", NPUSIM_KERNEL_AI_CORE, 0, 0,
	    1000000u, &w) != ACL_SUCCESS) {
		fprintf(stderr, "inflight-app: %s\n", aclGetRecentErrMsg());
		return 1;
	}
	while (!stop && stat(go, &st) != 0)
		usleep(10000);
	if (aclrtLaunchKernel(w, 1, NULL, 0, s) != ACL_SUCCESS ||
	    aclrtSynchronizeStream(s) != ACL_SUCCESS) {
		fprintf(stderr, "inflight-app: warmup: %s\n",
		    aclGetRecentErrMsg());
		return 1;
	}
	for (long i = 0; i < n && !stop; i++)
		if (aclrtLaunchKernel(k, 1, NULL, 0, s) != ACL_SUCCESS) {
			fprintf(stderr, "inflight-app: launch: %s\n",
			    aclGetRecentErrMsg());
			return 1;
		}
	if ((fd = open(done, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0)
		close(fd);
	while (!stop)
		usleep(20000);
	return 0;
}

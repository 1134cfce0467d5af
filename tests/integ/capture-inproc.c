/*
 * capture-inproc: a known workload on libnpusim, captured in process with
 * the msPTI activity API and written by lib/capture, one trace per rank.
 *
 *   capture-inproc --ranks N --steps S --out PREFIX
 *
 * writes PREFIX.rank<R>.trace.  Per step: an MSTX range "step" holding a
 * "dataload" range, a 1 MiB H2D copy, 4 MatMul (AI_CORE, 200 us), 3 Add
 * (AI_VECTOR, 50 us), 1 TopK (AI_CPU, 100 us), with N > 1 a ring
 * HcclBatchSendRecv (1 MiB) and an HcclAllReduce (4 MiB), a D2H copy and
 * a memset.  NPUSIM_SLOW_RANK / NPUSIM_SLOW_LINK inject stragglers;
 * CAPTURE_SLOW_DATA_RANK=R sleeps 5 ms in rank R's dataload range.
 */
#include "config.h"

#include <sys/wait.h>

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"
#include "capture.h"

static struct capture *cap;

static void
req_cb(uint8_t **buffer, size_t *size, size_t *maxrec)
{
	*size = 1 << 20;
	*buffer = aligned_alloc(8, *size);
	*maxrec = 0;
}

static void
done_cb(uint8_t *buffer, size_t size, size_t valid)
{
	msptiActivity *r = NULL;

	while (msptiActivityGetNextRecord(buffer, valid, &r) == MSPTI_SUCCESS)
		capture_add(cap, r);
	free(buffer);
}

static int
check(aclError e, const char *what)
{
	if (e != ACL_SUCCESS) {
		fprintf(stderr, "%s: %d %s\n", what, e, aclGetRecentErrMsg());
		return 1;
	}
	return 0;
}

static int
run_rank(int rank, int n, int steps, HcclRootInfo *root, const char *prefix)
{
	static const msptiActivityKind kinds[] = { MSPTI_ACTIVITY_KIND_API,
	    MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_MEMCPY,
	    MSPTI_ACTIVITY_KIND_MEMSET, MSPTI_ACTIVITY_KIND_MEMORY,
	    MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_MARKER,
	    MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION };
	aclrtFuncHandle mm, add, topk;
	aclrtStream s;
	HcclComm comm = NULL;
	void *dev, *dev2, *p2p_s, *p2p_r, *host;
	char path[512];
	const char *slow_data = getenv("CAPTURE_SLOW_DATA_RANK");
	int rc = 1;

	snprintf(path, sizeof(path), "%s.rank%d.trace", prefix, rank);
	if (capture_open(path, &cap) != 0) {
		perror(path);
		return 1;
	}
	msptiActivityRegisterCallbacks(req_cb, done_cb);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		msptiActivityEnable(kinds[i]);
	if (check(aclrtSetDevice(rank % 8), "aclrtSetDevice") ||
	    check(aclrtCreateStream(&s), "aclrtCreateStream"))
		return 1;
	if (n > 1 && HcclCommInitRootInfo((uint32_t)n, root, (uint32_t)rank,
	    &comm) != HCCL_SUCCESS) {
		fprintf(stderr, "rank %d: HcclCommInitRootInfo failed\n", rank);
		return 1;
	}
	npusimKernelRegister("MatMul", NPUSIM_KERNEL_AI_CORE, 0, 0, 200000, &mm);
	npusimKernelRegister("Add", NPUSIM_KERNEL_AI_VECTOR, 0, 0, 50000, &add);
	npusimKernelRegister("TopK", NPUSIM_KERNEL_AI_CPU, 0, 0, 100000, &topk);
	if (check(aclrtMalloc(&dev, 4 << 20, ACL_MEM_MALLOC_HUGE_FIRST), "m") ||
	    check(aclrtMalloc(&dev2, 4 << 20, ACL_MEM_MALLOC_HUGE_FIRST), "m") ||
	    check(aclrtMalloc(&p2p_s, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST), "m") ||
	    check(aclrtMalloc(&p2p_r, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST), "m") ||
	    check(aclrtMallocHost(&host, 4 << 20), "mh"))
		return 1;
	memset(host, 0, 4 << 20);
	for (int st = 0; st < steps; st++) {
		mstxRangeId r = mstxRangeStartA("step", NULL), d;

		d = mstxRangeStartA("dataload", NULL);
		if (slow_data != NULL && atoi(slow_data) == rank)
			usleep(5000);
		mstxRangeEnd(d);
		aclrtMemcpyAsync(dev, 1 << 20, host, 1 << 20,
		    ACL_MEMCPY_HOST_TO_DEVICE, s);
		for (int i = 0; i < 4; i++)
			aclrtLaunchKernel(mm, 32, NULL, 0, s);
		for (int i = 0; i < 3; i++)
			aclrtLaunchKernel(add, 32, NULL, 0, s);
		aclrtLaunchKernel(topk, 1, NULL, 0, s);
		if (n > 1) {
			HcclSendRecvItem it[2] = {
			    { HCCL_SEND, p2p_s, 1 << 18, HCCL_DATA_TYPE_FP32,
			      (uint32_t)((rank + 1) % n) },
			    { HCCL_RECV, p2p_r, 1 << 18, HCCL_DATA_TYPE_FP32,
			      (uint32_t)((rank + n - 1) % n) } };

			if (HcclBatchSendRecv(it, 2, comm, s) != HCCL_SUCCESS ||
			    HcclAllReduce(dev2, dev2, 1 << 20,
			    HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s) !=
			    HCCL_SUCCESS) {
				fprintf(stderr, "rank %d: hccl failed\n", rank);
				goto out;
			}
		}
		aclrtMemcpyAsync(host, 1 << 20, dev, 1 << 20,
		    ACL_MEMCPY_DEVICE_TO_HOST, s);
		aclrtMemsetAsync(dev, 1 << 20, 0, 1 << 20, s);
		if (check(aclrtSynchronizeStream(s), "sync"))
			goto out;
		mstxRangeEnd(r);
	}
	rc = 0;
out:
	aclrtFree(dev);
	aclrtFree(dev2);
	aclrtFree(p2p_s);
	aclrtFree(p2p_r);
	aclrtFreeHost(host);
	if (comm != NULL)
		HcclCommDestroy(comm);
	aclrtDestroyStream(s);
	msptiActivityFlushAll(1);
	if (capture_close(cap) != 0)
		rc = 1;
	return rc;
}

int
main(int argc, char **argv)
{
	HcclRootInfo root;
	const char *prefix = "capture";
	int n = 1, steps = 5, ch, status, fail = 0;
	char buf[16];

	while ((ch = getopt(argc, argv, "n:s:o:")) != -1) {
		switch (ch) {
		case 'n': n = atoi(optarg); break;
		case 's': steps = atoi(optarg); break;
		case 'o': prefix = optarg; break;
		default:
			fprintf(stderr, "usage: capture-inproc [-n ranks] "
			    "[-s steps] [-o prefix]\n");
			return 2;
		}
	}
	if (n < 1 || n > 8)
		return 2;
	if (n > 1 && HcclGetRootInfo(&root) != HCCL_SUCCESS)
		return 1;
	fflush(stdout);
	for (int r = 0; r < n; r++) {
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0) {
			snprintf(buf, sizeof(buf), "%d", r);
			setenv("RANK", buf, 1);
			setenv("LOCAL_RANK", buf, 1);
			snprintf(buf, sizeof(buf), "%d", n);
			setenv("WORLD_SIZE", buf, 1);
			_exit(run_rank(r, n, steps, &root, prefix));
		}
	}
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail = 1;
	return fail;
}

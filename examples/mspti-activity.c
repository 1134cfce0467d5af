/*
 * Activity collection with buffer reuse and dispatch by kind.  Buffers
 * come from a small fixed pool: the complete callback walks the records
 * and puts the buffer back, so steady state allocates nothing.  Exits
 * non-zero if the records do not match what it ran.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <npusim/npusim.h>
#include <mspti/mspti.h>

#include "example-args.h"

#define POOL		4
#define BUF_SIZE	(16 * 1024)
#define STEPS		200

static uint8_t pool_mem[POOL][BUF_SIZE] __attribute__((aligned(8)));
static uint8_t *pool_free[POOL];
static int pool_n, pool_misses;
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static unsigned long counts[MSPTI_ACTIVITY_KIND_COUNT], delivered;

static void
request(uint8_t **buf, size_t *size, size_t *maxrec)
{
	pthread_mutex_lock(&mtx);
	*buf = pool_n > 0 ? pool_free[--pool_n] : NULL;
	if (*buf == NULL)
		pool_misses++;
	pthread_mutex_unlock(&mtx);
	*size = BUF_SIZE;
	*maxrec = 0;
}

static void
complete(uint8_t *buf, size_t size, size_t valid)
{
	msptiActivity *r = NULL;

	pthread_mutex_lock(&mtx);
	while (msptiActivityGetNextRecord(buf, valid, &r) == MSPTI_SUCCESS) {
		switch (r->kind) {
		case MSPTI_ACTIVITY_KIND_KERNEL: {
			msptiActivityKernel *k = (msptiActivityKernel *)r;
			if (k->end < k->start || k->name == NULL)
				counts[0]++;	/* counted as bad */
			break;
		}
		case MSPTI_ACTIVITY_KIND_API:
		case MSPTI_ACTIVITY_KIND_MEMCPY:
		case MSPTI_ACTIVITY_KIND_MEMORY:
			break;
		default:
			counts[0]++;	/* a kind we did not enable */
			continue;
		}
		counts[r->kind]++;
	}
	delivered++;
	pool_free[pool_n++] = buf;	/* reuse */
	pthread_mutex_unlock(&mtx);
}

int
main(int argc, char **argv)
{
	aclrtFuncHandle gemm, act;
	aclrtStream s;
	void *dev;
	static char host[4096];
	int i;

	example_args(argc, argv, "mspti-activity",
	    "activity buffers from a fixed pool, dispatched by kind.");
	for (i = 0; i < POOL; i++)
		pool_free[pool_n++] = pool_mem[i];
	msptiActivityRegisterCallbacks(request, complete);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_API);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMCPY);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMORY);

	if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS)
		return 1;
	npusimKernelRegister("gemm", NPUSIM_KERNEL_AI_CORE, 0, 0, 20000, &gemm);
	npusimKernelRegister("gelu", NPUSIM_KERNEL_AI_VECTOR, 0, 0, 5000, &act);
	aclrtMalloc(&dev, sizeof(host), ACL_MEM_MALLOC_HUGE_FIRST);
	for (i = 0; i < STEPS; i++) {
		aclrtMemcpyAsync(dev, sizeof(host), host, sizeof(host),
		    ACL_MEMCPY_HOST_TO_DEVICE, s);
		aclrtLaunchKernel(gemm, 1, NULL, 0, s);
		aclrtLaunchKernel(act, 1, NULL, 0, s);
		if (i % 50 == 49) {
			aclrtSynchronizeStream(s);
			msptiActivityFlushAll(1);
		}
	}
	aclrtSynchronizeStream(s);
	aclrtFree(dev);
	msptiActivityFlushAll(1);

	printf("buffers delivered %lu, pool misses %d\n", delivered, pool_misses);
	printf("API %lu KERNEL %lu MEMCPY %lu MEMORY %lu bad %lu\n",
	    counts[MSPTI_ACTIVITY_KIND_API], counts[MSPTI_ACTIVITY_KIND_KERNEL],
	    counts[MSPTI_ACTIVITY_KIND_MEMCPY], counts[MSPTI_ACTIVITY_KIND_MEMORY],
	    counts[0]);
	if (counts[MSPTI_ACTIVITY_KIND_KERNEL] != 2 * STEPS ||
	    counts[MSPTI_ACTIVITY_KIND_MEMCPY] != STEPS ||
	    counts[MSPTI_ACTIVITY_KIND_MEMORY] != 2 ||
	    counts[MSPTI_ACTIVITY_KIND_API] < 3 * STEPS || counts[0] != 0 ||
	    pool_misses != 0 || pool_n != POOL) {
		fprintf(stderr, "mspti-activity: unexpected records\n");
		return 1;
	}
	return 0;
}

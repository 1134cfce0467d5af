/*
 * External correlation through init / execute / cleanup phases: the
 * phase id (CUSTOM0) and a step id (CUSTOM1, execute only) are pushed
 * around each phase; every API record must map to its phase.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <npusim/npusim.h>
#include <mspti/mspti.h>

#include "example-args.h"

enum { INIT = 1, EXECUTE = 2, CLEANUP = 3 };
#define STEPS	5
#define MAXREC	4096

static msptiActivityExternalCorrelation ext[MAXREC];
static msptiActivityApi api[MAXREC];
static size_t next, napi;

static void
request(uint8_t **buf, size_t *size, size_t *maxrec)
{
	*size = 4096;
	*buf = malloc(*size);
	*maxrec = 0;
}

static void
complete(uint8_t *buf, size_t size, size_t valid)
{
	msptiActivity *r = NULL;

	while (msptiActivityGetNextRecord(buf, valid, &r) == MSPTI_SUCCESS) {
		if (r->kind == MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION &&
		    next < MAXREC)
			ext[next++] = *(msptiActivityExternalCorrelation *)r;
		else if (r->kind == MSPTI_ACTIVITY_KIND_API && napi < MAXREC)
			api[napi++] = *(msptiActivityApi *)r;
	}
	free(buf);
}

static uint64_t
ext_of(uint64_t corr, msptiExternalCorrelationKind kind)
{
	size_t i;

	for (i = 0; i < next; i++)
		if (ext[i].correlationId == corr && ext[i].externalKind == kind)
			return ext[i].externalId;
	return 0;
}

int
main(int argc, char **argv)
{
	aclrtFuncHandle k;
	aclrtStream s;
	void *dev;
	static char host[1024];
	uint64_t v;
	size_t i;
	int step, bad = 0, steps_seen = 0;

	example_args(argc, argv, "mspti-external",
	    "external correlation ids around init, execute and cleanup phases.");
	msptiActivityRegisterCallbacks(request, complete);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_API);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);

	msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, INIT);
	if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS)
		return 1;
	aclrtMalloc(&dev, sizeof(host), ACL_MEM_MALLOC_HUGE_FIRST);
	aclrtMemcpy(dev, sizeof(host), host, sizeof(host),
	    ACL_MEMCPY_HOST_TO_DEVICE);
	msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v);

	npusimKernelRegister("step_kernel", NPUSIM_KERNEL_AI_CORE, 0, 0, 5000,
	    &k);
	msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, EXECUTE);
	for (step = 1; step <= STEPS; step++) {
		msptiActivityPushExternalCorrelationId(
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, (uint64_t)step);
		aclrtLaunchKernel(k, 1, NULL, 0, s);
		aclrtSynchronizeStream(s);
		msptiActivityPopExternalCorrelationId(
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &v);
	}
	msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v);

	msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, CLEANUP);
	aclrtFree(dev);
	aclrtDestroyStream(s);
	msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v);
	aclrtResetDevice(0);	/* outside every phase */
	msptiActivityFlushAll(1);

	for (i = 0; i < napi; i++) {
		const char *n = api[i].name;
		uint64_t phase = ext_of(api[i].correlationId,
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
		uint64_t st = ext_of(api[i].correlationId,
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
		uint64_t want = 0;

		if (!strcmp(n, "aclrtSetDevice") || !strcmp(n, "aclrtCreateStream") ||
		    !strcmp(n, "aclrtMalloc") || !strcmp(n, "aclrtMemcpy"))
			want = INIT;
		else if (!strcmp(n, "aclrtLaunchKernel") ||
		    !strcmp(n, "aclrtSynchronizeStream")) {
			want = EXECUTE;
			if (st < 1 || st > STEPS)
				bad++;
			else if (!strcmp(n, "aclrtLaunchKernel"))
				steps_seen++;
		} else if (!strcmp(n, "aclrtFree") || !strcmp(n, "aclrtDestroyStream"))
			want = CLEANUP;
		printf("%-24s phase %llu step %llu\n", n,
		    (unsigned long long)phase, (unsigned long long)st);
		if (phase != want)
			bad++;
	}
	printf("API records %zu, external records %zu, mismatches %d\n",
	    napi, next, bad);
	return bad == 0 && steps_seen == STEPS && napi >= 2 * STEPS + 6 ? 0 : 1;
}

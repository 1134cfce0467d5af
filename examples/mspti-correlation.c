/*
 * API-to-kernel correlation, 1:N.  Each "operator" pushes its id as an
 * external correlation id and launches three kernels; the records join
 * operator → launch APIs (EXTERNAL_CORRELATION) → kernels (correlationId).
 * Checks every operator owns exactly its three kernels, in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <npusim/npusim.h>
#include <mspti/mspti.h>

#include "example-args.h"

#define OPS	20
#define MAXREC	4096

static msptiActivityExternalCorrelation ext[MAXREC];
static msptiActivityKernel kern[MAXREC];
static size_t next, nkern;

/* Records of different launches may be delivered out of order (a device
 * record can wait for its launch's host side); order kernels by start. */
static int
by_start(const void *a, const void *b)
{
	const msptiActivityKernel *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void
request(uint8_t **buf, size_t *size, size_t *maxrec)
{
	*size = 8192;
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
		else if (r->kind == MSPTI_ACTIVITY_KIND_KERNEL && nkern < MAXREC)
			kern[nkern++] = *(msptiActivityKernel *)r;
	}
	free(buf);
}

int
main(int argc, char **argv)
{
	static const char *names[3] = { "attn_qk", "attn_softmax", "attn_v" };
	aclrtFuncHandle k[3];
	aclrtStream s;
	uint64_t id;
	size_t i, j;
	int op, per_op[OPS + 1] = { 0 }, bad = 0;

	example_args(argc, argv, "mspti-correlation",
	    "API-to-kernel correlation 1:N through external correlation ids.");
	msptiActivityRegisterCallbacks(request, complete);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
	if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS)
		return 1;
	for (i = 0; i < 3; i++)
		npusimKernelRegister(names[i], NPUSIM_KERNEL_AI_CORE, 0, 0,
		    10000, &k[i]);
	for (op = 1; op <= OPS; op++) {
		msptiActivityPushExternalCorrelationId(
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, (uint64_t)op);
		for (i = 0; i < 3; i++)
			aclrtLaunchKernel(k[i], 1, NULL, 0, s);
		msptiActivityPopExternalCorrelationId(
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
	}
	aclrtSynchronizeStream(s);
	msptiActivityFlushAll(1);
	qsort(kern, nkern, sizeof(kern[0]), by_start);

	for (i = 0; i < nkern; i++) {
		for (j = 0; j < next; j++)
			if (ext[j].correlationId == kern[i].correlationId)
				break;
		if (j == next || ext[j].externalId < 1 || ext[j].externalId > OPS) {
			bad++;
			continue;
		}
		/* The nth kernel of an operator is names[n]. */
		if (strcmp(kern[i].name,
		    names[per_op[ext[j].externalId]++ % 3]) != 0)
			bad++;
	}
	for (op = 1; op <= OPS; op++)
		if (per_op[op] != 3)
			bad++;
	printf("operators %d, kernels %zu, external records %zu, mismatches %d\n",
	    OPS, nkern, next, bad);
	return bad == 0 && nkern == 3 * OPS && next == 3 * OPS ? 0 : 1;
}

/*
 * MSTX marks from inside a launch callback: at ENTER a range named after
 * the kernel starts (its id kept in correlationData), at EXIT it ends.
 * The MARKER records must pair up by id with the kernel names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <npusim/npusim.h>
#include <mspti/mspti.h>
#include <mstx/ms_tools_ext.h>

#include "example-args.h"

#define LAUNCHES	12
static msptiActivityMarker marks[256];
static size_t nmarks;

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

	while (msptiActivityGetNextRecord(buf, valid, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_MARKER && nmarks < 256)
			marks[nmarks++] = *(msptiActivityMarker *)r;
	free(buf);
}

static void
on_launch(void *ud, msptiCallbackDomain d, msptiCallbackId id,
    const msptiCallbackData *cb)
{
	if (cb->callbackSite == MSPTI_API_ENTER)
		*cb->correlationData = mstxRangeStartA(cb->symbolName, NULL);
	else
		mstxRangeEnd(*cb->correlationData);
}

int
main(int argc, char **argv)
{
	static const char *names[2] = { "embedding", "layernorm" };
	msptiSubscriberHandle sub;
	aclrtFuncHandle k[2];
	aclrtStream s;
	size_t i, j, pairs = 0;
	int bad = 0;

	example_args(argc, argv, "mspti-mstx-callback",
	    "MSTX ranges from inside a launch callback, paired with kernels.");
	msptiActivityRegisterCallbacks(request, complete);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	if (msptiSubscribe(&sub, on_launch, NULL) != MSPTI_SUCCESS)
		return 1;
	msptiEnableCallback(1, sub, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_LAUNCH);
	if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS)
		return 1;
	for (i = 0; i < 2; i++)
		npusimKernelRegister(names[i], NPUSIM_KERNEL_AI_VECTOR, 0, 0,
		    1000, &k[i]);
	for (i = 0; i < LAUNCHES; i++)
		aclrtLaunchKernel(k[i % 2], 1, NULL, 0, s);
	aclrtSynchronizeStream(s);
	msptiUnsubscribe(sub);
	msptiActivityFlushAll(1);

	for (i = 0; i < nmarks; i++) {
		if (marks[i].flag != MSPTI_ACTIVITY_FLAG_MARKER_START)
			continue;
		for (j = i + 1; j < nmarks; j++)
			if (marks[j].id == marks[i].id &&
			    marks[j].flag == MSPTI_ACTIVITY_FLAG_MARKER_END)
				break;
		if (j == nmarks || strcmp(marks[i].name, names[pairs % 2]) != 0 ||
		    marks[j].timestamp < marks[i].timestamp)
			bad++;
		pairs++;
	}
	printf("marker records %zu, ranges %zu, bad %d\n", nmarks, pairs, bad);
	return bad == 0 && pairs == LAUNCHES && nmarks == 2 * LAUNCHES ? 0 : 1;
}

/*
 * Timing with correlationData: the callback stores the ENTER time in the
 * call's correlationData slot and reads it back at EXIT, so per-call
 * timing needs no table.  Checks every call was timed, once.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <acl/acl.h>
#include <npusim/npusim.h>
#include <mspti/mspti.h>

#include "example-args.h"

static unsigned long calls[MSPTI_CBID_RUNTIME_SIZE], bad;
static unsigned long long total_ns[MSPTI_CBID_RUNTIME_SIZE];

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
on_call(void *ud, msptiCallbackDomain d, msptiCallbackId id,
    const msptiCallbackData *cb)
{
	if (d != MSPTI_CB_DOMAIN_RUNTIME || id >= MSPTI_CBID_RUNTIME_SIZE ||
	    cb->correlationData == NULL) {
		bad++;
		return;
	}
	if (cb->callbackSite == MSPTI_API_ENTER) {
		*cb->correlationData = now_ns();
		return;
	}
	if (*cb->correlationData == 0) {
		bad++;
		return;
	}
	total_ns[id] += now_ns() - *cb->correlationData;
	calls[id]++;
}

int
main(int argc, char **argv)
{
	msptiSubscriberHandle sub;
	aclrtFuncHandle k;
	aclrtStream s;
	int i;

	example_args(argc, argv, "mspti-callback-timing",
	    "per-call timing through correlationData.");
	if (msptiSubscribe(&sub, on_call, NULL) != MSPTI_SUCCESS)
		return 1;
	msptiEnableDomain(1, sub, MSPTI_CB_DOMAIN_RUNTIME);
	if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS)
		return 1;
	npusimKernelRegister("timed", NPUSIM_KERNEL_AI_CORE, 0, 0, 100000, &k);
	for (i = 0; i < 10; i++) {
		aclrtLaunchKernel(k, 1, NULL, 0, s);
		aclrtSynchronizeStream(s);
	}
	msptiUnsubscribe(sub);
	printf("launch: %lu calls, mean %.1f us\n",
	    calls[MSPTI_CBID_RUNTIME_LAUNCH],
	    calls[MSPTI_CBID_RUNTIME_LAUNCH] ?
	    total_ns[MSPTI_CBID_RUNTIME_LAUNCH] / 1e3 /
	    calls[MSPTI_CBID_RUNTIME_LAUNCH] : 0.0);
	printf("synchronize: %lu calls, mean %.1f us\n",
	    calls[MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED],
	    calls[MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED] ?
	    total_ns[MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED] / 1e3 /
	    calls[MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED] : 0.0);
	/* A synchronize waits for a 100 us kernel: it must take >= 50 us. */
	return bad == 0 && calls[MSPTI_CBID_RUNTIME_LAUNCH] == 10 &&
	    calls[MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED] == 10 &&
	    calls[MSPTI_CBID_RUNTIME_STREAM_CREATED] == 1 &&
	    calls[MSPTI_CBID_RUNTIME_DEVICE_SET] == 1 &&
	    total_ns[MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED] >= 10 * 50000ull ?
	    0 : 1;
}

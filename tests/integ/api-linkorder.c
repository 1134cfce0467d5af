/*
 * Built by api-linkorder.sh with each link order of libmspti and the
 * runtime, with and without --as-needed.  Calls only runtime functions
 * libmspti interposes, so a link that resolved them all to libmspti may
 * drop the runtime: the agent must still find it.  Prints the Enable
 * results, the first failing ACL call, and the records of each kind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <mspti/mspti.h>

static size_t napi, nmemcpy, njoined;

static void
req(uint8_t **buffer, size_t *size, size_t *max)
{
	*size = 1 << 20;
	*buffer = malloc(*size);
	*max = 0;
}

static void
done(uint8_t *buffer, size_t size, size_t valid)
{
	msptiActivity *r = NULL;

	while (msptiActivityGetNextRecord(buffer, valid, &r) == MSPTI_SUCCESS) {
		if (r->kind == MSPTI_ACTIVITY_KIND_API)
			napi++;
		else if (r->kind == MSPTI_ACTIVITY_KIND_MEMCPY) {
			nmemcpy++;
			/* Timed by the device channel, not the host call. */
			if (((msptiActivityMemcpy *)r)->streamId !=
			    MSPTI_INVALID_STREAM_ID)
				njoined++;
		}
	}
	free(buffer);
}

#define TRY(call) do {							\
	aclError e_ = (call);						\
	if (e_ != ACL_SUCCESS && err == ACL_SUCCESS) {			\
		err = e_;						\
		what = #call;						\
	}								\
} while (0)

int
main(void)
{
	aclError err = ACL_SUCCESS;
	const char *what = "";
	aclrtStream s = NULL;
	void *dev = NULL;
	char host[4096];
	int api, mc;

	memset(host, 1, sizeof(host));
	msptiActivityRegisterCallbacks(req, done);
	api = msptiActivityEnable(MSPTI_ACTIVITY_KIND_API);
	mc = msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMCPY);
	TRY(aclrtSetDevice(0));
	TRY(aclrtCreateStream(&s));
	TRY(aclrtMalloc(&dev, sizeof(host), ACL_MEM_MALLOC_HUGE_FIRST));
	TRY(aclrtMemcpy(dev, sizeof(host), host, sizeof(host),
	    ACL_MEMCPY_HOST_TO_DEVICE));
	TRY(aclrtSynchronizeStream(s));
	TRY(aclrtFree(dev));
	TRY(aclrtDestroyStream(s));
	TRY(aclrtResetDevice(0));
	msptiActivityFlushAll(1);
	printf("enable api=%d memcpy=%d acl=%d%s%s records api=%zu memcpy=%zu "
	    "device=%zu\n", api, mc, (int)err, *what ? " at " : "", what, napi,
	    nmemcpy, njoined);
	return 0;
}

/*
 * Prints what the interposition-dependent calls return, for
 * api-preload.sh: linked with libnpusim AHEAD of libmspti, so without
 * LD_PRELOAD the runtime's symbols win and interposition is not in effect.
 */
#include <stdio.h>

#include <acl/acl.h>
#include <mspti/mspti.h>

int
main(void)
{
	msptiSubscriberHandle s;

	/* Reference the runtime so the link keeps it first. */
	if (aclGetRecentErrMsg() == NULL)
		return 1;
	printf("memcpy=%d hccl=%d memory=%d memset=%d subscribe=%d "
	    "marker=%d kernel=%d api=%d comm=%d acl_api=%d node_api=%d "
	    "runtime_api=%d external=%d\n",
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMCPY),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_HCCL),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMORY),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMSET),
	    msptiSubscribe(&s, NULL, NULL),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_COMMUNICATION),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_ACL_API),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_NODE_API),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_RUNTIME_API),
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
	return 0;
}

/*
 * Runtime-level (rt*) interposers: the low-level calls a framework or a
 * profiler makes below ACL.  They have no msPTI callback id, so they give
 * API and RUNTIME_API records only.  The agent's own uses of these
 * functions (the launch join, device markers) go straight to the runtime
 * (api_internal) and make no record.
 */
#include "config.h"

#include <acl/acl.h>
#include <runtime/rt.h>

#include "api.h"

#define RT_REAL(fn)							\
	static _Atomic(void *) real_slot;				\
	__typeof__(&fn) real = (__typeof__(&fn))api_real(&real_slot, #fn); \
	struct icall c;							\
	rtError_t ret;							\
									\
	if (API_UNLIKELY(real == NULL))					\
		return ACL_ERROR_API_NOT_SUPPORT

RTS_API rtError_t
rtGetTaskIdAndStreamID(uint32_t *taskId, uint32_t *streamId)
{
	RT_REAL(rtGetTaskIdAndStreamID);

	if (API_LIKELY(!icall_enter(&c, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_INVALID, "rtGetTaskIdAndStreamID", NULL, NULL)))
		return real(taskId, streamId);
	ret = real(taskId, streamId);
	icall_done(&c);
	icall_exit(&c, &ret);
	return ret;
}

RTS_API rtError_t
rtProfilerTraceEx(uint64_t indexId, uint64_t modelId, uint16_t tagId,
    rtStream_t stm)
{
	RT_REAL(rtProfilerTraceEx);

	if (API_LIKELY(!icall_enter(&c, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_INVALID, "rtProfilerTraceEx", NULL, NULL)))
		return real(indexId, modelId, tagId, stm);
	ret = real(indexId, modelId, tagId, stm);
	icall_done(&c);
	icall_exit(&c, &ret);
	return ret;
}

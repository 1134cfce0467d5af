/*
 * aclnn/aclnn_base.h - common part of the aclnn operator API (simulated
 * NPU, libnpusim), included by every aclnnop/ header.
 *
 * Each operator has two phases, as in CANN: aclnnXxxGetWorkspaceSize
 * checks the arguments and returns the workspace size and a single-use
 * executor; aclnnXxx(workspace, workspaceSize, executor, stream) launches
 * the kernel on the stream (through aclrtLaunchKernel, so an interposer
 * sees the launch) and releases the executor.  The simulated kernel
 * really computes the result when it runs on the stream.
 */
#ifndef ACLNN_ACLNN_BASE_H
#define ACLNN_ACLNN_BASE_H

#include <aclnn/acl_meta.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Optional: the operators need no initialisation.  Returns ACLNN_SUCCESS. */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_ACLNN_BASE_H */

/*
 * aclnnop/aclnn_sub.h - out = self - alpha * other (simulated NPU, libnpusim).
 * Signatures follow CANN's aclnnop/aclnn_sub.h; see aclnn/aclnn_base.h.
 */
#ifndef OP_API_INC_SUB_H_SIM
#define OP_API_INC_SUB_H_SIM

#include <aclnn/aclnn_base.h>

#ifdef __cplusplus
extern "C" {
#endif

/** As aclnnAdd; kernel "aclnnSub_SubAiCore_Sub". */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnSubGetWorkspaceSize(
    const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
    aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnSub(void *workspace,
    uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* OP_API_INC_SUB_H_SIM */

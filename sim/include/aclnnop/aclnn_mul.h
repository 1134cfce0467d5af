/*
 * aclnnop/aclnn_mul.h - out = self * other, with broadcasting (simulated
 * NPU, libnpusim).
 * Signatures follow CANN's aclnnop/aclnn_mul.h; see aclnn/aclnn_base.h.
 */
#ifndef OP_API_INC_MUL_H_SIM
#define OP_API_INC_MUL_H_SIM

#include <aclnn/aclnn_base.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Kernel "aclnnMul_MulAiCore_Mul". */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnMulGetWorkspaceSize(
    const aclTensor *self, const aclTensor *other, aclTensor *out,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnMul(void *workspace,
    uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* OP_API_INC_MUL_H_SIM */

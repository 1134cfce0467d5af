/*
 * aclnnop/aclnn_add.h - out = self + alpha * other, with broadcasting
 * (simulated NPU, libnpusim).
 * Signatures follow CANN's aclnnop/aclnn_add.h; see aclnn/aclnn_base.h.
 */
#ifndef OP_API_INC_ADD_H_SIM
#define OP_API_INC_ADD_H_SIM

#include <aclnn/aclnn_base.h>

#ifdef __cplusplus
extern "C" {
#endif

/** self, other, out: FLOAT, FLOAT16, BF16, DOUBLE, INT8/16/32/64, UINT8 or
 * BOOL; shapes broadcast to out's shape.  Kernel "aclnnAdd_AddAiCore_Add". */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnAddGetWorkspaceSize(
    const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
    aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnAdd(void *workspace,
    uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

/** out = self + alpha * other, other a scalar. */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnAddsGetWorkspaceSize(
    const aclTensor *self, const aclScalar *other, const aclScalar *alpha,
    aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnAdds(void *workspace,
    uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

/** selfRef += alpha * other. */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnInplaceAddGetWorkspaceSize(
     aclTensor *selfRef, const aclTensor *other, const aclScalar *alpha,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnInplaceAdd(void *workspace,
    uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* OP_API_INC_ADD_H_SIM */

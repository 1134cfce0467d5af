/*
 * aclnnop/aclnn_relu.h - out = max(self, 0) (simulated NPU, libnpusim).
 * Signatures follow CANN's aclnnop/aclnn_relu.h; see aclnn/aclnn_base.h.
 */
#ifndef OP_API_INC_RELU_H_SIM
#define OP_API_INC_RELU_H_SIM

#include <aclnn/aclnn_base.h>

#ifdef __cplusplus
extern "C" {
#endif

/** self and out of the same shape; kernel "aclnnRelu_ReluAiCore_Relu". */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnReluGetWorkspaceSize(
    const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
    aclOpExecutor **executor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnRelu(void *workspace,
    uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* OP_API_INC_RELU_H_SIM */

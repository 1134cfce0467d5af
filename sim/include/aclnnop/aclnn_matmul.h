/*
 * aclnnop/aclnn_matmul.h - matrix product (simulated NPU, libnpusim).
 * Signatures follow CANN's aclnnop/aclnn_matmul.h; see aclnn/aclnn_base.h.
 */
#ifndef OP_API_INC_MATMUL_H_SIM
#define OP_API_INC_MATMUL_H_SIM

#include <aclnn/aclnn_base.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * out[b] = self[b] x mat2[b]: 2-D (M,K)x(K,N) or 3-D batched, a batch of 1
 * broadcast; FLOAT, FLOAT16 or BF16.  cubeMathType: 0 KEEP_DTYPE,
 * 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32 (accepted, the
 * product is accumulated in float either way).  FLOAT16/BF16 outputs need
 * a workspace of M*N*4 bytes per batch (the float accumulator).  Kernel
 * "aclnnMatmul_MatMulV3Common_MatMulV3" on the AI cores.
 */
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnMatmulGetWorkspaceSize(
    const aclTensor *self, const aclTensor *mat2, aclTensor *out,
    int8_t cubeMathType, uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclnnMatmul(void *workspace,
    uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* OP_API_INC_MATMUL_H_SIM */

/*
 * aclnn/acl_meta.h - tensors, scalars and arrays of the aclnn operator API
 * (simulated NPU, libnpusim).
 *
 * Names and signatures follow CANN's aclnn/acl_meta.h.  Every object is
 * opaque and registered: destroying a stale or foreign pointer returns
 * ACLNN_ERR_PARAM_INVALID instead of crashing.  Creators return NULL on
 * bad arguments (NULL arrays with a count, more than 8 dimensions,
 * negative sizes, an unsupported data type).
 */
#ifndef ACLNN_ACL_META_H
#define ACLNN_ACL_META_H

#include <stdint.h>

#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACLNN_FUNC_VISIBILITY
#define ACLNN_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

typedef int32_t aclnnStatus;

/* NULLPTR: a required pointer is NULL; INVALID: a bad type, shape or
 * handle; RUNTIME_ERROR: the runtime refused the launch. */
#define ACLNN_SUCCESS			0
#define ACLNN_ERR_PARAM_NULLPTR		161001
#define ACLNN_ERR_PARAM_INVALID		161002
#define ACLNN_ERR_RUNTIME_ERROR		361001
#define ACLNN_ERR_INNER			561000
#define ACLNN_ERR_INNER_NULLPTR		561103

/** Maximum tensor rank the operators accept. */
#define ACLNN_MAX_DIMS			8

typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclOpExecutor aclOpExecutor;

/**
 * A view of device memory: viewDims/stride (in elements) over tensorData
 * plus offset elements.  storageDims describe the allocation (at least
 * the elements the view reaches).  tensorData must lie in memory from
 * aclrtMalloc when an operator runs on it.
 */
ACLNN_FUNC_VISIBILITY aclTensor *aclCreateTensor(const int64_t *viewDims,
    uint64_t viewDimsNum, aclDataType dataType, const int64_t *stride,
    int64_t offset, aclFormat format, const int64_t *storageDims,
    uint64_t storageDimsNum, void *tensorData);
/** value points at one element of dataType; it is copied. */
ACLNN_FUNC_VISIBILITY aclScalar *aclCreateScalar(void *value,
    aclDataType dataType);
ACLNN_FUNC_VISIBILITY aclIntArray *aclCreateIntArray(const int64_t *value,
    uint64_t size);
ACLNN_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor *tensor);
ACLNN_FUNC_VISIBILITY aclnnStatus aclDestroyScalar(const aclScalar *scalar);
ACLNN_FUNC_VISIBILITY aclnnStatus aclDestroyIntArray(const aclIntArray *array);
ACLNN_FUNC_VISIBILITY aclnnStatus aclGetDataType(const aclTensor *tensor,
    aclDataType *dataType);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_ACL_META_H */

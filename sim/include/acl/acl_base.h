/*
 * acl/acl_base.h - ACL base types shared by the runtime, profiling and
 * aclnn headers of the simulated NPU (libnpusim): tensor data types and
 * formats.  Names and values follow CANN's acl_base.h.
 */
#ifndef ACL_ACL_BASE_H
#define ACL_ACL_BASE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	ACL_DT_UNDEFINED = -1,
	ACL_FLOAT = 0,
	ACL_FLOAT16 = 1,
	ACL_INT8 = 2,
	ACL_INT32 = 3,
	ACL_UINT8 = 4,
	ACL_INT16 = 6,
	ACL_UINT16 = 7,
	ACL_UINT32 = 8,
	ACL_INT64 = 9,
	ACL_UINT64 = 10,
	ACL_DOUBLE = 11,
	ACL_BOOL = 12,
	ACL_STRING = 13,
	ACL_COMPLEX64 = 16,
	ACL_COMPLEX128 = 17,
	ACL_BF16 = 27,
	ACL_INT4 = 29,
	ACL_UINT1 = 30,
	ACL_COMPLEX32 = 33,
} aclDataType;

typedef enum {
	ACL_FORMAT_UNDEFINED = -1,
	ACL_FORMAT_NCHW = 0,
	ACL_FORMAT_NHWC = 1,
	ACL_FORMAT_ND = 2,
	ACL_FORMAT_NC1HWC0 = 3,
	ACL_FORMAT_FRACTAL_Z = 4,
	ACL_FORMAT_NC1HWC0_C04 = 12,
	ACL_FORMAT_HWCN = 16,
	ACL_FORMAT_NDHWC = 27,
	ACL_FORMAT_FRACTAL_NZ = 29,
	ACL_FORMAT_NCDHW = 30,
	ACL_FORMAT_NDC1HWC0 = 32,
	ACL_FRACTAL_Z_3D = 33,
} aclFormat;

/* Profiling state errors (acl_base.h), returned by acl/acl_prof.h. */
#define ACL_ERROR_PROF_ALREADY_RUN		100042
#define ACL_ERROR_PROF_NOT_RUN			100043

#ifdef __cplusplus
}
#endif

#endif /* ACL_ACL_BASE_H */

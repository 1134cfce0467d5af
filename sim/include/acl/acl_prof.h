/*
 * acl/acl_prof.h - the ACL profiling API of the simulated NPU (libnpusim).
 *
 * Names, values and signatures follow CANN's acl/acl_prof.h.  libnpusim
 * keeps the API's state machine and its errors (init before start, one
 * running configuration per device, stop what was started) but writes no
 * msprof data: profiling on the simulator is msPTI (libmspti.so) and
 * msptid.  The msproftx stamps are accepted and dropped; use MSTX
 * (mstx/ms_tools_ext.h) for markers that reach a capture.
 */
#ifndef ACL_ACL_PROF_H
#define ACL_ACL_PROF_H

#include <stddef.h>
#include <stdint.h>

#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_PROF_ACL_API		0x0001ULL
#define ACL_PROF_TASK_TIME		0x0002ULL
#define ACL_PROF_AICORE_METRICS		0x0004ULL
#define ACL_PROF_AICPU			0x0008ULL
#define ACL_PROF_L2CACHE		0x0010ULL
#define ACL_PROF_HCCL_TRACE		0x0020ULL
#define ACL_PROF_TRAINING_TRACE		0x0040ULL
#define ACL_PROF_MSPROFTX		0x0080ULL
#define ACL_PROF_RUNTIME_API		0x0100ULL
#define ACL_PROF_FWK_SCHEDULE_L0	0x0200ULL
#define ACL_PROF_TASK_TIME_L0		0x0800ULL
#define ACL_PROF_TASK_MEMORY		0x1000ULL
#define ACL_PROF_TASK_TIME_L2		0x2000ULL
#define ACL_PROF_OP_ATTR		0x4000ULL

/** Longest result path aclprofInit accepts. */
#define ACL_PROF_MAX_PATH		4096

typedef enum {
	ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
	ACL_AICORE_PIPE_UTILIZATION = 1,
	ACL_AICORE_MEMORY_BANDWIDTH = 2,
	ACL_AICORE_L0B_AND_WIDTH = 3,
	ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
	ACL_AICORE_MEMORY_UB = 5,
	ACL_AICORE_L2_CACHE = 6,
	ACL_AICORE_NONE = 0xFF,
} aclprofAicoreMetrics;

typedef struct aclprofConfig aclprofConfig;
typedef struct aclprofAicoreEvents aclprofAicoreEvents;

/** profilerResultPath of length bytes (no NUL needed); twice:
 * ACL_ERROR_REPEAT_INITIALIZE. */
ACL_FUNC_VISIBILITY aclError aclprofInit(const char *profilerResultPath,
    size_t length);
/** ACL_ERROR_PROF_NOT_RUN without aclprofInit; stops what still runs. */
ACL_FUNC_VISIBILITY aclError aclprofFinalize(void);
/** NULL on bad arguments (device ids, metrics, unknown type bits). */
ACL_FUNC_VISIBILITY aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList,
    uint32_t deviceNums, aclprofAicoreMetrics aicoreMetrics,
    const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig);
ACL_FUNC_VISIBILITY aclError aclprofDestroyConfig(
    const aclprofConfig *profilerConfig);
/** ACL_ERROR_PROF_NOT_RUN before aclprofInit; ACL_ERROR_PROF_ALREADY_RUN
 * if one of its devices is already being profiled. */
ACL_FUNC_VISIBILITY aclError aclprofStart(const aclprofConfig *profilerConfig);
/** ACL_ERROR_PROF_NOT_RUN unless this configuration was started. */
ACL_FUNC_VISIBILITY aclError aclprofStop(const aclprofConfig *profilerConfig);

/* msproftx stamps: accepted, validated, not recorded. */
ACL_FUNC_VISIBILITY void *aclprofCreateStamp(void);
ACL_FUNC_VISIBILITY void aclprofDestroyStamp(void *stamp);
ACL_FUNC_VISIBILITY aclError aclprofSetStampTraceMessage(void *stamp,
    const char *msg, uint32_t msgLen);
ACL_FUNC_VISIBILITY aclError aclprofMark(void *stamp);
ACL_FUNC_VISIBILITY aclError aclprofRangeStart(void *stamp, uint32_t *rangeId);
ACL_FUNC_VISIBILITY aclError aclprofRangeStop(uint32_t rangeId);

#ifdef __cplusplus
}
#endif

#endif /* ACL_ACL_PROF_H */

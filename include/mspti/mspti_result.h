/**
 * @file mspti_result.h
 * @brief msPTI result codes and the export/ABI macros shared by every msPTI header.
 */
#ifndef MSPTI_RESULT_H
#define MSPTI_RESULT_H

#ifndef MSPTI_API
#if defined(__GNUC__) || defined(__clang__)
/** Marks a function as part of the exported msPTI ABI. */
#define MSPTI_API __attribute__((visibility("default")))
#else
#define MSPTI_API
#endif
#endif

#ifndef MSPTI_PACKED_ALIGNMENT
#if defined(__GNUC__) || defined(__clang__)
/** Record layout: packed fields, size rounded up to a multiple of 8. */
#define MSPTI_PACKED_ALIGNMENT __attribute__((packed, aligned(8)))
#else
#define MSPTI_PACKED_ALIGNMENT
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Result of every msPTI function.
 */
typedef enum {
	/** The call succeeded. */
	MSPTI_SUCCESS = 0,
	/** An argument was NULL, out of range or otherwise invalid. */
	MSPTI_ERROR_INVALID_PARAMETER = 1,
	/** A subscriber already exists; only one is supported. */
	MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 2,
	/** No more records in the buffer, or a limit was reached. */
	MSPTI_ERROR_MAX_LIMIT_REACHED = 3,
	/** The device is not available. */
	MSPTI_ERROR_DEVICE_OFFLINE = 4,
	/** The external correlation stack is empty. */
	MSPTI_ERROR_QUEUE_EMPTY = 5,
	/** The kind needs the library to be loaded with LD_PRELOAD. */
	MSPTI_ERROR_WITHOUT_LD_PRELOAD = 6,
	/** Internal error. */
	MSPTI_ERROR_INNER = 999,
	MSPTI_ERROR_FORCE_INT = 0x7fffffff
} msptiResult;

#ifdef __cplusplus
}
#endif

#endif /* MSPTI_RESULT_H */

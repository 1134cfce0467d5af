/**
 * @file mspti_callback.h
 * @brief msPTI callback API: synchronous callbacks around runtime and HCCL calls.
 */
#ifndef MSPTI_CALLBACK_H
#define MSPTI_CALLBACK_H

#include <stdint.h>

#include "mspti_result.h"
#include "mspti_cbid.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Callback domains.
 */
typedef enum {
	MSPTI_CB_DOMAIN_INVALID = 0,
	MSPTI_CB_DOMAIN_RUNTIME = 1,	/**< ids: msptiCallbackIdRuntime */
	MSPTI_CB_DOMAIN_HCCL = 2,	/**< ids: msptiCallbackIdHccl */
	MSPTI_CB_DOMAIN_SIZE = 3,
	MSPTI_CB_DOMAIN_FORCE_INT = 0x7fffffff
} msptiCallbackDomain;

/** @brief A callback id within its domain. */
typedef uint32_t msptiCallbackId;

/**
 * @brief Which side of the call a callback runs on.
 */
typedef enum {
	MSPTI_API_ENTER = 0,	/**< before the real call */
	MSPTI_API_EXIT = 1,	/**< after the real call */
	MSPTI_API_CBSITE_FORCE_INT = 0x7fffffff
} msptiApiCallbackSite;

/**
 * @brief What a callback is told about the call.  Valid only during the callback.
 */
typedef struct {
	msptiApiCallbackSite callbackSite;	/**< ENTER or EXIT */
	const char *functionName;		/**< e.g. "aclrtLaunchKernel" */
	const void *functionParams;		/**< pointer to a struct of the call's arguments */
	const void *functionReturnValue;	/**< pointer to the return value (EXIT only, else NULL) */
	const char *symbolName;			/**< kernel name for launches, else NULL */
	uint64_t correlationId;			/**< as in the activity records */
	uint64_t reserved1;			/**< zero */
	uint64_t reserved2;			/**< zero */
	uint64_t *correlationData;		/**< one slot shared by ENTER and EXIT of a call */
} msptiCallbackData;

/** @brief A subscriber's callback. */
typedef void (*msptiCallbackFunc)(void *userdata, msptiCallbackDomain domain,
    msptiCallbackId cbid, const msptiCallbackData *cbdata);

/** @brief Opaque subscriber handle. */
typedef struct msptiSubscriber_st *msptiSubscriberHandle;

/**
 * @brief Creates the (only) subscriber.  NULL subscriber → INVALID_PARAMETER;
 * a second subscriber → MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.  callback may be NULL.
 */
MSPTI_API msptiResult msptiSubscribe(msptiSubscriberHandle *subscriber,
    msptiCallbackFunc callback, void *userdata);

/** @brief Removes the subscriber and disables all its callbacks. */
MSPTI_API msptiResult msptiUnsubscribe(msptiSubscriberHandle subscriber);

/** @brief Enables (enable != 0) or disables one callback id of a domain. */
MSPTI_API msptiResult msptiEnableCallback(uint32_t enable,
    msptiSubscriberHandle subscriber, msptiCallbackDomain domain,
    msptiCallbackId cbid);

/** @brief Enables or disables every callback id of a domain. */
MSPTI_API msptiResult msptiEnableDomain(uint32_t enable,
    msptiSubscriberHandle subscriber, msptiCallbackDomain domain);

#ifdef __cplusplus
}
#endif

#endif /* MSPTI_CALLBACK_H */

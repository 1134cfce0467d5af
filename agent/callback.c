/*
 * msPTI callback API: one subscriber, a bit mask of enabled ids per
 * domain (one load to test on the call path), callbacks run synchronously
 * on the calling thread.  sub_mtx serialises Subscribe/Unsubscribe/Enable*.
 */
#include "config.h"

#include <pthread.h>

#include "api.h"

struct msptiSubscriber_st {
	msptiCallbackFunc	 fn;
	void			*userdata;
};

API_HOT _Atomic uint64_t callback_masks[MSPTI_CB_DOMAIN_SIZE];

static struct msptiSubscriber_st the_subscriber;
static struct msptiSubscriber_st *_Atomic subscriber;
static _Atomic(msptiCallbackFunc) sub_fn;
static void *_Atomic sub_userdata;
static pthread_mutex_t sub_mtx = PTHREAD_MUTEX_INITIALIZER;

static const uint32_t domain_size[MSPTI_CB_DOMAIN_SIZE] = {
	[MSPTI_CB_DOMAIN_RUNTIME] = MSPTI_CBID_RUNTIME_SIZE,
	[MSPTI_CB_DOMAIN_HCCL] = MSPTI_CBID_HCCL_SIZE,
};

void
callback_invoke(msptiCallbackDomain d, msptiCallbackId cbid,
    const msptiCallbackData *data)
{
	msptiCallbackFunc fn = atomic_load_explicit(&sub_fn,
	    memory_order_acquire);

	if (fn != NULL)
		fn(atomic_load_explicit(&sub_userdata, memory_order_relaxed),
		    d, cbid, data);
}

MSPTI_API msptiResult
msptiSubscribe(msptiSubscriberHandle *out, msptiCallbackFunc fn,
    void *userdata)
{
	if (out == NULL)
		return MSPTI_ERROR_INVALID_PARAMETER;
	if (!api_interposed("aclrtLaunchKernel"))
		return MSPTI_ERROR_WITHOUT_LD_PRELOAD;
	pthread_mutex_lock(&sub_mtx);
	if (atomic_load(&subscriber) != NULL) {
		pthread_mutex_unlock(&sub_mtx);
		return MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	the_subscriber.fn = fn;
	the_subscriber.userdata = userdata;
	atomic_store(&sub_userdata, userdata);
	atomic_store(&sub_fn, fn);
	atomic_store(&subscriber, &the_subscriber);
	pthread_mutex_unlock(&sub_mtx);
	*out = &the_subscriber;
	return MSPTI_SUCCESS;
}

MSPTI_API msptiResult
msptiUnsubscribe(msptiSubscriberHandle s)
{
	int d;

	pthread_mutex_lock(&sub_mtx);
	if (s == NULL || s != atomic_load(&subscriber)) {
		pthread_mutex_unlock(&sub_mtx);
		return MSPTI_ERROR_INVALID_PARAMETER;
	}
	for (d = 0; d < MSPTI_CB_DOMAIN_SIZE; d++)
		atomic_store(&callback_masks[d], 0);
	atomic_store(&sub_fn, NULL);
	atomic_store(&subscriber, NULL);
	pthread_mutex_unlock(&sub_mtx);
	return MSPTI_SUCCESS;
}

static bool
callback_domain_valid(msptiCallbackDomain d)
{
	return d > MSPTI_CB_DOMAIN_INVALID && d < MSPTI_CB_DOMAIN_SIZE;
}

MSPTI_API msptiResult
msptiEnableCallback(uint32_t enable, msptiSubscriberHandle s,
    msptiCallbackDomain d, msptiCallbackId cbid)
{
	msptiResult rc = MSPTI_SUCCESS;

	if (!callback_domain_valid(d) || cbid == 0 || cbid >= domain_size[d])
		return MSPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&sub_mtx);
	if (s == NULL || s != atomic_load(&subscriber))
		rc = MSPTI_ERROR_INVALID_PARAMETER;
	else if (enable)
		atomic_fetch_or(&callback_masks[d], (uint64_t)1 << cbid);
	else
		atomic_fetch_and(&callback_masks[d], ~((uint64_t)1 << cbid));
	pthread_mutex_unlock(&sub_mtx);
	return rc;
}

MSPTI_API msptiResult
msptiEnableDomain(uint32_t enable, msptiSubscriberHandle s,
    msptiCallbackDomain d)
{
	msptiResult rc = MSPTI_SUCCESS;
	uint64_t all;

	if (!callback_domain_valid(d))
		return MSPTI_ERROR_INVALID_PARAMETER;
	/* Every id of the domain but INVALID (bit 0). */
	all = (((uint64_t)1 << domain_size[d]) - 1) & ~(uint64_t)1;
	pthread_mutex_lock(&sub_mtx);
	if (s == NULL || s != atomic_load(&subscriber))
		rc = MSPTI_ERROR_INVALID_PARAMETER;
	else
		atomic_store(&callback_masks[d], enable ? all : 0);
	pthread_mutex_unlock(&sub_mtx);
	return rc;
}

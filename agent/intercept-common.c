/*
 * What every interposer does around the real call: a correlation id, the
 * ENTER/EXIT callbacks, and the EXTERNAL_CORRELATION and API records.  The
 * fast path (nothing wanted) is two relaxed loads in icall_enter.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acl/acl.h>

#include "api.h"
#include "agent.h"

#define API_KINDS	((1u << MSPTI_ACTIVITY_KIND_API) | \
	(1u << MSPTI_ACTIVITY_KIND_ACL_API) | \
	(1u << MSPTI_ACTIVITY_KIND_NODE_API) | \
	(1u << MSPTI_ACTIVITY_KIND_RUNTIME_API) | \
	(1u << MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION))

static API_TLS int32_t tls_device = -1;
API_TLS uint64_t icall_open_corr;

/* MSPTI_TEST_CALL_EXIT_DELAY_US (tests): each call sleeps this long
 * between its work records and its API record, where a stop can land. */
static API_HOT _Atomic int icall_exit_delay_us = -1;

static void
icall_test_delay(void)
{
	char v[16];
	int us = atomic_load_explicit(&icall_exit_delay_us,
	    memory_order_relaxed);

	if (us < 0) {
		us = env_get("MSPTI_TEST_CALL_EXIT_DELAY_US", v, sizeof(v)) &&
		    atoi(v) > 0 && atoi(v) < 1000000 ? atoi(v) : 0;
		atomic_store_explicit(&icall_exit_delay_us, us,
		    memory_order_relaxed);
	}
	if (us > 0)
		usleep((useconds_t)us);
}

void
icall_set_current_device(int32_t dev)
{
	tls_device = dev;
	if (dev >= 0)
		devtime_note_device((uint32_t)dev);
}

uint32_t
icall_current_device(void)
{
	static _Atomic(void *) real;
	aclError (*get)(int32_t *);
	int32_t dev = -1;

	if (tls_device >= 0)
		return (uint32_t)tls_device;
	get = (aclError (*)(int32_t *))api_real(&real, "aclrtGetDevice");
	if (get != NULL && get(&dev) == ACL_SUCCESS && dev >= 0) {
		icall_set_current_device(dev);
		return (uint32_t)dev;
	}
	return MSPTI_INVALID_DEVICE_ID;
}

uint32_t
icall_stream_device(void *stream)
{
	static _Atomic(void *) helper;
	aclError (*get)(void *, int32_t *);
	int32_t dev = -1;

	get = (aclError (*)(void *, int32_t *))api_optional(&helper,
	    "npusimStreamGetDevice");
	if (stream != NULL && get != NULL && get(stream, &dev) == ACL_SUCCESS &&
	    dev >= 0) {
		devtime_note_device((uint32_t)dev);
		return (uint32_t)dev;
	}
	return icall_current_device();
}

void
icall_pending(struct pending *p, const struct icall *c, uint32_t kind,
    void *stream)
{
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->device = PENDING_DEV_UNSET;
	p->handle = stream;
	p->corr = c->corr;
	p->start = c->start;
	p->end = c->end;
	p->in_call = c->devcall;
}

msptiActivityMemcpyKind
icall_memcpy_kind(uint32_t k)
{
	switch (k) {
	case ACL_MEMCPY_HOST_TO_HOST:	return MSPTI_ACTIVITY_MEMCPY_KIND_HTOH;
	case ACL_MEMCPY_HOST_TO_DEVICE:	return MSPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	case ACL_MEMCPY_DEVICE_TO_HOST:	return MSPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	case ACL_MEMCPY_DEVICE_TO_DEVICE: return MSPTI_ACTIVITY_MEMCPY_KIND_DTOD;
	case ACL_MEMCPY_DEFAULT:	return MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT;
	}
	return MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
}

/* The API kind of an entry point's layer (api.h), from its name. */
static uint32_t
icall_layer_kind(const char *name)
{
	if (strncmp(name, "acl", 3) == 0)
		return MSPTI_ACTIVITY_KIND_ACL_API;
	if (strncmp(name, "Hccl", 4) == 0)
		return MSPTI_ACTIVITY_KIND_NODE_API;
	if (strncmp(name, "rt", 2) == 0)
		return MSPTI_ACTIVITY_KIND_RUNTIME_API;
	return 0;
}

bool
icall_enter(struct icall *c, msptiCallbackDomain d, msptiCallbackId cbid,
    const char *name, const void *params, const char *symbol)
{
	uint32_t w = api_kinds_wanted();
	bool cb = callback_wanted(d, cbid);
	msptiCallbackData data;

	if (API_LIKELY(w == 0 && !cb)) {
		/* Under msptictl run, the first call waits for the config. */
		if (API_LIKELY(!atomic_load_explicit(&gate_closed,
		    memory_order_relaxed)))
			return false;
		gate_wait();
		w = api_kinds_wanted();
		cb = callback_wanted(d, cbid);
		if (w == 0 && !cb)
			return false;
	}
	c->wanted = w;
	c->cb = cb;
	c->domain = d;
	c->cbid = cbid;
	/* Read the name only when a layer kind is wanted: it is a line of
	 * its own to a call made with cold caches. */
	c->api_kind_extra = (w & API_LAYER_KINDS) ? icall_layer_kind(name) : 0;
	c->name = name;
	c->params = params;
	c->symbol = symbol;
	c->corr = activity_next_correlation();
	c->cbslot = 0;
	c->end = 0;
	if (cb) {
		memset(&data, 0, sizeof(data));
		data.callbackSite = MSPTI_API_ENTER;
		data.functionName = name;
		data.functionParams = params;
		data.symbolName = symbol;
		data.correlationId = c->corr;
		data.correlationData = &c->cbslot;
		callback_invoke(d, cbid, &data);
	}
	/* The call's device record may be read before it queues its
	 * pending entry: the in-process reader waits for the end of the
	 * call.  Only that reader: msptid joins a session's launches. */
	c->devcall = (api_kinds_api() & API_DEVICE_KINDS) != 0 &&
	    devtime_call_begin();
	c->outer_corr = icall_open_corr;
	icall_open_corr = c->corr;
	c->start = api_now();
	return true;
}

void
icall_exit(struct icall *c, const void *ret)
{
	msptiCallbackData data;
	msptiActivityApi r;
	uint32_t api, sess, extra;

	if (c->end == 0)
		icall_done(c);
	/* Every interposer queued its pending entries before this. */
	if (c->devcall) {
		c->devcall = false;
		devtime_call_end();
	}
	if (c->cb) {
		memset(&data, 0, sizeof(data));
		data.callbackSite = MSPTI_API_EXIT;
		data.functionName = c->name;
		data.functionParams = c->params;
		data.functionReturnValue = ret;
		data.symbolName = c->symbol;
		data.correlationId = c->corr;
		data.correlationData = &c->cbslot;
		callback_invoke(c->domain, c->cbid, &data);
	}
	if ((c->wanted & API_KINDS) == 0)
		goto out;
	if (API_UNLIKELY(atomic_load_explicit(&icall_exit_delay_us,
	    memory_order_relaxed) != 0))
		icall_test_delay();
	if (c->wanted & (1u << MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION))
		activity_emit_external(c->corr);
	/* A daemon session's API record goes straight into its ring (with
	 * the call's launch); the msPTI API's is an msptiActivityApi. */
	api = c->wanted & api_kinds_api();
	sess = c->wanted & api_kinds_session();
	extra = c->api_kind_extra != 0 ? 1u << c->api_kind_extra : 0;
	if (sess & (1u << MSPTI_ACTIVITY_KIND_API))
		session_api(c->start, c->end, c->corr, c->name);
	if (((api & (1u << MSPTI_ACTIVITY_KIND_API)) | ((api | sess) & extra))
	    == 0)
		goto out;
	memset(&r, 0, sizeof(r));
	r.kind = MSPTI_ACTIVITY_KIND_API;
	r.start = c->start;
	r.end = c->end;
	r.pt.processId = api_pid();
	r.pt.threadId = api_tid();
	r.correlationId = c->corr;
	r.name = c->name;
	if (api & (1u << MSPTI_ACTIVITY_KIND_API))
		activity_emit_api(&r, sizeof(r));
	if ((api | sess) & extra) {
		r.kind = (msptiActivityKind)c->api_kind_extra;
		activity_emit(&r, sizeof(r));
	}
out:
	/* What the API record did not take goes now (session.c). */
	session_call_end(c->corr);
	icall_open_corr = c->outer_corr;
}

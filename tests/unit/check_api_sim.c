/*
 * msPTI records against what libnpusim ran: kernels (names, types,
 * durations against the model, stream ids, 1:N correlation to the launch),
 * copies, memsets, memory, callbacks, external correlation and device
 * markers.  Linked with libmspti ahead of libnpusim, so our interposers
 * win exactly as with LD_PRELOAD.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/mman.h>
#include <sys/wait.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>
#include <runtime/rt.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"
#include "api-collect.h"
#include "sim-prefix.h"

/* Records of one kind, in delivery order; *n gets how many. */
static msptiActivity **
records(msptiActivityKind kind, size_t *n)
{
	static msptiActivity *list[4096];
	msptiActivity *r = NULL;

	*n = 0;
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == kind && *n < 4096)
			list[(*n)++] = r;
	return list;
}

static msptiActivityApi *
api_by_corr(uint64_t corr)
{
	msptiActivity *r = NULL;

	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_API &&
		    ((msptiActivityApi *)r)->correlationId == corr)
			return (msptiActivityApi *)r;
	return NULL;
}

static aclrtStream stream;
static int32_t stream_id;

static uint64_t
now_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
setup(void)
{
	sim_prefix_set("chk");
	ck_assert_int_eq(api_collect_register(64 * 1024),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&stream), ACL_SUCCESS);
	ck_assert_int_eq(aclrtStreamGetId(stream, &stream_id), ACL_SUCCESS);
}

static void
teardown(void)
{
	aclrtDestroyStream(stream);
	aclrtResetDevice(0);
	aclFinalize();
	sim_device_unlink(0);
}

START_TEST(test_kernels)
{
	aclrtFuncHandle mm, relu;
	msptiActivity **k;
	size_t n, i, nmm = 0, nrelu = 0;
	uint64_t t0, t1;

	ck_assert_int_eq(npusimKernelRegister("matmul", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 2000000, &mm), ACL_SUCCESS);
	ck_assert_int_eq(npusimKernelRegister("relu", NPUSIM_KERNEL_AI_VECTOR,
	    0, 0, 500000, &relu), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	/* CLOCK_REALTIME itself, not time(): glibc's time() reads the
	 * coarse clock, up to a tick behind, so a whole second taken from
	 * it just after a second began is before work that ended in it
	 * (seen: a kernel end 331 us past the bound).  2 us: the clock
	 * sync tolerance, as below (test_kernel_clock). */
	t0 = now_realtime_ns() - 2000;
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(aclrtLaunchKernel(mm, 8, NULL, 0, stream),
		    ACL_SUCCESS);
		ck_assert_int_eq(aclrtLaunchKernel(relu, 8, NULL, 0, stream),
		    ACL_SUCCESS);
	}
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	t1 = now_realtime_ns() + 2000;
	msptiActivityFlushAll(1);
	k = records(MSPTI_ACTIVITY_KIND_KERNEL, &n);
	ck_assert_uint_eq(n, 10);
	for (i = 0; i < n; i++) {
		msptiActivityKernel *r = (msptiActivityKernel *)k[i];
		msptiActivityApi *a = api_by_corr(r->correlationId);
		uint64_t dur = r->end - r->start, want;

		ck_assert_ptr_nonnull(a);
		ck_assert_str_eq(a->name, "aclrtLaunchKernel");
		ck_assert_uint_eq(r->ds.deviceId, 0);
		ck_assert_uint_eq(r->ds.streamId, (uint32_t)stream_id);
		ck_assert_uint_ge(r->start, t0);
		ck_assert_uint_le(r->end, t1);
		/* Starts after its launch began (the device clock's sync
		 * and the agent's own clock within 2 us). */
		ck_assert_uint_ge(r->start + 2000, a->start);
		if (strcmp(r->name, "matmul") == 0) {
			nmm++;
			want = 2000000;
			ck_assert_str_eq(r->type, "KERNEL_AICORE");
		} else {
			ck_assert_str_eq(r->name, "relu");
			nrelu++;
			want = 500000;
			ck_assert_str_eq(r->type, "KERNEL_AIVEC");
		}
		/* Modelled duration (plus launch overhead), loose. */
		ck_assert_msg(dur >= want * 9 / 10 && dur <= want * 2,
		    "%s took %llu ns, model %llu", r->name,
		    (unsigned long long)dur, (unsigned long long)want);
		if (i > 0)	/* in-order stream */
			ck_assert_uint_ge(r->start,
			    ((msptiActivityKernel *)k[i - 1])->end - 1000);
	}
	ck_assert_uint_eq(nmm, 5);
	ck_assert_uint_eq(nrelu, 5);
	/* 10 launches + create/sync etc.; launch APIs hold distinct ids. */
	k = records(MSPTI_ACTIVITY_KIND_API, &n);
	ck_assert_uint_ge(n, 11);
	for (i = 1; i < n; i++)
		ck_assert_uint_gt(((msptiActivityApi *)k[i])->correlationId,
		    ((msptiActivityApi *)k[i - 1])->correlationId);
}
END_TEST

/*
 * Device times on the host clock: every kernel lies between the
 * CLOCK_REALTIME read just before its launch and the one just after the
 * synchronize that waited for it, within 1 us, over 300 ms of launches
 * (the device runs 25 ppm fast: its clock pairs must give the drift);
 * in the second run with every 4th clock pair taken as if its thread was
 * preempted for 2 ms (NPUSIM_TEST_CLOCK_PREEMPT: its host time 1 ms off,
 * its bracket saying so).  Its own fixture: the hook is read at the
 * simulator's first call.
 */
START_TEST(test_kernel_clock)
{
	enum { N = 150 };
	static uint64_t ta[N], tb[N];
	struct timespec gap = { 0, 2000000 };
	aclrtFuncHandle k;
	msptiActivity **r;
	int64_t worst = INT64_MAX;
	size_t n, i, at = 0;

	if (_i == 1)
		setenv("NPUSIM_TEST_CLOCK_PREEMPT", "4", 1);
	setup();
	ck_assert_int_eq(npusimKernelRegister("k20", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 20000, &k), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	for (i = 0; i < N; i++) {
		ta[i] = now_realtime_ns();
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, stream),
		    ACL_SUCCESS);
		ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
		tb[i] = now_realtime_ns();
		nanosleep(&gap, NULL);
	}
	msptiActivityFlushAll(1);
	r = records(MSPTI_ACTIVITY_KIND_KERNEL, &n);
	ck_assert_uint_eq(n, N);
	for (i = 0; i < n; i++) {
		msptiActivityKernel *kr = (msptiActivityKernel *)r[i];
		int64_t lo = (int64_t)(kr->start - ta[i]);
		int64_t hi = (int64_t)(tb[i] - kr->end);

		if (lo < worst || hi < worst) {
			worst = lo < hi ? lo : hi;
			at = i;
		}
	}
	fprintf(stderr, "kernel clock (preempt %s): tightest margin %lld ns, "
	    "kernel %zu\n", _i ? "every 4th pair" : "none", (long long)worst,
	    at);
	ck_assert_msg(worst >= -1000, "kernel %zu lies %lld ns outside its "
	    "launch..synchronize window", at, (long long)-worst);
	teardown();
}
END_TEST

/* In a forked child the device reader is gone: FlushAll must not wait
 * for it, and device records work again there. */
START_TEST(test_fork_child)
{
	aclrtFuncHandle k;
	struct timespec a, b;
	pid_t pid;
	int status;

	ck_assert_int_eq(npusimKernelRegister("fk", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 100000, &k), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclrtLaunchKernel(k, 8, NULL, 0, stream),
	    ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	msptiActivityFlushAll(1);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		alarm(10);
		clock_gettime(CLOCK_MONOTONIC, &a);
		msptiActivityFlushAll(1);
		msptiActivityFlushAll(1);
		clock_gettime(CLOCK_MONOTONIC, &b);
		_exit((b.tv_sec - a.tv_sec) * 1000 +
		    (b.tv_nsec - a.tv_nsec) / 1000000 < 500 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the child's FlushAll waited for the parent's reader thread");
}
END_TEST

START_TEST(test_memory)
{
	msptiActivity **r;
	void *dev = NULL;
	static char host[1 << 20];
	size_t n, i;

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMORY),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMCPY),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMSET),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclrtMalloc(&dev, sizeof(host),
	    ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemcpy(dev, sizeof(host), host, sizeof(host),
	    ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemcpyAsync(host, sizeof(host), dev, 4096,
	    ACL_MEMCPY_DEVICE_TO_HOST, stream), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemset(dev, sizeof(host), 7, 1000), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemsetAsync(dev, sizeof(host), 9, 2000, stream),
	    ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	ck_assert_int_eq(aclrtFree(dev), ACL_SUCCESS);
	msptiActivityFlushAll(1);

	r = records(MSPTI_ACTIVITY_KIND_MEMORY, &n);
	ck_assert_uint_eq(n, 2);
	{
		msptiActivityMemory *a = (msptiActivityMemory *)r[0],
		    *f = (msptiActivityMemory *)r[1];

		ck_assert_int_eq(a->memoryOperationType,
		    MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
		ck_assert_int_eq(f->memoryOperationType,
		    MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
		ck_assert_int_eq(a->memoryKind, MSPTI_ACTIVITY_MEMORY_DEVICE);
		ck_assert_uint_eq(a->address, (uint64_t)(uintptr_t)dev);
		ck_assert_uint_eq(f->address, (uint64_t)(uintptr_t)dev);
		ck_assert_uint_eq(a->bytes, sizeof(host));
		ck_assert_uint_eq(f->bytes, sizeof(host));
		ck_assert_uint_eq(a->processId, (uint32_t)getpid());
		ck_assert_uint_eq(a->deviceId, 0);
		ck_assert_str_eq(api_by_corr(a->correlationId)->name,
		    "aclrtMalloc");
		ck_assert_str_eq(api_by_corr(f->correlationId)->name,
		    "aclrtFree");
	}
	r = records(MSPTI_ACTIVITY_KIND_MEMCPY, &n);
	ck_assert_uint_eq(n, 2);
	for (i = 0; i < n; i++) {
		msptiActivityMemcpy *c = (msptiActivityMemcpy *)r[i];
		msptiActivityApi *a = api_by_corr(c->correlationId);

		ck_assert_ptr_nonnull(a);
		ck_assert_uint_le(c->start, c->end);
		if (c->isAsync) {
			ck_assert_str_eq(a->name, "aclrtMemcpyAsync");
			ck_assert_int_eq(c->copyKind,
			    MSPTI_ACTIVITY_MEMCPY_KIND_DTOH);
			ck_assert_uint_eq(c->bytes, 4096);
			ck_assert_uint_eq(c->streamId, (uint32_t)stream_id);
		} else {
			ck_assert_str_eq(a->name, "aclrtMemcpy");
			ck_assert_int_eq(c->copyKind,
			    MSPTI_ACTIVITY_MEMCPY_KIND_HTOD);
			ck_assert_uint_eq(c->bytes, sizeof(host));
		}
	}
	r = records(MSPTI_ACTIVITY_KIND_MEMSET, &n);
	ck_assert_uint_eq(n, 2);
	for (i = 0; i < n; i++) {
		msptiActivityMemset *s = (msptiActivityMemset *)r[i];

		ck_assert_ptr_nonnull(api_by_corr(s->correlationId));
		if (s->isAsync) {
			ck_assert_uint_eq(s->value, 9);
			ck_assert_uint_eq(s->bytes, 2000);
		} else {
			ck_assert_uint_eq(s->value, 7);
			ck_assert_uint_eq(s->bytes, 1000);
		}
	}
}
END_TEST

struct cbstate {
	int		 enter, exit;
	uint64_t	 corr;
	bool		 ok;
	char		 why[128];
};

static void
launch_cb(void *ud, msptiCallbackDomain d, msptiCallbackId id,
    const msptiCallbackData *cb)
{
	struct cbstate *st = ud;

#define FAIL(...) do { if (st->ok) snprintf(st->why, sizeof(st->why), __VA_ARGS__); st->ok = false; return; } while (0)
	if (d != MSPTI_CB_DOMAIN_RUNTIME || id != MSPTI_CBID_RUNTIME_LAUNCH)
		FAIL("domain %d id %u", d, id);
	if (cb->functionName == NULL ||
	    strcmp(cb->functionName, "aclrtLaunchKernel") != 0)
		FAIL("functionName");
	if (cb->symbolName == NULL || strcmp(cb->symbolName, "conv") != 0)
		FAIL("symbolName");
	if (cb->functionParams == NULL || cb->correlationData == NULL ||
	    cb->reserved1 != 0 || cb->reserved2 != 0 || cb->correlationId == 0)
		FAIL("fields");
	if (cb->callbackSite == MSPTI_API_ENTER) {
		if (cb->functionReturnValue != NULL || st->enter != st->exit)
			FAIL("enter");
		st->enter++;
		st->corr = cb->correlationId;
		*cb->correlationData = 0xabc0000 + (uint64_t)st->enter;
	} else {
		if (cb->functionReturnValue == NULL ||
		    *(const aclError *)cb->functionReturnValue != ACL_SUCCESS)
			FAIL("return value");
		if (*cb->correlationData != 0xabc0000 + (uint64_t)st->enter)
			FAIL("correlationData not shared");
		if (cb->correlationId != st->corr)
			FAIL("correlationId differs");
		st->exit++;
	}
}

START_TEST(test_callbacks)
{
	struct cbstate st = { .ok = true };
	msptiSubscriberHandle s;
	aclrtFuncHandle conv;
	int i;

	ck_assert_int_eq(npusimKernelRegister("conv", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 10000, &conv), ACL_SUCCESS);
	ck_assert_int_eq(msptiSubscribe(&s, launch_cb, &st), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiEnableCallback(1, s, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_LAUNCH), MSPTI_SUCCESS);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(aclrtLaunchKernel(conv, 1, NULL, 0, stream),
		    ACL_SUCCESS);
	aclrtSynchronizeStream(stream);	/* no callback: not enabled */
	ck_assert_msg(st.ok, "%s", st.why);
	ck_assert_int_eq(st.enter, 3);
	ck_assert_int_eq(st.exit, 3);
	ck_assert_int_eq(msptiEnableCallback(0, s, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_LAUNCH), MSPTI_SUCCESS);
	aclrtLaunchKernel(conv, 1, NULL, 0, stream);
	ck_assert_int_eq(st.enter, 3);
	ck_assert_int_eq(msptiEnableDomain(1, s, MSPTI_CB_DOMAIN_RUNTIME),
	    MSPTI_SUCCESS);
	aclrtLaunchKernel(conv, 1, NULL, 0, stream);
	ck_assert_int_eq(st.enter, 4);
	ck_assert_int_eq(msptiUnsubscribe(s), MSPTI_SUCCESS);
	aclrtLaunchKernel(conv, 1, NULL, 0, stream);
	ck_assert_int_eq(st.enter, 4);
	aclrtSynchronizeStream(stream);
}
END_TEST

START_TEST(test_external)
{
	aclrtFuncHandle k;
	msptiActivity **r;
	size_t n, i, nk;
	uint64_t v;

	ck_assert_int_eq(npusimKernelRegister("ext", NPUSIM_KERNEL_AI_CPU,
	    0, 0, 10000, &k), ACL_SUCCESS);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_API);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL);
	msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 100);
	msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 200);
	aclrtLaunchKernel(k, 1, NULL, 0, stream);
	msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &v);
	aclrtLaunchKernel(k, 1, NULL, 0, stream);
	msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v);
	aclrtLaunchKernel(k, 1, NULL, 0, stream);
	aclrtSynchronizeStream(stream);
	msptiActivityFlushAll(1);
	r = records(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, &n);
	ck_assert_uint_eq(n, 3);
	{
		msptiActivityExternalCorrelation *e0 = (void *)r[0],
		    *e1 = (void *)r[1], *e2 = (void *)r[2];

		ck_assert_int_eq(e0->externalKind,
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
		ck_assert_uint_eq(e0->externalId, 100);
		ck_assert_int_eq(e1->externalKind,
		    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
		ck_assert_uint_eq(e1->externalId, 200);
		ck_assert_uint_eq(e0->correlationId, e1->correlationId);
		ck_assert_uint_eq(e2->externalId, 100);
		ck_assert_uint_gt(e2->correlationId, e1->correlationId);
		ck_assert_str_eq(api_by_corr(e0->correlationId)->name,
		    "aclrtLaunchKernel");
		/* 1:N: the external id reaches the kernel via the launch. */
		r = records(MSPTI_ACTIVITY_KIND_KERNEL, &nk);
		ck_assert_uint_eq(nk, 3);
		for (i = 0; i < nk; i++)
			if (((msptiActivityKernel *)r[i])->correlationId ==
			    e0->correlationId)
				break;
		ck_assert_uint_lt(i, nk);
	}
}
END_TEST

START_TEST(test_device_markers)
{
	msptiActivity **r;
	mstxRangeId id;
	size_t n, i, host = 0, dev = 0;
	uint64_t mark_id = 0;

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	mstxMarkA("dev-mark", stream);
	id = mstxRangeStartA("dev-range", stream);
	ck_assert_uint_ne(id, 0);
	mstxRangeEnd(id);
	aclrtSynchronizeStream(stream);
	msptiActivityFlushAll(1);
	r = records(MSPTI_ACTIVITY_KIND_MARKER, &n);
	ck_assert_uint_eq(n, 6);
	for (i = 0; i < n; i++) {
		msptiActivityMarker *m = (msptiActivityMarker *)r[i];

		if (m->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_HOST) {
			host++;
			ck_assert_uint_eq(m->objectId.pt.processId,
			    (uint32_t)getpid());
			if (strcmp(m->name, "dev-mark") == 0) {
				mark_id = m->id;
				ck_assert_int_eq(m->flag,
			    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE);
			}
		} else {
			dev++;
			ck_assert_uint_eq(m->objectId.ds.deviceId, 0);
			ck_assert_uint_eq(m->objectId.ds.streamId,
			    (uint32_t)stream_id);
			ck_assert_ptr_nonnull(m->name);
			if (m->id == id)
				ck_assert_str_eq(m->name, "dev-range");
			else
				ck_assert_str_eq(m->name, "dev-mark");
			ck_assert(m->flag ==
			    MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE ||
			    m->flag == MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE ||
			    m->flag == MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE);
			ck_assert_str_eq(m->domain, "default");
		}
	}
	ck_assert_uint_eq(host, 3);
	ck_assert_uint_eq(dev, 3);
	ck_assert_uint_ne(mark_id, 0);
}
END_TEST

/* The record of kind with correlation id corr (msptiActivityApi
 * layout), NULL if none. */
static msptiActivityApi *
api_kind_by_corr(msptiActivityKind kind, uint64_t corr)
{
	msptiActivity *r = NULL;

	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == kind &&
		    ((msptiActivityApi *)r)->correlationId == corr)
			return (msptiActivityApi *)r;
	return NULL;
}

/* Every record of an API kind names an entry point starting with prefix;
 * returns how many there are. */
static size_t
api_kind_all(msptiActivityKind kind, const char *prefix)
{
	msptiActivity **r;
	size_t n, i;

	r = records(kind, &n);
	for (i = 0; i < n; i++) {
		const char *name = ((msptiActivityApi *)r[i])->name;

		ck_assert_ptr_nonnull(name);
		ck_assert_msg(strncmp(name, prefix, strlen(prefix)) == 0,
		    "kind %d: %s", (int)kind, name);
	}
	return n;
}

/*
 * ACL_API covers the acl* entry points and RUNTIME_API the rt* ones the
 * application calls: the agent's own rtGetTaskIdAndStreamID (for the
 * kernel join) makes no record.
 */
START_TEST(test_api_layers)
{
	aclrtFuncHandle k;
	msptiActivity **r;
	uint32_t task, sid;
	size_t n;

	ck_assert_int_eq(npusimKernelRegister("layer", NPUSIM_KERNEL_AI_CORE,
	    0, 0, 100000, &k), ACL_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_ACL_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_RUNTIME_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, stream), ACL_SUCCESS);
	ck_assert_int_eq(rtGetTaskIdAndStreamID(&task, &sid), 0);
	ck_assert_uint_eq(sid, (uint32_t)stream_id);
	ck_assert_int_eq(aclrtSynchronizeStream(stream), ACL_SUCCESS);
	msptiActivityFlushAll(1);

	ck_assert_uint_eq(api_kind_all(MSPTI_ACTIVITY_KIND_ACL_API, "aclrt"),
	    2);
	ck_assert_uint_eq(api_kind_all(MSPTI_ACTIVITY_KIND_RUNTIME_API,
	    "rtGetTaskIdAndStreamID"), 1);
	records(MSPTI_ACTIVITY_KIND_API, &n);
	ck_assert_uint_eq(n, 0);
	records(MSPTI_ACTIVITY_KIND_NODE_API, &n);
	ck_assert_uint_eq(n, 0);
	r = records(MSPTI_ACTIVITY_KIND_KERNEL, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(api_kind_by_corr(MSPTI_ACTIVITY_KIND_ACL_API,
	    ((msptiActivityKernel *)r[0])->correlationId)->name,
	    "aclrtLaunchKernel");
}
END_TEST

/* Pinned host memory gives MEMORY records too, of kind UNKNOWN (msPTI
 * has no host kind) and no device. */
START_TEST(test_host_memory)
{
	msptiActivityMemory *a, *f;
	msptiActivity **r;
	void *h = NULL;
	size_t n;

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MEMORY),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_API),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(aclrtMallocHost(&h, 4096), ACL_SUCCESS);
	ck_assert_int_eq(aclrtFreeHost(h), ACL_SUCCESS);
	msptiActivityFlushAll(1);
	r = records(MSPTI_ACTIVITY_KIND_MEMORY, &n);
	ck_assert_uint_eq(n, 2);
	a = (msptiActivityMemory *)r[0];
	f = (msptiActivityMemory *)r[1];
	ck_assert_int_eq(a->memoryOperationType,
	    MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
	ck_assert_int_eq(f->memoryOperationType,
	    MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
	ck_assert_int_eq(a->memoryKind, MSPTI_ACTIVITY_MEMORY_UNKNOWN);
	ck_assert_int_eq(f->memoryKind, MSPTI_ACTIVITY_MEMORY_UNKNOWN);
	ck_assert_uint_eq(a->address, (uint64_t)(uintptr_t)h);
	ck_assert_uint_eq(f->address, (uint64_t)(uintptr_t)h);
	ck_assert_uint_eq(a->bytes, 4096);
	ck_assert_uint_eq(f->bytes, 4096);
	ck_assert_uint_eq(a->deviceId, MSPTI_INVALID_DEVICE_ID);
	ck_assert_uint_eq(a->processId, (uint32_t)getpid());
	ck_assert_str_eq(api_by_corr(a->correlationId)->name,
	    "aclrtMallocHost");
	ck_assert_str_eq(api_by_corr(f->correlationId)->name, "aclrtFreeHost");
}
END_TEST

#define RANK_CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "rank %u: %s:%d: %s\n", rank, __FILE__,	\
		    __LINE__, #cond);					\
		return 1;						\
	}								\
} while (0)

/*
 * One rank of test_hccl_batch: a BatchSendRecv of four items with the
 * other rank, with only the layer API kinds and the communication kinds
 * enabled.
 */
static int
hccl_rank(uint32_t rank, const HcclRootInfo *root)
{
	HcclSendRecvItem it[4];
	msptiActivityCommunication *cm;
	msptiActivityHccl *hc;
	msptiActivityApi *call = NULL;
	msptiActivity **r;
	aclrtStream s;
	HcclComm comm;
	void *buf[4];
	size_t n, i;
	uint32_t peer = 1 - rank;

	RANK_CHECK(api_collect_register(64 * 1024) ==
	    MSPTI_SUCCESS);
	RANK_CHECK(msptiActivityEnable(MSPTI_ACTIVITY_KIND_ACL_API) == 0);
	RANK_CHECK(msptiActivityEnable(MSPTI_ACTIVITY_KIND_NODE_API) == 0);
	RANK_CHECK(msptiActivityEnable(MSPTI_ACTIVITY_KIND_COMMUNICATION) == 0);
	RANK_CHECK(msptiActivityEnable(MSPTI_ACTIVITY_KIND_HCCL) == 0);
	RANK_CHECK(aclrtSetDevice((int32_t)rank) == ACL_SUCCESS);
	RANK_CHECK(aclrtCreateStream(&s) == ACL_SUCCESS);
	for (i = 0; i < 4; i++)
		RANK_CHECK(aclrtMalloc(&buf[i], 4096, ACL_MEM_MALLOC_HUGE_FIRST) ==
		    ACL_SUCCESS);
	RANK_CHECK(HcclCommInitRootInfo(2, root, rank, &comm) == HCCL_SUCCESS);
	for (i = 0; i < 4; i++) {
		it[i].sendRecvType = (i % 2) ? HCCL_RECV : HCCL_SEND;
		it[i].buf = buf[i];
		it[i].count = i < 2 ? 1024 : 256;
		it[i].dataType = HCCL_DATA_TYPE_FP32;
		it[i].remoteRank = peer;
	}
	RANK_CHECK(HcclBatchSendRecv(it, 4, comm, s) == HCCL_SUCCESS);
	RANK_CHECK(aclrtSynchronizeStream(s) == ACL_SUCCESS);
	msptiActivityFlushAll(1);

	records(MSPTI_ACTIVITY_KIND_API, &n);
	RANK_CHECK(n == 0);
	records(MSPTI_ACTIVITY_KIND_RUNTIME_API, &n);
	RANK_CHECK(n == 0);
	r = records(MSPTI_ACTIVITY_KIND_ACL_API, &n);
	RANK_CHECK(n == 7);	/* SetDevice, CreateStream, 4 Malloc, Sync */
	for (i = 0; i < n; i++)
		RANK_CHECK(strncmp(((msptiActivityApi *)r[i])->name, "aclrt",
		    5) == 0);
	r = records(MSPTI_ACTIVITY_KIND_NODE_API, &n);
	RANK_CHECK(n == 1);
	call = (msptiActivityApi *)r[0];
	RANK_CHECK(strcmp(call->name, "HcclBatchSendRecv") == 0);
	/* One device task for the whole batch, joined to the call. */
	r = records(MSPTI_ACTIVITY_KIND_COMMUNICATION, &n);
	RANK_CHECK(n == 1);
	cm = (msptiActivityCommunication *)r[0];
	RANK_CHECK(cm->correlationId == call->correlationId);
	RANK_CHECK(strcmp(cm->name, "HcclBatchSendRecv") == 0);
	RANK_CHECK(cm->dataType == MSPTI_ACTIVITY_COMMUNICATION_FP32);
	RANK_CHECK(cm->count == 2 * 1024 + 2 * 256);
	RANK_CHECK(cm->ds.deviceId == rank);
	RANK_CHECK(strcmp(cm->algType, "P2P") == 0);
	r = records(MSPTI_ACTIVITY_KIND_HCCL, &n);
	RANK_CHECK(n == 1);
	hc = (msptiActivityHccl *)r[0];
	RANK_CHECK(strcmp(hc->name, "HcclBatchSendRecv") == 0);
	/* bytes / ns: the bytes are every item's count x 4. */
	RANK_CHECK(hc->end > hc->start);
	RANK_CHECK(hc->bandWidth > 0);
	RANK_CHECK(hc->bandWidth * (double)(hc->end - hc->start) >
	    0.99 * (2 * 1024 + 2 * 256) * 4);
	RANK_CHECK(hc->bandWidth * (double)(hc->end - hc->start) <
	    1.01 * (2 * 1024 + 2 * 256) * 4);
	HcclCommDestroy(comm);
	return 0;
}

START_TEST(test_hccl_batch)
{
	HcclRootInfo root;
	char prefix[64];
	pid_t pid[2];
	int status, i, bad = 0;

	const char *base = getenv("NPUSIM_SHM_PREFIX");

	/* Under the test wrapper's prefix, which it removes afterwards (a
	 * failed test skips teardown). */
	snprintf(prefix, sizeof(prefix), "%s-%s-%d",
	    base != NULL && *base != '\0' && strlen(base) < 32 ? base : "mspti",
	    "chk", (int)getpid());
	setenv("NPUSIM_SHM_PREFIX", prefix, 1);
	ck_assert_int_eq(HcclGetRootInfo(&root), HCCL_SUCCESS);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		ck_assert_int_ne(pid[i], -1);
		if (pid[i] == 0)
			_exit(hccl_rank((uint32_t)i, &root));
	}
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			bad = 1;
	}
	for (i = 0; i < 2; i++)
		sim_device_unlink((uint32_t)i);
	ck_assert_msg(!bad, "a rank failed (see its stderr)");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("api_sim");
	TCase *tc = tcase_create("sim");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_kernels);
	tcase_add_test(tc, test_memory);
	tcase_add_test(tc, test_fork_child);
	tcase_add_test(tc, test_callbacks);
	tcase_add_test(tc, test_external);
	tcase_add_test(tc, test_device_markers);
	tcase_add_test(tc, test_api_layers);
	tcase_add_test(tc, test_host_memory);
	suite_add_tcase(s, tc);
	tc = tcase_create("clock");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_kernel_clock, 0, 2);
	suite_add_tcase(s, tc);
	/* Ranks are forked before any device is opened. */
	tc = tcase_create("hccl");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_hccl_batch);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

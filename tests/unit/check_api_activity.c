/*
 * msPTI activity API and MSTX without a device: return codes, buffer
 * handling, flush semantics, markers, domains, external correlation and
 * a 16-thread loss test.  Linked against libmspti only.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"
#include "api-collect.h"

/* Buffers: malloc'd on request, records copied out on completion. */
static size_t buf_size = 64 * 1024;
static size_t buf_maxrec;
static bool buf_refuse;
static _Atomic int requests, completes, empty_completes;

static void
req_cb(uint8_t **buffer, size_t *size, size_t *maxrec)
{
	atomic_fetch_add(&requests, 1);
	if (buf_refuse) {
		*buffer = NULL;
		*size = 0;
		return;
	}
	*buffer = aligned_alloc(8, buf_size);
	*size = buf_size;
	*maxrec = buf_maxrec;
}

static void
done_cb(uint8_t *buffer, size_t size, size_t valid)
{
	ck_assert_uint_le(valid, size);
	api_collect_append(buffer, valid);
	free(buffer);
	/* Counted last, so a waiter that sees the count also sees the records. */
	if (valid == 0)
		atomic_fetch_add(&empty_completes, 1);
	atomic_fetch_add(&completes, 1);
}

/* Walks the collected records with GetNextRecord; returns how many of kind
 * (or all with kind 0) and the nth such one in *nth_out. */
static size_t
count_kind(msptiActivityKind kind, size_t nth, msptiActivity **nth_out)
{
	msptiActivity *r = NULL;
	size_t n = 0;
	msptiResult rc;

	while ((rc = msptiActivityGetNextRecord(got, got_len, &r)) ==
	    MSPTI_SUCCESS) {
		if (kind != 0 && r->kind != kind)
			continue;
		if (nth_out != NULL && n == nth)
			*nth_out = r;
		n++;
	}
	ck_assert_int_eq(rc, MSPTI_ERROR_MAX_LIMIT_REACHED);
	return n;
}

static void
setup(void)
{
	ck_assert_int_eq(msptiActivityRegisterCallbacks(req_cb, done_cb),
	    MSPTI_SUCCESS);
}

START_TEST(test_enable_codes)
{
	int k;

	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_INVALID),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_COUNT),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityEnable((msptiActivityKind)-1),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityDisable(MSPTI_ACTIVITY_KIND_COUNT),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityDisable(MSPTI_ACTIVITY_KIND_INVALID),
	    MSPTI_ERROR_INVALID_PARAMETER);
	for (k = 1; k < MSPTI_ACTIVITY_KIND_COUNT; k++)
		ck_assert(!msptiActivityIsEnabled((msptiActivityKind)k));
	/* Linked ahead of any runtime, so our symbols come first. */
	for (k = 1; k < MSPTI_ACTIVITY_KIND_COUNT; k++) {
		ck_assert_int_eq(msptiActivityEnable((msptiActivityKind)k),
		    MSPTI_SUCCESS);
		ck_assert(msptiActivityIsEnabled((msptiActivityKind)k));
	}
	ck_assert(!msptiActivityIsEnabled(MSPTI_ACTIVITY_KIND_INVALID));
	ck_assert(!msptiActivityIsEnabled(MSPTI_ACTIVITY_KIND_COUNT));
	for (k = 1; k < MSPTI_ACTIVITY_KIND_COUNT; k++) {
		ck_assert_int_eq(msptiActivityDisable((msptiActivityKind)k),
		    MSPTI_SUCCESS);
		ck_assert(!msptiActivityIsEnabled((msptiActivityKind)k));
	}
	ck_assert_int_eq(msptiActivityRegisterCallbacks(NULL, done_cb),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityRegisterCallbacks(req_cb, NULL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityEnableMarkerDomain(NULL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityDisableMarkerDomain(NULL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityFlushAll(0), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityFlushPeriod(0), MSPTI_SUCCESS);
}
END_TEST

START_TEST(test_get_next_record)
{
	uint8_t buf[256] __attribute__((aligned(8)));
	msptiActivityMarker m;
	msptiActivityApi a;
	msptiActivity *r = NULL;
	uint32_t bad = 0x7777;

	memset(buf, 0, sizeof(buf));
	memset(&m, 0, sizeof(m));
	memset(&a, 0, sizeof(a));
	m.kind = MSPTI_ACTIVITY_KIND_MARKER;
	a.kind = MSPTI_ACTIVITY_KIND_API;
	memcpy(buf, &m, sizeof(m));
	memcpy(buf + sizeof(m), &a, sizeof(a));
	ck_assert_int_eq(msptiActivityGetNextRecord(NULL, 10, &r),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, 10, NULL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, 0, &r),
	    MSPTI_ERROR_MAX_LIMIT_REACHED);
	r = NULL;
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, sizeof(m) + sizeof(a),
	    &r), MSPTI_SUCCESS);
	ck_assert_ptr_eq(r, (void *)buf);
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, sizeof(m) + sizeof(a),
	    &r), MSPTI_SUCCESS);
	ck_assert_ptr_eq(r, (void *)(buf + sizeof(m)));
	ck_assert_int_eq(r->kind, MSPTI_ACTIVITY_KIND_API);
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, sizeof(m) + sizeof(a),
	    &r), MSPTI_ERROR_MAX_LIMIT_REACHED);
	/* A truncated record and an unknown kind are rejected. */
	r = NULL;
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, sizeof(m) - 8, &r),
	    MSPTI_ERROR_INVALID_PARAMETER);
	memcpy(buf, &bad, sizeof(bad));
	r = NULL;
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, sizeof(buf), &r),
	    MSPTI_ERROR_INVALID_PARAMETER);
	/* A record pointer outside the buffer. */
	r = (msptiActivity *)(buf + sizeof(buf));
	ck_assert_int_eq(msptiActivityGetNextRecord(buf, sizeof(m), &r),
	    MSPTI_ERROR_INVALID_PARAMETER);
}
END_TEST

START_TEST(test_markers)
{
	msptiActivityMarker *m = NULL;
	mstxRangeId id;
	char longmsg[300];

	/* Disabled: nothing, ranges fail. */
	mstxMarkA("off", NULL);
	ck_assert_uint_eq(mstxRangeStartA("off", NULL), 0);
	setup();
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	mstxMarkA("mark-1", NULL);
	id = mstxRangeStartA("range-1", NULL);
	ck_assert_uint_ne(id, 0);
	mstxRangeEnd(id);
	mstxRangeEnd(id);	/* twice: ignored */
	mstxRangeEnd(0);	/* ignored */
	mstxMarkA(NULL, NULL);	/* invalid: dropped */
	memset(longmsg, 'x', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	mstxMarkA(longmsg, NULL);
	ck_assert_uint_eq(mstxRangeStartA(longmsg, NULL), 0);
	longmsg[254] = '\0';	/* 254 bytes: fits */
	mstxMarkA(longmsg, NULL);
	ck_assert_int_eq(got_len, 0);	/* nothing before a flush */
	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, NULL), 4);
	count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, (msptiActivity **)&m);
	ck_assert_int_eq(m->flag, MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
	ck_assert_int_eq(m->sourceKind, MSPTI_ACTIVITY_SOURCE_KIND_HOST);
	ck_assert_str_eq(m->name, "mark-1");
	ck_assert_str_eq(m->domain, "default");
	ck_assert_uint_eq(m->objectId.pt.processId, (uint32_t)getpid());
	ck_assert_uint_eq(m->objectId.pt.threadId,
	    (uint32_t)syscall(SYS_gettid));
	ck_assert_uint_ne(m->timestamp, 0);
	count_kind(MSPTI_ACTIVITY_KIND_MARKER, 1, (msptiActivity **)&m);
	ck_assert_int_eq(m->flag, MSPTI_ACTIVITY_FLAG_MARKER_START);
	ck_assert_uint_eq(m->id, id);
	ck_assert_str_eq(m->name, "range-1");
	count_kind(MSPTI_ACTIVITY_KIND_MARKER, 2, (msptiActivity **)&m);
	ck_assert_int_eq(m->flag, MSPTI_ACTIVITY_FLAG_MARKER_END);
	ck_assert_uint_eq(m->id, id);
	count_kind(MSPTI_ACTIVITY_KIND_MARKER, 3, (msptiActivity **)&m);
	ck_assert_uint_eq(strlen(m->name), 254);
	/* Ids come from one counter: mark < range. */
	{
		msptiActivityMarker *first = NULL;

		count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0,
		    (msptiActivity **)&first);
		ck_assert_uint_ge(first->id, 1);
		ck_assert_uint_lt(first->id, id);
	}
}
END_TEST

START_TEST(test_domains)
{
	mstxDomainHandle_t a, b, a2;
	msptiActivityMarker *m = NULL;
	mstxRangeId id;

	setup();
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	/* Disabled by name before it exists. */
	ck_assert_int_eq(msptiActivityDisableMarkerDomain("bwd"), MSPTI_SUCCESS);
	a = mstxDomainCreateA("fwd");
	b = mstxDomainCreateA("bwd");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_null(mstxDomainCreateA(NULL));
	a2 = mstxDomainCreateA("fwd");
	ck_assert_ptr_eq(a, a2);
	mstxDomainMarkA(a, "f1", NULL);
	mstxDomainMarkA(b, "b1", NULL);
	ck_assert_uint_eq(mstxDomainRangeStartA(b, "b-range", NULL), 0);
	id = mstxDomainRangeStartA(a, "f-range", NULL);
	ck_assert_uint_ne(id, 0);
	mstxDomainRangeEnd(a, id);
	/* Switch: fwd off, bwd on, default off. */
	ck_assert_int_eq(msptiActivityDisableMarkerDomain("fwd"), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityEnableMarkerDomain("bwd"), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityDisableMarkerDomain("default"),
	    MSPTI_SUCCESS);
	mstxDomainMarkA(a, "f2", NULL);
	mstxDomainMarkA(b, "b2", NULL);
	mstxMarkA("d1", NULL);
	mstxDomainDestroy(b);
	ck_assert_int_eq(msptiActivityEnableMarkerDomain("default"),
	    MSPTI_SUCCESS);
	mstxMarkA("d2", NULL);
	msptiActivityFlushAll(1);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, NULL), 5);
	count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, (msptiActivity **)&m);
	ck_assert_str_eq(m->name, "f1");
	ck_assert_str_eq(m->domain, "fwd");
	count_kind(MSPTI_ACTIVITY_KIND_MARKER, 3, (msptiActivity **)&m);
	ck_assert_str_eq(m->name, "b2");
	ck_assert_str_eq(m->domain, "bwd");
	count_kind(MSPTI_ACTIVITY_KIND_MARKER, 4, (msptiActivity **)&m);
	ck_assert_str_eq(m->name, "d2");
	ck_assert_str_eq(m->domain, "default");
}
END_TEST

START_TEST(test_external_correlation)
{
	uint64_t v = 0;

	ck_assert_int_eq(msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_INVALID, 1),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_SIZE, 1),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v),
	    MSPTI_ERROR_QUEUE_EMPTY);
	ck_assert_int_eq(msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, NULL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 10), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 11), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 20), MSPTI_SUCCESS);
	/* Kinds are separate stacks; LIFO. */
	ck_assert_int_eq(msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v), MSPTI_SUCCESS);
	ck_assert_uint_eq(v, 11);
	ck_assert_int_eq(msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &v), MSPTI_SUCCESS);
	ck_assert_uint_eq(v, 20);
	ck_assert_int_eq(msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v), MSPTI_SUCCESS);
	ck_assert_uint_eq(v, 10);
	ck_assert_int_eq(msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v),
	    MSPTI_ERROR_QUEUE_EMPTY);
}
END_TEST

static void *
push_other_thread(void *arg)
{
	uint64_t v;

	/* Another thread's stack is its own: empty here. */
	return (void *)(intptr_t)msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &v);
}

START_TEST(test_external_per_thread)
{
	pthread_t t;
	void *rc;

	ck_assert_int_eq(msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 5), MSPTI_SUCCESS);
	pthread_create(&t, NULL, push_other_thread, NULL);
	pthread_join(t, &rc);
	ck_assert_int_eq((int)(intptr_t)rc, MSPTI_ERROR_QUEUE_EMPTY);
}
END_TEST

START_TEST(test_small_buffers)
{
	int i;

	/* Room for exactly one marker per buffer. */
	buf_size = sizeof(msptiActivityMarker) + 8;
	setup();
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	for (i = 0; i < 50; i++)
		mstxMarkA("small", NULL);
	msptiActivityFlushAll(1);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, NULL), 50);
	ck_assert_int_ge(atomic_load(&requests), 50);
}
END_TEST

START_TEST(test_max_records)
{
	int i;

	buf_maxrec = 3;
	setup();
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	for (i = 0; i < 30; i++)
		mstxMarkA("max3", NULL);
	msptiActivityFlushAll(1);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, NULL), 30);
	ck_assert_int_eq(atomic_load(&requests), 10);
	ck_assert_int_eq(atomic_load(&completes), 10);
}
END_TEST

START_TEST(test_no_buffer)
{
	int i;

	buf_refuse = true;
	setup();
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	for (i = 0; i < 100; i++)
		mstxMarkA("dropped", NULL);
	msptiActivityFlushAll(1);
	ck_assert_int_eq(got_len, 0);
	ck_assert_int_ge(atomic_load(&requests), 1);
	/* It recovers once buffers come. */
	buf_refuse = false;
	mstxMarkA("kept", NULL);
	msptiActivityFlushAll(1);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, NULL), 1);
}
END_TEST

START_TEST(test_flush_semantics)
{
	int i;

	setup();
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	/* FlushAll with nothing recorded delivers nothing. */
	msptiActivityFlushAll(1);
	ck_assert_int_eq(atomic_load(&completes), 0);
	for (i = 0; i < 3; i++)
		mstxMarkA("partial", NULL);
	ck_assert_int_eq(atomic_load(&completes), 0);
	msptiActivityFlushAll(1);
	/* The partial buffer was delivered, once. */
	ck_assert_int_eq(atomic_load(&completes), 1);
	ck_assert_uint_eq(got_len, 3 * sizeof(msptiActivityMarker));
	msptiActivityFlushAll(1);
	ck_assert_int_eq(atomic_load(&completes), 1);
	/* Disabled kinds produce nothing. */
	msptiActivityDisable(MSPTI_ACTIVITY_KIND_MARKER);
	mstxMarkA("off", NULL);
	msptiActivityFlushAll(1);
	ck_assert_uint_eq(got_len, 3 * sizeof(msptiActivityMarker));
}
END_TEST

START_TEST(test_flush_period)
{
	int i;

	setup();
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	ck_assert_int_eq(msptiActivityFlushPeriod(20), MSPTI_SUCCESS);
	mstxMarkA("periodic", NULL);
	for (i = 0; i < 500 && atomic_load(&completes) == 0; i++)
		usleep(10000);
	ck_assert_int_ge(atomic_load(&completes), 1);
	ck_assert_int_eq(msptiActivityFlushPeriod(0), MSPTI_SUCCESS);
	pthread_mutex_lock(&got_mtx);
	ck_assert_uint_eq(count_kind(MSPTI_ACTIVITY_KIND_MARKER, 0, NULL), 1);
	pthread_mutex_unlock(&got_mtx);
}
END_TEST

#define LOSS_THREADS	16
#define LOSS_MARKS	40000

static void *
loss_thread(void *arg)
{
	int i;

	for (i = 0; i < LOSS_MARKS; i++)
		mstxMarkA("loss", NULL);
	return NULL;
}

START_TEST(test_threads_no_loss)
{
	pthread_t t[LOSS_THREADS];
	msptiActivity *r = NULL;
	uint8_t *seen;
	uint64_t maxid = (uint64_t)LOSS_THREADS * LOSS_MARKS + 16, n = 0;
	int i;

	buf_size = 256 * 1024;
	setup();
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	for (i = 0; i < LOSS_THREADS; i++)
		pthread_create(&t[i], NULL, loss_thread, NULL);
	for (i = 0; i < LOSS_THREADS; i++)
		pthread_join(t[i], NULL);
	msptiActivityFlushAll(1);
	seen = calloc(maxid + 1, 1);
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS) {
		msptiActivityMarker *m = (msptiActivityMarker *)r;

		ck_assert_int_eq(r->kind, MSPTI_ACTIVITY_KIND_MARKER);
		ck_assert_uint_le(m->id, maxid);
		ck_assert_msg(!seen[m->id], "id %llu twice",
		    (unsigned long long)m->id);
		seen[m->id] = 1;
		n++;
	}
	ck_assert_uint_eq(n, (uint64_t)LOSS_THREADS * LOSS_MARKS);
	free(seen);
}
END_TEST

static _Atomic bool fork_stop;

static void *
fork_marker_thread(void *arg)
{
	while (!atomic_load_explicit(&fork_stop, memory_order_relaxed))
		mstxMarkA("fork", NULL);
	return NULL;
}

static void
fork_done_cb(uint8_t *buffer, size_t size, size_t valid)
{
	free(buffer);
}

/* A fork while another thread copies a record: the child's flush must not
 * wait for a thread that does not exist there. */
START_TEST(test_fork_flush)
{
	pthread_t t;
	pid_t pid;
	int i, status, bad = 0;

	buf_size = 1024 * 1024;
	ck_assert_int_eq(msptiActivityRegisterCallbacks(req_cb, fork_done_cb),
	    MSPTI_SUCCESS);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	pthread_create(&t, NULL, fork_marker_thread, NULL);
	for (i = 0; i < 300 && !bad; i++) {
		pid = fork();
		ck_assert_int_ne(pid, -1);
		if (pid == 0) {
			alarm(5);
			msptiActivityFlushAll(1);
			msptiActivityFlushAll(1);
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			bad = 1;
	}
	atomic_store(&fork_stop, true);
	pthread_join(t, NULL);
	ck_assert_msg(!bad, "a child's FlushAll hung (fork %d)", i);
}
END_TEST

static void
sub_cb(void *ud, msptiCallbackDomain d, msptiCallbackId id,
    const msptiCallbackData *data)
{
}

START_TEST(test_subscribe_codes)
{
	msptiSubscriberHandle s = NULL, s2 = NULL;

	ck_assert_int_eq(msptiSubscribe(NULL, sub_cb, NULL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiSubscribe(&s, sub_cb, NULL), MSPTI_SUCCESS);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(msptiSubscribe(&s2, sub_cb, NULL),
	    MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	ck_assert_int_eq(msptiEnableCallback(1, s, MSPTI_CB_DOMAIN_INVALID, 1),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiEnableCallback(1, s, MSPTI_CB_DOMAIN_SIZE, 1),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiEnableCallback(1, s, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_SIZE), MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiEnableCallback(1, s, MSPTI_CB_DOMAIN_HCCL,
	    MSPTI_CBID_HCCL_SIZE), MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiEnableCallback(1, NULL, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_LAUNCH), MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiEnableCallback(1, s, MSPTI_CB_DOMAIN_RUNTIME,
	    MSPTI_CBID_RUNTIME_LAUNCH), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiEnableCallback(0, s, MSPTI_CB_DOMAIN_HCCL,
	    MSPTI_CBID_HCCL_ALLREDUCE), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiEnableDomain(1, s, MSPTI_CB_DOMAIN_HCCL),
	    MSPTI_SUCCESS);
	ck_assert_int_eq(msptiEnableDomain(1, s, MSPTI_CB_DOMAIN_INVALID),
	    MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiUnsubscribe(NULL), MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiUnsubscribe(s), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiUnsubscribe(s), MSPTI_ERROR_INVALID_PARAMETER);
	ck_assert_int_eq(msptiEnableDomain(1, s, MSPTI_CB_DOMAIN_HCCL),
	    MSPTI_ERROR_INVALID_PARAMETER);
	/* NULL callback allowed; a new subscriber after unsubscribing. */
	ck_assert_int_eq(msptiSubscribe(&s2, NULL, NULL), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiUnsubscribe(s2), MSPTI_SUCCESS);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("api_activity");
	TCase *tc = tcase_create("activity");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_enable_codes);
	tcase_add_test(tc, test_get_next_record);
	tcase_add_test(tc, test_markers);
	tcase_add_test(tc, test_domains);
	tcase_add_test(tc, test_external_correlation);
	tcase_add_test(tc, test_external_per_thread);
	tcase_add_test(tc, test_small_buffers);
	tcase_add_test(tc, test_max_records);
	tcase_add_test(tc, test_no_buffer);
	tcase_add_test(tc, test_flush_semantics);
	tcase_add_test(tc, test_flush_period);
	tcase_add_test(tc, test_threads_no_loss);
	tcase_add_test(tc, test_fork_flush);
	tcase_add_test(tc, test_subscribe_codes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	/* Each test in its own process: the agent's state is per process. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

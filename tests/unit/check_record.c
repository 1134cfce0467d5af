/* Unit tests for lib/record.c: sizes, round trips, validator rejects. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

/* A valid record of each type, with distinct field values. */
static size_t
make_sample(unsigned type, uint64_t *buf)
{
	memset(buf, 0, REC_MAX_SIZE);
	switch (type) {
	case REC_API: {
		struct rec_api *r = (void *)buf;
		REC_INIT(r, REC_API, 0);
		r->start = 1000; r->end = 2000; r->correlation_id = 7;
		r->pid = 11; r->tid = 12; r->name_id = 3; r->kind = 10;
		r->domain = 1; r->cbid = 10;
		return sizeof *r;
	}
	case REC_KERNEL: {
		struct rec_kernel *r = (void *)buf;
		REC_INIT(r, REC_KERNEL, REC_F_HOST_LAUNCH);
		r->start = 5; r->end = 9; r->correlation_id = 7; r->pid = 11;
		r->tid = 12; r->device = 0; r->stream = 3; r->task_id = 99;
		r->name_id = 4; r->type_id = 5;
		return sizeof *r;
	}
	case REC_MEMCPY: {
		struct rec_memcpy *r = (void *)buf;
		REC_INIT(r, REC_MEMCPY, REC_F_ASYNC);
		r->start = 5; r->end = 9; r->bytes = 1 << 20; r->copy_kind = 2;
		r->device = 1; r->stream = 2; r->task_id = 3;
		return sizeof *r;
	}
	case REC_MEMSET: {
		struct rec_memset *r = (void *)buf;
		REC_INIT(r, REC_MEMSET, 0);
		r->start = 5; r->end = 5; r->bytes = 64; r->value = 0xab;
		return sizeof *r;
	}
	case REC_MEMORY: {
		struct rec_memory *r = (void *)buf;
		REC_INIT(r, REC_MEMORY, 0);
		r->start = 5; r->end = 6; r->address = 0x1000; r->bytes = 4096;
		r->op = 1; r->mem_kind = 1; r->device = 0; r->stream = REC_NONE;
		return sizeof *r;
	}
	case REC_HCCL: {
		struct rec_hccl *r = (void *)buf;
		REC_INIT(r, REC_HCCL, REC_F_DEVICE_CLOCK);
		r->start = 5; r->end = 50; r->bandwidth = 12.5; r->name_id = 1;
		r->comm_name_id = 2;
		return sizeof *r;
	}
	case REC_COMMUNICATION: {
		struct rec_communication *r = (void *)buf;
		REC_INIT(r, REC_COMMUNICATION, 0);
		r->start = 5; r->end = 50; r->count = 1024; r->data_type = 4;
		r->name_id = 1; r->comm_name_id = 2; r->alg_type_id = 3;
		return sizeof *r;
	}
	case REC_MARKER: {
		struct rec_marker *r = (void *)buf;
		REC_INIT(r, REC_MARKER, 0);
		r->timestamp = 77; r->id = 1; r->pid = 11; r->tid = 12;
		r->device = REC_NONE; r->stream = REC_NONE; r->name_id = 1;
		r->domain_id = 2; r->flag = 2; r->source_kind = 0;
		return sizeof *r;
	}
	case REC_EXTERNAL_CORRELATION: {
		struct rec_external_correlation *r = (void *)buf;
		REC_INIT(r, REC_EXTERNAL_CORRELATION, 0);
		r->external_id = 1234; r->correlation_id = 7;
		r->external_kind = 2; r->pid = 11; r->tid = 12;
		return sizeof *r;
	}
	case REC_STRING_DEF:
		return record_string_def_encode(buf, REC_MAX_SIZE, 9,
		    "aclnnMatmul", 11);
	case REC_PROCESS: {
		struct rec_process *r = (void *)buf;
		REC_INIT(r, REC_PROCESS, 0);
		r->start_ns = 100; r->pid = 11; r->uid = 1000; r->rank = 1;
		r->local_rank = 1; r->world_size = 4; r->job_id = 1;
		r->exe_id = 2; r->cmdline_id = 3;
		return sizeof *r;
	}
	case REC_THREAD: {
		struct rec_thread *r = (void *)buf;
		REC_INIT(r, REC_THREAD, 0);
		r->pid = 11; r->tid = 13; r->name_id = 4;
		return sizeof *r;
	}
	case REC_CLOCK_SYNC: {
		struct rec_clock_sync *r = (void *)buf;
		REC_INIT(r, REC_CLOCK_SYNC, 0);
		r->host_ref_ns = 1700000000000000000ull; r->device_ref_ns = 5;
		r->drift = 2e-6; r->error_ns = 150; r->device = 1;
		r->samples = 8;
		return sizeof *r;
	}
	case REC_COUNTER: {
		struct rec_counter *r = (void *)buf;
		REC_INIT(r, REC_COUNTER, 0);
		r->timestamp = 88; r->value = 42.5; r->track_id = 1;
		r->device = 0;
		return sizeof *r;
	}
	case REC_LOSS: {
		struct rec_loss *r = (void *)buf;
		REC_INIT(r, REC_LOSS, 0);
		r->timestamp = 99; r->count = 17; r->stage = LOSS_AGENT_RING;
		r->pid = 11; r->lost_type = REC_KERNEL;
		return sizeof *r;
	}
	case REC_SESSION: {
		struct rec_session *r = (void *)buf;
		REC_INIT(r, REC_SESSION, SESSION_EV_START);
		r->timestamp = 1; r->session_id = 3;
		return sizeof *r;
	}
	case REC_STEP: {
		struct rec_step *r = (void *)buf;
		REC_INIT(r, REC_STEP, 0);
		r->start = 10; r->end = 20; r->step = 4; r->pid = 11;
		r->name_id = 1;
		return sizeof *r;
	}
	}
	return 0;
}

static const unsigned all_types[] = {
	REC_MARKER, REC_KERNEL, REC_API, REC_HCCL, REC_MEMORY, REC_MEMSET,
	REC_MEMCPY, REC_EXTERNAL_CORRELATION, REC_COMMUNICATION,
	REC_STRING_DEF, REC_PROCESS, REC_THREAD, REC_CLOCK_SYNC, REC_COUNTER,
	REC_LOSS, REC_SESSION, REC_STEP,
};
#define NTYPES	(sizeof(all_types) / sizeof(all_types[0]))

START_TEST(test_sizes_and_names)
{
	uint64_t buf[REC_MAX_SIZE / 8];
	size_t i, n;

	for (i = 0; i < NTYPES; i++) {
		n = make_sample(all_types[i], buf);
		ck_assert_uint_gt(n, 0);
		ck_assert_uint_eq(n % 8, 0);
		ck_assert_uint_le(n, REC_MAX_SIZE);
		ck_assert_ptr_nonnull(record_type_name(all_types[i]));
		if (all_types[i] != REC_STRING_DEF) {
			ck_assert_uint_eq(record_size(all_types[i]), n);
			ck_assert_uint_le(n, REC_FIXED_MAX);
		}
	}
	ck_assert_ptr_null(record_type_name(0));
	ck_assert_ptr_null(record_type_name(REC_TYPE_MAX));
	ck_assert_ptr_null(record_type_name(20));
	ck_assert_str_eq(record_type_name(REC_KERNEL), "kernel");
	ck_assert_str_eq(record_loss_stage_name(LOSS_DISK), "disk");
	ck_assert_ptr_null(record_loss_stage_name(LOSS_STAGE_MAX));
}
END_TEST

/* Every sample validates, and survives a byte copy unchanged. */
START_TEST(test_round_trip)
{
	uint64_t buf[REC_MAX_SIZE / 8], copy[REC_MAX_SIZE / 8];
	size_t i, n;

	for (i = 0; i < NTYPES; i++) {
		n = make_sample(all_types[i], buf);
		ck_assert_msg(record_validate(buf, n) == 0, "type %u: %d",
		    all_types[i], record_validate(buf, n));
		/* More room than the record is fine. */
		ck_assert_int_eq(record_validate(buf, sizeof buf), 0);
		memcpy(copy, buf, n);
		ck_assert_int_eq(record_validate(copy, n), 0);
		ck_assert_int_eq(memcmp(copy, buf, n), 0);
	}
}
END_TEST

START_TEST(test_accessors)
{
	uint64_t buf[REC_MAX_SIZE / 8];
	uint16_t offs[REC_MAX_STR_FIELDS];
	int n;

	make_sample(REC_API, buf);
	ck_assert_uint_eq(record_timestamp((void *)buf), 1000);
	ck_assert_uint_eq(record_pid((void *)buf), 11);
	n = record_string_fields(REC_API, offs);
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(offs[0], offsetof(struct rec_api, name_id));
	make_sample(REC_MARKER, buf);
	ck_assert_uint_eq(record_timestamp((void *)buf), 77);
	n = record_string_fields(REC_COMMUNICATION, offs);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(record_string_fields(REC_STRING_DEF, offs), 0);
	ck_assert_int_eq(record_string_fields(9999, offs), 0);
	make_sample(REC_CLOCK_SYNC, buf);
	ck_assert_uint_eq(record_pid((void *)buf), 0);
}
END_TEST

START_TEST(test_string_def)
{
	uint64_t buf[REC_MAX_SIZE / 8];
	struct rec_string_def *d = (void *)buf;
	char big[REC_MAX_SIZE * 2];
	size_t n, i;

	n = record_string_def_encode(buf, sizeof buf, 1, "", 0);
	ck_assert_uint_eq(n, 24);
	ck_assert_int_eq(record_validate(buf, n), 0);
	n = record_string_def_encode(buf, sizeof buf, 2, "12345678", 8);
	ck_assert_uint_eq(n, 32);
	ck_assert_int_eq(record_validate(buf, n), 0);
	ck_assert_str_eq(d->bytes, "12345678");
	/* Too small a buffer. */
	ck_assert_uint_eq(record_string_def_encode(buf, 16, 2, "x", 1), 0);
	/* Stops at an embedded NUL. */
	n = record_string_def_encode(buf, sizeof buf, 3, "ab\0cd", 5);
	ck_assert_uint_eq(d->len, 2);
	ck_assert_int_eq(record_validate(buf, n), 0);
	/* Long strings are cut at REC_STRING_MAX, not inside UTF-8. */
	memset(big, 'a', sizeof big);
	n = record_string_def_encode(buf, sizeof buf, 4, big, sizeof big);
	ck_assert_uint_eq(d->len, REC_STRING_MAX);
	ck_assert_uint_le(n, REC_MAX_SIZE);
	ck_assert_int_eq(record_validate(buf, n), 0);
	for (i = 0; i + 1 < sizeof big; i += 2) {
		big[i] = (char)0xC3;	/* "é" repeated */
		big[i + 1] = (char)0xA9;
	}
	n = record_string_def_encode(buf, sizeof buf, 5, big, sizeof big);
	ck_assert_uint_eq(d->len % 2, 0);
	ck_assert_int_eq(record_validate(buf, n), 0);
}
END_TEST

/* Applies one corruption to a fresh sample and expects a reject (from
 * record_validate_framed too when the size still frames it). */
#define EXPECT_BAD(type, stmt) do {					\
	size_t n_ = make_sample((type), buf);				\
	const struct rec_hdr *h_ = (const void *)buf;			\
	{ stmt; }							\
	ck_assert_msg(record_validate(buf, n_) != 0,			\
	    "type %u accepted after: %s", (unsigned)(type), #stmt);	\
	if (h_->size >= REC_HDR_SIZE && h_->size % REC_ALIGN == 0 &&	\
	    h_->size <= n_)						\
		ck_assert_msg(record_validate_framed(h_) != 0,		\
		    "type %u accepted framed after: %s",		\
		    (unsigned)(type), #stmt);				\
} while (0)

START_TEST(test_validate_header)
{
	uint64_t buf[REC_MAX_SIZE / 8];
	struct rec_hdr *h = (void *)buf;
	size_t n;

	ck_assert_int_eq(record_validate(NULL, 64), -EMSGSIZE);
	n = make_sample(REC_API, buf);
	ck_assert_int_eq(record_validate(buf, 7), -EMSGSIZE);
	ck_assert_int_eq(record_validate(buf, n - 8), -EMSGSIZE);
	EXPECT_BAD(REC_API, h->type = 0);
	EXPECT_BAD(REC_API, h->type = 20);
	EXPECT_BAD(REC_API, h->type = REC_TYPE_MAX);
	EXPECT_BAD(REC_API, h->type = 0xFFFF);
	EXPECT_BAD(REC_API, h->size = 0);
	EXPECT_BAD(REC_API, h->size = 4);
	EXPECT_BAD(REC_API, h->size = 52);
	EXPECT_BAD(REC_API, h->size = 48);
	EXPECT_BAD(REC_API, h->size = 64; n_ = 64);
	EXPECT_BAD(REC_API, h->size = REC_MAX_SIZE + 8; n_ = sizeof buf);
	EXPECT_BAD(REC_API, h->size = 0xFFF8; n_ = sizeof buf);
	EXPECT_BAD(REC_API, h->aux = 1);
	make_sample(REC_API, buf);
	h->type = 20;
	ck_assert_int_eq(record_validate(buf, 64), -EPROTO);
}
END_TEST

START_TEST(test_validate_fields)
{
	/* Allocated: no declared type, so the casts below are defined. */
	uint64_t *buf = malloc(REC_MAX_SIZE);

	ck_assert_ptr_nonnull(buf);

#define R(t)	((struct t *)(void *)buf)
	EXPECT_BAD(REC_API, R(rec_api)->end = 999);
	EXPECT_BAD(REC_API, R(rec_api)->kind = 2);
	EXPECT_BAD(REC_API, R(rec_api)->domain = 3);
	EXPECT_BAD(REC_API, R(rec_api)->reserved = 1);
	EXPECT_BAD(REC_KERNEL, R(rec_kernel)->end = 4);
	EXPECT_BAD(REC_KERNEL, R(rec_kernel)->reserved = 1);
	EXPECT_BAD(REC_KERNEL, R(rec_kernel)->hdr.aux = 0x10);
	EXPECT_BAD(REC_MEMCPY, R(rec_memcpy)->copy_kind = 6);
	EXPECT_BAD(REC_MEMCPY, R(rec_memcpy)->end = 0);
	EXPECT_BAD(REC_MEMSET, R(rec_memset)->end = 0);
	EXPECT_BAD(REC_MEMORY, R(rec_memory)->op = 2);
	EXPECT_BAD(REC_MEMORY, R(rec_memory)->mem_kind = 2);
	EXPECT_BAD(REC_MEMORY, R(rec_memory)->reserved = 2);
	EXPECT_BAD(REC_HCCL, R(rec_hccl)->bandwidth = NAN);
	EXPECT_BAD(REC_HCCL, R(rec_hccl)->bandwidth = -1);
	EXPECT_BAD(REC_HCCL, R(rec_hccl)->bandwidth = INFINITY);
	EXPECT_BAD(REC_COMMUNICATION, R(rec_communication)->data_type = 18);
	EXPECT_BAD(REC_COMMUNICATION, R(rec_communication)->end = 1);
	EXPECT_BAD(REC_MARKER, R(rec_marker)->flag = 0);
	EXPECT_BAD(REC_MARKER, R(rec_marker)->flag = 3);
	EXPECT_BAD(REC_MARKER, R(rec_marker)->flag = 64);
	EXPECT_BAD(REC_MARKER, R(rec_marker)->source_kind = 2);
	EXPECT_BAD(REC_EXTERNAL_CORRELATION,
	    R(rec_external_correlation)->external_kind = 0);
	EXPECT_BAD(REC_EXTERNAL_CORRELATION,
	    R(rec_external_correlation)->external_kind = 5);
	EXPECT_BAD(REC_PROCESS, R(rec_process)->rank = 4);
	EXPECT_BAD(REC_PROCESS, R(rec_process)->rank = -2);
	EXPECT_BAD(REC_THREAD, R(rec_thread)->reserved = 1);
	EXPECT_BAD(REC_CLOCK_SYNC, R(rec_clock_sync)->drift = 0.5);
	EXPECT_BAD(REC_CLOCK_SYNC, R(rec_clock_sync)->drift = NAN);
	EXPECT_BAD(REC_CLOCK_SYNC, R(rec_clock_sync)->error_ns = -1);
	EXPECT_BAD(REC_COUNTER, R(rec_counter)->value = NAN);
	EXPECT_BAD(REC_COUNTER, R(rec_counter)->track_id = 0);
	EXPECT_BAD(REC_LOSS, R(rec_loss)->stage = LOSS_STAGE_MAX);
	EXPECT_BAD(REC_LOSS, R(rec_loss)->lost_type = REC_TYPE_MAX);
	EXPECT_BAD(REC_SESSION, R(rec_session)->hdr.aux = 0);
	EXPECT_BAD(REC_SESSION, R(rec_session)->hdr.aux = SESSION_EV_MAX);
	EXPECT_BAD(REC_SESSION, R(rec_session)->session_id = 0);
	EXPECT_BAD(REC_STEP, R(rec_step)->end = 1);
	/* String definitions. */
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->id = 0);
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->len = 12);
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->len = 0xFFFFFFF0u);
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->bytes[3] = 0);
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->bytes[11] = 'x');
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->bytes[13] = 'x');
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->hdr.size = 8);
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->hdr.size = 40);
	EXPECT_BAD(REC_STRING_DEF, R(rec_string_def)->hdr.aux = 1);
#undef R
	free(buf);
}
END_TEST

/* Random bytes never crash the validator, and anything it accepts has a
 * size within what it was given; for a framed record (a reader's loop
 * checked its size) record_validate_framed says what it says, and so
 * does record_validate_framed_fast, to the return code. */
START_TEST(test_validate_random)
{
	uint64_t buf[REC_MAX_SIZE / 8];
	struct rec_hdr *h = (void *)buf;
	unsigned seed = 12345, i, j, framed = 0, accepted = 0, fast = 0;
	size_t avail;
	int rc;

	for (i = 0; i < 200000; i++) {
		for (j = 0; j < 16; j++)
			buf[j] = (uint64_t)rand_r(&seed) << 33 ^
			    (uint64_t)rand_r(&seed);
		if (i & 1)	/* plausible header, random body */
			h->type = (uint16_t)(rand_r(&seed) % REC_TYPE_MAX);
		if (i & 2)
			h->size = (uint16_t)(record_size(h->type));
		avail = (size_t)rand_r(&seed) % 129;
		if (i % 4 == 3) {	/* a valid record, one byte changed */
			avail = make_sample(all_types[rand_r(&seed) % NTYPES],
			    buf);
			if (i & 4)
				((unsigned char *)buf)[(unsigned)rand_r(&seed) %
				    avail] ^= (unsigned char)(1u <<
				    (rand_r(&seed) % 8));
		}
		rc = record_validate(buf, avail);
		if (rc == 0)
			ck_assert_uint_le(h->size, avail);
		if (h->size >= REC_HDR_SIZE && h->size % REC_ALIGN == 0 &&
		    h->size <= avail) {
			ck_assert_int_eq(record_validate_framed(h) == 0,
			    rc == 0);
			ck_assert_int_eq(record_validate_framed_fast(h),
			    record_validate_framed(h));
			fast += h->type == REC_KERNEL || h->type == REC_API ||
			    h->type == REC_MARKER;
			framed++;
			accepted += rc == 0;
		}
	}
	ck_assert_uint_gt(framed, 1000);
	ck_assert_uint_gt(accepted, 10);
	ck_assert_uint_gt(fast, 100);	/* the inline types, damaged too */
}
END_TEST

static Suite *
record_suite(void)
{
	Suite *s = suite_create("record");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, test_sizes_and_names);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_accessors);
	tcase_add_test(tc, test_string_def);
	tcase_add_test(tc, test_validate_header);
	tcase_add_test(tc, test_validate_fields);
	tcase_add_test(tc, test_validate_random);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(record_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

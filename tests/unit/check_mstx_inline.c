/*
 * The header's inline disabled check (ms_tools_ext.h): mstxEnabledState
 * follows the MARKER kind, calls through the inline wrappers, through the
 * functions (a program built against the old header, mstx-old-header.c)
 * and through a function pointer all record while MARKER is on, and none
 * records while it is off.  Linked against libmspti only.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"

void	old_header_mark(const char *message);
void	old_header_range(const char *message);

static uint8_t got[1 << 20];
static size_t got_len;

static void
req_cb(uint8_t **buffer, size_t *size, size_t *maxrec)
{
	*buffer = aligned_alloc(8, 65536);
	*size = 65536;
	*maxrec = 0;
}

static void
done_cb(uint8_t *buffer, size_t size, size_t valid)
{
	(void)size;
	if (got_len + valid <= sizeof got) {
		memcpy(got + got_len, buffer, valid);
		got_len += valid;
	}
	free(buffer);
}

/* Markers delivered so far whose name is name. */
static size_t
count_named(const char *name)
{
	msptiActivity *r = NULL;
	size_t n = 0;

	ck_assert_int_eq(msptiActivityFlushAll(1), MSPTI_SUCCESS);
	while (msptiActivityGetNextRecord(got, got_len, &r) == MSPTI_SUCCESS)
		if (r->kind == MSPTI_ACTIVITY_KIND_MARKER &&
		    strcmp(((msptiActivityMarker *)r)->name, name) == 0)
			n++;
	return n;
}

START_TEST(test_state_follows_marker)
{
	ck_assert_uint_eq(mstxEnabledState, 0);
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	ck_assert_uint_ne(mstxEnabledState, 0);
	/* Another kind on or off leaves it alone. */
	ck_assert_int_eq(msptiActivityEnable(
	    MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), MSPTI_SUCCESS);
	ck_assert_int_eq(msptiActivityDisable(
	    MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), MSPTI_SUCCESS);
	ck_assert_uint_ne(mstxEnabledState, 0);
	ck_assert_int_eq(msptiActivityDisable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	ck_assert_uint_eq(mstxEnabledState, 0);
}
END_TEST

START_TEST(test_every_call_form_records)
{
	void (*fp)(const char *, aclrtStream) = mstxMarkA;
	mstxDomainHandle_t d;

	ck_assert_int_eq(msptiActivityRegisterCallbacks(req_cb, done_cb),
	    MSPTI_SUCCESS);
	d = mstxDomainCreateA("inline-test");
	ck_assert_ptr_nonnull(d);
	/* Off: nothing from any form. */
	mstxMarkA("inline", NULL);
	old_header_mark("old");
	fp("pointer", NULL);
	ck_assert_uint_eq(mstxRangeStartA("range", NULL), 0);
	mstxDomainMarkA(d, "domain", NULL);
	ck_assert_uint_eq(count_named("inline") + count_named("old") +
	    count_named("pointer") + count_named("domain"), 0);
	/* On: each form records. */
	ck_assert_int_eq(msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	mstxMarkA("inline", NULL);
	old_header_mark("old");
	old_header_range("old-range");
	fp("pointer", NULL);
	mstxRangeEnd(mstxRangeStartA("range", NULL));
	mstxDomainMarkA(d, "domain", NULL);
	mstxDomainRangeEnd(d, mstxDomainRangeStartA(d, "domain-range", NULL));
	ck_assert_uint_eq(count_named("inline"), 1);
	ck_assert_uint_eq(count_named("old"), 1);
	ck_assert_uint_eq(count_named("old-range"), 2);	/* start, end */
	ck_assert_uint_eq(count_named("pointer"), 1);
	ck_assert_uint_eq(count_named("range"), 2);
	ck_assert_uint_eq(count_named("domain"), 1);
	ck_assert_uint_eq(count_named("domain-range"), 2);
	/* Off again. */
	ck_assert_int_eq(msptiActivityDisable(MSPTI_ACTIVITY_KIND_MARKER),
	    MSPTI_SUCCESS);
	mstxMarkA("inline", NULL);
	old_header_mark("old");
	ck_assert_uint_eq(count_named("inline"), 1);
	ck_assert_uint_eq(count_named("old"), 1);
}
END_TEST

int
main(void)
{
	/* No daemon: with one, the agent keeps the state on to count steps
	 * (doc/sessions.md, "Step windows"). */
	if (getenv("MSPTID_RUNTIME_DIR") == NULL) {
		setenv("MSPTID_RUNTIME_DIR", "/nonexistent/mspti-inline-test", 1);
		execv("/proc/self/exe", (char *[]){ "check_mstx_inline", NULL });
	}
	Suite *s = suite_create("mstx_inline");
	TCase *tc = tcase_create("mstx_inline");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_state_follows_marker);
	tcase_add_test(tc, test_every_call_form_records);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

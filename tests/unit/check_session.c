/*
 * Unit tests for the daemon's session configuration logic (daemon/
 * session.c, linked from libmsptid): kind lists, their names, and the
 * marker-domain on/off list.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "msptid.h"

START_TEST(test_kinds_parse)
{
	char *ok[] = { "kernel", "marker", "api" };
	char *badv[] = { "kernel", "bogus" };
	char bad[256] = "";
	uint32_t m = 0;

	ck_assert_int_eq(session_parse_kinds(ok, 3, &m, bad, sizeof(bad)), 0);
	/* api covers API, ACL_API, NODE_API and RUNTIME_API. */
	ck_assert_uint_eq(m, (1u << 2) | (1u << 1) | (1u << 3) | (1u << 10) |
	    (1u << 11) | (1u << 12));
	m = 0;
	ck_assert_int_eq(session_parse_kinds(badv, 2, &m, bad, sizeof(bad)),
	    -1);
	ck_assert_ptr_nonnull(strstr(bad, "unknown kind 'bogus'"));
	m = 0;
	ck_assert_int_eq(session_parse_kinds(NULL, 0, &m, bad, sizeof(bad)), 0);
	ck_assert_uint_eq(m, 0);
}
END_TEST

START_TEST(test_kind_names_roundtrip)
{
	char *all[] = { "marker", "kernel", "api", "hccl", "memory", "memset",
	    "memcpy", "correlation", "communication" };
	char *names[16];
	char bad[64];
	uint32_t m = 0, m2 = 0;
	size_t n;

	ck_assert_int_eq(session_parse_kinds(all, 9, &m, bad, sizeof(bad)), 0);
	n = session_kind_names(m, names);
	ck_assert_uint_eq(n, 9);
	ck_assert_int_eq(session_parse_kinds(names, n, &m2, bad, sizeof(bad)),
	    0);
	ck_assert_uint_eq(m, m2);
	/* A partial api mask is not named "api". */
	n = session_kind_names(1u << 3, names);
	ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_domains)
{
	struct session *s = calloc(1, sizeof(*s));
	char *off[] = { "fwd", "bwd", "fwd" };
	char *on[] = { "fwd" };
	char name[16];
	char *one[] = { name };

	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(session_domains_set(s, NULL, 0, off, 3), 0);
	ck_assert_uint_eq(s->ndomains_off, 2);		/* once each */
	ck_assert_int_eq(session_domains_set(s, on, 1, NULL, 0), 0);
	ck_assert_uint_eq(s->ndomains_off, 1);
	ck_assert_str_eq(s->domains_off[0], "bwd");
	/* Bounded: 32 domains off at most. */
	for (int i = 0; i < 31; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		ck_assert_int_eq(session_domains_set(s, NULL, 0, one, 1), 0);
	}
	ck_assert_uint_eq(s->ndomains_off, 32);
	snprintf(name, sizeof(name), "extra");
	ck_assert_int_eq(session_domains_set(s, NULL, 0, one, 1), -1);
	for (size_t i = 0; i < s->ndomains_off; i++)
		free(s->domains_off[i]);
	free(s->domains_off);
	free(s);
}
END_TEST

static Suite *
session_suite(void)
{
	Suite *su = suite_create("session");
	TCase *tc = tcase_create("config");

	tcase_add_test(tc, test_kinds_parse);
	tcase_add_test(tc, test_kind_names_roundtrip);
	tcase_add_test(tc, test_domains);
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	SRunner *sr = srunner_create(session_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/*
 * The Chrome JSON and Perfetto writers on a trace file written here:
 * string arguments that need escaping stay whole and valid, and the
 * Perfetto export is the same bytes whatever the number of deflate
 * workers, its deflated batches inflating to the plain export.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libdeflate.h>

#include "analysis.h"
#include "export.h"
#include "export-ascendpt.h"
#include "record.h"
#include "trace.h"

#define T0	1700000000000000000ull

/* A kernel type with a quote, a backslash and a control character. */
static const char weird[] = "we\"ird\\ty\tpe";

static char dir[] = "/tmp/check_export.XXXXXX";

static void
setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(dir, "/tmp/check_export.XXXXXX");
}

static void
put(struct trace_writer *w, const void *rec)
{
	ck_assert_int_eq(trace_writer_add(w, rec), 0);
}

/* n launches (API + kernel of type ty), rank 0 of 1, one step range. */
static void
write_trace(const char *path, unsigned n, const char *ty)
{
	static const char *const names[] = { NULL, "step", "MatMul",
	    "aclrtLaunchKernel", NULL };
	struct trace_header h;
	struct trace_writer *w;
	struct rec_process pr;
	struct rec_api api;
	struct rec_kernel kr;
	struct rec_marker m;
	uint64_t t = T0;
	uint32_t id;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	memset(&h, 0, sizeof(h));
	h.hostname = "node";
	h.producer = "check_export";
	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), 0);
	for (uint32_t i = 1; i < 5; i++) {
		const char *s = i == 4 ? ty : names[i];

		ck_assert_int_eq(trace_writer_intern(w, s, strlen(s), &id), 0);
		ck_assert_uint_eq(id, i);
	}
	REC_INIT(&pr, REC_PROCESS, 0);
	pr.pid = 7;
	pr.rank = 0;
	pr.world_size = 1;
	put(w, &pr);
	REC_INIT(&m, REC_MARKER, 0);
	m.pid = 7;
	m.name_id = 1;
	m.id = 1;
	m.flag = 2;
	m.timestamp = t;
	put(w, &m);
	REC_INIT(&api, REC_API, 0);
	REC_INIT(&kr, REC_KERNEL, 0);
	api.pid = kr.pid = 7;
	api.tid = 8;
	api.name_id = 3;
	api.kind = 3;
	kr.name_id = 2;
	kr.type_id = 4;
	for (unsigned i = 0; i < n; i++) {
		api.start = t + 100;
		api.end = t + 2100;
		api.correlation_id = kr.correlation_id = i + 1;
		kr.start = t + 5000;
		kr.end = t + 9000 + i % 7;
		kr.task_id = i;
		put(w, &api);
		put(w, &kr);
		t += 10000;
	}
	m.flag = 4;
	m.timestamp = t;
	put(w, &m);
	ck_assert_int_eq(trace_writer_close(w, NULL, NULL), 0);
	ck_assert_int_eq(close(fd), 0);
}

static struct analysis *
analyse(const char *path)
{
	struct analysis_opts o;
	struct analysis *a;

	analysis_opts_init(&o);
	o.keep_segments = true;
	a = analysis_new(&o);
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(analysis_add_file(a, path), 0);
	ck_assert_int_eq(analysis_run(a), 0);
	return a;
}

/* The whole file; *n its size. */
static char *
slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *b;
	long sz;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	sz = ftell(f);
	ck_assert_int_ge(sz, 0);
	rewind(f);
	b = malloc((size_t)sz + 1);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
	b[sz] = '\0';
	fclose(f);
	*n = (size_t)sz;
	return b;
}

static size_t
count(const char *b, size_t n, const char *s, size_t sn)
{
	size_t k = 0;

	for (const char *p = b; (p = memmem(p, n - (size_t)(p - b), s, sn));
	    p += sn)
		k++;
	return k;
}

static char *
export_to(struct analysis *a, bool chrome, const char *name, size_t *n)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(chrome ? export_chrome(a, f) : export_perfetto(a, f),
	    0);
	ck_assert_int_eq(fclose(f), 0);
	return slurp(path, n);
}

/*
 * A kernel type that needs escaping is a valid JSON string in the Chrome
 * export, and the whole string in the Perfetto one.  The old walk copied
 * the type into its JSON text unescaped (a quote ended the string), and
 * the Perfetto writer parsed that text back, so its value stopped at
 * the quote.
 */
/* communication.json's ratios are torch_npu's round(x, 4): the double's
 * exact value to the nearest, a tie to the even digit (69 ns of wait
 * beside 2139 of transit is 0.03125: 0.0312, not 0.0313). */
START_TEST(test_ascendpt_ratio_rounding)
{
	ck_assert(ap_ratio(0, 0) == 0.0);
	ck_assert(ap_ratio(1, 3) == 0.25);
	ck_assert(ap_ratio(69, 2139) == strtod("0.0312", NULL));
	ck_assert(ap_ratio(3, 29) == strtod("0.0938", NULL));	/* 0.09375 */
	ck_assert(ap_ratio(1, 2) == strtod("0.3333", NULL));
	ck_assert(ap_ratio(2, 1) == strtod("0.6667", NULL));
	ck_assert(ap_ratio(1, 19999) == strtod("0.0001", NULL)); /* 5e-05 */
	ck_assert(ap_ratio(7, 0) == 1.0);
}
END_TEST

START_TEST(test_string_arg_escaped)
{
	static const char json[] = "\"type\":\"we\\\"ird\\\\ty\\u0009pe\"";
	char trace[128], *b;
	struct analysis *a;
	size_t n;

	snprintf(trace, sizeof(trace), "%s/t.trace", dir);
	write_trace(trace, 5, weird);
	a = analyse(trace);
	b = export_to(a, true, "x.json", &n);
	ck_assert_msg(count(b, n, json, sizeof(json) - 1) == 5,
	    "escaped type in %zu of 5 kernels", count(b, n, json,
	    sizeof(json) - 1));
	ck_assert_uint_eq(count(b, n, weird, sizeof(weird) - 1), 0);
	free(b);
	setenv("MSPTI_PERFETTO_DEFLATE", "0", 1);
	b = export_to(a, false, "x.pb", &n);
	unsetenv("MSPTI_PERFETTO_DEFLATE");
	/* Interned once: InternedString { iid = 1; str = 2 } with the
	 * whole string as str. */
	{
		char want[64];

		want[0] = 0x12;
		want[1] = (char)(sizeof(weird) - 1);
		memcpy(want + 2, weird, sizeof(weird) - 1);
		ck_assert_msg(count(b, n, want, sizeof(weird) + 1) == 1,
		    "whole type interned %zu times", count(b, n, want,
		    sizeof(weird) + 1));
	}
	free(b);
	analysis_free(a);
}
END_TEST

/* Reads one protobuf field at *i of b (n bytes): 0 at the end, 1 with
 * its number, wire type and (varint) value or (bytes) length, -1 when it
 * does not fit. */
static int
pb_next(const uint8_t *b, size_t n, size_t *i, unsigned *f, unsigned *wt,
    uint64_t *v)
{
	uint64_t key = 0;
	unsigned sh = 0;

	if (*i >= n)
		return 0;
	do {
		if (*i >= n || sh > 63)
			return -1;
		key |= (uint64_t)(b[*i] & 0x7f) << sh, sh += 7;
	} while (b[(*i)++] & 0x80);
	*f = (unsigned)(key >> 3);
	*wt = (unsigned)(key & 7);
	*v = 0;
	switch (*wt) {
	case 0:
	case 2:
		sh = 0;
		do {
			if (*i >= n || sh > 63)
				return -1;
			*v |= (uint64_t)(b[*i] & 0x7f) << sh, sh += 7;
		} while (b[(*i)++] & 0x80);
		if (*wt == 2 && *v > n - *i)
			return -1;
		return 1;
	case 1:
		*i += 8;
		return *i <= n ? 1 : -1;
	case 5:
		*i += 4;
		return *i <= n ? 1 : -1;
	}
	return -1;
}

/*
 * A string arg of 5,000 bytes: the InternedData of its packet is well
 * formed (every entry inside its parent, each { iid = 1; str = 2; }), and
 * the value is interned shortened on a character boundary.  The old
 * writer cut the entry to fit its 4 KiB buffer after its inner length
 * was written, so the inner length pointed past its parent's end.
 */
START_TEST(test_long_string_interned)
{
	char trace[128], *b, *ty;
	struct analysis *a;
	size_t n, i = 0, longest = 0;
	unsigned f, wt;
	uint64_t v;
	int r;

	ty = malloc(5001);
	ck_assert_ptr_nonnull(ty);
	for (int k = 0; k < 5000; k += 2)
		memcpy(ty + k, k % 3 ? "\xc3\xa9" : "ab", 2);
	ty[5000] = '\0';
	snprintf(trace, sizeof(trace), "%s/t.trace", dir);
	write_trace(trace, 3, ty);
	a = analyse(trace);
	setenv("MSPTI_PERFETTO_DEFLATE", "0", 1);
	b = export_to(a, false, "long.pb", &n);
	unsetenv("MSPTI_PERFETTO_DEFLATE");
	while ((r = pb_next((uint8_t *)b, n, &i, &f, &wt, &v)) == 1) {
		const uint8_t *pk = (uint8_t *)b + i;
		size_t pn = wt == 2 ? v : 0, j = 0;

		ck_assert_uint_eq(f, 1);
		ck_assert_uint_eq(wt, 2);
		i += pn;
		while ((r = pb_next(pk, pn, &j, &f, &wt, &v)) == 1) {
			const uint8_t *in = pk + j;
			size_t inn = wt == 2 ? v : 0, k = 0;

			j += inn;
			if (f != 12)
				continue;
			while ((r = pb_next(in, inn, &k, &f, &wt, &v)) == 1) {
				const uint8_t *e = in + k;
				size_t en = v, m = 0;

				ck_assert_uint_eq(wt, 2);
				k += en;
				while ((r = pb_next(e, en, &m, &f, &wt, &v)) ==
				    1) {
					if (f == 2) {
						ck_assert_uint_eq(wt, 2);
						if (v > longest)
							longest = v;
						/* Not cut inside a character. */
						ck_assert((e[m + v - 1] & 0xc0) !=
						    0xc0);
					}
					if (wt == 2)
						m += v;
				}
				ck_assert_msg(r == 0, "interned entry overruns");
			}
			ck_assert_msg(r == 0, "InternedData overruns");
		}
		ck_assert_msg(r == 0, "packet overruns");
	}
	ck_assert_msg(r == 0, "trace overruns at %zu of %zu", i, n);
	ck_assert_uint_gt(longest, 500);
	ck_assert_uint_le(longest, 1024);
	free(b);
	free(ty);
	analysis_free(a);
}
END_TEST

/* Inflates every compressed_packets packet of z (n bytes) in order. */
static char *
inflate_all(const char *z, size_t n, size_t *outn)
{
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	size_t cap = 1 << 20, len = 0, i = 0;
	char *out = malloc(cap);

	ck_assert_ptr_nonnull(d);
	while (i < n) {
		uint64_t v = 0, zl = 0;
		unsigned sh = 0;
		size_t got;

		ck_assert_uint_eq((uint8_t)z[i++], 1 << 3 | 2);
		do
			v |= (uint64_t)(z[i] & 0x7f) << sh, sh += 7;
		while ((uint8_t)z[i++] & 0x80);
		ck_assert_uint_eq((uint8_t)z[i], 0x92);	/* field 50, bytes */
		ck_assert_uint_eq((uint8_t)z[i + 1], 0x03);
		i += 2;
		sh = 0;
		do
			zl |= (uint64_t)(z[i] & 0x7f) << sh, sh += 7;
		while ((uint8_t)z[i++] & 0x80);
		for (;;) {
			enum libdeflate_result r = libdeflate_zlib_decompress(d,
			    z + i, zl, out + len, cap - len, &got);

			if (r == LIBDEFLATE_SUCCESS)
				break;
			ck_assert_int_eq(r, LIBDEFLATE_INSUFFICIENT_SPACE);
			cap *= 2;
			out = realloc(out, cap);
			ck_assert_ptr_nonnull(out);
		}
		len += got;
		i += zl;
	}
	libdeflate_free_decompressor(d);
	*outn = len;
	return out;
}

/*
 * Many batches (30k launches: ~12 of 256 KiB, more than the ring of 3
 * workers holds): deflated on the walk's
 * thread, on 1 worker and on 3, the file is the same bytes, and its
 * batches inflated in order are the plain export.
 */
START_TEST(test_perfetto_workers)
{
	char trace[128], *plain, *z[3], *in;
	static const char *const nw[3] = { "0", "1", "3" };
	size_t pn, zn[3], inn;
	struct analysis *a;

	snprintf(trace, sizeof(trace), "%s/t.trace", dir);
	write_trace(trace, 30000, "AI_CORE");
	a = analyse(trace);
	setenv("MSPTI_PERFETTO_DEFLATE", "0", 1);
	plain = export_to(a, false, "plain.pb", &pn);
	unsetenv("MSPTI_PERFETTO_DEFLATE");
	for (int i = 0; i < 3; i++) {
		setenv("MSPTI_PERFETTO_THREADS", nw[i], 1);
		z[i] = export_to(a, false, "z.pb", &zn[i]);
	}
	unsetenv("MSPTI_PERFETTO_THREADS");
	ck_assert_msg(pn > 8 * (1 << 18), "plain export of %zu bytes", pn);
	ck_assert_uint_lt(zn[0] * 3, pn);
	for (int i = 1; i < 3; i++) {
		ck_assert_uint_eq(zn[i], zn[0]);
		ck_assert_msg(memcmp(z[i], z[0], zn[0]) == 0,
		    "%s workers: other bytes", nw[i]);
	}
	in = inflate_all(z[0], zn[0], &inn);
	ck_assert_uint_eq(inn, pn);
	ck_assert(memcmp(in, plain, pn) == 0);
	free(in);
	for (int i = 0; i < 3; i++)
		free(z[i]);
	free(plain);
	analysis_free(a);
}
END_TEST

/* A stream that takes `room` bytes, then fails every write (a full
 * disk), counting the writes tried after the first failure. */
struct full_disk {
	size_t	room, took;
	size_t	failed, calls_after;
};

static ssize_t
full_write(void *cookie, const char *b, size_t n)
{
	struct full_disk *d = cookie;

	(void)b;
	if (d->took + n <= d->room) {
		d->took += n;
		return (ssize_t)n;
	}
	if (d->failed++ > 0)
		d->calls_after++;
	errno = ENOSPC;
	return -1;
}

static void
export_full(struct analysis *a, bool chrome, struct full_disk *d)
{
	cookie_io_functions_t io = { NULL, full_write, NULL, NULL };
	FILE *f = fopencookie(d, "w", io);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_lt(chrome ? export_chrome(a, f) : export_perfetto(a, f),
	    0);
	fclose(f);
}

/*
 * A write that fails ends the export at once with an error: the old walk
 * went on through every record, each flush failing again, and said so
 * only at the end.  The disk fills after 64 KiB of exports of tens of
 * MiB; a few more flushes are tried (the walk and the overlap slices
 * check every 4096): here 2 and 5, on the old code 81 and 366.
 */
START_TEST(test_write_error_stops_early)
{
	char trace[128];
	struct analysis *a;

	snprintf(trace, sizeof(trace), "%s/t.trace", dir);
	write_trace(trace, 150000, "AI_CORE");
	a = analyse(trace);
	for (int chrome = 0; chrome < 2; chrome++) {
		struct full_disk d = { 64 << 10, 0, 0, 0 };

		if (!chrome)
			setenv("MSPTI_PERFETTO_DEFLATE", "0", 1);
		export_full(a, chrome, &d);
		unsetenv("MSPTI_PERFETTO_DEFLATE");
		ck_assert_uint_gt(d.failed, 0);
		ck_assert_msg(d.calls_after < 50, "%s: %zu writes tried after "
		    "the disk was full", chrome ? "chrome" : "perfetto",
		    d.calls_after);
	}
	analysis_free(a);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("export");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nf;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ascendpt_ratio_rounding);
	tcase_add_test(tc, test_string_arg_escaped);
	tcase_add_test(tc, test_perfetto_workers);
	tcase_add_test(tc, test_long_string_interned);
	tcase_add_test(tc, test_write_error_stops_early);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}

/* Unit tests for the trace writer and reader. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <zstd.h>

#include "trace.h"

static const struct trace_kv test_kv[] = {
	{ "kinds", "api,kernel" },
	{ "duration", "10s" },
	{ "empty", "" },
};

static struct rec_clock_sync test_clock;

static struct trace_header
test_header(void)
{
	struct trace_header h;

	REC_INIT(&test_clock, REC_CLOCK_SYNC, 0);
	test_clock.host_ref_ns = 1700000000000000000ull;
	test_clock.device_ref_ns = 42;
	test_clock.drift = 1e-6;
	test_clock.device = 3;
	memset(&h, 0, sizeof h);
	h.created_ns = 1700000000123456789ull;
	h.session_id = 77;
	h.hostname = "node-1";
	h.producer = "msptid test";
	h.config = test_kv;
	h.nconfig = 3;
	h.clocks = &test_clock;
	h.nclocks = 1;
	return h;
}

static int
memfd(void)
{
	int fd = memfd_create("trace", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	return fd;
}

/* A memfd holding the first len bytes of buf, positioned at 0. */
static int
memfd_with(const void *buf, size_t len)
{
	int fd = memfd();

	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	return fd;
}

/* The whole content of fd. */
static uint8_t *
slurp(int fd, size_t *lenp)
{
	struct stat sb;
	uint8_t *buf;

	ck_assert_int_eq(fstat(fd, &sb), 0);
	buf = malloc((size_t)sb.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)sb.st_size, 0), sb.st_size);
	*lenp = (size_t)sb.st_size;
	return buf;
}

/* splitmix64's finaliser: a random-looking word of i. */
static uint64_t
mix64(uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull;

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Sets the version and flags of the trace file header at buf, its CRC
 * made anew. */
static void
header_set(uint8_t *buf, uint16_t version, uint16_t flags)
{
	struct trace_file_hdr fh;

	memcpy(&fh, buf, sizeof fh);
	fh.version = version;
	fh.flags = flags;
	fh.crc = 0;
	memcpy(buf, &fh, sizeof fh);
	fh.crc = trace_crc32c(0, buf, fh.size);
	memcpy(buf, &fh, sizeof fh);
}

static void
make_api(struct rec_api *r, uint32_t pid, uint64_t i, uint32_t name)
{
	REC_INIT(r, REC_API, 0);
	r->start = 1700000000000000000ull + i * 1000;
	r->end = r->start + 500 + i % 17;
	r->correlation_id = i + 1;
	r->pid = pid;
	r->tid = pid + (uint32_t)(i % 4);
	r->name_id = name;
	r->kind = 3;
}

/* Writes n API records (pids alternate 100/200) and returns the fd;
 * async: through an async writer (its thread compresses and writes). */
static int
write_trace_mode(uint64_t n, struct trace_writer_stats *st, bool async)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	struct trace_footer f;
	struct rec_api r;
	uint32_t names[4];
	uint64_t i, bad = 0;
	int fd = memfd();

	if (async)
		ck_assert_int_eq(trace_writer_open_async(fd, &h, 0, 64u << 20,
		    &w), 0);
	else
		ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), 0);
	ck_assert_int_eq(trace_writer_intern(w, "aclrtLaunchKernel", 17,
	    &names[0]), 0);
	ck_assert_int_eq(trace_writer_intern(w, "aclrtMemcpy", 11, &names[1]),
	    0);
	ck_assert_int_eq(trace_writer_intern(w, "HcclAllReduce", 13,
	    &names[2]), 0);
	ck_assert_int_eq(trace_writer_intern(w, "aclrtMemcpy", 11, &names[3]),
	    0);
	ck_assert_uint_eq(names[1], names[3]);
	/* No ck_assert in loops this long: Check logs every call. */
	for (i = 0; i < n; i++) {
		make_api(&r, i & 1 ? 200 : 100, i, names[i % 3]);
		bad += trace_writer_add(w, &r) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	memset(&f, 0, sizeof f);
	f.end_ns = 1700000001000000000ull;
	f.losses[LOSS_AGENT_RING] = 5;
	f.losses[LOSS_DEVICE_CHANNEL] = 2;
	ck_assert_int_eq(trace_writer_close(w, &f, st), 0);
	return fd;
}

static int
write_trace(uint64_t n, struct trace_writer_stats *st)
{
	return write_trace_mode(n, st, false);
}

struct readout {
	uint64_t	records;
	uint64_t	api;
	uint64_t	per_pid[2];
	uint64_t	strings;
	uint64_t	invalid;
	int		errors;
	struct trace_reader_stats st;
};

/* Reads everything, going on past corrupt chunks. */
static int
read_all(int fd, struct readout *o)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	int rc, guard = 0;

	memset(o, 0, sizeof(*o));
	if ((rc = trace_reader_open_fd(fd, &r)) != 0)
		return rc;
	for (;;) {
		rc = trace_reader_next(r, &h);
		if (rc == 0)
			break;
		if (rc < 0) {
			o->errors++;
			ck_assert_str_ne(trace_reader_error(r), "");
			ck_assert_int_lt(++guard, 1000);
			continue;
		}
		o->records++;
		if (record_validate(h, h->size) != 0)
			o->invalid++;
		if (h->type == REC_STRING_DEF)
			o->strings++;
		if (h->type == REC_API) {
			const struct rec_api *a = (const void *)h;

			o->api++;
			o->per_pid[a->pid == 200]++;
			if (trace_reader_string(r, a->name_id) == NULL)
				o->invalid++;
		}
	}
	ck_assert_uint_eq(o->invalid, 0);
	trace_reader_get_stats(r, &o->st);
	trace_reader_close(r);
	return 0;
}

START_TEST(test_crc32c)
{
	ck_assert_uint_eq(trace_crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(trace_crc32c(trace_crc32c(0, "1234", 4),
	    "56789", 5), 0xE3069283u);
	ck_assert_uint_eq(trace_crc32c(0, "", 0), 0);
}
END_TEST

START_TEST(test_header_round_trip)
{
	struct trace_writer *w;
	struct trace_reader *r;
	const struct trace_header *h;
	const struct rec_hdr *rec;
	struct trace_header in = test_header();
	struct trace_writer_stats st;
	int fd = memfd();

	ck_assert_int_eq(trace_writer_open(fd, &in, 3, &w), 0);
	ck_assert_int_eq(trace_writer_close(w, NULL, &st), 0);
	ck_assert_uint_eq(st.records, 0);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	h = trace_reader_header(r);
	ck_assert_uint_eq(h->created_ns, in.created_ns);
	ck_assert_uint_eq(h->session_id, 77);
	ck_assert_str_eq(h->hostname, "node-1");
	ck_assert_str_eq(h->producer, "msptid test");
	ck_assert_uint_eq(h->nconfig, 3);
	ck_assert_str_eq(h->config[0].key, "kinds");
	ck_assert_str_eq(h->config[0].value, "api,kernel");
	ck_assert_str_eq(h->config[2].key, "empty");
	ck_assert_str_eq(h->config[2].value, "");
	ck_assert_uint_eq(h->nclocks, 1);
	ck_assert_int_eq(memcmp(&h->clocks[0], &test_clock, sizeof test_clock),
	    0);
	ck_assert_ptr_nonnull(trace_reader_footer(r));
	ck_assert_int_eq(trace_reader_next(r, &rec), 0);
	ck_assert_str_eq(trace_reader_string(r, 0), "");
	ck_assert_ptr_null(trace_reader_string(r, 1));
	trace_reader_close(r);
	close(fd);
}
END_TEST

/* One record of every type, written and read back byte for byte. */
START_TEST(test_all_types_round_trip)
{
	struct trace_header in = test_header();
	struct trace_writer *w;
	struct trace_reader *r;
	const struct rec_hdr *h;
	const struct trace_footer *f;
	uint64_t recs[REC_TYPE_MAX][10];
	unsigned types[REC_TYPE_MAX], nt = 0, i = 0, t;
	uint32_t id;
	int fd = memfd();

	memset(recs, 0, sizeof recs);
	for (t = 1; t < REC_TYPE_MAX; t++) {
		struct rec_hdr *rh = (void *)recs[t];

		if (record_size(t) == 0)
			continue;
		rec_hdr_set(rh, t, record_size(t), 0);
		/* Minimal fixes to make each record valid. */
		switch (t) {
		case REC_API: ((struct rec_api *)rh)->kind = 3; break;
		case REC_MARKER: ((struct rec_marker *)rh)->flag = 1; break;
		case REC_EXTERNAL_CORRELATION:
			((struct rec_external_correlation *)rh)->external_kind = 1;
			break;
		case REC_COUNTER: ((struct rec_counter *)rh)->track_id = 1; break;
		case REC_PROCESS:
			((struct rec_process *)rh)->rank = -1;
			((struct rec_process *)rh)->local_rank = -1;
			((struct rec_process *)rh)->world_size = -1;
			break;
		case REC_SESSION:
			rh->aux = SESSION_EV_STOP;
			((struct rec_session *)rh)->session_id = 9;
			break;
		case REC_HOST_CLOCK: rh->aux = HOST_CLOCK_REALTIME; break;
		}
		ck_assert_msg(record_validate(rh, rh->size) == 0, "type %u", t);
		types[nt++] = t;
	}
	ck_assert_int_eq(trace_writer_open(fd, &in, 0, &w), 0);
	ck_assert_int_eq(trace_writer_intern(w, "npu.util", 8, &id), 0);
	ck_assert_uint_eq(id, 1);
	for (i = 0; i < nt; i++)
		ck_assert_int_eq(trace_writer_add(w, recs[types[i]]), 0);
	/* PAD and invalid records are refused. */
	{
		uint64_t pad[2] = { REC_PAD | 16u << 16, 0 };
		struct rec_api bad;

		ck_assert_int_eq(trace_writer_add(w, pad), -EBADMSG);
		REC_INIT(&bad, REC_API, 0);
		ck_assert_int_eq(trace_writer_add(w, &bad), -EBADMSG);
	}
	ck_assert_int_eq(trace_writer_close(w, NULL, NULL), 0);

	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	ck_assert_int_eq(trace_reader_next(r, &h), 1);
	ck_assert_uint_eq(h->type, REC_STRING_DEF);
	ck_assert_str_eq(trace_reader_string(r, 1), "npu.util");
	for (i = 0; i < nt; i++) {
		ck_assert_int_eq(trace_reader_next(r, &h), 1);
		ck_assert_uint_eq(h->type, types[i]);
		ck_assert_int_eq(memcmp(h, recs[types[i]], h->size), 0);
	}
	ck_assert_int_eq(trace_reader_next(r, &h), 0);
	f = trace_reader_footer(r);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->records, nt + 1);
	for (i = 0; i < nt; i++)
		ck_assert_uint_eq(f->counts[types[i]], 1);
	ck_assert_uint_eq(f->counts[REC_STRING_DEF], 1);
	trace_reader_close(r);
	close(fd);
}
END_TEST

START_TEST(test_million)
{
	struct trace_writer_stats ws;
	struct trace_reader *r;
	const struct trace_footer *f;
	const struct trace_index_entry *ix;
	struct readout o;
	uint64_t sum = 0;
	size_t n, i;
	int fd;

	fd = write_trace(1000000, &ws);
	ck_assert_uint_eq(ws.records, 1000003);
	ck_assert_uint_eq(ws.lost, 0);
	ck_assert_uint_gt(ws.chunks, 10);
	ck_assert_int_eq(read_all(fd, &o), 0);
	ck_assert_uint_eq(o.records, 1000003);
	ck_assert_uint_eq(o.api, 1000000);
	ck_assert_uint_eq(o.per_pid[0], 500000);
	ck_assert_uint_eq(o.per_pid[1], 500000);
	ck_assert_uint_eq(o.strings, 3);
	ck_assert_int_eq(o.errors, 0);
	ck_assert(!o.st.truncated);
	ck_assert_uint_eq(o.st.chunks, ws.chunks);

	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	f = trace_reader_footer(r);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->records, 1000003);
	ck_assert_uint_eq(f->counts[REC_API], 1000000);
	ck_assert_uint_eq(f->counts[REC_STRING_DEF], 3);
	ck_assert_uint_eq(f->losses[LOSS_AGENT_RING], 5);
	ck_assert_uint_eq(f->losses[LOSS_DEVICE_CHANNEL], 2);
	ck_assert_uint_eq(f->losses[LOSS_DISK], 0);
	ck_assert_uint_eq(f->end_ns, 1700000001000000000ull);
	ix = trace_reader_index(r, &n);
	ck_assert_uint_eq(n, ws.chunks);
	for (i = 0; i < n; i++) {
		sum += ix[i].records;
		ck_assert_uint_le(ix[i].first_ts, ix[i].last_ts);
		if (i > 0)
			ck_assert_uint_gt(ix[i].offset, ix[i - 1].offset);
	}
	ck_assert_uint_eq(sum, 1000003);
	trace_reader_close(r);
	close(fd);
}
END_TEST

/*
 * An async writer (msptid's): its thread compresses each chunk and writes
 * it.  The file is byte for byte the one a synchronous writer makes of
 * the same records, and nothing is lost.
 */
START_TEST(test_async_same_bytes)
{
	struct trace_writer_stats ws, wa;
	uint8_t *b1, *b2;
	size_t n1, n2;
	int f1 = write_trace_mode(300000, &ws, false);
	int f2 = write_trace_mode(300000, &wa, true);

	ck_assert_uint_eq(wa.records, 300003);
	ck_assert_uint_eq(wa.lost, 0);
	ck_assert_uint_eq(wa.chunks, ws.chunks);
	ck_assert_uint_gt(wa.chunks, 3);
	b1 = slurp(f1, &n1);
	b2 = slurp(f2, &n2);
	ck_assert_uint_eq(n1, n2);
	ck_assert_int_eq(memcmp(b1, b2, n1), 0);
	free(b1);
	free(b2);
	close(f1);
	close(f2);
}
END_TEST

/* Cut the file at every chunk boundary, inside every chunk header and
 * payload, and inside the footer: every cut reads up to its last complete
 * chunk and says truncated. */
START_TEST(test_truncated)
{
	struct trace_writer_stats ws;
	struct trace_reader *r;
	const struct trace_index_entry *ix;
	struct readout o;
	uint8_t *buf;
	size_t len, n, i, c;
	uint64_t before, cuts[3], foot;
	int fd, cfd;

	fd = write_trace(150000, &ws);
	buf = slurp(fd, &len);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	ix = trace_reader_index(r, &n);
	ck_assert_uint_ge(n, 5);
	before = 0;
	for (i = 0; i <= n; i++) {
		uint64_t start = i < n ? ix[i].offset : 0;

		if (i == n) {
			/* Cuts in the footer and trailer. */
			foot = ix[n - 1].offset + 48;
			while (memcmp(buf + foot, TRACE_FOOTER_MAGIC, 8) != 0)
				foot++;
			cuts[0] = foot;
			cuts[1] = foot + 30;
			cuts[2] = len - 1;
		} else {
			cuts[0] = start;
			cuts[1] = start + 20;
			cuts[2] = (i + 1 < n ? ix[i + 1].offset : start + 100)
			    - 10;
		}
		for (c = 0; c < 3; c++) {
			cfd = memfd_with(buf, cuts[c]);
			ck_assert_int_eq(read_all(cfd, &o), 0);
			ck_assert_msg(o.records == before,
			    "cut at %llu: %llu records, expected %llu",
			    (unsigned long long)cuts[c],
			    (unsigned long long)o.records,
			    (unsigned long long)before);
			/* A cut in the trailer leaves the footer whole. */
			ck_assert(o.st.truncated || (i == n && c == 2));
			ck_assert_int_eq(o.errors, 0);
			close(cfd);
		}
		if (i < n)
			before += ix[i].records;
	}
	ck_assert_uint_eq(before, ws.records);
	/* Cuts inside the file header: not a readable trace. */
	for (c = 0; c < 200; c += 13) {
		struct trace_reader *r2;

		cfd = memfd_with(buf, c);
		ck_assert_int_lt(trace_reader_open_fd(cfd, &r2), 0);
		close(cfd);
	}
	trace_reader_close(r);
	free(buf);
	close(fd);
}
END_TEST

/* Flipped bytes in a payload, a chunk header, the footer or the file
 * header are all detected; the other chunks stay readable. */
START_TEST(test_corrupt)
{
	struct trace_writer_stats ws;
	struct trace_reader *r;
	const struct trace_index_entry *ix;
	struct readout o;
	uint8_t *buf;
	size_t len, n;
	uint64_t k_records, k_off, k2_off, k2_records;
	int fd, cfd;

	fd = write_trace(150000, &ws);
	buf = slurp(fd, &len);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	ix = trace_reader_index(r, &n);
	k_off = ix[2].offset;
	k_records = ix[2].records;
	k2_off = ix[3].offset;
	k2_records = ix[3].records;
	trace_reader_close(r);

	/* Payload byte. */
	buf[k_off + 48 + 100] ^= 0x40;
	cfd = memfd_with(buf, len);
	ck_assert_int_eq(read_all(cfd, &o), 0);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(o.st.corrupt_chunks, 1);
	ck_assert_uint_eq(o.records, ws.records - k_records);
	ck_assert(!o.st.truncated);
	close(cfd);
	buf[k_off + 48 + 100] ^= 0x40;

	/* Chunk header (size field): the reader scans to the next chunk. */
	buf[k_off + 17] ^= 0x01;
	cfd = memfd_with(buf, len);
	ck_assert_int_eq(read_all(cfd, &o), 0);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(o.records, ws.records - k_records);
	close(cfd);
	buf[k_off + 17] ^= 0x01;

	/* Two neighbouring chunks. */
	buf[k_off + 60] ^= 0xFF;
	buf[k2_off + 60] ^= 0xFF;
	cfd = memfd_with(buf, len);
	ck_assert_int_eq(read_all(cfd, &o), 0);
	ck_assert_int_eq(o.errors, 2);
	ck_assert_uint_eq(o.records, ws.records - k_records - k2_records);
	close(cfd);
	buf[k_off + 60] ^= 0xFF;
	buf[k2_off + 60] ^= 0xFF;

	/* Footer: no footer at open, an error at the end of the stream. */
	buf[len - 40] ^= 0x01;
	cfd = memfd_with(buf, len);
	ck_assert_int_eq(trace_reader_open_fd(cfd, &r), 0);
	ck_assert_ptr_null(trace_reader_footer(r));
	trace_reader_close(r);
	ck_assert_int_eq(read_all(cfd, &o), 0);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(o.records, ws.records);
	close(cfd);
	buf[len - 40] ^= 0x01;

	/* File header. */
	buf[30] ^= 0x01;
	cfd = memfd_with(buf, len);
	ck_assert_int_eq(read_all(cfd, &o), -EBADMSG);
	close(cfd);
	buf[30] ^= 0x01;
	/* A later version than ours does not read (older ones do:
	 * test_old_versions), nor one with a header flag we do not know. */
	for (int i = 0; i < 2; i++) {
		header_set(buf, TRACE_VERSION + (i == 0), TRACE_F_DELTA |
		    (i == 1 ? 0x2 : 0));
		cfd = memfd_with(buf, len);
		ck_assert_int_eq(read_all(cfd, &o), -EPROTO);
		close(cfd);
	}
	free(buf);
	close(fd);
}
END_TEST

/* Strings defined all along the file: losing a chunk loses its
 * definitions, not those of the chunks after it. */
START_TEST(test_corrupt_strings)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	struct trace_reader *r;
	const struct trace_index_entry *ix;
	const struct rec_hdr *rec;
	struct rec_kernel k;
	uint8_t *buf;
	size_t len, n;
	uint64_t i, got = 0, named = 0, bad = 0;
	uint32_t id;
	char s[32];
	int fd = memfd(), cfd, rc;

	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), 0);
	for (i = 0; i < 100000; i++) {
		snprintf(s, sizeof s, "k%llu", (unsigned long long)(i / 100));
		bad += trace_writer_intern(w, s, strlen(s), &id) != 0;
		REC_INIT(&k, REC_KERNEL, 0);
		k.name_id = id;
		bad += trace_writer_add(w, &k) != 0;
	}
	ck_assert_int_eq(trace_writer_close(w, NULL, NULL), 0);
	ck_assert_uint_eq(bad, 0);
	buf = slurp(fd, &len);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	ix = trace_reader_index(r, &n);
	ck_assert_uint_ge(n, 4);
	buf[ix[1].offset + 48 + 64] ^= 0x20;
	trace_reader_close(r);

	cfd = memfd_with(buf, len);
	ck_assert_int_eq(trace_reader_open_fd(cfd, &r), 0);
	while ((rc = trace_reader_next(r, &rec)) != 0) {
		if (rc < 0)
			continue;
		if (rec->type != REC_KERNEL)
			continue;
		got++;
		if (trace_reader_string(r,
		    ((const struct rec_kernel *)(const void *)rec)->name_id))
			named++;
	}
	/* Every kernel after the lost chunk has its name, except those
	 * whose name was defined in the lost chunk. */
	ck_assert_uint_lt(got, 100000);
	ck_assert_uint_gt(got, 100000 / n);
	ck_assert_uint_ge(named + 100, got);
	ck_assert_uint_lt(named, got + 1);
	{
		struct trace_reader_stats st;

		trace_reader_get_stats(r, &st);
		ck_assert_uint_eq(st.corrupt_chunks, 1);
		ck_assert_uint_eq(st.chunks, n - 1);
	}
	trace_reader_close(r);
	close(cfd);
	free(buf);
	close(fd);
}
END_TEST

/*
 * A chunk whose frame and CRCs are sound but one of whose records is not
 * (an API record with a nonzero aux): the serial reader and the read-ahead
 * threads both skip the whole chunk as corrupt, deliver none of its
 * records, and read the chunks after it.  The file is cut after chunk 2,
 * so the reader walks the chunks rather than the footer's index.
 */
START_TEST(test_invalid_record)
{
	struct trace_reader *r;
	const struct trace_index_entry *ix;
	struct trace_chunk_hdr ch;
	size_t len, n, rawlen, clen, at;
	uint8_t *buf, *raw, *comp, *out;
	struct rec_hdr *rh;
	int fd = write_trace(60000, NULL), cfd;

	buf = slurp(fd, &len);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	ix = trace_reader_index(r, &n);
	ck_assert_uint_ge(n, 3);
	/* Chunk 1, decompressed; an API record's aux set; recompressed. */
	memcpy(&ch, buf + ix[1].offset, sizeof ch);
	rawlen = ch.raw_size;
	raw = malloc(rawlen);
	comp = malloc(ZSTD_compressBound(rawlen));
	ck_assert_uint_eq(ZSTD_decompress(raw, rawlen, buf + ix[1].offset +
	    sizeof ch, ch.comp_size), rawlen);
	for (at = 0, rh = (void *)raw; rh->type != REC_API || at < 1000;
	    rh = (void *)(raw + at))
		at += rh->size;
	rh->aux = 1;
	clen = ZSTD_compress(comp, ZSTD_compressBound(rawlen), raw, rawlen, 1);
	ck_assert(!ZSTD_isError(clen));
	ch.comp_size = (uint32_t)clen;
	ch.data_crc = trace_crc32c(0, comp, clen);
	ch.hdr_crc = 0;
	ch.hdr_crc = trace_crc32c(0, &ch, sizeof ch);
	/* Header and chunk 0, the new chunk 1, chunk 2 as it was. */
	out = malloc(len + clen);
	at = ix[1].offset;
	memcpy(out, buf, at);
	memcpy(out + at, &ch, sizeof ch);
	memcpy(out + at + sizeof ch, comp, clen);
	at += sizeof ch + clen;
	memcpy(out + at, buf + ix[2].offset, ix[3].offset - ix[2].offset);
	at += ix[3].offset - ix[2].offset;
	for (unsigned threads = 0; threads <= 2; threads += 2) {
		struct readout o;
		struct trace_reader *q;
		const struct rec_hdr *h;
		uint64_t got = 0;
		int rc;

		cfd = memfd_with(out, at);
		ck_assert_int_eq(trace_reader_open_fd(cfd, &q), 0);
		ck_assert_int_eq(trace_reader_set_threads(q, threads), 0);
		memset(&o, 0, sizeof o);
		while ((rc = trace_reader_next(q, &h)) != 0) {
			if (rc < 0) {
				ck_assert_int_eq(rc, -EBADMSG);
				ck_assert_ptr_nonnull(strstr(
				    trace_reader_error(q), "invalid records"));
				o.errors++;
				continue;
			}
			got++;
		}
		trace_reader_get_stats(q, &o.st);
		ck_assert_int_eq(o.errors, 1);
		ck_assert_uint_eq(o.st.corrupt_chunks, 1);
		ck_assert_uint_eq(o.st.chunks, 2);
		ck_assert_uint_eq(got, ix[0].records + ix[2].records);
		trace_reader_close(q);
		close(cfd);
	}
	trace_reader_close(r);
	free(out);
	free(comp);
	free(raw);
	free(buf);
	close(fd);
}
END_TEST

/* What a reader delivers: every return code, record byte and resolved
 * name, hashed in order, and its stats at the end. */
struct digest {
	uint64_t	h, records, errors;
	struct trace_reader_stats st;
};

static void
dig(struct digest *d, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d->h = (d->h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
}

static void
read_digest(int fd, unsigned threads, struct digest *d)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	int rc, guard = 0;

	memset(d, 0, sizeof(*d));
	d->h = 14695981039346656037ull;
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	ck_assert_int_eq(trace_reader_set_threads(r, threads), 0);
	while ((rc = trace_reader_next(r, &h)) != 0) {
		dig(d, &rc, sizeof(rc));
		if (rc < 0) {
			const char *e = trace_reader_error(r);

			dig(d, e, strlen(e));
			d->errors++;
			ck_assert_int_lt(++guard, 1000);
			continue;
		}
		dig(d, h, h->size);
		d->records++;
		if (h->type == REC_KERNEL || h->type == REC_API) {
			uint32_t id = h->type == REC_KERNEL ?
			    ((const struct rec_kernel *)(const void *)h)->name_id :
			    ((const struct rec_api *)(const void *)h)->name_id;
			const char *s = trace_reader_string(r, id);

			dig(d, s ? s : "(null)", s ? strlen(s) : 6);
		}
	}
	trace_reader_get_stats(r, &d->st);
	trace_reader_close(r);
}

static uint64_t
chunk_sum(const struct trace_chunk *c)
{
	struct digest d = { .h = 14695981039346656037ull };

	dig(&d, c->data, c->len);
	return d.h;
}

/*
 * read_digest through trace_reader_next_chunk: the caller holds the last
 * `hold` chunks (done in order as it takes more), as a report's analysing
 * threads do; names are resolved when their chunk comes.
 */
static void
read_digest_chunks(int fd, unsigned threads, unsigned hold, struct digest *d)
{
	struct trace_reader *r;
	struct trace_chunk held[8], c;
	uint64_t sums[8];
	unsigned nheld = 0;
	int rc, guard = 0;

	ck_assert_uint_le(hold, 8);
	memset(d, 0, sizeof(*d));
	d->h = 14695981039346656037ull;
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	trace_reader_hold(r, hold);
	ck_assert_int_eq(trace_reader_set_threads(r, threads), 0);
	while ((rc = trace_reader_next_chunk(r, &c)) != 0) {
		if (rc < 0) {
			const char *e = trace_reader_error(r);

			dig(d, &rc, sizeof(rc));
			dig(d, e, strlen(e));
			d->errors++;
			ck_assert_int_lt(++guard, 1000);
			continue;
		}
		ck_assert_uint_gt(c.records, 0);
		for (size_t at = 0, k = 0; at < c.len; k++) {
			const struct rec_hdr *h = (const void *)(c.data + at);

			ck_assert_uint_lt(k, c.records);
			dig(d, &rc, sizeof(rc));
			dig(d, h, h->size);
			d->records++;
			if (h->type == REC_KERNEL) {
				const char *s = trace_reader_string(r,
				    ((const struct rec_kernel *)(const void *)
				    h)->name_id);

				dig(d, s ? s : "(null)", s ? strlen(s) : 6);
			}
			at += h->size;
		}
		if (nheld == hold) {
			if (hold == 0) {
				trace_reader_chunk_done(r, &c);
				continue;
			}
			/* The oldest's bytes are intact while held, however
			 * far the read-ahead went since. */
			ck_assert_uint_eq(chunk_sum(&held[0]), sums[0]);
			trace_reader_chunk_done(r, &held[0]);
			memmove(held, held + 1, (hold - 1) * sizeof(held[0]));
			memmove(sums, sums + 1, (hold - 1) * sizeof(sums[0]));
			nheld--;
		}
		sums[nheld] = chunk_sum(&c);
		held[nheld++] = c;
	}
	while (nheld > 0) {
		nheld--;
		ck_assert_uint_eq(chunk_sum(&held[nheld]), sums[nheld]);
		trace_reader_chunk_done(r, &held[nheld]);
	}
	trace_reader_get_stats(r, &d->st);
	trace_reader_close(r);
}

/* Read-ahead threads deliver what the serial reader does, on a clean
 * file and on damaged ones (bad payload, bad chunk header, two bad
 * neighbours, lost string definitions, a cut file, no footer). */
START_TEST(test_threads)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	struct trace_reader *r;
	const struct trace_index_entry *ix;
	struct rec_kernel k;
	struct digest d0, d1;
	uint8_t *buf;
	size_t len, n;
	uint32_t id;
	uint64_t bad = 0;
	char s[32];
	int fd = memfd(), cfd;
	static const unsigned th[] = { 1, 2, 5 };

	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), 0);
	for (uint64_t i = 0; i < 200000; i++) {
		snprintf(s, sizeof s, "k%llu", (unsigned long long)(i / 50));
		bad += trace_writer_intern(w, s, strlen(s), &id) != 0;
		REC_INIT(&k, REC_KERNEL, 0);
		k.name_id = id;
		k.start = i;
		k.end = i + 10;
		bad += trace_writer_add(w, &k) != 0;
	}
	ck_assert_int_eq(trace_writer_close(w, NULL, NULL), 0);
	ck_assert_uint_eq(bad, 0);
	buf = slurp(fd, &len);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	ix = trace_reader_index(r, &n);
	ck_assert_uint_ge(n, 8);
	for (int v = 0; v < 7; v++) {
		uint8_t *b = malloc(len);
		size_t l = len;

		memcpy(b, buf, len);
		switch (v) {
		case 1: b[ix[2].offset + 48 + 100] ^= 0x40; break;
		case 2: b[ix[3].offset + 17] ^= 0x01; break;
		case 3:
			b[ix[4].offset + 60] ^= 0xff;
			b[ix[5].offset + 60] ^= 0xff;
			break;
		case 4: b[ix[1].offset + 48 + 64] ^= 0x20; break;
		case 5: l = ix[n - 2].offset + 200; break;
		case 6: b[len - 40] ^= 0x01; break;
		default: break;
		}
		cfd = memfd_with(b, l);
		read_digest(cfd, 0, &d0);
		ck_assert_uint_gt(d0.records, 1000);
		/* The workers' buffers evicted before reuse, never, or as
		 * each worker measures (MSPTI_READER_EVICT): the same. */
		for (size_t t = 0; t < 3 * sizeof(th) / sizeof(th[0]); t++) {
			static const char *ev[] = { NULL, "0", "1" };
			unsigned nt = th[t % (sizeof(th) / sizeof(th[0]))];
			const char *e = ev[t / (sizeof(th) / sizeof(th[0]))];

			if (e != NULL)
				setenv("MSPTI_READER_EVICT", e, 1);
			read_digest(cfd, nt, &d1);
			unsetenv("MSPTI_READER_EVICT");
			ck_assert_msg(d1.h == d0.h && d1.records == d0.records &&
			    d1.errors == d0.errors, "variant %d, %u threads, "
			    "evict %s: %llu records, %llu errors; serial %llu, "
			    "%llu", v, nt, e ? e : "measured",
			    (unsigned long long)d1.records,
			    (unsigned long long)d1.errors,
			    (unsigned long long)d0.records,
			    (unsigned long long)d0.errors);
			ck_assert(memcmp(&d1.st, &d0.st, sizeof(d0.st)) == 0);
		}
		/* Whole chunks, held a while: the same records, errors and
		 * names (in a chunk whose records are all kernels). */
		for (size_t t = 0; t < 4; t++) {
			static const unsigned ht[][2] = { { 0, 0 }, { 0, 2 },
			    { 1, 1 }, { 2, 3 } };

			read_digest(cfd, 0, &d0);
			read_digest_chunks(cfd, ht[t][0], ht[t][1], &d1);
			ck_assert_msg(d1.h == d0.h && d1.records == d0.records &&
			    d1.errors == d0.errors, "variant %d, chunks, %u "
			    "threads, %u held: %llu records, %llu errors; "
			    "serial %llu, %llu", v, ht[t][0], ht[t][1],
			    (unsigned long long)d1.records,
			    (unsigned long long)d1.errors,
			    (unsigned long long)d0.records,
			    (unsigned long long)d0.errors);
			ck_assert(memcmp(&d1.st, &d0.st, sizeof(d0.st)) == 0);
		}
		close(cfd);
		free(b);
	}
	trace_reader_close(r);
	free(buf);
	close(fd);
}
END_TEST

/* Writer to a pipe, reader from a pipe: streaming both ways. */
START_TEST(test_pipe)
{
	struct readout o;
	int p[2], status;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct trace_header h = test_header();
		struct trace_writer *w;
		struct rec_api a;
		uint64_t i;

		close(p[0]);
		if (trace_writer_open(p[1], &h, 0, &w) != 0)
			_exit(1);
		for (i = 0; i < 100000; i++) {
			make_api(&a, 100, i, 0);
			if (trace_writer_add(w, &a) != 0)
				_exit(2);
		}
		_exit(trace_writer_close(w, NULL, NULL) != 0 ? 3 : 0);
	}
	close(p[1]);
	ck_assert_int_eq(read_all(p[0], &o), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(o.records, 100000);
	ck_assert(!o.st.truncated);
	close(p[0]);
}
END_TEST

START_TEST(test_dev_full)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);

	if (fd == -1)
		return;
	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), -ENOSPC);
	ck_assert_ptr_null(w);
	ck_assert_str_eq(trace_strerror(-ENOSPC),
	    "no space left on device (trace incomplete)");
	close(fd);
}
END_TEST

/* Writes until the file system refuses, then checks the error, the loss
 * count and that the file reads back with what was written. */
static void
fill_until_error(int fd, int expect)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	struct trace_writer_stats st;
	struct trace_footer f;
	struct readout o;
	struct rec_api a;
	uint64_t i, added = 0, extra = 0;
	int rc = 0, err = 0;

	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), 0);
	for (i = 0; i < 3000000 && extra < 1000; i++) {
		/* Poorly compressible, so that the limit is reached:
		 * random, not only varying (the chunks are delta-coded). */
		make_api(&a, 100, i, 0);
		a.correlation_id = mix64(i);
		a.tid = (uint32_t)(a.correlation_id >> 32);
		a.end = a.start + (a.correlation_id >> 40);
		rc = trace_writer_add(w, &a);
		added++;
		if (rc != 0) {
			if (err == 0)
				err = rc;
			extra++;
		}
	}
	ck_assert_int_eq(err, expect);
	memset(&f, 0, sizeof f);
	rc = trace_writer_close(w, &f, &st);
	ck_assert_int_eq(rc, expect);
	ck_assert_uint_gt(st.lost, 0);
	ck_assert_uint_eq(st.records + st.lost, added);
	ck_assert_int_eq(read_all(fd, &o), 0);
	ck_assert_uint_eq(o.records, st.records);
	ck_assert_int_eq(o.errors, 0);
	/* The footer fit: the loss is in the file. */
	if (!o.st.truncated) {
		struct trace_reader *r;

		ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
		ck_assert_uint_eq(trace_reader_footer(r)->losses[LOSS_DISK],
		    st.lost);
		trace_reader_close(r);
	}
}

START_TEST(test_file_size_limit)
{
	struct rlimit rl = { 3u << 20, 3u << 20 }, old;
	int fd = memfd();

	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	fill_until_error(fd, -EFBIG);
	setrlimit(RLIMIT_FSIZE, &old);
	close(fd);
}
END_TEST

/* A real full file system: a small tmpfs in a private mount namespace,
 * when we may mount (root); otherwise nothing to do here. */
START_TEST(test_tmpfs_full)
{
	char dir[] = "/tmp/check_trace.XXXXXX", path[64];
	int fd;

	if (geteuid() != 0 || mkdtemp(dir) == NULL)
		return;
	if (unshare(CLONE_NEWNS) != 0 ||
	    mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=2m") != 0) {
		rmdir(dir);
		return;
	}
	snprintf(path, sizeof path, "%s/t.trace", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	fill_until_error(fd, -ENOSPC);
	close(fd);
	umount(dir);
	rmdir(dir);
}
END_TEST


/* A record of type t and n words at *p, its words after the header from
 * mix64(seed, ...); returns the next place. */
static uint64_t *
put_rec(uint64_t *p, unsigned t, unsigned n, uint64_t seed)
{
	rec_hdr_set((struct rec_hdr *)(void *)p, t, (uint16_t)(n * 8), 0);
	for (unsigned i = 1; i < n; i++)
		p[i] = seed == 0 ? 0 : mix64(seed * 31 + i);
	return p + n;
}

/* The delta coding: in place, exact both ways, whatever the types, sizes
 * (shorter and longer than the previous of a type, longer than the coded
 * words) and contents; words of a record equal to the previous of its type
 * code to 0; a size that does not frame the buffer is refused. */
START_TEST(test_delta_coding)
{
	uint64_t buf[512], orig[512], *p = buf;
	size_t len;

	p = put_rec(p, REC_KERNEL, 8, 1);
	p = put_rec(p, REC_API, 7, 2);
	p = put_rec(p, REC_KERNEL, 8, 1);	/* the same as the first */
	p = put_rec(p, REC_STRING_DEF, 5, 3);	/* not coded */
	p = put_rec(p, 50, 4, 4);
	p = put_rec(p, 50, 9, 5);		/* longer than the previous */
	p = put_rec(p, 50, 3, 6);		/* shorter */
	p = put_rec(p, 70, 6, 7);		/* type past the coded ones */
	p = put_rec(p, REC_API, 20, 8);		/* past TRACE_DELTA_WORDS */
	p = put_rec(p, REC_API, 20, 8);
	p = put_rec(p, REC_MARKER, 1, 0);	/* a header alone */
	len = (size_t)(p - buf) * 8;
	memcpy(orig, buf, len);
	trace_delta_encode(buf, len);
	ck_assert_int_ne(memcmp(buf, orig, len), 0);
	/* The header words are left alone; the repeated kernel's other
	 * words, and the first 15 of the repeated long API, are 0. */
	for (uint64_t *q = buf; q < p; q += ((struct rec_hdr *)q)->size / 8)
		ck_assert_uint_eq(q[0], orig[q - buf]);
	for (unsigned i = 1; i < 8; i++)
		ck_assert_uint_eq(buf[8 + 7 + i], 0);
	{
		uint64_t *a2 = p - 1 - 20, *o2 = orig + (a2 - buf);

		for (unsigned i = 1; i < 16; i++)
			ck_assert_uint_eq(a2[i], 0);
		for (unsigned i = 16; i < 20; i++)
			ck_assert_uint_eq(a2[i], o2[i]);
	}
	/* The string and the unknown type are stored as they are. */
	ck_assert_int_eq(memcmp(buf + 23, orig + 23, 5 * 8), 0);
	ck_assert_int_eq(memcmp(buf + 23 + 5 + 4 + 9 + 3, orig + 23 + 5 + 4 +
	    9 + 3, 6 * 8), 0);
	ck_assert_int_eq(trace_delta_decode(buf, len), 0);
	ck_assert_int_eq(memcmp(buf, orig, len), 0);

	/* Bad framing: a size that is no multiple of 8, one past the end,
	 * and a tail shorter than a header. */
	trace_delta_encode(buf, len);
	((struct rec_hdr *)(void *)(buf + 8))->size = 52;
	ck_assert_int_eq(trace_delta_decode(buf, len), -EBADMSG);
	memcpy(buf, orig, len);
	((struct rec_hdr *)(void *)(buf + 8))->size = (uint16_t)(len + 8);
	ck_assert_int_eq(trace_delta_decode(buf, len), -EBADMSG);
	((struct rec_hdr *)(void *)(buf + 8))->size = 0;
	ck_assert_int_eq(trace_delta_decode(buf, len), -EBADMSG);
	memcpy(buf, orig, len);
	ck_assert_int_eq(trace_delta_decode(buf, 4), -EBADMSG);
	ck_assert_int_eq(trace_delta_decode(buf, 0), 0);
}
END_TEST

/* A chunk of kernels and API calls, each after one of its type (what
 * trace_chunk_decode takes its short way for): decoded to what was coded,
 * and a bad field in any of them refused as in a record alone. */
enum { CD_N = 6, CD_BAD = 4 };

static size_t
cd_chunk(uint64_t *buf, int bad)
{
	uint8_t *b = (uint8_t *)buf;
	size_t p = 0;

	for (int i = 0; i < CD_N; i++) {
		struct rec_kernel k;
		struct rec_api a;

		memset(&k, 0, sizeof(k));
		rec_hdr_set(&k.hdr, REC_KERNEL, sizeof(k), REC_F_DEVICE_CLOCK);
		k.start = 1000 + 100 * (uint64_t)i;
		k.end = k.start + 50 + (uint64_t)i;
		k.correlation_id = 7 + (uint64_t)i;
		k.pid = 42;
		k.name_id = 1 + (uint32_t)i % 2;
		memset(&a, 0, sizeof(a));
		rec_hdr_set(&a.hdr, REC_API, sizeof(a), 0);
		a.start = 990 + 100 * (uint64_t)i;
		a.end = a.start + 5;
		a.correlation_id = k.correlation_id;
		a.pid = 42;
		a.kind = i % 2 ? 3 : 10;
		a.domain = 2;
		if (i == CD_BAD) {
			switch (bad) {
			case 1: k.reserved = 1; break;
			case 2: k.end = k.start - 1; break;
			case 3: k.hdr.aux = 0x10; break;
			case 4: a.kind = 4; break;
			case 5: a.kind = 13; break;
			case 6: a.domain = 3; break;
			case 7: a.reserved = 9; break;
			case 8: a.end = a.start - 1; break;
			case 9: a.hdr.aux = 1; break;
			}
		}
		memcpy(b + p, &k, sizeof(k));
		p += sizeof(k);
		memcpy(b + p, &a, sizeof(a));
		p += sizeof(a);
	}
	return p;
}

START_TEST(test_chunk_decode_checks)
{
	uint64_t buf[2 * CD_N * 8], orig[2 * CD_N * 8];
	uint32_t nrec = 0, ndefs = 9;
	size_t len = cd_chunk(orig, 0);

	memcpy(buf, orig, len);
	trace_delta_encode(buf, len);
	ck_assert_int_eq(trace_chunk_decode(buf, len, true, &nrec, &ndefs), 0);
	ck_assert_uint_eq(nrec, 2 * CD_N);
	ck_assert_uint_eq(ndefs, 0);
	ck_assert_int_eq(memcmp(buf, orig, len), 0);
	for (int bad = 1; bad <= 9; bad++) {
		ck_assert_uint_eq(cd_chunk(buf, bad), len);
		trace_delta_encode(buf, len);
		ck_assert_msg(trace_chunk_decode(buf, len, true, &nrec,
		    &ndefs) == -EBADMSG, "bad field %d taken", bad);
		/* Not coded, the same. */
		cd_chunk(buf, bad);
		ck_assert_msg(trace_chunk_decode(buf, len, false, &nrec,
		    &ndefs) == -EBADMSG, "bad field %d taken uncoded", bad);
	}
	/* A chunk that ends inside its last API call or kernel: refused,
	 * and nothing read past its end (a buffer of its size, for the
	 * sanitizer build). */
	for (size_t i = 0; i < 5; i++) {
		static const size_t cut[] = { 8, 16, sizeof(struct rec_api) -
		    8, sizeof(struct rec_api) + 8, sizeof(struct rec_api) +
		    sizeof(struct rec_kernel) - 8 };
		size_t n = len - cut[i];

		for (int coded = 0; coded < 2; coded++) {
			uint8_t *t = malloc(n);

			ck_assert_ptr_nonnull(t);
			memcpy(buf, orig, len);
			if (coded)
				trace_delta_encode(buf, len);
			memcpy(t, buf, n);
			ck_assert_msg(trace_chunk_decode(t, n, coded, &nrec,
			    &ndefs) == -EBADMSG, "chunk cut %zu bytes short "
			    "taken (coded %d)", cut[i], coded);
			free(t);
		}
	}
}
END_TEST

static int	old_version_of(int fd, uint16_t version);

/* A file as this version writes it: version 3, delta-coded chunks; and
 * records that vary as a real capture's do (times with jitter, ids that
 * count up, threads that alternate) take under 60 % of the bytes that zstd
 * alone takes on them (the same chunks not delta-coded). */
START_TEST(test_delta_file)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	struct trace_file_hdr fh;
	struct rec_api a;
	struct rec_kernel k;
	struct readout o;
	struct stat sb, osb;
	uint64_t t = 1700000000000000000ull, bad = 0;
	int fd = memfd(), ofd;

	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), 0);
	for (uint64_t i = 0; i < 200000; i++) {
		uint64_t x = mix64(i);

		REC_INIT(&a, REC_API, 0);
		a.start = t;
		a.end = t + 1800 + x % 400;
		a.correlation_id = i + 1;
		a.pid = 100;
		a.tid = 100 + (uint32_t)(i & 1);
		a.name_id = 0;
		a.kind = 3;
		REC_INIT(&k, REC_KERNEL, 0);
		k.start = a.end + 3000 + (x >> 16) % 2000;
		k.end = k.start + 9000 + (x >> 32) % 2000;
		k.correlation_id = i + 1;
		k.pid = 100;
		k.tid = a.tid;
		k.device = 0;
		k.stream = 2;
		k.task_id = (uint32_t)i;
		t += 9000 + (x >> 40) % 2000;
		bad += trace_writer_add(w, &a) != 0;
		bad += trace_writer_add(w, &k) != 0;
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(trace_writer_close(w, NULL, NULL), 0);
	ck_assert_int_eq(pread(fd, &fh, sizeof fh, 0), (ssize_t)sizeof fh);
	ck_assert_uint_eq(fh.version, 3);
	ck_assert_uint_eq(fh.flags, TRACE_F_DELTA);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	ofd = old_version_of(fd, 2);
	ck_assert_int_eq(fstat(ofd, &osb), 0);
	close(ofd);
	ck_assert_msg(sb.st_size * 10 < osb.st_size * 6, "%.2f bytes a "
	    "record, %.2f not delta-coded", (double)sb.st_size / 400000,
	    (double)osb.st_size / 400000);
	ck_assert_int_eq(read_all(fd, &o), 0);
	ck_assert_uint_eq(o.records, 400000);
	ck_assert_int_eq(o.errors, 0);
	close(fd);
}
END_TEST

/*
 * fd's trace as an older writer made it: each chunk decoded and
 * compressed again, the header's version set to version and its flags
 * cleared, and no footer (a cut file).  The new fd.
 */
static int
old_version_of(int fd, uint16_t version)
{
	struct trace_file_hdr fh;
	struct trace_chunk_hdr ch;
	uint8_t *buf, *out, *raw;
	size_t len, off, o;
	int ofd;

	buf = slurp(fd, &len);
	out = malloc(len * 4 + (1u << 20));
	raw = malloc(TRACE_CHUNK_MAX);
	ck_assert(out != NULL && raw != NULL);
	memcpy(&fh, buf, sizeof fh);
	memcpy(out, buf, fh.size);
	header_set(out, version, 0);
	off = o = fh.size;
	for (;;) {
		size_t got, comp;

		memcpy(&ch, buf + off, sizeof ch);
		if (ch.magic != TRACE_CHUNK_MAGIC)
			break;
		got = ZSTD_decompress(raw, TRACE_CHUNK_MAX, buf + off +
		    sizeof ch, ch.comp_size);
		ck_assert_uint_eq(got, ch.raw_size);
		ck_assert_int_eq(trace_delta_decode(raw, got), 0);
		off += sizeof ch + ch.comp_size;
		comp = ZSTD_compress(out + o + sizeof ch, len * 4, raw, got, 1);
		ck_assert(!ZSTD_isError(comp));
		ch.comp_size = (uint32_t)comp;
		ch.data_crc = trace_crc32c(0, out + o + sizeof ch, comp);
		ch.hdr_crc = 0;
		ch.hdr_crc = trace_crc32c(0, &ch, sizeof ch);
		memcpy(out + o, &ch, sizeof ch);
		o += sizeof ch + comp;
	}
	ofd = memfd_with(out, o);
	free(raw);
	free(out);
	free(buf);
	return ofd;
}

/* Files of versions 1 and 2 (chunks not delta-coded) read as before, record
 * for record. */
START_TEST(test_old_versions)
{
	struct trace_writer_stats ws;
	struct trace_reader *r3, *r;
	const struct rec_hdr *h3, *h;
	uint64_t n = 0, diff = 0;
	int fd = write_trace(100000, &ws), ofd, rc;

	for (uint16_t v = 1; v <= 2; v++) {
		ofd = old_version_of(fd, v);
		ck_assert_int_eq(trace_reader_open_fd(fd, &r3), 0);
		ck_assert_int_eq(trace_reader_open_fd(ofd, &r), 0);
		n = diff = 0;
		while ((rc = trace_reader_next(r3, &h3)) == 1) {
			if (trace_reader_next(r, &h) != 1 ||
			    h->size != h3->size ||
			    memcmp(h, h3, h3->size) != 0)
				diff++;
			n++;
		}
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(trace_reader_next(r, &h), 0);
		ck_assert_uint_eq(diff, 0);
		ck_assert_uint_eq(n, ws.records);
		trace_reader_close(r3);
		trace_reader_close(r);
		close(ofd);
	}
	close(fd);
}
END_TEST

START_TEST(test_misuse)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	struct trace_reader *r;
	int fd = memfd();

	ck_assert_int_eq(write(fd, "x", 1), 1);
	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), -EINVAL);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), -EPROTO);
	ck_assert_int_eq(trace_reader_open("/nonexistent/x", &r), -ENOENT);
	close(fd);
}
END_TEST

/* Many distinct strings: ids are dense and the reader resolves each. */
START_TEST(test_many_strings)
{
	struct trace_header h = test_header();
	struct trace_writer *w;
	struct trace_reader *r;
	const struct rec_hdr *rec;
	char s[32];
	uint32_t id, i, bad = 0;
	int fd = memfd(), n;

	ck_assert_int_eq(trace_writer_open(fd, &h, 0, &w), 0);
	for (i = 0; i < 50000; i++) {
		n = snprintf(s, sizeof s, "kernel_%u", i);
		bad += trace_writer_intern(w, s, (size_t)n, &id) != 0 ||
		    id != i + 1;
	}
	for (i = 0; i < 50000; i += 7) {
		n = snprintf(s, sizeof s, "kernel_%u", i);
		bad += trace_writer_intern(w, s, (size_t)n, &id) != 0 ||
		    id != i + 1;
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(trace_writer_intern(w, "", 0, &id), 0);
	ck_assert_uint_eq(id, 0);
	ck_assert_int_eq(trace_writer_close(w, NULL, NULL), 0);
	ck_assert_int_eq(trace_reader_open_fd(fd, &r), 0);
	while (trace_reader_next(r, &rec) == 1)
		;
	for (i = 0; i < 50000; i += 999) {
		snprintf(s, sizeof s, "kernel_%u", i);
		ck_assert_str_eq(trace_reader_string(r, i + 1), s);
	}
	ck_assert_ptr_null(trace_reader_string(r, 50001));
	trace_reader_close(r);
	close(fd);
}
END_TEST

static Suite *
trace_suite(void)
{
	Suite *s = suite_create("trace");
	TCase *tc = tcase_create("trace");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_crc32c);
	tcase_add_test(tc, test_header_round_trip);
	tcase_add_test(tc, test_all_types_round_trip);
	tcase_add_test(tc, test_million);
	tcase_add_test(tc, test_async_same_bytes);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_corrupt);
	tcase_add_test(tc, test_corrupt_strings);
	tcase_add_test(tc, test_invalid_record);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_pipe);
	tcase_add_test(tc, test_dev_full);
	tcase_add_test(tc, test_file_size_limit);
	tcase_add_test(tc, test_tmpfs_full);
	tcase_add_test(tc, test_misuse);
	tcase_add_test(tc, test_delta_coding);
	tcase_add_test(tc, test_chunk_decode_checks);
	tcase_add_test(tc, test_delta_file);
	tcase_add_test(tc, test_old_versions);
	tcase_add_test(tc, test_many_strings);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(trace_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

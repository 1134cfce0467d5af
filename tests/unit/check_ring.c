/* Unit tests for lib/ring.c: producers, consumer, drops, hostile memory. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ring.h"

/* A ring and a second raw mapping of it, to play the hostile producer. */
struct fixture {
	int		 fd;
	struct ring	*ring;
	uint8_t		*raw;
	size_t		 rawlen;
};

static void
fx_open(struct fixture *fx, size_t cap)
{
	ck_assert_int_eq(ring_create(cap, &fx->fd), 0);
	ck_assert_int_eq(ring_map(fx->fd, &fx->ring), 0);
	fx->rawlen = RING_HDR_SIZE + cap;
	fx->raw = mmap(NULL, fx->rawlen, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fx->fd, 0);
	ck_assert_ptr_ne(fx->raw, MAP_FAILED);
}

static void
fx_close(struct fixture *fx)
{
	ring_unmap(fx->ring);
	munmap(fx->raw, fx->rawlen);
	close(fx->fd);
}

static uint64_t *
raw64(struct fixture *fx, size_t off)
{
	return (uint64_t *)(void *)(fx->raw + off);
}

/* An API record tagged with its producer and sequence number. */
static void
make_api(struct rec_api *r, uint32_t producer, uint64_t seq)
{
	REC_INIT(r, REC_API, 0);
	r->start = seq;
	r->end = seq + 1;
	r->correlation_id = seq;
	r->pid = producer;
	r->tid = producer;
	r->kind = 3;
}

/* Counts records, checks each producer's sequence is 0, 1, 2, ... */
struct sink {
	uint64_t	 n;
	uint64_t	 next[16];
	int		 bad;
};

static int
sink_cb(const struct rec_hdr *h, void *arg)
{
	struct sink *s = arg;
	const struct rec_api *r = (const void *)h;

	if (record_validate(h, h->size) != 0)
		s->bad++;
	if (h->type == REC_API && r->pid < 16) {
		if (r->correlation_id != s->next[r->pid])
			s->bad++;
		s->next[r->pid] = r->correlation_id + 1;
	}
	s->n++;
	return 0;
}

/* Counts records; an invalid one counts as a million, failing the test
 * (no ck_assert here: Check logs every call). */
static int
count_cb(const struct rec_hdr *h, void *arg)
{
	*(uint64_t *)arg += record_validate(h, h->size) == 0 ? 1 : 1000000;
	return 0;
}

START_TEST(test_create_map)
{
	struct ring *r;
	int fd, fd2;

	ck_assert_int_eq(ring_create(1000, &fd), -EINVAL);
	ck_assert_int_eq(ring_create(2048, &fd), -EINVAL);
	ck_assert_int_eq(ring_create(RING_MAX_CAPACITY * 2, &fd), -EINVAL);
	ck_assert_int_eq(ring_create(4096, NULL), -EINVAL);
	ck_assert_int_eq(ring_create(65536, &fd), 0);
	ck_assert_int_eq(ring_map(fd, &r), 0);
	ck_assert_uint_eq(ring_max_record(r), REC_MAX_SIZE);
	ring_unmap(r);
	ring_unmap(NULL);
	/* Seals: the file cannot shrink under the consumer. */
	ck_assert_int_eq(ftruncate(fd, 4096), -1);
	close(fd);

	/* An unsealed memfd is refused, and so is a wrong magic. */
	fd2 = memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_eq(ftruncate(fd2, RING_HDR_SIZE + 4096), 0);
	ck_assert_int_eq(ring_map(fd2, &r), -EINVAL);
	ck_assert_int_eq(fcntl(fd2, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW),
	    0);
	ck_assert_int_eq(ring_map(fd2, &r), -EPROTO);
	close(fd2);
	ck_assert_int_eq(ring_map(-1, &r), -EBADF);
	ck_assert_str_eq(ring_strerror(-ENOSPC), "ring full, record dropped");
	ck_assert_ptr_nonnull(ring_strerror(-EIO));
}
END_TEST

/* A capacity in the header that disagrees with the file is refused. */
START_TEST(test_map_bad_capacity)
{
	struct fixture fx;
	struct ring *r;

	fx_open(&fx, 8192);
	*raw64(&fx, RING_OFF_CAPACITY) = 4096;
	ck_assert_int_eq(ring_map(fx.fd, &r), -EINVAL);
	*raw64(&fx, RING_OFF_CAPACITY) = 8193;
	ck_assert_int_eq(ring_map(fx.fd, &r), -EINVAL);
	*raw64(&fx, RING_OFF_CAPACITY) = 8192;
	/* The one-segment format of version 1, and a later one. */
	*(uint32_t *)(void *)(fx.raw + RING_OFF_VERSION) = 1;
	ck_assert_int_eq(ring_map(fx.fd, &r), -EPROTO);
	*(uint32_t *)(void *)(fx.raw + RING_OFF_VERSION) = RING_VERSION + 1;
	ck_assert_int_eq(ring_map(fx.fd, &r), -EPROTO);
	*(uint32_t *)(void *)(fx.raw + RING_OFF_VERSION) = RING_VERSION;
	/* A segment count that disagrees with the file. */
	*(uint32_t *)(void *)(fx.raw + RING_OFF_NSEG) = 2;
	ck_assert_int_eq(ring_map(fx.fd, &r), -EINVAL);
	*(uint32_t *)(void *)(fx.raw + RING_OFF_NSEG) = 0;
	ck_assert_int_eq(ring_map(fx.fd, &r), -EINVAL);
	fx_close(&fx);
}
END_TEST

START_TEST(test_single_producer)
{
	struct fixture fx;
	struct rec_api rec;
	struct sink s;
	struct ring_stats st;
	uint64_t i, written = 0;
	const uint64_t N = 200000;

	memset(&s, 0, sizeof s);
	fx_open(&fx, 65536);
	for (i = 0; i < N; i++) {
		make_api(&rec, 1, i);
		written += ring_write(fx.ring, &rec) == 0;
		if (i % 100 == 99 && ring_drain(fx.ring, sink_cb, &s,
		    SIZE_MAX) < 0)
			s.bad++;
	}
	ck_assert_uint_eq(written, N);
	ck_assert_int_ge(ring_drain(fx.ring, sink_cb, &s, SIZE_MAX), 0);
	ck_assert_uint_eq(s.n, N);
	ck_assert_int_eq(s.bad, 0);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.drops, 0);
	ck_assert_uint_eq(st.records, N);
	ck_assert_uint_eq(st.rejects, 0);
	ck_assert_uint_eq(st.pending, 0);
	ck_assert(!st.corrupt);
	fx_close(&fx);
}
END_TEST

/* Records of a size that does not divide the capacity force pad records
 * at every lap; nothing is lost or reordered. */
START_TEST(test_wrap_padding)
{
	struct fixture fx;
	uint64_t buf[REC_MAX_SIZE / 8];
	struct rec_api *rec = (void *)buf;
	struct sink s;
	size_t sizes[] = { 56, 136, 1000, 24 };
	uint64_t i, w = 0;
	int rc;

	memset(&s, 0, sizeof s);
	fx_open(&fx, 4096);
	for (i = 0; i < 20000; i++) {
		size_t sz = sizes[i % 4];

		if (sz == 56) {
			make_api(rec, 1, w);
		} else if (sz == 24) {
			struct rec_thread *t = (void *)buf;

			REC_INIT(t, REC_THREAD, 0);
			t->pid = 99;
		} else {
			char str[1024];

			memset(str, 'x', sizeof str);
			if (record_string_def_encode(buf, sizeof buf, 1, str,
			    sz - 17) != sz)
				s.bad++;
		}
		rc = ring_write(fx.ring, buf);
		if (rc == -ENOSPC) {
			if (ring_drain(fx.ring, sink_cb, &s, SIZE_MAX) < 0)
				s.bad++;
			rc = ring_write(fx.ring, buf);
		}
		if (rc != 0)
			s.bad++;
		if (sz == 56)
			w++;
	}
	ck_assert_int_ge(ring_drain(fx.ring, sink_cb, &s, SIZE_MAX), 0);
	ck_assert_uint_eq(s.n, 20000);
	ck_assert_uint_eq(s.next[1], w);
	ck_assert_int_eq(s.bad, 0);
	fx_close(&fx);
}
END_TEST

struct prod_arg {
	struct ring	*ring;
	uint32_t	 id;
	uint64_t	 n;
	uint64_t	 ok;
};

static void *
producer_thread(void *p)
{
	struct prod_arg *a = p;
	struct rec_api rec;
	uint64_t i;

	for (i = 0; i < a->n; i++) {
		make_api(&rec, a->id, a->ok);
		if (ring_write(a->ring, &rec) == 0)
			a->ok++;
	}
	return NULL;
}

struct cons_arg {
	struct ring	*ring;
	struct sink	 s;
	uint64_t	 want;
	atomic_int	 stop;
};

static void *
consumer_thread(void *p)
{
	struct cons_arg *c = p;

	while (c->s.n < c->want && !atomic_load(&c->stop)) {
		if (ring_drain(c->ring, sink_cb, &c->s, 4096) == 0)
			sched_yield();
	}
	return NULL;
}

/* Several threads write while one consumer drains: every record arrives,
 * each producer's records in order, none dropped. */
START_TEST(test_multi_producer)
{
	enum { NP = 4, PER = 100000 };
	struct fixture fx;
	struct prod_arg pa[NP];
	struct cons_arg ca;
	pthread_t pt[NP], ct;
	struct ring_stats st;
	int i;

	/* Big enough for everything: zero loss even if the consumer stalls
	 * on this 2-core machine. */
	fx_open(&fx, 32u << 20);
	memset(&ca, 0, sizeof ca);
	ca.ring = fx.ring;
	ca.want = (uint64_t)NP * PER;
	ck_assert_int_eq(pthread_create(&ct, NULL, consumer_thread, &ca), 0);
	for (i = 0; i < NP; i++) {
		pa[i] = (struct prod_arg){ fx.ring, (uint32_t)i + 1, PER, 0 };
		ck_assert_int_eq(pthread_create(&pt[i], NULL, producer_thread,
		    &pa[i]), 0);
	}
	for (i = 0; i < NP; i++)
		pthread_join(pt[i], NULL);
	pthread_join(ct, NULL);
	ck_assert_int_ge(ring_drain(fx.ring, sink_cb, &ca.s, SIZE_MAX), 0);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.drops, 0);
	ck_assert_uint_eq(ca.s.n, (uint64_t)NP * PER);
	ck_assert_int_eq(ca.s.bad, 0);
	for (i = 0; i < NP; i++) {
		ck_assert_uint_eq(pa[i].ok, PER);
		ck_assert_uint_eq(ca.s.next[i + 1], PER);
	}
	fx_close(&fx);
}
END_TEST

/* Producers smaller than the load: drops are exact, nothing else lost. */
START_TEST(test_multi_producer_drops)
{
	enum { NP = 3, PER = 100000 };
	struct fixture fx;
	struct prod_arg pa[NP];
	struct cons_arg ca;
	pthread_t pt[NP], ct;
	struct ring_stats st;
	uint64_t ok = 0;
	int i;

	fx_open(&fx, 16384);
	memset(&ca, 0, sizeof ca);
	ca.ring = fx.ring;
	ca.want = UINT64_MAX;
	ck_assert_int_eq(pthread_create(&ct, NULL, consumer_thread, &ca), 0);
	for (i = 0; i < NP; i++) {
		pa[i] = (struct prod_arg){ fx.ring, (uint32_t)i + 1, PER, 0 };
		pthread_create(&pt[i], NULL, producer_thread, &pa[i]);
	}
	for (i = 0; i < NP; i++) {
		pthread_join(pt[i], NULL);
		ok += pa[i].ok;
	}
	atomic_store(&ca.stop, 1);
	pthread_join(ct, NULL);
	ck_assert_int_ge(ring_drain(fx.ring, sink_cb, &ca.s, SIZE_MAX), 0);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(ca.s.n, ok);
	ck_assert_uint_eq(st.drops, (uint64_t)NP * PER - ok);
	ck_assert_uint_eq(st.drop_bytes, st.drops * sizeof(struct rec_api));
	ck_assert_int_eq(ca.s.bad, 0);
	fx_close(&fx);
}
END_TEST

/* A forked child maps the ring from the fd and writes through the shared
 * mapping, alongside a thread of the parent. */
START_TEST(test_fork_producer)
{
	enum { PER = 100000 };
	struct fixture fx;
	struct cons_arg ca;
	struct prod_arg pa;
	pthread_t ct, pt;
	struct ring_stats st;
	int status;
	pid_t pid;

	fx_open(&fx, 16u << 20);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ring *cr;
		struct prod_arg cpa;

		if (ring_map(fx.fd, &cr) != 0)
			_exit(2);
		cpa = (struct prod_arg){ cr, 2, PER, 0 };
		producer_thread(&cpa);
		ring_unmap(cr);
		_exit(cpa.ok == PER ? 0 : 1);
	}
	memset(&ca, 0, sizeof ca);
	ca.ring = fx.ring;
	ca.want = 2 * PER;
	pthread_create(&ct, NULL, consumer_thread, &ca);
	pa = (struct prod_arg){ fx.ring, 1, PER, 0 };
	pthread_create(&pt, NULL, producer_thread, &pa);
	pthread_join(pt, NULL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	pthread_join(ct, NULL);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(ca.s.n, 2 * PER);
	ck_assert_uint_eq(ca.s.next[1], PER);
	ck_assert_uint_eq(ca.s.next[2], PER);
	ck_assert_uint_eq(st.drops, 0);
	ck_assert_int_eq(ca.s.bad, 0);
	fx_close(&fx);
}
END_TEST

START_TEST(test_full_exact_drops)
{
	struct fixture fx;
	struct rec_kernel k;
	struct ring_stats st;
	uint64_t got = 0;
	void *p;
	int i;

	fx_open(&fx, 4096);
	REC_INIT(&k, REC_KERNEL, 0);
	/* 64-byte records fill the ring exactly, without padding. */
	for (i = 0; i < 64; i++)
		ck_assert_int_eq(ring_write(fx.ring, &k), 0);
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(ring_write(fx.ring, &k), -ENOSPC);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.drops, 100);
	ck_assert_uint_eq(st.drop_bytes, 6400);
	ck_assert_uint_eq(st.pending, 4096);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 64);
	ck_assert_uint_eq(got, 64);
	/* Space again. */
	ck_assert_int_eq(ring_write(fx.ring, &k), 0);
	/* Too large for this ring: refused and counted; malformed: refused. */
	ck_assert_int_eq(ring_reserve(fx.ring, 2048, &p), -EMSGSIZE);
	ck_assert_int_eq(ring_reserve(fx.ring, 12, &p), -EINVAL);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.drops, 101);
	fx_close(&fx);
}
END_TEST

/* The consumer stops at an uncommitted record and resumes once committed;
 * the drain limit is respected. */
START_TEST(test_uncommitted_and_max)
{
	struct fixture fx;
	struct rec_api rec;
	uint64_t got = 0;
	void *p;
	int i;

	fx_open(&fx, 4096);
	make_api(&rec, 1, 0);
	ck_assert_int_eq(ring_reserve(fx.ring, sizeof rec, &p), 0);
	ck_assert_int_eq(ring_write(fx.ring, &rec), 0);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 0);
	memcpy((char *)p + 8, (char *)&rec + 8, sizeof rec - 8);
	ring_commit(p, &rec.hdr);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 2);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(ring_write(fx.ring, &rec), 0);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, 3), 3);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 7);
	ck_assert_uint_eq(got, 12);
	fx_close(&fx);
}
END_TEST

START_TEST(test_wake)
{
	struct fixture fx;
	struct rec_api rec;
	uint64_t got = 0;
	int i, wakes = 0;

	fx_open(&fx, 65536);
	make_api(&rec, 1, 0);
	ck_assert_int_eq(ring_write(fx.ring, &rec), 0);
	ck_assert(!ring_needs_wake(fx.ring));	/* not armed */
	ring_arm_wake(fx.ring, 0);
	ck_assert(ring_needs_wake(fx.ring));
	ck_assert(!ring_needs_wake(fx.ring));	/* once per arming */
	ring_drain(fx.ring, count_cb, &got, SIZE_MAX);
	ring_arm_wake(fx.ring, 32768);
	for (i = 0; i < 1000; i++) {
		ring_write(fx.ring, &rec);
		wakes += ring_needs_wake(fx.ring);
		if (i + 1 < 32768 / (int)sizeof rec)
			ck_assert_int_eq(wakes, 0);
	}
	ck_assert_int_eq(wakes, 1);
	fx_close(&fx);
}
END_TEST

/* A producer that rewrites the tail cannot move the consumer. */
START_TEST(test_hostile_tail)
{
	struct fixture fx;
	struct rec_api rec;
	struct sink s;
	int i;

	memset(&s, 0, sizeof s);
	fx_open(&fx, 4096);
	for (i = 0; i < 10; i++) {
		make_api(&rec, 1, (uint64_t)i);
		ck_assert_int_eq(ring_write(fx.ring, &rec), 0);
	}
	*raw64(&fx, RING_OFF_TAIL) = 123456789;
	ck_assert_int_eq(ring_drain(fx.ring, sink_cb, &s, SIZE_MAX), 10);
	ck_assert_int_eq(s.bad, 0);
	fx_close(&fx);
}
END_TEST

/* A head beyond one capacity of the tail marks the ring corrupt. */
START_TEST(test_hostile_head)
{
	struct fixture fx;
	struct ring_stats st;
	uint64_t got = 0;

	fx_open(&fx, 4096);
	*raw64(&fx, RING_OFF_HEAD) = 1ull << 40;
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX),
	    -EBADMSG);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX),
	    -EBADMSG);
	ring_get_stats(fx.ring, &st);
	ck_assert(st.corrupt);
	ck_assert_uint_eq(got, 0);
	fx_close(&fx);
}
END_TEST

/* Well-framed but invalid records are skipped and counted; a bad size
 * resynchronises at the head; later good records still arrive. */
START_TEST(test_hostile_records)
{
	struct fixture fx;
	struct rec_api rec;
	struct ring_stats st;
	uint64_t got = 0;
	uint8_t *data;

	fx_open(&fx, 4096);
	data = fx.raw + RING_HDR_SIZE;
	make_api(&rec, 1, 0);
	ring_write(fx.ring, &rec);		/* good */
	rec.start = 5;				/* end < start */
	rec.end = 1;
	ring_write(fx.ring, &rec);
	make_api(&rec, 1, 1);
	rec.hdr.type = 20;			/* unknown type */
	ring_write(fx.ring, &rec);
	make_api(&rec, 1, 1);
	ring_write(fx.ring, &rec);		/* good */
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 2);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.rejects, 2);
	ck_assert_uint_eq(st.reject_bytes, 2 * sizeof rec);

	/* A size running past the head. */
	ring_write(fx.ring, &rec);
	ring_write(fx.ring, &rec);
	((struct rec_hdr *)(void *)(data + 4 * sizeof rec))->size = 4000;
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 0);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.resyncs, 1);
	ck_assert_uint_eq(st.pending, 0);
	/* And the ring works on. */
	ring_write(fx.ring, &rec);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 1);
	ck_assert_uint_eq(got, 3);
	fx_close(&fx);
}
END_TEST

/* Random bytes over the whole mapping, header included, again and again:
 * the consumer never crashes, never delivers an invalid record, and every
 * drain ends. */
START_TEST(test_garbage)
{
	struct fixture fx;
	struct ring_stats st;
	uint64_t got = 0, i, j, k;
	unsigned seed = 42;
	int rc;

	for (k = 0; k < 200; k++) {
		fx_open(&fx, 4096);
		for (i = 0; i < fx.rawlen / 4; i++)
			((uint32_t *)(void *)fx.raw)[i] =
			    (uint32_t)rand_r(&seed) * 2654435761u;
		if (k % 2 == 0) {
			/* Plausible counters, garbage records. */
			*raw64(&fx, RING_OFF_TAIL) = 0;
			*raw64(&fx, RING_OFF_HEAD) = (uint64_t)rand_r(&seed) %
			    4097;
			for (j = 0; j < 4096; j += 8)
				if (rand_r(&seed) % 3 == 0)
					*raw64(&fx, RING_HDR_SIZE + j) =
					    (uint64_t)(rand_r(&seed) % 42) |
					    (uint64_t)((rand_r(&seed) % 16) * 8)
					    << 16;
		}
		for (j = 0; j < 100; j++) {
			rc = ring_drain(fx.ring, count_cb, &got, SIZE_MAX);
			if (rc < 0)
				break;
			/* The hostile producer keeps moving the head. */
			*raw64(&fx, RING_OFF_HEAD) += (uint64_t)rand_r(&seed)
			    % 8192;
		}
		ring_get_stats(fx.ring, &st);
		ck_assert_uint_eq(st.records, got);
		got = 0;
		/* Producer calls on a scribbled header stay in bounds too. */
		{
			struct rec_api rec;

			make_api(&rec, 1, 0);
			for (j = 0; j < 100; j++)
				rc = ring_write(fx.ring, &rec);
			(void)ring_needs_wake(fx.ring);
		}
		fx_close(&fx);
	}
}
END_TEST

/* ---- per-thread segments ---- */

/* A ring of nseg segments and a raw mapping of the whole file. */
static void
fx_open_segs(struct fixture *fx, size_t cap, unsigned nseg)
{
	ck_assert_int_eq(ring_create_segs(cap, nseg, &fx->fd), 0);
	ck_assert_int_eq(ring_map(fx->fd, &fx->ring), 0);
	fx->rawlen = (RING_HDR_SIZE + cap) * nseg;
	fx->raw = mmap(NULL, fx->rawlen, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fx->fd, 0);
	ck_assert_ptr_ne(fx->raw, MAP_FAILED);
}

static size_t
seg_off(size_t cap, unsigned i, size_t field)
{
	return (RING_HDR_SIZE + cap) * i + field;
}

START_TEST(test_segs_create)
{
	struct fixture fx;
	struct ring_stats st;
	int fd;

	ck_assert_int_eq(ring_create_segs(4096, 0, &fd), -EINVAL);
	ck_assert_int_eq(ring_create_segs(4096, RING_MAX_SEGMENTS + 1, &fd),
	    -EINVAL);
	fx_open_segs(&fx, 8192, 5);
	ck_assert_uint_eq(ring_segments(fx.ring), 5);
	ck_assert_uint_eq(*(uint32_t *)(void *)(fx.raw + RING_OFF_NSEG), 5);
	ck_assert_uint_eq(*(uint32_t *)(void *)(fx.raw + RING_OFF_VERSION),
	    RING_VERSION);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.segments, 5);
	ck_assert_uint_eq(st.capacity, 8192);
	ck_assert_int_eq(ring_seg_drops(fx.ring, 5, &st.drops,
	    &st.drop_bytes), -EINVAL);
	fx_close(&fx);
}
END_TEST

/* Threads claim distinct segments, the lowest free first; when none is
 * left they share segment 0; a released segment is claimed again. */
START_TEST(test_segs_claim)
{
	struct fixture fx;
	struct ring_producer p[5];
	struct rec_api rec;
	struct sink s;

	fx_open_segs(&fx, 8192, 4);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p[0]), 1);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p[1]), 2);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p[2]), 3);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p[3]), 0);
	ring_producer_release(&p[1]);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p[4]), 2);
	/* Every producer's records come back, each in its own order. */
	for (uint64_t i = 0; i < 20; i++)
		for (unsigned k = 0; k < 5; k++) {
			if (k == 1)
				continue;
			make_api(&rec, k, i);
			ck_assert_int_eq(ring_pwrite(&p[k], &rec), 0);
		}
	ck_assert_uint_gt(ring_pending(fx.ring), 0);
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(ring_drain(fx.ring, sink_cb, &s, SIZE_MAX), 80);
	ck_assert_int_eq(s.bad, 0);
	ck_assert_uint_eq(s.next[0], 20);
	ck_assert_uint_eq(s.next[4], 20);
	/* The record really sits in segment 2's data. */
	ck_assert_uint_ne(*raw64(&fx, seg_off(8192, 2, RING_OFF_HEAD)), 0);
	ck_assert_uint_eq(ring_pending(fx.ring), 0);
	fx_close(&fx);
}
END_TEST

/* A producer of its own segment asks for a wake once per arming, at the
 * first record that brings its segment's pending bytes to the threshold,
 * also after the consumer drained part of it and armed again (the
 * producer remembers where it may next be due: the tail has moved). */
START_TEST(test_segs_wake)
{
	struct fixture fx;
	struct ring_producer p;
	struct rec_api rec;
	uint64_t got = 0;
	size_t thr = 40 * sizeof(rec);
	int wakes = 0;

	fx_open_segs(&fx, 65536, 2);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p), 1);
	make_api(&rec, 1, 0);
	ck_assert_int_eq(ring_pwrite(&p, &rec), 0);
	ck_assert(!ring_pneeds_wake(&p));		/* not armed */
	ring_arm_wake(fx.ring, thr);
	for (int i = 2; i <= 60; i++) {
		ck_assert_int_eq(ring_pwrite(&p, &rec), 0);
		if (ring_pneeds_wake(&p)) {
			wakes++;
			ck_assert_int_eq(i, 40);	/* pending == thr */
		}
	}
	ck_assert_int_eq(wakes, 1);			/* once per arming */
	/* The consumer drains the 60, arms again: due 40 records on. */
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got, SIZE_MAX), 60);
	ring_arm_wake(fx.ring, thr);
	wakes = 0;
	for (int i = 1; i <= 100; i++) {
		ck_assert_int_eq(ring_pwrite(&p, &rec), 0);
		if (ring_pneeds_wake(&p)) {
			wakes++;
			ck_assert_int_eq(i, wakes == 1 ? 40 : 90);
		}
		/* Drained again halfway, armed: the next wake 40 after. */
		if (i == 50) {
			ck_assert_int_eq(ring_drain(fx.ring, count_cb, &got,
			    SIZE_MAX), 50);
			ring_arm_wake(fx.ring, thr);
		}
		if (i > 50 && i < 90)
			ck_assert_int_eq(wakes, 1);
	}
	ck_assert_int_eq(wakes, 2);
	fx_close(&fx);
}
END_TEST

/* The populate hook's calls (segment and count). */
static unsigned pop_calls, pop_seg;

static void
pop_hook(struct ring *r, unsigned seg, void *arg)
{
	(void)r;
	(void)arg;
	pop_calls++;
	pop_seg = seg;
}

/* Writes producer 1's next records into p until the hook is called (or
 * the head reaches max); the head before the record that made the call. */
static uint64_t
write_to_call(struct ring_producer *p, uint64_t *n, uint64_t max)
{
	unsigned calls = pop_calls;
	struct rec_api rec;

	while (pop_calls == calls && *n * sizeof(rec) < max) {
		make_api(&rec, 1, *n);
		ck_assert_int_eq(ring_pwrite(p, &rec), 0);
		(*n)++;
	}
	return (*n - 1) * sizeof(rec);
}

/* Bytes of the memfd that have pages. */
static uint64_t
fd_allocated(int fd)
{
	struct stat st;

	ck_assert_int_eq(fstat(fd, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

/*
 * A lazy ring populates a segment a little at a time: the claim asks at
 * once (the hook), ring_populate_ahead populates the header and four
 * times the head plus 1 MiB (in 256 KiB chunks); the producer asks again
 * when its head passes half the populated part, and, not answered, a
 * chunk later; records written past the populated part are kept (they
 * fault in); once the segment is populated whole no call comes.  A hint
 * (what the segment took in the last session) is populated up front.  A
 * non-lazy claim populates its segment whole, as before.
 */
START_TEST(test_segs_populate_ahead)
{
	const uint64_t cap = 8u << 20, chunk = 256u << 10;
	struct fixture fx;
	struct ring_producer p, q, r2, r3;
	struct rec_api rec;
	struct sink s;
	uint64_t n = 0, h1, h2, want, calls, drained = 0;
	const uint64_t sz = sizeof(rec);

	fx_open_segs(&fx, cap, 5);
	ring_set_lazy(fx.ring, true);
	ring_set_populate_hook(fx.ring, pop_hook, NULL);
	pop_calls = 0;
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p), 1);
	ck_assert_uint_eq(pop_calls, 1);
	ck_assert_uint_eq(pop_seg, 1);
	ck_assert_uint_eq(ring_populated(fx.ring, 1), 0);
	ring_populate_ahead(fx.ring, 1);
	ck_assert_uint_eq(ring_populated(fx.ring, 1), 4 * chunk);
	ck_assert_uint_le(fd_allocated(fx.fd), 4 * chunk + 5 * RING_HDR_SIZE);
	/* The next call when the head passes half of it. */
	h1 = write_to_call(&p, &n, 8 * chunk);
	ck_assert_uint_eq(pop_calls, 2);
	ck_assert_uint_ge(h1, 2 * chunk);
	ck_assert_uint_lt(h1, 2 * chunk + sz);
	/* Not answered: again a chunk later; what was written past the
	 * populated part is kept (drained below). */
	h2 = write_to_call(&p, &n, 8 * chunk);
	ck_assert_uint_eq(pop_calls, 3);
	ck_assert_uint_gt(h2 + sz, h1 + chunk);	/* its record reaches it */
	ck_assert_uint_le(h2, h1 + chunk);
	ck_assert_uint_eq(ring_written(fx.ring, 1), n * sz);
	ring_populate_ahead(fx.ring, 1);
	want = (4 * n * sz + chunk - 1) / chunk * chunk + 4 * chunk;
	ck_assert_uint_eq(ring_populated(fx.ring, 1), want < cap ? want : cap);
	/* A lap and a bit, drained when full and populated when asked:
	 * populated to the end, and then no call. */
	memset(&s, 0, sizeof s);
	calls = pop_calls;
	while (n * sz < cap + 2 * chunk) {
		make_api(&rec, 1, n);
		if (ring_pwrite(&p, &rec) != 0) {
			drained += (uint64_t)ring_drain(fx.ring, sink_cb, &s,
			    SIZE_MAX);
			ck_assert_int_eq(ring_pwrite(&p, &rec), 0);
		}
		n++;
		if (pop_calls != calls) {
			ck_assert_uint_lt(ring_populated(fx.ring, 1), cap);
			calls = pop_calls;
			ring_populate_ahead(fx.ring, 1);
		}
	}
	ck_assert_uint_eq(ring_populated(fx.ring, 1), cap);
	drained += (uint64_t)ring_drain(fx.ring, sink_cb, &s, SIZE_MAX);
	ck_assert_uint_eq(drained, n);
	ck_assert_int_eq(s.bad, 0);
	ck_assert_uint_eq(s.next[1], n);
	ck_assert_uint_ge(ring_written(fx.ring, 1), n * sz);
	/* A hint: populated up front, in chunks, at most a capacity. */
	ring_set_populate_hint(fx.ring, 2, 5 * chunk + 1);
	ring_set_populate_hint(fx.ring, 3, 2 * cap);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &q), 2);
	ring_populate_ahead(fx.ring, 2);
	ck_assert_uint_eq(ring_populated(fx.ring, 2), 6 * chunk);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &r2), 3);
	ring_populate_ahead(fx.ring, 3);
	ck_assert_uint_eq(ring_populated(fx.ring, 3), cap);
	/* Not lazy: the claim populates its segment whole. */
	ring_set_lazy(fx.ring, false);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &r3), 4);
	ck_assert_uint_eq(ring_populated(fx.ring, 4), cap);
	fx_close(&fx);
}
END_TEST

struct seg_prod_arg {
	struct ring	*ring;
	uint32_t	 id;
	uint64_t	 n;
	uint64_t	 ok;
	uint64_t	 full;
	unsigned	 seg;
	struct ring_producer pr;	/* released after every join */
};

static void *
seg_producer_thread(void *p)
{
	struct seg_prod_arg *a = p;
	struct rec_api rec;

	a->seg = ring_producer_claim(a->ring, &a->pr);
	for (uint64_t i = 0; i < a->n; i++) {
		make_api(&rec, a->id, a->ok);
		if (ring_pwrite(&a->pr, &rec) == 0)
			a->ok++;
		else
			a->full++;
		(void)ring_pneeds_wake(&a->pr);
	}
	return NULL;
}

/* Threads on their own segments (and two sharing segment 0) while one
 * consumer drains with small rings: written + dropped = offered for every
 * thread, the drops land in that thread's segment, and every delivered
 * record is in its producer's order. */
START_TEST(test_segs_threads_exact_loss)
{
	enum { NP = 5, PER = 200000 };
	struct fixture fx;
	struct seg_prod_arg pa[NP];
	struct cons_arg ca;
	pthread_t pt[NP], ct;
	uint64_t d, b, want = 0, sum_full = 0, seg0_full = 0;
	int i;

	fx_open_segs(&fx, 16384, 4);	/* 3 own segments, 2 threads on 0 */
	memset(&ca, 0, sizeof ca);
	ca.ring = fx.ring;
	ca.want = UINT64_MAX;
	ck_assert_int_eq(pthread_create(&ct, NULL, consumer_thread, &ca), 0);
	for (i = 0; i < NP; i++) {
		memset(&pa[i], 0, sizeof pa[i]);
		pa[i].ring = fx.ring;
		pa[i].id = (uint32_t)i + 1;
		pa[i].n = PER;
		ck_assert_int_eq(pthread_create(&pt[i], NULL,
		    seg_producer_thread, &pa[i]), 0);
	}
	for (i = 0; i < NP; i++)
		pthread_join(pt[i], NULL);
	for (i = 0; i < NP; i++)
		ring_producer_release(&pa[i].pr);
	atomic_store(&ca.stop, 1);
	pthread_join(ct, NULL);
	ck_assert_int_ge(ring_drain(fx.ring, sink_cb, &ca.s, SIZE_MAX), 0);
	ck_assert_int_eq(ca.s.bad, 0);
	for (i = 0; i < NP; i++) {
		/* Delivered: exactly what the producer saw accepted. */
		ck_assert_uint_eq(ca.s.next[i + 1], pa[i].ok);
		ck_assert_uint_eq(pa[i].ok + pa[i].full, PER);
		want += pa[i].ok;
		sum_full += pa[i].full;
		if (pa[i].seg == 0)
			seg0_full += pa[i].full;
		else {
			ck_assert_int_eq(ring_seg_drops(fx.ring, pa[i].seg, &d,
			    &b), 0);
			ck_assert_uint_eq(d, pa[i].full);
			ck_assert_uint_eq(b, pa[i].full * sizeof(struct rec_api));
		}
	}
	ck_assert_int_eq(ring_seg_drops(fx.ring, 0, &d, &b), 0);
	ck_assert_uint_eq(d, seg0_full);
	ck_assert_uint_eq(ca.s.n, want);
	{
		struct ring_stats st;

		ring_get_stats(fx.ring, &st);
		ck_assert_uint_eq(st.drops, sum_full);
		ck_assert_uint_eq(st.records, want);
	}
	fx_close(&fx);
}
END_TEST

/* A hostile producer garbles one segment: its bytes are rejected, the
 * other segments' records still arrive; a head beyond one capacity in any
 * segment makes the ring corrupt. */
START_TEST(test_segs_hostile)
{
	enum { CAP = 8192 };
	struct fixture fx;
	struct ring_producer p1, p2;
	struct ring_stats st;
	struct rec_api rec;
	uint64_t n = 0;

	fx_open_segs(&fx, CAP, 3);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p1), 1);
	ck_assert_uint_eq(ring_producer_claim(fx.ring, &p2), 2);
	make_api(&rec, 1, 0);
	ck_assert_int_eq(ring_pwrite(&p1, &rec), 0);
	/* Segment 2: a header with an impossible size, head past it. */
	*raw64(&fx, seg_off(CAP, 2, RING_HDR_SIZE)) = REC_API | 12ull << 16;
	*raw64(&fx, seg_off(CAP, 2, RING_OFF_HEAD)) = 256;
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &n, SIZE_MAX), 1);
	ck_assert_uint_eq(n, 1);
	ring_get_stats(fx.ring, &st);
	ck_assert_uint_eq(st.resyncs, 1);
	ck_assert_uint_eq(st.reject_bytes, 256);
	/* Nothing invalid was delivered; segment 1 goes on. */
	make_api(&rec, 1, 1);
	ck_assert_int_eq(ring_pwrite(&p1, &rec), 0);
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &n, SIZE_MAX), 1);
	ck_assert_uint_eq(n, 2);
	/* A head more than one capacity ahead: corrupt. */
	*raw64(&fx, seg_off(CAP, 1, RING_OFF_HEAD)) = 3 * CAP;
	ck_assert_int_eq(ring_drain(fx.ring, count_cb, &n, SIZE_MAX),
	    -EBADMSG);
	ring_get_stats(fx.ring, &st);
	ck_assert(st.corrupt);
	fx_close(&fx);
}
END_TEST

static Suite *
ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("ring");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_map);
	tcase_add_test(tc, test_map_bad_capacity);
	tcase_add_test(tc, test_single_producer);
	tcase_add_test(tc, test_wrap_padding);
	tcase_add_test(tc, test_multi_producer);
	tcase_add_test(tc, test_multi_producer_drops);
	tcase_add_test(tc, test_fork_producer);
	tcase_add_test(tc, test_full_exact_drops);
	tcase_add_test(tc, test_uncommitted_and_max);
	tcase_add_test(tc, test_wake);
	tcase_add_test(tc, test_hostile_tail);
	tcase_add_test(tc, test_hostile_head);
	tcase_add_test(tc, test_hostile_records);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_segs_create);
	tcase_add_test(tc, test_segs_claim);
	tcase_add_test(tc, test_segs_wake);
	tcase_add_test(tc, test_segs_populate_ahead);
	tcase_add_test(tc, test_segs_threads_exact_loss);
	tcase_add_test(tc, test_segs_hostile);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(ring_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

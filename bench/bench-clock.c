/*
 * bench-clock: the cheapest correct clock for the capture hot path, and
 * where an enabled record's time goes.
 *
 * 1. ns per read of CLOCK_REALTIME (vDSO; the agent's clock with
 *    MSPTI_CLOCK=realtime or without an invariant TSC),
 *    CLOCK_MONOTONIC, CLOCK_REALTIME_COARSE (for scale: its resolution,
 *    printed, is too coarse for records), RDTSC, RDTSCP, and RDTSC mapped
 *    to CLOCK_REALTIME ns with a calibrated (offset, scale) pair (the
 *    agent's clock where the TSC is invariant: agent/hostclock.c).
 * 2. The mapping's error: (TSC, CLOCK_REALTIME) pairs fitted over 200 ms,
 *    then the largest |mapped - CLOCK_REALTIME| over the next 300 ms.
 *    CLOCK_REALTIME is slewed by NTP and stepped by settimeofday; a TSC
 *    mapping follows neither unless it is refitted: the agent refits
 *    every second and records each mapping (REC_HOST_CLOCK).
 * 3. The hot path of one 56-byte MARKER record into a ring segment
 *    (ring_preserve, the fields, ring_commit), per stage: clock alone,
 *    record fill alone (a stack record), ring append alone (a ready
 *    record), and all three as the agent does them, with each clock.
 * Medians of 15 runs of 200000 calls.  Prints figures; never fails on
 * time.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#include "record.h"
#include "ring.h"

#define CALLS	200000
#define RUNS	15

static volatile uint64_t sink;

static uint64_t
ns_of(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t
mono(void)
{
	return ns_of(CLOCK_MONOTONIC);
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
	return v[n / 2];
}

/* The calibrated mapping: ns = base_ns + ((tsc - base_tsc) * mult >> 32). */
static struct {
	uint64_t	base_tsc, base_ns, mult;
} map;

#ifdef HAVE_TSC
static inline uint64_t
tsc_ns(void)
{
	uint64_t t = __rdtsc();

	return map.base_ns + (uint64_t)(((unsigned __int128)(t -
	    map.base_tsc) * map.mult) >> 32);
}
#endif

enum clk { C_REAL, C_MONO, C_COARSE, C_TSC, C_TSCP, C_TSCMAP, C_NCLK };
static const char *const clk_name[C_NCLK] = {
	"clock_gettime(CLOCK_REALTIME)", "clock_gettime(CLOCK_MONOTONIC)",
	"clock_gettime(CLOCK_REALTIME_COARSE)", "rdtsc", "rdtscp",
	"rdtsc -> CLOCK_REALTIME ns (calibrated)",
};

static inline uint64_t
read_clk(enum clk c)
{
	unsigned aux;

	switch (c) {
	case C_REAL: return ns_of(CLOCK_REALTIME);
	case C_MONO: return ns_of(CLOCK_MONOTONIC);
	case C_COARSE: return ns_of(CLOCK_REALTIME_COARSE);
#ifdef HAVE_TSC
	case C_TSC: return __rdtsc();
	case C_TSCP: return __rdtscp(&aux);
	case C_TSCMAP: return tsc_ns();
#endif
	default: (void)aux; return 0;
	}
}

/* One run of CALLS reads: ns per read.  The clocks are timed in turn,
 * run by run, so that a busy spell of the machine hits all of them. */
static double
time_clock_once(enum clk c)
{
	uint64_t t0 = mono(), acc = 0;

	for (int i = 0; i < CALLS; i++)
		acc += read_clk(c);
	sink = acc;
	return (double)(mono() - t0) / CALLS;
}

#ifdef HAVE_TSC
/* Least-squares-free two-point fit over 200 ms, then the error over the
 * next 300 ms.  Returns the largest error in ns. */
static double
calibrate(double *ghz)
{
	uint64_t t0, n0, t1, n1, end;
	double worst = 0;

	n0 = ns_of(CLOCK_REALTIME);
	t0 = __rdtsc();
	end = mono() + 200000000ull;
	while (mono() < end)
		;
	n1 = ns_of(CLOCK_REALTIME);
	t1 = __rdtsc();
	map.base_tsc = t0;
	map.base_ns = n0;
	map.mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) /
	    (t1 - t0));
	*ghz = (double)(t1 - t0) / (double)(n1 - n0);
	end = mono() + 300000000ull;
	while (mono() < end) {
		uint64_t a = ns_of(CLOCK_REALTIME), m = tsc_ns(),
		    b = ns_of(CLOCK_REALTIME);
		/* The real time of the TSC read lies in [a, b]. */
		double e = m < a ? (double)(a - m) : m > b ? (double)(m - b) : 0;

		if (e > worst)
			worst = e;
	}
	return worst;
}
#endif

/* The stages of one MARKER record into a ring segment. */
static struct ring *ring;
static struct ring_producer rp;

static int
nop_cb(const struct rec_hdr *h, void *arg)
{
	(void)h;
	(void)arg;
	return 0;
}

static void
drain(void)
{
	while (ring_drain(ring, nop_cb, NULL, SIZE_MAX) > 0)
		;
}

static inline void
fill(struct rec_marker *m, uint64_t ts, uint64_t i)
{
	rec_hdr_set(&m->hdr, REC_MARKER, sizeof(*m), 0);
	m->timestamp = ts;
	m->id = i;
	m->pid = 1234;
	m->tid = 1235;
	m->device = REC_NONE;
	m->stream = REC_NONE;
	m->name_id = 7;
	m->domain_id = 0;
	m->flag = 1;
	m->source_kind = 0;
}

enum stage { S_FILL, S_RING, S_ALL };

static double
time_stage_once(enum stage s, enum clk c)
{
	double v[1];
	struct rec_marker ready, tmp;

	fill(&ready, 1, 1);
	for (int r = 0; r < 1; r++) {
		uint64_t t0, drops = 0;

		drain();
		t0 = mono();
		for (uint64_t i = 0; i < CALLS; i++) {
			void *p;

			switch (s) {
			case S_FILL:
				fill(&tmp, i, i);
				sink = tmp.id + tmp.timestamp;
				break;
			case S_RING:
				drops += ring_pwrite(&rp, &ready) != 0;
				break;
			case S_ALL:
				if (ring_preserve(&rp, sizeof(tmp), &p) != 0) {
					drops++;
					break;
				}
				fill(p, read_clk(c), i);
				ring_commit(p, p);
				break;
			}
		}
		v[r] = (double)(mono() - t0) / CALLS;
		if (drops != 0)
			fprintf(stderr, "bench-clock: %llu dropped\n",
			    (unsigned long long)drops);
	}
	return v[0];
}

/* The stages timed: fill, ring, then all with each clock. */
static const struct {
	enum stage	 s;
	enum clk	 c;
} stages[] = {
	{ S_FILL, C_REAL }, { S_RING, C_REAL }, { S_ALL, C_REAL },
	{ S_ALL, C_MONO },
#ifdef HAVE_TSC
	{ S_ALL, C_TSCMAP },
#endif
};
#define NSTAGE	(sizeof(stages) / sizeof(stages[0]))

int
main(void)
{
	struct timespec res;
	double t[C_NCLK] = { 0 }, v[C_NCLK][RUNS], sv[NSTAGE][RUNS];
	double st[NSTAGE], ghz = 0, err = -1;
	int fd, nclk = C_NCLK;

#ifdef HAVE_TSC
	err = calibrate(&ghz);
#else
	nclk = C_TSC;
#endif
	printf("clock reads (median ns per call, %d runs of %d, the clocks "
	    "in turn):\n", RUNS, CALLS);
	for (int r = 0; r < RUNS; r++)
		for (int c = 0; c < nclk; c++)
			v[c][r] = time_clock_once((enum clk)c);
	for (int c = 0; c < nclk; c++) {
		t[c] = median(v[c], RUNS);
		printf("  %-42s %6.2f ns%s\n", clk_name[c], t[c],
		    c == C_REAL ? "  (agent, MSPTI_CLOCK=realtime)" :
		    c == C_TSCMAP ? "  (agent, invariant TSC)" : "");
	}
	clock_getres(CLOCK_REALTIME_COARSE, &res);
	printf("  (CLOCK_REALTIME_COARSE resolution %.3f ms: too coarse for "
	    "records)\n", (double)res.tv_nsec / 1e6);
	if (err >= 0)
		printf("TSC %.3f GHz; mapping fitted over 200 ms, largest error "
		    "over the next 300 ms %.0f ns\n", ghz, err);
	/* The shared segment and one of this thread's (the agent's layout),
	 * each big enough for a run: no drops, no consumer in the timing. */
	if (ring_create_segs(16u << 20, 2, &fd) != 0 ||
	    ring_map(fd, &ring) != 0) {
		fputs("bench-clock: cannot make a ring\n", stderr);
		return 1;
	}
	(void)ring_producer_claim(ring, &rp);
	ring_populate(ring, rp.seg);
	for (int r = 0; r < RUNS; r++)
		for (size_t k = 0; k < NSTAGE; k++)
			sv[k][r] = time_stage_once(stages[k].s, stages[k].c);
	for (size_t k = 0; k < NSTAGE; k++)
		st[k] = median(sv[k], RUNS);
	printf("one MARKER record (56 bytes) into a ring segment, median ns "
	    "per record (stages in turn):\n");
	printf("  record fill alone (stack record)         %6.2f ns\n", st[0]);
	printf("  ring append alone (ring_pwrite)          %6.2f ns\n", st[1]);
	for (size_t k = 2; k < NSTAGE; k++) {
		enum clk c = stages[k].c;

		printf("  clock + fill + reserve/commit, %-12s %6.2f ns "
		    "(clock alone %.2f)\n", c == C_REAL ? "REALTIME" :
		    c == C_MONO ? "MONOTONIC" : "TSC mapped", st[k], t[c]);
	}
#ifdef HAVE_TSC
	printf("TSC mapped instead of CLOCK_REALTIME: %.1f ns less per record "
	    "(%.0f %%)\n", st[2] - st[4], 100 * (st[2] - st[4]) / st[2]);
#endif
	ring_producer_release(&rp);
	drain();
	ring_unmap(ring);
	return 0;
}

/*
 * The agent's clock: CLOCK_REALTIME ns for every record, read from the
 * TSC where that is safe, else with clock_gettime.
 *
 * The vDSO's clock_gettime costs ~100 ns on a VM (it is the larger part of
 * an enabled record); RDTSC and a multiply cost a fraction of that.  The
 * TSC is used only where its rate is constant and it runs in deep C-states
 * (CPUID's invariant-TSC bit, the kernel's constant_tsc and nonstop_tsc),
 * RDTSCP exists, and the kernel itself keeps time with it (clocksource
 * "tsc": a kernel that found the TSC unstable switches away from it).
 * MSPTI_CLOCK=realtime forces clock_gettime.
 *
 * The mapping ns = base_ns + ((tsc - base_tsc) * mult >> 32) is fitted to
 * util_realtime_ns() (CLOCK_REALTIME, with the tests' skew hook), first
 * after HOSTCLOCK_FIRST_NS of clock_gettime reads, then refitted every
 * refit period (1 s; MSPTI_CLOCK_REFIT_MS) by the first thread that reads
 * the clock after it, so NTP's slewing and steps are followed:
 *
 *  - the rate is that of the last two reference points;
 *  - a refit is continuous: the new mapping starts where the old one is at
 *    that tick, with a rate that closes the gap to CLOCK_REALTIME over the
 *    next period (a slew, so timestamps never go back);
 *  - a gap of more than HOSTCLOCK_STEP_NS (settimeofday), or a refit after
 *    an idle spell of several periods, steps instead;
 *  - a rate that moved by more than 0.1 % (NTP slews at most 0.05 %) or a
 *    TSC that went back means the TSC is not what it claimed: clock_gettime
 *    from then on.
 *
 * Readers take the mapping under a sequence lock (hostclock in api.h) and
 * never wait: a reader that meets a refit in progress reads clock_gettime.
 * Each mapping is kept as a REC_HOST_CLOCK record, which the session writes
 * into its ring when hostclock.gen changes (session.c), so a trace says
 * how its timestamps were read and how far each mapping was off when it
 * was replaced.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "record.h"
#include "util.h"
#include "agent.h"
#include "api.h"
#if API_HAVE_TSC
#include <cpuid.h>
#endif

#define HOSTCLOCK_FIRST_NS	20000000ull	/* clock_gettime before the first fit */
#define HOSTCLOCK_REFIT_NS	1000000000ull
#define HOSTCLOCK_STEP_NS	1000000		/* a larger gap steps */
#define HOSTCLOCK_TRIES		5		/* reference reads per refit */
#define HOSTCLOCK_BRACKET_NS	100000		/* a wider reference: retry later */

struct hostclock hostclock;

enum { HC_UNDECIDED, HC_DECIDING, HC_CALIBRATING, HC_TSC, HC_REALTIME };

/*
 * No thread ever waits for another here (an application thread may read
 * the clock at any time, and a child of fork() has only the forking
 * thread): hc_busy is taken with a test-and-set that gives up, and the
 * record is copied out under a sequence count with bounded retries.
 */
static _Atomic int hc_mode;
static atomic_flag hc_busy = ATOMIC_FLAG_INIT;	/* decide, fits, hc_rec */
static uint64_t hc_refit_ns = HOSTCLOCK_REFIT_NS;
/* Under hc_busy: the last reference point and the rate fitted to it. */
static uint64_t hc_ref_ns;
#if API_HAVE_TSC
static uint64_t hc_ref_tsc;
static double hc_rate;			/* ns per tick */
static int hc_strikes;			/* refits in a row with another rate */
/* The first fit's rate spans only HOSTCLOCK_FIRST_NS from one unbracketed
 * read: the next refit replaces it rather than being judged by it. */
static bool hc_provisional;
#endif
/* The current mapping as a record, for the session; written under
 * hc_busy, odd hc_rec_seq while being written. */
static _Atomic uint32_t hc_rec_seq;
static struct rec_host_clock hc_rec;

#if API_HAVE_TSC
/* CPUID's invariant TSC and RDTSCP, and the kernel's clocksource. */
static bool
hostclock_tsc_usable(const char **why)
{
	unsigned a, b, c, d;
	char buf[32] = "";
	ssize_t n;
	int fd;

	if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000007u) {
		*why = "no CPUID leaf 0x80000007";
		return false;
	}
	__cpuid(0x80000001u, a, b, c, d);
	if (!(d & (1u << 27))) {
		*why = "no RDTSCP";
		return false;
	}
	__cpuid(0x80000007u, a, b, c, d);
	if (!(d & (1u << 8))) {
		*why = "TSC not invariant (no constant_tsc/nonstop_tsc)";
		return false;
	}
	fd = open("/sys/devices/system/clocksource/clocksource0/"
	    "current_clocksource", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
	}
	if (strncmp(buf, "tsc", 3) != 0 || (buf[3] != '\n' && buf[3] != '\0')) {
		*why = "the kernel's clocksource is not tsc";
		return false;
	}
	return true;
}
#endif

/* The mapping as a record (under hc_busy). */
static void
hostclock_set_rec(unsigned src, uint64_t ref_ns, uint32_t bracket,
    int64_t correction)
{
	struct rec_host_clock r;

	REC_INIT(&r, REC_HOST_CLOCK, src);
	r.timestamp = ref_ns;
	if (src == HOST_CLOCK_TSC) {
		r.base_tsc = atomic_load_explicit(&hostclock.base_tsc,
		    memory_order_relaxed);
		r.base_ns = atomic_load_explicit(&hostclock.base_ns,
		    memory_order_relaxed);
		r.mult = atomic_load_explicit(&hostclock.mult,
		    memory_order_relaxed);
	}
	r.correction_ns = correction;
	r.bracket_ns = bracket;
	atomic_fetch_add_explicit(&hc_rec_seq, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(&hc_rec, &r, sizeof(r));
	atomic_fetch_add_explicit(&hostclock.gen, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&hc_rec_seq, 1, memory_order_release);
}

/* Under hc_busy. */
static void
hostclock_decide(void)
{
	const char *why = "MSPTI_CLOCK=realtime";
	char v[32];
	uint64_t ms;

	/* On the registration thread: env_get, never getenv. */
	if (env_get("MSPTI_CLOCK_REFIT_MS", v, sizeof(v)) &&
	    (ms = strtoull(v, NULL, 10)) >= 10 && ms <= 3600000)
		hc_refit_ns = ms * 1000000ull;
	env_get("MSPTI_CLOCK", v, sizeof(v));
#if API_HAVE_TSC
	if (strcmp(v, "realtime") != 0 &&
	    hostclock_tsc_usable(&why)) {
		unsigned aux;

		hc_ref_ns = util_realtime_ns();
		hc_ref_tsc = __builtin_ia32_rdtscp(&aux);
		hostclock_set_rec(HOST_CLOCK_REALTIME, hc_ref_ns, 0, 0);
		atomic_store(&hc_mode, HC_CALIBRATING);
		log_debug("clock: TSC, calibrating");
		return;
	}
#endif
	(void)v;
	hostclock_set_rec(HOST_CLOCK_REALTIME, util_realtime_ns(), 0, 0);
	atomic_store(&hc_mode, HC_REALTIME);
	log_debug("clock: clock_gettime (%s)", why);
}

void
hostclock_init(void)
{
	int want = HC_UNDECIDED;

	if (atomic_load(&hc_mode) != HC_UNDECIDED ||
	    atomic_flag_test_and_set_explicit(&hc_busy, memory_order_acquire))
		return;
	if (atomic_compare_exchange_strong(&hc_mode, &want, HC_DECIDING))
		hostclock_decide();
	atomic_flag_clear_explicit(&hc_busy, memory_order_release);
}

/* The forking thread is the child's only one: whatever another thread was
 * doing here is undone, and a mapping it was writing is fitted again. */
static void
hostclock_after_fork_child(void)
{
	int mode = atomic_load(&hc_mode);

	atomic_flag_clear(&hc_busy);
	if (atomic_load(&hc_rec_seq) & 1)
		atomic_fetch_add(&hc_rec_seq, 1);
	if (mode == HC_DECIDING)
		atomic_store(&hc_mode, HC_UNDECIDED);
	else if ((atomic_load(&hostclock.seq) & 1) ||
	    mode == HC_CALIBRATING) {
		/* Mid-write, or a first fit stored but not yet switched to:
		 * calibrate again (a mapping left here would never refit). */
		atomic_store(&hostclock.seq, 0);
		hc_ref_ns = util_realtime_ns();
#if API_HAVE_TSC
		{
			unsigned aux;

			hc_ref_tsc = __builtin_ia32_rdtscp(&aux);
		}
#endif
		atomic_store(&hc_mode, HC_CALIBRATING);
	}
}

__attribute__((constructor)) static void
hostclock_install_atfork(void)
{
	pthread_atfork(NULL, NULL, hostclock_after_fork_child);
}

#if API_HAVE_TSC
/* The tightest of a few (CLOCK_REALTIME, TSC, CLOCK_REALTIME) reads. */
static void
hostclock_ref(uint64_t *tsc, uint64_t *ns, uint32_t *bracket)
{
	uint64_t best = UINT64_MAX;
	unsigned aux;

	for (int i = 0; i < HOSTCLOCK_TRIES; i++) {
		uint64_t a = util_realtime_ns(), t = __builtin_ia32_rdtscp(&aux),
		    b = util_realtime_ns();

		if (b < a || b - a >= best)
			continue;
		best = b - a;
		*tsc = t;
		*ns = a + best / 2;
	}
	if (best == UINT64_MAX) {	/* CLOCK_REALTIME went back each time */
		*tsc = __builtin_ia32_rdtscp(&aux);
		*ns = util_realtime_ns();
		best = 0;
	}
	*bracket = best > UINT32_MAX ? UINT32_MAX : (uint32_t)best;
}

static void
hostclock_store(uint64_t btsc, uint64_t bns, uint64_t mult, uint64_t span)
{
	uint32_t s = atomic_load_explicit(&hostclock.seq, memory_order_relaxed);

	/* Odd while writing; 0 stays "off" (never stored here). */
	atomic_store_explicit(&hostclock.seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&hostclock.base_tsc, btsc, memory_order_relaxed);
	atomic_store_explicit(&hostclock.base_ns, bns, memory_order_relaxed);
	atomic_store_explicit(&hostclock.mult, mult, memory_order_relaxed);
	atomic_store_explicit(&hostclock.span, span, memory_order_relaxed);
	atomic_store_explicit(&hostclock.seq, s + 2 == 0 ? 2 : s + 2,
	    memory_order_release);
}

static void
hostclock_give_up(const char *why, uint64_t ref_ns)
{
	atomic_store(&hc_mode, HC_REALTIME);
	atomic_store_explicit(&hostclock.seq, 0, memory_order_release);
	hostclock_set_rec(HOST_CLOCK_REALTIME, ref_ns, 0, 0);
	log_warnx("clock: %s; clock_gettime from now on", why);
}

/*
 * Fits the mapping to a new reference point (under hc_busy).  first: the
 * first fit, from the point hostclock_decide took.  False when no mapping
 * was stored (the first fit then comes again later).
 */
static bool
hostclock_fit(bool first)
{
	uint64_t t, r, old_tsc, old_ns, old_mult, base_ns, span;
	uint32_t bracket;
	double rate, target, mult;
	int64_t err = 0;
	bool step = first;

	hostclock_ref(&t, &r, &bracket);
	/* Every try preempted: the reference is no better than its bracket.
	 * Try again in an eighth of a period (the mapping goes on). */
	if (bracket > HOSTCLOCK_BRACKET_NS) {
		if (!first) {
			span = atomic_load_explicit(&hostclock.span,
			    memory_order_relaxed);
			hostclock_store(atomic_load_explicit(&hostclock.base_tsc,
			    memory_order_relaxed), atomic_load_explicit(
			    &hostclock.base_ns, memory_order_relaxed),
			    atomic_load_explicit(&hostclock.mult,
			    memory_order_relaxed), span + span / 8);
		}
		return false;
	}
	if (t <= hc_ref_tsc || r <= hc_ref_ns) {
		if (t <= hc_ref_tsc) {
			hostclock_give_up("the TSC went back", r);
			return false;
		}
		/* CLOCK_REALTIME was set back: start over from here. */
		hc_ref_tsc = t;
		hc_ref_ns = r;
		step = true;
		rate = hc_rate;
	} else
		rate = (double)(r - hc_ref_ns) / (double)(t - hc_ref_tsc);
	/* Another rate: a bad reference point (a read preempted) keeps the
	 * old rate and steps; three in a row, the TSC is not invariant. */
	if (!first && !hc_provisional && hc_rate > 0 &&
	    (rate > hc_rate * 1.001 || rate < hc_rate * 0.999)) {
		if (++hc_strikes >= 3) {
			hostclock_give_up("the TSC rate moved by more than "
			    "0.1 %", r);
			return false;
		}
		rate = hc_rate;
		step = true;
	} else
		hc_strikes = 0;
	if (!(rate > 0 && rate < 1000)) {	/* no rate yet (set back) */
		hc_ref_tsc = t;
		hc_ref_ns = r;
		return false;
	}
	old_tsc = atomic_load_explicit(&hostclock.base_tsc,
	    memory_order_relaxed);
	old_ns = atomic_load_explicit(&hostclock.base_ns, memory_order_relaxed);
	old_mult = atomic_load_explicit(&hostclock.mult, memory_order_relaxed);
	span = (uint64_t)((double)hc_refit_ns / rate);
	base_ns = r;
	if (!first) {
		uint64_t m = old_ns + (uint64_t)(((unsigned __int128)(t -
		    old_tsc) * old_mult) >> 32);

		err = (int64_t)(r - m);
		/* Idle for a few periods: no record in between to keep in
		 * order with, take the reference as it is. */
		if (t - old_tsc > 3 * span || err > HOSTCLOCK_STEP_NS ||
		    err < -HOSTCLOCK_STEP_NS)
			step = true;
		if (!step)
			base_ns = m;
	}
	/* Over the next period: from base_ns to where CLOCK_REALTIME will
	 * be (r + a period at the fitted rate). */
	target = (double)(int64_t)(r - base_ns) + rate * (double)span;
	mult = target / (double)span * 4294967296.0;
	if (mult < 1.0)
		mult = 1.0;
	hc_ref_tsc = t;
	hc_ref_ns = r;
	hc_rate = rate;
	hc_provisional = first;
	hostclock_store(t, base_ns, (uint64_t)(mult + 0.5), span);
	hostclock_set_rec(HOST_CLOCK_TSC, r, bracket, err);
	log_debug("clock: TSC mapping %s: %.6f ns/tick, was off %lld ns, "
	    "reference +-%u ns", first ? "fitted" : step ? "stepped" : "slewed",
	    rate, (long long)err, bracket / 2);
	return true;
}

/* The reader's slow path for a tick past the mapping's period: refits,
 * unless another thread is at it, and reads the clock again. */
uint64_t
hostclock_refit(void)
{
	uint64_t ns;

	if (!atomic_flag_test_and_set_explicit(&hc_busy,
	    memory_order_acquire)) {
		if (atomic_load(&hc_mode) == HC_TSC)
			(void)hostclock_fit(false);
		atomic_flag_clear_explicit(&hc_busy, memory_order_release);
	}
	return hostclock_read(&ns) == 0 ? ns : util_realtime_ns();
}
#else
/* No TSC path here: hostclock_read never asks for a refit, but api_now
 * names this, and an unoptimised build still links it. */
uint64_t
hostclock_refit(void)
{
	return util_realtime_ns();
}
#endif

/* Not on the TSC (yet, or at all), or a refit is under way:
 * clock_gettime; after the first HOSTCLOCK_FIRST_NS, the first fit. */
uint64_t
hostclock_slow(void)
{
	int mode = atomic_load_explicit(&hc_mode, memory_order_acquire);

	if (API_UNLIKELY(mode == HC_UNDECIDED)) {
		hostclock_init();
		mode = atomic_load(&hc_mode);
	}
	/* Decided by another thread right now: not waited for. */
#if API_HAVE_TSC
	if (API_UNLIKELY(mode == HC_CALIBRATING)) {
		uint64_t now = util_realtime_ns();

		if (now - hc_ref_ns < HOSTCLOCK_FIRST_NS ||
		    atomic_flag_test_and_set_explicit(&hc_busy,
		    memory_order_acquire))
			return now;
		if (atomic_load(&hc_mode) == HC_CALIBRATING) {
			if (hostclock_fit(true) &&
			    atomic_load(&hc_mode) == HC_CALIBRATING)
				atomic_store(&hc_mode, HC_TSC);
		}
		atomic_flag_clear_explicit(&hc_busy, memory_order_release);
		return now;
	}
#endif
	return util_realtime_ns();
}

bool
hostclock_tsc(void)
{
	return atomic_load(&hc_mode) == HC_TSC;
}

uint32_t
hostclock_record(struct rec_host_clock *out)
{
	for (int i = 0; i < 100; i++) {
		uint32_t s = atomic_load_explicit(&hc_rec_seq,
		    memory_order_acquire), gen;

		if (s & 1)
			continue;
		gen = atomic_load_explicit(&hostclock.gen,
		    memory_order_relaxed);
		memcpy(out, &hc_rec, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&hc_rec_seq, memory_order_relaxed)
		    == s)
			return gen;
	}
	return 0;	/* being written: the next record tries again */
}

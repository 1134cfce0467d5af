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
 * util_realtime_ns() (CLOCK_REALTIME, with the tests' skew and drift), first
 * after HOSTCLOCK_FIRST_NS of clock_gettime reads, then refitted every
 * refit period (1 s; MSPTI_CLOCK_REFIT_MS) by the first thread that reads
 * the clock after it, so NTP's slewing and steps are followed:
 *
 *  - the rate is that of the last two reference points;
 *  - a refit is continuous: the new mapping starts where the old one ends
 *    (an eighth of a period after the refit is due), with the old one's
 *    value there and a rate that closes the gap to CLOCK_REALTIME over the
 *    next period (a slew, so timestamps never go back);
 *  - a refit after the old mapping's end (an idle process) starts at its
 *    own tick, at the reference or the old end's value, whichever is
 *    later (so it does not go back either), and slews from there;
 *  - a gap of more than HOSTCLOCK_STEP_NS (settimeofday) steps to the
 *    reference instead;
 *  - a rate that moved by more than 0.1 % (NTP slews at most 0.05 %) or a
 *    TSC that went back means the TSC is not what it claimed: clock_gettime
 *    from then on.
 *
 * Readers take the mapping from one of two slots (hostclock in api.h): a
 * refit writes the other and then switches, so no reader waits or falls
 * back to clock_gettime because of it, and no thread's timestamps go back
 * (giving up the TSC included: clock_gettime never reads below the last
 * mapping's end).
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
/* Test hook (MSPTI_TEST_TSC_OFFSET_NS, 0 to 500 us): the mapping is fitted
 * this far ahead of CLOCK_REALTIME, as a mapping off by a slew would be,
 * so that a read falling back to clock_gettime would show going back. */
static uint64_t hc_test_offset;
/* Test hook (MSPTI_TEST_REFIT_DELAY_US, up to 10 ms): a refit takes this
 * much longer, as one preempted mid-way does, so other threads read the
 * clock while it is under way. */
static uint64_t hc_test_delay_us;
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
/* Reads on clock_gettime after the TSC was given up never return less
 * than this: the last mapping's end (no reader got more from it). */
#if API_HAVE_TSC
static _Atomic uint64_t hc_floor;
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
		const struct hostclock_map *mp = &hostclock.map[
		    atomic_load(&hostclock.seq) & 1];

		r.base_tsc = atomic_load_explicit(&mp->base_tsc,
		    memory_order_relaxed);
		r.base_ns = atomic_load_explicit(&mp->base_ns,
		    memory_order_relaxed);
		r.mult = atomic_load_explicit(&mp->mult,
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
	if (env_get("MSPTI_TEST_TSC_OFFSET_NS", v, sizeof(v)) &&
	    (ms = strtoull(v, NULL, 10)) <= 500000)
		hc_test_offset = ms;
	if (env_get("MSPTI_TEST_REFIT_DELAY_US", v, sizeof(v)) &&
	    (ms = strtoull(v, NULL, 10)) <= 10000)
		hc_test_delay_us = ms;
	env_get("MSPTI_CLOCK", v, sizeof(v));
#if API_HAVE_TSC
	if (strcmp(v, "realtime") != 0 &&
	    hostclock_tsc_usable(&why)) {
		unsigned aux;

		hc_ref_ns = util_realtime_ns() + hc_test_offset;
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
	else if (mode == HC_CALIBRATING) {
		/* A first fit stored but not yet switched to: calibrate
		 * again (a mapping left here would never refit).  A refit
		 * another thread was writing wrote the slot not in use. */
		atomic_store(&hostclock.seq, 0);
		hc_ref_ns = util_realtime_ns() + hc_test_offset;
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
		uint64_t a = util_realtime_ns() + hc_test_offset,
		    t = __builtin_ia32_rdtscp(&aux),
		    b = util_realtime_ns() + hc_test_offset;

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

/* Publishes a mapping in the slot not in use (under hc_busy): readers of
 * the current one finish with it whole, later ones take the new one. */
static void
hostclock_publish(uint64_t btsc, uint64_t bns, uint64_t mult, uint64_t span,
    uint64_t ptsc, uint64_t pns, uint64_t pmult)
{
	uint32_t s = atomic_load_explicit(&hostclock.seq, memory_order_relaxed);
	uint32_t n = s + 1 == 0 ? 2 : s + 1;	/* 0 stays "off" */
	struct hostclock_map *mp = &hostclock.map[n & 1];

	/* A reader still on this slot (two mappings ago) sees seq move. */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&mp->base_tsc, btsc, memory_order_relaxed);
	atomic_store_explicit(&mp->base_ns, bns, memory_order_relaxed);
	atomic_store_explicit(&mp->mult, mult, memory_order_relaxed);
	atomic_store_explicit(&mp->span, span, memory_order_relaxed);
	atomic_store_explicit(&mp->prev_tsc, ptsc, memory_order_relaxed);
	atomic_store_explicit(&mp->prev_ns, pns, memory_order_relaxed);
	atomic_store_explicit(&mp->prev_mult, pmult, memory_order_relaxed);
	atomic_store_explicit(&hostclock.seq, n, memory_order_release);
}

/* The mapping in use (under hc_busy; seq != 0). */
static void
hostclock_cur(uint64_t *bt, uint64_t *bn, uint64_t *m, uint64_t *span,
    uint64_t *pt, uint64_t *pn, uint64_t *pm)
{
	const struct hostclock_map *mp = &hostclock.map[
	    atomic_load_explicit(&hostclock.seq, memory_order_relaxed) & 1];

	*bt = atomic_load_explicit(&mp->base_tsc, memory_order_relaxed);
	*bn = atomic_load_explicit(&mp->base_ns, memory_order_relaxed);
	*m = atomic_load_explicit(&mp->mult, memory_order_relaxed);
	*span = atomic_load_explicit(&mp->span, memory_order_relaxed);
	*pt = atomic_load_explicit(&mp->prev_tsc, memory_order_relaxed);
	*pn = atomic_load_explicit(&mp->prev_ns, memory_order_relaxed);
	*pm = atomic_load_explicit(&mp->prev_mult, memory_order_relaxed);
}

/*
 * Stops the TSC (under hc_busy).  The clock must not go back at the
 * switch: the mapping in use is first cut off a little ahead (it stays
 * flat from there), republished until that point was still ahead once
 * published; clock_gettime reads then never return less than it.
 */
static void
hostclock_give_up(const char *why, uint64_t ref_ns)
{
	uint64_t floor = 0;

	for (int i = 0; i < 4 && atomic_load(&hostclock.seq) != 0; i++) {
		const struct hostclock_map *mp = &hostclock.map[
		    atomic_load(&hostclock.seq) & 1];
		uint64_t bt, bn, m, sp, pt, pn, pm, at, margin;
		unsigned aux;

		hostclock_cur(&bt, &bn, &m, &sp, &pt, &pn, &pm);
		margin = sp >> 10;	/* ~1 ms of a 1 s period */
		at = __builtin_ia32_rdtscp(&aux) + margin;
		floor = hostclock_map_ns(mp, at - bt, bn, m, sp);
		/* From at on flat at floor (span 0); before it the mapping
		 * in use (its previous one, if at is before its base). */
		if ((int64_t)(at - bt) >= 0)
			hostclock_publish(at, floor, m, 0, bt, bn, m);
		else
			hostclock_publish(at, floor, m, 0, pt, pn, pm);
		if ((int64_t)(__builtin_ia32_rdtscp(&aux) - at) < 0)
			break;
	}
	if (floor > atomic_load(&hc_floor))
		atomic_store(&hc_floor, floor);
	atomic_store(&hc_mode, HC_REALTIME);
	atomic_store_explicit(&hostclock.seq, 0, memory_order_release);
	hostclock_set_rec(HOST_CLOCK_REALTIME, ref_ns, 0, 0);
	log_warnx("clock: %s; clock_gettime from now on", why);
}

/*
 * Fits the mapping to a new reference point (under hc_busy).  first: the
 * first fit, from the point hostclock_decide took.  False when no mapping
 * was stored (the first fit then comes again later).
 *
 * The new mapping starts where the one in use ends (HOSTCLOCK_END of its
 * span, ahead of this refit, which is due at its span), with the value
 * that one has there; it is published at once, and readers take the old
 * one for ticks before the switch: continuous.  A refit that comes after
 * the end (the process was idle) starts now, at the reference or the old
 * end's value if that is later.  A gap over HOSTCLOCK_STEP_NS (the clock
 * was set) steps to the reference.
 */
static bool
hostclock_fit(bool first)
{
	uint64_t t, r, bt = 0, bn = 0, om = 0, sp = 0, pt, pn, pm;
	uint64_t base_tsc, base_ns, span;
	uint32_t bracket;
	double rate, target, mult;
	int64_t err = 0;
	bool step = first;

	hostclock_ref(&t, &r, &bracket);
	if (hc_test_delay_us > 0)
		usleep((useconds_t)hc_test_delay_us);
	if (!first)
		hostclock_cur(&bt, &bn, &om, &sp, &pt, &pn, &pm);
	/* Every try preempted: the reference is no better than its bracket.
	 * Try again in an eighth of a period (the mapping goes on). */
	if (bracket > HOSTCLOCK_BRACKET_NS) {
		if (!first)
			hostclock_publish(bt, bn, om, sp + sp / 8, pt, pn, pm);
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
	 * old rate; three in a row, the TSC is not invariant. */
	if (!first && !hc_provisional && hc_rate > 0 &&
	    (rate > hc_rate * 1.001 || rate < hc_rate * 0.999)) {
		if (++hc_strikes >= 3) {
			hostclock_give_up("the TSC rate moved by more than "
			    "0.1 %", r);
			return false;
		}
		rate = hc_rate;
	} else
		hc_strikes = 0;
	if (!(rate > 0 && rate < 1000)) {	/* no rate yet (set back) */
		hc_ref_tsc = t;
		hc_ref_ns = r;
		return false;
	}
	span = (uint64_t)((double)hc_refit_ns / rate);
	if (first) {
		/* At or above CLOCK_REALTIME at t (the bracket's top, and a
		 * microsecond): no clock_gettime read before it is later. */
		base_tsc = pt = t;
		base_ns = pn = r + bracket / 2 + 1000;
		pm = 0;
	} else {
		uint64_t end = bt + HOSTCLOCK_END(sp), cap = bn + (uint64_t)
		    (((unsigned __int128)HOSTCLOCK_END(sp) * om) >> 32);

		err = (int64_t)(r - (bn + (uint64_t)(((unsigned __int128)
		    (t - bt) * om) >> 32)));
		if (err > HOSTCLOCK_STEP_NS || err < -HOSTCLOCK_STEP_NS)
			step = true;
		pt = bt;
		pn = bn;
		pm = om;
		if ((int64_t)(t - end) >= 0) {
			/* Late (idle): from now. */
			base_tsc = t;
			base_ns = step || r > cap ? r : cap;
		} else {
			base_tsc = end;
			base_ns = step ? r + (uint64_t)(rate * (double)(end - t)) :
			    cap;
		}
	}
	/* Over the next period: from base_ns to where CLOCK_REALTIME will
	 * be then (the reference, at the fitted rate). */
	target = (double)(int64_t)(r - base_ns) +
	    rate * (double)(base_tsc - t + span);
	mult = target / (double)span * 4294967296.0;
	if (mult < 1.0)
		mult = 1.0;
	hc_ref_tsc = t;
	hc_ref_ns = r;
	hc_rate = rate;
	hc_provisional = first;
	hostclock_publish(base_tsc, base_ns, (uint64_t)(mult + 0.5), span,
	    pt, pn, pm);
	hostclock_set_rec(HOST_CLOCK_TSC, r, bracket, err);
	log_debug("clock: TSC mapping %s: %.6f ns/tick, was off %lld ns, "
	    "reference +-%u ns", first ? "fitted" : step ? "stepped" : "slewed",
	    rate, (long long)err, bracket / 2);
	return true;
}

/* clock_gettime, never below the TSC's last mapping once given up. */
static uint64_t
hostclock_realtime(void)
{
	uint64_t now = util_realtime_ns(), f = atomic_load_explicit(&hc_floor,
	    memory_order_relaxed);

	return now > f ? now : f;
}

/* The reader's slow path for a tick past the mapping's period: refits,
 * unless another thread is at it, and reads the clock again; the old
 * mapping's value (capped) while the new one is not there. */
uint64_t
hostclock_refit(uint64_t capped)
{
	uint64_t ns;

	if (!atomic_flag_test_and_set_explicit(&hc_busy,
	    memory_order_acquire)) {
		if (atomic_load(&hc_mode) == HC_TSC)
			(void)hostclock_fit(false);
		atomic_flag_clear_explicit(&hc_busy, memory_order_release);
	}
	for (int i = 0; i < 4; i++)
		if (hostclock_read(&ns) >= 0)
			return ns;
	(void)capped;
	return hostclock_slow();
}
#else
/* No TSC path here: hostclock_read never asks for a refit, but api_now
 * names this, and an unoptimised build still links it. */
uint64_t
hostclock_refit(uint64_t capped)
{
	(void)capped;
	return util_realtime_ns();
}
#endif

/* Not on the TSC (yet, or at all), or the mapping moved under a read:
 * the mapping again, else clock_gettime; after the first
 * HOSTCLOCK_FIRST_NS, the first fit. */
uint64_t
hostclock_slow(void)
{
	int mode = atomic_load_explicit(&hc_mode, memory_order_acquire);

	if (API_UNLIKELY(mode == HC_UNDECIDED)) {
		hostclock_init();
		mode = atomic_load(&hc_mode);
	}
#if API_HAVE_TSC
	if (mode == HC_TSC) {
		uint64_t ns;

		for (int i = 0; i < 4; i++)
			if (hostclock_read(&ns) >= 0)
				return ns;
		return hostclock_realtime();
	}
	/* Decided by another thread right now: not waited for. */
	if (API_UNLIKELY(mode == HC_CALIBRATING)) {
		uint64_t now = util_realtime_ns(), ns;

		if (now + hc_test_offset - hc_ref_ns < HOSTCLOCK_FIRST_NS ||
		    atomic_flag_test_and_set_explicit(&hc_busy,
		    memory_order_acquire)) {
			/* The first mapping came out meanwhile: it is at
			 * or above this read, take it instead. */
			if (atomic_load(&hostclock.seq) != 0 &&
			    hostclock_read(&ns) >= 0)
				return ns;
			return now;
		}
		if (atomic_load(&hc_mode) == HC_CALIBRATING) {
			if (hostclock_fit(true) &&
			    atomic_load(&hc_mode) == HC_CALIBRATING)
				atomic_store(&hc_mode, HC_TSC);
		}
		atomic_flag_clear_explicit(&hc_busy, memory_order_release);
		return now;
	}
	return hostclock_realtime();
#else
	return util_realtime_ns();
#endif
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

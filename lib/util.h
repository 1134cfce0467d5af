/* Small helpers shared by every program: clocks, runtime dir, strings. */
#ifndef MSPTI_UTIL_H
#define MSPTI_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#define MSPTI_AGENT_SOCK	"agent.sock"
#define MSPTI_CTL_SOCK		"ctl.sock"
#define MSPTI_LOCK_FILE		"msptid.lock"

#ifndef nitems
#define nitems(a)	(sizeof(a) / sizeof((a)[0]))
#endif

/*
 * Test hooks that make the nodes of a minicluster on one machine disagree
 * about the time the way a fleet's hosts do (doc/cluster.md, "Clocks"):
 * every host CLOCK_REALTIME read of ours returns
 *
 *	real + skew + (real - t0) * ppb / 1e9
 *
 * with skew = MSPTI_TEST_CLOCK_SKEW_NS (signed ns), ppb =
 * MSPTI_TEST_CLOCK_DRIFT_PPB (signed parts per billion: a clock running
 * fast, positive, or slow, negative; |ppb| < 1e9, else no drift) and t0 =
 * MSPTI_TEST_CLOCK_DRIFT_T0_NS (the real CLOCK_REALTIME at which the drift
 * has added nothing yet).  Processes that must read one clock need one t0
 * (minicluster writes the instant the cluster came up into each drifting
 * node's environment); without it t0 is the instant this copy of the hook
 * was loaded, a clock of the process's own.  Read once per program (per
 * file that uses it: a static per translation unit, all reading the same
 * environment; t0 by default per translation unit too, microseconds
 * apart).  Only the host clock moves: CLOCK_MONOTONIC, which the
 * simulator's model and its cross-rank coordination use, does not.
 */
struct util_clock_test {
	int64_t		skew_ns;
	int64_t		drift_ppb;	/* 0: no drift, t0 unused */
	int64_t		t0_ns;
};

static inline int64_t
util_clock_env(const char *name, int64_t def)
{
	const char	*s = getenv(name);

	return s != NULL && *s != '\0' ? strtoll(s, NULL, 10) : def;
}

/* The hooks' settings, read from the environment on the first call. */
static inline const struct util_clock_test *
util_clock_test(void)
{
	static struct util_clock_test	t;
	static int			loaded;
	struct timespec			ts;
	int64_t				ppb, t0 = 0;

	if (!__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) {
		ppb = util_clock_env("MSPTI_TEST_CLOCK_DRIFT_PPB", 0);
		if (ppb <= -1000000000 || ppb >= 1000000000)
			ppb = 0;
		if (ppb != 0) {
			clock_gettime(CLOCK_REALTIME, &ts);
			t0 = util_clock_env("MSPTI_TEST_CLOCK_DRIFT_T0_NS",
			    (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
		}
		__atomic_store_n(&t.skew_ns,
		    util_clock_env("MSPTI_TEST_CLOCK_SKEW_NS", 0),
		    __ATOMIC_RELAXED);
		__atomic_store_n(&t.drift_ppb, ppb, __ATOMIC_RELAXED);
		__atomic_store_n(&t.t0_ns, t0, __ATOMIC_RELAXED);
		__atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
	}
	return &t;
}

/* Each file's copy is loaded when the program or library is loaded, so no
 * thread of ours reads the environment later (another thread's setenv may
 * be freeing it; see agent/env.c). */
__attribute__((constructor)) static void
util_clock_test_load(void)
{
	(void)util_clock_test();
}

/* The hooks' idea of host CLOCK_REALTIME at real time ns. */
static inline uint64_t
util_clock_test_at(const struct util_clock_test *t, uint64_t ns)
{
	int64_t	ppb = __atomic_load_n(&t->drift_ppb, __ATOMIC_RELAXED), d;

	if (ppb != 0) {
		/* d * ppb / 1e9 without 128-bit arithmetic: whole seconds,
		 * then the rest (|ppb| < 1e9 keeps both in range). */
		d = (int64_t)(ns - (uint64_t)__atomic_load_n(&t->t0_ns,
		    __ATOMIC_RELAXED));
		ns += (uint64_t)(d / 1000000000 * ppb +
		    d % 1000000000 * ppb / 1000000000);
	}
	return ns + (uint64_t)__atomic_load_n(&t->skew_ns, __ATOMIC_RELAXED);
}

/* CLOCK_REALTIME in ns, as the test hooks make it. */
static inline uint64_t
util_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return util_clock_test_at(util_clock_test(),
	    (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
}

uint64_t	util_monotonic_ns(void);

/* Clock c in ns (CLOCK_THREAD_CPUTIME_ID: the calling thread's CPU). */
static inline uint64_t
util_clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Byte helpers of the wire formats (partial results, frames, report
 * bundles, the Perfetto writer): little-endian integers, 64-bit FNV-1a
 * and LEB128 varints (protobuf's: 7 bits a byte, low bits first).
 */
static inline void
util_put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t
util_get_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static inline uint64_t
util_get_le64(const unsigned char *p)
{
	return (uint64_t)util_get_le32(p) | (uint64_t)util_get_le32(p + 4) <<
	    32;
}

#define UTIL_FNV64_INIT	14695981039346656037ull

/* FNV-1a of n bytes at p, from h (UTIL_FNV64_INIT to start). */
static inline uint64_t
util_fnv64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* v as a varint at o (10 bytes at most); returns the end. */
static inline unsigned char *
util_varint_put(unsigned char *o, uint64_t v)
{
	while (v >= 0x80) {
		*o++ = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	*o++ = (unsigned char)v;
	return o;
}

static inline size_t
util_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/*
 * The mask for threads we start inside somebody else's process (the
 * agent's, the simulator's runtime): every signal the application may
 * want delivered to its own threads is blocked, the synchronous faults
 * are not.  A fault raised while blocked kills the process at once, with
 * no handler run: the application's crash handler (or a sanitizer) would
 * never say where.  Call with the set to restore afterwards in old.
 */
/* Decimal digits, two at a time (util_u64_dec). */
static const char util_dd[] =
    "00010203040506070809101112131415161718192021222324252627282930"
    "31323334353637383940414243444546474849505152535455565758596061"
    "62636465666768697071727374757677787980818283848586878889909192"
    "93949596979899";

/* The 8 digits of v < 10^8 at q, in 32-bit arithmetic. */
static inline void
util_8digits(char *q, uint32_t v)
{
	uint32_t hi = v / 10000, lo = v % 10000;

	memcpy(q, util_dd + 2 * (hi / 100), 2);
	memcpy(q + 2, util_dd + 2 * (hi % 100), 2);
	memcpy(q + 4, util_dd + 2 * (lo / 100), 2);
	memcpy(q + 6, util_dd + 2 * (lo % 100), 2);
}

/* Appends the decimal digits of v at o; returns the new end.  The length
 * first (from the bit length), then written in place from the end: no
 * copy; 8 digits per 64-bit division, the rest two at a time in 32-bit
 * arithmetic (timestamps and ids mostly fit in it). */
static inline char *
util_u64_dec(char *o, uint64_t v)
{
	static const uint64_t p10[20] = { 1ull, 10ull, 100ull, 1000ull,
	    10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
	    1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
	    10000000000000ull, 100000000000000ull, 1000000000000000ull,
	    10000000000000000ull, 100000000000000000ull,
	    1000000000000000000ull, 10000000000000000000ull };
	unsigned t = ((64u - (unsigned)__builtin_clzll(v | 1)) * 1233u) >> 12;
	char *end = o + t + ((v | 1) >= p10[t]), *q = end;
	uint32_t w;

	while (v >= 100000000) {
		q -= 8;
		util_8digits(q, (uint32_t)(v % 100000000));
		v /= 100000000;
	}
	w = (uint32_t)v;
	while (w >= 100) {
		unsigned r = w % 100;

		w /= 100;
		q -= 2;
		memcpy(q, util_dd + 2 * r, 2);
	}
	if (w >= 10) {
		q -= 2;
		memcpy(q, util_dd + 2 * w, 2);
	} else
		*--q = (char)('0' + w);
	return end;
}

static inline void
util_block_async_signals(sigset_t *old)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL,
	    SIGTRAP, SIGSYS, SIGABRT };
	sigset_t	set;
	size_t		i;

	sigfillset(&set);
	for (i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(&set, faults[i]);
	pthread_sigmask(SIG_SETMASK, &set, old);
}

/*
 * Opens path to read it, close-on-exec, without waiting for ever on a
 * FIFO: open(2) would wait for its writer, so it opens non-blocking and
 * gives the FIFO UTIL_FIFO_WAIT_S seconds for a writer to write (or come
 * and go), else -ETIMEDOUT (util_input_strerror says so).  Reads block
 * again after (a stream's writer may be slower than us).  A pipe whose
 * writer runs (a shell's <(...)) is read as any other.  Returns the fd
 * or -errno.
 */
#define UTIL_FIFO_WAIT_S	5
#define UTIL_STR_(x)		#x
#define UTIL_STR(x)		UTIL_STR_(x)
#define UTIL_FIFO_NO_WRITER	"a FIFO that no writer wrote to within " \
				UTIL_STR(UTIL_FIFO_WAIT_S) " s"

static inline int
util_open_input(const char *path)
{
	struct pollfd pfd = { .events = POLLIN };
	struct stat st;
	int fd, fl, n, rc = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) == -1)
		return -errno;
	if (fstat(fd, &st) != 0)
		rc = -errno;
	else if (S_ISFIFO(st.st_mode)) {
		pfd.fd = fd;
		do
			n = poll(&pfd, 1, UTIL_FIFO_WAIT_S * 1000);
		while (n < 0 && errno == EINTR);
		rc = n < 0 ? -errno : n == 0 ? -ETIMEDOUT : 0;
	}
	if (rc == 0 && ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1))
		rc = -errno;
	if (rc != 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/*
 * Creates (or empties) the regular file path for writing, close-on-exec,
 * without following a link there, with mode less the umask (force: mode
 * whatever the umask).  What is there and not a regular file (a FIFO, a
 * device) is left alone: -ENXIO, at once, not a wait for a FIFO's
 * reader.  Returns the fd or -errno.
 */
static inline int
util_create_output(const char *path, mode_t mode, bool force)
{
	struct stat st;
	int fd, fl, rc = 0;

	/* O_NONBLOCK: a FIFO with no reader fails (ENXIO) rather than
	 * waits; no O_TRUNC before we know it is a regular file. */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK, mode);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0)
		rc = -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -ENXIO;
	else if (ftruncate(fd, 0) != 0 || (fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
	    (force && fchmod(fd, mode) != 0))
		rc = -errno;
	if (rc != 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* util_open_input's error in words. */
static inline const char *
util_input_strerror(int rc)
{
	return rc == -ETIMEDOUT ? UTIL_FIFO_NO_WRITER : strerror(-rc);
}

/*
 * A buffer one thread fills and another then reads, in turn: when the two
 * CPUs share no cache, each line the filler writes has first to be taken
 * back from the reader's caches (doc/benchmarks.md, eighteenth pass).
 * util_cache_evict puts n bytes at p out of every cache (CLFLUSHOPT, many
 * lines in flight), so the next writes go to memory as to a fresh buffer;
 * util_cache_evict_ok says whether this CPU can (x86-64 with CLFLUSHOPT;
 * elsewhere util_cache_evict does nothing).
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

static inline bool
util_cache_evict_ok(void)
{
	unsigned a, b, c, d;

	/* CPUID leaf 7, EBX bit 23. */
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
}

__attribute__((target("clflushopt")))
static inline void
util_cache_evict(const void *p, size_t n)
{
	for (size_t i = 0; i < n; i += 64)
		__builtin_ia32_clflushopt((void *)((uintptr_t)p + i));
	__builtin_ia32_sfence();
}
#else
static inline bool
util_cache_evict_ok(void)
{
	return false;
}

static inline void
util_cache_evict(const void *p, size_t n)
{
	(void)p;
	(void)n;
}
#endif

/* The runtime dir: arg if given, else $MSPTID_RUNTIME_DIR, else
 * RUNSTATEDIR/msptid.  Returns a static string. */
const char	*util_runtime_dir(const char *arg);

/* Joins dir and name into out; returns -ENAMETOOLONG if it does not fit
 * (sun_path is short). */
int	util_path(char *out, size_t outlen, const char *dir, const char *name);

/* Connects a SOCK_STREAM|SOCK_CLOEXEC Unix socket to path.  With
 * nonblock, the socket stays non-blocking.  Returns the fd or -errno. */
int	util_unix_connect(const char *path, int nonblock);

/* Parses "500ms", "10s", "2m", "1h" or plain seconds into ns; -1 on error. */
int64_t	util_parse_duration(const char *s);
/* Parses "8M", "64K", "1G" or bytes; -1 on error. */
int64_t	util_parse_size(const char *s);

/* Writes s as a JSON string literal (quotes included) to f. */
void	util_json_str(FILE *f, const char *s);

/* Formats a duration in ns as "1.5s", "12ms" into buf. */
const char	*util_fmt_duration(uint64_t ns, char *buf, size_t len);

#endif

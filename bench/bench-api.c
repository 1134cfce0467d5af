/*
 * msPTI hot-path cost: ns per disabled MSTX hook (the header's inline
 * check, and the call into libmspti.so that a program built against the
 * old header makes) and per enabled MARKER record (intern + timestamp +
 * append to the thread's buffer), buffers recycled by the callbacks.  Then runs bench/api-lttng.sh for the same
 * figures from an LTTng-UST tracepoint on this machine, in the same run,
 * and the ratios ours/LTTng.  The enabled figures are measured again in a
 * child with MSPTI_CLOCK=realtime (clock_gettime, the agent's clock before
 * the TSC mapping), side by side.  Last, the same disabled calls in a process
 * registered with a real msptid that captures nothing (the agent counts
 * steps: MSTX calls may come into libmspti.so), side by side with the
 * disabled hook.
 * Prints figures only; never fails on timing.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"

#define BUF_SIZE	(8u << 20)

static uint8_t *spare;
static unsigned long records;

static void
request(uint8_t **buf, size_t *size, size_t *maxrec)
{
	*buf = spare != NULL ? spare : malloc(BUF_SIZE);
	spare = NULL;
	*size = BUF_SIZE;
	*maxrec = 0;
}

static void
complete(uint8_t *buf, size_t size, size_t valid)
{
	records += valid / sizeof(msptiActivityMarker);
	if (spare == NULL)
		spare = buf;
	else
		free(buf);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of 7 runs of n calls, ns per call. */
static double
measure(void (*fn)(long), long n)
{
	double r[7], t;
	int i;

	for (i = 0; i < 7; i++) {
		t = now();
		fn(n);
		r[i] = (now() - t) / (double)n;
	}
	qsort(r, 7, sizeof(r[0]), cmp);
	return r[3];
}

static void
marks(long n)
{
	long i;

	for (i = 0; i < n; i++)
		mstxMarkA("bench", NULL);
}

/* The old header's call: the function itself, through the PLT. */
static void
marks_call(long n)
{
	long i;

	for (i = 0; i < n; i++)
		(mstxMarkA)("bench", NULL);
}

static void
domain_marks(long n)
{
	static mstxDomainHandle_t d;
	long i;

	if (d == NULL)
		d = mstxDomainCreateA("bench");
	for (i = 0; i < n; i++)
		mstxDomainMarkA(d, "bench", NULL);
}

/* A host range: two records, the open-range table in between. */
static void
ranges(long n)
{
	long i;

	for (i = 0; i < n; i++)
		mstxRangeEnd(mstxRangeStartA("bench", NULL));
}

/* The enabled figures with MSPTI_CLOCK=realtime, from a child (the agent
 * picks its clock at start).  0 when the child failed. */
static int
enabled_realtime(double *on, double *don, double *ron)
{
	char self[512], cmd[600];
	ssize_t len;
	FILE *f;
	int n;

	*on = *don = *ron = 0;
	if ((len = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
		return 0;
	self[len] = '\0';
	snprintf(cmd, sizeof(cmd), "MSPTI_CLOCK=realtime "
	    "BENCH_API_ENABLED_ONLY=1 '%s'", self);
	if ((f = popen(cmd, "r")) == NULL)
		return 0;
	n = fscanf(f, "%lf %lf %lf", on, don, ron);
	return pclose(f) == 0 && n == 3;
}

static void
clocksource(char *buf, size_t len)
{
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
	    "current_clocksource", "r");

	snprintf(buf, len, "?");
	if (f != NULL) {
		if (fgets(buf, (int)len, f) != NULL)
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
}

/* Ranges named as steps: counted by the agent even with no capture. */
static void
step_ranges(long n)
{
	long i;

	for (i = 0; i < n; i++)
		mstxRangeEnd(mstxRangeStartA("step", NULL));
}

/* The child under msptid: registered, nothing captured. */
static int
daemon_child(double off)
{
	double mark, range, dmark, step;
	int i;

	/* Registered: the agent then takes every MSTX call in. */
	for (i = 0; i < 500 && mstxEnabledState == 0; i++)
		usleep(10000);
	mark = measure(marks, 20000000);
	dmark = measure(domain_marks, 20000000);
	range = measure(ranges, 10000000);
	step = measure(step_ranges, 2000000);
	printf("msptid running, no capture (registered: %s):\n",
	    mstxEnabledState != 0 ? "yes" : "NO");
	printf("  disabled hook (mstxMarkA, MARKER off):   %6.2f ns\n", off);
	printf("  mstxMarkA:                               %6.2f ns\n", mark);
	printf("  mstxDomainMarkA:                         %6.2f ns\n", dmark);
	printf("  mstxRangeStartA+End (not a step):        %6.2f ns\n", range);
	printf("  mstxRangeStartA+End named \"step\":        %6.2f ns"
	    "  (counted: once per step)\n", step);
	return 0;
}

/* Runs this program again under a private msptid (daemon_child). */
static void
with_daemon(const char *self, double off)
{
	char dir[] = "/tmp/mspti-bench-api.XXXXXX", sock[512], offs[32], rm[600];
	struct stat st;
	pid_t d, c;
	int i, status;

	if (mkdtemp(dir) == NULL)
		return;
	snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
	if ((d = fork()) == 0) {
		execl(BENCH_MSPTID, "msptid", "--foreground", "--runtime-dir",
		    dir, (char *)NULL);
		_exit(127);
	}
	for (i = 0; d > 0 && i < 500 && stat(sock, &st) != 0; i++)
		usleep(10000);
	c = d > 0 && i < 500 ? fork() : -1;
	if (c == 0) {
		snprintf(offs, sizeof(offs), "%.2f", off);
		setenv("MSPTID_RUNTIME_DIR", dir, 1);
		setenv("MSPTI_BENCH_API_CHILD", offs, 1);
		execl(self, self, (char *)NULL);
		_exit(127);
	}
	if (c > 0)
		waitpid(c, &status, 0);
	else
		printf("msptid running, no capture: skipped (no msptid)\n");
	if (d > 0) {
		kill(d, SIGTERM);
		waitpid(d, &status, 0);
	}
	snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
	if (system(rm) != 0)
		fprintf(stderr, "bench-api: cannot remove %s\n", dir);
}

int
main(int argc, char **argv)
{
	const char *script = getenv("MSPTI_BENCH_LTTNG");
	char cmd[1024], cs[64];
	double off, offcall, on, don, ron, rt_on, rt_don, rt_ron;
	int rt;

	if (getenv("MSPTI_BENCH_API_CHILD") != NULL)
		return daemon_child(atof(getenv("MSPTI_BENCH_API_CHILD")));
	(void)argc;
	msptiActivityRegisterCallbacks(request, complete);
	if (getenv("BENCH_API_ENABLED_ONLY") != NULL) {
		msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
		on = measure(marks, 2000000);
		don = measure(domain_marks, 2000000);
		ron = measure(ranges, 1000000);
		msptiActivityFlushAll(1);
		printf("%f %f %f\n", on, don, ron);
		return 0;
	}
	off = measure(marks, 20000000);
	offcall = measure(marks_call, 20000000);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	on = measure(marks, 2000000);
	don = measure(domain_marks, 2000000);
	ron = measure(ranges, 1000000);
	msptiActivityFlushAll(1);
	msptiActivityDisable(MSPTI_ACTIVITY_KIND_MARKER);
	rt = enabled_realtime(&rt_on, &rt_don, &rt_ron);
	clocksource(cs, sizeof(cs));
	printf("mspti disabled hook (mstxMarkA, MARKER off): %6.2f ns"
	    "  (inline check, ms_tools_ext.h)\n", off);
	printf("mspti disabled hook, called (old header):   %6.2f ns"
	    "  (the function through the PLT)\n", offcall);
	printf("mspti enabled record (mstxMarkA -> buffer):  %6.2f ns\n", on);
	printf("mspti enabled record (mstxDomainMarkA):      %6.2f ns\n", don);
	printf("mspti enabled range (mstxRangeStartA+End):  %6.2f ns\n", ron);
	printf("mspti records delivered: %lu\n", records);
	printf("agent clock: default (TSC mapped to CLOCK_REALTIME where "
	    "invariant; kernel clocksource %s)\n", cs);
	if (rt) {
		printf("same with MSPTI_CLOCK=realtime (clock_gettime, the clock "
		    "before):\n");
		printf("  enabled record (mstxMarkA -> buffer):  %6.2f ns  "
		    "(default clock %.2f: %+.1f %%)\n", rt_on, on,
		    100 * (on - rt_on) / rt_on);
		printf("  enabled record (mstxDomainMarkA):      %6.2f ns  "
		    "(default clock %.2f)\n", rt_don, don);
		printf("  enabled range (mstxRangeStartA+End):   %6.2f ns  "
		    "(default clock %.2f)\n", rt_ron, ron);
	} else
		printf("same with MSPTI_CLOCK=realtime: skipped (child "
		    "failed)\n");
	fflush(stdout);
	if (script == NULL)
		script = API_LTTNG_SCRIPT;
	/* The script prints LTTng's figures and the ratios ours/theirs. */
	snprintf(cmd, sizeof(cmd), "disabled:mstxMarkA, MARKER off:%.2f;"
	    "disabled:mstxMarkA called (old header):%.2f;"
	    "enabled:mstxMarkA -> buffer:%.2f;"
	    "enabled:mstxDomainMarkA -> buffer:%.2f;"
	    "enabled:mstxMarkA -> buffer, MSPTI_CLOCK=realtime:%.2f",
	    off, offcall, on, don, rt_on);
	setenv("MSPTI_BENCH_OURS", cmd, 1);
	snprintf(cmd, sizeof(cmd), "sh '%s'", script);
	if (system(cmd) != 0)
		printf("lttng-ust: skipped (script failed)\n");
	fflush(stdout);
	with_daemon(argv[0], off);
	return 0;
}

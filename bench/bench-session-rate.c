/*
 * Helper of bench/session.sh (not a benchmark by itself: bench/run.sh
 * skips it).  One program, several roles:
 *
 *   emit            run under LD_PRELOAD=libmspti.so: reads "RATE COUNT"
 *                   lines on stdin and for each one calls mstxMarkA COUNT
 *                   times, paced to RATE calls/s (0: as fast as it can),
 *                   then prints "COUNT NS" (the time the calls took) and
 *                   flushes.  Ends at EOF.  With the marker kind on in a
 *                   session, every call is one MARKER record in the ring.
 *   idle            run under LD_PRELOAD: an application that registers
 *                   and then sleeps in pause() until killed.
 *   time OUT CMD..  runs CMD with its stdout in OUT, prints the wall time
 *                   from fork to its exit in ns; exits with CMD's status.
 *   count FILE      reads a trace file through: prints the MARKER records
 *                   read, the footer's MARKER count and records, its
 *                   losses, and whether the file was complete.
 *   cpu PID         utime+stime of every thread of PID, in clock ticks,
 *                   and the number of threads.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "record.h"
#include "trace.h"

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef void (*mark_fn)(const char *, void *);

/* Calls mark n times at rate calls/s (0: unpaced).  Returns the ns taken. */
static uint64_t
emit(mark_fn mark, uint64_t n, double rate)
{
	uint64_t i, t0 = now_ns(), due, t;
	struct timespec ts;

	if (rate <= 0) {
		for (i = 0; i < n; i++)
			mark("bench", NULL);
		return now_ns() - t0;
	}
	for (i = 0; i < n; i++) {
		if ((i & 63) == 0) {
			due = t0 + (uint64_t)((double)i * 1e9 / rate);
			/* Sleep when well ahead, spin the last stretch. */
			while ((t = now_ns()) < due) {
				if (due - t > 200000) {
					ts.tv_sec = 0;
					ts.tv_nsec = (long)(due - t - 100000);
					nanosleep(&ts, NULL);
				}
			}
		}
		mark("bench", NULL);
	}
	return now_ns() - t0;
}

static int
do_emit(void)
{
	mark_fn mark;
	char line[256];
	double rate;
	unsigned long long n;

	/* Resolved at run time: the agent comes in by LD_PRELOAD, as it
	 * would into any application. */
	*(void **)&mark = dlsym(RTLD_DEFAULT, "mstxMarkA");
	if (mark == NULL) {
		fprintf(stderr, "bench-session-rate: mstxMarkA not found "
		    "(run with LD_PRELOAD=libmspti.so)\n");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		if (sscanf(line, "%lf %llu", &rate, &n) != 2)
			continue;
		printf("%llu %llu\n", n,
		    (unsigned long long)emit(mark, n, rate));
		fflush(stdout);
	}
	return 0;
}

static int
do_time(char **argv)
{
	uint64_t t0;
	pid_t pid;
	int fd, st;

	if ((fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
		perror(argv[0]);
		return 2;
	}
	t0 = now_ns();
	if ((pid = fork()) < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		dup2(fd, 1);
		execv(argv[1], argv + 1);
		_exit(127);
	}
	close(fd);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 2;
	printf("%llu\n", (unsigned long long)(now_ns() - t0));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

static int
do_count(const char *path)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	const struct trace_footer *f;
	struct trace_reader_stats st;
	unsigned long long markers = 0;
	int rc;

	if ((rc = trace_reader_open(path, &r)) != 0) {
		fprintf(stderr, "%s: %s\n", path, trace_strerror(rc));
		return 1;
	}
	while ((rc = trace_reader_next(r, &h)) != 0) {
		if (rc < 0) {
			fprintf(stderr, "%s: %s\n", path, trace_reader_error(r));
			trace_reader_close(r);
			return 1;
		}
		if (h->type == REC_MARKER)
			markers++;
	}
	trace_reader_get_stats(r, &st);
	f = trace_reader_footer(r);
	printf("markers=%llu complete=%d", markers, f != NULL && !st.truncated);
	if (f != NULL)
		printf(" footer_markers=%llu records=%llu agent_ring=%llu "
		    "daemon_reject=%llu disk=%llu",
		    (unsigned long long)f->counts[REC_MARKER],
		    (unsigned long long)f->records,
		    (unsigned long long)f->losses[LOSS_AGENT_RING],
		    (unsigned long long)f->losses[LOSS_DAEMON_REJECT],
		    (unsigned long long)f->losses[LOSS_DISK]);
	printf("\n");
	trace_reader_close(r);
	return 0;
}

static int
do_cpu(const char *pid)
{
	char path[512], buf[1024], *p;
	unsigned long long ticks = 0, ut, stt;
	struct dirent *e;
	DIR *d;
	FILE *fp;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%s/task", pid);
	if ((d = opendir(path)) == NULL) {
		perror(path);
		return 1;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/task/%s/stat", pid,
		    e->d_name);
		if ((fp = fopen(path, "r")) == NULL)
			continue;
		if (fgets(buf, sizeof(buf), fp) != NULL &&
		    (p = strrchr(buf, ')')) != NULL &&
		    /* after ")": state is field 3, utime 14, stime 15 */
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
		    "%*u %llu %llu", &ut, &stt) == 2) {
			ticks += ut + stt;
			n++;
		}
		fclose(fp);
	}
	closedir(d);
	printf("%llu %d\n", ticks, n);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "emit") == 0)
		return do_emit();
	if (argc >= 2 && strcmp(argv[1], "idle") == 0) {
		for (;;)
			pause();
	}
	if (argc >= 4 && strcmp(argv[1], "time") == 0)
		return do_time(argv + 2);
	if (argc == 3 && strcmp(argv[1], "count") == 0)
		return do_count(argv[2]);
	if (argc == 3 && strcmp(argv[1], "cpu") == 0)
		return do_cpu(argv[2]);
	fprintf(stderr, "usage: bench-session-rate emit | idle | "
	    "time OUT CMD... | count FILE | cpu PID\n"
	    "(a helper of bench/session.sh, run by bench-session)\n");
	return 2;
}

/*
 * What loading the agent costs an application's start: wall time of
 * fork+exec+exit of a trivial program, without the agent, with it and no
 * daemon, and with it and a daemon (the agent registers from its own
 * thread, so the application should not wait for that).  Prints medians.
 */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define RUNS	200

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Median ns of RUNS fork/exec/wait of prog with envp. */
static double
time_exec(const char *prog, char *const envp[])
{
	static uint64_t t[RUNS];

	for (int i = 0; i < RUNS; i++) {
		uint64_t t0 = now_ns();
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			char *argv[] = { (char *)prog, "--exit", "0", NULL };
			int null = open("/dev/null", O_WRONLY);

			dup2(null, 1);
			dup2(null, 2);

			execve(prog, argv, envp);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid ||
		    !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "bench-startup: %s failed\n", prog);
			exit(1);
		}
		t[i] = now_ns() - t0;
	}
	qsort(t, RUNS, sizeof(t[0]), cmp_u64);
	return (double)t[RUNS / 2];
}

int
main(void)
{
	const char *top = TOP_BUILDDIR;
	char app[4096], agent[4096], daemon[4096], rt[] = "/tmp/mspti-startup.XXXXXX";
	char sock[4200], pre[4200], rtenv[4200];
	char *plain[] = { NULL };
	char *with[] = { pre, rtenv, NULL };
	double base, nodaemon, withdaemon;
	struct stat sb;
	pid_t dpid;

	snprintf(app, sizeof(app), "%s/tests/integ/agent-app", top);
	snprintf(agent, sizeof(agent), "%s/agent/.libs/libmspti.so", top);
	snprintf(daemon, sizeof(daemon), "%s/daemon/msptid", top);
	if (stat(app, &sb) != 0) {
		printf("SKIP: %s not built (make check builds it)\n", app);
		return 0;
	}
	if (mkdtemp(rt) == NULL)
		return 1;
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", agent);
	snprintf(rtenv, sizeof(rtenv), "MSPTID_RUNTIME_DIR=%s", rt);

	base = time_exec(app, plain);
	nodaemon = time_exec(app, with);
	if ((dpid = fork()) == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 2);
		execl(daemon, daemon, "--foreground", "--runtime-dir", rt,
		    (char *)NULL);
		_exit(127);
	}
	snprintf(sock, sizeof(sock), "%s/ctl.sock", rt);
	for (int i = 0; i < 200 && stat(sock, &sb) != 0; i++)
		usleep(10000);
	withdaemon = time_exec(app, with);
	kill(dpid, SIGTERM);
	waitpid(dpid, NULL, 0);
	snprintf(sock, sizeof(sock), "rm -rf %s", rt);
	if (system(sock) != 0)
		return 1;

	printf("application start+exit, median of %d (fork, exec, exit):\n", RUNS);
	printf("  without the agent:          %8.1f us\n", base / 1e3);
	printf("  with the agent, no daemon:  %8.1f us  (+%.1f us)\n",
	    nodaemon / 1e3, (nodaemon - base) / 1e3);
	printf("  with the agent and msptid:  %8.1f us  (+%.1f us)   "
	    "[target: a few ms at most]\n", withdaemon / 1e3,
	    (withdaemon - base) / 1e3);
	return 0;
}

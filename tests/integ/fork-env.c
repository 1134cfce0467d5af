/*
 * Children that change their environment right after fork, as launchers
 * do (RANK, LOCAL_RANK, ... set in the child, as npusim-dist, torch and
 * multiprocessing do), while the agent's registration thread, restarted
 * in the child, reads the environment for the rank and its settings.
 * glibc's setenv reallocates the environment array and frees the old
 * one, so an unguarded getenv on another thread reads freed memory.
 *
 * Usage: fork-env CHILDREN VARS.  Prints how many children died of a
 * signal and how many exited non-zero; exits 0 only if none did.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void
churn(int vars, int rounds)
{
	char name[32], value[32];

	for (int r = 0; r < rounds; r++) {
		/* New names grow the array (a realloc per name); unsetting
		 * them lets the next round grow it again. */
		for (int i = 0; i < vars; i++) {
			snprintf(name, sizeof(name), "FORK_ENV_%d_%d", r, i);
			snprintf(value, sizeof(value), "%d", i);
			if (setenv(name, value, 1) != 0)
				_exit(3);
		}
		putenv("FORK_ENV_PUT=1");
		for (int i = 0; i < vars; i++) {
			snprintf(name, sizeof(name), "FORK_ENV_%d_%d", r, i);
			unsetenv(name);
		}
	}
}

int
main(int argc, char **argv)
{
	int children = argc > 1 ? atoi(argv[1]) : 50;
	int vars = argc > 2 ? atoi(argv[2]) : 200;
	int signaled = 0, failed = 0, status;

	if (children < 1 || vars < 1) {
		fprintf(stderr, "usage: fork-env CHILDREN VARS\n");
		return 2;
	}
	for (int c = 0; c < children; c++) {
		pid_t pid = fork();

		if (pid == -1) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			char rank[16];

			snprintf(rank, sizeof(rank), "%d", c);
			setenv("RANK", rank, 1);
			churn(vars, 5);
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid)
			return 1;
		if (WIFSIGNALED(status)) {
			signaled++;
			fprintf(stderr, "child %d: signal %d\n", c,
			    WTERMSIG(status));
		} else if (WEXITSTATUS(status) != 0)
			failed++;
	}
	printf("children %d signaled %d failed %d\n", children, signaled,
	    failed);
	return signaled || failed ? 1 : 0;
}

/*
 * A stand-in application for agent tests: prints fixed lines on stdout
 * and stderr, optionally forks a child, waits until --until FILE exists
 * (or SIGTERM), and exits with --exit N.  Its output must be identical
 * with and without the agent preloaded.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

static volatile sig_atomic_t stop;

static void
on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void
wait_for(const char *path)
{
	struct stat st;

	/* A cheap sleep loop is fine for a test program. */
	while (path != NULL && !stop && stat(path, &st) != 0)
		usleep(20000);
}

int
main(int argc, char **argv)
{
	const char *until = NULL;
	int code = 0, do_fork = 0, status;
	pid_t child = -1;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--until") == 0 && i + 1 < argc)
			until = argv[++i];
		else if (strcmp(argv[i], "--exit") == 0 && i + 1 < argc)
			code = atoi(argv[++i]);
		else if (strcmp(argv[i], "--fork") == 0)
			do_fork = 1;
	}
	signal(SIGTERM, on_term);
	printf("agent-app: started\n");
	fflush(stdout);
	fprintf(stderr, "agent-app: a line on stderr\n");
	if (do_fork) {
		child = fork();
		if (child == 0) {
			wait_for(until);
			printf("agent-app: child done\n");
			fflush(stdout);
			_exit(0);
		}
	}
	wait_for(until);
	if (child > 0) {
		waitpid(child, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			code = 99;
	}
	printf("agent-app: done, exit %d\n", code);
	return code;
}

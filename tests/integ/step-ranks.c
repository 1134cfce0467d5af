/*
 * step-ranks: ranks that mark steps, for the step-window and fork tests.
 * Each step is an MSTX range "step" holding one mark "idx K" (K: the
 * step's index, from 0), so a trace says which steps each rank recorded.
 *
 *   step-ranks [--ranks N] [--raw M] [--steps S] [--period-us P]
 *       [--spread PCT] [--until F] [--go G] [--name NAME]
 *
 * --ranks N forks N ranks (RANK, LOCAL_RANK, WORLD_SIZE set in each child
 * before its first mark); the first M of them are forked with _Fork(),
 * which runs no atfork handlers.  --ranks 0 (default): this process is the
 * rank (RANK from the environment).  Rank i sleeps P * (1 + i * PCT / 100)
 * us per step (P 2000, PCT 100 by default).  --steps 0 runs until F
 * exists (or forever).  --go G: the ranks wait for G to exist first.
 * --name NAME: the step range's name ("step").
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "mstx/ms_tools_ext.h"

static long spread = 100;
static const char *go;
static const char *step_range = "step";

static void
rank_loop(int rank, long steps, long period_us, const char *until)
{
	struct stat st;
	char idx[32];

	while (go != NULL && stat(go, &st) != 0)
		usleep(10000);
	for (long s = 0; steps == 0 || s < steps; s++) {
		mstxRangeId id = mstxRangeStartA(step_range, NULL);

		snprintf(idx, sizeof(idx), "idx %ld", s);
		mstxMarkA(idx, NULL);
		usleep((useconds_t)(period_us * (100 + rank * spread) / 100));
		mstxRangeEnd(id);
		if (until != NULL && (s & 7) == 0 && stat(until, &st) == 0)
			break;
	}
}

static void
setenv_int(const char *name, int v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d", v);
	setenv(name, buf, 1);
}

int
main(int argc, char **argv)
{
	const char *until = NULL;
	long steps = 5, period = 2000;
	int ranks = 0, raw = 0, status, rc = 0;
	pid_t pids[64];

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (v == NULL) {
			fprintf(stderr, "step-ranks: %s needs a value\n", argv[i]);
			return 2;
		}
		if (strcmp(argv[i], "--ranks") == 0)
			ranks = atoi(v);
		else if (strcmp(argv[i], "--raw") == 0)
			raw = atoi(v);
		else if (strcmp(argv[i], "--steps") == 0)
			steps = atol(v);
		else if (strcmp(argv[i], "--period-us") == 0)
			period = atol(v);
		else if (strcmp(argv[i], "--go") == 0)
			go = v;
		else if (strcmp(argv[i], "--spread") == 0)
			spread = atol(v);
		else if (strcmp(argv[i], "--until") == 0)
			until = v;
		else if (strcmp(argv[i], "--name") == 0)
			step_range = v;
		else {
			fprintf(stderr, "usage: step-ranks [--ranks N] [--raw M] "
			    "[--steps S] [--period-us P] [--spread PCT] "
			    "[--until FILE] [--go FILE] [--name NAME]\n");
			return 2;
		}
		i++;
	}
	if (ranks < 0 || ranks > 64 || period < 0) {
		fprintf(stderr, "step-ranks: bad values\n");
		return 2;
	}
	if (ranks == 0) {
		const char *r = getenv("RANK");

		rank_loop(r ? atoi(r) : 0, steps, period, until);
		return 0;
	}
	for (int i = 0; i < ranks; i++) {
		pid_t pid = i < raw ? _Fork() : fork();

		if (pid < 0) {
			perror("fork");
			ranks = i;
			rc = 1;
			break;
		}
		if (pid == 0) {
			setenv_int("RANK", i);
			setenv_int("LOCAL_RANK", i);
			setenv_int("WORLD_SIZE", ranks);
			rank_loop(i, steps, period, until);
			_exit(0);
		}
		pids[i] = pid;
	}
	for (int i = 0; i < ranks; i++)
		if (waitpid(pids[i], &status, 0) != pids[i] ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = 1;
	return rc;
}

/*
 * mark-threads N PER GOFILE: waits until GOFILE exists, then N threads each
 * call mstxMarkA("common") once and mstxMarkA("t<i>") PER times (the
 * header's inline check, as any program built against it), then exits.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mstx/ms_tools_ext.h"

#define MAXT	32

static long per;

static void *
run(void *arg)
{
	char name[16];

	snprintf(name, sizeof name, "t%d", (int)(long)arg);
	mstxMarkA("common", NULL);
	for (long i = 0; i < per; i++)
		mstxMarkA(name, NULL);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[MAXT];
	long n;

	if (argc != 4 || (n = atol(argv[1])) < 1 || n > MAXT ||
	    (per = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: mark-threads N PER GOFILE\n");
		return 2;
	}
	while (access(argv[3], F_OK) != 0)
		usleep(10000);
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, (void *)i) != 0)
			return 1;
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}

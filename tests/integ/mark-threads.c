/*
 * mark-threads N PER GOFILE [HOLDFILE]: waits until GOFILE exists, then N
 * threads each call mstxMarkA("common") once and mstxMarkA("t<i>") PER
 * times (the header's inline check, as any program built against it),
 * then exits (with HOLDFILE, once it exists: a test looks at the process
 * meanwhile).
 * It prints "populates on marking threads: K": the madvise
 * (MADV_POPULATE_WRITE) calls its marking threads made, which the agent
 * should leave to a thread of its own (this program's madvise comes
 * before libc's for the agent too).
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "mstx/ms_tools_ext.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif
#define MAXT	32

static long per;
static __thread int marking;
static atomic_int populates;
static atomic_long faults;	/* minor faults of the marking threads */

int
madvise(void *addr, size_t len, int advice)
{
	static int (*real)(void *, size_t, int);

	if (real == NULL)
		real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT,
		    "madvise");
	if (marking && advice == MADV_POPULATE_WRITE)
		atomic_fetch_add(&populates, 1);
	return real != NULL ? real(addr, len, advice) : -1;
}

static void *
run(void *arg)
{
	char name[16];

	marking = 1;
	snprintf(name, sizeof name, "t%d", (int)(long)arg);
	mstxMarkA("common", NULL);
	{
		struct rusage ru0, ru1;

		getrusage(RUSAGE_THREAD, &ru0);
		for (long i = 0; i < per; i++)
			mstxMarkA(name, NULL);
		getrusage(RUSAGE_THREAD, &ru1);
		atomic_fetch_add(&faults, ru1.ru_minflt - ru0.ru_minflt);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[MAXT];
	long n;

	if ((argc != 4 && argc != 5) || (n = atol(argv[1])) < 1 ||
	    n > MAXT || (per = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: mark-threads N PER GOFILE "
		    "[HOLDFILE]\n");
		return 2;
	}
	while (access(argv[3], F_OK) != 0)
		usleep(10000);
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, (void *)i) != 0)
			return 1;
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("populates on marking threads: %d\n", atomic_load(&populates));
	printf("page faults on marking threads: %ld\n", atomic_load(&faults));
	fflush(stdout);
	while (argc == 5 && access(argv[4], F_OK) != 0)
		usleep(10000);
	return 0;
}

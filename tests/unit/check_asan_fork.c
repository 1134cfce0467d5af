/*
 * tests/asan-fork.c, the sanitizer builds' fork helper: a child forked
 * while a stack-depot bucket of gcc 12's AddressSanitizer is held by
 * another thread must not spin on it.  The held buckets are made here
 * (every bucket's lock bit set in the parent, as a thread inserting a new
 * allocation stack would hold one), then the child allocates with a stack
 * never seen before, which takes its bucket's lock.  Skipped (77) where
 * the helper is not loaded (builds without sanitizers).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUCKETS		(1u << 20)
#define LOCK_BIT	0x80000000u

/* A stack of its own, so the depot inserts (and locks) anew. */
static __attribute__((noinline)) void *
fresh_stack_alloc(int depth)
{
	void *p;

	if (depth > 0) {
		p = fresh_stack_alloc(depth - 1);
		__asm__ volatile("" : : "r"(p) : "memory");
		return p;
	}
	return malloc(48);
}

int
main(void)
{
	void *(*table_fn)(void);
	volatile uint32_t *tab;
	uint32_t *saved;
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	pid_t pid;
	int status = 0, waited = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	table_fn = (void *(*)(void))dlsym(RTLD_DEFAULT, "asan_fork_depot_table");
	if (table_fn == NULL || (tab = table_fn()) == NULL) {
		printf("SKIP: no sanitizer fork helper in this process\n");
		return 77;
	}
	if ((saved = malloc(BUCKETS * sizeof(*saved))) == NULL)
		return 1;
	for (uint32_t i = 0; i < BUCKETS; i++)
		saved[i] = tab[i];
	/* From here until they are restored, no new stack in this process. */
	for (uint32_t i = 0; i < BUCKETS; i++)
		tab[i] = saved[i] | LOCK_BIT;
	pid = fork();
	if (pid == 0) {
		void *p = fresh_stack_alloc(7);

		free(p);
		_exit(p != NULL ? 0 : 3);
	}
	for (uint32_t i = 0; i < BUCKETS; i++)
		tab[i] = saved[i];
	free(saved);
	if (pid == -1) {
		perror("fork");
		return 1;
	}
	/* Bounded: 10 s, then the child is killed and counted. */
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (++waited > 1000) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			printf("FAIL: the child still spins on a held depot "
			    "bucket after 10 s\n");
			return 1;
		}
		nanosleep(&ts, NULL);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("FAIL: the child ended with status %d\n", status);
		return 1;
	}
	printf("ok - a child forked over held depot buckets allocates\n");
	return 0;
}

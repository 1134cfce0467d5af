/*
 * The environment, read from the agent's own threads.
 *
 * The registration thread reads the rank, the job and a few settings from
 * the environment when it says Hello, which in a forked child is after the
 * child has set RANK and friends (npusim-dist, torch, multiprocessing all
 * do).  glibc's getenv takes no lock: a setenv on the application's thread
 * reallocates the array and frees the old one under a concurrent getenv,
 * which then reads freed memory (children crashed so, 1-3 in 200, in
 * fork-env.sh).  So the functions that change the environment are
 * interposed here and take a write lock around the real ones, and every
 * read of ours from a thread of ours takes it shared and copies the value
 * out.  A program that writes to environ directly is not covered; no
 * launcher we know of does.  Nor is one that loaded us with dlopen (the
 * Python extension without LD_PRELOAD): its calls bind to the C library's
 * functions, not these (libmspti(3) says so).
 *
 * fork: the lock is taken across fork (registered before any other
 * handler of ours, so it is the last one taken and the first released in
 * the child, where the registration thread restarts and reads at once).
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "mspti/mspti_result.h"

static pthread_rwlock_t env_lock = PTHREAD_RWLOCK_INITIALIZER;

/* The C library's function, looked up once (a race only looks it up
 * twice); NULL with errno ENOSYS if there is none to call. */
static void *
env_real(void **cache, const char *name)
{
	void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

	if (p == NULL) {
		if ((p = dlsym(RTLD_NEXT, name)) == NULL) {
			errno = ENOSYS;
			return NULL;
		}
		__atomic_store_n(cache, p, __ATOMIC_RELEASE);
	}
	return p;
}

bool
env_get(const char *name, char *buf, size_t len)
{
	const char *v;
	bool found = false;

	if (len == 0)
		return false;
	pthread_rwlock_rdlock(&env_lock);
	if ((v = getenv(name)) != NULL) {
		snprintf(buf, len, "%s", v);
		found = true;
	} else
		buf[0] = '\0';
	pthread_rwlock_unlock(&env_lock);
	return found;
}

MSPTI_API int
setenv(const char *name, const char *value, int overwrite)
{
	static void *cache;
	int (*real)(const char *, const char *, int);
	int rc;

	if ((real = (int (*)(const char *, const char *, int))
	    env_real(&cache, "setenv")) == NULL)
		return -1;
	pthread_rwlock_wrlock(&env_lock);
	rc = real(name, value, overwrite);
	pthread_rwlock_unlock(&env_lock);
	return rc;
}

MSPTI_API int
unsetenv(const char *name)
{
	static void *cache;
	int (*real)(const char *);
	int rc;

	if ((real = (int (*)(const char *))env_real(&cache, "unsetenv")) ==
	    NULL)
		return -1;
	pthread_rwlock_wrlock(&env_lock);
	rc = real(name);
	pthread_rwlock_unlock(&env_lock);
	return rc;
}

MSPTI_API int
putenv(char *string)
{
	static void *cache;
	int (*real)(char *);
	int rc;

	if ((real = (int (*)(char *))env_real(&cache, "putenv")) == NULL)
		return -1;
	pthread_rwlock_wrlock(&env_lock);
	rc = real(string);
	pthread_rwlock_unlock(&env_lock);
	return rc;
}

MSPTI_API int
clearenv(void)
{
	static void *cache;
	int (*real)(void);
	int rc;

	if ((real = (int (*)(void))env_real(&cache, "clearenv")) == NULL)
		return -1;
	pthread_rwlock_wrlock(&env_lock);
	rc = real();
	pthread_rwlock_unlock(&env_lock);
	return rc;
}

static void
env_prepare_fork(void)
{
	pthread_rwlock_wrlock(&env_lock);
}

static void
env_after_fork_parent(void)
{
	pthread_rwlock_unlock(&env_lock);
}

/* The child's only thread holds it, under its parent's thread id (which
 * glibc's unlock compares to tell a writer from a reader): start afresh. */
static void
env_after_fork_child(void)
{
	pthread_rwlock_init(&env_lock, NULL);
}

/* Before register.c's (200) and every plain constructor's handlers. */
__attribute__((constructor(150))) static void
env_install_atfork(void)
{
	pthread_atfork(env_prepare_fork, env_after_fork_parent,
	    env_after_fork_child);
}

/*
 * Symbol lookup for the interposers and the interposition check.  Real
 * functions are found with dlsym(RTLD_NEXT) on first use and cached in an
 * atomic slot (a race only repeats the same lookup).  Simulator-only
 * helpers are found with dlsym(RTLD_DEFAULT) so the agent still loads, and
 * produces no device records, on a runtime without them.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include "api.h"

#define API_ABSENT	((void *)1)

static int api_self_anchor;

void *
api_real(_Atomic(void *) *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);

	if (API_LIKELY(p != NULL))
		return p == API_ABSENT ? NULL : p;
	p = dlsym(RTLD_NEXT, name);
	atomic_store_explicit(slot, p != NULL ? p : API_ABSENT,
	    memory_order_release);
	return p;
}

void *
api_optional(_Atomic(void *) *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);

	if (API_LIKELY(p != NULL))
		return p == API_ABSENT ? NULL : p;
	p = dlsym(RTLD_DEFAULT, name);
	atomic_store_explicit(slot, p != NULL ? p : API_ABSENT,
	    memory_order_release);
	return p;
}

/*
 * A runtime function the agent calls for itself: the runtime's own, never
 * our interposer of the same name (so the call makes no record).  When we
 * are interposed that is the next definition; otherwise (libmspti loaded
 * after the runtime) the global one.  NULL if the runtime lacks it.
 */
void *
api_internal(_Atomic(void *) *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);

	if (API_LIKELY(p != NULL))
		return p == API_ABSENT ? NULL : p;
	p = api_interposed(name) ? dlsym(RTLD_NEXT, name) :
	    dlsym(RTLD_DEFAULT, name);
	atomic_store_explicit(slot, p != NULL ? p : API_ABSENT,
	    memory_order_release);
	return p;
}

/*
 * Interposition is in effect when the global lookup of name lands in
 * this library (LD_PRELOAD, or linked ahead of the runtime).  Reading
 * LD_PRELOAD would be wrong both ways: the string may name us without the
 * symbols winning, and linking us first works without it.
 */
bool
api_interposed(const char *name)
{
	Dl_info self, sym;
	void *p;

	p = dlsym(RTLD_DEFAULT, name);
	if (p == NULL)
		return false;
	if (dladdr(&api_self_anchor, &self) == 0 || dladdr(p, &sym) == 0)
		return false;
	return self.dli_fbase == sym.dli_fbase;
}

int
api_thread_start(void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t t;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &a, fn, arg);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

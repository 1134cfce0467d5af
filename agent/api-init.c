/*
 * Symbol lookup for the interposers and the interposition check.  Real
 * functions are found with dlsym(RTLD_NEXT) on first use and cached in an
 * atomic slot (a race only repeats the same lookup).  Simulator-only
 * helpers are found with dlsym(RTLD_DEFAULT) so the agent still loads, and
 * produces no device records, on a runtime without them.
 *
 * Link order must not matter: a program linked -lmspti -lruntime with
 * --as-needed has every runtime symbol it calls resolved by us, so the
 * linker drops the runtime and RTLD_NEXT finds nothing (and a runtime
 * loaded later with RTLD_LOCAL is not in the global scope either).  Then
 * the runtime is loaded by name, each of MSPTI_RUNTIME_LIBS (colon
 * separated names or paths) or API_RUNTIME_LIBS, and the symbol is taken
 * from the first that has it.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "util.h"

#define API_ABSENT	((void *)1)
#define API_RUNTIME_LIBS \
	"libnpusim.so.0:libnpusim.so:libascendcl.so:libhccl.so:libruntime.so"
#define API_RUNTIME_MAX	8

static int api_self_anchor;

static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static void *rt_handles[API_RUNTIME_MAX];
static unsigned rt_nhandles;
/* Set once a runtime function was found (either way): until then an
 * absent optional helper is not cached, the runtime may yet come. */
static _Atomic bool rt_settled;
static _Atomic bool rt_opened;		/* api_runtime_open ran */

/* Loads the runtime libraries by name, once.  RTLD_GLOBAL: the
 * simulator helpers found through RTLD_DEFAULT must see them too. */
static void
api_runtime_open(void)
{
	const char *env = getenv("MSPTI_RUNTIME_LIBS");
	char buf[1024], *save = NULL, *name;
	void *h;

	if (env == NULL || *env == '\0' || strlen(env) >= sizeof(buf))
		env = API_RUNTIME_LIBS;
	strcpy(buf, env);
	for (name = strtok_r(buf, ":", &save); name != NULL &&
	    rt_nhandles < API_RUNTIME_MAX; name = strtok_r(NULL, ":", &save)) {
		h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
		if (h == NULL)
			continue;
		/* Not ourselves (a path naming libmspti by mistake). */
		if (dlsym(h, "msptiActivityEnable") != NULL) {
			dlclose(h);
			continue;
		}
		rt_handles[rt_nhandles++] = h;
	}
	atomic_store(&rt_opened, true);
	atomic_store(&rt_settled, true);
}

/* name from the runtime loaded by name, NULL if none has it. */
static void *
api_runtime_sym(const char *name)
{
	unsigned i;
	void *p;

	pthread_once(&rt_once, api_runtime_open);
	for (i = 0; i < rt_nhandles; i++)
		if ((p = dlsym(rt_handles[i], name)) != NULL)
			return p;
	return NULL;
}

/* The runtime's definition of name, never ours. */
static void *
api_next(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p != NULL) {
		atomic_store_explicit(&rt_settled, true, memory_order_relaxed);
		return p;
	}
	return api_runtime_sym(name);
}

void *
api_real(_Atomic(void *) *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);

	if (API_LIKELY(p != NULL))
		return p == API_ABSENT ? NULL : p;
	p = api_next(name);
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
	if (p == NULL) {
		/* Never load a runtime just for a helper: only look in one
		 * loaded by name for a runtime function. */
		if (!atomic_load(&rt_settled))
			return NULL;
		if (atomic_load(&rt_opened))
			p = api_runtime_sym(name);
	}
	atomic_store_explicit(slot, p != NULL ? p : API_ABSENT,
	    memory_order_release);
	return p;
}

/* Whether p is defined in this library. */
static bool
api_is_self(void *p)
{
	Dl_info self, sym;

	return dladdr(&api_self_anchor, &self) != 0 && dladdr(p, &sym) != 0 &&
	    self.dli_fbase == sym.dli_fbase;
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
	p = api_interposed(name) ? NULL : dlsym(RTLD_DEFAULT, name);
	if (p == NULL || api_is_self(p))
		p = api_next(name);
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
	static void *_Atomic global;
	void *g = atomic_load(&global), *p;

	/*
	 * The application's lookup: the global scope (the program, what it
	 * was linked with, LD_PRELOAD, RTLD_GLOBAL opens).  Not RTLD_DEFAULT
	 * from here, which also searches our own dlopen group: loaded
	 * RTLD_LOCAL (a Python extension), we would find ourselves.
	 */
	if (g == NULL) {
		if ((g = dlopen(NULL, RTLD_NOW)) == NULL)
			return false;
		atomic_store(&global, g);
	}
	p = dlsym(g, name);
	return p != NULL && api_is_self(p);
}

int
api_thread_start(void *(*fn)(void *), void *arg)
{
	sigset_t old;
	pthread_attr_t a;
	pthread_t t;
	int rc;

	util_block_async_signals(&old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &a, fn, arg);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

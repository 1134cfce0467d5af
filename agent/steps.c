/*
 * Step index from the synchronize pattern: every aclrtSynchronizeStream
 * and aclrtSynchronizeDevice of the application is fed, with its call site
 * and the launches its thread made since its previous synchronize, to the
 * period detector (stepdet.c); the boundaries it finds go to the session
 * (session_step_sync), which uses them only while the process has marked
 * no MSTX step.  Always on: a synchronize blocks for the device anyway, so
 * one lock and a cached site lookup per call cost nothing that shows; a
 * launch costs one thread-local increment.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "api.h"
#include "agent.h"

API_TLS uint32_t steps_launches;

static pthread_mutex_t steps_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct stepdet steps_det;	/* under steps_mtx */

/* Return address -> module offset (the same in every process running
 * the same binaries, whatever their load addresses). */
#define STEPS_SITES	16
static struct {
	const void	*addr;
	uint64_t	 site;
} steps_sites[STEPS_SITES];		/* under steps_mtx */

static uint64_t
steps_site(const void *addr)
{
	unsigned i = (unsigned)(((uintptr_t)addr >> 2) % STEPS_SITES);
	uint64_t site = (uintptr_t)addr, h = 1469598103934665603ull;
	const char *base;
	Dl_info info;

	if (steps_sites[i].addr == addr && addr != NULL)
		return steps_sites[i].site;
	if (dladdr(addr, &info) != 0 && info.dli_fbase != NULL) {
		site = (uintptr_t)addr - (uintptr_t)info.dli_fbase;
		base = info.dli_fname != NULL ? strrchr(info.dli_fname, '/') :
		    NULL;
		base = base != NULL ? base + 1 : info.dli_fname;
		for (; base != NULL && *base != '\0'; base++)
			h = (h ^ (unsigned char)*base) * 1099511628211ull;
		site ^= h << 32;
	}
	steps_sites[i].addr = addr;
	steps_sites[i].site = site;
	return site;
}

void
steps_sync(const void *addr, unsigned kind)
{
	uint32_t launches = steps_launches;
	int r;

	steps_launches = 0;
	pthread_mutex_lock(&steps_mtx);
	r = stepdet_feed(&steps_det, steps_site(addr) * 4 + kind, launches);
	/* Under steps_mtx, so boundaries reach the session in order. */
	if (r != 0)
		session_step_sync(steps_det.steps, (r & STEPDET_STEP) != 0);
	pthread_mutex_unlock(&steps_mtx);
}

/* A child is a rank of its own: its steps count from its start. */
void
steps_after_fork_child(void)
{
	pthread_mutex_init(&steps_mtx, NULL);
	stepdet_init(&steps_det);
	steps_launches = 0;
}

/*
 * Unit tests that drive the simulator in-process: give this process its
 * own simulator shm names, under the test wrapper's prefix (tests/wrap.sh
 * removes everything under it afterwards, even when a failed test skips
 * its teardown).
 */
#ifndef MSPTI_TESTS_SIM_PREFIX_H
#define MSPTI_TESTS_SIM_PREFIX_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <npusim/npusim.h>

static inline void
sim_prefix_set(const char *tag)
{
	const char *base = getenv("NPUSIM_SHM_PREFIX");
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "%s-%s-%d",
	    base != NULL && *base != '\0' && strlen(base) < 32 ? base : "mspti",
	    tag, (int)getpid());
	setenv("NPUSIM_SHM_PREFIX", prefix, 1);
}

/* Removes device dev's channel and metrics objects (under our prefix). */
static inline void
sim_device_unlink(uint32_t dev)
{
	char name[NPUSIM_SHM_NAME_MAX];

	if (npusimShmName(name, sizeof(name), dev, "chan") >= 0)
		shm_unlink(name);
	if (npusimShmName(name, sizeof(name), dev, "metrics") >= 0)
		shm_unlink(name);
}

#endif

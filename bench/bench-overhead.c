/*
 * Step-time inflation of npusim-train and npusim-dist under the agent,
 * for each kind and all kinds, against no agent and against the agent
 * with no session: runs bench/overhead.sh (see doc/benchmarks.md).
 * Prints figures only; fails only when something is broken.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int
main(void)
{
	const char *script = getenv("MSPTI_BENCH_OVERHEAD");

	if (script == NULL)
		script = OVERHEAD_SCRIPT;
	if (getenv("top_builddir") == NULL)
		setenv("top_builddir", TOP_BUILDDIR, 1);
	fflush(stdout);
	execl("/bin/sh", "sh", script, (char *)NULL);
	perror("/bin/sh");
	return 1;
}

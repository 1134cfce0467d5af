/*
 * Slow-rank verdict accuracy: runs bench/verdict.py, which captures the
 * scenario library with a real msptid, real agents and `msptictl run`,
 * reports each capture and scores the verdict against the scenario's
 * ground truth (see doc/benchmarks.md).  Prints figures only; fails only
 * when a run or a report breaks.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int
main(void)
{
	const char *script = getenv("MSPTI_BENCH_VERDICT");

	if (script == NULL)
		script = VERDICT_SCRIPT;
	if (getenv("top_builddir") == NULL)
		setenv("top_builddir", TOP_BUILDDIR, 1);
	fflush(stdout);
	execlp("python3", "python3", script, (char *)NULL);
	perror("python3");
	return 1;
}

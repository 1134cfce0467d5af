/*
 * Capture-session figures with a real msptid, real agents and the real
 * msptictl: start -> active latency, records/s to the trace file with the
 * loss counted, stop -> finalized latency for 1M records, daemon RSS with
 * 64 and 256 agents, idle agent CPU, and ns per record through the ring.
 * Runs bench/session.sh (see doc/benchmarks.md); prints figures only and
 * fails only when something is broken, never on timing.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int
main(void)
{
	const char *script = getenv("MSPTI_BENCH_SESSION");

	if (script == NULL)
		script = SESSION_SCRIPT;
	if (getenv("top_builddir") == NULL)
		setenv("top_builddir", TOP_BUILDDIR, 1);
	fflush(stdout);
	execl("/bin/sh", "sh", script, (char *)NULL);
	perror("/bin/sh");
	return 1;
}

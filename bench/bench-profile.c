/*
 * Profile's overhead on a ResNet-50 training step: runs
 * bench/bench-profile.py (mspti.Profile off, NPU only, CPU+NPU, CPU+NPU
 * with shapes, stacks and memory; paired rounds, medians), then a capture
 * by a private msptid started and stopped on the same steps, with the
 * build tree's Python package.  Prints figures only.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int
main(void)
{
	const char *script = getenv("MSPTI_BENCH_PROFILE");

	if (script == NULL)
		script = PROFILE_SCRIPT;
	if (getenv("top_builddir") == NULL)
		setenv("top_builddir", TOP_BUILDDIR, 1);
	fflush(stdout);
	execl("/usr/bin/python3", "/usr/bin/python3", script, (char *)NULL);
	execlp("python3", "python3", script, (char *)NULL);
	perror("python3");
	return 1;
}

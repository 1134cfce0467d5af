/*
 * Cluster fan-out figures on scripts/minicluster (bench/cluster.sh): the
 * latency from `msptictl start --cluster slurm` to all ranks capturing
 * for 2 and 4 nodes.  Prints figures only; skips without root or Slurm.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int
main(void)
{
	if (getenv("top_builddir") == NULL)
		setenv("top_builddir", TOP_BUILDDIR, 1);
	fflush(stdout);
	execl("/bin/sh", "sh", CLUSTER_SCRIPT, (char *)NULL);
	perror("/bin/sh");
	return 1;
}

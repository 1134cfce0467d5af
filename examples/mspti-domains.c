/*
 * Marker domains switched on and off per phase: "forward" is recorded in
 * the first phase only, "backward" in the second only, "optimizer" is
 * disabled before it is even created, and the default domain throughout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mspti/mspti.h>
#include <mstx/ms_tools_ext.h>

#include "example-args.h"

static unsigned fwd, bwd, opt, dflt, other;

static void
request(uint8_t **buf, size_t *size, size_t *maxrec)
{
	*size = 4096;
	*buf = malloc(*size);
	*maxrec = 0;
}

static void
complete(uint8_t *buf, size_t size, size_t valid)
{
	msptiActivity *r = NULL;

	while (msptiActivityGetNextRecord(buf, valid, &r) == MSPTI_SUCCESS) {
		msptiActivityMarker *m = (msptiActivityMarker *)r;

		if (r->kind != MSPTI_ACTIVITY_KIND_MARKER)
			other++;
		else if (!strcmp(m->domain, "forward"))
			fwd++;
		else if (!strcmp(m->domain, "backward"))
			bwd++;
		else if (!strcmp(m->domain, "optimizer"))
			opt++;
		else if (!strcmp(m->domain, "default"))
			dflt++;
		else
			other++;
	}
	free(buf);
}

static void
step(mstxDomainHandle_t f, mstxDomainHandle_t b, mstxDomainHandle_t o)
{
	mstxRangeId r = mstxDomainRangeStartA(f, "fwd", NULL);

	mstxDomainRangeEnd(f, r);
	mstxDomainMarkA(b, "bwd", NULL);
	mstxDomainMarkA(o, "opt", NULL);
	mstxMarkA("step", NULL);
}

int
main(int argc, char **argv)
{
	mstxDomainHandle_t f, b, o;
	int i;

	example_args(argc, argv, "mspti-domains",
	    "MSTX marker domains switched on and off per phase.");
	msptiActivityRegisterCallbacks(request, complete);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
	msptiActivityDisableMarkerDomain("optimizer");	/* before creation */
	f = mstxDomainCreateA("forward");
	b = mstxDomainCreateA("backward");
	o = mstxDomainCreateA("optimizer");

	msptiActivityDisableMarkerDomain("backward");	/* phase 1 */
	for (i = 0; i < 10; i++)
		step(f, b, o);
	msptiActivityDisableMarkerDomain("forward");	/* phase 2 */
	msptiActivityEnableMarkerDomain("backward");
	for (i = 0; i < 10; i++)
		step(f, b, o);
	msptiActivityFlushAll(1);
	printf("forward %u (ranges: start+end), backward %u, optimizer %u, "
	    "default %u\n", fwd, bwd, opt, dflt);
	return fwd == 20 && bwd == 10 && opt == 0 && dflt == 20 && other == 0 ?
	    0 : 1;
}

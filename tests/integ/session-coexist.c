/*
 * session-coexist: an application that uses the in-process msPTI activity
 * API (KERNEL records) while msptid captures it in a session, for
 * session-coexist.sh.
 *
 *   session-coexist DIR
 *
 * Registers buffer callbacks, enables KERNEL, sets a device and waits for
 * DIR/go.  Then launches ROUNDS rounds of MatMul x3, Add x2, TopK x1,
 * synchronizes, writes DIR/launched and waits for DIR/done.  Finally it
 * flushes and prints one JSON line: the kernels it launched and those its
 * own API delivered, by name.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#include "mspti/mspti.h"

#define ROUNDS	200

static const char *names[] = { "MatMul", "Add", "TopK" };
static unsigned got[3], other;

static void
req_cb(uint8_t **buf, size_t *size, size_t *max)
{
	*size = 1 << 20;
	*buf = aligned_alloc(8, *size);
	*max = 0;
}

static void
done_cb(uint8_t *buf, size_t size, size_t valid)
{
	msptiActivity *r = NULL;

	while (msptiActivityGetNextRecord(buf, valid, &r) == MSPTI_SUCCESS) {
		const msptiActivityKernel *k = (const void *)r;
		int i;

		if (r->kind != MSPTI_ACTIVITY_KIND_KERNEL)
			continue;
		for (i = 0; i < 3; i++)
			if (k->name != NULL && strcmp(k->name, names[i]) == 0)
				break;
		if (i < 3)
			got[i]++;
		else
			other++;
	}
	free(buf);
}

static void
wait_file(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	while (access(path, F_OK) != 0)
		usleep(10000);
}

int
main(int argc, char **argv)
{
	aclrtFuncHandle k[3];
	aclrtStream s;
	char path[4096];
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: session-coexist DIR\n");
		return 2;
	}
	if (msptiActivityRegisterCallbacks(req_cb, done_cb) != MSPTI_SUCCESS ||
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL) != MSPTI_SUCCESS) {
		fprintf(stderr, "session-coexist: msPTI API unavailable\n");
		return 1;
	}
	if (aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS)
		return 1;
	npusimKernelRegister("MatMul", NPUSIM_KERNEL_AI_CORE, 0, 0, 20000, &k[0]);
	npusimKernelRegister("Add", NPUSIM_KERNEL_AI_VECTOR, 0, 0, 10000, &k[1]);
	npusimKernelRegister("TopK", NPUSIM_KERNEL_AI_CPU, 0, 0, 10000, &k[2]);
	wait_file(argv[1], "go");
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < 3; i++)
			aclrtLaunchKernel(k[0], 32, NULL, 0, s);
		for (int i = 0; i < 2; i++)
			aclrtLaunchKernel(k[1], 32, NULL, 0, s);
		aclrtLaunchKernel(k[2], 1, NULL, 0, s);
		if (r % 20 == 19)
			aclrtSynchronizeStream(s);
	}
	aclrtSynchronizeStream(s);
	snprintf(path, sizeof(path), "%s/launched", argv[1]);
	if ((f = fopen(path, "w")) != NULL)
		fclose(f);
	wait_file(argv[1], "done");
	msptiActivityFlushAll(1);
	printf("{\"launched\":{\"MatMul\":%d,\"Add\":%d,\"TopK\":%d},"
	    "\"api\":{\"MatMul\":%u,\"Add\":%u,\"TopK\":%u},\"other\":%u}\n",
	    3 * ROUNDS, 2 * ROUNDS, ROUNDS, got[0], got[1], got[2], other);
	aclrtDestroyStream(s);
	aclrtResetDevice(0);
	return 0;
}

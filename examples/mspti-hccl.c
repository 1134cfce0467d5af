/*
 * HCCL activity across 2 ranks: the parent makes the root info and forks
 * one process per rank; each rank records HCCL and COMMUNICATION
 * activity for its all-reduces and a broadcast and checks them (count,
 * data type, communicator, bandwidth = bytes / ns, correlation ids).
 */
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <mspti/mspti.h>

#include "example-args.h"

#define RANKS	2
#define OPS	5
#define COUNT	(64 * 1024)

static msptiActivityHccl hc[64];
static msptiActivityCommunication cm[64];
static size_t nhc, ncm;

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
		if (r->kind == MSPTI_ACTIVITY_KIND_HCCL && nhc < 64)
			hc[nhc++] = *(msptiActivityHccl *)r;
		else if (r->kind == MSPTI_ACTIVITY_KIND_COMMUNICATION && ncm < 64)
			cm[ncm++] = *(msptiActivityCommunication *)r;
	}
	free(buf);
}

static int
rank_main(int rank, const HcclRootInfo *root)
{
	HcclComm comm;
	aclrtStream s;
	void *sbuf, *rbuf;
	size_t i;
	int bad = 0;

	msptiActivityRegisterCallbacks(request, complete);
	if (msptiActivityEnable(MSPTI_ACTIVITY_KIND_HCCL) != MSPTI_SUCCESS ||
	    msptiActivityEnable(MSPTI_ACTIVITY_KIND_COMMUNICATION) != MSPTI_SUCCESS)
		return 1;
	if (aclrtSetDevice(rank) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    HcclCommInitRootInfo(RANKS, root, (uint32_t)rank, &comm) !=
	    HCCL_SUCCESS)
		return 1;
	aclrtMalloc(&sbuf, COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST);
	aclrtMalloc(&rbuf, COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST);
	for (i = 0; i < OPS; i++)
		if (HcclAllReduce(sbuf, rbuf, COUNT, HCCL_DATA_TYPE_FP32,
		    HCCL_REDUCE_SUM, comm, s) != HCCL_SUCCESS)
			return 1;
	if (HcclBroadcast(sbuf, COUNT / 2, HCCL_DATA_TYPE_INT8, 0, comm, s) !=
	    HCCL_SUCCESS)
		return 1;
	if (aclrtSynchronizeStream(s) != ACL_SUCCESS)
		return 1;
	msptiActivityFlushAll(1);
	for (i = 0; i < ncm; i++) {
		const msptiActivityCommunication *c = &cm[i];
		bool last = i == OPS;

		if (c->count != (last ? COUNT / 2 : COUNT) ||
		    c->dataType != (last ? MSPTI_ACTIVITY_COMMUNICATION_INT8 :
		    MSPTI_ACTIVITY_COMMUNICATION_FP32) ||
		    c->correlationId == 0 || c->commName == NULL ||
		    c->commName[0] == '\0' || c->end <= c->start ||
		    c->ds.deviceId != (uint32_t)rank || c->name == NULL)
			bad++;
		printf("rank %d: %s count %llu type %d alg %s comm %s %.1f us\n",
		    rank, c->name, (unsigned long long)c->count, c->dataType,
		    c->algType, c->commName, (c->end - c->start) / 1e3);
	}
	for (i = 0; i < nhc; i++) {
		double want = (double)COUNT * 4 / (double)(hc[i].end - hc[i].start);

		if (hc[i].bandWidth <= 0 || hc[i].commName == NULL ||
		    strcmp(hc[i].commName, cm[0].commName) != 0 ||
		    (i < OPS && (hc[i].bandWidth < want * 0.5 ||
		    hc[i].bandWidth > want * 2)))
			bad++;
		printf("rank %d: HCCL %s %.2f GB/s\n", rank, hc[i].name,
		    hc[i].bandWidth);
	}
	HcclCommDestroy(comm);
	return bad == 0 && nhc == OPS + 1 && ncm == OPS + 1 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	HcclRootInfo root;
	pid_t pid[RANKS];
	int r, st, failed = 0;

	example_args(argc, argv, "mspti-hccl",
	    "HCCL and communication activity of a 2-rank job.");
	if (HcclGetRootInfo(&root) != HCCL_SUCCESS)
		return 1;
	for (r = 0; r < RANKS; r++) {
		if ((pid[r] = fork()) == 0) {
			st = rank_main(r, &root);
			fflush(stdout);
			_exit(st);
		}
		if (pid[r] < 0)
			return 1;
	}
	for (r = 0; r < RANKS; r++)
		if (waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			failed++;
	printf("%d of %d ranks failed\n", failed, RANKS);
	return failed ? 1 : 0;
}

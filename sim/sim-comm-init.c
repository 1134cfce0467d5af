/*
 * sim-comm-init.c - HcclCommInitAll: one process, one rank per device.
 *
 * HcclCommInitRootInfo is a rendezvous that returns once every rank has
 * joined, so each rank joins from its own thread with a fresh root info.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_comm_init {
	const HcclRootInfo	*root;
	uint32_t		 nranks;
	uint32_t		 rank;
	HcclComm		 comm;
	HcclResult		 r;
};

static void *
sim_comm_init_main(void *arg)
{
	struct sim_comm_init	*ci = arg;

	ci->r = HcclCommInitRootInfo(ci->nranks, ci->root, ci->rank,
	    &ci->comm);
	return (NULL);
}

SIM_EXPORT HcclResult
HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms)
{
	struct sim_comm_init	*ci;
	pthread_t		*th;
	HcclRootInfo		 root;
	HcclResult		 r = HCCL_SUCCESS;
	uint32_t		 i, j, started = 0;

	sim_runtime_init();
	if (devices == NULL || comms == NULL)
		return (HCCL_E_PTR);
	if (ndev == 0 || ndev > SIM_MAX_RANKS)
		return (HCCL_E_PARA);
	for (i = 0; i < ndev; i++) {
		if (devices[i] < 0 || devices[i] >= sim_cfg.ndevices)
			return (HCCL_E_PARA);
		for (j = 0; j < i; j++)
			if (devices[j] == devices[i])
				return (HCCL_E_PARA);
	}
	if ((r = HcclGetRootInfo(&root)) != HCCL_SUCCESS)
		return (r);
	ci = calloc(ndev, sizeof *ci);
	th = calloc(ndev, sizeof *th);
	if (ci == NULL || th == NULL) {
		free(ci);
		free(th);
		return (HCCL_E_MEMORY);
	}
	for (i = 0; i < ndev; i++) {
		ci[i].root = &root;
		ci[i].nranks = ndev;
		ci[i].rank = i;
		ci[i].r = HCCL_E_INTERNAL;
		if (pthread_create(&th[i], NULL, sim_comm_init_main,
		    &ci[i]) != 0)
			break;
		started++;
	}
	/* A rank that never started makes the others time out. */
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < ndev && r == HCCL_SUCCESS; i++)
		if (i >= started)
			r = HCCL_E_INTERNAL;
		else if (ci[i].r != HCCL_SUCCESS)
			r = ci[i].r;
	for (i = 0; i < started; i++)
		if (r != HCCL_SUCCESS && ci[i].r == HCCL_SUCCESS)
			(void)HcclCommDestroy(ci[i].comm);
		else if (r == HCCL_SUCCESS)
			comms[i] = ci[i].comm;
	free(ci);
	free(th);
	return (r);
}

/*
 * sim-topo.c - the collective cost model over a topology of nodes x
 * devices.  Ranks on one node talk over fast links (HCCS-like,
 * NPUSIM_LINK_BW_GBS / NPUSIM_LINK_LAT_US); ranks on different nodes over
 * the network (RoCE-like, NPUSIM_ROCE_BW_GBS / NPUSIM_ROCE_LAT_US).  A
 * collective runs as one ring over all its ranks, so every step of the
 * ring waits for its slowest hop: a comm that spans nodes runs at the
 * network's bandwidth and latency (the slowest link crossed), one inside
 * a node at the node's.  Pure functions: tests/unit/check_sim_topo.c
 * builds this file in.
 */
#include <stdint.h>

#include "sim.h"

/* FNV-1a: a node's name as the 64-bit id ranks compare. */
uint64_t
sim_topo_hash(const char *s)
{
	uint64_t	h = 1469598103934665603ULL;

	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (h == 0 ? 1 : h);	/* 0 means "not set" in the comm */
}

/* Distinct nodes among n ranks' node ids. */
uint32_t
sim_topo_nodes(const uint64_t *node, uint32_t n)
{
	uint32_t	i, j, k = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < i && node[j] != node[i]; j++)
			;
		if (j == i)
			k++;
	}
	return (k);
}

/*
 * The link a ring over nnodes nodes runs at: the intra-node one inside a
 * node, else the slower of the two (bandwidth and latency taken apart, so
 * a misconfigured "fast" network still cannot beat the node's links).
 * slow_bw > 0: a rank of the comm has a slow link (NPUSIM_SLOW_LINK).
 */
struct sim_link
sim_topo_ring_link(uint32_t nnodes, const struct sim_link *intra,
    const struct sim_link *inter, double slow_bw)
{
	struct sim_link	l = *intra;

	if (nnodes > 1) {
		if (inter->bw < l.bw)
			l.bw = inter->bw;
		if (inter->lat_ns > l.lat_ns)
			l.lat_ns = inter->lat_ns;
	}
	if (slow_bw > 0 && slow_bw < l.bw)
		l.bw = slow_bw;
	return (l);
}

/*
 * Modelled transfer time (ns, unscaled) of a collective of kind op over n
 * ranks, bytes being one rank's contribution (all-gather and friends: the
 * total), on a ring at link l.
 */
uint64_t
sim_topo_coll_ns(int op, uint32_t nranks, uint64_t bytes, struct sim_link l)
{
	double	n = nranks, b = (double)bytes, t;

	if (nranks <= 1)
		return ((uint64_t)l.lat_ns);
	switch (op) {
	case SIM_COMM_ALLREDUCE:
		t = 2.0 * (n - 1) / n * b / l.bw * 1e9 +
		    2.0 * (n - 1) * l.lat_ns;
		break;
	case SIM_COMM_BROADCAST:
	case SIM_COMM_REDUCE:
		t = b / l.bw * 1e9 + (n - 1) * l.lat_ns;
		break;
	case SIM_COMM_BARRIER:
		t = 2.0 * (n - 1) * l.lat_ns;
		break;
	default:
		t = (n - 1) / n * b / l.bw * 1e9 + (n - 1) * l.lat_ns;
		break;
	}
	return ((uint64_t)t);
}

/*
 * sim-comm.c - HCCL collectives between the processes of one node.
 *
 * Ranks rendezvous in a POSIX shared-memory object named in the root
 * info, or with NPUSIM_COMM_DIR in a file there, which ranks on other
 * nodes (other /dev/shm) reach through a shared filesystem: futexes on a
 * shared file mapping work across processes as on shm.  Each rank
 * publishes its node, and the cost model (sim-topo.c) runs a comm that
 * spans nodes at the network's link.  Every collective runs in rounds:
 * each rank posts up to a slot of data, all meet at a barrier, each reads
 * what it needs from the others' slots (really reducing, sim-reduce.c, or
 * moving the data), and all meet again so the slots can be reused.
 * Send/recv use a one-chunk mailbox per ordered pair of ranks.  Waits use
 * futexes on the shared words with a deadline (NPUSIM_HCCL_TIMEOUT_S) and
 * check that the peers are still alive, so a dead rank makes everyone
 * fail instead of hang; a failure marks the comm aborted for every rank.
 *
 * Timing is the model's: a rank arrives at its task's modelled start
 * (not when its worker got there); the first barrier tells every rank
 * the slowest arrival, and the collective ends at that instant plus a
 * ring-algorithm transfer time over the link bandwidth (the slow link, if
 * one rank has it).  How long the real data movement takes on the host
 * never shows: a late rank is wait time, the transfer is the model's.
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/futex.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

#define SIM_COMM_ROOT_TAG	"npusim-hccl:"
#define SIM_COMM_SLOT		(4U << 20)	/* per-rank round buffer */
#define SIM_COMM_MBOX		(256U << 10)	/* per-pair mailbox */

struct sim_comm_rankinfo {
	int32_t		pid;
	uint32_t	op;
	uint64_t	op_seq;
	uint64_t	arrive;		/* CLOCK_MONOTONIC */
	uint64_t	count;
	uint32_t	more;
	uint32_t	pad0;
	uint64_t	node;		/* sim_topo_hash of the rank's node */
	uint8_t		pad[16];
};

struct sim_comm_mbox {
	uint32_t	state;		/* 0 empty, 1 full */
	uint32_t	pad0;
	uint64_t	len;
	uint64_t	sarrive;	/* sender's arrival, monotonic */
	uint8_t		pad[40];
};

struct sim_comm_shm {
	uint32_t		 nranks;	/* set by the first rank */
	uint32_t		 joined;
	uint32_t		 aborted;	/* HcclResult that broke it */
	uint32_t		 bar_count;
	uint32_t		 bar_gen;
	uint8_t			 pad[44];
	struct sim_comm_rankinfo ranks[SIM_MAX_RANKS];
	struct sim_comm_mbox	 mbox[SIM_MAX_RANKS][SIM_MAX_RANKS];
};

struct sim_comm {
	struct sim_obj		 obj;
	char			 shm_name[320];	/* or the file's path */
	char			 name[NPUSIM_COMM_NAME_LEN];
	uint32_t		 nranks;
	uint32_t		 rank;
	struct sim_comm_shm	*shm;
	size_t			 size;
	char			*slots;
	char			*mdata;
	uint64_t		 op_seq;
	uint32_t		 nnodes;	/* nodes the comm spans */
	int			 file;		/* rendezvous is a file */
};

static const char *sim_comm_names[] = {
	[SIM_COMM_ALLREDUCE] = "HcclAllReduce",
	[SIM_COMM_BROADCAST] = "HcclBroadcast",
	[SIM_COMM_ALLGATHER] = "HcclAllGather",
	[SIM_COMM_REDUCESCATTER] = "HcclReduceScatter",
	[SIM_COMM_REDUCE] = "HcclReduce",
	[SIM_COMM_ALLTOALL] = "HcclAlltoAll",
	[SIM_COMM_ALLTOALLV] = "HcclAlltoAllV",
	[SIM_COMM_BARRIER] = "HcclBarrier",
	[SIM_COMM_SCATTER] = "HcclScatter",
	[SIM_COMM_SEND] = "HcclSend",
	[SIM_COMM_RECV] = "HcclRecv",
	[SIM_COMM_BATCHSENDRECV] = "HcclBatchSendRecv",
};

static void
sim_comm_futex_wake(uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void
sim_comm_futex_wait(uint32_t *addr, uint32_t val, uint64_t ns)
{
	struct timespec	ts;

	ts.tv_sec = (time_t)(ns / 1000000000ULL);
	ts.tv_nsec = (long)(ns % 1000000000ULL);
	syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Is pid gone?  A zombie (not yet reaped) counts as gone. */
static int
sim_comm_pid_dead(pid_t pid)
{
	char	 path[64], buf[256], *p;
	FILE	*f;
	int	 dead = 0;

	if (kill(pid, 0) == -1 && errno == ESRCH)
		return (1);
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return (0);
	if (fgets(buf, sizeof buf, f) != NULL &&
	    (p = strrchr(buf, ')')) != NULL && p[1] == ' ' &&
	    (p[2] == 'Z' || p[2] == 'X'))
		dead = 1;
	fclose(f);
	return (dead);
}

static void
sim_comm_abort(struct sim_comm *c, HcclResult why)
{
	uint32_t	zero = 0;

	__atomic_compare_exchange_n(&c->shm->aborted, &zero, (uint32_t)why,
	    0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->shm->bar_gen, 1, __ATOMIC_RELEASE);
	sim_comm_futex_wake(&c->shm->bar_gen);
	sim_comm_futex_wake(&c->shm->joined);
}

/*
 * Are the peers alive?  only: a mask of the ranks that matter (a p2p op
 * needs only its peers; a rank that finished its part may have exited),
 * NULL for all.
 */
static int
sim_comm_peers_alive(struct sim_comm *c, const uint64_t *only)
{
	uint32_t	i;
	int32_t		pid;

	for (i = 0; i < c->nranks; i++) {
		if (i == c->rank || (only != NULL &&
		    !(*only & (1ULL << i))))
			continue;
		pid = __atomic_load_n(&c->shm->ranks[i].pid, __ATOMIC_RELAXED);
		if (pid > 0 && sim_comm_pid_dead(pid))
			return (0);
	}
	return (1);
}

static uint64_t
sim_comm_deadline(void)
{
	return (sim_clock_mono() + (uint64_t)(sim_cfg.hccl_timeout_s * 1e9));
}

/*
 * Check the comm (the peers in only, NULL: all) is still usable; called
 * while waiting.  A dead peer is reported, not yet an abort: the caller
 * first looks whether what it waited for happened meanwhile (a peer may
 * exit right after its last collective completed).
 */
static HcclResult
sim_comm_check(struct sim_comm *c, uint64_t deadline, uint64_t *next_check,
    const uint64_t *only)
{
	uint64_t	now;

	if (__atomic_load_n(&c->shm->aborted, __ATOMIC_ACQUIRE) != 0)
		return (HCCL_E_REMOTE);
	now = sim_clock_mono();
	if (now >= deadline) {
		sim_comm_abort(c, HCCL_E_TIMEOUT);
		return (HCCL_E_TIMEOUT);
	}
	if (now >= *next_check) {
		if (!sim_comm_peers_alive(c, only))
			return (HCCL_E_REMOTE);
		*next_check = now + 50000000ULL;
	}
	return (HCCL_SUCCESS);
}

/* Wait while *addr == val. */
static HcclResult
sim_comm_wait(struct sim_comm *c, uint32_t *addr, uint32_t val,
    uint64_t deadline)
{
	uint64_t	next_check = 0;
	HcclResult	r;

	while (__atomic_load_n(addr, __ATOMIC_ACQUIRE) == val) {
		if ((r = sim_comm_check(c, deadline, &next_check,
		    NULL)) != 0) {
			if (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != val)
				break;
			sim_comm_abort(c, r);
			return (r);
		}
		sim_comm_futex_wait(addr, val, 10000000ULL);
	}
	return (__atomic_load_n(&c->shm->aborted, __ATOMIC_ACQUIRE) != 0 ?
	    HCCL_E_REMOTE : HCCL_SUCCESS);
}

/* Sense-counting barrier over all ranks of the comm. */
static HcclResult
sim_comm_barrier(struct sim_comm *c, uint64_t deadline)
{
	struct sim_comm_shm	*sh = c->shm;
	uint32_t		 gen;

	gen = __atomic_load_n(&sh->bar_gen, __ATOMIC_ACQUIRE);
	if (__atomic_fetch_add(&sh->bar_count, 1, __ATOMIC_ACQ_REL) ==
	    c->nranks - 1) {
		__atomic_store_n(&sh->bar_count, 0, __ATOMIC_RELAXED);
		__atomic_fetch_add(&sh->bar_gen, 1, __ATOMIC_RELEASE);
		sim_comm_futex_wake(&sh->bar_gen);
		return (HCCL_SUCCESS);
	}
	return (sim_comm_wait(c, &sh->bar_gen, gen, deadline));
}

static size_t
sim_comm_shm_size(uint32_t n)
{
	return (sizeof(struct sim_comm_shm) + (size_t)n * SIM_COMM_SLOT +
	    (size_t)n * n * SIM_COMM_MBOX);
}

static void
sim_comm_destroy(struct sim_obj *obj)
{
	struct sim_comm	*c = (struct sim_comm *)obj;

	if (c->shm != NULL)
		munmap(c->shm, c->size);
	free(c);
}

static char *
sim_comm_slot(struct sim_comm *c, uint32_t r)
{
	return (c->slots + (size_t)r * SIM_COMM_SLOT);
}

static char *
sim_comm_mdata(struct sim_comm *c, uint32_t from, uint32_t to)
{
	return (c->mdata + ((size_t)from * c->nranks + to) * SIM_COMM_MBOX);
}

/* Modelled transfer time of op for this comm, in ns. */
static uint64_t
sim_comm_model(struct sim_comm *c, struct sim_comm_op *op, uint64_t bytes)
{
	struct sim_link	intra = { sim_cfg.link_bw, sim_cfg.link_lat_ns };
	struct sim_link	inter = { sim_cfg.roce_bw, sim_cfg.roce_lat_ns };
	struct sim_link	l;
	double		slow = 0;

	if (sim_cfg.slow_link >= 0 && (uint32_t)sim_cfg.slow_link < c->nranks)
		slow = sim_cfg.slow_link_bw;	/* the ring runs at its slowest */
	l = sim_topo_ring_link(c->nnodes, &intra, &inter, slow);
	return ((uint64_t)((double)sim_topo_coll_ns(op->op, c->nranks, bytes,
	    l) * sim_cfg.time_scale));
}

/* The link between this rank and peer: in the node or across nodes. */
static struct sim_link
sim_comm_p2p_link(struct sim_comm *c, uint32_t peer)
{
	struct sim_link	l = { sim_cfg.link_bw, sim_cfg.link_lat_ns };
	struct sim_link	inter = { sim_cfg.roce_bw, sim_cfg.roce_lat_ns };

	if (peer < c->nranks && c->shm->ranks[peer].node !=
	    c->shm->ranks[c->rank].node)
		l = sim_topo_ring_link(2, &l, &inter, 0);
	return (l);
}

/* Bytes one rank contributes, for the model and the record. */
static uint64_t
sim_comm_bytes(struct sim_comm *c, struct sim_comm_op *op)
{
	size_t		esz = sim_reduce_dtype_size(op->dtype);
	uint64_t	n = c->nranks, b = 0, i;

	switch (op->op) {
	case SIM_COMM_ALLREDUCE:
	case SIM_COMM_BROADCAST:
	case SIM_COMM_REDUCE:
		return (op->count * esz);
	case SIM_COMM_ALLGATHER:
	case SIM_COMM_REDUCESCATTER:
	case SIM_COMM_SCATTER:
	case SIM_COMM_ALLTOALL:
		return (op->count * esz * n);
	case SIM_COMM_ALLTOALLV:
		for (i = 0; i < n; i++)
			b += op->v[i] * esz;
		return (b);
	}
	return (0);
}

static uint64_t
sim_comm_min(uint64_t a, uint64_t b)
{
	return (a < b ? a : b);
}

/* Post this rank's part of round `off`; returns whether more remain. */
static int
sim_comm_post(struct sim_comm *c, struct sim_comm_op *op, uint64_t off,
    uint64_t per)
{
	size_t		 esz = sim_reduce_dtype_size(op->dtype);
	const char	*send = op->send;
	char		*slot = sim_comm_slot(c, c->rank);
	uint64_t	 n = c->nranks, j, len, cnt = op->count, more = 0;

	len = off < cnt ? sim_comm_min(per, cnt - off) : 0;
	switch (op->op) {
	case SIM_COMM_ALLREDUCE:
	case SIM_COMM_REDUCE:
	case SIM_COMM_ALLGATHER:
		memcpy(slot, send + off * esz, len * esz);
		break;
	case SIM_COMM_BROADCAST:
		if (c->rank == op->root)
			memcpy(slot, (char *)op->recv + off * esz, len * esz);
		break;
	case SIM_COMM_SCATTER:
		if (c->rank != op->root)
			break;
		/* FALLTHROUGH */
	case SIM_COMM_REDUCESCATTER:
	case SIM_COMM_ALLTOALL:
		for (j = 0; j < n; j++)
			memcpy(slot + j * per * esz, send + (j * cnt + off) *
			    esz, len * esz);
		break;
	case SIM_COMM_ALLTOALLV:
		for (j = 0; j < n; j++) {
			cnt = op->v[j];
			if (off < cnt)
				memcpy(slot + j * per * esz, send +
				    (op->v[n + j] + off) * esz,
				    sim_comm_min(per, cnt - off) * esz);
			if (off + per < op->v[j] || off + per < op->v[2 * n + j])
				more = 1;
		}
		return ((int)more);
	case SIM_COMM_BARRIER:
		return (0);
	}
	return (off + per < cnt);
}

/* Read round `off` from everyone's slots into this rank's output. */
static void
sim_comm_consume(struct sim_comm *c, struct sim_comm_op *op, uint64_t off,
    uint64_t per)
{
	size_t		 esz = sim_reduce_dtype_size(op->dtype);
	char		*recv = op->recv, *dst;
	uint64_t	 n = c->nranks, i, len, cnt = op->count, r = c->rank;

	len = off < cnt ? sim_comm_min(per, cnt - off) : 0;
	switch (op->op) {
	case SIM_COMM_ALLREDUCE:
	case SIM_COMM_REDUCE:
		if (op->op == SIM_COMM_REDUCE && r != op->root)
			break;
		dst = recv + off * esz;
		memcpy(dst, sim_comm_slot(c, 0), len * esz);
		for (i = 1; i < n; i++)
			sim_reduce(dst, sim_comm_slot(c, (uint32_t)i),
			    len, op->dtype, op->redop);
		break;
	case SIM_COMM_BROADCAST:
		if (r != op->root)
			memcpy(recv + off * esz, sim_comm_slot(c, op->root),
			    len * esz);
		break;
	case SIM_COMM_ALLGATHER:
		for (i = 0; i < n; i++)
			memcpy(recv + (i * cnt + off) * esz,
			    sim_comm_slot(c, (uint32_t)i), len * esz);
		break;
	case SIM_COMM_REDUCESCATTER:
		dst = recv + off * esz;
		memcpy(dst, sim_comm_slot(c, 0) + r * per * esz, len * esz);
		for (i = 1; i < n; i++)
			sim_reduce(dst, sim_comm_slot(c, (uint32_t)i) +
			    r * per * esz, len, op->dtype, op->redop);
		break;
	case SIM_COMM_SCATTER:
		memcpy(recv + off * esz, sim_comm_slot(c, op->root) +
		    r * per * esz, len * esz);
		break;
	case SIM_COMM_ALLTOALL:
		for (i = 0; i < n; i++)
			memcpy(recv + (i * cnt + off) * esz,
			    sim_comm_slot(c, (uint32_t)i) + r * per * esz,
			    len * esz);
		break;
	case SIM_COMM_ALLTOALLV:
		for (i = 0; i < n; i++) {
			cnt = op->v[2 * n + i];
			if (off < cnt)
				memcpy(recv + (op->v[3 * n + i] + off) * esz,
				    sim_comm_slot(c, (uint32_t)i) +
				    r * per * esz,
				    sim_comm_min(per, cnt - off) * esz);
		}
		break;
	}
}

/*
 * One all-reduce round as reduce-scatter then all-gather: each rank
 * reduces its 1/n of the round (slot 0 first, as a plain reduction would,
 * so every rank gets the same bits) into its output and publishes it in
 * that part of its own slot, which no other rank reads; after a barrier
 * everyone copies the other parts.  n times less reducing per rank.
 */
static HcclResult
sim_comm_allreduce_round(struct sim_comm *c, struct sim_comm_op *op,
    uint64_t off, uint64_t per)
{
	size_t		 esz = sim_reduce_dtype_size(op->dtype);
	uint64_t	 n = c->nranks, len, seg, lo, hi, j, i;
	char		*dst;
	HcclResult	 r;

	len = off < op->count ? sim_comm_min(per, op->count - off) : 0;
	seg = (len + n - 1) / n;
	lo = sim_comm_min(len, c->rank * seg);
	hi = sim_comm_min(len, lo + seg);
	dst = (char *)op->recv + (off + lo) * esz;
	if (hi > lo) {
		memcpy(dst, sim_comm_slot(c, 0) + lo * esz, (hi - lo) * esz);
		for (i = 1; i < n; i++)
			sim_reduce(dst, sim_comm_slot(c, (uint32_t)i) +
			    lo * esz, hi - lo, op->dtype, op->redop);
		memcpy(sim_comm_slot(c, c->rank) + lo * esz, dst,
		    (hi - lo) * esz);
	}
	if ((r = sim_comm_barrier(c, sim_comm_deadline())) != 0)
		return (r);
	for (j = 0; j < n; j++) {
		if (j == c->rank)
			continue;
		lo = sim_comm_min(len, j * seg);
		hi = sim_comm_min(len, lo + seg);
		if (hi > lo)
			memcpy((char *)op->recv + (off + lo) * esz,
			    sim_comm_slot(c, (uint32_t)j) + lo * esz,
			    (hi - lo) * esz);
	}
	return (HCCL_SUCCESS);
}

/* Run a collective; *t_last gets the slowest rank's arrival. */
static HcclResult
sim_comm_collective(struct sim_comm *c, struct sim_comm_op *op,
    uint64_t arrive, uint64_t *t_last)
{
	struct sim_comm_shm		*sh = c->shm;
	struct sim_comm_rankinfo	*me = &sh->ranks[c->rank], *ri;
	size_t				 esz = sim_reduce_dtype_size(op->dtype);
	uint64_t			 per, off = 0, seq = ++c->op_seq;
	uint32_t			 i;
	int				 more, any;
	HcclResult			 r;

	if (esz == 0)
		esz = 1;
	per = SIM_COMM_SLOT / esz;
	switch (op->op) {
	case SIM_COMM_REDUCESCATTER:
	case SIM_COMM_SCATTER:
	case SIM_COMM_ALLTOALL:
	case SIM_COMM_ALLTOALLV:
		per /= c->nranks;
		break;
	}
	*t_last = arrive;
	for (;;) {
		more = sim_comm_post(c, op, off, per);
		if (off == 0) {
			me->op_seq = seq;
			me->op = (uint32_t)op->op;
			me->arrive = arrive;
		}
		__atomic_store_n(&me->more, (uint32_t)more, __ATOMIC_RELEASE);
		if ((r = sim_comm_barrier(c, sim_comm_deadline())) != 0)
			return (r);
		any = 0;
		for (i = 0; i < c->nranks; i++) {
			ri = &sh->ranks[i];
			if (off == 0 && (ri->op_seq != seq ||
			    ri->op != (uint32_t)op->op)) {
				/* Ranks called different collectives. */
				sim_comm_abort(c, HCCL_E_PARA);
				return (HCCL_E_PARA);
			}
			if (off == 0 && ri->arrive > *t_last)
				*t_last = ri->arrive;
			if (__atomic_load_n(&ri->more, __ATOMIC_ACQUIRE))
				any = 1;
		}
		if (op->op == SIM_COMM_ALLREDUCE && c->nranks > 1) {
			if ((r = sim_comm_allreduce_round(c, op, off,
			    per)) != 0)
				return (r);
		} else
			sim_comm_consume(c, op, off, per);
		if ((r = sim_comm_barrier(c, sim_comm_deadline())) != 0)
			return (r);
		if (!any)
			return (HCCL_SUCCESS);
		off += per;
	}
}

/* Point-to-point progress state of one send or receive. */
struct sim_comm_p2p {
	int		 send;
	uint32_t	 peer;
	char		*buf;
	uint64_t	 bytes;
	uint64_t	 off;
	int		 started;
};

/* Try to move one chunk; 1 if progress was made. */
static int
sim_comm_p2p_step(struct sim_comm *c, struct sim_comm_p2p *p,
    uint64_t arrive, uint64_t *t_peer)
{
	struct sim_comm_mbox	*mb;
	uint64_t		 len;

	if (p->send) {
		mb = &c->shm->mbox[c->rank][p->peer];
		if (__atomic_load_n(&mb->state, __ATOMIC_ACQUIRE) != 0)
			return (0);
		len = sim_comm_min(SIM_COMM_MBOX, p->bytes - p->off);
		memcpy(sim_comm_mdata(c, c->rank, p->peer), p->buf + p->off,
		    len);
		mb->len = len;
		mb->sarrive = arrive;
		__atomic_store_n(&mb->state, 1, __ATOMIC_RELEASE);
		sim_comm_futex_wake(&mb->state);
	} else {
		mb = &c->shm->mbox[p->peer][c->rank];
		if (__atomic_load_n(&mb->state, __ATOMIC_ACQUIRE) != 1)
			return (0);
		len = sim_comm_min(mb->len, p->bytes - p->off);
		memcpy(p->buf + p->off, sim_comm_mdata(c, p->peer, c->rank),
		    len);
		if (mb->sarrive > *t_peer)
			*t_peer = mb->sarrive;
		__atomic_store_n(&mb->state, 0, __ATOMIC_RELEASE);
		sim_comm_futex_wake(&mb->state);
	}
	p->off += len;
	p->started = 1;
	return (1);
}

static int
sim_comm_p2p_done(struct sim_comm_p2p *p)
{
	/* A zero-byte message still passes one (empty) chunk. */
	return (p->started && p->off >= p->bytes);
}

/* Run a set of sends/receives to completion, in order per peer. */
static HcclResult
sim_comm_p2p_run(struct sim_comm *c, struct sim_comm_p2p *v, size_t n,
    uint64_t arrive, uint64_t *t_peer)
{
	uint64_t	deadline = sim_comm_deadline(), next_check = 0;
	uint64_t	idle = 0, peers;
	size_t		i, j, left;
	int		progress, blocked;
	HcclResult	suspect = HCCL_SUCCESS;

	*t_peer = arrive;
	for (;;) {
		progress = 0;
		left = 0;
		peers = 0;
		for (i = 0; i < n; i++) {
			if (sim_comm_p2p_done(&v[i]))
				continue;
			left++;
			if (v[i].peer < 64)
				peers |= 1ULL << v[i].peer;
			blocked = 0;
			for (j = 0; j < i; j++) {
				if (v[j].send == v[i].send &&
				    v[j].peer == v[i].peer &&
				    !sim_comm_p2p_done(&v[j]))
					blocked = 1;
			}
			if (!blocked && sim_comm_p2p_step(c, &v[i], arrive,
			    t_peer))
				progress = 1;
		}
		if (left == 0)
			return (HCCL_SUCCESS);
		if (progress) {
			idle = 0;
			suspect = HCCL_SUCCESS;
			continue;
		}
		if (suspect != HCCL_SUCCESS) {
			/* Still nothing after the peer was found gone. */
			sim_comm_abort(c, suspect);
			return (suspect);
		}
		/* Only the peers still owed something must be alive; one
		 * more pass first, for what a peer left before it went. */
		if ((suspect = sim_comm_check(c, deadline, &next_check,
		    &peers)) != HCCL_SUCCESS)
			continue;
		/* Back off from 20 us to 1 ms while nothing moves. */
		idle = idle == 0 ? 20000 : (idle * 2 > 1000000 ? 1000000 :
		    idle * 2);
		sim_clock_sleep_until(sim_clock_mono() + idle);
	}
}

static aclError
sim_comm_acl_error(HcclResult r)
{
	if (r == HCCL_E_TIMEOUT)
		return (ACL_ERROR_RT_TASK_TIMEOUT);
	return (ACL_ERROR_RT_SUSPECT_REMOTE_ERROR);
}

/*
 * What a BatchSendRecv record says about its items, all of which run as
 * one task: count is the elements of every item when they share a data
 * type (else the bytes, as UINT8), and peer the remote rank when every
 * item has the same one (else NPUSIM_ID_NONE).
 */
static void
sim_comm_batch_record(const struct sim_comm_op *op,
    struct npusim_record *rec)
{
	uint64_t	count = 0, bytes = 0;
	uint32_t	i;
	int		same_type = 1, same_peer = 1;

	for (i = 0; i < op->nitems; i++) {
		count += op->items[i].count;
		bytes += op->items[i].count *
		    sim_reduce_dtype_size(op->items[i].dataType);
		if (op->items[i].dataType != op->items[0].dataType)
			same_type = 0;
		if (op->items[i].remoteRank != op->items[0].remoteRank)
			same_peer = 0;
	}
	if (op->nitems > 0 && same_type) {
		rec->count = count;
		rec->data_type = (uint32_t)op->items[0].dataType;
	} else {
		rec->count = bytes;
		rec->data_type = HCCL_DATA_TYPE_UINT8;
	}
	rec->peer = op->nitems > 0 && same_peer ? op->items[0].remoteRank :
	    NPUSIM_ID_NONE;
}

/*
 * Execute a queued comm op on the stream worker.  start is this rank's
 * arrival (monotonic); rec gets the COMM fields and, in end_ns, the
 * monotonic end time the worker must wait for.
 */
aclError
sim_comm_exec(struct sim_comm_op *op, uint64_t start, struct npusim_record *rec)
{
	struct sim_comm		*c = op->comm;
	struct sim_comm_p2p	 one, *v = &one;
	uint64_t		 t_last = start, bytes = 0, end, now;
	struct sim_link		 link, pl;
	size_t			 n = 1, i;
	HcclResult		 r;

	snprintf(rec->comm_name, sizeof rec->comm_name, "%s", c->name);
	rec->data_type = (uint32_t)op->dtype;
	rec->reduce_op = (op->op == SIM_COMM_ALLREDUCE || op->op ==
	    SIM_COMM_REDUCE || op->op == SIM_COMM_REDUCESCATTER) ?
	    (uint32_t)op->redop : NPUSIM_ID_NONE;
	rec->count = op->count;
	rec->rank = c->rank;
	rec->rank_size = c->nranks;
	rec->peer = (op->op == SIM_COMM_BROADCAST || op->op ==
	    SIM_COMM_REDUCE || op->op == SIM_COMM_SCATTER || op->op ==
	    SIM_COMM_SEND || op->op == SIM_COMM_RECV) ? op->root :
	    NPUSIM_ID_NONE;

	if (__atomic_load_n(&c->shm->aborted, __ATOMIC_ACQUIRE) != 0) {
		rec->end_ns = start;
		return (ACL_ERROR_RT_SUSPECT_REMOTE_ERROR);
	}
	if (op->op == SIM_COMM_SEND || op->op == SIM_COMM_RECV ||
	    op->op == SIM_COMM_BATCHSENDRECV) {
		rec->algorithm = NPUSIM_COMM_ALG_P2P;
		if (op->op == SIM_COMM_BATCHSENDRECV) {
			n = op->nitems;
			if ((v = calloc(n ? n : 1, sizeof *v)) == NULL) {
				rec->end_ns = start;
				return (ACL_ERROR_RT_MEMORY_ALLOCATION);
			}
			for (i = 0; i < n; i++) {
				v[i].send = op->items[i].sendRecvType ==
				    HCCL_SEND;
				v[i].peer = op->items[i].remoteRank;
				v[i].buf = op->items[i].buf;
				v[i].bytes = op->items[i].count *
				    sim_reduce_dtype_size(
				    op->items[i].dataType);
			}
			sim_comm_batch_record(op, rec);
		} else {
			memset(&one, 0, sizeof one);
			one.send = op->op == SIM_COMM_SEND;
			one.peer = op->root;
			one.buf = one.send ? (char *)(uintptr_t)op->send :
			    op->recv;
			one.bytes = op->count * sim_reduce_dtype_size(op->dtype);
		}
		for (i = 0; i < n; i++)
			bytes += v[i].bytes;
		r = sim_comm_p2p_run(c, v, n, start, &t_last);
		/* The slowest link any item crosses. */
		link = sim_comm_p2p_link(c, c->rank);
		for (i = 0; i < n; i++) {
			pl = sim_comm_p2p_link(c, v[i].peer);
			if (pl.bw < link.bw)
				link.bw = pl.bw;
			if (pl.lat_ns > link.lat_ns)
				link.lat_ns = pl.lat_ns;
		}
		if (sim_cfg.slow_link >= 0 && ((uint32_t)sim_cfg.slow_link ==
		    c->rank || (n == 1 && (uint32_t)sim_cfg.slow_link ==
		    op->root)) && sim_cfg.slow_link_bw < link.bw)
			link.bw = sim_cfg.slow_link_bw;
		end = t_last + (uint64_t)(((double)bytes / link.bw * 1e9 +
		    link.lat_ns) * sim_cfg.time_scale);
		if (v != &one)
			free(v);
	} else {
		rec->algorithm = NPUSIM_COMM_ALG_RING;
		bytes = sim_comm_bytes(c, op);
		r = sim_comm_collective(c, op, start, &t_last);
		rec->comm_seq = (uint32_t)c->op_seq;
		end = t_last + sim_comm_model(c, op, bytes);
	}
	rec->bytes = bytes;
	rec->wait_ns = t_last > start ? t_last - start : 0;
	/* The model's end, however long moving the data really took; a
	 * failed op ends when the failure was seen. */
	now = sim_clock_mono();
	rec->end_ns = r == HCCL_SUCCESS ? end : (now > start ? now : start);
	return (r == HCCL_SUCCESS ? ACL_SUCCESS : sim_comm_acl_error(r));
}

void
sim_comm_release(struct sim_comm_op *op)
{
	if (op->comm != NULL)
		sim_handle_put(&op->comm->obj);
	free(op->v);
	free(op->items);
	op->comm = NULL;
	op->v = NULL;
	op->items = NULL;
}

static void
sim_comm_unlink(struct sim_comm *c)
{
	if (c->file)
		(void)unlink(c->shm_name);
	else
		(void)shm_unlink(c->shm_name);
}

SIM_EXPORT HcclResult
HcclGetRootInfo(HcclRootInfo *rootInfo)
{
	static uint32_t	counter;
	uint64_t	now;

	sim_env_load();
	if (rootInfo == NULL)
		return (HCCL_E_PTR);
	memset(rootInfo, 0, sizeof *rootInfo);
	now = sim_clock_realtime();
	/* With NPUSIM_COMM_DIR the rendezvous is a file there, so ranks on
	 * other nodes (their own /dev/shm) can join; else a shm name. */
	snprintf(rootInfo->internal, sizeof rootInfo->internal,
	    "%s%s/%s-hccl-%d-%llx-%u", SIM_COMM_ROOT_TAG, sim_cfg.comm_dir,
	    sim_cfg.prefix, (int)getpid(), (unsigned long long)now,
	    __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
	return (HCCL_SUCCESS);
}

SIM_EXPORT HcclResult
HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo,
    uint32_t rank, HcclComm *comm)
{
	struct sim_comm	*c;
	struct stat	 st;
	const char	*name, *base;
	uint32_t	 zero = 0, joined;
	int32_t		 nopid = 0;
	uint64_t	 deadline;
	HcclResult	 r = HCCL_E_INTERNAL;
	int		 fd;
	void		*p;

	sim_runtime_init();
	if (rootInfo == NULL || comm == NULL)
		return (HCCL_E_PTR);
	if (nRanks == 0 || nRanks > SIM_MAX_RANKS || rank >= nRanks ||
	    memchr(rootInfo->internal, '\0', sizeof rootInfo->internal) ==
	    NULL || strncmp(rootInfo->internal, SIM_COMM_ROOT_TAG,
	    strlen(SIM_COMM_ROOT_TAG)) != 0)
		return (HCCL_E_PARA);
	name = rootInfo->internal + strlen(SIM_COMM_ROOT_TAG);
	base = strrchr(name, '/');
	/* A shm name, or a file whose name is one of ours (so a forged root
	 * info cannot make us create or unlink any other file). */
	if (name[0] != '/' || base == NULL || strstr(base, "-hccl-") ==
	    NULL || strstr(name, "/../") != NULL ||
	    strlen(name) >= sizeof c->shm_name)
		return (HCCL_E_PARA);
	if ((c = calloc(1, sizeof *c)) == NULL)
		return (HCCL_E_MEMORY);
	strcpy(c->shm_name, name);
	snprintf(c->name, sizeof c->name, "%s", base + 1);
	c->nranks = nRanks;
	c->rank = rank;
	c->size = sim_comm_shm_size(nRanks);
	c->file = base != name;

	fd = c->file ? open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600) : shm_open(name, O_RDWR | O_CREAT, 0600);
	if (fd == -1) {
		free(c);
		return (HCCL_E_SYSCALL);
	}
	/* Every rank sizes it; the same size twice is harmless.  In a
	 * shared NPUSIM_COMM_DIR, a file another user made (to read or alter
	 * the collectives' data) is refused. */
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || ((size_t)st.st_size < c->size &&
	    ftruncate(fd, (off_t)c->size) == -1)) {
		close(fd);
		free(c);
		return (HCCL_E_SYSCALL);
	}
	p = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		free(c);
		return (HCCL_E_MEMORY);
	}
	c->shm = p;
	c->slots = (char *)p + sizeof *c->shm;
	c->mdata = c->slots + (size_t)nRanks * SIM_COMM_SLOT;

	/* The first rank fixes the size; a rank id can be taken once. */
	if (!__atomic_compare_exchange_n(&c->shm->nranks, &zero, nRanks, 0,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && zero != nRanks) {
		r = HCCL_E_PARA;
		goto fail;
	}
	if (!__atomic_compare_exchange_n(&c->shm->ranks[rank].pid, &nopid,
	    (int32_t)getpid(), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		r = HCCL_E_PARA;
		goto fail;
	}
	/* Published before joined (release), read after everyone joined. */
	__atomic_store_n(&c->shm->ranks[rank].node, sim_cfg.node_id,
	    __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->shm->joined, 1, __ATOMIC_ACQ_REL);
	sim_comm_futex_wake(&c->shm->joined);
	deadline = sim_comm_deadline();
	while ((joined = __atomic_load_n(&c->shm->joined,
	    __ATOMIC_ACQUIRE)) < nRanks) {
		if ((r = sim_comm_wait(c, &c->shm->joined, joined,
		    deadline)) != HCCL_SUCCESS)
			goto fail;
	}
	/* Everyone has it mapped now, so the name can go. */
	sim_comm_unlink(c);
	{
		uint64_t	nodes[SIM_MAX_RANKS];
		uint32_t	i;

		for (i = 0; i < nRanks; i++)
			nodes[i] = __atomic_load_n(&c->shm->ranks[i].node,
			    __ATOMIC_RELAXED);
		c->nnodes = sim_topo_nodes(nodes, nRanks);
	}
	__atomic_store_n(&sim_rt.rank, (int)rank, __ATOMIC_RELAXED);
	sim_handle_add(&c->obj, SIM_MAGIC_COMM, sim_comm_destroy);
	*comm = c;
	return (HCCL_SUCCESS);
fail:
	sim_comm_unlink(c);
	sim_comm_destroy(&c->obj);
	return (r);
}

SIM_EXPORT HcclResult
HcclCommDestroy(HcclComm comm)
{
	if (comm == NULL)
		return (HCCL_E_PTR);
	if (sim_handle_remove(comm, SIM_MAGIC_COMM) != 0)
		return (HCCL_E_PARA);
	return (HCCL_SUCCESS);
}

static struct sim_comm *
sim_comm_get(HcclComm comm)
{
	return (sim_handle_get(comm, SIM_MAGIC_COMM));
}

/* A getter's checks: out and comm given, comm live.  On success *cp holds
 * a reference the getter puts back. */
static HcclResult
sim_comm_query(HcclComm comm, const void *out, struct sim_comm **cp)
{
	if (out == NULL || comm == NULL)
		return (HCCL_E_PTR);
	if ((*cp = sim_comm_get(comm)) == NULL)
		return (HCCL_E_PARA);
	return (HCCL_SUCCESS);
}

SIM_EXPORT HcclResult
HcclGetRankId(HcclComm comm, uint32_t *rank)
{
	struct sim_comm	*c;
	HcclResult	 r;

	if ((r = sim_comm_query(comm, rank, &c)) != HCCL_SUCCESS)
		return (r);
	*rank = c->rank;
	sim_handle_put(&c->obj);
	return (HCCL_SUCCESS);
}

SIM_EXPORT HcclResult
HcclGetRankSize(HcclComm comm, uint32_t *rankSize)
{
	struct sim_comm	*c;
	HcclResult	 r;

	if ((r = sim_comm_query(comm, rankSize, &c)) != HCCL_SUCCESS)
		return (r);
	*rankSize = c->nranks;
	sim_handle_put(&c->obj);
	return (HCCL_SUCCESS);
}

SIM_EXPORT HcclResult
HcclGetCommName(HcclComm comm, char *commName)
{
	struct sim_comm	*c;
	HcclResult	 r;

	if ((r = sim_comm_query(comm, commName, &c)) != HCCL_SUCCESS)
		return (r);
	snprintf(commName, 128, "%s", c->name);
	sim_handle_put(&c->obj);
	return (HCCL_SUCCESS);
}

SIM_EXPORT const char *
HcclGetErrorString(HcclResult code)
{
	switch (code) {
	case HCCL_SUCCESS:
		return ("success");
	case HCCL_E_PARA:
		return ("parameter error");
	case HCCL_E_PTR:
		return ("empty pointer");
	case HCCL_E_MEMORY:
		return ("memory error");
	case HCCL_E_TIMEOUT:
		return ("timeout");
	case HCCL_E_REMOTE:
		return ("remote rank failed");
	default:
		return ("error");
	}
}

/*
 * Validate the common arguments of a comm op and queue it.  On success
 * the task owns op->v and op->items; on failure they are freed here.
 */
static HcclResult
sim_comm_submit(struct sim_comm_op *op, HcclComm comm, aclrtStream stream,
    int reduce)
{
	struct sim_comm		*c = NULL;
	struct sim_stream	*s = NULL;
	struct sim_task		*t;
	HcclResult		 r = HCCL_SUCCESS;

	sim_runtime_init();
	if (comm == NULL) {
		r = HCCL_E_PTR;
		goto fail;
	}
	if ((c = sim_comm_get(comm)) == NULL ||
	    (unsigned)op->dtype >= HCCL_DATA_TYPE_RESERVED ||
	    sim_reduce_dtype_size(op->dtype) == 0 ||
	    (reduce && (unsigned)op->redop >= HCCL_REDUCE_RESERVED)) {
		r = HCCL_E_PARA;
		goto fail;
	}
	if (reduce && op->dtype == HCCL_DATA_TYPE_INT128) {
		r = HCCL_E_NOT_SUPPORT;
		goto fail;
	}
	if (op->op != SIM_COMM_BARRIER && op->op != SIM_COMM_ALLTOALLV &&
	    op->op != SIM_COMM_BATCHSENDRECV && op->root >= c->nranks) {
		r = HCCL_E_PARA;
		goto fail;
	}
	if ((op->op == SIM_COMM_SEND || op->op == SIM_COMM_RECV) &&
	    op->root == c->rank) {
		r = HCCL_E_PARA;
		goto fail;
	}
	if (__atomic_load_n(&c->shm->aborted, __ATOMIC_ACQUIRE) != 0) {
		r = HCCL_E_REMOTE;
		goto fail;
	}
	if (sim_stream_resolve(stream, &s) != ACL_SUCCESS) {
		r = HCCL_E_PARA;
		goto fail;
	}
	if ((t = sim_stream_task(NPUSIM_TASK_COMM,
	    sim_comm_names[op->op])) == NULL) {
		r = HCCL_E_MEMORY;
		goto fail;
	}
	op->comm = c;
	t->u.comm = *op;
	if (sim_stream_submit(s, t) != ACL_SUCCESS) {
		sim_stream_free_task(t);	/* puts c, frees v/items */
		sim_handle_put(&s->obj);
		return (HCCL_E_RUNTIME);
	}
	sim_handle_put(&s->obj);
	return (HCCL_SUCCESS);
fail:
	free(op->v);
	free(op->items);
	if (c != NULL)
		sim_handle_put(&c->obj);
	if (s != NULL)
		sim_handle_put(&s->obj);
	return (r);
}

static void
sim_comm_op_init(struct sim_comm_op *op, int kind, const void *send,
    void *recv, uint64_t count, int dtype)
{
	memset(op, 0, sizeof *op);
	op->op = kind;
	op->send = send;
	op->recv = recv;
	op->count = count;
	op->dtype = dtype;
}

SIM_EXPORT HcclResult
HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count,
    HcclDataType dataType, HcclReduceOp op, HcclComm comm,
    aclrtStream stream)
{
	struct sim_comm_op	o;

	if (count > 0 && (sendBuf == NULL || recvBuf == NULL))
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_ALLREDUCE, sendBuf, recvBuf, count,
	    dataType);
	o.redop = op;
	return (sim_comm_submit(&o, comm, stream, 1));
}

SIM_EXPORT HcclResult
HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType,
    uint32_t root, HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	o;

	if (count > 0 && buf == NULL)
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_BROADCAST, buf, buf, count, dataType);
	o.root = root;
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
    HcclDataType dataType, HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	o;

	if (sendCount > 0 && (sendBuf == NULL || recvBuf == NULL))
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_ALLGATHER, sendBuf, recvBuf, sendCount,
	    dataType);
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
    HcclDataType dataType, HcclReduceOp op, HcclComm comm,
    aclrtStream stream)
{
	struct sim_comm_op	o;

	if (recvCount > 0 && (sendBuf == NULL || recvBuf == NULL))
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_REDUCESCATTER, sendBuf, recvBuf,
	    recvCount, dataType);
	o.redop = op;
	return (sim_comm_submit(&o, comm, stream, 1));
}

SIM_EXPORT HcclResult
HcclReduce(void *sendBuf, void *recvBuf, uint64_t count,
    HcclDataType dataType, HcclReduceOp op, uint32_t root, HcclComm comm,
    aclrtStream stream)
{
	struct sim_comm_op	o;

	if (count > 0 && sendBuf == NULL)
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_REDUCE, sendBuf, recvBuf, count,
	    dataType);
	o.redop = op;
	o.root = root;
	return (sim_comm_submit(&o, comm, stream, 1));
}

SIM_EXPORT HcclResult
HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
    HcclDataType dataType, uint32_t root, HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	o;

	if (recvCount > 0 && recvBuf == NULL)
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_SCATTER, sendBuf, recvBuf, recvCount,
	    dataType);
	o.root = root;
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
    const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
    HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	o;

	/* Same count and type both ways: one block per peer. */
	if (sendCount != recvCount || sendType != recvType)
		return (HCCL_E_PARA);
	if (sendCount > 0 && (sendBuf == NULL || recvBuf == NULL))
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_ALLTOALL, sendBuf,
	    (void *)(uintptr_t)recvBuf, sendCount, sendType);
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclAlltoAllV(const void *sendBuf, const void *sendCounts,
    const void *sdispls, HcclDataType sendType, const void *recvBuf,
    const void *recvCounts, const void *rdispls, HcclDataType recvType,
    HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	 o;
	struct sim_comm		*c;
	uint32_t		 n;
	uint64_t		 total = 0, i;

	if (sendCounts == NULL || sdispls == NULL || recvCounts == NULL ||
	    rdispls == NULL || comm == NULL)
		return (HCCL_E_PTR);
	if (sendType != recvType)
		return (HCCL_E_PARA);
	if ((c = sim_comm_get(comm)) == NULL)
		return (HCCL_E_PARA);
	n = c->nranks;
	sim_handle_put(&c->obj);
	sim_comm_op_init(&o, SIM_COMM_ALLTOALLV, sendBuf,
	    (void *)(uintptr_t)recvBuf, 0, sendType);
	/* Copy the count arrays: the caller may reuse them before we run. */
	if ((o.v = calloc(4 * (size_t)n, sizeof *o.v)) == NULL)
		return (HCCL_E_MEMORY);
	memcpy(o.v, sendCounts, n * sizeof *o.v);
	memcpy(o.v + n, sdispls, n * sizeof *o.v);
	memcpy(o.v + 2 * n, recvCounts, n * sizeof *o.v);
	memcpy(o.v + 3 * n, rdispls, n * sizeof *o.v);
	for (i = 0; i < n; i++)
		total += o.v[i] + o.v[2 * n + i];
	if (total > 0 && (sendBuf == NULL || recvBuf == NULL)) {
		free(o.v);
		return (HCCL_E_PTR);
	}
	for (i = 0; i < n; i++)
		o.count += o.v[i];
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclBarrier(HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	o;

	sim_comm_op_init(&o, SIM_COMM_BARRIER, NULL, NULL, 0,
	    HCCL_DATA_TYPE_INT8);
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType,
    uint32_t destRank, HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	o;

	if (count > 0 && sendBuf == NULL)
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_SEND, sendBuf, NULL, count, dataType);
	o.root = destRank;
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType,
    uint32_t srcRank, HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	o;

	if (count > 0 && recvBuf == NULL)
		return (HCCL_E_PTR);
	sim_comm_op_init(&o, SIM_COMM_RECV, NULL, recvBuf, count, dataType);
	o.root = srcRank;
	return (sim_comm_submit(&o, comm, stream, 0));
}

SIM_EXPORT HcclResult
HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum,
    HcclComm comm, aclrtStream stream)
{
	struct sim_comm_op	 o;
	struct sim_comm		*c;
	uint32_t		 i, n;

	if (sendRecvInfo == NULL || comm == NULL)
		return (HCCL_E_PTR);
	if ((c = sim_comm_get(comm)) == NULL)
		return (HCCL_E_PARA);
	n = c->nranks;
	for (i = 0; i < itemNum; i++) {
		if ((unsigned)sendRecvInfo[i].sendRecvType > HCCL_RECV ||
		    sendRecvInfo[i].remoteRank >= n ||
		    sendRecvInfo[i].remoteRank == c->rank ||
		    sim_reduce_dtype_size(sendRecvInfo[i].dataType) == 0 ||
		    (sendRecvInfo[i].count > 0 &&
		    sendRecvInfo[i].buf == NULL)) {
			sim_handle_put(&c->obj);
			return (HCCL_E_PARA);
		}
	}
	sim_handle_put(&c->obj);
	sim_comm_op_init(&o, SIM_COMM_BATCHSENDRECV, NULL, NULL, 0,
	    HCCL_DATA_TYPE_INT8);
	if ((o.items = calloc(itemNum ? itemNum : 1, sizeof *o.items)) ==
	    NULL)
		return (HCCL_E_MEMORY);
	memcpy(o.items, sendRecvInfo, itemNum * sizeof *o.items);
	o.nitems = itemNum;
	return (sim_comm_submit(&o, comm, stream, 0));
}

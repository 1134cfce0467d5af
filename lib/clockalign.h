/*
 * Clock alignment across hosts from collective completions.  Pure
 * computation, no I/O: `msptictl report`/`export` (through the analysis)
 * and the merge of a distributed report feed it the same samples and get
 * the same offsets.
 *
 * Each host's records stay on its own CLOCK_REALTIME.  Ranks leave a
 * blocking collective together, give or take the modelled transit, so for
 * one collective instance (same communicator, same ordinal on it) the end
 * times of two ranks differ by their hosts' clock offset plus a little
 * noise; and no rank can finish before the last one started, which bounds
 * the offset whatever the noise.  The estimate is the median over many
 * collectives, its uncertainty the distribution-free confidence interval of
 * that median (widened to the causality bracket's edge if it crosses one).
 *
 * Ranks on one host share its clock: offsets are estimated per host (the
 * ranks' ends pooled per collective) and, as a check, per rank.  When the
 * ranks of a host disagree beyond their uncertainties (their clocks are
 * not one), per-rank offsets are applied instead.  A host or rank with no
 * collective matched to the reference (directly or through other hosts)
 * is CLOCKALIGN_NOT_ESTIMABLE with a reason, never given offset 0.
 *
 *	struct clockalign ca;
 *	clockalign_estimate(samples, n, nhosts, -1, &ca);
 *	t_ref = t + clockalign_rank(&ca, rank)->applied_ns;
 *	clockalign_free(&ca);
 */
#ifndef MSPTI_CLOCKALIGN_H
#define MSPTI_CLOCKALIGN_H

#include <stddef.h>
#include <stdint.h>

/* Collectives fewer than this on a host pair leave it unlinked. */
#define CLOCKALIGN_MIN_MATCHED	3
/* No offset is stated more precise than this: ranks leave a collective
 * together only to within about a link's latency, and each host maps its
 * device times to its clock with an error of its own; collectives cannot
 * see either. */
#define CLOCKALIGN_FLOOR_NS	1000
/* Observations of one offset spread (half their interquartile range)
 * wider than this are not ends of the same collectives. */
#define CLOCKALIGN_MAX_SPREAD_NS	200000
/* Captures that began this many collectives apart still match. */
#define CLOCKALIGN_MAX_SHIFT	16
/* Ranks of one host further apart than 3x their uncertainties plus this
 * have clocks of their own. */
#define CLOCKALIGN_SPLIT_NS	5000

/*
 * One collective as one rank saw it.  Only collectives every member must
 * enter before any can leave (all-reduce, all-gather, reduce-scatter,
 * all-to-all, barrier) belong here, with device-side times.  comm is the
 * same number on every rank for one communicator: clockalign_comm_id() of
 * its name (string ids differ between trace files).  seq counts that
 * rank's collectives on comm from 0, in start order.  Ranks whose captures
 * began up to CLOCKALIGN_MAX_SHIFT collectives apart are renumbered onto
 * the reference rank's ordinals, where the shift is plain from the end
 * times (a constant difference instead of the step-to-step jitter).
 */
struct clockalign_sample {
	uint32_t	rank;
	uint32_t	host;		/* host index, < nhosts */
	uint64_t	comm;
	uint64_t	seq;
	uint64_t	start_ns;	/* on the rank's own host clock */
	uint64_t	end_ns;
};

enum clockalign_status {
	CLOCKALIGN_REFERENCE = 0,	/* the reference clock: offset 0 */
	CLOCKALIGN_ESTIMATED,
	CLOCKALIGN_NOT_ESTIMABLE,	/* see reason */
};

struct clockalign_est {
	enum clockalign_status status;
	const char	*reason;	/* static text when not estimable */
	int64_t		 offset_ns;	/* add to put times on the reference */
	int64_t		 uncertainty_ns; /* true offset within offset +- this */
	int64_t		 bound_lo_ns;	/* causality: offset >= lo (INT64_MIN */
	int64_t		 bound_hi_ns;	/* and <= hi (INT64_MAX) when unknown) */
	int64_t		 drift_ppb;	/* the offset's trend over the capture
					   (ns per s of the reference clock),
					   0 unless beyond the noise */
	uint64_t	 mid_ns;	/* with a drift: the reference time
					   offset_ns holds at; the offset at
					   t is clockalign_at() */
	uint32_t	 matched;	/* collectives the estimate used */
	uint32_t	 via;		/* host linked through (hosts; = self
					   when linked to the reference) */
};

struct clockalign_rank {
	uint32_t	 rank;
	uint32_t	 host;
	struct clockalign_est est;	/* this rank's own estimate */
	int64_t		 applied_ns;	/* what to add: host's or own */
	int64_t		 applied_unc_ns;
	int		 applied;	/* 0: not estimable, nothing applied */
	int		 own;		/* 1: its own estimate (host disagrees) */
};

struct clockalign {
	uint32_t		 nhosts;
	uint32_t		 reference;	/* reference host */
	struct clockalign_est	*host;		/* [nhosts] */
	int			*host_split;	/* [nhosts]: ranks disagree */
	size_t			 nranks;
	struct clockalign_rank	*ranks;		/* sorted by rank */
	size_t			 nsamples;	/* samples used */
};

/* FNV-1a of a communicator name: equal names give equal ids in every
 * trace file. */
static inline uint64_t
clockalign_comm_id(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (; name != NULL && *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h;
}

/*
 * Estimates from n samples over nhosts hosts.  reference: the reference
 * host, or -1 for the host of the lowest rank that has matched
 * collectives.  Samples are not modified; their order does not matter
 * (the result is the same for any order).  Returns 0 or -ENOMEM (out
 * zeroed).  Free with clockalign_free.
 */
int	clockalign_estimate(const struct clockalign_sample *s, size_t n,
	    uint32_t nhosts, int reference, struct clockalign *out);
void	clockalign_free(struct clockalign *ca);

/* The entry of rank r, or NULL when it had no samples at all. */
const struct clockalign_rank	*clockalign_rank(const struct clockalign *ca,
	    uint32_t rank);

/* The offset e gives at reference time t: offset_ns, moved by the
 * drift away from mid_ns. */
static inline int64_t
clockalign_at(const struct clockalign_est *e, uint64_t t)
{
	if (e->drift_ppb == 0)
		return e->offset_ns;
	return e->offset_ns + (int64_t)((double)(int64_t)(t - e->mid_ns) *
	    (double)e->drift_ppb / 1e9);
}

/* "reference", "estimated", "not estimable". */
const char	*clockalign_status_name(enum clockalign_status s);

#endif

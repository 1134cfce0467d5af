/*
 * The parts of lib/clockalign between its files: the robust statistics
 * the estimate is made of (clockalign-stats.c) and the samples' order and
 * ordinal repair (clockalign-sample.c).  Not installed, not exported.
 */
#ifndef MSPTI_CLOCKALIGN_INT_H
#define MSPTI_CLOCKALIGN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "clockalign.h"

#define CA_HIDDEN	__attribute__((visibility("hidden")))

/* A value and the unit it belongs to (ordered by value, then unit). */
struct ca_av {
	int64_t		v;
	uint32_t	unit;
};

/* Median of n sorted values (the mean of the middle two when even). */
static inline int64_t
ca_stat_median_sorted(const int64_t *v, size_t n)
{
	if (n % 2)
		return v[n / 2];
	return v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* clockalign-stats.c: sorts, selection, medians and their intervals,
 * the few values of one collective instance sorted in place. */
CA_HIDDEN int	 ca_stat_cmp_av(const void *x, const void *y);
CA_HIDDEN void	 ca_stat_sort_i64(int64_t *v, size_t n);
CA_HIDDEN void	 ca_stat_select(int64_t *v, size_t n, size_t k);
CA_HIDDEN void	 ca_stat_loo(struct ca_av *av, size_t k, int64_t *loo);
CA_HIDDEN int64_t ca_stat_median(int64_t *v, size_t n);
CA_HIDDEN int64_t ca_stat_ci(const int64_t *v, size_t n, int64_t med);
CA_HIDDEN void	 ca_stat_order(int64_t *v, size_t n);

/* clockalign-sample.c: the samples sorted (stably, as qsort), and the
 * ordinals of a rank that numbered its collectives from another first
 * one renumbered onto the reference rank's. */
CA_HIDDEN int	 ca_sample_cmp(const void *x, const void *y);
CA_HIDDEN void	 ca_sample_sort(struct clockalign_sample *s, size_t m,
		    int (*cmp)(const void *, const void *));
CA_HIDDEN void	 ca_sample_repair(struct clockalign_sample *s, size_t m,
		    uint32_t refrank, int64_t *tmp);

#endif

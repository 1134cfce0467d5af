/*
 * The samples of lib/clockalign (clockalign-int.h): sorted as qsort sorts
 * them, and the ordinals of a rank whose capture began a few collectives
 * before or after the reference rank's renumbered onto the reference's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "clockalign-int.h"

/* A rank's renumbering judges every candidate shift on all its pairs up
 * to CA_SEARCH_ALL of them; past that it ranks them on CA_SEARCH_PAIRS
 * and judges the CA_SEARCH_TOP best on all. */
#define CA_SEARCH_ALL	2048
#define CA_SEARCH_PAIRS	512
#define CA_SEARCH_TOP	3

int
ca_sample_cmp(const void *x, const void *y)
{
	const struct clockalign_sample *a = x, *b = y;

	if (a->comm != b->comm)
		return a->comm < b->comm ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	if (a->host != b->host)
		return a->host < b->host ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->end_ns != b->end_ns)
		return a->end_ns < b->end_ns ? -1 : 1;
	return a->start_ns < b->start_ns ? -1 : a->start_ns > b->start_ns;
}

static int
ca_sample_cmp_rank_comm(const void *x, const void *y)
{
	const struct clockalign_sample *a = x, *b = y;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->comm != b->comm)
		return a->comm < b->comm ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * Stable merge sort of samples: the order glibc's qsort gives (a stable
 * merge sort too), with the comparison a direct call and no merge where
 * the two halves are already in order.  The samples come as each rank's
 * collectives in order, so most ranges cost one comparison.  tmp holds
 * n / 2.
 */
static void
ca_sample_msort(struct clockalign_sample *a, struct clockalign_sample *tmp,
    size_t n, int (*cmp)(const void *, const void *))
{
	size_t h = n / 2, i = 0, j = h, k = 0;

	if (n <= 16) {
		for (size_t p = 1; p < n; p++) {
			struct clockalign_sample x = a[p];
			size_t q = p;

			for (; q > 0 && cmp(&a[q - 1], &x) > 0; q--)
				a[q] = a[q - 1];
			a[q] = x;
		}
		return;
	}
	ca_sample_msort(a, tmp, h, cmp);
	ca_sample_msort(a + h, tmp, n - h, cmp);
	if (cmp(&a[h - 1], &a[h]) <= 0)
		return;
	memcpy(tmp, a, h * sizeof(*a));
	while (i < h && j < n)
		a[k++] = cmp(&a[j], &tmp[i]) < 0 ? a[j++] : tmp[i++];
	while (i < h)
		a[k++] = tmp[i++];
}

void
ca_sample_sort(struct clockalign_sample *s, size_t m,
    int (*cmp)(const void *, const void *))
{
	struct clockalign_sample *tmp = malloc((m / 2 + 1) * sizeof(*tmp));

	if (tmp == NULL) {
		qsort(s, m, sizeof(*s), cmp);
		return;
	}
	ca_sample_msort(s, tmp, m, cmp);
	free(tmp);
}

/* Interquartile range of the end differences ref[j + d] - r[j] over the
 * pairs that exist, every step-th of them; *np the count of all of them.
 * tmp holds nr values. */
static int64_t
ca_sample_pair_iqr(const struct clockalign_sample *r, size_t nr,
    const struct clockalign_sample *ref, size_t nref, long d, size_t step,
    int64_t *tmp, size_t *np)
{
	long lo = d < 0 ? -d : 0, hi = (long)nref - d;
	size_t k = 0;

	if (hi > (long)nr)
		hi = (long)nr;
	*np = hi > lo ? (size_t)(hi - lo) : 0;
	for (long j = lo; j < hi; j += (long)step)
		tmp[k++] = (int64_t)ref[j + d].end_ns - (int64_t)r[j].end_ns;
	if (k < 4)
		return INT64_MAX;
	/* Two order statistics, not a sort: the shift search below asks
	 * this 33 times a rank and communicator. */
	ca_stat_select(tmp, k, k / 4);
	ca_stat_select(tmp + k / 4 + 1, k - k / 4 - 1, (3 * k) / 4 - k / 4 - 1);
	return tmp[(3 * k) / 4] - tmp[k / 4];
}

/* A candidate shift of ca_sample_repair and its spread on the sample. */
struct ca_shift {
	int64_t	v;
	long	d;
};

/* Keeps the CA_SEARCH_TOP smallest spreads (the first of equal ones). */
static void
ca_sample_top_add(struct ca_shift *top, size_t *n, int64_t v, long d)
{
	size_t i = *n < CA_SEARCH_TOP ? (*n)++ : CA_SEARCH_TOP;

	if (i == CA_SEARCH_TOP && v >= top[CA_SEARCH_TOP - 1].v)
		return;
	if (i == CA_SEARCH_TOP)
		i--;
	while (i > 0 && top[i - 1].v > v) {
		top[i] = top[i - 1];
		i--;
	}
	top[i] = (struct ca_shift){ v, d };
}

/*
 * Ordinals that do not match: a rank whose capture began a few
 * collectives before or after the reference rank's numbers them from a
 * different first one, and equal ordinals then pair different collectives
 * (their end differences vary by the step-to-step jitter, not by noise).
 * For each rank and communicator it shares with the reference rank,
 * where the pairing by ordinal disagrees by more than 4 x the floor, the
 * shift of up to CLOCKALIGN_MAX_SHIFT collectives whose differences agree
 * best (a quarter of the spread or less) renumbers its collectives onto
 * the reference's; its unpaired ones get ordinals no one else has.  Past
 * CA_SEARCH_ALL pairs the search ranks the shifts on CA_SEARCH_PAIRS
 * evenly spaced pairs (a wrong shift spreads every pair by a step's
 * jitter, so a sample tells it as well as all do) and judges its
 * CA_SEARCH_TOP best on every pair: the shift taken is the one the whole
 * spread prefers, as when every shift was judged on every pair.
 */
void
ca_sample_repair(struct clockalign_sample *s, size_t m, uint32_t refrank,
    int64_t *tmp)
{
	size_t i = 0, r0 = 0, r1 = 0;

	ca_sample_sort(s, m, ca_sample_cmp_rank_comm);
	while (r0 < m && s[r0].rank != refrank)
		r0++;
	r1 = r0;
	while (r1 < m && s[r1].rank == refrank)
		r1++;
	while (i < m) {
		size_t j = i, a, b, base, np, best_np = 0, step, ntop;
		struct ca_shift top[CA_SEARCH_TOP];
		int64_t eq, best = INT64_MAX, v;
		long best_d = 0;

		while (j < m && s[j].rank == s[i].rank && s[j].comm == s[i].comm)
			j++;
		if (s[i].rank == refrank)
			goto next;
		for (a = r0; a < r1 && s[a].comm != s[i].comm; a++)
			;
		for (b = a; b < r1 && s[b].comm == s[i].comm; b++)
			;
		if (a == b)
			goto next;
		/* The pairing by ordinal: its offset within the reference's. */
		for (base = a; base < b && s[base].seq < s[i].seq; base++)
			;
		eq = ca_sample_pair_iqr(s + i, j - i, s + a, b - a,
		    (long)(base - a), 1, tmp, &np);
		if (eq != INT64_MAX && eq <= 4 * CLOCKALIGN_FLOOR_NS)
			goto next;
		step = j - i > CA_SEARCH_ALL ? (j - i) / CA_SEARCH_PAIRS + 1 : 1;
		ntop = 0;
		for (long d = -CLOCKALIGN_MAX_SHIFT; d <= CLOCKALIGN_MAX_SHIFT;
		    d++) {
			v = ca_sample_pair_iqr(s + i, j - i, s + a, b - a,
			    (long)(base - a) + d, step, tmp, &np);
			if (np * 2 < (j - i < b - a ? j - i : b - a))
				continue;
			ca_sample_top_add(top, &ntop, v, (long)(base - a) + d);
		}
		/* The sample's best few, judged on every pair. */
		for (size_t t = 0; t < ntop; t++) {
			v = step > 1 ? ca_sample_pair_iqr(s + i, j - i, s + a,
			    b - a, top[t].d, 1, tmp, &np) : top[t].v;
			if (v == INT64_MAX)
				continue;
			if (v < best || (v == best && top[t].d < best_d)) {
				best = v;
				best_d = top[t].d;
				best_np = 1;
			}
		}
		if (best_np == 0 || (eq != INT64_MAX && best > eq / 4) ||
		    best_d == (long)(base - a))
			goto next;
		for (size_t k = i; k < j; k++) {
			long q = (long)(k - i) + best_d;

			s[k].seq = q >= 0 && (size_t)q < b - a ?
			    s[a + (size_t)q].seq : 1ull << 63 |
			    (uint64_t)s[k].rank << 24 | (k - i);
		}
next:
		i = j;
	}
	ca_sample_sort(s, m, ca_sample_cmp);
}

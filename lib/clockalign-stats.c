/*
 * Robust statistics of lib/clockalign (clockalign-int.h): sorts that suit
 * the few values of one collective instance, linear-time selection,
 * medians (with each value's leave-one-out median) and the
 * distribution-free 95% interval of a median.
 */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "clockalign-int.h"

static int
ca_stat_cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return a < b ? -1 : a > b;
}

int
ca_stat_cmp_av(const void *x, const void *y)
{
	const struct ca_av *a = x, *b = y;

	if (a->v != b->v)
		return a->v < b->v ? -1 : 1;
	return a->unit < b->unit ? -1 : a->unit > b->unit;
}

/*
 * Sorts of the few entries of one collective instance (a unit each):
 * there qsort's set-up and indirect calls cost several times the sort
 * (a multi-rank report made 60,000 such calls).  Larger arrays go to
 * qsort.  The orders are total, so the result is the one qsort gives.
 */
#define CA_SMALL	16

void
ca_stat_sort_i64(int64_t *v, size_t n)
{
	if (n > CA_SMALL) {
		qsort(v, n, sizeof(*v), ca_stat_cmp_i64);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		int64_t x = v[i];
		size_t j = i;

		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

static void
ca_stat_sort_av(struct ca_av *a, size_t n)
{
	if (n > CA_SMALL) {
		qsort(a, n, sizeof(*a), ca_stat_cmp_av);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		struct ca_av x = a[i];
		size_t j = i;

		for (; j > 0 && (a[j - 1].v > x.v || (a[j - 1].v == x.v &&
		    a[j - 1].unit > x.unit)); j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
}

/*
 * NAME(v, n, k): moves the k-th smallest of v[n] (k < n) to v[k], with
 * none larger before it and none smaller after (quickselect, median of
 * three; LT is the order, CMP the same for qsort).  A range that does not
 * shrink as it should (crafted input) is sorted.  One for the int64
 * values (ca_stat_select, for clockalign-sample.c too), one for the
 * (value, unit) pairs; SC is the function's storage class.
 */
#define CA_SELECT(SC, NAME, T, LT, CMP)					\
SC void									\
NAME(T *v, size_t n, size_t k)						\
{									\
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;	\
									\
	for (int budget = 64; hi > lo; budget--) {			\
		ptrdiff_t i = lo, j = hi, mid = lo + (hi - lo) / 2;	\
		T a = v[lo], b = v[mid], c = v[hi], p;			\
									\
		if (budget == 0) {					\
			qsort(v + lo, (size_t)(hi - lo + 1), sizeof(*v),\
			    CMP);					\
			return;						\
		}							\
		p = LT(a, b) ? (LT(b, c) ? b : LT(a, c) ? c : a) :	\
		    (LT(a, c) ? a : LT(b, c) ? c : b);			\
		while (i <= j) {					\
			while (LT(v[i], p))				\
				i++;					\
			while (LT(p, v[j]))				\
				j--;					\
			if (i <= j) {					\
				T t = v[i];				\
									\
				v[i++] = v[j];				\
				v[j--] = t;				\
			}						\
		}							\
		/* v[lo..j] <= p <= v[i..hi]; between them, p. */	\
		if (kk <= j)						\
			hi = j;						\
		else if (kk >= i)					\
			lo = i;						\
		else							\
			return;						\
	}								\
}

#define CA_LT_I64(x, y)	((x) < (y))
#define CA_LT_AV(x, y)	((x).v < (y).v || ((x).v == (y).v && \
			    (x).unit < (y).unit))
CA_SELECT(, ca_stat_select, int64_t, CA_LT_I64, ca_stat_cmp_i64)
CA_SELECT(static, ca_stat_select_av, struct ca_av, CA_LT_AV, ca_stat_cmp_av)

/*
 * For each of the k >= 2 (value, unit) pairs of one instance, the median
 * of the other k - 1 values, into loo[] (av may be reordered; loo[p]
 * goes with av[p] as left).  With m = k - 1, that median is made of the
 * order statistics lo = (m - 1) / 2 and hi = m / 2 of the others, which
 * are those of all k at lo or lo + 1 and hi or hi + 1, as the pair
 * itself comes after them or not: a sort for a few pairs; for many, the
 * (at most three) statistics selected in linear time, as the k-way
 * collectives of a large job have them.
 */
void
ca_stat_loo(struct ca_av *av, size_t k, int64_t *loo)
{
	size_t m = k - 1, lo = (m - 1) / 2, hi = m / 2;
	struct ca_av sl, sl1, sh, sh1;

	if (k <= CA_SMALL) {
		ca_stat_sort_av(av, k);
		for (size_t p = 0; p < k; p++) {
			int64_t vl = av[lo < p ? lo : lo + 1].v;
			int64_t vh = av[hi < p ? hi : hi + 1].v;

			loo[p] = vl + (vh - vl) / 2;
		}
		return;
	}
	ca_stat_select_av(av, k, lo);
	for (size_t q = lo + 1; q <= hi + 1; q++) {
		size_t at = q;		/* the next smallest into q */
		struct ca_av t;

		for (size_t i = q + 1; i < k; i++)
			if (CA_LT_AV(av[i], av[at]))
				at = i;
		t = av[q];
		av[q] = av[at];
		av[at] = t;
	}
	sl = av[lo];
	sl1 = av[lo + 1];
	sh = av[hi];
	sh1 = av[hi + 1];
	for (size_t p = 0; p < k; p++) {
		int64_t vl = CA_LT_AV(sl, av[p]) ? sl.v : sl1.v;
		int64_t vh = CA_LT_AV(sh, av[p]) ? sh.v : sh1.v;

		loo[p] = vl + (vh - vl) / 2;
	}
}

/* What ca_stat_median_sorted gives for v[n] sorted, in linear time; v is
 * reordered. */
int64_t
ca_stat_median(int64_t *v, size_t n)
{
	int64_t lo;

	if (n <= CA_SMALL) {
		ca_stat_sort_i64(v, n);
		return ca_stat_median_sorted(v, n);
	}
	ca_stat_select(v, n, n / 2);
	if (n % 2)
		return v[n / 2];
	lo = v[0];
	for (size_t i = 1; i < n / 2; i++)
		if (v[i] > lo)
			lo = v[i];
	return lo + (v[n / 2] - lo) / 2;
}

/* The order statistics j <= k that bound the 95% interval of the median
 * of n values. */
static void
ca_stat_ci_index(size_t n, size_t *j, size_t *k)
{
	double h;

	if (n < 6) {
		*j = 0;
		*k = n - 1;
		return;
	}
	h = 0.98 * sqrt((double)n);
	*j = (size_t)floor((double)n / 2 - h);
	*k = (size_t)ceil((double)n / 2 + h);
	if (*k > n - 1)
		*k = n - 1;
}

/* Half-width of the 95% interval of the median of n sorted values. */
int64_t
ca_stat_ci(const int64_t *v, size_t n, int64_t med)
{
	size_t j, k;

	ca_stat_ci_index(n, &j, &k);
	return med - v[j] > v[k] - med ? med - v[j] : v[k] - med;
}

/*
 * Puts in place the values of v[n] that ca_stat_median_sorted, ca_stat_ci
 * and the quartiles read (where a sort would leave them), in linear time:
 * each is selected right of the one before.  The rest is left in no
 * order.
 */
void
ca_stat_order(int64_t *v, size_t n)
{
	size_t at[6], from = 0;

	if (n <= CA_SMALL) {
		ca_stat_sort_i64(v, n);
		return;
	}
	at[0] = n / 4;
	at[1] = n / 2 - 1;
	at[2] = n / 2;
	at[3] = (3 * n) / 4;
	ca_stat_ci_index(n, &at[4], &at[5]);
	for (int i = 1; i < 6; i++)		/* six: insertion sort */
		for (int q = i; q > 0 && at[q - 1] > at[q]; q--) {
			size_t t = at[q];

			at[q] = at[q - 1];
			at[q - 1] = t;
		}
	for (int i = 0; i < 6; i++)
		if (at[i] >= from) {
			ca_stat_select(v + from, n - from, at[i] - from);
			from = at[i] + 1;
		}
}

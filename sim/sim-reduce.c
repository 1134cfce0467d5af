/*
 * sim-reduce.c - the arithmetic of HCCL reductions: dst[i] op= src[i]
 * for every data type a collective takes (sum, product, max, min).  The
 * collectives (sim-comm.c) really reduce the ranks' data with it, so a
 * program can check what it gets.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "sim.h"

/* The size of one element of HCCL data type dt; 0: not one. */
size_t
sim_reduce_dtype_size(int dt)
{
	switch (dt) {
	case HCCL_DATA_TYPE_INT8:
	case HCCL_DATA_TYPE_UINT8:
		return (1);
	case HCCL_DATA_TYPE_INT16:
	case HCCL_DATA_TYPE_UINT16:
	case HCCL_DATA_TYPE_FP16:
	case HCCL_DATA_TYPE_BFP16:
		return (2);
	case HCCL_DATA_TYPE_INT32:
	case HCCL_DATA_TYPE_UINT32:
	case HCCL_DATA_TYPE_FP32:
		return (4);
	case HCCL_DATA_TYPE_INT64:
	case HCCL_DATA_TYPE_UINT64:
	case HCCL_DATA_TYPE_FP64:
		return (8);
	case HCCL_DATA_TYPE_INT128:
		return (16);
	}
	return (0);
}

/*
 * Half and bfloat16 are reduced in float and rounded to nearest even.
 * Bit manipulation, not libm: a collective converts every element.
 */
static float
sim_reduce_half_to_float(uint16_t h)
{
	uint32_t	sign = (uint32_t)(h & 0x8000) << 16, u;
	uint32_t	e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float		f;

	if (e == 31)
		u = sign | 0x7f800000U | (m << 13);	/* inf, nan */
	else if (e != 0)
		u = sign | ((e + 112) << 23) | (m << 13);
	else if (m == 0)
		u = sign;
	else {
		/* Subnormal: normalize the mantissa. */
		e = 113;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		u = sign | (e << 23) | ((m & 0x3ff) << 13);
	}
	memcpy(&f, &u, sizeof f);
	return (f);
}

static uint16_t
sim_reduce_float_to_half(float f)
{
	uint32_t	x, sign, sh, m, q, rem;

	memcpy(&x, &f, sizeof x);
	sign = (x >> 16) & 0x8000;
	x &= 0x7fffffffU;
	if (x > 0x7f800000U)
		return (0x7e00);			/* nan */
	if (x >= 0x477ff000U)
		return ((uint16_t)(sign | 0x7c00));	/* >= 65520: inf */
	if (x >= 0x38800000U)			/* normal half: >= 2^-14 */
		return ((uint16_t)(sign | ((x - 0x38000000U + 0xfffU +
		    ((x >> 13) & 1)) >> 13)));
	if (x <= 0x33000000U)			/* <= 2^-25: to even, 0 */
		return ((uint16_t)sign);
	/* Subnormal half: f * 2^24 to the nearest even integer. */
	sh = 126 - (x >> 23);
	m = (x & 0x7fffffU) | 0x800000U;
	q = m >> sh;
	rem = m & ((1U << sh) - 1);
	if (rem > (1U << (sh - 1)) || (rem == (1U << (sh - 1)) && (q & 1)))
		q++;
	return ((uint16_t)(sign | q));
}

/* Every half as a float, built once: a reduction reads two per element. */
static float		sim_reduce_half_tab[65536];
static pthread_once_t	sim_reduce_half_once = PTHREAD_ONCE_INIT;

static void
sim_reduce_half_init(void)
{
	uint32_t	h;

	for (h = 0; h < 65536; h++)
		sim_reduce_half_tab[h] = sim_reduce_half_to_float((uint16_t)h);
}

/* bfloat16 to float and back (round to nearest even; NaN stays NaN):
 * aclnn (sim-aclnn.c) converts with these too. */
float
sim_reduce_bf16_to_float(uint16_t b)
{
	uint32_t	u = (uint32_t)b << 16;
	float		f;

	memcpy(&f, &u, sizeof f);
	return (f);
}

uint16_t
sim_reduce_float_to_bf16(float f)
{
	uint32_t	u;

	if (isnan(f))
		return (0x7fc0);
	memcpy(&u, &f, sizeof u);
	u += 0x7fff + ((u >> 16) & 1);
	return ((uint16_t)(u >> 16));
}

#define SIM_REDUCE_LOOP(T, d, s, n, op) do {			\
	T		*dd = (T *)(d);					\
	const T		*ss = (const T *)(s);				\
	size_t		 i_;						\
	for (i_ = 0; i_ < (n); i_++) {					\
		switch (op) {						\
		case HCCL_REDUCE_SUM: dd[i_] = dd[i_] + ss[i_]; break;	\
		case HCCL_REDUCE_PROD: dd[i_] = dd[i_] * ss[i_]; break;	\
		case HCCL_REDUCE_MAX:					\
			if (ss[i_] > dd[i_]) dd[i_] = ss[i_];		\
			break;						\
		default:						\
			if (ss[i_] < dd[i_]) dd[i_] = ss[i_];		\
			break;						\
		}							\
	}								\
} while (0)

static float
sim_reduce_fop(float a, float b, int op)
{
	switch (op) {
	case HCCL_REDUCE_SUM:
		return (a + b);
	case HCCL_REDUCE_PROD:
		return (a * b);
	case HCCL_REDUCE_MAX:
		return (b > a ? b : a);
	}
	return (b < a ? b : a);
}

/* dst[i] = dst[i] op src[i] for n elements of type dt. */
void
sim_reduce(void *dst, const void *src, size_t n, int dt, int op)
{
	uint16_t	*d16 = dst, v;
	const uint16_t	*s16 = src;
	size_t		 i;

	switch (dt) {
	case HCCL_DATA_TYPE_INT8:
		SIM_REDUCE_LOOP(int8_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_UINT8:
		SIM_REDUCE_LOOP(uint8_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_INT16:
		SIM_REDUCE_LOOP(int16_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_UINT16:
		SIM_REDUCE_LOOP(uint16_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_INT32:
		SIM_REDUCE_LOOP(int32_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_UINT32:
		SIM_REDUCE_LOOP(uint32_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_INT64:
		SIM_REDUCE_LOOP(int64_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_UINT64:
		SIM_REDUCE_LOOP(uint64_t, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_FP32:
		SIM_REDUCE_LOOP(float, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_FP64:
		SIM_REDUCE_LOOP(double, dst, src, n, op);
		break;
	case HCCL_DATA_TYPE_FP16:
		pthread_once(&sim_reduce_half_once, sim_reduce_half_init);
		for (i = 0; i < n; i++) {
			memcpy(&v, &s16[i], sizeof v);
			d16[i] = sim_reduce_float_to_half(sim_reduce_fop(
			    sim_reduce_half_tab[d16[i]], sim_reduce_half_tab[v],
			    op));
		}
		break;
	case HCCL_DATA_TYPE_BFP16:
		for (i = 0; i < n; i++) {
			memcpy(&v, &s16[i], sizeof v);
			d16[i] = sim_reduce_float_to_bf16(sim_reduce_fop(
			    sim_reduce_bf16_to_float(d16[i]),
			    sim_reduce_bf16_to_float(v), op));
		}
		break;
	}
}

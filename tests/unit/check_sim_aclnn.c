/*
 * check_sim_aclnn.c - the CANN-compatibility surface of libnpusim: aclnn
 * tensors and operators (results, device records, error codes), the
 * acl_prof state machine, HcclCommInitAll, and securec.h.
 */
#include <sys/mman.h>

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <acl/acl_prof.h>
#include <aclnnop/aclnn_add.h>
#include <aclnnop/aclnn_matmul.h>
#include <aclnnop/aclnn_mul.h>
#include <aclnnop/aclnn_relu.h>
#include <aclnnop/aclnn_sub.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>
#include <securec.h>

static char	base_prefix[64];

static void
use_prefix(const char *tag)
{
	char	p[128];

	snprintf(p, sizeof p, "%s-%s", base_prefix, tag);
	setenv("NPUSIM_SHM_PREFIX", p, 1);
}

static void
unlink_prefix(const char *tag)
{
	char	name[160];
	int	d;

	for (d = 0; d < 4; d++) {
		snprintf(name, sizeof name, "/%s-%s-dev%d-chan", base_prefix,
		    tag, d);
		shm_unlink(name);
		snprintf(name, sizeof name, "/%s-%s-dev%d-metrics",
		    base_prefix, tag, d);
		shm_unlink(name);
	}
}

/* A contiguous device tensor holding n elements copied from host. */
static aclTensor *
dev_tensor(const int64_t *dims, uint64_t nd, aclDataType dt, size_t esize,
    const void *host, void **dev)
{
	int64_t		strides[8];
	size_t		n = 1;
	uint64_t	i;

	for (i = nd; i-- > 0;) {
		strides[i] = (int64_t)n;
		n *= (size_t)dims[i];
	}
	ck_assert_int_eq(aclrtMalloc(dev, n * esize, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_SUCCESS);
	if (host != NULL)
		ck_assert_int_eq(aclrtMemcpy(*dev, n * esize, host, n * esize,
		    ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
	return (aclCreateTensor(dims, nd, dt, strides, 0, ACL_FORMAT_ND, dims,
	    nd, *dev));
}

static void
to_host(void *host, const void *dev, size_t len)
{
	ck_assert_int_eq(aclrtMemcpy(host, len, dev, len,
	    ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
}

/* IEEE half bits of small exact values, to build FLOAT16 inputs. */
static uint16_t
half_of(float f)
{
	uint16_t	sign = f < 0 ? 0x8000 : 0;
	int		e;
	float		m;

	if (f == 0)
		return (sign);
	m = frexpf(fabsf(f), &e);	/* f = m * 2^e, m in [0.5, 1) */
	return ((uint16_t)(sign | (uint16_t)((e + 14) << 10) |
	    (uint16_t)((m * 2 - 1) * 1024)));
}

START_TEST(test_tensor_lifecycle)
{
	int64_t		 dims[2] = { 2, 3 }, strides[2] = { 3, 1 };
	int64_t		 big[9];
	int64_t		 small[1] = { 5 };
	float		 one = 1;
	char		 buf[64];
	aclTensor	*t;
	aclScalar	*s;
	aclIntArray	*a;
	aclDataType	 dt;
	int		 i;

	for (i = 0; i < 9; i++)
		big[i] = 1;
	t = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND,
	    dims, 2, buf);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(aclGetDataType(t, &dt), ACLNN_SUCCESS);
	ck_assert_int_eq(dt, ACL_FLOAT);
	ck_assert_int_eq(aclDestroyTensor(t), ACLNN_SUCCESS);
	/* Destroyed, stale, foreign and NULL handles. */
	ck_assert_int_eq(aclDestroyTensor(t), ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclDestroyTensor((aclTensor *)(void *)buf),
	    ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclDestroyTensor(NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclGetDataType(t, &dt), ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclGetDataType(NULL, &dt), ACLNN_ERR_PARAM_NULLPTR);

	/* Bad shapes: too many dims, negative, no data, past storage. */
	ck_assert_ptr_null(aclCreateTensor(big, 9, ACL_FLOAT, NULL, 0,
	    ACL_FORMAT_ND, NULL, 0, buf));
	dims[0] = -1;
	ck_assert_ptr_null(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0,
	    ACL_FORMAT_ND, NULL, 0, buf));
	dims[0] = 2;
	ck_assert_ptr_null(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0,
	    ACL_FORMAT_ND, dims, 2, NULL));
	ck_assert_ptr_null(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0,
	    ACL_FORMAT_ND, small, 1, buf));
	ck_assert_ptr_null(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 1,
	    ACL_FORMAT_ND, dims, 2, buf));
	ck_assert_ptr_null(aclCreateTensor(dims, 2, (aclDataType)999, strides,
	    0, ACL_FORMAT_ND, dims, 2, buf));
	ck_assert_ptr_null(aclCreateTensor(NULL, 2, ACL_FLOAT, strides, 0,
	    ACL_FORMAT_ND, dims, 2, buf));
	/* A 0-element tensor needs no data. */
	dims[0] = 0;
	t = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND,
	    dims, 2, NULL);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(aclDestroyTensor(t), ACLNN_SUCCESS);

	s = aclCreateScalar(&one, ACL_FLOAT);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_null(aclCreateScalar(NULL, ACL_FLOAT));
	ck_assert_ptr_null(aclCreateScalar(&one, ACL_STRING));
	/* A scalar is not a tensor. */
	ck_assert_int_eq(aclDestroyTensor((aclTensor *)(void *)s),
	    ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclDestroyScalar(s), ACLNN_SUCCESS);
	ck_assert_int_eq(aclDestroyScalar(s), ACLNN_ERR_PARAM_INVALID);

	a = aclCreateIntArray(strides, 2);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_null(aclCreateIntArray(NULL, 2));
	ck_assert_int_eq(aclDestroyIntArray(a), ACLNN_SUCCESS);
	ck_assert_int_eq(aclDestroyIntArray(a), ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclnnInit(NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnFinalize(), ACLNN_SUCCESS);
}
END_TEST

/* aclnnAdd computes on the stream and leaves a KERNEL record. */
START_TEST(test_add_record)
{
	struct npusim_channel_reader	 r;
	struct npusim_record		 rec[8];
	int64_t		 d42[2] = { 4, 2 }, d2[1] = { 2 };
	float		 a[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	float		 b[2] = { 10, 20 };
	float		 out[8], alpha = 0.5f;
	void		*da, *db, *dout, *ws = NULL;
	aclTensor	*ta, *tb, *tout;
	aclScalar	*sa;
	aclOpExecutor	*ex, *ex2;
	aclrtStream	 s;
	uint64_t	 wsz = 99, lost;
	int		 i, n = 0, tries;


	use_prefix("add");
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(npusim_channel_open(0, &r), 0);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ta = dev_tensor(d42, 2, ACL_FLOAT, 4, a, &da);
	tb = dev_tensor(d2, 1, ACL_FLOAT, 4, b, &db);	/* broadcast */
	tout = dev_tensor(d42, 2, ACL_FLOAT, 4, NULL, &dout);
	sa = aclCreateScalar(&alpha, ACL_FLOAT);
	ck_assert(ta && tb && tout && sa);

	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, tb, sa, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_uint_eq(wsz, 0);
	/* The executor keeps what it needs: the handles may go now. */
	ck_assert_int_eq(aclDestroyTensor(ta), ACLNN_SUCCESS);
	ck_assert_int_eq(aclDestroyTensor(tb), ACLNN_SUCCESS);
	ck_assert_int_eq(aclDestroyScalar(sa), ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnAdd(ws, wsz, ex, s), ACLNN_SUCCESS);
	/* Single use. */
	ck_assert_int_eq(aclnnAdd(ws, wsz, ex, s), ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclrtSynchronizeStream(s), ACL_SUCCESS);
	to_host(out, dout, sizeof out);
	for (i = 0; i < 8; i++)
		ck_assert_float_eq_tol(out[i], a[i] + alpha * b[i % 2], 1e-6);

	/* The channel also has the two input copies: find the kernel. */
	for (tries = 0; tries < 1000; tries++) {
		n = npusim_channel_read(&r, rec, 1, &lost);
		if (n == 1 && rec[0].kind == NPUSIM_TASK_KERNEL)
			break;
		if (n == 0)
			usleep(1000);
	}
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(rec[0].kind, NPUSIM_TASK_KERNEL);
	ck_assert_str_eq(rec[0].name, "aclnnAdd_AddAiCore_Add");
	ck_assert_int_eq(rec[0].kernel_type, NPUSIM_KERNEL_AI_VECTOR);
	/* Cost from the shapes: 8 multiply-adds, 4 * (8 + 2 + 8) bytes. */
	ck_assert_uint_eq(rec[0].flops, 16);
	ck_assert_uint_eq(rec[0].bytes, 72);
	ck_assert_uint_ge(rec[0].block_dim, 1);
	ck_assert_uint_gt(rec[0].end_ns, rec[0].start_ns);
	npusim_channel_close(&r);

	/* A stream that is not one: the runtime refuses the launch. */
	ta = dev_tensor(d42, 2, ACL_FLOAT, 4, a, &da);
	sa = aclCreateScalar(&alpha, ACL_FLOAT);
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, ta, sa, tout, &wsz, &ex2),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnAdd(NULL, 0, ex2, (aclrtStream)(void *)rec),
	    ACLNN_ERR_RUNTIME_ERROR);
	ck_assert_int_eq(aclrtDestroyStream(s), ACL_SUCCESS);
	unlink_prefix("add");
}
END_TEST

START_TEST(test_ops)
{
	int64_t		 d4[1] = { 4 }, d23[2] = { 2, 3 };
	int64_t		 d32[2] = { 3, 2 };
	int64_t		 d22[2] = { 2, 2 };
	int32_t		 ia[4] = { 5, -7, 9, 100 };
	int32_t		 ib[4] = { 1, 2, 3, 4 };
	int32_t		 iout[4];
	uint16_t	 ha[4], hout[4];
	float		 ma[6] = { 1, 2, 3, 4, 5, 6 };
	float		 mb[6] = { 1, 0, 0, 1, 1, 1 };
	float		 mout[4], two = 2, three = 3, frac = 0.5f;
	void		*da, *db, *dout, *ws;
	aclTensor	*ta, *tb, *tout, *th, *thout, *tma, *tmb, *tmo, *tmh;
	aclScalar	*s2, *s3, *sfrac;
	aclOpExecutor	*ex;
	uint64_t	 wsz;
	int		 i;

	use_prefix("ops");
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ta = dev_tensor(d4, 1, ACL_INT32, 4, ia, &da);
	tb = dev_tensor(d4, 1, ACL_INT32, 4, ib, &db);
	tout = dev_tensor(d4, 1, ACL_INT32, 4, NULL, &dout);
	s2 = aclCreateScalar(&two, ACL_FLOAT);
	s3 = aclCreateScalar(&three, ACL_FLOAT);
	sfrac = aclCreateScalar(&frac, ACL_FLOAT);

	/* Sub: a - 2b. */
	ck_assert_int_eq(aclnnSubGetWorkspaceSize(ta, tb, s2, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnSub(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	to_host(iout, dout, sizeof iout);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(iout[i], ia[i] - 2 * ib[i]);
	/* An integer output cannot take alpha 0.5. */
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, tb, sfrac, tout, &wsz,
	    &ex), ACLNN_ERR_PARAM_INVALID);
	/* Mul. */
	ck_assert_int_eq(aclnnMulGetWorkspaceSize(ta, tb, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnMul(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	/* Relu, in place on out (same stream: ordered after Mul). */
	ck_assert_int_eq(aclnnReluGetWorkspaceSize(ta, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnRelu(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	to_host(iout, dout, sizeof iout);
	ck_assert_int_eq(iout[0], 5);
	ck_assert_int_eq(iout[1], 0);
	ck_assert_int_eq(iout[3], 100);
	/* Adds then InplaceAdd: (a + 3*2) then += 2 * b. */
	ck_assert_int_eq(aclnnAddsGetWorkspaceSize(ta, s2, s3, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnAdds(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnInplaceAddGetWorkspaceSize(tout, tb, s2, &wsz,
	    &ex), ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnInplaceAdd(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	to_host(iout, dout, sizeof iout);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(iout[i], ia[i] + 6 + 2 * ib[i]);

	/* FLOAT16: 1.5 + 2 * 0.25 = 2. */
	for (i = 0; i < 4; i++)
		ha[i] = half_of(i == 0 ? 1.5f : 0.25f);
	th = dev_tensor(d4, 1, ACL_FLOAT16, 2, ha, &da);
	thout = dev_tensor(d4, 1, ACL_FLOAT16, 2, NULL, &dout);
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(th, th, s2, thout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnAdd(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	to_host(hout, dout, sizeof hout);
	ck_assert_uint_eq(hout[0], half_of(4.5f));
	ck_assert_uint_eq(hout[1], half_of(0.75f));

	/* Conversions on store: FLOAT in, FLOAT16 and BF16 out, rounded to
	 * nearest even; overflow to inf, subnormals kept. */
	{
		float		 fin[4] = { 1.0f + 1.0f / 3, 120000, 0x1p-20f, -2 };
		float		 zero = 0;
		uint16_t	 h[4];
		aclTensor	*tf, *th16, *tb16;
		aclScalar	*s0 = aclCreateScalar(&zero, ACL_FLOAT);
		void		*dh, *db16;

		tf = dev_tensor(d4, 1, ACL_FLOAT, 4, fin, &da);
		th16 = dev_tensor(d4, 1, ACL_FLOAT16, 2, NULL, &dh);
		tb16 = dev_tensor(d4, 1, ACL_BF16, 2, NULL, &db16);
		ck_assert_int_eq(aclnnAddsGetWorkspaceSize(tf, s0, s2, th16,
		    &wsz, &ex), ACLNN_SUCCESS);
		ck_assert_int_eq(aclnnAdds(NULL, 0, ex, NULL), ACLNN_SUCCESS);
		ck_assert_int_eq(aclnnAddsGetWorkspaceSize(tf, s0, s2, tb16,
		    &wsz, &ex), ACLNN_SUCCESS);
		ck_assert_int_eq(aclnnAdds(NULL, 0, ex, NULL), ACLNN_SUCCESS);
		ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
		to_host(h, dh, sizeof h);
		ck_assert_uint_eq(h[0], 0x3d55);
		ck_assert_uint_eq(h[1], 0x7c00);
		ck_assert_uint_eq(h[2], 0x0010);
		ck_assert_uint_eq(h[3], 0xc000);
		to_host(h, db16, sizeof h);
		ck_assert_uint_eq(h[0], 0x3fab);
		ck_assert_uint_eq(h[3], 0xc000);
	}

	/* Matmul (2,3) x (3,2), FLOAT: no workspace. */
	tma = dev_tensor(d23, 2, ACL_FLOAT, 4, ma, &da);
	tmb = dev_tensor(d32, 2, ACL_FLOAT, 4, mb, &db);
	tmo = dev_tensor(d22, 2, ACL_FLOAT, 4, NULL, &dout);
	ck_assert_int_eq(aclnnMatmulGetWorkspaceSize(tma, tmb, tmo, 0, &wsz,
	    &ex), ACLNN_SUCCESS);
	ck_assert_uint_eq(wsz, 0);
	ck_assert_int_eq(aclnnMatmul(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	to_host(mout, dout, sizeof mout);
	/* [1 2 3; 4 5 6] x [1 0; 0 1; 1 1] */
	ck_assert_float_eq(mout[0], 4);
	ck_assert_float_eq(mout[1], 5);
	ck_assert_float_eq(mout[2], 10);
	ck_assert_float_eq(mout[3], 11);
	/* Shapes that do not chain; inner dims swapped. */
	ck_assert_int_eq(aclnnMatmulGetWorkspaceSize(tma, tma, tmo, 0, &wsz,
	    &ex), ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclnnMatmulGetWorkspaceSize(ta, tmb, tmo, 0, &wsz,
	    &ex), ACLNN_ERR_PARAM_INVALID);	/* 1-D INT32 */
	ck_assert_int_eq(aclnnMatmulGetWorkspaceSize(tma, tmb, tmo, 9, &wsz,
	    &ex), ACLNN_ERR_PARAM_INVALID);	/* cubeMathType */

	/* FLOAT16 output: needs the float accumulator workspace. */
	tmh = dev_tensor(d22, 2, ACL_FLOAT16, 2, NULL, &dout);
	ck_assert_int_eq(aclnnMatmulGetWorkspaceSize(tma, tmb, tmh, 1, &wsz,
	    &ex), ACLNN_SUCCESS);
	ck_assert_uint_eq(wsz, 4 * sizeof(float));
	ck_assert_int_eq(aclnnMatmul(NULL, 0, ex, NULL),
	    ACLNN_ERR_PARAM_NULLPTR);
	ck_assert_int_eq(aclnnMatmulGetWorkspaceSize(tma, tmb, tmh, 1, &wsz,
	    &ex), ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtMalloc(&ws, wsz, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_SUCCESS);
	ck_assert_int_eq(aclnnMatmul(ws, wsz - 1, ex, NULL),
	    ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclnnMatmulGetWorkspaceSize(tma, tmb, tmh, 1, &wsz,
	    &ex), ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnMatmul(ws, wsz, ex, NULL), ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	to_host(hout, dout, 4 * sizeof hout[0]);
	ck_assert_uint_eq(hout[0], half_of(4));
	ck_assert_uint_eq(hout[3], half_of(11));
	unlink_prefix("ops");
}
END_TEST

START_TEST(test_errors)
{
	int64_t		 d4[1] = { 4 }, d3[1] = { 3 };
	int64_t		 strides[1] = { 1 };
	float		 f[4] = { 1, 2, 3, 4 }, one = 1;
	static float	 host[4];
	void		*da, *db, *dout;
	aclTensor	*ta, *t3, *tout, *thost;
	aclScalar	*s1;
	aclOpExecutor	*ex;
	uint64_t	 wsz;

	use_prefix("err");
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ta = dev_tensor(d4, 1, ACL_FLOAT, 4, f, &da);
	t3 = dev_tensor(d3, 1, ACL_FLOAT, 4, f, &db);
	tout = dev_tensor(d4, 1, ACL_FLOAT, 4, NULL, &dout);
	s1 = aclCreateScalar(&one, ACL_FLOAT);

	ck_assert_int_eq(aclnnAddGetWorkspaceSize(NULL, ta, s1, tout, &wsz,
	    &ex), ACLNN_ERR_PARAM_NULLPTR);
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, ta, NULL, tout, &wsz,
	    &ex), ACLNN_ERR_PARAM_NULLPTR);
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, ta, s1, tout, NULL, &ex),
	    ACLNN_ERR_PARAM_NULLPTR);
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, ta, s1, tout, &wsz, NULL),
	    ACLNN_ERR_PARAM_NULLPTR);
	ck_assert_int_eq(aclnnAdd(NULL, 0, NULL, NULL),
	    ACLNN_ERR_PARAM_NULLPTR);
	ck_assert_int_eq(aclnnAdd(NULL, 0, (aclOpExecutor *)(void *)f, NULL),
	    ACLNN_ERR_PARAM_INVALID);
	/* 4 and 3 do not broadcast; out of the wrong shape. */
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, t3, s1, tout, &wsz, &ex),
	    ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclnnAddGetWorkspaceSize(ta, ta, s1, t3, &wsz, &ex),
	    ACLNN_ERR_PARAM_INVALID);
	/* A tensor handle that was destroyed. */
	ck_assert_int_eq(aclDestroyTensor(t3), ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnMulGetWorkspaceSize(ta, t3, tout, &wsz, &ex),
	    ACLNN_ERR_PARAM_INVALID);
	/* Another operator's executor is refused, and stays usable. */
	ck_assert_int_eq(aclnnMulGetWorkspaceSize(ta, ta, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnAdd(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclnnMul(NULL, 0, ex, NULL), ACLNN_SUCCESS);
	/* Data outside device memory: refused at launch, never touched. */
	thost = aclCreateTensor(d4, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND,
	    d4, 1, host);
	ck_assert_ptr_nonnull(thost);
	ck_assert_int_eq(aclnnMulGetWorkspaceSize(thost, ta, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclnnMul(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID);
	/* Freed device memory too. */
	ck_assert_int_eq(aclnnMulGetWorkspaceSize(ta, ta, tout, &wsz, &ex),
	    ACLNN_SUCCESS);
	ck_assert_int_eq(aclrtFree(dout), ACL_SUCCESS);
	ck_assert_int_eq(aclnnMul(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID);
	ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
	unlink_prefix("err");
}
END_TEST

START_TEST(test_prof)
{
	uint32_t	 devs[2] = { 0, 1 }, bad[2] = { 0, 0 }, rid;
	aclprofConfig	*c, *c2;
	void		*st;
	const char	*path = "/tmp/prof";

	ck_assert_ptr_null(aclprofCreateConfig(NULL, 1, ACL_AICORE_NONE, NULL,
	    ACL_PROF_TASK_TIME));
	ck_assert_ptr_null(aclprofCreateConfig(bad, 2, ACL_AICORE_NONE, NULL,
	    ACL_PROF_TASK_TIME));
	ck_assert_ptr_null(aclprofCreateConfig(devs, 1,
	    (aclprofAicoreMetrics)77, NULL, ACL_PROF_TASK_TIME));
	ck_assert_ptr_null(aclprofCreateConfig(devs, 1, ACL_AICORE_NONE, NULL,
	    1ULL << 40));
	c = aclprofCreateConfig(devs, 2, ACL_AICORE_PIPE_UTILIZATION, NULL,
	    ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_HCCL_TRACE);
	c2 = aclprofCreateConfig(devs + 1, 1, ACL_AICORE_NONE, NULL,
	    ACL_PROF_TASK_TIME_L0);
	ck_assert(c != NULL && c2 != NULL);
	ck_assert_int_eq(aclprofStart(c), ACL_ERROR_PROF_NOT_RUN);
	ck_assert_int_eq(aclprofFinalize(), ACL_ERROR_PROF_NOT_RUN);
	ck_assert_int_eq(aclprofInit(NULL, 4), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclprofInit(path, 0), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclprofInit(path, strlen(path)), ACL_SUCCESS);
	ck_assert_int_eq(aclprofInit(path, strlen(path)),
	    ACL_ERROR_REPEAT_INITIALIZE);
	ck_assert_int_eq(aclprofStop(c), ACL_ERROR_PROF_NOT_RUN);
	ck_assert_int_eq(aclprofStart(c), ACL_SUCCESS);
	ck_assert_int_eq(aclprofStart(c), ACL_ERROR_PROF_ALREADY_RUN);
	/* Device 1 is already profiled by c. */
	ck_assert_int_eq(aclprofStart(c2), ACL_ERROR_PROF_ALREADY_RUN);
	ck_assert_int_eq(aclprofStop(c), ACL_SUCCESS);
	ck_assert_int_eq(aclprofStart(c2), ACL_SUCCESS);
	ck_assert_int_eq(aclprofStop(c2), ACL_SUCCESS);
	ck_assert_int_eq(aclprofStart(NULL), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclprofDestroyConfig(c), ACL_SUCCESS);
	ck_assert_int_eq(aclprofDestroyConfig(c), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclprofStart(c), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclprofDestroyConfig(c2), ACL_SUCCESS);

	st = aclprofCreateStamp();
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(aclprofSetStampTraceMessage(st, "step", 4),
	    ACL_SUCCESS);
	ck_assert_int_eq(aclprofMark(st), ACL_SUCCESS);
	ck_assert_int_eq(aclprofRangeStart(st, &rid), ACL_SUCCESS);
	ck_assert_int_eq(aclprofRangeStop(rid), ACL_SUCCESS);
	aclprofDestroyStamp(st);
	ck_assert_int_eq(aclprofMark(st), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclprofFinalize(), ACL_SUCCESS);
}
END_TEST

struct rank_arg {
	HcclComm	comm;
	int32_t		dev;
	float		got[4];
	int		rc;
};

static void *
rank_main(void *p)
{
	struct rank_arg	*a = p;
	aclrtStream	 s;
	float		 v[4];
	void		*send, *recv;
	uint32_t	 rank, size;
	int		 i;

	a->rc = -1;
	if (aclrtSetDevice(a->dev) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    HcclGetRankId(a->comm, &rank) != HCCL_SUCCESS ||
	    HcclGetRankSize(a->comm, &size) != HCCL_SUCCESS)
		return (NULL);
	for (i = 0; i < 4; i++)
		v[i] = (float)(rank * 10 + (uint32_t)i);
	if (aclrtMalloc(&send, sizeof v, ACL_MEM_MALLOC_HUGE_FIRST) != 0 ||
	    aclrtMalloc(&recv, sizeof v, ACL_MEM_MALLOC_HUGE_FIRST) != 0 ||
	    aclrtMemcpy(send, sizeof v, v, sizeof v,
	    ACL_MEMCPY_HOST_TO_DEVICE) != 0 ||
	    HcclAllReduce(send, recv, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
	    a->comm, s) != HCCL_SUCCESS ||
	    aclrtSynchronizeStream(s) != ACL_SUCCESS ||
	    aclrtMemcpy(a->got, sizeof a->got, recv, sizeof v,
	    ACL_MEMCPY_DEVICE_TO_HOST) != 0)
		return (NULL);
	a->rc = (int)rank;
	return (NULL);
}

START_TEST(test_comm_init_all)
{
	int32_t		 devs[4] = { 3, 1, 0, 2 }, dup[2] = { 1, 1 };
	int32_t		 far[1] = { 9 };
	HcclComm	 comms[4], keep = (HcclComm)(void *)devs;
	struct rank_arg	 args[4];
	pthread_t	 th[4];
	int		 i, j;

	use_prefix("hcl");
	ck_assert_int_eq(HcclCommInitAll(4, NULL, comms), HCCL_E_PTR);
	ck_assert_int_eq(HcclCommInitAll(4, devs, NULL), HCCL_E_PTR);
	ck_assert_int_eq(HcclCommInitAll(0, devs, comms), HCCL_E_PARA);
	comms[0] = keep;
	ck_assert_int_eq(HcclCommInitAll(2, dup, comms), HCCL_E_PARA);
	ck_assert_int_eq(HcclCommInitAll(1, far, comms), HCCL_E_PARA);
	ck_assert_ptr_eq(comms[0], keep);	/* untouched on failure */

	ck_assert_int_eq(HcclCommInitAll(4, devs, comms), HCCL_SUCCESS);
	for (i = 0; i < 4; i++) {
		args[i].comm = comms[i];
		args[i].dev = devs[i];
		ck_assert_int_eq(pthread_create(&th[i], NULL, rank_main,
		    &args[i]), 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(args[i].rc, i);	/* comms[i] is rank i */
		for (j = 0; j < 4; j++)
			ck_assert_float_eq(args[i].got[j],
			    (float)(60 + 4 * j));	/* sum over ranks */
		ck_assert_int_eq(HcclCommDestroy(comms[i]), HCCL_SUCCESS);
	}
	unlink_prefix("hcl");
}
END_TEST

START_TEST(test_securec)
{
	char	buf[8], big[32];
	int	i;

	/* memset_s */
	ck_assert_int_eq(memset_s(buf, sizeof buf, 'a', 4), EOK);
	ck_assert_int_eq(buf[3], 'a');
	ck_assert_int_eq(memset_s(buf, sizeof buf, 'b', 9), ERANGE_AND_RESET);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(buf[i], 'b');	/* filled up to destMax */
	ck_assert_int_eq(memset_s(buf, 0, 0, 0), ERANGE);
	ck_assert_int_eq(memset_s(NULL, 4, 0, 1), EINVAL);
	ck_assert_int_eq(memset_s(buf, SECUREC_MEM_MAX_LEN + 1, 0, 1), ERANGE);

	/* memcpy_s: too small, NULL source, overlap, all reset to 0. */
	memset(buf, 'x', sizeof buf);
	ck_assert_int_eq(memcpy_s(buf, sizeof buf, "0123456789", 9),
	    ERANGE_AND_RESET);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(buf[i], 0);
	memset(buf, 'x', sizeof buf);
	ck_assert_int_eq(memcpy_s(buf, sizeof buf, NULL, 1), EINVAL_AND_RESET);
	ck_assert_int_eq(buf[0], 0);
	memcpy(big, "abcdefgh", 8);
	ck_assert_int_eq(memcpy_s(big + 2, 8, big, 4), EOVERLAP_AND_RESET);
	ck_assert_int_eq(big[2], 0);
	ck_assert_int_eq(big[0], 'a');	/* outside dest: untouched */
	ck_assert_int_eq(memcpy_s(buf, sizeof buf, "abc", 3), EOK);
	ck_assert_int_eq(memcmp(buf, "abc", 3), 0);
	ck_assert_int_eq(memcpy_s(buf, sizeof buf, buf, 3), EOK);
	ck_assert_int_eq(memcpy_s(NULL, 1, "a", 1), EINVAL);
	/* memmove_s allows the overlap. */
	memcpy(big, "abcdefgh", 8);
	ck_assert_int_eq(memmove_s(big + 2, 8, big, 4), EOK);
	ck_assert_int_eq(memcmp(big, "ababcdgh", 8), 0);

	/* strcpy_s / strncpy_s */
	ck_assert_int_eq(strcpy_s(buf, sizeof buf, "1234567"), EOK);
	ck_assert_str_eq(buf, "1234567");
	ck_assert_int_eq(strcpy_s(buf, sizeof buf, "12345678"),
	    ERANGE_AND_RESET);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(strcpy_s(buf, sizeof buf, NULL), EINVAL_AND_RESET);
	strcpy(big, "abcdef");
	ck_assert_int_eq(strcpy_s(big + 1, 16, big), EOVERLAP_AND_RESET);
	ck_assert_int_eq(strncpy_s(buf, sizeof buf, "abcdefghij", 3), EOK);
	ck_assert_str_eq(buf, "abc");
	ck_assert_int_eq(strncpy_s(buf, sizeof buf, "abcdefghij", 8),
	    ERANGE_AND_RESET);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(strncpy_s(buf, sizeof buf, "ab", 100), EOK);
	ck_assert_str_eq(buf, "ab");

	/* strcat_s / strncat_s */
	ck_assert_int_eq(strcat_s(buf, sizeof buf, "cde"), EOK);
	ck_assert_str_eq(buf, "abcde");
	ck_assert_int_eq(strcat_s(buf, sizeof buf, "fgh"), ERANGE_AND_RESET);
	ck_assert_str_eq(buf, "");
	memset(buf, 'z', sizeof buf);	/* not terminated */
	ck_assert_int_eq(strcat_s(buf, sizeof buf, "a"), EINVAL_AND_RESET);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(strncat_s(buf, sizeof buf, "abcdefgh", 7), EOK);
	ck_assert_str_eq(buf, "abcdefg");
	ck_assert_int_eq(strncat_s(buf, sizeof buf, "x", 0), EOK);
	ck_assert_int_eq(strncat_s(buf, sizeof buf, "x", 1), ERANGE_AND_RESET);

	/* printf family: length, or -1 and an empty string. */
	ck_assert_int_eq(sprintf_s(buf, sizeof buf, "%d-%s", 42, "ab"), 5);
	ck_assert_str_eq(buf, "42-ab");
	ck_assert_int_eq(sprintf_s(buf, sizeof buf, "%s", "12345678"), -1);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(sprintf_s(NULL, 4, "x"), -1);
	ck_assert_int_eq(snprintf_s(buf, sizeof buf, 3, "%s", "abcdef"), -1);
	ck_assert_str_eq(buf, "abc");	/* truncated to count, kept */
	ck_assert_int_eq(snprintf_s(buf, sizeof buf, 7, "%s", "abc"), 3);
	ck_assert_int_eq(snprintf_s(buf, sizeof buf, sizeof buf, "%s",
	    "abcdefgh"), -1);
	ck_assert_str_eq(buf, "");
}
END_TEST

static Suite *
sim_aclnn_suite(void)
{
	Suite	*s = suite_create("sim_aclnn");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tensor_lifecycle);
	tcase_add_test(tc, test_add_record);
	tcase_add_test(tc, test_ops);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_prof);
	tcase_add_test(tc, test_comm_init_all);
	tcase_add_test(tc, test_securec);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	snprintf(base_prefix, sizeof base_prefix, "npusimtest-nn-%d",
	    (int)getpid());
	setenv("NPUSIM_DEVICES", "4", 1);
	unsetenv("NPUSIM_TIME_SCALE");
	unsetenv("NPUSIM_SLOW_RANK");
	sr = srunner_create(sim_aclnn_suite());
	/* Every test needs a fresh process: the library reads env once. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? 0 : 1);
}

/*
 * sim-aclnn.c - the aclnn operator API: tensors, scalars, int arrays,
 * executors, and a few operators (Add, Adds, InplaceAdd, Sub, Mul, Relu,
 * Matmul).
 *
 * The first phase checks the arguments and freezes them into an executor;
 * the second launches one kernel per call through the public
 * aclrtLaunchKernel, the one place the library calls its own entry point,
 * so that an interposer sees the launch as it would see the runtime call
 * below a real aclnn operator.  The frozen arguments travel as the
 * kernel's launch arguments: sim-kernel.c takes the cost from them and
 * the stream runs the body on them when the task executes, so the result
 * is in device memory when the stream is synchronized.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <aclnn/aclnn_base.h>
#include <aclnnop/aclnn_add.h>
#include <aclnnop/aclnn_matmul.h>
#include <aclnnop/aclnn_mul.h>
#include <aclnnop/aclnn_relu.h>
#include <aclnnop/aclnn_sub.h>

#include "sim.h"

#define NN_MAX_DIMS	ACLNN_MAX_DIMS
#define NN_ARGS_MAGIC	0x4e4e4152U
/* Above this many element operations the kernel is timed but its body
 * skipped: the host would spend longer computing than the device. */
#define NN_COMPUTE_MAX	(1ULL << 24)

struct sim_aclnn_tensor {
	struct sim_obj	 obj;
	int		 dtype;
	int		 format;
	uint32_t	 ndim;
	int64_t		 dims[NN_MAX_DIMS];
	int64_t		 strides[NN_MAX_DIMS];
	int64_t		 offset;
	char		*data;
};

struct sim_aclnn_scalar {
	struct sim_obj	 obj;
	int		 dtype;
	double		 v;
};

struct sim_aclnn_intarray {
	struct sim_obj	 obj;
	uint64_t	 n;
	int64_t		 v[];
};

/* A tensor as a kernel sees it: the data pointer already offset. */
struct sim_aclnn_view {
	char		*data;
	int32_t		 dtype;
	uint32_t	 ndim;
	int64_t		 dims[NN_MAX_DIMS];
	int64_t		 strides[NN_MAX_DIMS];
};

enum sim_aclnn_op {
	NN_ADD,		/* out = a + alpha * b (b may be a scalar) */
	NN_MUL,		/* out = a * b */
	NN_RELU,	/* out = max(a, 0) */
	NN_MATMUL,	/* out = a x b */
};

enum sim_aclnn_kernel {
	NN_K_ADD, NN_K_ADDS, NN_K_INPLACE_ADD, NN_K_SUB, NN_K_MUL, NN_K_RELU,
	NN_K_MATMUL, NN_K_COUNT
};

/* The launch arguments of every aclnn kernel. */
struct sim_aclnn_args {
	uint32_t	 magic;
	int32_t		 op;		/* enum sim_aclnn_op */
	uint32_t	 nin;		/* tensor inputs: 1 or 2 */
	int32_t		 compute;	/* run the body */
	struct sim_aclnn_view in[2], out;
	double		 alpha;
	double		 scalar;	/* NN_ADD with nin == 1: b */
	void		*workspace;	/* NN_MATMUL, half outputs */
	double		 flops;
	double		 bytes;
};

struct sim_aclnn_executor {
	struct sim_obj	 obj;
	int		 kernel;	/* enum sim_aclnn_kernel */
	uint64_t	 ws_need;
	uint32_t	 block_dim;
	struct sim_aclnn_args args;
};

static const struct {
	const char	*name;
	int		 type;
} sim_aclnn_kernels[NN_K_COUNT] = {
	[NN_K_ADD] = { "aclnnAdd_AddAiCore_Add", NPUSIM_KERNEL_AI_VECTOR },
	[NN_K_ADDS] = { "aclnnAdds_AddAiCore_Add", NPUSIM_KERNEL_AI_VECTOR },
	[NN_K_INPLACE_ADD] = { "aclnnInplaceAdd_AddAiCore_Add",
	    NPUSIM_KERNEL_AI_VECTOR },
	[NN_K_SUB] = { "aclnnSub_SubAiCore_Sub", NPUSIM_KERNEL_AI_VECTOR },
	[NN_K_MUL] = { "aclnnMul_MulAiCore_Mul", NPUSIM_KERNEL_AI_VECTOR },
	[NN_K_RELU] = { "aclnnRelu_ReluAiCore_Relu", NPUSIM_KERNEL_AI_VECTOR },
	[NN_K_MATMUL] = { "aclnnMatmul_MatMulV3Common_MatMulV3",
	    NPUSIM_KERNEL_AI_CORE },
};

static aclrtFuncHandle	 sim_aclnn_handles[NN_K_COUNT];
static pthread_once_t	 sim_aclnn_once = PTHREAD_ONCE_INIT;

/* Element size of a type the operators compute on, 0 otherwise. */
static size_t
sim_aclnn_esize(int dt)
{
	switch (dt) {
	case ACL_INT8: case ACL_UINT8: case ACL_BOOL:
		return (1);
	case ACL_FLOAT16: case ACL_BF16: case ACL_INT16:
		return (2);
	case ACL_FLOAT: case ACL_INT32:
		return (4);
	case ACL_DOUBLE: case ACL_INT64:
		return (8);
	}
	return (0);
}

static int
sim_aclnn_is_float(int dt)
{
	return (dt == ACL_FLOAT || dt == ACL_FLOAT16 || dt == ACL_BF16 ||
	    dt == ACL_DOUBLE);
}

static float
sim_aclnn_half_to_float(uint16_t h)
{
	int	e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float	v;

	if (e == 0)
		v = ldexpf((float)m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf((float)(m | 0x400), e - 25);
	return ((h & 0x8000) ? -v : v);
}

/* Shift m right by n bits, rounding to nearest even. */
static uint32_t
sim_aclnn_round_shift(uint32_t m, int n)
{
	uint32_t	r = m >> n, rest = m & ((1U << n) - 1);
	uint32_t	half = 1U << (n - 1);

	return (rest > half || (rest == half && (r & 1)) ? r + 1 : r);
}

static uint16_t
sim_aclnn_float_to_half(float f)
{
	uint32_t	x, sign, mant;
	int		e;

	memcpy(&x, &f, sizeof x);
	sign = (x >> 16) & 0x8000;
	if (isnan(f))
		return ((uint16_t)(sign | 0x7e00));
	e = (int)((x >> 23) & 0xff) - 127 + 15;
	mant = x & 0x7fffff;
	if (e >= 31)
		return ((uint16_t)(sign | 0x7c00));
	if (e <= 0) {
		/* Subnormal (or zero): the hidden bit shifts in. */
		if (e < -10)
			return ((uint16_t)sign);
		return ((uint16_t)(sign | sim_aclnn_round_shift(mant | 0x800000,
		    14 - e)));
	}
	/* A carry out of the mantissa correctly bumps the exponent. */
	return ((uint16_t)(sign | (((uint32_t)e << 10) +
	    sim_aclnn_round_shift(mant, 13))));
}

static double
sim_aclnn_load(const char *p, int dt)
{
	union {
		float f; double d; int8_t i8; int16_t i16; int32_t i32;
		int64_t i64; uint8_t u8; uint16_t u16;
	} u;

	memcpy(&u, p, sim_aclnn_esize(dt));
	switch (dt) {
	case ACL_FLOAT:		return (u.f);
	case ACL_DOUBLE:	return (u.d);
	case ACL_FLOAT16:	return (sim_aclnn_half_to_float(u.u16));
	case ACL_BF16:		return (sim_reduce_bf16_to_float(u.u16));
	case ACL_INT8:		return (u.i8);
	case ACL_INT16:		return (u.i16);
	case ACL_INT32:		return (u.i32);
	case ACL_INT64:		return ((double)u.i64);
	case ACL_UINT8:		return (u.u8);
	case ACL_BOOL:		return (u.u8 != 0);
	}
	return (0);
}

/* Integers truncate toward zero and saturate, as a cast on the device. */
static double
sim_aclnn_clamp(double v, double lo, double hi)
{
	if (isnan(v))
		return (0);
	v = trunc(v);
	return (v < lo ? lo : v > hi ? hi : v);
}

static void
sim_aclnn_store(char *p, int dt, double v)
{
	union {
		float f; double d; int8_t i8; int16_t i16; int32_t i32;
		int64_t i64; uint8_t u8; uint16_t u16;
	} u;

	switch (dt) {
	case ACL_FLOAT:		u.f = (float)v; break;
	case ACL_DOUBLE:	u.d = v; break;
	case ACL_FLOAT16:
		u.u16 = sim_aclnn_float_to_half((float)v);
		break;
	case ACL_BF16:
		u.u16 = sim_reduce_float_to_bf16((float)v);
		break;
	case ACL_INT8:
		u.i8 = (int8_t)sim_aclnn_clamp(v, -128, 127);
		break;
	case ACL_INT16:
		u.i16 = (int16_t)sim_aclnn_clamp(v, -32768, 32767);
		break;
	case ACL_INT32:
		u.i32 = (int32_t)sim_aclnn_clamp(v, -2147483648.0,
		    2147483647.0);
		break;
	case ACL_INT64:
		u.i64 = (int64_t)sim_aclnn_clamp(v, -9223372036854775808.0,
		    9223372036854774784.0);
		break;
	case ACL_UINT8:
		u.u8 = (uint8_t)sim_aclnn_clamp(v, 0, 255);
		break;
	case ACL_BOOL:	u.u8 = v != 0; break;
	default:
		return;
	}
	memcpy(p, &u, sim_aclnn_esize(dt));
}

static uint64_t
sim_aclnn_numel(const struct sim_aclnn_view *v)
{
	uint64_t	n = 1;
	uint32_t	i;

	for (i = 0; i < v->ndim; i++)
		n *= (uint64_t)v->dims[i];
	return (n);
}

/* Bytes from the first to one past the last element the view reaches. */
static uint64_t
sim_aclnn_span(const struct sim_aclnn_view *v)
{
	uint64_t	last = 0;
	uint32_t	i;

	if (sim_aclnn_numel(v) == 0)
		return (0);
	for (i = 0; i < v->ndim; i++)
		last += (uint64_t)(v->dims[i] - 1) * (uint64_t)v->strides[i];
	return ((last + 1) * sim_aclnn_esize(v->dtype));
}

/* Offset in elements of in at out's multi-index idx (broadcast). */
static int64_t
sim_aclnn_offset(const struct sim_aclnn_view *in, const int64_t *idx,
    uint32_t n)
{
	int64_t		off = 0;
	uint32_t	j, shift = n - in->ndim;

	for (j = 0; j < in->ndim; j++)
		if (in->dims[j] != 1)
			off += idx[j + shift] * in->strides[j];
	return (off);
}

static void
sim_aclnn_run_elementwise(const struct sim_aclnn_args *a)
{
	const struct sim_aclnn_view *o = &a->out;
	int64_t		 idx[NN_MAX_DIMS] = { 0 };
	uint64_t	 i, n = sim_aclnn_numel(o);
	double		 x, y, r;
	size_t		 es[2] = { 0, 0 }, eo = sim_aclnn_esize(o->dtype);
	uint32_t	 k, d;

	for (k = 0; k < a->nin; k++)
		es[k] = sim_aclnn_esize(a->in[k].dtype);
	for (i = 0; i < n; i++) {
		x = sim_aclnn_load(a->in[0].data + sim_aclnn_offset(&a->in[0],
		    idx, o->ndim) * (int64_t)es[0], a->in[0].dtype);
		y = a->nin > 1 ? sim_aclnn_load(a->in[1].data +
		    sim_aclnn_offset(&a->in[1], idx, o->ndim) *
		    (int64_t)es[1], a->in[1].dtype) : a->scalar;
		switch (a->op) {
		case NN_ADD:	r = x + a->alpha * y; break;
		case NN_MUL:	r = x * y; break;
		case NN_RELU:	r = x > 0 ? x : 0; break;
		default:	r = 0; break;
		}
		sim_aclnn_store(o->data + sim_aclnn_offset(o, idx, o->ndim) *
		    (int64_t)eo, o->dtype, r);
		/* Next multi-index, last dimension fastest. */
		for (d = o->ndim; d-- > 0;) {
			if (++idx[d] < o->dims[d])
				break;
			idx[d] = 0;
		}
	}
}

/* (.., M, K) x (.., K, N): a batch dimension of 1 is broadcast. */
static void
sim_aclnn_run_matmul(const struct sim_aclnn_args *a)
{
	const struct sim_aclnn_view *x = &a->in[0], *w = &a->in[1];
	const struct sim_aclnn_view *o = &a->out;
	uint32_t	 bx = x->ndim - 2, bw = w->ndim - 2, bo = o->ndim - 2;
	int64_t		 B = o->ndim == 3 ? o->dims[0] : 1;
	int64_t		 M = o->dims[bo], N = o->dims[bo + 1];
	int64_t		 K = x->dims[bx + 1], b, i, j, k;
	size_t		 ex = sim_aclnn_esize(x->dtype);
	size_t		 ew = sim_aclnn_esize(w->dtype);
	size_t		 eo = sim_aclnn_esize(o->dtype);
	float		*acc = a->workspace;
	double		 s;

	for (b = 0; b < B; b++) {
		const char *xb = x->data + (x->ndim == 3 && x->dims[0] != 1 ?
		    b * x->strides[0] : 0) * (int64_t)ex;
		const char *wb = w->data + (w->ndim == 3 && w->dims[0] != 1 ?
		    b * w->strides[0] : 0) * (int64_t)ew;
		char *ob = o->data + (o->ndim == 3 ? b * o->strides[0] : 0) *
		    (int64_t)eo;

		for (i = 0; i < M; i++)
			for (j = 0; j < N; j++) {
				s = 0;
				for (k = 0; k < K; k++)
					s += sim_aclnn_load(xb + (i *
					    x->strides[bx] + k *
					    x->strides[bx + 1]) * (int64_t)ex,
					    x->dtype) *
					    sim_aclnn_load(wb + (k *
					    w->strides[bw] + j *
					    w->strides[bw + 1]) * (int64_t)ew,
					    w->dtype);
				/* Half outputs go through the float
				 * accumulator in the workspace. */
				if (acc != NULL) {
					acc[(b * M + i) * N + j] = (float)s;
					s = acc[(b * M + i) * N + j];
				}
				sim_aclnn_store(ob + (i * o->strides[bo] + j *
				    o->strides[bo + 1]) * (int64_t)eo,
				    o->dtype, s);
			}
	}
}

static int
sim_aclnn_cost(const void *p, size_t len, double *flops, double *bytes)
{
	const struct sim_aclnn_args *a = p;

	if (len != sizeof *a || a->magic != NN_ARGS_MAGIC ||
	    !(a->flops >= 0) || !(a->bytes >= 0) || isinf(a->flops) ||
	    isinf(a->bytes))
		return (-1);
	*flops = a->flops;
	*bytes = a->bytes;
	return (0);
}

static void
sim_aclnn_run(const void *p)
{
	const struct sim_aclnn_args *a = p;

	if (!a->compute)
		return;
	if (a->op == NN_MATMUL)
		sim_aclnn_run_matmul(a);
	else
		sim_aclnn_run_elementwise(a);
}

static const struct sim_kernel_ops sim_aclnn_ops = {
	.cost = sim_aclnn_cost,
	.run = sim_aclnn_run,
};

static void
sim_aclnn_register(void)
{
	int	i;

	for (i = 0; i < NN_K_COUNT; i++)
		if (sim_kernel_register(sim_aclnn_kernels[i].name,
		    sim_aclnn_kernels[i].type, &sim_aclnn_ops,
		    &sim_aclnn_handles[i]) != ACL_SUCCESS)
			sim_aclnn_handles[i] = NULL;
}

static void
sim_aclnn_free(struct sim_obj *obj)
{
	free(obj);
}

/* Tensors, scalars and arrays. */

SIM_EXPORT aclTensor *
aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
    aclDataType dataType, const int64_t *stride, int64_t offset,
    aclFormat format, const int64_t *storageDims, uint64_t storageDimsNum,
    void *tensorData)
{
	struct sim_aclnn_tensor	*t;
	uint64_t		 i, reach = 0, storage = 1, numel = 1;

	sim_runtime_init();
	if (viewDimsNum > NN_MAX_DIMS || (viewDimsNum > 0 &&
	    viewDims == NULL) || storageDimsNum > NN_MAX_DIMS ||
	    (storageDimsNum > 0 && storageDims == NULL) || offset < 0 ||
	    sim_aclnn_esize(dataType) == 0)
		return (NULL);
	if ((t = calloc(1, sizeof *t)) == NULL)
		return (NULL);
	t->dtype = dataType;
	t->format = format;
	t->ndim = (uint32_t)viewDimsNum;
	t->offset = offset;
	t->data = tensorData;
	/* No strides: contiguous, row-major. */
	for (i = viewDimsNum; i-- > 0;) {
		if (viewDims[i] < 0 || (stride != NULL && stride[i] < 0))
			goto bad;
		t->dims[i] = viewDims[i];
		t->strides[i] = stride != NULL ? stride[i] :
		    (int64_t)numel;
		numel *= (uint64_t)viewDims[i];
	}
	for (i = 0; i < viewDimsNum; i++)
		if (t->dims[i] > 0)
			reach += (uint64_t)(t->dims[i] - 1) *
			    (uint64_t)t->strides[i];
	for (i = 0; i < storageDimsNum; i++) {
		if (storageDims[i] < 0)
			goto bad;
		storage *= (uint64_t)storageDims[i];
	}
	/* The view must stay inside its storage, when one is given. */
	if (numel > 0 && (tensorData == NULL || (storageDimsNum > 0 &&
	    (uint64_t)offset + reach + 1 > storage)))
		goto bad;
	sim_handle_add(&t->obj, SIM_MAGIC_TENSOR, sim_aclnn_free);
	return ((aclTensor *)(void *)t);
bad:
	free(t);
	return (NULL);
}

SIM_EXPORT aclScalar *
aclCreateScalar(void *value, aclDataType dataType)
{
	struct sim_aclnn_scalar	*s;

	sim_runtime_init();
	if (value == NULL || sim_aclnn_esize(dataType) == 0)
		return (NULL);
	if ((s = calloc(1, sizeof *s)) == NULL)
		return (NULL);
	s->dtype = dataType;
	s->v = sim_aclnn_load(value, dataType);
	sim_handle_add(&s->obj, SIM_MAGIC_SCALAR, sim_aclnn_free);
	return ((aclScalar *)(void *)s);
}

SIM_EXPORT aclIntArray *
aclCreateIntArray(const int64_t *value, uint64_t size)
{
	struct sim_aclnn_intarray	*a;

	sim_runtime_init();
	if ((value == NULL && size > 0) || size > (1U << 20))
		return (NULL);
	if ((a = calloc(1, sizeof *a + size * sizeof a->v[0])) == NULL)
		return (NULL);
	a->n = size;
	if (size > 0)
		memcpy(a->v, value, size * sizeof a->v[0]);
	sim_handle_add(&a->obj, SIM_MAGIC_INTARRAY, sim_aclnn_free);
	return ((aclIntArray *)(void *)a);
}

/* NULL is a no-op, as in CANN; a pointer we never made is an error. */
static aclnnStatus
sim_aclnn_destroy(const void *p, uint32_t magic)
{
	if (p == NULL)
		return (ACLNN_SUCCESS);
	return (sim_handle_remove(p, magic) == 0 ? ACLNN_SUCCESS :
	    ACLNN_ERR_PARAM_INVALID);
}

SIM_EXPORT aclnnStatus
aclDestroyTensor(const aclTensor *tensor)
{
	return (sim_aclnn_destroy(tensor, SIM_MAGIC_TENSOR));
}

SIM_EXPORT aclnnStatus
aclDestroyScalar(const aclScalar *scalar)
{
	return (sim_aclnn_destroy(scalar, SIM_MAGIC_SCALAR));
}

SIM_EXPORT aclnnStatus
aclDestroyIntArray(const aclIntArray *array)
{
	return (sim_aclnn_destroy(array, SIM_MAGIC_INTARRAY));
}

SIM_EXPORT aclnnStatus
aclGetDataType(const aclTensor *tensor, aclDataType *dataType)
{
	struct sim_aclnn_tensor	*t;

	if (tensor == NULL || dataType == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	if ((t = sim_handle_get(tensor, SIM_MAGIC_TENSOR)) == NULL)
		return (ACLNN_ERR_PARAM_INVALID);
	*dataType = (aclDataType)t->dtype;
	sim_handle_put(&t->obj);
	return (ACLNN_SUCCESS);
}

SIM_EXPORT aclnnStatus
aclnnInit(const char *configPath)
{
	(void)configPath;
	sim_runtime_init();
	return (ACLNN_SUCCESS);
}

SIM_EXPORT aclnnStatus
aclnnFinalize(void)
{
	return (ACLNN_SUCCESS);
}

/* First phase. */

/* Freeze a registered tensor into a kernel view. */
static aclnnStatus
sim_aclnn_view(const aclTensor *h, struct sim_aclnn_view *v)
{
	struct sim_aclnn_tensor	*t;

	if ((t = sim_handle_get(h, SIM_MAGIC_TENSOR)) == NULL)
		return (ACLNN_ERR_PARAM_INVALID);
	memset(v, 0, sizeof *v);
	v->data = t->data + t->offset * (int64_t)sim_aclnn_esize(t->dtype);
	v->dtype = t->dtype;
	v->ndim = t->ndim;
	memcpy(v->dims, t->dims, sizeof v->dims);
	memcpy(v->strides, t->strides, sizeof v->strides);
	sim_handle_put(&t->obj);
	return (ACLNN_SUCCESS);
}

static aclnnStatus
sim_aclnn_scalar(const aclScalar *h, double *out)
{
	struct sim_aclnn_scalar	*s;

	if ((s = sim_handle_get(h, SIM_MAGIC_SCALAR)) == NULL)
		return (ACLNN_ERR_PARAM_INVALID);
	*out = s->v;
	sim_handle_put(&s->obj);
	return (ACLNN_SUCCESS);
}

/* out's shape must be the broadcast of the inputs' shapes. */
static int
sim_aclnn_broadcasts(const struct sim_aclnn_args *a)
{
	const struct sim_aclnn_view *o = &a->out;
	uint32_t	 k, j;
	int64_t		 want, got;

	for (k = 0; k < a->nin; k++)
		if (a->in[k].ndim > o->ndim)
			return (0);
	for (j = 0; j < o->ndim; j++) {
		want = 1;
		for (k = 0; k < a->nin; k++) {
			const struct sim_aclnn_view *v = &a->in[k];
			uint32_t shift = o->ndim - v->ndim;

			if (j < shift)
				continue;
			got = v->dims[j - shift];
			if (got != 1 && want != 1 && got != want)
				return (0);
			if (got != 1)
				want = got;
		}
		if (o->dims[j] != want)
			return (0);
	}
	return (1);
}

static uint32_t
sim_aclnn_block_dim(uint64_t work, uint64_t per_core, uint32_t cores)
{
	uint64_t	n = (work + per_core - 1) / per_core;

	return (n < 1 ? 1 : n > cores ? cores : (uint32_t)n);
}

/* Publish an executor for args and hand it out. */
static aclnnStatus
sim_aclnn_executor(int kernel, const struct sim_aclnn_args *args,
    uint64_t ws_need, uint32_t block_dim, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
	struct sim_aclnn_executor	*x;

	pthread_once(&sim_aclnn_once, sim_aclnn_register);
	if (sim_aclnn_handles[kernel] == NULL)
		return (ACLNN_ERR_INNER);
	if ((x = calloc(1, sizeof *x)) == NULL)
		return (ACLNN_ERR_INNER);
	x->kernel = kernel;
	x->ws_need = ws_need;
	x->block_dim = block_dim;
	x->args = *args;
	x->args.magic = NN_ARGS_MAGIC;
	sim_handle_add(&x->obj, SIM_MAGIC_EXECUTOR, sim_aclnn_free);
	*workspaceSize = ws_need;
	*executor = (aclOpExecutor *)(void *)x;
	return (ACLNN_SUCCESS);
}

/* Elementwise ops: a (op) b -> out, b a tensor or, with bs, a scalar. */
static aclnnStatus
sim_aclnn_elementwise(int kernel, int op, const aclTensor *a,
    const aclTensor *b, const aclScalar *bs, const aclScalar *alpha,
    double alpha_sign, const aclTensor *out, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
	struct sim_aclnn_args	 args;
	aclnnStatus		 e;
	uint64_t		 n, bytes;
	uint32_t		 k;

	memset(&args, 0, sizeof args);
	args.op = op;
	args.alpha = 1;
	args.nin = b != NULL ? 2 : 1;
	if ((e = sim_aclnn_view(a, &args.in[0])) != ACLNN_SUCCESS ||
	    (b != NULL && (e = sim_aclnn_view(b, &args.in[1])) !=
	    ACLNN_SUCCESS) ||
	    (e = sim_aclnn_view(out, &args.out)) != ACLNN_SUCCESS ||
	    (bs != NULL && (e = sim_aclnn_scalar(bs, &args.scalar)) !=
	    ACLNN_SUCCESS) ||
	    (alpha != NULL && (e = sim_aclnn_scalar(alpha, &args.alpha)) !=
	    ACLNN_SUCCESS))
		return (e);
	args.alpha *= alpha_sign;
	if (!sim_aclnn_broadcasts(&args))
		return (ACLNN_ERR_PARAM_INVALID);
	/* Integer and bool outputs cannot hold a fractional alpha. */
	if (!sim_aclnn_is_float(args.out.dtype) && alpha != NULL &&
	    args.alpha != trunc(args.alpha))
		return (ACLNN_ERR_PARAM_INVALID);
	n = sim_aclnn_numel(&args.out);
	bytes = n * sim_aclnn_esize(args.out.dtype);
	for (k = 0; k < args.nin; k++)
		bytes += sim_aclnn_numel(&args.in[k]) *
		    sim_aclnn_esize(args.in[k].dtype);
	args.flops = (double)n * (op == NN_ADD && args.alpha != 1 ? 2 : 1);
	args.bytes = (double)bytes;
	args.compute = n <= NN_COMPUTE_MAX;
	return (sim_aclnn_executor(kernel, &args, 0,
	    sim_aclnn_block_dim(n, 4096, 48), workspaceSize, executor));
}

SIM_EXPORT aclnnStatus
aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
    const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
	sim_runtime_init();
	if (self == NULL || other == NULL || alpha == NULL || out == NULL ||
	    workspaceSize == NULL || executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	return (sim_aclnn_elementwise(NN_K_ADD, NN_ADD, self, other, NULL,
	    alpha, 1, out, workspaceSize, executor));
}

SIM_EXPORT aclnnStatus
aclnnAddsGetWorkspaceSize(const aclTensor *self, const aclScalar *other,
    const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
	sim_runtime_init();
	if (self == NULL || other == NULL || alpha == NULL || out == NULL ||
	    workspaceSize == NULL || executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	return (sim_aclnn_elementwise(NN_K_ADDS, NN_ADD, self, NULL, other,
	    alpha, 1, out, workspaceSize, executor));
}

SIM_EXPORT aclnnStatus
aclnnInplaceAddGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other,
    const aclScalar *alpha, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
	sim_runtime_init();
	if (selfRef == NULL || other == NULL || alpha == NULL ||
	    workspaceSize == NULL || executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	return (sim_aclnn_elementwise(NN_K_INPLACE_ADD, NN_ADD, selfRef, other,
	    NULL, alpha, 1, selfRef, workspaceSize, executor));
}

SIM_EXPORT aclnnStatus
aclnnSubGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
    const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
	sim_runtime_init();
	if (self == NULL || other == NULL || alpha == NULL || out == NULL ||
	    workspaceSize == NULL || executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	return (sim_aclnn_elementwise(NN_K_SUB, NN_ADD, self, other, NULL,
	    alpha, -1, out, workspaceSize, executor));
}

SIM_EXPORT aclnnStatus
aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
    aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor)
{
	sim_runtime_init();
	if (self == NULL || other == NULL || out == NULL ||
	    workspaceSize == NULL || executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	return (sim_aclnn_elementwise(NN_K_MUL, NN_MUL, self, other, NULL, NULL,
	    1, out, workspaceSize, executor));
}

SIM_EXPORT aclnnStatus
aclnnReluGetWorkspaceSize(const aclTensor *self, aclTensor *out,
    uint64_t *workspaceSize, aclOpExecutor **executor)
{
	sim_runtime_init();
	if (self == NULL || out == NULL || workspaceSize == NULL ||
	    executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	return (sim_aclnn_elementwise(NN_K_RELU, NN_RELU, self, NULL, NULL,
	    NULL, 1, out, workspaceSize, executor));
}

SIM_EXPORT aclnnStatus
aclnnMatmulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2,
    aclTensor *out, int8_t cubeMathType, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
	struct sim_aclnn_args	 args;
	struct sim_aclnn_view	*x = &args.in[0], *w = &args.in[1];
	struct sim_aclnn_view	*o = &args.out;
	aclnnStatus		 e;
	int64_t			 B, M, K, N, bx, bw;
	uint64_t		 ws = 0;
	int			 k;

	sim_runtime_init();
	if (self == NULL || mat2 == NULL || out == NULL ||
	    workspaceSize == NULL || executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	memset(&args, 0, sizeof args);
	args.op = NN_MATMUL;
	args.nin = 2;
	if ((e = sim_aclnn_view(self, x)) != ACLNN_SUCCESS ||
	    (e = sim_aclnn_view(mat2, w)) != ACLNN_SUCCESS ||
	    (e = sim_aclnn_view(out, o)) != ACLNN_SUCCESS)
		return (e);
	if (cubeMathType < 0 || cubeMathType > 3)
		return (ACLNN_ERR_PARAM_INVALID);
	for (k = 0; k < 3; k++) {
		const struct sim_aclnn_view *v = k == 0 ? x : k == 1 ? w : o;

		if (v->dtype != ACL_FLOAT && v->dtype != ACL_FLOAT16 &&
		    v->dtype != ACL_BF16)
			return (ACLNN_ERR_PARAM_INVALID);
		if (v->ndim < 2 || v->ndim > 3)
			return (ACLNN_ERR_PARAM_INVALID);
	}
	/* Batched only when out is 3-D; inputs may be 2-D then (batch 1). */
	if (o->ndim == 2 && (x->ndim != 2 || w->ndim != 2))
		return (ACLNN_ERR_PARAM_INVALID);
	bx = x->ndim - 2;
	bw = w->ndim - 2;
	M = x->dims[bx];
	K = x->dims[bx + 1];
	N = w->dims[bw + 1];
	B = o->ndim == 3 ? o->dims[0] : 1;
	if (w->dims[bw] != K || o->dims[o->ndim - 2] != M ||
	    o->dims[o->ndim - 1] != N ||
	    (x->ndim == 3 && x->dims[0] != B && x->dims[0] != 1) ||
	    (w->ndim == 3 && w->dims[0] != B && w->dims[0] != 1))
		return (ACLNN_ERR_PARAM_INVALID);
	if (o->dtype != ACL_FLOAT)
		ws = (uint64_t)(B * M * N) * sizeof(float);
	args.flops = 2.0 * (double)B * (double)M * (double)N * (double)K;
	args.bytes = (double)(sim_aclnn_numel(x) * sim_aclnn_esize(x->dtype) +
	    sim_aclnn_numel(w) * sim_aclnn_esize(w->dtype) +
	    sim_aclnn_numel(o) * sim_aclnn_esize(o->dtype));
	args.compute = args.flops / 2 <= (double)NN_COMPUTE_MAX;
	return (sim_aclnn_executor(NN_K_MATMUL, &args, ws,
	    sim_aclnn_block_dim((uint64_t)(B * M * N), 128 * 128, 24),
	    workspaceSize, executor));
}

/* Second phase. */

/* A view's data must be device memory of this process. */
static int
sim_aclnn_in_device(const struct sim_aclnn_view *v)
{
	uint64_t	span = sim_aclnn_span(v);
	int		dev;

	if (span == 0)
		return (1);
	return (sim_memory_find(v->data, span, &dev) == 0 && dev >= 0);
}

static aclnnStatus
sim_aclnn_launch(int kernel, void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream)
{
	struct sim_aclnn_executor	*x;
	aclnnStatus		 st = ACLNN_SUCCESS;
	uint32_t		 k;
	int			 dev;

	sim_runtime_init();
	if (executor == NULL)
		return (ACLNN_ERR_PARAM_NULLPTR);
	if ((x = sim_handle_get(executor, SIM_MAGIC_EXECUTOR)) == NULL)
		return (ACLNN_ERR_PARAM_INVALID);
	if (x->kernel != kernel) {
		/* Another operator's executor: leave it usable. */
		sim_handle_put(&x->obj);
		return (ACLNN_ERR_PARAM_INVALID);
	}
	/* Single use: whoever removes it from the registry runs it. */
	if (sim_handle_remove(executor, SIM_MAGIC_EXECUTOR) != 0) {
		sim_handle_put(&x->obj);
		return (ACLNN_ERR_PARAM_INVALID);
	}
	if (x->ws_need > 0) {
		if (workspace == NULL)
			st = ACLNN_ERR_PARAM_NULLPTR;
		else if (workspaceSize < x->ws_need ||
		    sim_memory_find(workspace, x->ws_need, &dev) != 0 ||
		    dev < 0)
			st = ACLNN_ERR_PARAM_INVALID;
		x->args.workspace = workspace;
	}
	for (k = 0; st == ACLNN_SUCCESS && k < x->args.nin; k++)
		if (!sim_aclnn_in_device(&x->args.in[k]))
			st = ACLNN_ERR_PARAM_INVALID;
	if (st == ACLNN_SUCCESS && !sim_aclnn_in_device(&x->args.out))
		st = ACLNN_ERR_PARAM_INVALID;
	if (st != ACLNN_SUCCESS)
		sim_runtime_set_error(ACL_ERROR_INVALID_PARAM, "%s: %s",
		    sim_aclnn_kernels[kernel].name,
		    st == ACLNN_ERR_PARAM_NULLPTR ?
		    "workspace is NULL" : "workspace or tensor data not in "
		    "device memory, or workspace too small");
	else if (aclrtLaunchKernel(sim_aclnn_handles[kernel], x->block_dim,
	    &x->args, sizeof x->args, stream) != ACL_SUCCESS)
		st = ACLNN_ERR_RUNTIME_ERROR;
	sim_handle_put(&x->obj);
	return (st);
}

SIM_EXPORT aclnnStatus
aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
	return (sim_aclnn_launch(NN_K_ADD, workspace, workspaceSize, executor,
	    stream));
}

SIM_EXPORT aclnnStatus
aclnnAdds(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
	return (sim_aclnn_launch(NN_K_ADDS, workspace, workspaceSize, executor,
	    stream));
}

SIM_EXPORT aclnnStatus
aclnnInplaceAdd(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream)
{
	return (sim_aclnn_launch(NN_K_INPLACE_ADD, workspace, workspaceSize,
	    executor, stream));
}

SIM_EXPORT aclnnStatus
aclnnSub(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
	return (sim_aclnn_launch(NN_K_SUB, workspace, workspaceSize, executor,
	    stream));
}

SIM_EXPORT aclnnStatus
aclnnMul(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
	return (sim_aclnn_launch(NN_K_MUL, workspace, workspaceSize, executor,
	    stream));
}

SIM_EXPORT aclnnStatus
aclnnRelu(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
	return (sim_aclnn_launch(NN_K_RELU, workspace, workspaceSize, executor,
	    stream));
}

SIM_EXPORT aclnnStatus
aclnnMatmul(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
	return (sim_aclnn_launch(NN_K_MATMUL, workspace, workspaceSize,
	    executor, stream));
}

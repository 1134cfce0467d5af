/*
 * sim-kernel.c - named kernels and their cost model, aclrtLaunchKernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* Peak throughput by kernel type, and the HBM bandwidth. */
static const struct {
	double		flops;		/* per second */
	double		overhead_ns;	/* launch and scheduling */
} sim_kernel_peak[] = {
	[NPUSIM_KERNEL_AI_CORE] = { 256e12, 3000 },
	[NPUSIM_KERNEL_AI_VECTOR] = { 16e12, 2500 },
	[NPUSIM_KERNEL_AI_CPU] = { 0.05e12, 20000 },
};
#define SIM_KERNEL_HBM_BW 1.6e12

static void
sim_kernel_destroy(struct sim_obj *obj)
{
	free(obj);
}

/* Roofline time of one launch, in ns, scaled. */
uint64_t
sim_kernel_model(int type, double flops, double bytes)
{
	double	t;

	t = fmax(flops / sim_kernel_peak[type].flops,
	    bytes / SIM_KERNEL_HBM_BW) * 1e9 + sim_kernel_peak[type].overhead_ns;
	return ((uint64_t)(t * sim_cfg.time_scale));
}

static uint64_t
sim_kernel_ns(const struct sim_kernel *k)
{
	if (k->fixed_ns != 0)
		return ((uint64_t)((double)k->fixed_ns * sim_cfg.time_scale));
	return (sim_kernel_model(k->type, k->flops, k->bytes));
}

SIM_EXPORT aclError
npusimKernelRegister(const char *name, enum npusim_kernel_type type,
    double flops, double bytes, uint64_t fixed_ns, aclrtFuncHandle *out)
{
	struct sim_kernel	*k;

	sim_runtime_init();
	if (name == NULL || *name == '\0' || out == NULL ||
	    (unsigned)type > NPUSIM_KERNEL_AI_CPU || !(flops >= 0) ||
	    !(bytes >= 0) || isinf(flops) || isinf(bytes))
		return (ACL_ERROR_INVALID_PARAM);
	if ((k = calloc(1, sizeof *k)) == NULL)
		return (ACL_ERROR_BAD_ALLOC);
	strncpy(k->name, name, sizeof k->name - 1);
	k->type = type;
	k->flops = flops;
	k->bytes = bytes;
	k->fixed_ns = fixed_ns;
	sim_handle_add(&k->obj, SIM_MAGIC_KERNEL, sim_kernel_destroy);
	*out = k;
	return (ACL_SUCCESS);
}

/* A kernel whose cost and body come from its launch arguments. */
aclError
sim_kernel_register(const char *name, int type,
    const struct sim_kernel_ops *ops, aclrtFuncHandle *out)
{
	struct sim_kernel	*k;

	if ((k = calloc(1, sizeof *k)) == NULL)
		return (ACL_ERROR_BAD_ALLOC);
	strncpy(k->name, name, sizeof k->name - 1);
	k->type = type;
	k->ops = ops;
	sim_handle_add(&k->obj, SIM_MAGIC_KERNEL, sim_kernel_destroy);
	*out = k;
	return (ACL_SUCCESS);
}

SIM_EXPORT const char *
npusimKernelName(aclrtFuncHandle func)
{
	struct sim_kernel	*k;
	const char		*name;

	if ((k = sim_handle_get(func, SIM_MAGIC_KERNEL)) == NULL)
		return (NULL);
	name = k->name;		/* kernels are never freed */
	sim_handle_put(&k->obj);
	return (name);
}

SIM_EXPORT int
npusimKernelType(aclrtFuncHandle func)
{
	struct sim_kernel	*k;
	int			 type;

	if ((k = sim_handle_get(func, SIM_MAGIC_KERNEL)) == NULL)
		return (-1);
	type = k->type;
	sim_handle_put(&k->obj);
	return (type);
}

SIM_EXPORT uint64_t
npusimKernelDuration(aclrtFuncHandle func)
{
	struct sim_kernel	*k;
	uint64_t		 ns;

	if ((k = sim_handle_get(func, SIM_MAGIC_KERNEL)) == NULL)
		return (0);
	ns = sim_kernel_ns(k);
	sim_handle_put(&k->obj);
	return (ns);
}

SIM_EXPORT aclError
aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim,
    const void *argsData, size_t argsSize, aclrtStream stream)
{
	struct sim_kernel	*k;
	struct sim_stream	*s;
	struct sim_task		 task, *t = &task;
	aclError		 e;
	double			 flops = 0, bytes = 0;
	int			 rank;

	sim_runtime_init();
	if ((k = sim_handle_get(funcHandle, SIM_MAGIC_KERNEL)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "function handle %p", funcHandle);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	if (blockDim == 0 || (argsData == NULL && argsSize != 0) ||
	    (k->ops != NULL && (argsData == NULL ||
	    k->ops->cost(argsData, argsSize, &flops, &bytes) != 0))) {
		sim_handle_put(&k->obj);
		sim_runtime_set_error(ACL_ERROR_INVALID_PARAM,
		    "blockDim %u args %p/%zu", blockDim, argsData, argsSize);
		return (ACL_ERROR_INVALID_PARAM);
	}
	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS) {
		sim_handle_put(&k->obj);
		return (e);
	}
	/* A kernel with a body owns a copy of its args: a heap task, which
	 * the stream frees.  Others are built on the stack. */
	if (k->ops != NULL && (t = sim_stream_task(NPUSIM_TASK_KERNEL,
	    k->name)) == NULL) {
		e = ACL_ERROR_BAD_ALLOC;
		goto out;
	} else if (k->ops == NULL)
		sim_stream_task_init(t, NPUSIM_TASK_KERNEL, k->name);
	t->u.kernel.type = k->type;
	t->u.kernel.block_dim = blockDim;
	if (k->ops != NULL) {
		/* The body reads the args when it runs: keep a copy. */
		if ((t->u.kernel.args = malloc(argsSize)) == NULL) {
			sim_stream_free_task(t);
			e = ACL_ERROR_BAD_ALLOC;
			goto out;
		}
		memcpy(t->u.kernel.args, argsData, argsSize);
		t->u.kernel.ops = k->ops;
		t->u.kernel.flops = flops;
		t->u.kernel.bytes = bytes;
		t->dur_ns = sim_kernel_model(k->type, flops, bytes);
	} else {
		t->u.kernel.flops = k->flops;
		t->u.kernel.bytes = k->bytes;
		t->dur_ns = sim_kernel_ns(k);
	}
	/* Injected straggler: this rank computes slower. */
	rank = __atomic_load_n(&sim_rt.rank, __ATOMIC_RELAXED);
	if (sim_cfg.slow_rank >= 0 && rank == sim_cfg.slow_rank)
		t->dur_ns = (uint64_t)((double)t->dur_ns * sim_cfg.slow_factor);
	if (t != &task) {
		if ((e = sim_stream_submit(s, t)) != ACL_SUCCESS)
			sim_stream_free_task(t);
	} else
		e = sim_stream_submit_copy(s, t);
out:
	sim_handle_put(&s->obj);
	sim_handle_put(&k->obj);
	return (e);
}

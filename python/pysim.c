/*
 * pysim.c - the _npusim extension: a thin binding of libnpusim (ACL,
 * HCCL and kernel registration) for writing example workloads in Python.
 * Handles (streams, kernels, device and host pointers, communicators) are
 * plain ints; mspti/npusim/__init__.py wraps them.  Every call that may
 * block runs with the GIL released.  Failures raise _npusim.Error(code,
 * message).
 */
#include "config.h"

#include <dlfcn.h>
#include <string.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <npusim/npusim.h>

#include "pyext.h"

static PyObject *sim_error;

/* Raises _npusim.Error for an ACL or HCCL failure; returns NULL. */
static PyObject *
pysim_fail(const char *call, int code, int hccl)
{
	const char *why = hccl ? HcclGetErrorString((HcclResult)code) :
	    aclGetRecentErrMsg();
	PyObject *v;

	v = Py_BuildValue("(is)", code, why != NULL ? why : "");
	if (v != NULL) {
		PyErr_SetObject(sim_error, v);
		Py_DECREF(v);
	}
	(void)call;
	return NULL;
}

#define SIM_ACL(call, expr) do {					\
	aclError sim_rc_;						\
	Py_BEGIN_ALLOW_THREADS						\
	sim_rc_ = (expr);						\
	Py_END_ALLOW_THREADS						\
	if (sim_rc_ != ACL_SUCCESS)					\
		return pysim_fail(call, (int)sim_rc_, 0);		\
} while (0)

#define SIM_HCCL(call, expr) do {					\
	HcclResult sim_rc_;						\
	Py_BEGIN_ALLOW_THREADS						\
	sim_rc_ = (expr);						\
	Py_END_ALLOW_THREADS						\
	if (sim_rc_ != HCCL_SUCCESS)					\
		return pysim_fail(call, (int)sim_rc_, 1);		\
} while (0)

/* One pointer argument (int, None or object with .handle). */
static int
pysim_ptr(PyObject *o, void **out)
{
	*out = pyutil_pointer(o, "handle");
	return PyErr_Occurred() ? 0 : 1;
}

static PyObject *
pysim_init(PyObject *self, PyObject *noargs)
{
	aclError rc = aclInit(NULL);

	if (rc != ACL_SUCCESS && rc != ACL_ERROR_REPEAT_INITIALIZE)
		return pysim_fail("aclInit", (int)rc, 0);
	Py_RETURN_NONE;
}

static PyObject *
pysim_finalize(PyObject *self, PyObject *noargs)
{
	SIM_ACL("aclFinalize", aclFinalize());
	Py_RETURN_NONE;
}

static PyObject *
pysim_device_count(PyObject *self, PyObject *noargs)
{
	uint32_t n = 0;

	SIM_ACL("aclrtGetDeviceCount", aclrtGetDeviceCount(&n));
	return PyLong_FromUnsignedLong(n);
}

static PyObject *
pysim_set_device(PyObject *self, PyObject *args)
{
	int dev;

	if (!PyArg_ParseTuple(args, "i", &dev))
		return NULL;
	SIM_ACL("aclrtSetDevice", aclrtSetDevice(dev));
	Py_RETURN_NONE;
}

static PyObject *
pysim_reset_device(PyObject *self, PyObject *args)
{
	int dev;

	if (!PyArg_ParseTuple(args, "i", &dev))
		return NULL;
	SIM_ACL("aclrtResetDevice", aclrtResetDevice(dev));
	Py_RETURN_NONE;
}

static PyObject *
pysim_get_device(PyObject *self, PyObject *noargs)
{
	int32_t dev = -1;

	SIM_ACL("aclrtGetDevice", aclrtGetDevice(&dev));
	return PyLong_FromLong(dev);
}

static PyObject *
pysim_create_stream(PyObject *self, PyObject *noargs)
{
	aclrtStream s = NULL;

	SIM_ACL("aclrtCreateStream", aclrtCreateStream(&s));
	return PyLong_FromVoidPtr(s);
}

static PyObject *
pysim_destroy_stream(PyObject *self, PyObject *args)
{
	void *s;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &s))
		return NULL;
	SIM_ACL("aclrtDestroyStream", aclrtDestroyStream(s));
	Py_RETURN_NONE;
}

static PyObject *
pysim_stream_id(PyObject *self, PyObject *args)
{
	void *s;
	int32_t id = -1;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &s))
		return NULL;
	SIM_ACL("aclrtStreamGetId", aclrtStreamGetId(s, &id));
	return PyLong_FromLong(id);
}

static PyObject *
pysim_synchronize_stream(PyObject *self, PyObject *args)
{
	void *s;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &s))
		return NULL;
	SIM_ACL("aclrtSynchronizeStream", aclrtSynchronizeStream(s));
	Py_RETURN_NONE;
}

static PyObject *
pysim_synchronize_device(PyObject *self, PyObject *noargs)
{
	SIM_ACL("aclrtSynchronizeDevice", aclrtSynchronizeDevice());
	Py_RETURN_NONE;
}

static PyObject *
pysim_create_event(PyObject *self, PyObject *noargs)
{
	aclrtEvent ev = NULL;

	SIM_ACL("aclrtCreateEvent", aclrtCreateEvent(&ev));
	return PyLong_FromVoidPtr(ev);
}

static PyObject *
pysim_destroy_event(PyObject *self, PyObject *args)
{
	void *ev;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &ev))
		return NULL;
	SIM_ACL("aclrtDestroyEvent", aclrtDestroyEvent(ev));
	Py_RETURN_NONE;
}

/* record_event(event, stream) */
static PyObject *
pysim_record_event(PyObject *self, PyObject *args)
{
	void *ev, *s;

	if (!PyArg_ParseTuple(args, "O&O&", pysim_ptr, &ev, pysim_ptr, &s))
		return NULL;
	SIM_ACL("aclrtRecordEvent", aclrtRecordEvent(ev, s));
	Py_RETURN_NONE;
}

static PyObject *
pysim_synchronize_event(PyObject *self, PyObject *args)
{
	void *ev;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &ev))
		return NULL;
	SIM_ACL("aclrtSynchronizeEvent", aclrtSynchronizeEvent(ev));
	Py_RETURN_NONE;
}

typedef aclError (*pysim_wait_fn)(aclrtStream, aclrtEvent);

/* aclrtStreamWaitEvent, looked up at run time (through an interposer
 * first): a runtime without it makes has_stream_wait_event() false and
 * callers fall back to waiting on the host. */
static pysim_wait_fn
pysim_wait_event_fn(void)
{
	static pysim_wait_fn fn;
	static int looked;

	if (!looked) {
		fn = (pysim_wait_fn)(uintptr_t)dlsym(RTLD_DEFAULT,
		    "aclrtStreamWaitEvent");
		looked = 1;
	}
	return fn;
}

static PyObject *
pysim_has_stream_wait_event(PyObject *self, PyObject *noargs)
{
	return PyBool_FromLong(pysim_wait_event_fn() != NULL);
}

/* stream_wait_event(stream, event): later work on stream waits for the
 * event's last record. */
static PyObject *
pysim_stream_wait_event(PyObject *self, PyObject *args)
{
	void *s, *ev;
	pysim_wait_fn fn = pysim_wait_event_fn();

	if (!PyArg_ParseTuple(args, "O&O&", pysim_ptr, &s, pysim_ptr, &ev))
		return NULL;
	if (fn == NULL) {
		PyErr_SetString(PyExc_NotImplementedError,
		    "the runtime has no aclrtStreamWaitEvent");
		return NULL;
	}
	SIM_ACL("aclrtStreamWaitEvent", fn(s, ev));
	Py_RETURN_NONE;
}

/* kernel_register(name, type, flops, bytes, fixed_ns) -> handle */
static PyObject *
pysim_kernel_register(PyObject *self, PyObject *args)
{
	const char *name;
	int type;
	double flops, bytes;
	unsigned long long fixed_ns;
	aclrtFuncHandle h = NULL;

	if (!PyArg_ParseTuple(args, "siddK", &name, &type, &flops, &bytes,
	    &fixed_ns))
		return NULL;
	SIM_ACL("npusimKernelRegister", npusimKernelRegister(name,
	    (enum npusim_kernel_type)type, flops, bytes, fixed_ns, &h));
	return PyLong_FromVoidPtr(h);
}

static PyObject *
pysim_kernel_duration(PyObject *self, PyObject *args)
{
	void *k;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &k))
		return NULL;
	return PyLong_FromUnsignedLongLong(npusimKernelDuration(k));
}

/* launch_kernel(kernel, block_dim, stream) */
static PyObject *
pysim_launch_kernel(PyObject *self, PyObject *args)
{
	void *k, *s;
	unsigned int dim;

	if (!PyArg_ParseTuple(args, "O&IO&", pysim_ptr, &k, &dim, pysim_ptr,
	    &s))
		return NULL;
	SIM_ACL("aclrtLaunchKernel", aclrtLaunchKernel(k, dim, NULL, 0, s));
	Py_RETURN_NONE;
}

static PyObject *
pysim_malloc(PyObject *self, PyObject *args)
{
	Py_ssize_t size;
	void *p = NULL;

	if (!PyArg_ParseTuple(args, "n", &size))
		return NULL;
	SIM_ACL("aclrtMalloc", aclrtMalloc(&p, (size_t)size,
	    ACL_MEM_MALLOC_HUGE_FIRST));
	return PyLong_FromVoidPtr(p);
}

static PyObject *
pysim_free(PyObject *self, PyObject *args)
{
	void *p;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &p))
		return NULL;
	SIM_ACL("aclrtFree", aclrtFree(p));
	Py_RETURN_NONE;
}

static PyObject *
pysim_malloc_host(PyObject *self, PyObject *args)
{
	Py_ssize_t size;
	void *p = NULL;

	if (!PyArg_ParseTuple(args, "n", &size))
		return NULL;
	SIM_ACL("aclrtMallocHost", aclrtMallocHost(&p, (size_t)size));
	return PyLong_FromVoidPtr(p);
}

static PyObject *
pysim_free_host(PyObject *self, PyObject *args)
{
	void *p;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &p))
		return NULL;
	SIM_ACL("aclrtFreeHost", aclrtFreeHost(p));
	Py_RETURN_NONE;
}

/* memcpy(dst, src, count, kind, stream=None): async when a stream is
 * given. */
static PyObject *
pysim_memcpy(PyObject *self, PyObject *args)
{
	void *dst, *src, *s = NULL;
	Py_ssize_t count;
	int kind;

	if (!PyArg_ParseTuple(args, "O&O&ni|O&", pysim_ptr, &dst, pysim_ptr,
	    &src, &count, &kind, pysim_ptr, &s))
		return NULL;
	if (s != NULL)
		SIM_ACL("aclrtMemcpyAsync", aclrtMemcpyAsync(dst, (size_t)count,
		    src, (size_t)count, (aclrtMemcpyKind)kind, s));
	else
		SIM_ACL("aclrtMemcpy", aclrtMemcpy(dst, (size_t)count, src,
		    (size_t)count, (aclrtMemcpyKind)kind));
	Py_RETURN_NONE;
}

/* memset(ptr, value, count, stream=None) */
static PyObject *
pysim_memset(PyObject *self, PyObject *args)
{
	void *p, *s = NULL;
	Py_ssize_t count;
	int value;

	if (!PyArg_ParseTuple(args, "O&in|O&", pysim_ptr, &p, &value, &count,
	    pysim_ptr, &s))
		return NULL;
	if (s != NULL)
		SIM_ACL("aclrtMemsetAsync", aclrtMemsetAsync(p, (size_t)count,
		    value, (size_t)count, s));
	else
		SIM_ACL("aclrtMemset", aclrtMemset(p, (size_t)count, value,
		    (size_t)count));
	Py_RETURN_NONE;
}

/* write_host(ptr, data): copies a bytes-like object into host memory
 * obtained from malloc_host. */
static PyObject *
pysim_write_host(PyObject *self, PyObject *args)
{
	void *p;
	Py_buffer b;

	if (!PyArg_ParseTuple(args, "O&y*", pysim_ptr, &p, &b))
		return NULL;
	if (p == NULL) {
		PyBuffer_Release(&b);
		PyErr_SetString(PyExc_ValueError, "NULL host pointer");
		return NULL;
	}
	memcpy(p, b.buf, (size_t)b.len);
	PyBuffer_Release(&b);
	Py_RETURN_NONE;
}

/* read_host(ptr, n) -> bytes */
static PyObject *
pysim_read_host(PyObject *self, PyObject *args)
{
	void *p;
	Py_ssize_t n;

	if (!PyArg_ParseTuple(args, "O&n", pysim_ptr, &p, &n))
		return NULL;
	if (p == NULL || n < 0) {
		PyErr_SetString(PyExc_ValueError, "bad host buffer");
		return NULL;
	}
	return PyBytes_FromStringAndSize(p, n);
}

static PyObject *
pysim_root_info(PyObject *self, PyObject *noargs)
{
	HcclRootInfo root;

	memset(&root, 0, sizeof(root));
	SIM_HCCL("HcclGetRootInfo", HcclGetRootInfo(&root));
	return PyBytes_FromStringAndSize((const char *)&root, sizeof(root));
}

/* comm_init(nranks, root_info bytes, rank) -> comm */
static PyObject *
pysim_comm_init(PyObject *self, PyObject *args)
{
	unsigned int n, rank;
	Py_buffer b;
	HcclRootInfo root;
	HcclComm comm = NULL;

	if (!PyArg_ParseTuple(args, "Iy*I", &n, &b, &rank))
		return NULL;
	if (b.len != (Py_ssize_t)sizeof(root)) {
		PyBuffer_Release(&b);
		PyErr_Format(PyExc_ValueError, "root info must be %zu bytes",
		    sizeof(root));
		return NULL;
	}
	memcpy(&root, b.buf, sizeof(root));
	PyBuffer_Release(&b);
	SIM_HCCL("HcclCommInitRootInfo", HcclCommInitRootInfo(n, &root, rank,
	    &comm));
	return PyLong_FromVoidPtr(comm);
}

static PyObject *
pysim_comm_destroy(PyObject *self, PyObject *args)
{
	void *c;

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &c))
		return NULL;
	SIM_HCCL("HcclCommDestroy", HcclCommDestroy(c));
	Py_RETURN_NONE;
}

static PyObject *
pysim_comm_name(PyObject *self, PyObject *args)
{
	void *c;
	char name[256];

	if (!PyArg_ParseTuple(args, "O&", pysim_ptr, &c))
		return NULL;
	memset(name, 0, sizeof(name));
	SIM_HCCL("HcclGetCommName", HcclGetCommName(c, name));
	return PyUnicode_FromString(name);
}

/* all_reduce(send, recv, count, dtype, op, comm, stream) */
static PyObject *
pysim_all_reduce(PyObject *self, PyObject *args)
{
	void *send, *recv, *c, *s;
	unsigned long long count;
	int dtype, op;

	if (!PyArg_ParseTuple(args, "O&O&KiiO&O&", pysim_ptr, &send,
	    pysim_ptr, &recv, &count, &dtype, &op, pysim_ptr, &c, pysim_ptr,
	    &s))
		return NULL;
	SIM_HCCL("HcclAllReduce", HcclAllReduce(send, recv, count,
	    (HcclDataType)dtype, (HcclReduceOp)op, c, s));
	Py_RETURN_NONE;
}

/* broadcast(buf, count, dtype, root, comm, stream) */
static PyObject *
pysim_broadcast(PyObject *self, PyObject *args)
{
	void *buf, *c, *s;
	unsigned long long count;
	int dtype;
	unsigned int root;

	if (!PyArg_ParseTuple(args, "O&KiIO&O&", pysim_ptr, &buf, &count,
	    &dtype, &root, pysim_ptr, &c, pysim_ptr, &s))
		return NULL;
	SIM_HCCL("HcclBroadcast", HcclBroadcast(buf, count,
	    (HcclDataType)dtype, root, c, s));
	Py_RETURN_NONE;
}

/* all_gather(send, recv, send_count, dtype, comm, stream) */
static PyObject *
pysim_all_gather(PyObject *self, PyObject *args)
{
	void *send, *recv, *c, *s;
	unsigned long long count;
	int dtype;

	if (!PyArg_ParseTuple(args, "O&O&KiO&O&", pysim_ptr, &send, pysim_ptr,
	    &recv, &count, &dtype, pysim_ptr, &c, pysim_ptr, &s))
		return NULL;
	SIM_HCCL("HcclAllGather", HcclAllGather(send, recv, count,
	    (HcclDataType)dtype, c, s));
	Py_RETURN_NONE;
}

static PyObject *
pysim_barrier(PyObject *self, PyObject *args)
{
	void *c, *s;

	if (!PyArg_ParseTuple(args, "O&O&", pysim_ptr, &c, pysim_ptr, &s))
		return NULL;
	SIM_HCCL("HcclBarrier", HcclBarrier(c, s));
	Py_RETURN_NONE;
}

static PyMethodDef pysim_methods[] = {
	{ "init", pysim_init, METH_NOARGS, "aclInit(NULL)." },
	{ "finalize", pysim_finalize, METH_NOARGS, "aclFinalize()." },
	{ "device_count", pysim_device_count, METH_NOARGS,
	  "aclrtGetDeviceCount()." },
	{ "set_device", pysim_set_device, METH_VARARGS, "aclrtSetDevice." },
	{ "reset_device", pysim_reset_device, METH_VARARGS,
	  "aclrtResetDevice." },
	{ "get_device", pysim_get_device, METH_NOARGS, "aclrtGetDevice." },
	{ "create_stream", pysim_create_stream, METH_NOARGS,
	  "aclrtCreateStream() -> handle." },
	{ "destroy_stream", pysim_destroy_stream, METH_VARARGS,
	  "aclrtDestroyStream." },
	{ "stream_id", pysim_stream_id, METH_VARARGS, "aclrtStreamGetId." },
	{ "synchronize_stream", pysim_synchronize_stream, METH_VARARGS,
	  "aclrtSynchronizeStream." },
	{ "synchronize_device", pysim_synchronize_device, METH_NOARGS,
	  "aclrtSynchronizeDevice." },
	{ "create_event", pysim_create_event, METH_NOARGS,
	  "aclrtCreateEvent() -> handle." },
	{ "destroy_event", pysim_destroy_event, METH_VARARGS,
	  "aclrtDestroyEvent." },
	{ "record_event", pysim_record_event, METH_VARARGS,
	  "aclrtRecordEvent(event, stream)." },
	{ "synchronize_event", pysim_synchronize_event, METH_VARARGS,
	  "aclrtSynchronizeEvent." },
	{ "has_stream_wait_event", pysim_has_stream_wait_event, METH_NOARGS,
	  "Whether the runtime has aclrtStreamWaitEvent." },
	{ "stream_wait_event", pysim_stream_wait_event, METH_VARARGS,
	  "aclrtStreamWaitEvent(stream, event)." },
	{ "kernel_register", pysim_kernel_register, METH_VARARGS,
	  "npusimKernelRegister(name, type, flops, bytes, fixed_ns)." },
	{ "kernel_duration", pysim_kernel_duration, METH_VARARGS,
	  "npusimKernelDuration(kernel) in ns." },
	{ "launch_kernel", pysim_launch_kernel, METH_VARARGS,
	  "aclrtLaunchKernel(kernel, block_dim, stream)." },
	{ "malloc", pysim_malloc, METH_VARARGS, "aclrtMalloc(size)." },
	{ "free", pysim_free, METH_VARARGS, "aclrtFree(ptr)." },
	{ "malloc_host", pysim_malloc_host, METH_VARARGS,
	  "aclrtMallocHost(size)." },
	{ "free_host", pysim_free_host, METH_VARARGS, "aclrtFreeHost(ptr)." },
	{ "memcpy", pysim_memcpy, METH_VARARGS,
	  "aclrtMemcpy[Async](dst, src, count, kind, stream=None)." },
	{ "memset", pysim_memset, METH_VARARGS,
	  "aclrtMemset[Async](ptr, value, count, stream=None)." },
	{ "write_host", pysim_write_host, METH_VARARGS,
	  "Copy bytes into host memory." },
	{ "read_host", pysim_read_host, METH_VARARGS,
	  "Read n bytes of host memory." },
	{ "root_info", pysim_root_info, METH_NOARGS,
	  "HcclGetRootInfo() -> bytes." },
	{ "comm_init", pysim_comm_init, METH_VARARGS,
	  "HcclCommInitRootInfo(nranks, root, rank) -> comm." },
	{ "comm_destroy", pysim_comm_destroy, METH_VARARGS,
	  "HcclCommDestroy." },
	{ "comm_name", pysim_comm_name, METH_VARARGS, "HcclGetCommName." },
	{ "all_reduce", pysim_all_reduce, METH_VARARGS, "HcclAllReduce." },
	{ "broadcast", pysim_broadcast, METH_VARARGS, "HcclBroadcast." },
	{ "all_gather", pysim_all_gather, METH_VARARGS, "HcclAllGather." },
	{ "barrier", pysim_barrier, METH_VARARGS, "HcclBarrier." },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef pysim_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "mspti._npusim",
	.m_doc = "Binding of libnpusim, the simulated NPU.",
	.m_size = -1,
	.m_methods = pysim_methods,
};

PyMODINIT_FUNC PyInit__npusim(void);

PyMODINIT_FUNC
PyInit__npusim(void)
{
	PyObject *m;

	if ((m = PyModule_Create(&pysim_def)) == NULL)
		return NULL;
	sim_error = PyErr_NewException("mspti._npusim.Error", NULL, NULL);
	if (sim_error == NULL || PyModule_AddObjectRef(m, "Error",
	    sim_error) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	/* libmspti finds the runtime through the global scope. */
	if (PyModule_AddIntConstant(m, "global_scope",
	    pyutil_promote_global((const void *)npusimKernelRegister) == 0) <
	    0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}

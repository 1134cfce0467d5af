/*
 * pymstx.c - MSTX marks and ranges from Python (mspti.mstx).
 */
#include "config.h"

#include <mstx/ms_tools_ext.h>

#include "pyext.h"

/* The message and an optional stream. */
static int
pymstx_args(PyObject *args, const char **msg, void **stream)
{
	PyObject *so = Py_None;

	if (!PyArg_ParseTuple(args, "s|O", msg, &so))
		return -1;
	*stream = pyutil_pointer(so, "stream");
	return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
pymstx_mark(PyObject *self, PyObject *args)
{
	const char *msg;
	void *stream;

	if (pymstx_args(args, &msg, &stream) < 0)
		return NULL;
	mstxMarkA(msg, stream);
	Py_RETURN_NONE;
}

static PyObject *
pymstx_range_start(PyObject *self, PyObject *args)
{
	const char *msg;
	void *stream;

	if (pymstx_args(args, &msg, &stream) < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(mstxRangeStartA(msg, stream));
}

static PyObject *
pymstx_range_end(PyObject *self, PyObject *args)
{
	unsigned long long id;

	if (!PyArg_ParseTuple(args, "K", &id))
		return NULL;
	mstxRangeEnd(id);
	Py_RETURN_NONE;
}

static PyObject *
pymstx_domain_create(PyObject *self, PyObject *args)
{
	const char *name;
	mstxDomainHandle_t d;

	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	if ((d = mstxDomainCreateA(name)) == NULL) {
		PyErr_Format(PyExc_RuntimeError, "mstxDomainCreateA(%s) failed",
		    name);
		return NULL;
	}
	return PyLong_FromVoidPtr(d);
}

static PyObject *
pymstx_domain_destroy(PyObject *self, PyObject *args)
{
	PyObject *o;
	void *d;

	if (!PyArg_ParseTuple(args, "O", &o))
		return NULL;
	d = pyutil_pointer(o, "domain");
	if (PyErr_Occurred())
		return NULL;
	mstxDomainDestroy(d);
	Py_RETURN_NONE;
}

/* A domain handle, the message and an optional stream. */
static int
pymstx_domain_args(PyObject *args, void **d, const char **msg, void **stream)
{
	PyObject *dobj, *so = Py_None;

	if (!PyArg_ParseTuple(args, "Os|O", &dobj, msg, &so))
		return -1;
	*d = pyutil_pointer(dobj, "domain");
	*stream = pyutil_pointer(so, "stream");
	return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
pymstx_domain_mark(PyObject *self, PyObject *args)
{
	const char *msg;
	void *d, *stream;

	if (pymstx_domain_args(args, &d, &msg, &stream) < 0)
		return NULL;
	mstxDomainMarkA(d, msg, stream);
	Py_RETURN_NONE;
}

static PyObject *
pymstx_domain_range_start(PyObject *self, PyObject *args)
{
	const char *msg;
	void *d, *stream;

	if (pymstx_domain_args(args, &d, &msg, &stream) < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(mstxDomainRangeStartA(d, msg,
	    stream));
}

static PyObject *
pymstx_domain_range_end(PyObject *self, PyObject *args)
{
	PyObject *dobj;
	unsigned long long id;
	void *d;

	if (!PyArg_ParseTuple(args, "OK", &dobj, &id))
		return NULL;
	d = pyutil_pointer(dobj, "domain");
	if (PyErr_Occurred())
		return NULL;
	mstxDomainRangeEnd(d, id);
	Py_RETURN_NONE;
}

PyMethodDef pymstx_methods[] = {
	{ "mstx_mark", pymstx_mark, METH_VARARGS, "mstxMarkA(msg, stream)." },
	{ "mstx_range_start", pymstx_range_start, METH_VARARGS,
	  "mstxRangeStartA(msg, stream) -> id." },
	{ "mstx_range_end", pymstx_range_end, METH_VARARGS,
	  "mstxRangeEnd(id)." },
	{ "mstx_domain_create", pymstx_domain_create, METH_VARARGS,
	  "mstxDomainCreateA(name) -> handle." },
	{ "mstx_domain_destroy", pymstx_domain_destroy, METH_VARARGS,
	  "mstxDomainDestroy(handle)." },
	{ "mstx_domain_mark", pymstx_domain_mark, METH_VARARGS,
	  "mstxDomainMarkA(handle, msg, stream)." },
	{ "mstx_domain_range_start", pymstx_domain_range_start, METH_VARARGS,
	  "mstxDomainRangeStartA(handle, msg, stream) -> id." },
	{ "mstx_domain_range_end", pymstx_domain_range_end, METH_VARARGS,
	  "mstxDomainRangeEnd(handle, id)." },
	{ NULL, NULL, 0, NULL }
};

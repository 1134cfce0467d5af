/*
 * pyutil.c - helpers shared by the _mspti and _npusim extensions.
 */
#include "config.h"

#include <dlfcn.h>

#include "pyext.h"

/*
 * Makes the shared library holding symbol part of the global symbol scope
 * (dlopen RTLD_NOLOAD|RTLD_GLOBAL).  Python loads extensions RTLD_LOCAL;
 * libmspti looks its runtime up with dlsym(RTLD_DEFAULT/RTLD_NEXT), which
 * only sees global objects.  Returns 0, or -1 if the library was not found.
 */
int
pyutil_promote_global(const void *symbol)
{
	Dl_info	 info;
	void	*h;

	if (dladdr(symbol, &info) == 0 || info.dli_fname == NULL)
		return -1;
	if ((h = dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL |
	    RTLD_NOLOAD)) == NULL)
		return -1;
	/* The library stays loaded with the extension; drop our reference. */
	dlclose(h);
	return 0;
}

/* Adds a NULL-terminated method table to module.  Returns 0 or -1. */
int
pyutil_add_methods(PyObject *module, PyMethodDef *defs)
{
	return PyModule_AddFunctions(module, defs);
}

/*
 * A device or host pointer from Python: an int, None (NULL) or an object
 * with an integer "handle" attribute.  Returns NULL with an exception set
 * on a bad value (check PyErr_Occurred, since None is NULL too).
 */
void *
pyutil_pointer(PyObject *o, const char *what)
{
	PyObject	*h;
	void		*p;

	if (o == NULL || o == Py_None)
		return NULL;
	if (PyLong_Check(o))
		return PyLong_AsVoidPtr(o);
	if ((h = PyObject_GetAttrString(o, "handle")) == NULL) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "%s: expected an int, None or an "
		    "object with a handle", what);
		return NULL;
	}
	p = h == Py_None ? NULL : PyLong_AsVoidPtr(h);
	Py_DECREF(h);
	return p;
}

/*
 * pymod.c - the _mspti extension module: msPTI activity delivery, MSTX
 * and the Profile collector over the public API of libmspti.so.
 */
#include "config.h"

#include "pyext.h"

static struct PyModuleDef pymod_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "mspti._mspti",
	.m_doc = "msPTI activity API, MSTX and the Profile collector.",
	.m_size = -1,
};

PyMODINIT_FUNC PyInit__mspti(void);

PyMODINIT_FUNC
PyInit__mspti(void)
{
	PyObject *m;

	if ((m = PyModule_Create(&pymod_def)) == NULL)
		return NULL;
	/*
	 * libmspti is not promoted to the global scope: its interposers find
	 * the runtime with RTLD_NEXT, which from a dlopened library searches
	 * only the loader's own dependencies.  Interposition needs LD_PRELOAD.
	 */
	if (pyact_init(m) < 0 || pyutil_add_methods(m, pymstx_methods) < 0 ||
	    pyprof_init(m) < 0 ||
	    /* mspti.__version__: the release's, as every program's --version. */
	    PyModule_AddStringConstant(m, "version", PACKAGE_VERSION) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}

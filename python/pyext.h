/*
 * pyext.h - private header of the mspti Python extensions: _mspti (the
 * msPTI monitors, MSTX and the Profile collector over libmspti.so) and
 * _npusim (a thin binding of libnpusim for example workloads).
 *
 * Threads and locks, written once here:
 *  - libmspti calls pyact_request_cb/pyact_complete_cb from any thread,
 *    possibly one that holds the GIL; they only take act.mtx, never the
 *    GIL, and never call back into libmspti.
 *  - The delivery thread (a Python thread running _mspti.delivery_loop)
 *    waits on act.cond with the GIL released, then takes the GIL to turn
 *    records into Python objects and call the consumers.
 *  - Every call into libmspti or libnpusim that may block (flush,
 *    synchronize, collectives) releases the GIL first.
 */
#ifndef MSPTI_PYEXT_H
#define MSPTI_PYEXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stddef.h>

#include <mspti/mspti.h>

/* pyact.c: buffers, the delivery queue and dispatch to consumers. */
int		 pyact_init(PyObject *module);
extern PyMethodDef pyact_methods[];

/* pyprof.c: the Profile raw-record collector and the analysis bridge. */
int		 pyprof_init(PyObject *module);
void		 pyprof_collect(const msptiActivity *rec, size_t size);
int		 pyprof_wants(uint32_t kind);
extern PyMethodDef pyprof_methods[];

/* libmspti's own extension (agent/activity.c): the kinds a daemon
 * session asks of this process; bit MSPTI_ACTIVITY_KIND_COUNT is "op". */
uint32_t	 msptiExtSessionKinds(void);

/* pymstx.c: MSTX marks and ranges. */
extern PyMethodDef pymstx_methods[];

/* pyutil.c: helpers shared by both modules. */
int		 pyutil_promote_global(const void *symbol);
int		 pyutil_add_methods(PyObject *module, PyMethodDef *defs);
void		*pyutil_pointer(PyObject *o, const char *what);

#endif /* MSPTI_PYEXT_H */

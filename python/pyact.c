/*
 * pyact.c - msPTI activity buffers for Python: libmspti hands completed
 * buffers to pyact_complete_cb (any thread, no GIL), which queues them;
 * the delivery thread (_mspti.delivery_loop, run by a Python thread) turns
 * each record into a Python object and calls the consumers registered for
 * its kind, and gives raw records to the Profile collector.  A consumer
 * that raises is reported through sys.unraisablehook and counted; delivery
 * goes on.  Records delivered and lost are counted per kind (stats()).
 *
 * fork: a child has no delivery thread and the queue holds the parent's
 * records, so pyact_atfork_child empties it and resets the state; the
 * package's after_fork hook then stops the parent's monitors (after_fork()
 * here disables the kinds they had enabled).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pyext.h"

#define PYACT_MB		(1024u * 1024u)
#define PYACT_DEFAULT_MB	8u

struct pyact_buf {
	struct pyact_buf	*next;
	uint8_t			*data;
	size_t			 valid;
};

/* Queue state; every field is guarded by act_mtx. */
static pthread_mutex_t	 act_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	 act_cond = PTHREAD_COND_INITIALIZER;
static struct pyact_buf	*act_head, *act_tail;
static uint64_t		 act_queued, act_delivered;
static int		 act_running, act_stopping;
static size_t		 act_bufsize = PYACT_DEFAULT_MB * PYACT_MB;
static uint64_t		 act_lost_buffers;

/* Set at start, read by the request callback. */
static size_t		 act_next_bufsize = PYACT_DEFAULT_MB * PYACT_MB;
static int		 act_registered;
static unsigned long	 act_thread_ident;

/* GIL-protected: consumers (lists of callables) and record types by kind. */
static PyObject		*act_consumers[MSPTI_ACTIVITY_KIND_COUNT];
static PyObject		*act_types[MSPTI_ACTIVITY_KIND_COUNT];
static int		 act_refs[MSPTI_ACTIVITY_KIND_COUNT];
static unsigned long long act_errors, act_records;
static unsigned long long act_kind_records[MSPTI_ACTIVITY_KIND_COUNT];
/* Records in buffers the extension could not queue (act_mtx). */
static unsigned long long act_kind_lost[MSPTI_ACTIVITY_KIND_COUNT];

static size_t pyact_record_size(uint32_t kind);

/* Counts the records of a buffer that cannot be delivered (act_mtx). */
static void
pyact_count_lost(uint8_t *buffer, size_t valid)
{
	msptiActivity *rec = NULL;

	while (msptiActivityGetNextRecord(buffer, valid, &rec) ==
	    MSPTI_SUCCESS && rec != NULL)
		if ((uint32_t)rec->kind < MSPTI_ACTIVITY_KIND_COUNT)
			act_kind_lost[rec->kind]++;
}

/* Called by libmspti when it needs a buffer: never takes the GIL. */
static void
pyact_request_cb(uint8_t **buffer, size_t *size, size_t *max)
{
	void	*p = NULL;
	size_t	 sz;

	pthread_mutex_lock(&act_mtx);
	sz = act_bufsize;
	pthread_mutex_unlock(&act_mtx);
	if (posix_memalign(&p, 8, sz) != 0)
		p = NULL;
	*buffer = p;
	*size = p != NULL ? sz : 0;
	*max = 0;
}

/* Called by libmspti with a full or flushed buffer: queue it for the
 * delivery thread. */
static void
pyact_complete_cb(uint8_t *buffer, size_t size, size_t valid)
{
	struct pyact_buf *b;

	if (buffer == NULL)
		return;
	if (valid == 0 || (b = malloc(sizeof(*b))) == NULL) {
		if (valid != 0) {
			pthread_mutex_lock(&act_mtx);
			act_lost_buffers++;
			pyact_count_lost(buffer, valid);
			pthread_mutex_unlock(&act_mtx);
		}
		free(buffer);
		return;
	}
	b->next = NULL;
	b->data = buffer;
	b->valid = valid;
	pthread_mutex_lock(&act_mtx);
	if (act_tail != NULL)
		act_tail->next = b;
	else
		act_head = b;
	act_tail = b;
	act_queued++;
	pthread_cond_broadcast(&act_cond);
	pthread_mutex_unlock(&act_mtx);
}

static size_t
pyact_record_size(uint32_t kind)
{
	switch (kind) {
	case MSPTI_ACTIVITY_KIND_MARKER:
		return sizeof(msptiActivityMarker);
	case MSPTI_ACTIVITY_KIND_KERNEL:
		return sizeof(msptiActivityKernel);
	case MSPTI_ACTIVITY_KIND_API:
	case MSPTI_ACTIVITY_KIND_ACL_API:
	case MSPTI_ACTIVITY_KIND_NODE_API:
	case MSPTI_ACTIVITY_KIND_RUNTIME_API:
		return sizeof(msptiActivityApi);
	case MSPTI_ACTIVITY_KIND_HCCL:
		return sizeof(msptiActivityHccl);
	case MSPTI_ACTIVITY_KIND_MEMORY:
		return sizeof(msptiActivityMemory);
	case MSPTI_ACTIVITY_KIND_MEMSET:
		return sizeof(msptiActivityMemset);
	case MSPTI_ACTIVITY_KIND_MEMCPY:
		return sizeof(msptiActivityMemcpy);
	case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
		return sizeof(msptiActivityExternalCorrelation);
	case MSPTI_ACTIVITY_KIND_COMMUNICATION:
		return sizeof(msptiActivityCommunication);
	default:
		return 0;
	}
}

static const char *
pyact_str(const char *s)
{
	return s != NULL ? s : "";
}

/* 0xFFFFFFFF (no device, no stream) becomes -1 for Python. */
static long long
pyact_id(uint32_t v)
{
	return v == 0xFFFFFFFFu ? -1 : (long long)v;
}

/* Builds the Python object for one record (a new reference), or NULL with
 * an exception set.  The record types are the data classes registered by
 * the package; they take the fields positionally. */
static PyObject *
pyact_build(PyObject *type, const msptiActivity *rec)
{
	uint32_t kind = (uint32_t)rec->kind;

	switch (kind) {
	case MSPTI_ACTIVITY_KIND_KERNEL: {
		const msptiActivityKernel *k = (const void *)rec;

		return PyObject_CallFunction(type, "IKKLLKss", kind,
		    (unsigned long long)k->start, (unsigned long long)k->end,
		    pyact_id(k->ds.deviceId), pyact_id(k->ds.streamId),
		    (unsigned long long)k->correlationId, pyact_str(k->type),
		    pyact_str(k->name));
	}
	case MSPTI_ACTIVITY_KIND_HCCL: {
		const msptiActivityHccl *h = (const void *)rec;

		return PyObject_CallFunction(type, "IKKLLdss", kind,
		    (unsigned long long)h->start, (unsigned long long)h->end,
		    pyact_id(h->ds.deviceId), pyact_id(h->ds.streamId),
		    (double)h->bandWidth, pyact_str(h->name),
		    pyact_str(h->commName));
	}
	case MSPTI_ACTIVITY_KIND_COMMUNICATION: {
		const msptiActivityCommunication *c = (const void *)rec;

		return PyObject_CallFunction(type, "IIKLLKKsssK", kind,
		    (unsigned)c->dataType, (unsigned long long)c->count,
		    pyact_id(c->ds.deviceId), pyact_id(c->ds.streamId),
		    (unsigned long long)c->start, (unsigned long long)c->end,
		    pyact_str(c->algType), pyact_str(c->name),
		    pyact_str(c->commName),
		    (unsigned long long)c->correlationId);
	}
	case MSPTI_ACTIVITY_KIND_MARKER: {
		const msptiActivityMarker *m = (const void *)rec;
		msptiObjectId oid = m->objectId;
		long long pid = -1, tid = -1, dev = -1, stream = -1;

		if (m->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_HOST) {
			pid = oid.pt.processId;
			tid = oid.pt.threadId;
		} else {
			dev = pyact_id(oid.ds.deviceId);
			stream = pyact_id(oid.ds.streamId);
		}
		return PyObject_CallFunction(type, "IIIKK(LLLL)ss", kind,
		    (unsigned)m->flag, (unsigned)m->sourceKind,
		    (unsigned long long)m->timestamp,
		    (unsigned long long)m->id, pid, tid, dev, stream,
		    pyact_str(m->name), pyact_str(m->domain));
	}
	default:
		PyErr_Format(PyExc_ValueError, "no Python type for kind %u",
		    kind);
		return NULL;
	}
}

/* Dispatches one record: raw copy to the Profile collector, objects to
 * the Python consumers.  GIL held. */
static void
pyact_dispatch(const msptiActivity *rec, size_t size)
{
	uint32_t	 kind = (uint32_t)rec->kind;
	PyObject	*list, *obj, *cb, *r;
	Py_ssize_t	 i, n;

	act_records++;
	if (kind < MSPTI_ACTIVITY_KIND_COUNT)
		act_kind_records[kind]++;
	if (pyprof_wants(kind))
		pyprof_collect(rec, size);
	if (kind >= MSPTI_ACTIVITY_KIND_COUNT ||
	    (list = act_consumers[kind]) == NULL || act_types[kind] == NULL ||
	    PyList_GET_SIZE(list) == 0)
		return;
	Py_INCREF(list);
	if ((obj = pyact_build(act_types[kind], rec)) == NULL) {
		act_errors++;
		PyErr_WriteUnraisable(act_types[kind]);
		Py_DECREF(list);
		return;
	}
	n = PyList_GET_SIZE(list);
	for (i = 0; i < n && i < PyList_GET_SIZE(list); i++) {
		cb = PyList_GET_ITEM(list, i);
		Py_INCREF(cb);
		if ((r = PyObject_CallOneArg(cb, obj)) == NULL) {
			act_errors++;
			PyErr_WriteUnraisable(cb);
		} else
			Py_DECREF(r);
		Py_DECREF(cb);
	}
	Py_DECREF(obj);
	Py_DECREF(list);
}

/* Walks one completed buffer.  GIL held. */
static void
pyact_process(struct pyact_buf *b)
{
	msptiActivity	*rec = NULL;
	size_t		 sz;

	while (msptiActivityGetNextRecord(b->data, b->valid, &rec) ==
	    MSPTI_SUCCESS && rec != NULL) {
		if ((sz = pyact_record_size((uint32_t)rec->kind)) == 0)
			break;
		pyact_dispatch(rec, sz);
	}
}

static void
pyact_free_list(struct pyact_buf *b)
{
	struct pyact_buf *next;

	for (; b != NULL; b = next) {
		next = b->next;
		free(b->data);
		free(b);
	}
}

/* _mspti.delivery_loop(): the body of the delivery thread.  Returns when
 * _mspti.stop() is called, after delivering everything queued. */
static PyObject *
pyact_delivery_loop(PyObject *self, PyObject *noargs)
{
	struct pyact_buf *list, *b;
	int stop;

	act_thread_ident = PyThread_get_thread_ident();
	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		pthread_mutex_lock(&act_mtx);
		while (act_head == NULL && !act_stopping)
			pthread_cond_wait(&act_cond, &act_mtx);
		list = act_head;
		act_head = act_tail = NULL;
		stop = act_stopping && list == NULL;
		pthread_mutex_unlock(&act_mtx);
		Py_END_ALLOW_THREADS
		if (stop)
			break;
		while ((b = list) != NULL) {
			list = b->next;
			b->next = NULL;
			pyact_process(b);
			pyact_free_list(b);
			pthread_mutex_lock(&act_mtx);
			act_delivered++;
			pthread_cond_broadcast(&act_cond);
			pthread_mutex_unlock(&act_mtx);
		}
	}
	pthread_mutex_lock(&act_mtx);
	act_running = 0;
	pthread_cond_broadcast(&act_cond);
	pthread_mutex_unlock(&act_mtx);
	act_thread_ident = 0;
	Py_RETURN_NONE;
}

/* _mspti.start(): registers the buffer callbacks (once), applies the
 * buffer size, drops stale buffers and marks delivery running; the caller
 * then starts the delivery thread.  Returns an msptiResult. */
static PyObject *
pyact_start(PyObject *self, PyObject *noargs)
{
	struct pyact_buf *stale;
	msptiResult r = MSPTI_SUCCESS;

	if (!act_registered) {
		r = msptiActivityRegisterCallbacks(pyact_request_cb,
		    pyact_complete_cb);
		if (r != MSPTI_SUCCESS)
			return PyLong_FromLong(r);
		act_registered = 1;
	}
	pthread_mutex_lock(&act_mtx);
	act_bufsize = act_next_bufsize;
	stale = act_running ? NULL : act_head;
	if (!act_running) {
		act_head = act_tail = NULL;
		act_queued = act_delivered = 0;
	}
	act_running = 1;
	act_stopping = 0;
	pthread_mutex_unlock(&act_mtx);
	pyact_free_list(stale);
	return PyLong_FromLong(r);
}

/* _mspti.stop(): asks the delivery loop to finish (the caller joins the
 * thread afterwards). */
static PyObject *
pyact_stop(PyObject *self, PyObject *noargs)
{
	pthread_mutex_lock(&act_mtx);
	act_stopping = 1;
	pthread_cond_broadcast(&act_cond);
	pthread_mutex_unlock(&act_mtx);
	Py_RETURN_NONE;
}

/* _mspti.flush_all(): msptiActivityFlushAll, then waits until the delivery
 * thread has handled every buffer queued so far (not when called from the
 * delivery thread itself, which would wait for itself). */
static PyObject *
pyact_flush_all(PyObject *self, PyObject *noargs)
{
	msptiResult r = MSPTI_SUCCESS;
	int wait = PyThread_get_thread_ident() != act_thread_ident;
	int registered = act_registered;
	uint64_t target;

	Py_BEGIN_ALLOW_THREADS
	if (registered)
		r = msptiActivityFlushAll(1);
	if (wait) {
		pthread_mutex_lock(&act_mtx);
		target = act_queued;
		while (act_running && act_delivered < target)
			pthread_cond_wait(&act_cond, &act_mtx);
		pthread_mutex_unlock(&act_mtx);
	}
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(r);
}

static PyObject *
pyact_flush_period(PyObject *self, PyObject *args)
{
	unsigned int ms;
	msptiResult r;

	if (!PyArg_ParseTuple(args, "I", &ms))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = msptiActivityFlushPeriod(ms);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(r);
}

/* _mspti.set_buffer_size(bytes): used from the next start on. */
static PyObject *
pyact_set_buffer_size(PyObject *self, PyObject *args)
{
	Py_ssize_t bytes;

	if (!PyArg_ParseTuple(args, "n", &bytes))
		return NULL;
	if (bytes < 1024) {
		PyErr_SetString(PyExc_ValueError, "buffer too small");
		return NULL;
	}
	act_next_bufsize = (size_t)bytes;
	Py_RETURN_NONE;
}

static int
pyact_kind_arg(PyObject *args, unsigned int *kind)
{
	if (!PyArg_ParseTuple(args, "I", kind))
		return -1;
	if (*kind == 0 || *kind >= MSPTI_ACTIVITY_KIND_COUNT) {
		PyErr_Format(PyExc_ValueError, "bad activity kind %u", *kind);
		return -1;
	}
	return 0;
}

/* _mspti.enable(kind): reference-counted msptiActivityEnable, shared by
 * the monitors and Profile.  Returns the msptiResult. */
static PyObject *
pyact_enable(PyObject *self, PyObject *args)
{
	unsigned int kind;
	msptiResult r = MSPTI_SUCCESS;

	if (pyact_kind_arg(args, &kind) < 0)
		return NULL;
	if (act_refs[kind] == 0)
		r = msptiActivityEnable((msptiActivityKind)kind);
	if (r == MSPTI_SUCCESS)
		act_refs[kind]++;
	return PyLong_FromLong(r);
}

static PyObject *
pyact_disable(PyObject *self, PyObject *args)
{
	unsigned int kind;
	msptiResult r = MSPTI_SUCCESS;

	if (pyact_kind_arg(args, &kind) < 0)
		return NULL;
	if (act_refs[kind] > 0 && --act_refs[kind] == 0)
		r = msptiActivityDisable((msptiActivityKind)kind);
	return PyLong_FromLong(r);
}

static PyObject *
pyact_is_enabled(PyObject *self, PyObject *args)
{
	unsigned int kind;

	if (pyact_kind_arg(args, &kind) < 0)
		return NULL;
	return PyBool_FromLong(msptiActivityIsEnabled(
	    (msptiActivityKind)kind));
}

/* _mspti.set_consumers(kind, type, list or None). */
static PyObject *
pyact_set_consumers(PyObject *self, PyObject *args)
{
	unsigned int kind;
	PyObject *type, *list;

	if (!PyArg_ParseTuple(args, "IOO", &kind, &type, &list))
		return NULL;
	if (kind == 0 || kind >= MSPTI_ACTIVITY_KIND_COUNT) {
		PyErr_Format(PyExc_ValueError, "bad activity kind %u", kind);
		return NULL;
	}
	if (list != Py_None && !PyList_Check(list)) {
		PyErr_SetString(PyExc_TypeError, "consumers must be a list");
		return NULL;
	}
	Py_XSETREF(act_types[kind], type == Py_None ? NULL : Py_NewRef(type));
	Py_XSETREF(act_consumers[kind], list == Py_None ? NULL :
	    Py_NewRef(list));
	Py_RETURN_NONE;
}

static PyObject *
pyact_domain(PyObject *args, msptiResult (*fn)(const char *))
{
	const char *name;
	msptiResult r;

	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	r = fn(name);
	return PyLong_FromLong(r);
}

static PyObject *
pyact_enable_domain(PyObject *self, PyObject *args)
{
	return pyact_domain(args, msptiActivityEnableMarkerDomain);
}

static PyObject *
pyact_disable_domain(PyObject *self, PyObject *args)
{
	return pyact_domain(args, msptiActivityDisableMarkerDomain);
}

/* A dict of kind → count over the kinds that have any (new ref). */
static PyObject *
pyact_kind_dict(const unsigned long long *n)
{
	PyObject *d = PyDict_New(), *k, *v;
	unsigned i;

	if (d == NULL)
		return NULL;
	for (i = 1; i < MSPTI_ACTIVITY_KIND_COUNT; i++) {
		if (n[i] == 0)
			continue;
		k = PyLong_FromUnsignedLong(i);
		v = PyLong_FromUnsignedLongLong(n[i]);
		if (k == NULL || v == NULL || PyDict_SetItem(d, k, v) < 0) {
			Py_XDECREF(k);
			Py_XDECREF(v);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(k);
		Py_DECREF(v);
	}
	return d;
}

/*
 * _mspti.stats(): counters since the process started.  delivered and
 * dropped map a kind (int) to a count, kinds with none left out; dropped
 * adds libmspti's msptiActivityGetNumDroppedRecords and the records of
 * buffers this extension could not queue.
 */
static PyObject *
pyact_stats(PyObject *self, PyObject *noargs)
{
	unsigned long long lost, queued, delivered, total = 0, known = 0;
	unsigned long long dropped[MSPTI_ACTIVITY_KIND_COUNT];
	PyObject *dd, *dr, *r;
	size_t n;
	unsigned i;

	pthread_mutex_lock(&act_mtx);
	lost = act_lost_buffers;
	queued = act_queued;
	delivered = act_delivered;
	for (i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; i++)
		dropped[i] = act_kind_lost[i];
	pthread_mutex_unlock(&act_mtx);
	for (i = 1; i < MSPTI_ACTIVITY_KIND_COUNT; i++) {
		n = 0;
		if (msptiActivityGetNumDroppedRecords((msptiActivityKind)i,
		    &n) == MSPTI_SUCCESS) {
			dropped[i] += n;
			known += n;
		}
	}
	/* dropped[0]: records of no known kind, in the total only (read
	 * after the kinds, so the C total covers them). */
	n = 0;
	if (msptiActivityGetNumDroppedRecords(MSPTI_ACTIVITY_KIND_INVALID,
	    &n) == MSPTI_SUCCESS && n > known)
		dropped[0] += n - known;
	for (i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; i++)
		total += dropped[i];
	if ((dd = pyact_kind_dict(act_kind_records)) == NULL)
		return NULL;
	if ((dr = pyact_kind_dict(dropped)) == NULL) {
		Py_DECREF(dd);
		return NULL;
	}
	r = Py_BuildValue("{sKsKsKsKsKsNsNsK}", "callback_errors", act_errors,
	    "records", act_records, "lost_buffers", lost, "buffers_queued",
	    queued, "buffers_delivered", delivered, "delivered", dd,
	    "dropped", dr, "dropped_total", total);
	return r;
}

/* In a forked child: no delivery thread, and the queue holds the
 * parent's records (the parent delivers them). */
static void
pyact_atfork_child(void)
{
	struct pyact_buf *stale = act_head;

	pthread_mutex_init(&act_mtx, NULL);
	pthread_cond_init(&act_cond, NULL);
	act_head = act_tail = NULL;
	act_queued = act_delivered = 0;
	act_running = act_stopping = 0;
	act_thread_ident = 0;
	pyact_free_list(stale);
}

/* _mspti.after_fork(): in a child, disables the kinds the parent's
 * monitors had enabled (they do not run here). */
static PyObject *
pyact_after_fork(PyObject *self, PyObject *noargs)
{
	unsigned i;

	for (i = 1; i < MSPTI_ACTIVITY_KIND_COUNT; i++)
		if (act_refs[i] > 0) {
			act_refs[i] = 0;
			msptiActivityDisable((msptiActivityKind)i);
		}
	Py_RETURN_NONE;
}

PyMethodDef pyact_methods[] = {
	{ "after_fork", pyact_after_fork, METH_NOARGS,
	  "In a forked child: disable the parent's monitored kinds." },
	{ "delivery_loop", pyact_delivery_loop, METH_NOARGS,
	  "Run the delivery loop until stop()." },
	{ "start", pyact_start, METH_NOARGS, "Prepare delivery." },
	{ "stop", pyact_stop, METH_NOARGS, "End the delivery loop." },
	{ "flush_all", pyact_flush_all, METH_NOARGS,
	  "Flush every buffer and wait for its delivery." },
	{ "flush_period", pyact_flush_period, METH_VARARGS,
	  "msptiActivityFlushPeriod(ms)." },
	{ "set_buffer_size", pyact_set_buffer_size, METH_VARARGS,
	  "Buffer size in bytes, from the next start." },
	{ "enable", pyact_enable, METH_VARARGS, "Enable a kind (counted)." },
	{ "disable", pyact_disable, METH_VARARGS,
	  "Disable a kind (counted)." },
	{ "is_enabled", pyact_is_enabled, METH_VARARGS,
	  "msptiActivityIsEnabled(kind)." },
	{ "set_consumers", pyact_set_consumers, METH_VARARGS,
	  "Set the record type and consumer list of a kind." },
	{ "enable_domain", pyact_enable_domain, METH_VARARGS,
	  "msptiActivityEnableMarkerDomain(name)." },
	{ "disable_domain", pyact_disable_domain, METH_VARARGS,
	  "msptiActivityDisableMarkerDomain(name)." },
	{ "stats", pyact_stats, METH_NOARGS, "Delivery counters." },
	{ NULL, NULL, 0, NULL }
};

int
pyact_init(PyObject *module)
{
	static int atfork_done;

	if (!atfork_done && pthread_atfork(NULL, NULL, pyact_atfork_child) == 0)
		atfork_done = 1;
	return pyutil_add_methods(module, pyact_methods);
}

/*
 * pyprof.c - the Profile collector: while collecting, the delivery thread
 * appends every record of the wanted kinds, raw, to one growing buffer;
 * mspti.Profile takes it (as bytes) when a window ends.  The strings the
 * records point to are interned by libmspti for the life of the process,
 * so the bytes stay decodable in this process (profile_records turns
 * them into tuples for the framework-op view of mspti.Profile).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "capture.h"
#include "export.h"
#include "pyext.h"
#include "util.h"

/* GIL-protected (the delivery thread holds the GIL while dispatching). */
static uint32_t	 prof_kinds;	/* bit per msptiActivityKind */
static int	 prof_collecting;
static uint8_t	*prof_buf;
static size_t	 prof_len, prof_cap;
static unsigned long long prof_dropped;

int
pyprof_wants(uint32_t kind)
{
	return prof_collecting && kind < 32 && (prof_kinds & (1u << kind));
}

/* Appends one record; a failed allocation drops it and counts. */
void
pyprof_collect(const msptiActivity *rec, size_t size)
{
	size_t	 ncap;
	uint8_t	*p;

	if (prof_len + size > prof_cap) {
		ncap = prof_cap != 0 ? prof_cap * 2 : 1u << 16;
		while (ncap < prof_len + size)
			ncap *= 2;
		if ((p = realloc(prof_buf, ncap)) == NULL) {
			prof_dropped++;
			return;
		}
		prof_buf = p;
		prof_cap = ncap;
	}
	memcpy(prof_buf + prof_len, rec, size);
	prof_len += size;
}

/* _mspti.profile_collect(kinds_mask, on): starts or pauses collection. */
static PyObject *
pyprof_set(PyObject *self, PyObject *args)
{
	unsigned int kinds;
	int on;

	if (!PyArg_ParseTuple(args, "Ip", &kinds, &on))
		return NULL;
	prof_kinds = kinds;
	prof_collecting = on;
	Py_RETURN_NONE;
}

/* _mspti.profile_take() -> (bytes, dropped): what was collected so far,
 * which is then forgotten. */
static PyObject *
pyprof_take(PyObject *self, PyObject *noargs)
{
	PyObject *b;

	b = PyBytes_FromStringAndSize((const char *)prof_buf,
	    (Py_ssize_t)prof_len);
	if (b == NULL)
		return NULL;
	prof_len = 0;
	free(prof_buf);
	prof_buf = NULL;
	prof_cap = 0;
	return Py_BuildValue("(NK)", b, prof_dropped);
}

/* _mspti.dropped_records(kinds_mask) -> the records of those kinds
 * libmspti could not keep since the process started
 * (msptiActivityGetNumDroppedRecords, summed over the kinds). */
static PyObject *
pyprof_dropped(PyObject *self, PyObject *args)
{
	unsigned int kinds;
	unsigned long long total = 0;
	size_t n;

	if (!PyArg_ParseTuple(args, "I", &kinds))
		return NULL;
	for (unsigned k = 1; k < MSPTI_ACTIVITY_KIND_COUNT && k < 32; k++) {
		if (!(kinds & (1u << k)))
			continue;
		n = 0;
		if (msptiActivityGetNumDroppedRecords((msptiActivityKind)k,
		    &n) == MSPTI_SUCCESS)
			total += n;
	}
	return PyLong_FromUnsignedLongLong(total);
}

/* _mspti.capture_write(raw, path, lost=0): writes raw msPTI records as a
 * trace file with lib/capture (the format msptid writes). */
static PyObject *
pyprof_capture_write(PyObject *self, PyObject *args)
{
	Py_buffer	 b;
	const char	*path;
	unsigned long long lost = 0;
	struct capture	*c = NULL;
	msptiActivity	*rec = NULL;
	int		 rc;

	if (!PyArg_ParseTuple(args, "y*s|K", &b, &path, &lost))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = capture_open(path, &c);
	if (rc == 0) {
		while (b.len > 0 && msptiActivityGetNextRecord((uint8_t *)b.buf,
		    (size_t)b.len, &rec) == MSPTI_SUCCESS && rec != NULL)
			if ((rc = capture_add(c, rec)) != 0)
				break;
		if (lost != 0)
			capture_lost(c, lost);
		if (capture_close(c) != 0 && rc == 0)
			rc = -EIO;
	}
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&b);
	if (rc != 0) {
		PyErr_Format(PyExc_OSError, "capture %s: %s", path,
		    analysis_strerror(rc));
		return NULL;
	}
	Py_RETURN_NONE;
}

/* _mspti.profile_records(raw) -> [tuple]: the records of raw msPTI bytes
 * the framework-op view needs, as tuples that start with the kind:
 *   KERNEL   (2, start, end, device, stream, correlation, type, name)
 *   API...   (3|10|11|12, start, end, pid, tid, correlation, name)
 *   MEMORY   (5, op, memkind, correlation, start, end, address, bytes,
 *             device)
 *   MEMCPY   (7, copykind, bytes, start, end, device, stream, correlation)
 *   EXTERNAL (8, external kind, external id, correlation)
 *   HCCL     (4, start, end, device, stream, bandwidth, name, comm)
 * Other kinds are left out. */
static PyObject *
pyprof_str(const char *s)
{
	return PyUnicode_DecodeUTF8(s != NULL ? s : "", s != NULL ?
	    (Py_ssize_t)strlen(s) : 0, "replace");
}

static PyObject *
pyprof_record(const msptiActivity *rec)
{
	switch ((uint32_t)rec->kind) {
	case MSPTI_ACTIVITY_KIND_KERNEL: {
		const msptiActivityKernel *k = (const void *)rec;

		return Py_BuildValue("(IKKIIKNN)", (unsigned)k->kind,
		    (unsigned long long)k->start, (unsigned long long)k->end,
		    (unsigned)k->ds.deviceId, (unsigned)k->ds.streamId,
		    (unsigned long long)k->correlationId, pyprof_str(k->type),
		    pyprof_str(k->name));
	}
	case MSPTI_ACTIVITY_KIND_API:
	case MSPTI_ACTIVITY_KIND_ACL_API:
	case MSPTI_ACTIVITY_KIND_NODE_API:
	case MSPTI_ACTIVITY_KIND_RUNTIME_API: {
		const msptiActivityApi *a = (const void *)rec;

		return Py_BuildValue("(IKKIIKN)", (unsigned)a->kind,
		    (unsigned long long)a->start, (unsigned long long)a->end,
		    (unsigned)a->pt.processId, (unsigned)a->pt.threadId,
		    (unsigned long long)a->correlationId, pyprof_str(a->name));
	}
	case MSPTI_ACTIVITY_KIND_MEMORY: {
		const msptiActivityMemory *m = (const void *)rec;

		return Py_BuildValue("(IIIKKKKKI)", (unsigned)m->kind,
		    (unsigned)m->memoryOperationType, (unsigned)m->memoryKind,
		    (unsigned long long)m->correlationId,
		    (unsigned long long)m->start, (unsigned long long)m->end,
		    (unsigned long long)m->address,
		    (unsigned long long)m->bytes, (unsigned)m->deviceId);
	}
	case MSPTI_ACTIVITY_KIND_MEMCPY: {
		const msptiActivityMemcpy *c = (const void *)rec;

		return Py_BuildValue("(IIKKKIIK)", (unsigned)c->kind,
		    (unsigned)c->copyKind, (unsigned long long)c->bytes,
		    (unsigned long long)c->start, (unsigned long long)c->end,
		    (unsigned)c->deviceId, (unsigned)c->streamId,
		    (unsigned long long)c->correlationId);
	}
	case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const msptiActivityExternalCorrelation *x = (const void *)rec;

		return Py_BuildValue("(IIKK)", (unsigned)x->kind,
		    (unsigned)x->externalKind,
		    (unsigned long long)x->externalId,
		    (unsigned long long)x->correlationId);
	}
	case MSPTI_ACTIVITY_KIND_HCCL: {
		const msptiActivityHccl *h = (const void *)rec;

		return Py_BuildValue("(IKKIIdNN)", (unsigned)h->kind,
		    (unsigned long long)h->start, (unsigned long long)h->end,
		    (unsigned)h->ds.deviceId, (unsigned)h->ds.streamId,
		    h->bandWidth, pyprof_str(h->name), pyprof_str(h->commName));
	}
	default:
		Py_RETURN_NONE;
	}
}

static PyObject *
pyprof_records(PyObject *self, PyObject *args)
{
	Py_buffer	 b;
	msptiActivity	*rec = NULL;
	PyObject	*list, *t;

	if (!PyArg_ParseTuple(args, "y*", &b))
		return NULL;
	if ((list = PyList_New(0)) == NULL)
		goto out;
	while (b.len > 0 && msptiActivityGetNextRecord((uint8_t *)b.buf,
	    (size_t)b.len, &rec) == MSPTI_SUCCESS && rec != NULL) {
		if ((t = pyprof_record(rec)) == NULL) {
			Py_CLEAR(list);
			break;
		}
		if (t != Py_None && PyList_Append(list, t) != 0) {
			Py_DECREF(t);
			Py_CLEAR(list);
			break;
		}
		Py_DECREF(t);
	}
out:
	PyBuffer_Release(&b);
	return list;
}

/* _mspti.ext_push(id) / ext_pop(): the calling thread's external
 * correlation id (kind CUSTOM0) around a framework op, so the API records
 * of the launches it makes carry it.  Cheap: a thread-local stack in
 * libmspti; without interposition nothing reads it. */
static PyObject *
pyprof_ext_push(PyObject *self, PyObject *arg)
{
	unsigned long long id = PyLong_AsUnsignedLongLong(arg);

	if (id == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	msptiActivityPushExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, (uint64_t)id);
	Py_RETURN_NONE;
}

static PyObject *
pyprof_ext_pop(PyObject *self, PyObject *noargs)
{
	uint64_t id = 0;

	msptiActivityPopExternalCorrelationId(
	    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
	Py_RETURN_NONE;
}

/* _mspti.session_kinds() -> the kinds mask a daemon session asks of this
 * process (bit 13: framework ops). */
static PyObject *
pyprof_session_kinds(PyObject *self, PyObject *noargs)
{
	return PyLong_FromUnsignedLong(msptiExtSessionKinds());
}

/* mspti._mspti.Analysis: one analysis_run over trace files. */
struct pyprof_analysis {
	PyObject_HEAD
	struct analysis	*a;
};

static void
pyprof_analysis_dealloc(PyObject *self)
{
	struct pyprof_analysis *pa = (struct pyprof_analysis *)self;

	analysis_free(pa->a);
	Py_TYPE(self)->tp_free(self);
}

/* Analysis(paths, opts): opts may set top_n, step_marker, data_marker,
 * world_size. */
static int
pyprof_analysis_init(PyObject *self, PyObject *args, PyObject *kw)
{
	struct pyprof_analysis *pa = (struct pyprof_analysis *)self;
	struct analysis_opts o;
	PyObject *paths, *opts = NULL, *v, *seq = NULL;
	Py_ssize_t i;
	const char *path;
	int rc;

	if (!PyArg_ParseTuple(args, "O|O!", &paths, &PyDict_Type, &opts))
		return -1;
	analysis_opts_init(&o);
	if (opts != NULL) {
		if ((v = PyDict_GetItemString(opts, "top_n")) != NULL &&
		    (o.top_n = (unsigned)PyLong_AsUnsignedLong(v), PyErr_Occurred()))
			return -1;
		if ((v = PyDict_GetItemString(opts, "world_size")) != NULL &&
		    (o.world_size = (int)PyLong_AsLong(v), PyErr_Occurred()))
			return -1;
		/* The strings live in opts, which outlives analysis_run below. */
		if ((v = PyDict_GetItemString(opts, "step_marker")) != NULL &&
		    (o.step_marker = PyUnicode_AsUTF8(v)) == NULL)
			return -1;
		if ((v = PyDict_GetItemString(opts, "data_marker")) != NULL &&
		    (o.data_marker = PyUnicode_AsUTF8(v)) == NULL)
			return -1;
	}
	analysis_free(pa->a);
	if ((pa->a = analysis_new(&o)) == NULL) {
		PyErr_NoMemory();
		return -1;
	}
	if ((seq = PySequence_Fast(paths, "paths must be a sequence")) == NULL)
		return -1;
	for (i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		v = PySequence_Fast_GET_ITEM(seq, i);
		if ((path = PyUnicode_AsUTF8(v)) == NULL)
			goto fail;
		/* An unreadable file is also a warning of the analysis. */
		if ((rc = analysis_add_file(pa->a, path)) != 0) {
			PyErr_Format(PyExc_OSError, "%s: %s", path,
			    analysis_strerror(rc));
			goto fail;
		}
	}
	Py_BEGIN_ALLOW_THREADS
	rc = analysis_run(pa->a);
	Py_END_ALLOW_THREADS
	if (rc != 0) {
		PyErr_Format(PyExc_RuntimeError, "analysis: %s",
		    analysis_strerror(rc));
		goto fail;
	}
	Py_DECREF(seq);
	return 0;
fail:
	Py_XDECREF(seq);
	return -1;
}

static struct analysis *
pyprof_get(PyObject *self)
{
	struct pyprof_analysis *pa = (struct pyprof_analysis *)self;

	if (pa->a == NULL)
		PyErr_SetString(PyExc_RuntimeError, "analysis not initialised");
	return pa->a;
}

/* The rendering of t in format f as a str. */
static PyObject *
pyprof_render(const struct table *t, enum table_format f)
{
	PyObject *s;
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		return PyErr_SetFromErrno(PyExc_OSError);
	if (table_print(t, f, fp) != 0) {
		fclose(fp);
		free(buf);
		PyErr_SetString(PyExc_OSError, "table_print failed");
		return NULL;
	}
	fclose(fp);
	s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
	free(buf);
	return s;
}

static const struct table *
pyprof_section(PyObject *self, PyObject *args)
{
	struct analysis *a;
	const struct table *t;
	const char *name;
	int s;

	if ((a = pyprof_get(self)) == NULL ||
	    !PyArg_ParseTuple(args, "s", &name))
		return NULL;
	if ((s = analysis_section_from_name(name)) < 0) {
		PyErr_Format(PyExc_KeyError, "no report section %s", name);
		return NULL;
	}
	if ((t = analysis_table(a, (enum analysis_section)s)) == NULL)
		PyErr_Format(PyExc_RuntimeError, "section %s has no table",
		    name);
	return t;
}

/* table(section) -> (name, title, columns, cells, text); cells are rows
 * of (text, numeric) pairs. */
static PyObject *
pyprof_table(PyObject *self, PyObject *args)
{
	const struct table *t;
	PyObject *cols = NULL, *rows = NULL, *row, *text = NULL, *cell;
	size_t nc, nr, i, j;
	const char *v;
	bool num;

	if ((t = pyprof_section(self, args)) == NULL)
		return NULL;
	nc = table_ncols(t);
	nr = table_nrows(t);
	if ((cols = PyList_New((Py_ssize_t)nc)) == NULL ||
	    (rows = PyList_New((Py_ssize_t)nr)) == NULL)
		goto fail;
	for (j = 0; j < nc; j++) {
		if ((cell = PyUnicode_FromString(table_col(t, j))) == NULL)
			goto fail;
		PyList_SET_ITEM(cols, (Py_ssize_t)j, cell);
	}
	for (i = 0; i < nr; i++) {
		if ((row = PyTuple_New((Py_ssize_t)nc)) == NULL)
			goto fail;
		PyList_SET_ITEM(rows, (Py_ssize_t)i, row);
		for (j = 0; j < nc; j++) {
			num = false;
			v = table_cell(t, i, j, &num);
			if ((cell = Py_BuildValue("(sO)", v, num ? Py_True :
			    Py_False)) == NULL)
				goto fail;
			PyTuple_SET_ITEM(row, (Py_ssize_t)j, cell);
		}
	}
	if ((text = pyprof_render(t, TABLE_TEXT)) == NULL)
		goto fail;
	return Py_BuildValue("(ssNNN)", table_name(t), table_title(t), cols,
	    rows, text);
fail:
	Py_XDECREF(cols);
	Py_XDECREF(rows);
	return NULL;
}

/* render(section, format) with format "text", "json" or "csv". */
static PyObject *
pyprof_render_section(PyObject *self, PyObject *args)
{
	struct analysis *a;
	const struct table *t;
	const char *name, *fmt = "text";
	enum table_format f;
	int s;

	if ((a = pyprof_get(self)) == NULL ||
	    !PyArg_ParseTuple(args, "s|s", &name, &fmt))
		return NULL;
	if ((s = analysis_section_from_name(name)) < 0) {
		PyErr_Format(PyExc_KeyError, "no report section %s", name);
		return NULL;
	}
	if (strcmp(fmt, "text") == 0)
		f = TABLE_TEXT;
	else if (strcmp(fmt, "json") == 0)
		f = TABLE_JSON;
	else if (strcmp(fmt, "csv") == 0)
		f = TABLE_CSV;
	else {
		PyErr_Format(PyExc_ValueError, "bad format %s", fmt);
		return NULL;
	}
	if ((t = analysis_table(a, (enum analysis_section)s)) == NULL) {
		PyErr_Format(PyExc_RuntimeError, "section %s has no table",
		    name);
		return NULL;
	}
	return pyprof_render(t, f);
}

/* sections() -> the short names of every section, in report order. */
static PyObject *
pyprof_sections(PyObject *self, PyObject *noargs)
{
	PyObject *l, *n;
	const char *name;
	int s;

	if ((l = PyList_New(0)) == NULL)
		return NULL;
	for (s = 0; s < ANALYSIS_SECTION_MAX; s++) {
		if ((name = analysis_section_name((enum analysis_section)s)) ==
		    NULL)
			continue;
		if ((n = PyUnicode_FromString(name)) == NULL ||
		    PyList_Append(l, n) < 0) {
			Py_XDECREF(n);
			Py_DECREF(l);
			return NULL;
		}
		Py_DECREF(n);
	}
	return l;
}

static PyObject *
pyprof_advice(PyObject *self, PyObject *noargs)
{
	const struct analysis_advice *adv;
	struct analysis *a;
	PyObject *l, *t;
	size_t i, n = 0;

	if ((a = pyprof_get(self)) == NULL)
		return NULL;
	adv = analysis_advice(a, &n);
	if ((l = PyList_New(0)) == NULL)
		return NULL;
	for (i = 0; adv != NULL && i < n; i++) {
		t = Py_BuildValue("(sss)", adv[i].severity ? adv[i].severity :
		    "", adv[i].rule ? adv[i].rule : "", adv[i].message ?
		    adv[i].message : "");
		if (t == NULL || PyList_Append(l, t) < 0) {
			Py_XDECREF(t);
			Py_DECREF(l);
			return NULL;
		}
		Py_DECREF(t);
	}
	return l;
}

static PyObject *
pyprof_warnings(PyObject *self, PyObject *noargs)
{
	const char *const *w;
	struct analysis *a;
	PyObject *l, *s;
	size_t i, n = 0;

	if ((a = pyprof_get(self)) == NULL)
		return NULL;
	w = analysis_warnings(a, &n);
	if ((l = PyList_New(0)) == NULL)
		return NULL;
	for (i = 0; w != NULL && i < n && w[i] != NULL; i++) {
		if ((s = PyUnicode_FromString(w[i])) == NULL ||
		    PyList_Append(l, s) < 0) {
			Py_XDECREF(s);
			Py_DECREF(l);
			return NULL;
		}
		Py_DECREF(s);
	}
	return l;
}

static PyObject *
pyprof_totals(PyObject *self, PyObject *noargs)
{
	struct analysis_totals t;
	struct analysis *a;

	if ((a = pyprof_get(self)) == NULL)
		return NULL;
	memset(&t, 0, sizeof(t));
	analysis_get_totals(a, &t);
	return Py_BuildValue("{sKsKsIsIsIsO}", "records",
	    (unsigned long long)t.records, "lost", (unsigned long long)t.lost,
	    "ranks_seen", t.ranks_seen, "world_size", t.world_size, "files",
	    t.files, "partial", t.partial ? Py_True : Py_False);
}

/* report() -> the whole text report, as msptictl report prints it. */
static PyObject *
pyprof_report(PyObject *self, PyObject *noargs)
{
	struct analysis *a;
	const struct table *t;
	PyObject *out;
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;
	int s, n = 0, rc = 0;

	if ((a = pyprof_get(self)) == NULL)
		return NULL;
	if ((fp = open_memstream(&buf, &len)) == NULL)
		return PyErr_SetFromErrno(PyExc_OSError);
	for (s = 0; s < ANALYSIS_SECTION_MAX; s++) {
		if ((t = analysis_table(a, (enum analysis_section)s)) == NULL)
			continue;
		if (n++)
			fputc('\n', fp);
		/* As msptictl report prints it (steps summarized). */
		if (analysis_print_text(a, (enum analysis_section)s, fp) != 0)
			rc = -1;
	}
	fclose(fp);
	if (rc != 0) {
		free(buf);
		PyErr_SetString(PyExc_OSError, "analysis_print_text failed");
		return NULL;
	}
	out = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
	free(buf);
	return out;
}

/* export_chrome(path): Chrome trace JSON of the analysed trace files. */
static PyObject *
pyprof_export_chrome(PyObject *self, PyObject *args)
{
	struct analysis *a;
	const char *path;
	FILE *fp;
	int fd, rc;

	if ((a = pyprof_get(self)) == NULL ||
	    !PyArg_ParseTuple(args, "s", &path))
		return NULL;
	/* A regular file: a FIFO or device is refused at once (fopen
	 * waited for a FIFO's reader, with the GIL held). */
	if ((fd = util_create_output(path, 0666, false)) < 0 ||
	    (fp = fdopen(fd, "w")) == NULL) {
		rc = fd < 0 ? fd : -errno;
		if (fd >= 0)
			close(fd);
		if (rc == -ENXIO)
			return PyErr_Format(PyExc_OSError, "export %s: %s",
			    path, analysis_strerror(rc));
		/* FileNotFoundError, PermissionError, ... as before. */
		errno = -rc;
		return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
	}
	Py_BEGIN_ALLOW_THREADS
	rc = export_chrome(a, fp);
	if (fclose(fp) != 0 && rc == 0)
		rc = -EIO;
	Py_END_ALLOW_THREADS
	if (rc != 0) {
		PyErr_Format(PyExc_OSError, "export %s: %s", path,
		    analysis_strerror(rc));
		return NULL;
	}
	Py_RETURN_NONE;
}

/* export_csv(dir): msprof-style CSV tables into dir. */
static PyObject *
pyprof_export_csv(PyObject *self, PyObject *args)
{
	struct analysis *a;
	const char *dir;
	int rc;

	if ((a = pyprof_get(self)) == NULL ||
	    !PyArg_ParseTuple(args, "s", &dir))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = export_csv(a, dir);
	Py_END_ALLOW_THREADS
	if (rc != 0) {
		PyErr_Format(PyExc_OSError, "export %s: %s", dir,
		    analysis_strerror(rc));
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyMethodDef pyprof_analysis_methods[] = {
	{ "report", pyprof_report, METH_NOARGS,
	  "The whole text report." },
	{ "export_chrome", pyprof_export_chrome, METH_VARARGS,
	  "Write Chrome trace JSON to a path." },
	{ "export_csv", pyprof_export_csv, METH_VARARGS,
	  "Write CSV tables into a directory." },
	{ "table", pyprof_table, METH_VARARGS,
	  "table(section) -> (name, title, columns, cells, text)." },
	{ "render", pyprof_render_section, METH_VARARGS,
	  "render(section, format='text'|'json'|'csv') -> str." },
	{ "sections", pyprof_sections, METH_NOARGS,
	  "Short names of the report sections." },
	{ "advice", pyprof_advice, METH_NOARGS,
	  "Advisor findings: [(severity, rule, message)]." },
	{ "warnings", pyprof_warnings, METH_NOARGS,
	  "Warnings about the input." },
	{ "totals", pyprof_totals, METH_NOARGS, "Record and rank totals." },
	{ NULL, NULL, 0, NULL }
};

static PyTypeObject pyprof_analysis_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "mspti._mspti.Analysis",
	.tp_doc = "Analysis(paths, opts): the engine of msptictl report.",
	.tp_basicsize = sizeof(struct pyprof_analysis),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = pyprof_analysis_init,
	.tp_dealloc = pyprof_analysis_dealloc,
	.tp_methods = pyprof_analysis_methods,
};

PyMethodDef pyprof_methods[] = {
	{ "capture_write", pyprof_capture_write, METH_VARARGS,
	  "Write raw msPTI records as a trace file." },
	{ "profile_collect", pyprof_set, METH_VARARGS,
	  "Start (kinds mask, True) or pause collecting raw records." },
	{ "profile_take", pyprof_take, METH_NOARGS,
	  "Take the collected raw records: (bytes, dropped)." },
	{ "dropped_records", pyprof_dropped, METH_VARARGS,
	  "Records of the kinds in a mask libmspti could not keep." },
	{ "profile_records", pyprof_records, METH_VARARGS,
	  "Decode raw records into tuples (kernels, API calls, ...)." },
	{ "ext_push", pyprof_ext_push, METH_O,
	  "Push an external correlation id (CUSTOM0) on this thread." },
	{ "ext_pop", pyprof_ext_pop, METH_NOARGS,
	  "Pop this thread's external correlation id (CUSTOM0)." },
	{ "session_kinds", pyprof_session_kinds, METH_NOARGS,
	  "Kinds a daemon session asks of this process (bit 13: ops)." },
	{ NULL, NULL, 0, NULL }
};

int
pyprof_init(PyObject *module)
{
	if (PyType_Ready(&pyprof_analysis_type) < 0 ||
	    PyModule_AddObjectRef(module, "Analysis",
	    (PyObject *)&pyprof_analysis_type) < 0)
		return -1;
	return pyutil_add_methods(module, pyprof_methods);
}

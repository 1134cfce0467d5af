/*
 * ascend-pt export, trace_view.json: the event writers the streaming pass
 * uses for kernels and APIs, then per rank its steps, collectives, Overlap
 * Analysis and the metadata events (doc/export.md has the format).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "export-ascendpt.h"

void
ap_us(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

/* One ph:"X" event; ts a string (epoch us overflow a double's exact
 * range), dur a number. */
void
ap_tv_slice(struct ap_st *s, uint32_t pid, uint32_t tid, const char *name,
    uint64_t ts, uint64_t dur, const char *args)
{
	FILE *f = s->tv;

	fputs(s->tv_any ? ",\n" : "\n", f);
	s->tv_any = true;
	fputs("{\"ph\":\"X\",\"name\":", f);
	table_json_str(f, name);
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":\"", pid, tid);
	ap_us(f, ts);
	fputs("\",\"dur\":", f);
	ap_us(f, dur);
	fprintf(f, ",\"args\":{%s}}", args);
}

void
ap_tv_meta(struct ap_st *s, const char *what, uint32_t pid, uint32_t tid,
    const char *key, const char *sval, long ival)
{
	FILE *f = s->tv;

	fputs(s->tv_any ? ",\n" : "\n", f);
	s->tv_any = true;
	fprintf(f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,"
	    "\"args\":{\"%s\":", what, pid, tid, key);
	if (sval != NULL)
		table_json_str(f, sval);
	else
		fprintf(f, "%ld", ival);
	fputs("}}", f);
}

/* ---- trace_view.json: collectives, steps, overlap, metadata ---- */

/* Calls emit for the parts of [s, e) covered by neither u1 nor u2
 * (either may be NULL). */
static void
ap_gaps(const struct an_union *u1, const struct an_union *u2, uint64_t s,
    uint64_t e, void (*emit)(void *, uint64_t, uint64_t), void *arg)
{
	const struct an_union *u[2] = { u1, u2 };
	size_t i[2] = { 0, 0 };
	uint64_t t = s;

	for (int k = 0; k < 2; k++) {
		size_t lo = 0, hi = u[k] ? u[k]->n : 0;

		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (u[k]->e[mid] <= s)
				lo = mid + 1;
			else
				hi = mid;
		}
		i[k] = lo;
	}
	while (t < e) {
		int best = -1;
		uint64_t bs = 0, be = 0;

		for (int k = 0; k < 2; k++) {
			if (u[k] == NULL)
				continue;
			while (i[k] < u[k]->n && u[k]->e[i[k]] <= t)
				i[k]++;
			if (i[k] < u[k]->n && (best < 0 ||
			    u[k]->s[i[k]] < bs)) {
				best = k;
				bs = u[k]->s[i[k]];
				be = u[k]->e[i[k]];
			}
		}
		if (best < 0 || bs >= e) {
			emit(arg, t, e);
			return;
		}
		if (bs > t)
			emit(arg, t, bs);
		if (be > t)
			t = be;
	}
}

struct ap_emit {
	struct ap_st	*s;
	uint32_t	 tid;
	const char	*name;
};

static void
ap_emit_slice(void *arg, uint64_t s, uint64_t e)
{
	struct ap_emit *m = arg;

	if (e > s)
		ap_tv_slice(m->s, AP_PID_OVERLAP, m->tid, m->name, s, e - s,
		    "");
}

static void
ap_overlap(struct an_proc *p, struct ap_st *s)
{
	struct ap_emit m = { s, 0, "Computing" };

	for (size_t i = 0; i < p->u_comp.n; i++)
		ap_emit_slice(&m, p->u_comp.s[i], p->u_comp.e[i]);
	m.tid = 1;
	m.name = "Communication";
	for (size_t i = 0; i < p->u_comm.n; i++)
		ap_emit_slice(&m, p->u_comm.s[i], p->u_comm.e[i]);
	m.tid = 2;
	m.name = "Communication(Not Overlapped)";
	for (size_t i = 0; i < p->u_comm.n; i++)
		ap_gaps(&p->u_comp, NULL, p->u_comm.s[i], p->u_comm.e[i],
		    ap_emit_slice, &m);
	m.tid = 3;
	m.name = "Free";
	for (size_t i = 0; i < p->nres; i++)
		ap_gaps(&p->u_comp, &p->u_comm, p->res[i].start,
		    p->res[i].end, ap_emit_slice, &m);
}

int
ap_trace_view_end(struct ap *x, struct ap_rank *r, struct ap_st *s)
{
	struct an_proc *p = r->p;
	char buf[160], npu[32];
	bool comm = false;

	snprintf(npu, sizeof(npu), "NPU %u", r->device);
	/* Python: the steps, on the main thread. */
	for (size_t i = 0; i < p->nres; i++) {
		if (p->res[i].step < 0)
			continue;
		snprintf(buf, sizeof(buf), "ProfilerStep#%" PRId64,
		    p->res[i].step);
		ap_tv_slice(s, p->pid, p->pid, buf, p->res[i].start,
		    p->res[i].end - p->res[i].start, "");
	}
	for (size_t k = 0; k < p->ncoll[p->cw]; k++) {
		const struct an_coll *c = &p->coll[p->cw][k];
		const struct ap_group *g = ap_group(x, c->comm);
		char args[256];

		if (g == NULL)
			continue;
		ap_hcom_name(x->a, g, c, buf, sizeof(buf));
		snprintf(args, sizeof(args), "\"Task Type\":\"Communication\","
		    "\"group\":\"%s\",\"size(Byte)\":%" PRIu64 ",\"wait(us)\":"
		    "%.3f,\"transit(us)\":%.3f", g->gid, c->bytes,
		    (double)c->wait / 1e3, (double)c->transit / 1e3);
		ap_tv_slice(s, AP_PID_HCCL, 0, buf, c->start, c->end -
		    c->start, args);
		comm = true;
	}
	ap_overlap(p, s);
	ap_tv_meta(s, "process_name", p->pid, 0, "name", "Python", 0);
	ap_tv_meta(s, "process_labels", p->pid, 0, "labels", "CPU", 0);
	ap_tv_meta(s, "process_sort_index", p->pid, 0, "sort_index", NULL, 0);
	snprintf(buf, sizeof(buf), "Thread %u", p->pid);
	ap_tv_meta(s, "thread_name", p->pid, p->pid, "name", buf, 0);
	ap_tv_meta(s, "thread_sort_index", p->pid, p->pid, "sort_index", NULL,
	    0);
	ap_tv_meta(s, "process_name", AP_PID_CANN, 0, "name", "CANN", 0);
	ap_tv_meta(s, "process_labels", AP_PID_CANN, 0, "labels", "CPU", 0);
	ap_tv_meta(s, "process_sort_index", AP_PID_CANN, 0, "sort_index",
	    NULL, 1);
	for (size_t i = 0; i < s->ntids; i++) {
		snprintf(buf, sizeof(buf), "Thread %u", s->tids[i]);
		ap_tv_meta(s, "thread_name", AP_PID_CANN, s->tids[i], "name",
		    buf, 0);
		ap_tv_meta(s, "thread_sort_index", AP_PID_CANN, s->tids[i],
		    "sort_index", NULL, (long)i);
	}
	ap_tv_meta(s, "process_name", AP_PID_HW, 0, "name", "Ascend Hardware",
	    0);
	ap_tv_meta(s, "process_labels", AP_PID_HW, 0, "labels", npu, 0);
	ap_tv_meta(s, "process_sort_index", AP_PID_HW, 0, "sort_index", NULL,
	    2);
	for (size_t i = 0; i < s->nstreams; i++) {
		snprintf(buf, sizeof(buf), "Stream %u", s->streams[i].stream);
		ap_tv_meta(s, "thread_name", AP_PID_HW, s->streams[i].stream,
		    "name", buf, 0);
		ap_tv_meta(s, "thread_sort_index", AP_PID_HW,
		    s->streams[i].stream, "sort_index", NULL, (long)i);
	}
	if (comm) {
		ap_tv_meta(s, "process_name", AP_PID_HCCL, 0, "name", "HCCL",
		    0);
		ap_tv_meta(s, "process_labels", AP_PID_HCCL, 0, "labels", npu,
		    0);
		ap_tv_meta(s, "process_sort_index", AP_PID_HCCL, 0,
		    "sort_index", NULL, 3);
		ap_tv_meta(s, "thread_name", AP_PID_HCCL, 0, "name",
		    "Communication", 0);
		ap_tv_meta(s, "thread_sort_index", AP_PID_HCCL, 0,
		    "sort_index", NULL, 0);
	}
	ap_tv_meta(s, "process_name", AP_PID_OVERLAP, 0, "name",
	    "Overlap Analysis", 0);
	ap_tv_meta(s, "process_labels", AP_PID_OVERLAP, 0, "labels", npu, 0);
	ap_tv_meta(s, "process_sort_index", AP_PID_OVERLAP, 0, "sort_index",
	    NULL, 4);
	{
		static const char *const ov[] = { "Computing", "Communication",
		    "Communication(Not Overlapped)", "Free" };

		for (uint32_t i = 0; i < 4; i++) {
			ap_tv_meta(s, "thread_name", AP_PID_OVERLAP, i, "name",
			    ov[i], 0);
			ap_tv_meta(s, "thread_sort_index", AP_PID_OVERLAP, i,
			    "sort_index", NULL, (long)i);
		}
	}
	fputs("\n]\n", s->tv);
	return 0;
}

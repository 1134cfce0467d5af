/*
 * The timeline walk shared by the Chrome JSON and Perfetto exporters:
 * each trace file is streamed again; records become slices, instants,
 * counters and flows on tracks, handed to an emitter (export-int.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "export.h"
#include "export-int.h"
#include "trace.h"

#define EX_ATTR	__attribute__((visibility("default")))

static uint32_t
ex_dev_pid(const struct an_proc *p, uint32_t device)
{
	uint32_t r = p->rank >= 0 ? (uint32_t)p->rank : p->pid & 0xffff;

	return 0x40000000u + r * 256u + (device & 0xff);
}

static void
ex_track_host(struct ex *x, struct an_proc *p, uint32_t tid,
    struct ex_track *t)
{
	memset(t, 0, sizeof(*t));
	t->pid = p->pid;
	t->tid = tid;
	snprintf(t->pname, sizeof(t->pname), "Rank %d (pid %u) %s", p->rank,
	    p->pid, p->src->host);
	snprintf(t->tname, sizeof(t->tname), "Thread %u", tid);
	t->sort = (uint32_t)(p->rank >= 0 ? p->rank : 0) * 2;
}

static void
ex_track_dev(struct ex *x, struct an_proc *p, uint32_t device,
    uint32_t stream, const char *what, struct ex_track *t)
{
	memset(t, 0, sizeof(*t));
	t->pid = ex_dev_pid(p, device);
	t->tid = stream;
	snprintf(t->pname, sizeof(t->pname), "Rank %d NPU %u", p->rank,
	    device);
	if (what != NULL)
		snprintf(t->tname, sizeof(t->tname), "%s", what);
	else
		snprintf(t->tname, sizeof(t->tname), "Stream %u", stream);
	t->sort = (uint32_t)(p->rank >= 0 ? p->rank : 0) * 2 + 1;
}

static uint64_t
ex_ts(const struct an_proc *p, uint64_t t)
{
	return t + (uint64_t)p->offset;
}

static bool
ex_is_launch(const char *api)
{
	return strstr(api, "Launch") || strstr(api, "Memcpy") ||
	    strstr(api, "Memset") || strncmp(api, "Hccl", 4) == 0;
}

/*
 * For a device-work record: false if it is the host side of a launch
 * (exported as an API slice instead); else its span in host time in *s
 * and *e, its process in *pp and its stream's track in *t.
 */
static bool
ex_device_work(struct ex *x, struct analysis_source *src,
    const struct rec_hdr *h, uint32_t pid, uint32_t device, uint32_t stream,
    uint64_t *s, uint64_t *e, struct an_proc **pp, struct ex_track *t)
{
	if (h->aux & REC_F_HOST_LAUNCH)
		return false;
	if (h->aux & REC_F_DEVICE_CLOCK) {
		*s = an_dev_time(src, device, *s);
		*e = an_dev_time(src, device, *e);
	}
	*pp = an_proc_find(src, pid);
	ex_track_dev(x, *pp, device, stream, NULL, t);
	return true;
}

/* Emits the records of one file. */
static int
ex_file(struct ex *x, struct analysis_source *src)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	struct ex_track t;
	char args[256];
	struct {
		uint64_t id, ts;
		uint32_t name, tid, pid;
	} open[64];
	size_t nopen = 0;
	int rc;

	if ((rc = trace_reader_open(src->path, &r)) != 0)
		return rc;
	while ((rc = trace_reader_next(r, &h)) != 0) {
		struct an_proc *p;

		if (rc < 0) {
			if (rc == -EBADMSG)
				continue;
			break;
		}
		switch (h->type) {
		case REC_API: {
			const struct rec_api *k = (const void *)h;
			const char *n = trace_reader_string(r, k->name_id);

			p = an_proc_find(src, k->pid);
			ex_track_host(x, p, k->tid, &t);
			snprintf(args, sizeof(args), "\"correlation_id\":%"
			    PRIu64, k->correlation_id);
			x->em->slice(x, &t, n ? n : "?", "api",
			    ex_ts(p, k->start), k->end - k->start,
			    n && ex_is_launch(n) ? k->correlation_id : 0, 0,
			    args);
			break;
		}
		case REC_KERNEL: {
			const struct rec_kernel *k = (const void *)h;
			const char *n = trace_reader_string(r, k->name_id);
			const char *ty = trace_reader_string(r, k->type_id);
			uint64_t s = k->start, e = k->end;

			if (!ex_device_work(x, src, h, k->pid, k->device,
			    k->stream, &s, &e, &p, &t))
				break;
			snprintf(args, sizeof(args), "\"correlation_id\":%"
			    PRIu64 ",\"type\":\"%s\",\"task_id\":%u",
			    k->correlation_id, ty ? ty : "", k->task_id);
			x->em->slice(x, &t, n ? n : "?", "kernel", ex_ts(p, s),
			    e > s ? e - s : 0, 0, k->correlation_id, args);
			break;
		}
		case REC_MEMCPY: {
			const struct rec_memcpy *k = (const void *)h;
			static const char *const kinds[] = { "Memcpy",
			    "MemcpyHtoH", "MemcpyHtoD", "MemcpyDtoH",
			    "MemcpyDtoD", "Memcpy" };
			uint64_t s = k->start, e = k->end;

			if (!ex_device_work(x, src, h, k->pid, k->device,
			    k->stream, &s, &e, &p, &t))
				break;
			snprintf(args, sizeof(args), "\"bytes\":%" PRIu64
			    ",\"correlation_id\":%" PRIu64, k->bytes,
			    k->correlation_id);
			x->em->slice(x, &t, kinds[k->copy_kind % 6], "memcpy",
			    ex_ts(p, s), e - s, 0, k->correlation_id, args);
			break;
		}
		case REC_MEMSET: {
			const struct rec_memset *k = (const void *)h;
			uint64_t s = k->start, e = k->end;

			if (!ex_device_work(x, src, h, k->pid, k->device,
			    k->stream, &s, &e, &p, &t))
				break;
			snprintf(args, sizeof(args), "\"bytes\":%" PRIu64,
			    k->bytes);
			x->em->slice(x, &t, "Memset", "memset", ex_ts(p, s),
			    e - s, 0, k->correlation_id, args);
			break;
		}
		case REC_HCCL:
		case REC_COMMUNICATION: {
			const struct rec_communication *k = (const void *)h;
			const struct rec_hccl *hc = (const void *)h;
			uint32_t dev = h->type == REC_HCCL ? hc->device :
			    k->device;
			uint32_t nid = h->type == REC_HCCL ? hc->name_id :
			    k->name_id;
			uint64_t s = k->start, e = k->end;
			const char *n = trace_reader_string(r, nid);

			if (h->aux & REC_F_HOST_LAUNCH)
				break;
			p = an_proc_find(src, h->type == REC_HCCL ? hc->pid :
			    k->pid);
			/* Only the kind the analysis used, not both. */
			if ((h->type == REC_HCCL) != (p->cw == 1))
				break;
			if (h->aux & REC_F_DEVICE_CLOCK) {
				s = an_dev_time(src, dev, s);
				e = an_dev_time(src, dev, e);
			}
			ex_track_dev(x, p, dev, 0xfffffff0u, "Communication",
			    &t);
			args[0] = '\0';
			if (h->type == REC_COMMUNICATION)
				snprintf(args, sizeof(args), "\"count\":%"
				    PRIu64 ",\"correlation_id\":%" PRIu64,
				    k->count, k->correlation_id);
			x->em->slice(x, &t, n ? n : "hccl", "communication",
			    ex_ts(p, s), e - s, 0, h->type == REC_HCCL ? 0 :
			    k->correlation_id, args);
			break;
		}
		case REC_MARKER: {
			const struct rec_marker *m = (const void *)h;
			const char *n = trace_reader_string(r, m->name_id);

			if (m->source_kind != 0)
				break;
			p = an_proc_find(src, m->pid);
			if (m->flag & 2u) {
				if (nopen < 64) {
					open[nopen].id = m->id;
					open[nopen].ts = m->timestamp;
					open[nopen].name = m->name_id;
					open[nopen].tid = m->tid;
					open[nopen++].pid = m->pid;
				}
			} else if (m->flag & 4u) {
				for (size_t i = nopen; i-- > 0;) {
					if (open[i].id != m->id)
						continue;
					n = trace_reader_string(r,
					    open[i].name);
					ex_track_host(x, p, open[i].tid, &t);
					x->em->slice(x, &t, n ? n : "range",
					    "marker", ex_ts(p, open[i].ts),
					    m->timestamp - open[i].ts, 0, 0,
					    "");
					open[i] = open[--nopen];
					break;
				}
			} else {
				ex_track_host(x, p, m->tid, &t);
				x->em->instant(x, &t, n ? n : "mark",
				    ex_ts(p, m->timestamp));
			}
			break;
		}
		case REC_COUNTER: {
			const struct rec_counter *c = (const void *)h;
			const char *n = trace_reader_string(r, c->track_id);

			p = an_proc_find(src, c->pid);
			ex_track_dev(x, p, c->device == REC_NONE ? 0 :
			    c->device, 0, NULL, &t);
			if (c->pid != 0 || c->device == REC_NONE)
				ex_track_host(x, p, 0, &t);
			x->em->counter(x, &t, n ? n : "counter",
			    ex_ts(p, c->timestamp), c->value);
			break;
		}
		case REC_MEMORY: {
			const struct rec_memory *mm = (const void *)h;
			size_t i;

			p = an_proc_find(src, mm->pid);
			for (i = 0; i < x->nmem && x->mem_dev[i] !=
			    mm->device; i++)
				;
			if (i == x->nmem && i < 64) {
				x->mem_dev[i] = mm->device;
				x->mem_cur[i] = 0;
				x->nmem++;
			}
			if (i == 64)
				break;
			x->mem_cur[i] += mm->op == 0 ? (int64_t)mm->bytes :
			    -(int64_t)mm->bytes;
			ex_track_dev(x, p, mm->device, 0, NULL, &t);
			x->em->counter(x, &t, "Device Memory (bytes)",
			    ex_ts(p, mm->end), (double)x->mem_cur[i]);
			break;
		}
		default:
			break;
		}
	}
	trace_reader_close(r);
	return rc < 0 && rc != -EBADMSG ? rc : 0;
}

/* The Overlap Analysis track of one rank: Computing, Communication,
 * Communication(Not Overlapped) and Free segments within each step. */
static void
ex_overlap(struct ex *x, struct an_proc *p)
{
	struct ex_track t;

	if (p->nres == 0)
		return;
	ex_track_dev(x, p, 0xff, 0xfffffff1u, "Overlap Analysis", &t);
	snprintf(t.pname, sizeof(t.pname), "Rank %d Overlap Analysis",
	    p->rank);
	t.pid = ex_dev_pid(p, 0xff);
	for (size_t i = 0; i < p->u_comp.n; i++)
		x->em->slice(x, &t, "Computing", "overlap", p->u_comp.s[i],
		    p->u_comp.e[i] - p->u_comp.s[i], 0, 0, "");
	t.tid = 0xfffffff2u;
	snprintf(t.tname, sizeof(t.tname), "Communication");
	for (size_t i = 0; i < p->u_comm.n; i++) {
		uint64_t s = p->u_comm.s[i], e = p->u_comm.e[i];
		uint64_t ov = an_union_measure(&p->u_comp, s, e);

		x->em->slice(x, &t, ov == 0 ? "Communication(Not Overlapped)" :
		    ov < e - s ? "Communication(Partly Overlapped)" :
		    "Communication", "overlap", s, e - s, 0, 0, "");
	}
	t.tid = 0xfffffff3u;
	snprintf(t.tname, sizeof(t.tname), "Free");
	for (size_t i = 0; i < p->nres; i++) {
		struct an_stepres *r = &p->res[i];
		char name[64];

		snprintf(name, sizeof(name), "Step %" PRId64 " (free %.1f us)",
		    r->step, (double)r->free / 1e3);
		x->em->slice(x, &t, name, "step", r->start, r->end - r->start,
		    0, 0, "");
	}
}

int
ex_walk(struct ex *x)
{
	struct analysis *a = x->a;
	int rc, first = 0;

	if (!a->ran)
		return -EINVAL;
	for (size_t i = 0; i < a->nsrc; i++) {
		if (a->src[i]->path == NULL)
			continue;
		if ((rc = ex_file(x, a->src[i])) != 0 && first == 0)
			first = rc;
	}
	for (size_t i = 0; i < a->nproc; i++)
		ex_overlap(x, a->proc[i]);
	return first;
}

/* ---- Chrome JSON ---- */

struct ex_seen {
	uint64_t	*v;
	size_t		 n, cap;
};

static bool
ex_seen_add(struct ex_seen *s, uint64_t key)
{
	size_t i;

	if (s->n * 2 >= s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		uint64_t *nv = calloc(nc, sizeof(uint64_t));

		if (nv == NULL)
			abort();
		for (size_t j = 0; j < s->cap; j++)
			if (s->v[j]) {
				i = (s->v[j] * 0x9e3779b97f4a7c15ull >> 20) &
				    (nc - 1);
				while (nv[i])
					i = (i + 1) & (nc - 1);
				nv[i] = s->v[j];
			}
		free(s->v);
		s->v = nv;
		s->cap = nc;
	}
	key |= 1ull << 63;
	i = (key * 0x9e3779b97f4a7c15ull >> 20) & (s->cap - 1);
	while (s->v[i]) {
		if (s->v[i] == key)
			return false;
		i = (i + 1) & (s->cap - 1);
	}
	s->v[i] = key;
	s->n++;
	return true;
}

static void
ch_ts(struct ex *x, uint64_t t)
{
	uint64_t rel = t > x->a->base_ts ? t - x->a->base_ts : 0;

	fprintf(x->out, "%" PRIu64 ".%03u", rel / 1000, (unsigned)(rel % 1000));
}

static void
ch_meta(struct ex *x, const struct ex_track *t)
{
	struct ex_seen *seen = x->priv;

	if (ex_seen_add(&seen[0], t->pid)) {
		fprintf(x->out, ",\n{\"ph\":\"M\",\"name\":\"process_name\","
		    "\"pid\":%u,\"tid\":0,\"args\":{\"name\":", t->pid);
		table_json_str(x->out, t->pname);
		fprintf(x->out, "}},\n{\"ph\":\"M\",\"name\":"
		    "\"process_sort_index\",\"pid\":%u,\"tid\":0,\"args\":"
		    "{\"sort_index\":%u}}", t->pid, t->sort);
	}
	if (ex_seen_add(&seen[1], (uint64_t)t->pid << 32 | t->tid)) {
		fprintf(x->out, ",\n{\"ph\":\"M\",\"name\":\"thread_name\","
		    "\"pid\":%u,\"tid\":%u,\"args\":{\"name\":", t->pid,
		    t->tid);
		table_json_str(x->out, t->tname);
		fputs("}}", x->out);
	}
}

static void
ch_slice(struct ex *x, const struct ex_track *t, const char *name,
    const char *cat, uint64_t ts, uint64_t dur, uint64_t flow_out,
    uint64_t flow_in, const char *args)
{
	ch_meta(x, t);
	fputs(",\n{\"ph\":\"X\",\"name\":", x->out);
	table_json_str(x->out, name);
	fprintf(x->out, ",\"cat\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", cat,
	    t->pid, t->tid);
	ch_ts(x, ts);
	fprintf(x->out, ",\"dur\":%" PRIu64 ".%03u,\"args\":{%s}}",
	    dur / 1000, (unsigned)(dur % 1000), args);
	x->events++;
	if (flow_out) {
		fprintf(x->out, ",\n{\"ph\":\"s\",\"id\":%" PRIu64 ",\"name\":"
		    "\"launch\",\"cat\":\"async_task_queue\",\"pid\":%u,"
		    "\"tid\":%u,\"ts\":", flow_out, t->pid, t->tid);
		ch_ts(x, ts);
		fputs("}", x->out);
		x->flows++;
	}
	if (flow_in) {
		fprintf(x->out, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%" PRIu64
		    ",\"name\":\"launch\",\"cat\":\"async_task_queue\","
		    "\"pid\":%u,\"tid\":%u,\"ts\":", flow_in, t->pid, t->tid);
		ch_ts(x, ts);
		fputs("}", x->out);
	}
}

static void
ch_instant(struct ex *x, const struct ex_track *t, const char *name,
    uint64_t ts)
{
	ch_meta(x, t);
	fputs(",\n{\"ph\":\"i\",\"s\":\"t\",\"name\":", x->out);
	table_json_str(x->out, name);
	fprintf(x->out, ",\"pid\":%u,\"tid\":%u,\"ts\":", t->pid, t->tid);
	ch_ts(x, ts);
	fputs("}", x->out);
	x->events++;
}

static void
ch_counter(struct ex *x, const struct ex_track *t, const char *name,
    uint64_t ts, double v)
{
	ch_meta(x, t);
	fputs(",\n{\"ph\":\"C\",\"name\":", x->out);
	table_json_str(x->out, name);
	fprintf(x->out, ",\"pid\":%u,\"ts\":", t->pid);
	ch_ts(x, ts);
	fprintf(x->out, ",\"args\":{\"value\":%.17g}}", v);
	x->events++;
}

static const struct ex_emit ch_emit = { ch_slice, ch_instant, ch_counter };

EX_ATTR int
export_chrome(struct analysis *a, FILE *out)
{
	struct ex_seen seen[2];
	struct ex x;
	size_t nw;
	const char *const *w = analysis_warnings(a, &nw);
	int rc, first = -1;

	memset(&x, 0, sizeof(x));
	memset(seen, 0, sizeof(seen));
	x.a = a;
	x.out = out;
	x.em = &ch_emit;
	x.priv = seen;
	for (size_t i = 0; i < a->nproc; i++)
		if (a->proc[i]->rank >= 0 && (first < 0 ||
		    a->proc[i]->rank < first))
			first = a->proc[i]->rank;
	fprintf(out, "{\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":%"
	    PRIu64 ",\n\"distributedInfo\":{\"backend\":\"hccl\",\"rank\":%d,"
	    "\"world_size\":%d,\"ranks\":[", a->base_ts, first,
	    a->world_size);
	for (size_t i = 0, k = 0; i < a->nproc; i++)
		if (a->proc[i]->rank >= 0)
			fprintf(out, "%s%d", k++ ? "," : "", a->proc[i]->rank);
	fputs("]},\n\"warnings\":[", out);
	for (size_t i = 0; i < nw; i++) {
		if (i)
			fputc(',', out);
		table_json_str(out, w[i]);
	}
	fputs("],\n\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"trace_info\","
	    "\"pid\":0,\"tid\":0,\"args\":{\"producer\":\"msptictl export\"}}",
	    out);
	rc = ex_walk(&x);
	fputs("\n]}\n", out);
	free(seen[0].v);
	free(seen[1].v);
	if (rc == 0 && (fflush(out) != 0 || ferror(out)))
		rc = -EIO;
	return rc;
}

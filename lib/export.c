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
#include "util.h"

#define EX_ATTR	__attribute__((visibility("default")))

/*
 * Track pids.  Host tracks use the real pid; the device side of a process
 * gets a pseudo pid per (rank, device) so viewers show it as its own
 * process; a process without a rank (a launcher, a tool) gets its own
 * range, so it can never take a rank's.  Device metrics belong to a
 * device, not to any process: one pseudo process per (host, device).
 */
#define EX_PID_RANK	0x40000000u	/* + rank * 256 + device */
#define EX_PID_NORANK	0x50000000u	/* + (pid & 0xfffff) * 256 + device */
#define EX_PID_NPU	0x70000000u	/* + host * 256 + device */

static uint32_t
ex_dev_pid(const struct an_proc *p, uint32_t device)
{
	if (p->rank >= 0)
		return EX_PID_RANK + ((uint32_t)p->rank & 0x3fffff) * 256u +
		    (device & 0xff);
	return EX_PID_NORANK + (p->pid & 0xfffff) * 256u + (device & 0xff);
}

/* "Rank 3" or, without a rank, "pid 1234". */
static void
ex_who(const struct an_proc *p, char *buf, size_t n)
{
	if (p->rank >= 0)
		snprintf(buf, n, "Rank %d", p->rank);
	else
		snprintf(buf, n, "pid %u", p->pid);
}

static uint32_t
ex_sort(const struct an_proc *p, uint32_t side)
{
	/* Ranks in order, then processes without one. */
	return (p->rank >= 0 ? (uint32_t)p->rank : 0x100000u +
	    (p->pid & 0xfffff)) * 2 + side;
}

/* The host track of (p, tid): the walk's own copy, valid until the next
 * call (a pointer, not a copy of ~180 bytes per record). */
static const struct ex_track *
ex_track_host(struct ex *x, struct an_proc *p, uint32_t tid)
{
	struct ex_track *t = &x->tc_host;

	if (x->tc_hp == p && x->tc_htid == tid)
		return t;
	memset(t, 0, sizeof(*t));
	t->pid = p->pid;
	t->tid = tid;
	t->os_pid = tid != 0 ? p->pid : 0;
	if (p->rank >= 0)
		snprintf(t->pname, sizeof(t->pname), "Rank %d (pid %u) %s",
		    p->rank, p->pid, p->src->host);
	else
		snprintf(t->pname, sizeof(t->pname), "Process %u %s", p->pid,
		    p->src->host);
	snprintf(t->tname, sizeof(t->tname), "Thread %u", tid);
	t->sort = ex_sort(p, 0);
	x->tc_hp = p;
	x->tc_htid = tid;
	return t;
}

/* The device track of (p, device, stream), as ex_track_host. */
static const struct ex_track *
ex_track_dev(struct ex *x, struct an_proc *p, uint32_t device,
    uint32_t stream, const char *what)
{
	struct ex_track *t = &x->tc_dev;
	char who[32];

	if (x->tc_dp == p && x->tc_ddev == device && x->tc_dstream == stream &&
	    x->tc_dwhat == what)
		return t;
	memset(t, 0, sizeof(*t));
	ex_who(p, who, sizeof(who));
	t->pid = ex_dev_pid(p, device);
	t->tid = stream;
	snprintf(t->pname, sizeof(t->pname), "%s NPU %u", who, device);
	if (what != NULL)
		snprintf(t->tname, sizeof(t->tname), "%s", what);
	else
		snprintf(t->tname, sizeof(t->tname), "Stream %u", stream);
	t->sort = ex_sort(p, 1);
	x->tc_dp = p;
	x->tc_ddev = device;
	x->tc_dstream = stream;
	x->tc_dwhat = what;
	return t;
}

/* The track of a device's own metrics (utilisation, power, ...). */
static void
ex_track_npu(struct ex *x, struct analysis_source *src, uint32_t device,
    struct ex_track *t)
{
	size_t h = 0;

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < x->a->nsrc; i++)
		if (x->a->src[i] == src || strcmp(x->a->src[i]->host,
		    src->host) == 0) {
			h = i;
			break;
		}
	t->pid = EX_PID_NPU + ((uint32_t)h & 0xffff) * 256u + (device & 0xff);
	t->tid = 0;
	if (x->hosts)
		snprintf(t->pname, sizeof(t->pname), "NPU %u %s", device,
		    src->host);
	else
		snprintf(t->pname, sizeof(t->pname), "NPU %u", device);
	snprintf(t->tname, sizeof(t->tname), "Metrics");
	t->sort = 0x400000u + (uint32_t)h * 256u + (device & 0xff);
}

/* A write to the output failed (none: an emitter that writes nothing,
 * bench-report's walk alone). */
static bool
ex_out_failed(const struct ex *x)
{
	return x->out != NULL && ferror(x->out);
}

static uint64_t
ex_ts(const struct an_proc *p, uint64_t t)
{
	return an_clk_ts(&p->clk, t);
}

/*
 * The flow id of a launch: correlation ids count from 1 in every process,
 * so the id is qualified by the process.  Kept under 2^53, the integers a
 * JSON viewer holds exactly: 12 bits of process, 40 of correlation id.
 */
static uint64_t
ex_flow(const struct an_proc *p, uint64_t corr)
{
	if (corr == 0)
		return 0;
	return (uint64_t)((p->idx + 1) & 0xfff) << 40 |
	    (corr & 0xffffffffffull);
}

/* The unit of a daemon metric track (daemon/metrics.c names them). */
static const char *
ex_metric_unit(const char *name)
{
	static const struct {
		const char *name, *unit;
	} u[] = {
		{ "npu.util", "%" }, { "npu.mem.used", "bytes" },
		{ "npu.mem.total", "bytes" }, { "npu.power", "W" },
		{ "npu.temp", "C" }, { "cpu.percent", "%" },
		{ "mem.rss", "bytes" },
	};

	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (strcmp(name, u[i].name) == 0)
			return u[i].unit;
	return NULL;
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
    uint64_t *s, uint64_t *e, struct an_proc **pp,
    const struct ex_track **t)
{
	if (h->aux & REC_F_HOST_LAUNCH)
		return false;
	if (h->aux & REC_F_DEVICE_CLOCK) {
		*s = an_dev_time(src, device, *s);
		*e = an_dev_time(src, device, *e);
	}
	*pp = an_proc_find(src, pid);
	*t = ex_track_dev(x, *pp, device, stream, NULL);
	return true;
}

static char *
ex_lit(char *o, const char *s)
{
	size_t n = strlen(s);

	memcpy(o, s, n);
	return o + n;
}

/* A numeric argument; key is a string literal. */
#define EX_ARG_NUM(a, k, val) ((a)->key = (k), (a)->klen = sizeof(k) - 1, \
	(a)->kind = EX_ARG_U64, (a)->v.u = (val))

static void
ex_grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;
	size_t nc;

	if (n < *cap)
		return;
	nc = *cap ? *cap * 2 : 64;
	if ((nv = realloc(*v, nc * size)) == NULL)
		abort();
	*v = nv;
	*cap = nc;
}

/* MSTX host ranges: START kept until the END of the same (pid, id). */
static void
ex_marker(struct ex *x, struct analysis_source *src, struct trace_reader *r,
    const struct rec_marker *m)
{
	struct an_proc *p;
	const struct ex_track *t;
	const char *n;

	if (m->source_kind != 0)
		return;		/* device copies of host ranges */
	p = an_proc_find(src, m->pid);
	if (m->flag & 2u) {
		if (x->nopen == AN_OPEN_MAX) {
			/* As the analysis: the oldest half is given up. */
			memmove(x->open, x->open + AN_OPEN_MAX / 2,
			    (AN_OPEN_MAX / 2) * sizeof(*x->open));
			x->nopen -= AN_OPEN_MAX / 2;
		}
		ex_grow((void **)&x->open, &x->copen, x->nopen,
		    sizeof(*x->open));
		x->open[x->nopen++] = (struct ex_open){ m->id, m->timestamp,
		    m->name_id, m->tid, m->pid };
		return;
	}
	if (m->flag & 4u) {
		for (size_t i = x->nopen; i-- > 0;) {
			struct ex_open o = x->open[i];

			if (o.id != m->id || o.pid != m->pid)
				continue;
			x->open[i] = x->open[--x->nopen];
			/* A withdrawn step range (record.h) is no step. */
			n = trace_reader_string(r, m->domain_id);
			if (m->domain_id != 0 && n != NULL &&
			    strcmp(n, REC_STEPS_WITHDRAWN_DOMAIN) == 0)
				break;
			n = trace_reader_string(r, o.name);
			t = ex_track_host(x, p, o.tid);
			x->em->slice(x, t, n ? n : "range", "marker",
			    ex_ts(p, o.ts), m->timestamp > o.ts ?
			    m->timestamp - o.ts : 0, 0, 0, NULL, 0);
			break;
		}
		return;
	}
	n = trace_reader_string(r, m->name_id);
	t = ex_track_host(x, p, m->tid);
	x->em->instant(x, t, n ? n : "mark", ex_ts(p, m->timestamp));
}

/* Memory in use per (process, device); pinned host memory (no device)
 * is the process's own, on its host track. */
static void
ex_memory(struct ex *x, struct analysis_source *src,
    const struct rec_memory *mm)
{
	struct an_proc *p = an_proc_find(src, mm->pid);
	const struct ex_track *t;
	size_t i;

	for (i = 0; i < x->nmem && (x->mem[i].pid != mm->pid ||
	    x->mem[i].device != mm->device); i++)
		;
	if (i == x->nmem) {
		ex_grow((void **)&x->mem, &x->cmem, x->nmem, sizeof(*x->mem));
		x->mem[i].pid = mm->pid;
		x->mem[i].device = mm->device;
		x->mem[i].cur = 0;
		x->nmem++;
	}
	x->mem[i].cur += mm->op == 0 ? (int64_t)mm->bytes :
	    -(int64_t)mm->bytes;
	if (mm->device == REC_NONE) {
		t = ex_track_host(x, p, 0);
		x->em->counter(x, t, "Pinned Host Memory", "bytes",
		    ex_ts(p, mm->end), (double)x->mem[i].cur);
	} else {
		t = ex_track_dev(x, p, mm->device, 0, NULL);
		x->em->counter(x, t, "Device Memory", "bytes",
		    ex_ts(p, mm->end), (double)x->mem[i].cur);
	}
}

/* Emits the records of one file. */
static int
ex_file(struct ex *x, struct analysis_source *src)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	const struct ex_track *t;
	struct ex_track nt;
	struct ex_arg args[EX_ARGS_MAX];
	int rc;

	if ((rc = trace_reader_open(src->path, &r)) != 0)
		return rc;
	/* Names are literals or the reader's strings: stable until it is
	 * closed (export-int.h). */
	x->gen++;
	x->stable = true;
	if (x->a->o.jobs > 1)
		trace_reader_set_threads(r, x->a->o.jobs - 1);
	x->nopen = 0;
	while ((rc = trace_reader_next(r, &h)) != 0) {
		struct an_proc *p;

		if (rc < 0) {
			if (rc == -EBADMSG)
				continue;
			break;
		}
		/* A write that failed (a full disk) ends the export now,
		 * not after the walk of every record. */
		if ((++x->nrec & 4095) == 0 && ex_out_failed(x)) {
			rc = -EIO;
			break;
		}
		switch (h->type) {
		case REC_API: {
			const struct rec_api *k = (const void *)h;
			const char *n = trace_reader_string(r, k->name_id);

			p = an_proc_find(src, k->pid);
			t = ex_track_host(x, p, k->tid);
			EX_ARG_NUM(&args[0], "correlation_id",
			    k->correlation_id);
			x->em->slice(x, t, n ? n : "?", "api",
			    ex_ts(p, k->start), k->end - k->start,
			    n && ex_is_launch(n) ? ex_flow(p,
			    k->correlation_id) : 0, 0, args, 1);
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
			ty = ty ? ty : "";
			EX_ARG_NUM(&args[0], "correlation_id",
			    k->correlation_id);
			args[1].key = "type";
			args[1].klen = 4;
			args[1].kind = EX_ARG_STR;
			args[1].v.s = ty;
			args[1].slen = EX_SLEN_UNKNOWN;
			EX_ARG_NUM(&args[2], "task_id", k->task_id);
			x->em->slice(x, t, n ? n : "?", "kernel", ex_ts(p, s),
			    e > s ? e - s : 0, 0, ex_flow(p,
			    k->correlation_id), args, 3);
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
			EX_ARG_NUM(&args[0], "bytes", k->bytes);
			EX_ARG_NUM(&args[1], "correlation_id",
			    k->correlation_id);
			x->em->slice(x, t, kinds[k->copy_kind % 6], "memcpy",
			    ex_ts(p, s), e > s ? e - s : 0, 0,
			    ex_flow(p, k->correlation_id), args, 2);
			break;
		}
		case REC_MEMSET: {
			const struct rec_memset *k = (const void *)h;
			uint64_t s = k->start, e = k->end;

			if (!ex_device_work(x, src, h, k->pid, k->device,
			    k->stream, &s, &e, &p, &t))
				break;
			EX_ARG_NUM(&args[0], "bytes", k->bytes);
			EX_ARG_NUM(&args[1], "correlation_id",
			    k->correlation_id);
			x->em->slice(x, t, "Memset", "memset", ex_ts(p, s),
			    e > s ? e - s : 0, 0, ex_flow(p,
			    k->correlation_id), args, 2);
			break;
		}
		case REC_HCCL:
		case REC_COMMUNICATION: {
			const struct rec_communication *k = (const void *)h;
			const struct rec_hccl *hc = (const void *)h;
			bool is_h = h->type == REC_HCCL;
			uint32_t dev = is_h ? hc->device : k->device;
			uint32_t nid = is_h ? hc->name_id : k->name_id;
			uint64_t s = is_h ? hc->start : k->start;
			uint64_t e = is_h ? hc->end : k->end;
			uint64_t corr = is_h ? hc->correlation_id :
			    k->correlation_id;
			const char *n = trace_reader_string(r, nid);

			if (h->aux & REC_F_HOST_LAUNCH)
				break;
			p = an_proc_find(src, is_h ? hc->pid : k->pid);
			/* Only the kind the analysis used, not both. */
			if (is_h != (p->cw == 1))
				break;
			if (h->aux & REC_F_DEVICE_CLOCK) {
				s = an_dev_time(src, dev, s);
				e = an_dev_time(src, dev, e);
			}
			t = ex_track_dev(x, p, dev, 0xfffffff0u,
			    "Communication");
			if (is_h) {
				args[0].key = "bandwidth_gbps";
				args[0].klen = 14;
				args[0].kind = EX_ARG_DBL3;
				args[0].v.d = hc->bandwidth;
			} else
				EX_ARG_NUM(&args[0], "count", k->count);
			EX_ARG_NUM(&args[1], "correlation_id", corr);
			x->em->slice(x, t, n ? n : "hccl", "communication",
			    ex_ts(p, s), e > s ? e - s : 0, 0,
			    ex_flow(p, corr), args, 2);
			break;
		}
		case REC_MARKER:
			ex_marker(x, src, r, (const void *)h);
			break;
		case REC_COUNTER: {
			const struct rec_counter *c = (const void *)h;
			const char *n = trace_reader_string(r, c->track_id);

			n = n ? n : "counter";
			if (c->pid == 0) {
				/* A device's metric: its own track. */
				ex_track_npu(x, src, c->device == REC_NONE ?
				    0 : c->device, &nt);
				x->em->counter(x, &nt, n, ex_metric_unit(n),
				    an_clk_ts(&src->clk, c->timestamp),
				    c->value);
				break;
			}
			p = an_proc_find(src, c->pid);
			if (c->device == REC_NONE)
				t = ex_track_host(x, p, 0);
			else
				t = ex_track_dev(x, p, c->device, 0, NULL);
			x->em->counter(x, t, n, ex_metric_unit(n),
			    ex_ts(p, c->timestamp), c->value);
			break;
		}
		case REC_MEMORY:
			ex_memory(x, src, (const void *)h);
			break;
		default:
			break;
		}
	}
	x->stable = false;
	trace_reader_close(r);
	return rc < 0 && rc != -EBADMSG ? rc : 0;
}

/* The Overlap Analysis track of one process with steps: Computing,
 * Communication, Communication(Not Overlapped) and Free segments. */
static void
ex_overlap(struct ex *x, struct an_proc *p)
{
	struct ex_track t;
	char who[32];

	if (p->nres == 0)
		return;
	t = *ex_track_dev(x, p, 0xff, 0xfffffff1u, "Overlap Analysis");
	ex_who(p, who, sizeof(who));
	snprintf(t.pname, sizeof(t.pname), "%s Overlap Analysis", who);
	/* A write that failed stops it, as it stops the walk. */
	for (size_t i = 0; i < p->u_comp.n; i++) {
		if ((i & 4095) == 4095 && ex_out_failed(x))
			return;
		x->em->slice(x, &t, "Computing", "overlap", p->u_comp.s[i],
		    p->u_comp.e[i] - p->u_comp.s[i], 0, 0, NULL, 0);
	}
	t.tid = 0xfffffff2u;
	snprintf(t.tname, sizeof(t.tname), "Communication");
	for (size_t i = 0; i < p->u_comm.n; i++) {
		uint64_t s = p->u_comm.s[i], e = p->u_comm.e[i];
		uint64_t ov = an_union_measure(&p->u_comp, s, e);

		if ((i & 4095) == 4095 && ex_out_failed(x))
			return;

		x->em->slice(x, &t, ov == 0 ? "Communication(Not Overlapped)" :
		    ov < e - s ? "Communication(Partly Overlapped)" :
		    "Communication", "overlap", s, e - s, 0, 0, NULL, 0);
	}
	t.tid = 0xfffffff3u;
	snprintf(t.tname, sizeof(t.tname), "Free");
	for (size_t i = 0; i < p->nres; i++) {
		struct an_stepres *r = &p->res[i];
		char name[64];

		if (r->step < 0)
			snprintf(name, sizeof(name), "Whole capture (free "
			    "%.1f us)", (double)r->free / 1e3);
		else
			snprintf(name, sizeof(name), "Step %" PRId64
			    " (free %.1f us)", r->step, (double)r->free / 1e3);
		x->em->slice(x, &t, name, "step", r->start, r->end - r->start,
		    0, 0, NULL, 0);
	}
}

int
ex_walk(struct ex *x)
{
	struct analysis *a = x->a;
	int rc, first = 0;

	if (!a->ran)
		return -EINVAL;
	for (size_t i = 1; i < a->nsrc; i++)
		if (strcmp(a->src[i]->host, a->src[0]->host) != 0)
			x->hosts = true;
	for (size_t i = 0; i < a->nsrc; i++) {
		if (a->src[i]->path == NULL)
			continue;
		if ((rc = ex_file(x, a->src[i])) != 0 && first == 0)
			first = rc;
		if (rc == -EIO)
			break;
	}
	for (size_t i = 0; i < a->nproc && first != -EIO; i++) {
		if (ex_out_failed(x)) {
			first = first ? first : -EIO;
			break;
		}
		ex_overlap(x, a->proc[i]);
	}
	free(x->mem);
	free(x->open);
	x->mem = NULL;
	x->open = NULL;
	x->nmem = x->cmem = x->nopen = x->copen = 0;
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

/*
 * The Chrome writer formats into its own buffer (integers by hand, no
 * printf per field) and hands it to stdio in large writes.
 */
#define CH_BUF_SIZE	(1u << 18)

struct ch {
	struct ex_seen	 seen[2];
	char		*b;
	size_t		 n;
	FILE		*f;
	/* ,"pid":P,"tid":T of the last track written. */
	uint32_t	 pt_pid, pt_tid;
	bool		 pt_ok;
	char		 pt[48];
	size_t		 ptn;
	/* Tracks whose metadata is written, by (pid, tid), direct-mapped
	 * in front of seen[] (a host and a device track alternate). */
	struct {
		uint32_t	 pid, tid;
		bool		 ok;
	}		 mc[16];
	/* ch_clean_len of the walk's stable strings (ex.stable) by
	 * pointer, for this ex.gen. */
	struct {
		const char	*p;
		unsigned	 gen;
		int32_t		 len;
	}		 lc[64];
};

static inline void
ch_flush(struct ch *c)
{
	if (c->n > 0)
		fwrite(c->b, 1, c->n, c->f);
	c->n = 0;
}

/* Room for n more bytes (n <= CH_BUF_SIZE). */
static inline char *
ch_room(struct ch *c, size_t n)
{
	if (c->n + n > CH_BUF_SIZE)
		ch_flush(c);
	return c->b + c->n;
}

static inline void
ch_put(struct ch *c, const char *s, size_t n)
{
	if (n > CH_BUF_SIZE / 2) {
		ch_flush(c);
		fwrite(s, 1, n, c->f);
		return;
	}
	memcpy(ch_room(c, n), s, n);
	c->n += n;
}

#define CH_LIT(c, s)	ch_put((c), (s), sizeof(s) - 1)

static inline void
ch_u64(struct ch *c, uint64_t v)
{
	char *o = ch_room(c, 20);

	c->n = (size_t)(util_u64_dec(o, v) - c->b);
}

/* A JSON string, as table_json_str writes it. */
static void
ch_jstr(struct ch *c, const char *s)
{
	const char *p;
	char *o;

	for (p = s; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			break;
	if (*p == '\0') {
		size_t n = (size_t)(p - s);

		if (n + 2 <= CH_BUF_SIZE / 2) {
			o = ch_room(c, n + 2);
			*o++ = '"';
			memcpy(o, s, n);
			o[n] = '"';
			c->n += n + 2;
			return;
		}
	}
	CH_LIT(c, "\"");
	for (p = s; *p; p++) {
		unsigned char u = (unsigned char)*p;

		o = ch_room(c, 6);
		if (u == '"' || u == '\\') {
			o[0] = '\\';
			o[1] = (char)u;
			c->n += 2;
		} else if (u < 0x20) {
			snprintf(o, 7, "\\u%04x", u);
			c->n += 6;
		} else {
			o[0] = (char)u;
			c->n++;
		}
	}
	CH_LIT(c, "\"");
}

/* ns as µs with three decimals. */
static inline void
ch_us(struct ch *c, uint64_t ns)
{
	char *o = ch_room(c, 24);
	unsigned f = (unsigned)(ns % 1000);

	o = util_u64_dec(o, ns / 1000);
	o[0] = '.';
	o[1] = (char)('0' + f / 100);
	o[2] = (char)('0' + f / 10 % 10);
	o[3] = (char)('0' + f % 10);
	c->n = (size_t)(o + 4 - c->b);
}

/* µs since baseTimeNanoseconds; samples taken before the first record
 * (a launcher's counters) are negative, not piled up at 0. */
static void
ch_ts(struct ex *x, uint64_t t)
{
	struct ch *c = x->priv;
	uint64_t b = x->a->base_ts;

	if (t >= b)
		ch_us(c, t - b);
	else {
		CH_LIT(c, "-");
		ch_us(c, b - t);
	}
}

/* c->pt = ,"pid":P,"tid":T of t. */
static inline void
ch_pidtid_set(struct ch *c, const struct ex_track *t)
{
	if (!c->pt_ok || c->pt_pid != t->pid || c->pt_tid != t->tid) {
		char *o = util_u64_dec(ex_lit(c->pt, ",\"pid\":"), t->pid);

		o = util_u64_dec(ex_lit(o, ",\"tid\":"), t->tid);
		c->ptn = (size_t)(o - c->pt);
		c->pt_pid = t->pid;
		c->pt_tid = t->tid;
		c->pt_ok = true;
	}
}

static void
ch_pidtid(struct ch *c, const struct ex_track *t)
{
	ch_pidtid_set(c, t);
	ch_put(c, c->pt, c->ptn);
}

static void
ch_meta(struct ex *x, const struct ex_track *t)
{
	struct ch *c = x->priv;
	unsigned mi = (t->pid * 31u + t->tid) & 15u;

	if (c->mc[mi].ok && c->mc[mi].pid == t->pid && c->mc[mi].tid == t->tid)
		return;
	c->mc[mi].ok = true;
	c->mc[mi].pid = t->pid;
	c->mc[mi].tid = t->tid;
	if (ex_seen_add(&c->seen[0], t->pid)) {
		CH_LIT(c, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
		ch_u64(c, t->pid);
		CH_LIT(c, ",\"tid\":0,\"args\":{\"name\":");
		ch_jstr(c, t->pname);
		CH_LIT(c, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\","
		    "\"pid\":");
		ch_u64(c, t->pid);
		CH_LIT(c, ",\"tid\":0,\"args\":{\"sort_index\":");
		ch_u64(c, t->sort);
		CH_LIT(c, "}}");
	}
	if (ex_seen_add(&c->seen[1], (uint64_t)t->pid << 32 | t->tid)) {
		CH_LIT(c, ",\n{\"ph\":\"M\",\"name\":\"thread_name\"");
		ch_pidtid(c, t);
		CH_LIT(c, ",\"args\":{\"name\":");
		ch_jstr(c, t->tname);
		CH_LIT(c, "}}");
	}
}

/* The args' JSON members, escaped where they need it. */
static void
ch_args(struct ch *c, const struct ex_arg *a, unsigned na)
{
	char num[400];

	for (unsigned i = 0; i < na; i++) {
		if (i)
			CH_LIT(c, ",");
		CH_LIT(c, "\"");
		ch_put(c, a[i].key, a[i].klen);
		CH_LIT(c, "\":");
		if (a[i].kind == EX_ARG_U64)
			ch_u64(c, a[i].v.u);
		else if (a[i].kind == EX_ARG_STR)
			ch_jstr(c, a[i].v.s);
		else
			ch_put(c, num, (size_t)snprintf(num, sizeof(num),
			    "%.3f", a[i].v.d));
	}
}

static void
ch_slice_slow(struct ex *x, const struct ex_track *t, const char *name,
    const char *cat, uint64_t ts, uint64_t dur, uint64_t flow_out,
    uint64_t flow_in, const struct ex_arg *args, unsigned na)
{
	struct ch *c = x->priv;

	ch_meta(x, t);
	CH_LIT(c, ",\n{\"ph\":\"X\",\"name\":");
	ch_jstr(c, name);
	CH_LIT(c, ",\"cat\":\"");
	ch_put(c, cat, strlen(cat));
	CH_LIT(c, "\"");
	ch_pidtid(c, t);
	CH_LIT(c, ",\"ts\":");
	ch_ts(x, ts);
	CH_LIT(c, ",\"dur\":");
	ch_us(c, dur);
	CH_LIT(c, ",\"args\":{");
	ch_args(c, args, na);
	CH_LIT(c, "}}");
	x->events++;
	/*
	 * Flow ends sit 1 ns inside their slice: back-to-back device slices
	 * share a boundary, and a viewer binding "the enclosing slice" at
	 * that instant could pick the one that just ended.
	 */
	if (dur >= 2)
		ts++;
	if (flow_out) {
		CH_LIT(c, ",\n{\"ph\":\"s\",\"id\":");
		ch_u64(c, flow_out);
		CH_LIT(c, ",\"name\":\"launch\",\"cat\":\"async_task_queue\"");
		ch_pidtid(c, t);
		CH_LIT(c, ",\"ts\":");
		ch_ts(x, ts);
		CH_LIT(c, "}");
		x->flows++;
	}
	if (flow_in) {
		CH_LIT(c, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":");
		ch_u64(c, flow_in);
		CH_LIT(c, ",\"name\":\"launch\",\"cat\":\"async_task_queue\"");
		ch_pidtid(c, t);
		CH_LIT(c, ",\"ts\":");
		ch_ts(x, ts);
		CH_LIT(c, "}");
	}
}

/* strlen(s) when s needs no JSON escape, else -1 (one pass). */
static inline ssize_t
ch_clean_len(const char *s)
{
	const char *p;

	for (p = s; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			return -1;
	return p - s;
}

/* ch_clean_len, remembered by pointer for the walk's stable strings. */
static inline ssize_t
ch_clean_len_walk(struct ex *x, struct ch *c, const char *s)
{
	size_t i = (uintptr_t)s * 0x9e3779b97f4a7c15ull >> 58;
	ssize_t n;

	if (x->stable && c->lc[i].p == s && c->lc[i].gen == x->gen)
		return c->lc[i].len;
	n = ch_clean_len(s);
	if (x->stable && n < INT32_MAX) {
		c->lc[i].p = s;
		c->lc[i].gen = x->gen;
		c->lc[i].len = (int32_t)n;
	}
	return n;
}

/* ",\"ts\":" and the µs since baseTimeNanoseconds at o (<= 32 bytes). */
static inline char *
ch_put_ts(char *o, uint64_t base, uint64_t t)
{
	uint64_t d;
	unsigned f;

	memcpy(o, ",\"ts\":", 6);
	o += 6;
	if (t >= base)
		d = t - base;
	else {
		*o++ = '-';
		d = base - t;
	}
	f = (unsigned)(d % 1000);
	o = util_u64_dec(o, d / 1000);
	o[0] = '.';
	o[1] = (char)('0' + f / 100);
	o[2] = (char)('0' + f / 10 % 10);
	o[3] = (char)('0' + f % 10);
	return o + 4;
}

/* A flow start or end at ts, on track t (already current in c->pt). */
static inline char *
ch_put_flow(struct ch *c, char *o, bool start, uint64_t id, uint64_t base,
    uint64_t ts)
{
	static const char s0[] = ",\n{\"ph\":\"s\",\"id\":",
	    f0[] = ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":",
	    mid[] = ",\"name\":\"launch\",\"cat\":\"async_task_queue\"";

	if (start) {
		memcpy(o, s0, sizeof(s0) - 1);
		o += sizeof(s0) - 1;
	} else {
		memcpy(o, f0, sizeof(f0) - 1);
		o += sizeof(f0) - 1;
	}
	o = util_u64_dec(o, id);
	memcpy(o, mid, sizeof(mid) - 1);
	o += sizeof(mid) - 1;
	memcpy(o, c->pt, c->ptn);
	o = ch_put_ts(o + c->ptn, base, ts);
	*o++ = '}';
	return o;
}

static void
ch_slice(struct ex *x, const struct ex_track *t, const char *name,
    const char *cat, uint64_t ts, uint64_t dur, uint64_t flow_out,
    uint64_t flow_in, const struct ex_arg *args, unsigned na)
{
	static const char h0[] = ",\n{\"ph\":\"X\",\"name\":\"",
	    h1[] = "\",\"cat\":\"", h2[] = ",\"dur\":", h3[] = ",\"args\":{";
	struct ch *c = x->priv;
	uint64_t base = x->a->base_ts;
	ssize_t nn = ch_clean_len_walk(x, c, name), sl[EX_ARGS_MAX];
	size_t cn = (size_t)ch_clean_len_walk(x, c, cat), an = 0, need;
	unsigned f;
	char *o;

	ch_meta(x, t);
	/* Per arg: the key, quotes, colon, comma and a 20-digit number or
	 * a clean string; a %.3f double under 1e15 is under 24 bytes. */
	for (unsigned i = 0; i < na && nn >= 0; i++) {
		an += args[i].klen + 24u;
		if (args[i].kind == EX_ARG_STR) {
			if ((sl[i] = ch_clean_len_walk(x, c, args[i].v.s)) < 0)
				nn = -1;
			else
				an += (size_t)sl[i];
		} else if (args[i].kind == EX_ARG_DBL3 &&
		    !(args[i].v.d > -1e15 && args[i].v.d < 1e15))
			nn = -1;
	}
	/* 512: the fixed text of a slice with both flows and 20-digit
	 * numbers is under 420 bytes. */
	need = (nn < 0 ? 0 : (size_t)nn) + cn + an + 512;
	if (nn < 0 || need > CH_BUF_SIZE / 2) {
		ch_slice_slow(x, t, name, cat, ts, dur, flow_out, flow_in,
		    args, na);
		return;
	}
	/* The common case in one reservation: no per-field room checks. */
	ch_pidtid_set(c, t);
	o = ch_room(c, need);
	memcpy(o, h0, sizeof(h0) - 1);
	o += sizeof(h0) - 1;
	memcpy(o, name, (size_t)nn);
	o += nn;
	memcpy(o, h1, sizeof(h1) - 1);
	o += sizeof(h1) - 1;
	memcpy(o, cat, cn);
	o += cn;
	*o++ = '"';
	memcpy(o, c->pt, c->ptn);
	o = ch_put_ts(o + c->ptn, base, ts);
	memcpy(o, h2, sizeof(h2) - 1);
	o += sizeof(h2) - 1;
	f = (unsigned)(dur % 1000);
	o = util_u64_dec(o, dur / 1000);
	o[0] = '.';
	o[1] = (char)('0' + f / 100);
	o[2] = (char)('0' + f / 10 % 10);
	o[3] = (char)('0' + f % 10);
	o += 4;
	memcpy(o, h3, sizeof(h3) - 1);
	o += sizeof(h3) - 1;
	for (unsigned i = 0; i < na; i++) {
		const struct ex_arg *g = &args[i];

		if (i)
			*o++ = ',';
		*o++ = '"';
		memcpy(o, g->key, g->klen);
		o += g->klen;
		*o++ = '"';
		*o++ = ':';
		if (g->kind == EX_ARG_U64)
			o = util_u64_dec(o, g->v.u);
		else if (g->kind == EX_ARG_STR) {
			*o++ = '"';
			memcpy(o, g->v.s, (size_t)sl[i]);
			o += sl[i];
			*o++ = '"';
		} else
			o += snprintf(o, 32, "%.3f", g->v.d);
	}
	*o++ = '}';
	*o++ = '}';
	x->events++;
	/* Flow ends 1 ns inside their slice (ch_slice_slow says why). */
	if (dur >= 2)
		ts++;
	if (flow_out) {
		o = ch_put_flow(c, o, true, flow_out, base, ts);
		x->flows++;
	}
	if (flow_in)
		o = ch_put_flow(c, o, false, flow_in, base, ts);
	c->n = (size_t)(o - c->b);
}

static void
ch_instant(struct ex *x, const struct ex_track *t, const char *name,
    uint64_t ts)
{
	struct ch *c = x->priv;

	ch_meta(x, t);
	CH_LIT(c, ",\n{\"ph\":\"i\",\"s\":\"t\",\"name\":");
	ch_jstr(c, name);
	ch_pidtid(c, t);
	CH_LIT(c, ",\"ts\":");
	ch_ts(x, ts);
	CH_LIT(c, "}");
	x->events++;
}

static void
ch_counter(struct ex *x, const struct ex_track *t, const char *name,
    const char *unit, uint64_t ts, double v)
{
	struct ch *c = x->priv;
	char num[40];
	int n;

	ch_meta(x, t);
	CH_LIT(c, ",\n{\"ph\":\"C\",\"name\":");
	ch_jstr(c, name);
	CH_LIT(c, ",\"pid\":");
	ch_u64(c, t->pid);
	CH_LIT(c, ",\"ts\":");
	ch_ts(x, ts);
	/* The series is named for its unit (Chrome JSON has no unit). */
	CH_LIT(c, ",\"args\":{");
	ch_jstr(c, unit != NULL ? unit : "value");
	n = snprintf(num, sizeof(num), ":%.17g}}", v);
	ch_put(c, num, (size_t)n);
	x->events++;
}

static const struct ex_emit ch_emit = { ch_slice, ch_instant, ch_counter };

EX_ATTR int
export_chrome(struct analysis *a, FILE *out)
{
	struct ch c;
	struct ex x;
	size_t nw;
	const char *const *w = analysis_warnings(a, &nw);
	int rc, first = -1;

	memset(&x, 0, sizeof(x));
	memset(&c, 0, sizeof(c));
	if ((c.b = malloc(CH_BUF_SIZE)) == NULL)
		return -ENOMEM;
	c.f = out;
	x.a = a;
	x.out = out;
	x.em = &ch_emit;
	x.priv = &c;
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
	ch_flush(&c);
	fputs("\n]}\n", out);
	free(c.seen[0].v);
	free(c.seen[1].v);
	free(c.b);
	if (rc == 0 && (fflush(out) != 0 || ferror(out)))
		rc = -EIO;
	return rc;
}


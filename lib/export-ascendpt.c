/*
 * ascend-pt export: the per-rank tree torch_npu's profiler writes and
 * msprof-analyze (cluster, advisor, compare) and MindStudio Insight read.
 * The facts it follows (names, columns, keys, units) are in doc/export.md.
 * One <host>_<pid>_<time>_ascend_pt directory per rank:
 *
 *	profiler_info_<rank>.json  profiler_metadata.json
 *	ASCEND_PROFILER_OUTPUT/  kernel_details.csv op_statistic.csv
 *	    api_statistic.csv step_trace_time.csv trace_view.json
 *	    communication.json communication_matrix.json
 *
 * This file: directories, groups, the streaming pass (kernel_details.csv
 * and the per-record events) and the driver; export-ascendpt-tables.c the
 * statistics, step and metadata files; export-ascendpt-trace.c the rest of
 * trace_view.json; export-ascendpt-comm.c the communication files.
 *
 * The rank's steps, collectives (wait/transit after cross-rank matching),
 * clock offset and overlap unions come from the analysis; kernels and APIs
 * are streamed from the trace files again, as the other exporters do.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis-int.h"
#include "export.h"
#include "export-ascendpt.h"
#include "trace.h"
#include "util.h"

#define AP_ATTR		__attribute__((visibility("default")))


static void
ap_grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;
	size_t nc;

	if (n < *cap)
		return;
	nc = *cap ? *cap * 2 : 16;
	if ((nv = realloc(*v, nc * size)) == NULL)
		abort();
	*v = nv;
	*cap = nc;
}

/* ---- files ---- */

/*
 * A directory the tools accept: created 0755 whatever the umask (they
 * refuse group- or other-writable paths), an existing one reused.  A
 * symlink or a non-directory in the way is an error (ENOTDIR).
 */
static int
ap_mkdir(const char *path, bool follow)
{
	struct stat st;

	if (mkdir(path, 0755) == 0)
		return chmod(path, 0755) == 0 ? 0 : -errno;
	if (errno != EEXIST)
		return -errno;
	if ((follow ? stat(path, &st) : lstat(path, &st)) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	/* Our own rank directories are put right again; the user's -o
	 * keeps its mode. */
	if (!follow && (st.st_mode & 07777) != 0755 && chmod(path, 0755) != 0)
		return -errno;
	return 0;
}

FILE *
ap_fopen(const char *dir, const char *name)
{
	char path[PATH_MAX];
	FILE *f;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	/* 0644 whatever the umask, as the tools' own writers do; a FIFO or
	 * device there is refused at once. */
	if ((fd = util_create_output(path, 0644, true)) < 0) {
		errno = -fd;
		return NULL;
	}
	if ((f = fdopen(fd, "w")) == NULL) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return f;
}

int
ap_fclose(FILE *f)
{
	bool bad = ferror(f) != 0;

	if (fclose(f) != 0 || bad)
		return -EIO;
	return 0;
}

/* Host names may hold only what the tools accept in a path. */
static void
ap_safe(char *dst, size_t n, const char *s)
{
	size_t i = 0;

	for (; *s != '\0' && i + 1 < n; s++)
		dst[i++] = (strchr("_.-", *s) || (*s >= 'a' && *s <= 'z') ||
		    (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')) ?
		    *s : '-';
	dst[i] = '\0';
	if (i == 0)
		snprintf(dst, n, "localhost");
}

/* ---- shared helpers (export-int.h) ---- */

/* msprof-analyze's group id: two string hashes packed in 64 bits. */
static uint64_t
ap_double_hash(const char *s)
{
	uint32_t h1 = 0, h2 = 0;

	for (const unsigned char *c = (const void *)s; *c; c++) {
		h1 = h1 * 29u + *c;
		h2 = h2 * 131u + *c;
	}
	return (uint64_t)h1 << 32 | h2;
}

const struct ap_group *
ap_group(const struct ap *x, uint32_t comm)
{
	for (size_t i = 0; i < x->ng; i++)
		if (x->g[i].comm == comm)
			return &x->g[i];
	return NULL;
}

int
ap_local_rank(const struct ap_group *g, int rank)
{
	for (size_t i = 0; i < g->nranks; i++)
		if (g->ranks[i] == rank)
			return (int)i;
	return -1;
}

/* hcom base names of the HCCL calls, as CANN spells them. */
const char *
ap_hcom_type(const char *api)
{
	static const struct {
		const char *api, *hcom;
	} m[] = {
		{ "HcclAllReduce", "allReduce" },
		{ "HcclAllGather", "allGather" },
		{ "HcclReduceScatter", "reduceScatter" },
		{ "HcclBroadcast", "broadcast" },
		{ "HcclReduce", "reduce" },
		{ "HcclSend", "send" },
		{ "HcclRecv", "receive" },
		{ "HcclAlltoAllV", "alltoallv" },
		{ "HcclAlltoAll", "alltoall" },
		{ "HcclBatchSendRecv", "batchsendrecv" },
		{ "HcclBarrier", "barrier" },
		{ "HcclScatter", "scatter" },
	};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (strcmp(api, m[i].api) == 0)
			return m[i].hcom;
	return NULL;
}

/*
 * The op name every rank of the group gives one collective instance:
 * hcom_<type>__<last 3 digits of the group id>_<n>_1, n counting the
 * group's collectives from 0 (the analysis's cross-rank sequence).
 */
void
ap_hcom_name(const struct analysis *a, const struct ap_group *g,
    const struct an_coll *c, char *buf, size_t n)
{
	const char *api = an_str_get(a, c->name);
	const char *t = ap_hcom_type(api);
	size_t gl = strlen(g->gid);
	char low[64];

	if (t == NULL) {
		/* Unknown call: its name without "Hccl", lower case first. */
		snprintf(low, sizeof(low), "%s", strncmp(api, "Hccl", 4) == 0 ?
		    api + 4 : api);
		if (low[0] >= 'A' && low[0] <= 'Z')
			low[0] = (char)(low[0] - 'A' + 'a');
		t = low;
	}
	snprintf(buf, n, "hcom_%s__%s_%u_1", t, g->gid + (gl > 3 ? gl - 3 : 0),
	    c->seq);
}

/* The index of the step of p holding t, or -1. */
ssize_t
ap_step_of(const struct an_proc *p, uint64_t t)
{
	size_t lo = 0, hi = p->nres;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->res[mid].end <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nres && p->res[lo].start <= t && t < p->res[lo].end)
		return (ssize_t)lo;
	return -1;
}

static int
ap_cmp_int(const void *x, const void *y)
{
	int a = *(const int *)x, b = *(const int *)y;

	return (a > b) - (a < b);
}

/* The communicators of the ranked processes and who is in each. */
static void
ap_groups(struct ap *x)
{
	struct analysis *a = x->a;

	for (size_t i = 0; i < x->nr; i++) {
		struct an_proc *p = x->r[i].p;

		for (size_t k = 0; k < p->ncoll[p->cw]; k++) {
			struct an_coll *c = &p->coll[p->cw][k];
			struct ap_group *g = (struct ap_group *)ap_group(x,
			    c->comm);

			if (g == NULL) {
				x->g = realloc(x->g, (x->ng + 1) *
				    sizeof(*x->g));
				if (x->g == NULL)
					abort();
				g = &x->g[x->ng++];
				memset(g, 0, sizeof(*g));
				g->comm = c->comm;
				snprintf(g->gid, sizeof(g->gid), "%" PRIu64,
				    ap_double_hash(an_str_get(a, c->comm)));
			}
			if (ap_local_rank(g, p->rank) >= 0)
				continue;
			g->ranks = realloc(g->ranks, (g->nranks + 1) *
			    sizeof(int));
			if (g->ranks == NULL)
				abort();
			g->ranks[g->nranks++] = p->rank;
			for (size_t j = 0; j < i; j++)
				if (ap_local_rank(g, x->r[j].p->rank) >= 0 &&
				    strcmp(x->r[j].p->src->host,
				    p->src->host) != 0)
					g->remote = true;
		}
	}
	for (size_t i = 0; i < x->ng; i++)
		an_sort(x->g[i].ranks, x->g[i].nranks, sizeof(int),
		    ap_cmp_int);
}

/* ---- value spellings ---- */

/* Our kernel types ("KERNEL_AICORE") as torch_npu's task types. */
static const char *
ap_core(const char *type)
{
	if (type == NULL)
		return "N/A";
	if (strstr(type, "AICPU") || strstr(type, "AI_CPU"))
		return "AI_CPU";
	if (strstr(type, "AIVEC") || strstr(type, "AI_VECTOR"))
		return "AI_VECTOR_CORE";
	if (strstr(type, "AICORE") || strstr(type, "AI_CORE"))
		return "AI_CORE";
	if (strstr(type, "MIX_AIC"))
		return "MIX_AIC";
	if (strstr(type, "MIX_AIV"))
		return "MIX_AIV";
	return "N/A";
}

/* An API's level, as api_statistic spells it. */
static const char *
ap_level(const struct rec_api *k, const char *name)
{
	if (strncmp(name, "Hccl", 4) == 0 || strncmp(name, "hcom", 4) == 0)
		return "Communication";
	if (k->kind == 12 || strncmp(name, "rt", 2) == 0)
		return "Runtime";
	if (k->kind == 11)
		return "Node";
	return "AscendCL";
}

/* ---- per-record rows ---- */

static struct ap_stat *
ap_stat_get(struct ap_stat **v, size_t *n, size_t *cap, uint32_t name,
    const char *kind)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].name == name && strcmp((*v)[i].kind, kind) == 0)
			return &(*v)[i];
	ap_grow((void **)v, cap, *n, sizeof(**v));
	memset(&(*v)[*n], 0, sizeof(**v));
	(*v)[*n].name = name;
	(*v)[*n].kind = kind;
	return &(*v)[(*n)++];
}

static void
ap_kernel(struct ap *x, struct ap_rank *r, struct ap_st *s,
    struct trace_reader *tr, const struct rec_kernel *k, uint64_t st,
    uint64_t en)
{
	const char *n = trace_reader_string(tr, k->name_id);
	const char *core = ap_core(trace_reader_string(tr, k->type_id));
	ssize_t step = ap_step_of(r->p, st);
	uint64_t wait = 0;
	char args[256];
	size_t i;

	n = n ? n : "";
	for (i = 0; i < s->nstreams && s->streams[i].stream != k->stream; i++)
		;
	if (i == s->nstreams) {
		ap_grow((void **)&s->streams, &s->cstreams, s->nstreams,
		    sizeof(*s->streams));
		s->streams[i].stream = k->stream;
		s->streams[i].last_end = 0;
		s->nstreams++;
	}
	if (s->streams[i].last_end != 0 && st > s->streams[i].last_end)
		wait = st - s->streams[i].last_end;
	s->streams[i].last_end = en;
	if (step >= 0 && r->p->res[step].step >= 0)
		fprintf(s->kd, "%" PRId64, r->p->res[step].step);
	fprintf(s->kd, ",4294967295,%u,%u,", k->task_id, k->stream);
	table_csv_str(s->kd, n, AP_CSV_SPECIAL);
	fputc(',', s->kd);
	table_csv_str(s->kd, n, AP_CSV_SPECIAL);
	fprintf(s->kd, ",N/A,%s,", core);
	ap_us(s->kd, st);
	/* The TAB after the start is torch_npu's (keeps spreadsheets from
	 * rounding it). */
	fputs("\t,", s->kd);
	ap_us(s->kd, en - st);
	fputc(',', s->kd);
	ap_us(s->kd, wait);
	fputs(",0,0,NO,,,,,,,N/A\n", s->kd);
	an_stat_add(&ap_stat_get(&s->ops, &s->nops, &s->cops,
	    an_str_intern(x->a, n), core)->st, en - st);
	s->kernel_time += en - st;
	snprintf(args, sizeof(args), "\"Model Id\":4294967295,\"Task Type\":"
	    "\"%s\",\"Stream Id\":%u,\"Task Id\":%u,\"Correlation ID\":%"
	    PRIu64, core, k->stream, k->task_id, k->correlation_id);
	ap_tv_slice(s, AP_PID_HW, k->stream, n, st, en - st, args);
}

static void
ap_api(struct ap *x, struct ap_rank *r, struct ap_st *s,
    struct trace_reader *tr, const struct rec_api *k)
{
	const char *n = trace_reader_string(tr, k->name_id);
	const char *lv;
	uint64_t st = an_clk_ts(&r->p->clk, k->start);
	char args[160];
	size_t i;

	n = n ? n : "?";
	lv = ap_level(k, n);
	an_stat_add(&ap_stat_get(&s->apis, &s->napis, &s->capis,
	    an_str_intern(x->a, n), lv)->st, k->end - k->start);
	for (i = 0; i < s->ntids && s->tids[i] != k->tid; i++)
		;
	if (i == s->ntids) {
		ap_grow((void **)&s->tids, &s->ctids, s->ntids,
		    sizeof(*s->tids));
		s->tids[s->ntids++] = k->tid;
	}
	snprintf(args, sizeof(args), "\"Level\":\"%s\",\"Thread Id\":%u,"
	    "\"Correlation ID\":%" PRIu64, lv, k->tid, k->correlation_id);
	ap_tv_slice(s, AP_PID_CANN, k->tid, n, st, k->end - k->start, args);
}

static struct ap_rank *
ap_rank_of(struct ap *x, struct an_proc *p)
{
	for (size_t i = 0; i < x->nr; i++)
		if (x->r[i].p == p)
			return &x->r[i];
	return NULL;
}

/* Streams one source's kernels and APIs into its ranks' files. */
static int
ap_pass(struct ap *x, struct ap_st *sts, struct analysis_source *src)
{
	struct trace_reader *tr;
	const struct rec_hdr *h;
	int rc;

	if ((rc = trace_reader_open(src->path, &tr)) != 0)
		return rc;
	while ((rc = trace_reader_next(tr, &h)) != 0) {
		const struct rec_kernel *k = (const void *)h;
		struct ap_rank *r;
		uint64_t s, e;
		uint32_t pid;

		if (rc < 0) {
			if (rc == -EBADMSG)
				continue;
			break;
		}
		if (h->type != REC_KERNEL && h->type != REC_API &&
		    h->type != REC_HCCL && h->type != REC_COMMUNICATION)
			continue;
		pid = record_pid(h);
		if ((r = ap_rank_of(x, an_proc_find(src, pid))) == NULL)
			continue;
		if (h->type == REC_API) {
			ap_api(x, r, &sts[r - x->r], tr, (const void *)h);
			continue;
		}
		if (h->aux & REC_F_HOST_LAUNCH)
			continue;
		if (!r->has_device) {
			/* kernel, hccl and communication records all keep
			 * the device at one offset. */
			r->device = h->type == REC_KERNEL ? k->device :
			    h->type == REC_HCCL ?
			    ((const struct rec_hccl *)h)->device :
			    ((const struct rec_communication *)h)->device;
			r->has_device = true;
		}
		if (h->type != REC_KERNEL)
			continue;
		s = k->start;
		e = k->end;
		if (h->aux & REC_F_DEVICE_CLOCK) {
			s = an_dev_time(src, k->device, s);
			e = an_dev_time(src, k->device, e);
		}
		if (e < s)
			e = s;
		s = an_clk_ts(&r->p->clk, s);
		e = an_clk_ts(&r->p->clk, e);
		ap_kernel(x, r, &sts[r - x->r], tr, k, s, e);
	}
	trace_reader_close(tr);
	return rc < 0 && rc != -EBADMSG ? rc : 0;
}

/* ---- driver ---- */

static int
ap_rank_dir(struct ap *x, struct ap_rank *r, const char *root, char *dir,
    size_t n)
{
	struct an_proc *p = r->p;
	time_t t = (time_t)(p->first_ts / 1000000000u);
	char host[64], when[32];
	struct tm tm;
	size_t len;
	int rc;

	(void)x;
	ap_safe(host, sizeof(host), p->src->host);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y%m%d%H%M%S", &tm);
	if (snprintf(dir, n, "%s/%s_%u_%s%03u_ascend_pt", root, host, p->pid,
	    when, (unsigned)(p->first_ts / 1000000u % 1000u)) >= (int)n)
		return -ENAMETOOLONG;
	if ((rc = ap_mkdir(dir, false)) != 0)
		return rc;
	len = strlen(dir) + sizeof("/ASCEND_PROFILER_OUTPUT");
	if ((r->out = malloc(len)) == NULL)
		abort();
	snprintf(r->out, len, "%s/ASCEND_PROFILER_OUTPUT", dir);
	return ap_mkdir(r->out, false);
}

static int
ap_cmp_rank(const void *x, const void *y)
{
	const struct ap_rank *a = x, *b = y;

	return (a->p->rank > b->p->rank) - (a->p->rank < b->p->rank);
}

static int
ap_run(struct ap *x, struct ap_st *sts, const char *root)
{
	struct analysis *a = x->a;
	char dir[PATH_MAX];
	int rc;

	for (size_t i = 0; i < x->nr; i++) {
		struct ap_rank *r = &x->r[i];
		struct ap_st *s = &sts[i];

		if ((rc = ap_rank_dir(x, r, root, dir, sizeof(dir))) != 0 ||
		    (rc = ap_info(x, r, dir)) != 0 ||
		    (rc = ap_metadata(x, r, dir)) != 0)
			return rc;
		if ((s->kd = ap_fopen(r->out, "kernel_details.csv")) == NULL ||
		    (s->tv = ap_fopen(r->out, "trace_view.json")) == NULL)
			return -errno;
		fputs("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,"
		    "Accelerator Core,Start Time(us),Duration(us),"
		    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,"
		    "Input Shapes,Input Data Types,Input Formats,"
		    "Output Shapes,Output Data Types,Output Formats,"
		    "Context ID\n", s->kd);
		fputc('[', s->tv);
	}
	for (size_t i = 0; i < a->nsrc; i++)
		if (a->src[i]->path != NULL &&
		    (rc = ap_pass(x, sts, a->src[i])) != 0)
			return rc;
	for (size_t i = 0; i < x->nr; i++) {
		struct ap_rank *r = &x->r[i];
		struct ap_st *s = &sts[i];

		ap_trace_view_end(x, r, s);
		rc = ap_fclose(s->kd);
		s->kd = NULL;
		if (rc == 0)
			rc = ap_fclose(s->tv);
		s->tv = NULL;
		if (rc != 0 ||
		    (rc = ap_op_statistic(x, r, s)) != 0 ||
		    (rc = ap_api_statistic(x, r, s)) != 0 ||
		    (rc = ap_step_trace(x, r)) != 0 ||
		    (rc = ap_comm_json(x, r)) != 0 ||
		    (rc = ap_matrix_json(x, r)) != 0)
			return rc;
	}
	return 0;
}

AP_ATTR int
export_ascendpt(struct analysis *a, const char *root)
{
	struct ap x;
	struct ap_st *sts;
	bool ranked = false;
	int rc;

	if (!a->ran)
		return -EINVAL;
	memset(&x, 0, sizeof(x));
	x.a = a;
	for (size_t i = 0; i < a->nproc; i++)
		ranked |= a->proc[i]->rank >= 0;
	/* One directory per rank; without any rank (a single process not
	 * launched as one), each process with device work or steps. */
	for (size_t i = 0; i < a->nproc; i++) {
		struct an_proc *p = a->proc[i];

		if (p->src->path == NULL || (ranked ? p->rank < 0 :
		    p->nres == 0))
			continue;
		x.r = realloc(x.r, (x.nr + 1) * sizeof(*x.r));
		if (x.r == NULL)
			abort();
		memset(&x.r[x.nr], 0, sizeof(*x.r));
		x.r[x.nr++].p = p;
	}
	if (x.nr == 0) {
		free(x.r);
		return -ENODATA;
	}
	an_sort(x.r, x.nr, sizeof(*x.r), ap_cmp_rank);
	if ((rc = ap_mkdir(root, true)) != 0) {
		free(x.r);
		return rc;
	}
	ap_groups(&x);
	if ((sts = calloc(x.nr, sizeof(*sts))) == NULL)
		abort();
	rc = ap_run(&x, sts, root);
	for (size_t i = 0; i < x.nr; i++) {
		if (sts[i].kd != NULL)
			fclose(sts[i].kd);
		if (sts[i].tv != NULL)
			fclose(sts[i].tv);
		free(sts[i].streams);
		free(sts[i].tids);
		free(sts[i].ops);
		free(sts[i].apis);
		free(x.r[i].out);
	}
	for (size_t i = 0; i < x.ng; i++)
		free(x.g[i].ranks);
	free(x.g);
	free(sts);
	free(x.r);
	return rc;
}

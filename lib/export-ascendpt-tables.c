/*
 * ascend-pt export, per-rank tables: op_statistic.csv, api_statistic.csv,
 * step_trace_time.csv, profiler_info_<rank>.json and
 * profiler_metadata.json (doc/export.md has the format).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "export-ascendpt.h"

/* ---- per-rank tables ---- */

static const struct ap_stat *ap_sort_v;

static int
ap_cmp_total(const void *x, const void *y)
{
	const struct ap_stat *a = &ap_sort_v[*(const size_t *)x];
	const struct ap_stat *b = &ap_sort_v[*(const size_t *)y];

	return (a->st.total < b->st.total) - (a->st.total > b->st.total);
}

static size_t *
ap_order(const struct ap_stat *v, size_t n)
{
	size_t *o = malloc((n + 1) * sizeof(*o));

	if (o == NULL)
		abort();
	for (size_t i = 0; i < n; i++)
		o[i] = i;
	ap_sort_v = v;
	an_sort(o, n, sizeof(*o), ap_cmp_total);
	return o;
}

int
ap_op_statistic(struct ap *x, struct ap_rank *r, struct ap_st *s)
{
	FILE *f = ap_fopen(r->out, "op_statistic.csv");
	size_t *o;

	if (f == NULL)
		return -errno;
	fputs("OP Type,Core Type,Count,Total Time(us),Min Time(us),"
	    "Avg Time(us),Max Time(us),Ratio(%)\n", f);
	o = ap_order(s->ops, s->nops);
	for (size_t j = 0; j < s->nops; j++) {
		const struct ap_stat *v = &s->ops[o[j]];

		table_csv_str(f, an_str_get(x->a, v->name), AP_CSV_SPECIAL);
		fprintf(f, ",%s,%" PRIu64 ",", v->kind, v->st.count);
		ap_us(f, v->st.total);
		fputc(',', f);
		ap_us(f, an_stat_min(&v->st));
		fprintf(f, ",%.3f,", (double)v->st.total /
		    (double)v->st.count / 1e3);
		ap_us(f, v->st.max);
		fprintf(f, ",%.2f\n", s->kernel_time ? 100.0 *
		    (double)v->st.total / (double)s->kernel_time : 0.0);
	}
	free(o);
	return ap_fclose(f);
}

int
ap_api_statistic(struct ap *x, struct ap_rank *r, struct ap_st *s)
{
	FILE *f = ap_fopen(r->out, "api_statistic.csv");
	size_t *o;

	if (f == NULL)
		return -errno;
	fputs("Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),"
	    "Max(us),Variance\n", f);
	o = ap_order(s->apis, s->napis);
	for (size_t j = 0; j < s->napis; j++) {
		const struct ap_stat *v = &s->apis[o[j]];
		double avg = (double)v->st.total / (double)v->st.count / 1e3;
		double var = an_stat_sumsq_us(&v->st) / (double)v->st.count -
		    avg * avg;

		fprintf(f, "%u,%s,", r->device, v->kind);
		table_csv_str(f, an_str_get(x->a, v->name), AP_CSV_SPECIAL);
		fputc(',', f);
		ap_us(f, v->st.total);
		fprintf(f, ",%" PRIu64 ",%.3f,", v->st.count, avg);
		ap_us(f, an_stat_min(&v->st));
		fputc(',', f);
		ap_us(f, v->st.max);
		fprintf(f, ",%.3f\n", var > 0 ? var : 0.0);
	}
	free(o);
	return ap_fclose(f);
}

/* The receive ops of p (a step's Bubble), by start. */
static int
ap_cmp_coll_start(const void *x, const void *y)
{
	const struct an_coll *a = *(const struct an_coll *const *)x;
	const struct an_coll *b = *(const struct an_coll *const *)y;

	return (a->start > b->start) - (a->start < b->start);
}

static const struct an_coll **
ap_receives(struct ap *x, const struct an_proc *p, size_t *np)
{
	const struct an_coll **v = malloc((p->ncoll[p->cw] + 1) *
	    sizeof(*v));
	size_t n = 0;

	if (v == NULL)
		abort();
	for (size_t k = 0; k < p->ncoll[p->cw]; k++) {
		const struct an_coll *c = &p->coll[p->cw][k];
		const char *t = ap_hcom_type(an_str_get(x->a, c->name));

		if (t != NULL && strcmp(t, "receive") == 0)
			v[n++] = c;
	}
	an_sort(v, n, sizeof(*v), ap_cmp_coll_start);
	*np = n;
	return v;
}

int
ap_step_trace(struct ap *x, struct ap_rank *r)
{
	struct an_proc *p = r->p;
	FILE *f = ap_fopen(r->out, "step_trace_time.csv");
	const struct an_coll **recv;
	size_t nrecv;

	if (f == NULL)
		return -errno;
	recv = ap_receives(x, p, &nrecv);
	fputs("Device_id,Step,Computing,Communication(Not Overlapped),"
	    "Overlapped,Communication,Free,Stage,Bubble,"
	    "Communication(Not Overlapped and Exclude Receive),Preparing\n",
	    f);
	/* Steps are sorted and disjoint: one pass over the receives. */
	for (size_t i = 0, k = 0; i < p->nres; i++) {
		const struct an_stepres *s = &p->res[i];
		uint64_t span = s->end - s->start;
		uint64_t nov = s->comm > s->overlap ? s->comm - s->overlap : 0;
		uint64_t bub = 0, prep = 0;

		while (k < nrecv && recv[k]->start < s->start)
			k++;
		for (size_t j = k; j < nrecv && recv[j]->start < s->end; j++)
			bub += recv[j]->end - recv[j]->start;

		if (p->nsteps > i && p->steps[i].first > s->start)
			prep = p->steps[i].first - s->start;
		fprintf(f, "%u,", r->device);
		if (s->step >= 0)
			fprintf(f, "%" PRId64, s->step);
		fprintf(f, ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
		    (double)s->compute / 1e3, (double)nov / 1e3,
		    (double)s->overlap / 1e3, (double)s->comm / 1e3,
		    (double)s->free / 1e3,
		    (double)(span > bub ? span - bub : 0) / 1e3,
		    (double)bub / 1e3,
		    (double)(nov > bub ? nov - bub : 0) / 1e3,
		    (double)prep / 1e3);
	}
	free(recv);
	return ap_fclose(f);
}

/* ---- metadata ---- */

int
ap_info(struct ap *x, struct ap_rank *r, const char *dir)
{
	struct an_proc *p = r->p;
	char name[64];
	FILE *f;

	(void)x;
	if (p->rank >= 0)
		snprintf(name, sizeof(name), "profiler_info_%d.json", p->rank);
	else
		snprintf(name, sizeof(name), "profiler_info.json");
	if ((f = ap_fopen(dir, name)) == NULL)
		return -errno;
	fprintf(f, "{\"config\": {\"common_config\": {\"activities\": "
	    "[\"ProfilerActivity.CPU\", \"ProfilerActivity.NPU\"]}, "
	    "\"experimental_config\": {\"_profiler_level\": \"Level1\", "
	    "\"_aic_metrics\": \"AiCoreNone\"}}, \"start_info\": "
	    "{\"collectionTimeBegin\": \"");
	ap_us(f, p->first_ts);
	fputs("\"}, \"end_info\": {\"collectionTimeEnd\": \"", f);
	ap_us(f, p->last_ts);
	fprintf(f, "\"}, \"rank_id\": %d, \"pid\": %u, \"producer\": "
	    "\"msptictl export\"}\n", p->rank, p->pid);
	return ap_fclose(f);
}

int
ap_metadata(struct ap *x, struct ap_rank *r, const char *dir)
{
	struct an_proc *p = r->p;
	int ws = x->a->world_size > 0 ? x->a->world_size : (int)x->nr;
	bool first = true;
	FILE *f;

	if ((f = ap_fopen(dir, "profiler_metadata.json")) == NULL)
		return -errno;
	/* Not distributed (no rank): torch_npu writes no distributed_args.
	 * Otherwise data parallel over all ranks: the capture knows no
	 * model-parallel layout. */
	fputc('{', f);
	if (p->rank >= 0)
		fprintf(f, "\"distributed_args\": {"
		    "\"tensor_model_parallel_size\": 1, "
		    "\"pipeline_model_parallel_size\": 1, "
		    "\"data_parallel_size\": %d, \"context_parallel_size\": 1, "
		    "\"expert_model_parallel_size\": 1, \"world_size\": %d, "
		    "\"rank\": %d},\n ", ws, ws, p->rank);
	fputs("\"parallel_group_info\": {", f);
	for (size_t i = 0; i < x->ng; i++) {
		const struct ap_group *g = &x->g[i];
		int lr = ap_local_rank(g, p->rank);

		if (lr < 0)
			continue;
		fputs(first ? "" : ", ", f);
		first = false;
		table_json_str(f, an_str_get(x->a, g->comm));
		/* A group of every rank is the data-parallel one. */
		if ((int)g->nranks == ws)
			fputs(": {\"group_name\": \"dp\"", f);
		else
			fprintf(f, ": {\"group_name\": \"group%zu\"", i);
		fprintf(f, ", \"group_rank\": %d, \"global_ranks\": [", lr);
		for (size_t j = 0; j < g->nranks; j++)
			fprintf(f, "%s%d", j ? ", " : "", g->ranks[j]);
		fputs("]}", f);
	}
	fputs("},\n \"ENV_VARIABLES\": {}}\n", f);
	return ap_fclose(f);
}

/*
 * ascend-pt export, communication: communication.json and
 * communication_matrix.json of one rank (doc/export.md has the format).
 * Every rank of a group names one collective instance alike (the
 * analysis's per-communicator sequence) and files it under the same
 * step, which is how msprof-analyze's cluster merges ranks.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "export-ascendpt.h"

#define AP_MB		1048576.0

enum { AP_T_HCCS, AP_T_PCIE, AP_T_SIO, AP_T_SDMA, AP_T_RDMA, AP_T_MAX };
static const char *const ap_tnames[AP_T_MAX] = { "HCCS", "PCIE", "SIO",
    "SDMA", "RDMA" };

/* Up to this many packet sizes per transport in a step's total. */
#define AP_DIST_MAX	32

struct ap_bw {
	double		 mb, ms;
	uint64_t	 packets, large;
	size_t		 ndist;
	struct {
		double	 mb;
		uint64_t count;
		double	 ms;
	}		 dist[AP_DIST_MAX];
};

struct ap_ci {
	uint64_t	 elapse, transit, wait, sync, idle;
	struct ap_bw	 bw[AP_T_MAX];
};

/* One collective of the rank, with what both files need. */
struct ap_op {
	const struct an_coll	*c;
	const struct ap_group	*g;
	ssize_t			 step;
	const char		*type;	/* hcom base name */
	bool			 p2p;
	double			 mb;	/* what this rank moved */
	char			 name[96];
};

static bool
ap_is_p2p(const char *t)
{
	return strcmp(t, "send") == 0 || strcmp(t, "receive") == 0 ||
	    strcmp(t, "batchsendrecv") == 0;
}

/* The bytes a rank moves for one op of n ranks (ring algorithms). */
static double
ap_traffic(const char *t, size_t n, uint64_t bytes)
{
	if (ap_is_p2p(t))
		return (double)bytes;
	if (n < 2)
		return 0;
	if (strcmp(t, "allReduce") == 0)
		return 2.0 * (double)(n - 1) / (double)n * (double)bytes;
	if (strcmp(t, "broadcast") == 0 || strcmp(t, "reduce") == 0)
		return (double)bytes;
	return (double)(n - 1) / (double)n * (double)bytes;
}

static const struct ap_op *ap_sort_ops;

static int
ap_cmp_op(const void *x, const void *y)
{
	const struct ap_op *a = &ap_sort_ops[*(const size_t *)x];
	const struct ap_op *b = &ap_sort_ops[*(const size_t *)y];

	if (a->step != b->step)
		return (a->step > b->step) - (a->step < b->step);
	return (a->c->start > b->c->start) - (a->c->start < b->c->start);
}

/* The rank's collectives inside its steps, in (step, start) order. */
static struct ap_op *
ap_ops(struct ap *x, struct ap_rank *r, size_t **orderp, size_t *np)
{
	struct an_proc *p = r->p;
	size_t n = p->ncoll[p->cw], k = 0;
	struct ap_op *v = calloc(n + 1, sizeof(*v));
	size_t *o = malloc((n + 1) * sizeof(*o));

	if (v == NULL || o == NULL)
		abort();
	for (size_t i = 0; i < n; i++) {
		const struct an_coll *c = &p->coll[p->cw][i];
		struct ap_op *op = &v[k];
		const char *t;

		op->c = c;
		op->g = ap_group(x, c->comm);
		op->step = ap_step_of(p, c->start);
		/* Outside every step: no key all ranks would agree on. */
		if (op->g == NULL || op->step < 0)
			continue;
		ap_hcom_name(x->a, op->g, c, op->name, sizeof(op->name));
		/* "hcom_<type>__...": the type, as the name has it. */
		t = ap_hcom_type(an_str_get(x->a, c->name));
		op->type = t != NULL ? t : "";
		op->p2p = ap_is_p2p(op->type);
		op->mb = ap_traffic(op->type, op->g->nranks, c->bytes) / AP_MB;
		o[k] = k;
		k++;
	}
	ap_sort_ops = v;
	an_sort(o, k, sizeof(*o), ap_cmp_op);
	*orderp = o;
	*np = k;
	return v;
}

static void
ap_step_key(FILE *f, const struct an_stepres *s)
{
	if (s->step >= 0)
		fprintf(f, "\"step%" PRId64 "\"", s->step);
	else
		fputs("\"step\"", f);
}

/* ---- communication.json ---- */

static void
ap_bw_add(struct ap_bw *b, double mb, double ms, uint64_t packets,
    uint64_t large)
{
	size_t i;

	b->mb += mb;
	b->ms += ms;
	b->packets += packets;
	b->large += large;
	for (i = 0; i < b->ndist && b->dist[i].mb != mb; i++)
		;
	if (i == b->ndist) {
		if (b->ndist == AP_DIST_MAX)
			return;
		b->dist[b->ndist].mb = mb;
		b->ndist++;
	}
	b->dist[i].count += packets;
	b->dist[i].ms += ms;
}

/* One op's figures; wait is the time until the last rank arrived
 * (synchronization), transit the rest of the transfer. */
static void
ap_ci_of(const struct ap_op *op, struct ap_ci *ci)
{
	const struct an_coll *c = op->c;
	uint64_t el = c->end - c->start;
	int t = op->g->remote ? AP_T_RDMA : AP_T_HCCS;
	double ms = (double)c->transit / 1e6;
	/* One packet per op; large from 1 MB on. */
	uint64_t large = op->mb >= 1.0;

	memset(ci, 0, sizeof(*ci));
	ci->elapse = el;
	ci->transit = c->transit;
	ci->wait = c->wait;
	ci->sync = c->wait;
	ci->idle = el > c->transit + c->wait ? el - c->transit - c->wait : 0;
	if (op->mb <= 0 && c->transit == 0)
		return;
	ap_bw_add(&ci->bw[t], op->mb, ms, 1, large);
	if (t != AP_T_RDMA)
		ap_bw_add(&ci->bw[AP_T_SDMA], op->mb, ms, 1, large);
}

static void
ap_ci_sum(struct ap_ci *sum, const struct ap_ci *ci)
{
	sum->elapse += ci->elapse;
	sum->transit += ci->transit;
	sum->wait += ci->wait;
	sum->sync += ci->sync;
	sum->idle += ci->idle;
	for (int t = 0; t < AP_T_MAX; t++) {
		const struct ap_bw *b = &ci->bw[t];

		for (size_t i = 0; i < b->ndist; i++)
			ap_bw_add(&sum->bw[t], b->dist[i].mb, b->dist[i].ms,
			    b->dist[i].count, 0);
		sum->bw[t].large += b->large;
	}
}

double
ap_ratio(uint64_t a, uint64_t b)
{
	char buf[32];

	/* Rounded to 4 places as torch_npu writes them, Python's round():
	 * the double's exact value to the nearest, a tie to the even
	 * digit, which printf's rounding is too (x * 1e4 + 0.5 took ties
	 * up: 0.03125 became 0.0313 where torch_npu writes 0.0312). */
	if (a + b == 0)
		return 0.0;
	snprintf(buf, sizeof(buf), "%.4f", (double)a / (double)(a + b));
	return strtod(buf, NULL);
}

/* A packet size as Python prints a float: "32.0", "0.25". */
static void
ap_size_key(FILE *f, double mb)
{
	char buf[48];
	size_t n;

	snprintf(buf, sizeof(buf), "%.9f", mb);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '0' && buf[n - 2] != '.')
		buf[--n] = '\0';
	fprintf(f, "\"%s\"", buf);
}

static void
ap_ci_write(FILE *f, const struct ap_ci *ci, const uint64_t *start)
{
	fputs("{\"Communication Time Info\": {", f);
	if (start != NULL)
		fprintf(f, "\"Start Timestamp(us)\": %" PRIu64 ".%03u, ",
		    *start / 1000, (unsigned)(*start % 1000));
	fprintf(f, "\"Elapse Time(ms)\": %.6f, \"Transit Time(ms)\": %.6f, "
	    "\"Wait Time(ms)\": %.6f, \"Synchronization Time(ms)\": %.6f, "
	    "\"Idle Time(ms)\": %.6f, \"Wait Time Ratio\": %.4f, "
	    "\"Synchronization Time Ratio\": %.4f},\n  "
	    "\"Communication Bandwidth Info\": {", (double)ci->elapse / 1e6,
	    (double)ci->transit / 1e6, (double)ci->wait / 1e6,
	    (double)ci->sync / 1e6, (double)ci->idle / 1e6,
	    ap_ratio(ci->wait, ci->transit), ap_ratio(ci->sync, ci->transit));
	for (int t = 0; t < AP_T_MAX; t++) {
		const struct ap_bw *b = &ci->bw[t];

		fprintf(f, "%s\"%s\": {\"Transit Size(MB)\": %.9f, "
		    "\"Transit Time(ms)\": %.6f, \"Bandwidth(GB/s)\": %.4f, "
		    "\"Large Packet Ratio\": %.4f, \"Size Distribution\": {",
		    t ? ", " : "", ap_tnames[t], b->mb, b->ms,
		    b->ms > 0 ? b->mb / b->ms : 0.0, b->packets ?
		    (double)b->large / (double)b->packets : 0.0);
		for (size_t i = 0; i < b->ndist; i++) {
			fputs(i ? ", " : "", f);
			ap_size_key(f, b->dist[i].mb);
			fprintf(f, ": [%" PRIu64 ", %.6f]", b->dist[i].count,
			    b->dist[i].ms);
		}
		fputs("}}", f);
	}
	fputs("}}", f);
}

/* One of "collective" / "p2p" of one step: its ops and their total. */
static void
ap_comm_kind(FILE *f, const struct ap_op *v, const size_t *o, size_t from,
    size_t to, bool p2p)
{
	struct ap_ci sum, ci;
	bool any = false;

	memset(&sum, 0, sizeof(sum));
	fputs("{", f);
	for (size_t j = from; j < to; j++) {
		const struct ap_op *op = &v[o[j]];

		if (op->p2p != p2p)
			continue;
		fprintf(f, "%s\n  \"%s@%s\": ", any ? "," : "", op->name,
		    op->g->gid);
		any = true;
		ap_ci_of(op, &ci);
		ap_ci_sum(&sum, &ci);
		ap_ci_write(f, &ci, &op->c->start);
	}
	/* compare needs a collective total in every step. */
	if (any || !p2p) {
		fprintf(f, "%s\n  \"Total Op Info\": ", any ? "," : "");
		ap_ci_write(f, &sum, NULL);
	}
	fputs("}", f);
}

int
ap_comm_json(struct ap *x, struct ap_rank *r)
{
	struct an_proc *p = r->p;
	size_t *o, n, j = 0;
	struct ap_op *v = ap_ops(x, r, &o, &n);
	FILE *f = ap_fopen(r->out, "communication.json");
	int rc;

	if (f == NULL) {
		rc = -errno;
		goto out;
	}
	fputs("{", f);
	for (size_t i = 0; i < p->nres; i++) {
		size_t from = j;

		while (j < n && v[o[j]].step == (ssize_t)i)
			j++;
		fputs(i ? ",\n" : "\n", f);
		ap_step_key(f, &p->res[i]);
		fputs(": {\"collective\": ", f);
		ap_comm_kind(f, v, o, from, j, false);
		fputs(",\n \"p2p\": ", f);
		ap_comm_kind(f, v, o, from, j, true);
		fputs("}", f);
	}
	fputs("\n}\n", f);
	rc = ap_fclose(f);
out:
	free(v);
	free(o);
	return rc;
}

/* ---- communication_matrix.json ---- */

static const struct ap_op *ap_sort_bw;

static double
ap_op_bw(const struct ap_op *op)
{
	return op->c->transit ? op->mb / ((double)op->c->transit / 1e6) : 0;
}

static int
ap_cmp_bw(const void *x, const void *y)
{
	double a = ap_op_bw(&ap_sort_bw[*(const size_t *)x]);
	double b = ap_op_bw(&ap_sort_bw[*(const size_t *)y]);

	return (a < b) - (a > b);
}

/* The local rank op's data goes to: the next one of the ring; a send's
 * peer in a group of two; none for a receive (its sender writes it). */
static int
ap_dst(const struct ap_op *op, int lr)
{
	int n = (int)op->g->nranks;

	if (n < 2 || strcmp(op->type, "receive") == 0)
		return -1;
	if (op->p2p && n != 2)
		return -1;
	return (lr + 1) % n;
}

static void
ap_link(FILE *f, bool *any, int s, int d, const char *tr, double mb,
    double ms, const char *name)
{
	fprintf(f, "%s\"%d-%d\": {\"Transport Type\": \"%s\", "
	    "\"Transit Size(MB)\": %.9f, \"Transit Time(ms)\": %.6f, "
	    "\"Bandwidth(GB/s)\": %.4f", *any ? ", " : "", s, d, tr, mb, ms,
	    ms > 0 ? mb / ms : 0.0);
	if (name != NULL)
		fprintf(f, ", \"Op Name\": \"%s\"", name);
	fputs("}", f);
	*any = true;
}

/* The keys of one (type, group) of one step: top1, middle, bottom1..3
 * (one op each) and total. */
static void
ap_matrix_type(FILE *f, bool *first, const struct ap_op *v, size_t *sel,
    size_t n, int rank)
{
	static const char *const stat[] = { "top1", "middle", "bottom1",
	    "bottom2", "bottom3" };
	const struct ap_op *o0 = &v[sel[0]];
	const char *tr = o0->g->remote ? "RDMA" : "HCCS";
	int lr = ap_local_rank(o0->g, rank), d = ap_dst(o0, lr);
	char type[48] = "";
	double mb = 0, ms = 0;
	bool any;

	for (size_t i = 0; i < sizeof(type) - 1 && o0->type[i]; i++) {
		type[i] = (char)(o0->type[i] >= 'A' && o0->type[i] <= 'Z' ?
		    o0->type[i] - 'A' + 'a' : o0->type[i]);
		type[i + 1] = '\0';
	}
	ap_sort_bw = v;
	an_sort(sel, n, sizeof(*sel), ap_cmp_bw);
	for (size_t k = 0; k < 5; k++) {
		size_t idx = k == 0 ? 0 : k == 1 ? n / 2 : n - 1 - (k - 2);
		const struct ap_op *op;

		if (k >= 3 && n < k - 1)
			break;
		op = &v[sel[idx]];
		fprintf(f, "%s\n  \"%s-%s@%s\": {", *first ? "" : ",", type,
		    stat[k], op->g->gid);
		*first = false;
		any = false;
		ap_link(f, &any, lr, lr, "LOCAL", 0, 0, op->name);
		if (d >= 0)
			ap_link(f, &any, lr, d, tr, op->mb,
			    (double)op->c->transit / 1e6, op->name);
		fputs("}", f);
	}
	for (size_t i = 0; i < n; i++) {
		mb += v[sel[i]].mb;
		ms += (double)v[sel[i]].c->transit / 1e6;
	}
	fprintf(f, ",\n  \"%s-total@%s\": {", type, o0->g->gid);
	any = false;
	ap_link(f, &any, lr, lr, "LOCAL", 0, 0, NULL);
	if (d >= 0)
		ap_link(f, &any, lr, d, tr, mb, ms, NULL);
	fputs("}", f);
}

static void
ap_matrix_kind(FILE *f, const struct ap_op *v, const size_t *o, size_t from,
    size_t to, bool p2p, int rank)
{
	size_t *sel = malloc((to - from + 1) * sizeof(*sel));
	bool *done = calloc(to - from + 1, sizeof(*done));
	bool first = true;

	if (sel == NULL || done == NULL)
		abort();
	fputs("{", f);
	for (size_t j = from; j < to; j++) {
		const struct ap_op *a = &v[o[j]];
		size_t n = 0;

		if (done[j - from] || a->p2p != p2p)
			continue;
		for (size_t k = j; k < to; k++) {
			const struct ap_op *b = &v[o[k]];

			if (!done[k - from] && b->g == a->g &&
			    strcmp(b->type, a->type) == 0) {
				done[k - from] = true;
				sel[n++] = o[k];
			}
		}
		ap_matrix_type(f, &first, v, sel, n, rank);
	}
	fputs("}", f);
	free(sel);
	free(done);
}

int
ap_matrix_json(struct ap *x, struct ap_rank *r)
{
	struct an_proc *p = r->p;
	size_t *o, n, j = 0;
	struct ap_op *v = ap_ops(x, r, &o, &n);
	FILE *f = ap_fopen(r->out, "communication_matrix.json");
	int rc;

	if (f == NULL) {
		rc = -errno;
		goto out;
	}
	fputs("{", f);
	for (size_t i = 0; i < p->nres; i++) {
		size_t from = j;

		while (j < n && v[o[j]].step == (ssize_t)i)
			j++;
		fputs(i ? ",\n" : "\n", f);
		ap_step_key(f, &p->res[i]);
		fputs(": {\"collective\": ", f);
		ap_matrix_kind(f, v, o, from, j, false, p->rank);
		fputs(",\n \"p2p\": ", f);
		ap_matrix_kind(f, v, o, from, j, true, p->rank);
		fputs("}", f);
	}
	fputs("\n}\n", f);
	rc = ap_fclose(f);
out:
	free(v);
	free(o);
	return rc;
}

/*
 * msptictl report --cluster slurm --job ID DIR | --hosts FILE DIR: the
 * analysis where the data lies.  Every node runs its node-local
 * `msptictl report --partial-out - --node NODE DIR` through the same
 * srun/ssh fan-out as the capture verbs (cluster.c), which analyses the
 * node's own files in DIR and prints one JSON line holding their partial
 * results (lib/analysis-partial.c), base64.  Here the per-file partials of
 * all nodes are merged in the order of their file names, which is the
 * order `msptictl report DIR` reads the files gathered in one place, so
 * the report is the same.  Only summaries move; their size per rank is
 * printed on stderr.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "client.h"
#include "util.h"

#define CLUSTER_REPORT_TIMEOUT_MS	(30 * 60 * 1000)

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
cluster_report_b64enc(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	char *s = malloc((len + 2) / 3 * 4 + 1), *o = s;

	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64[(v >> 6) & 63] : '=';
		*o++ = i + 2 < len ? b64[v & 63] : '=';
	}
	*o = '\0';
	return s;
}

void *
cluster_report_b64dec(const char *s, size_t n, size_t *len)
{
	unsigned char *out, *o;
	uint32_t v = 0;
	int bits = 0;

	if ((out = malloc(n / 4 * 3 + 3)) == NULL)
		return NULL;
	o = out;
	for (size_t i = 0; i < n; i++) {
		const char *c;

		if (s[i] == '=')
			break;
		if ((c = strchr(b64, s[i])) == NULL || s[i] == '\0') {
			free(out);
			return NULL;
		}
		v = v << 6 | (uint32_t)(c - b64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (unsigned char)(v >> bits);
		}
	}
	*len = (size_t)(o - out);
	return out;
}

/* One file's partial from one node. */
struct cr_part {
	const char		*name;	/* in the node's bundle */
	size_t			 namelen;
	const unsigned char	*data;
	size_t			 len;
	size_t			 node, seq;
	struct analysis		*dec;	/* decoded, until merged into the result */
	size_t			 dup_of;	/* the earlier part of the same name and
					 * bytes, else SIZE_MAX */
};

/* Parts k and j: the same file seen by two nodes (a shared DIR). */
static bool
cr_same(const struct cr_part *k, const struct cr_part *j)
{
	return k->namelen == j->namelen &&
	    memcmp(k->name, j->name, k->namelen) == 0 && k->len == j->len &&
	    memcmp(k->data, j->data, k->len) == 0;
}

struct cr_node {
	unsigned char	*bundle;
	size_t		 len;
	unsigned long	 ranks;
	char		*why;		/* NULL: it answered */
};

static int
cr_cmp(const void *x, const void *y)
{
	const struct cr_part *a = x, *b = y;
	size_t n = a->namelen < b->namelen ? a->namelen : b->namelen;
	int c = memcmp(a->name, b->name, n);

	if (c != 0)
		return c;
	if (a->namelen != b->namelen)
		return a->namelen < b->namelen ? -1 : 1;
	if (a->node != b->node)
		return a->node < b->node ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The node's reply: {"mspti_partial":1,...,"ranks":R,...}, then lines
 * {"d":"B64"} and {"end":1} (cmd-report.c). */
static void
cr_parse_reply(struct cr_node *cn, const char *out)
{
	const char *l = out ? strstr(out, "{\"mspti_partial\":") : NULL;
	const char *r, *p;
	char *b = NULL;
	size_t n = 0;

	if (l == NULL) {
		cn->why = strdup("no partial result in its reply");
		return;
	}
	if ((r = strstr(l, "\"ranks\":")) != NULL && r < strchr(l, '\n'))
		cn->ranks = strtoul(r + 8, NULL, 10);
	for (p = strchr(l, '\n'); p != NULL && strncmp(p + 1, "{\"d\":\"", 6)
	    == 0; p = strchr(p + 1, '\n')) {
		const char *s = p + 7, *e = strchr(s, '"');
		char *nb;

		if (e == NULL || (nb = realloc(b, n + (size_t)(e - s) + 1)) ==
		    NULL)
			break;
		b = nb;
		memcpy(b + n, s, (size_t)(e - s));
		n += (size_t)(e - s);
	}
	if (p == NULL || strncmp(p + 1, "{\"end\":1}", 9) != 0) {
		cn->why = strdup("its reply was cut short");
		free(b);
		return;
	}
	cn->bundle = cluster_report_b64dec(b ? b : "", n, &cn->len);
	free(b);
	if (cn->bundle == NULL)
		cn->why = strdup("malformed reply (bad base64)");
}

/* Splits a node's bundle into parts: [u32 n][name][u32 n][partial]... */
static int
cr_split(struct cr_node *cn, size_t node, struct cr_part **parts,
    size_t *nparts)
{
	size_t off = 0, seq = 0;

	while (off < cn->len) {
		struct cr_part p = { .node = node, .seq = seq++ };
		struct cr_part *np;

		if (cn->len - off < 4 ||
		    (p.namelen = util_get_le32(cn->bundle + off)) > cn->len - off - 4)
			return -1;
		p.name = (const char *)cn->bundle + off + 4;
		off += 4 + p.namelen;
		if (cn->len - off < 4 || (p.len = util_get_le32(cn->bundle + off)) >
		    cn->len - off - 4)
			return -1;
		p.data = cn->bundle + off + 4;
		off += 4 + p.len;
		if ((np = realloc(*parts, (*nparts + 1) * sizeof(*np))) == NULL)
			return -1;
		*parts = np;
		np[(*nparts)++] = p;
	}
	return 0;
}

int
cluster_report(const struct cmd_entry *e, const char *kind, const char *hosts,
    const char *job, int timeout_ms, bool allow_partial,
    const struct analysis_opts *o, const char *dir, struct analysis **out)
{
	char absdir[PATH_MAX], err[256];
	char *margv[16];
	struct cluster_reply *rep = NULL;
	struct cr_node *cn = NULL;
	struct cr_part *parts = NULL;
	struct analysis *a = NULL;
	size_t nrep = 0, nparts = 0, m = 0, nok = 0, bytes = 0, wire = 0;
	unsigned long ranks = 0;
	double per_rank_max = 0;
	int rc;

	*out = NULL;
	/* Nodes run in srun's or ssh's cwd: name the same path there. */
	if (dir[0] != '/') {
		char cwd[PATH_MAX / 2];

		if (getcwd(cwd, sizeof(cwd)) != NULL) {
			snprintf(absdir, sizeof(absdir), "%s/%s", cwd, dir);
			dir = absdir;
		}
	}
	margv[m++] = (char *)cluster_self_exe();
	margv[m++] = "report";
	margv[m++] = "--partial-out";
	margv[m++] = "-";
	margv[m++] = "--node";
	margv[m++] = "@N";
	/* What the per-node part depends on (the rest is applied here). */
	margv[m++] = "--step-marker";
	margv[m++] = (char *)o->step_marker;
	margv[m++] = (char *)dir;
	margv[m] = NULL;
	/* The nodes analyse whole traces: minutes, not the capture verbs'
	 * seconds. */
	if (timeout_ms <= 0)
		timeout_ms = CLUSTER_REPORT_TIMEOUT_MS;
	if ((rc = cluster_run(e, kind, hosts, job, timeout_ms, margv, &rep,
	    &nrep)) != EXIT_OK)
		return rc;
	if ((cn = calloc(nrep ? nrep : 1, sizeof(*cn))) == NULL) {
		rc = EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < nrep; i++) {
		if (rep[i].rc != 0) {
			cn[i].why = strdup(rep[i].why);
			continue;
		}
		wire += rep[i].outlen;
		cr_parse_reply(&cn[i], rep[i].out);
		if (cn[i].why == NULL) {
			size_t before = nparts;

			if (cr_split(&cn[i], i, &parts, &nparts) != 0) {
				nparts = before;
				cn[i].why = strdup("malformed partial bundle");
			}
		}
	}
	/*
	 * Every partial checked before any is merged: a bad one fails its
	 * node, not the merge.  Each is decoded once and held until it is
	 * merged, so the peak is every distinct partial decoded; a file that
	 * several nodes return (a shared DIR: same name, same bytes) is
	 * decoded once.  In file-name order, as `report DIR` reads them;
	 * two nodes' own files of one name both count.
	 */
	qsort(parts, nparts, sizeof(*parts), cr_cmp);
	if ((a = analysis_new(o)) == NULL) {
		rc = EXIT_FAIL;
		goto out;
	}
	for (size_t k = 0; k < nparts; k++)
		parts[k].dup_of = SIZE_MAX;
	for (size_t k = 0; k < nparts; k++) {
		if (cn[parts[k].node].why != NULL)
			continue;
		for (size_t j = k; j-- > 0 && parts[j].namelen ==
		    parts[k].namelen && memcmp(parts[j].name, parts[k].name,
		    parts[k].namelen) == 0;)
			if (parts[j].dup_of == SIZE_MAX && parts[j].dec !=
			    NULL && cr_same(&parts[k], &parts[j])) {
				parts[k].dup_of = j;
				break;
			}
		if (parts[k].dup_of != SIZE_MAX)
			continue;
		if (analysis_partial_read(a, parts[k].data, parts[k].len,
		    NULL, &parts[k].dec, err, sizeof(err)) != 0) {
			char why[400];

			snprintf(why, sizeof(why), "%.*s: %s",
			    (int)(parts[k].namelen > 200 ? 200 :
			    parts[k].namelen), parts[k].name, err);
			cn[parts[k].node].why = strdup(why);
		}
	}
	for (size_t i = 0; i < nrep; i++) {
		if (cn[i].why != NULL)
			continue;
		nok++;
		ranks += cn[i].ranks;
		bytes += cn[i].len;
		if (cn[i].ranks && (double)cn[i].len / (double)cn[i].ranks >
		    per_rank_max)
			per_rank_max = (double)cn[i].len / (double)cn[i].ranks;
	}
	fprintf(stderr, "msptictl report: %zu of %zu nodes, %lu ranks; "
	    "summaries moved %zu bytes (%.0f per rank, at most %.0f; %zu on "
	    "the wire)\n", nok, nrep, ranks, bytes,
	    ranks ? (double)bytes / (double)ranks : 0.0, per_rank_max, wire);
	if (per_rank_max > 1048576)
		fprintf(stderr, "  (over the 1 MB per rank this is meant to "
		    "move: steps and collectives are sampled past %u and %u "
		    "a rank, but a partial also grows with the distinct op, "
		    "kernel and API names it refers to)\n", ANALYSIS_STEP_CAP,
		    ANALYSIS_COLL_CAP);
	for (size_t i = 0; i < nrep; i++)
		if (cn[i].why != NULL)
			fprintf(stderr, "  %s: FAILED: %s\n", rep[i].name,
			    cn[i].why);
	if (nok == 0 || (nok < nrep && !allow_partial)) {
		if (nok > 0)
			fprintf(stderr, "msptictl report: not every node "
			    "answered (--allow-partial merges those that "
			    "did)\n");
		rc = EXIT_FAIL;
		goto out;
	}
	for (size_t k = 0; k < nparts; k++) {
		/* A copy counts once: its original's decode, unless that
		 * was merged already (else its node failed: the copy's own
		 * node still brings the file). */
		size_t d = parts[k].dup_of == SIZE_MAX ? k : parts[k].dup_of;

		if (cn[parts[k].node].why != NULL || parts[d].dec == NULL ||
		    (d != k && cn[parts[d].node].why == NULL))
			continue;
		rc = analysis_merge(a, parts[d].dec);
		analysis_free(parts[d].dec);
		parts[d].dec = NULL;
		if (rc != 0) {
			fprintf(stderr, "msptictl report: %s\n",
			    analysis_strerror(rc));
			rc = EXIT_FAIL;
			goto out;
		}
	}
	*out = a;
	a = NULL;
	rc = EXIT_OK;
out:
	analysis_free(a);
	for (size_t i = 0; i < nrep; i++) {
		free(rep[i].name);
		free(rep[i].out);
		free(rep[i].why);
		if (cn != NULL) {
			free(cn[i].bundle);
			free(cn[i].why);
		}
	}
	free(rep);
	free(cn);
	for (size_t k = 0; k < nparts; k++)
		analysis_free(parts[k].dec);
	free(parts);
	return rc;
}

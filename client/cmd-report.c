/* msptictl report: analysis tables and advice from trace files. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#include "analysis.h"
#include "client.h"

/* Reading threads: every online CPU unless --jobs says. */
static void
report_jobs(struct analysis_opts *o)
{
	if (o->jobs == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		o->jobs = n > 1 ? (unsigned)(n < 16 ? n : 16) : 1;
	}
}

void
client_analyse_warn(const struct cmd_entry *e, struct analysis *a)
{
	size_t nw;
	const char *const *w;
	struct analysis_totals tot;

	/* Never silently partial: a banner, then every warning, on stderr
	 * (the exit status stays 0 unless --strict). */
	w = analysis_warnings(a, &nw);
	analysis_get_totals(a, &tot);
	if (tot.partial)
		fprintf(stderr, "msptictl %s: ****** INCOMPLETE INPUT: %u of "
		    "%u ranks seen, %llu records lost; results are PARTIAL "
		    "******\n", e->name, tot.ranks_seen, tot.world_size,
		    (unsigned long long)tot.lost);
	for (size_t i = 0; i < nw; i++)
		fprintf(stderr, "msptictl %s: WARNING: %s\n", e->name, w[i]);
}

/* Runs a (ok files read) or says why for each file; NULL then. */
static struct analysis *
analyse_done(const struct cmd_entry *e, struct analysis *a, size_t ok)
{
	size_t nw;
	const char *const *w;

	if (ok == 0 || analysis_run(a) != 0) {
		/* Say why for each file ("x: cannot read: bad magic"). */
		w = analysis_warnings(a, &nw);
		for (size_t i = 0; i < nw; i++)
			fprintf(stderr, "msptictl %s: %s\n", e->name, w[i]);
		fprintf(stderr, "msptictl %s: no readable trace\n", e->name);
		analysis_free(a);
		return NULL;
	}
	client_analyse_warn(e, a);
	return a;
}

/* Loads files into a new analysis and runs it; NULL after printing why.
 * (export: one pass, which its exporters read again.) */
struct analysis *
client_analyse(const struct cmd_entry *e, const struct analysis_opts *o,
    int argc, char **argv)
{
	struct analysis_opts oj = *o;
	struct analysis *a;

	report_jobs(&oj);
	if ((a = analysis_new(&oj)) == NULL) {
		fprintf(stderr, "msptictl %s: out of memory\n", e->name);
		return NULL;
	}
	return analyse_done(e, a, analysis_add_files(a, argv + optind,
	    (size_t)(argc - optind)));
}

static int
report_cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* A directory's traces: its *.mspti files but snapshots, sorted; with
 * node, only DIR/NODE.mspti when there is one (a shared DIR).  What is
 * not a regular file there (a FIFO) is skipped, with a line. */
static int
report_dir(const struct cmd_entry *e, const char *dir, const char *node,
    char ***v, size_t *n)
{
	DIR *d;
	struct dirent *de;
	size_t first = *n;

	if (node != NULL) {
		char *p;
		struct stat st;

		if (asprintf(&p, "%s/%s.mspti", dir, node) < 0)
			return -1;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			*v = realloc(*v, (*n + 1) * sizeof(**v));
			(*v)[(*n)++] = p;
			return 0;
		}
		free(p);
	}
	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		struct stat st;
		char *p;

		if (l < 7 || strcmp(de->d_name + l - 6, ".mspti") != 0 ||
		    de->d_name[0] == '.' || (l >= 15 &&
		    strcmp(de->d_name + l - 15, "-snapshot.mspti") == 0))
			continue;
		if (asprintf(&p, "%s/%s", dir, de->d_name) < 0)
			break;
		if (stat(p, &st) == 0 && !S_ISREG(st.st_mode)) {
			fprintf(stderr, "msptictl %s: %s: not a regular file, "
			    "skipped\n", e->name, p);
			free(p);
			continue;
		}
		*v = realloc(*v, (*n + 1) * sizeof(**v));
		(*v)[(*n)++] = p;
	}
	closedir(d);
	if (*n - first > 1)	/* (qsort's array may not be NULL) */
		qsort(*v + first, *n - first, sizeof(**v), report_cmp_str);
	return 0;
}

/* The trace files named by argv[optind..]: files as given, directories
 * expanded (report_dir).  NULL after saying why. */
static char **
report_paths(const struct cmd_entry *e, int argc, char **argv,
    const char *node, size_t *np)
{
	char **v = NULL;
	size_t n = 0;

	for (int i = optind; i < argc; i++) {
		struct stat st;
		size_t before = n;

		if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
			v = realloc(v, (n + 1) * sizeof(*v));
			v[n++] = strdup(argv[i]);
			continue;
		}
		if (report_dir(e, argv[i], node, &v, &n) != 0 || n == before) {
			fprintf(stderr, "msptictl %s: %s: no trace (*.mspti) "
			    "in this directory\n", e->name, argv[i]);
			for (size_t k = 0; k < n; k++)
				free(v[k]);
			free(v);
			return NULL;
		}
	}
	*np = n;
	return v;
}

static void
report_paths_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/*
 * --partial-out FILE|-: each file's partial result, framed with its name
 * ([u32le n][name][u32le n][partial]...), to FILE, or for a distributed
 * report to stdout as JSON lines: a header, the bundle in base64 in lines
 * of 480 characters, and an end line (cluster-report.c reads them).
 */
static int
report_partial_out(const struct cmd_entry *e, const struct analysis_opts *o,
    char **paths, size_t n, const char *out)
{
	unsigned char *bundle = NULL, hdr[4];
	size_t len = 0, ok = 0;
	unsigned ranks = 0;
	struct client_output oo;
	FILE *f;
	int rc;
	void **bufs = calloc(n, sizeof(*bufs));
	size_t *lens = calloc(n, sizeof(*lens));
	unsigned *nr = calloc(n, sizeof(*nr));
	int *rcs = calloc(n, sizeof(*rcs));

	/* The files in --jobs threads, framed in their order. */
	if (bufs == NULL || lens == NULL || nr == NULL || rcs == NULL ||
	    analysis_encode_files(o, paths, n, bufs, lens, nr, rcs) != 0) {
		fprintf(stderr, "msptictl %s: out of memory\n", e->name);
		free(bufs);
		free(lens);
		free(nr);
		free(rcs);
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(paths[i]);

		ok += rcs[i] == 0;
		ranks += nr[i];
		if (bufs[i] == NULL) {
			fprintf(stderr, "msptictl %s: %s: no partial result: "
			    "%s\n", e->name, paths[i],
			    analysis_strerror(rcs[i]));
			ok = 0;
			break;
		}
		bundle = realloc(bundle, len + 8 + nl + lens[i]);
		util_put_le(hdr, nl, 4);
		memcpy(bundle + len, hdr, 4);
		memcpy(bundle + len + 4, paths[i], nl);
		util_put_le(hdr, lens[i], 4);
		memcpy(bundle + len + 4 + nl, hdr, 4);
		memcpy(bundle + len + 8 + nl, bufs[i], lens[i]);
		len += 8 + nl + lens[i];
	}
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(lens);
	free(nr);
	free(rcs);
	if (ok == 0) {
		fprintf(stderr, "msptictl %s: no readable trace\n", e->name);
		free(bundle);
		return EXIT_FAIL;
	}
	if (strcmp(out, "-") == 0) {
		char *s = cluster_report_b64enc(bundle, len);

		if (s == NULL) {
			free(bundle);
			return EXIT_FAIL;
		}
		/* srun splits long lines: short ones, each a JSON line. */
		printf("{\"mspti_partial\":1,\"files\":%zu,\"ranks\":%u,"
		    "\"bytes\":%zu}\n", n, ranks, len);
		for (size_t k = 0, sl = strlen(s); k < sl; k += 480)
			printf("{\"d\":\"%.480s\"}\n", s + k);
		printf("{\"end\":1}\n");
		free(s);
		free(bundle);
		return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
	}
	if ((f = client_out_open(&oo, out, &rc)) != NULL)
		rc = client_out_close(&oo, f, fwrite(bundle, 1, len, f) ==
		    len ? 0 : -EIO);
	if (rc != 0) {
		fprintf(stderr, "msptictl %s: cannot write %s: %s\n", e->name,
		    out, client_out_strerror(rc));
		free(bundle);
		return EXIT_FAIL;
	}
	free(bundle);
	return EXIT_OK;
}

/*
 * The analysis options report and export share (CLIENT_ANALYSIS_OPTS):
 * 0 when ch was one and is applied to o, an exit code when its value is
 * bad, -1 when ch is none of them.
 */
int
client_analysis_opt(const struct cmd_entry *e, int ch, const char *arg,
    struct analysis_opts *o)
{
	unsigned long num;

	switch (ch) {
	case 'w':
		if (client_parse_uint(e, "--world-size", arg, 1 << 20,
		    &num) != 0)
			return EXIT_USAGE;
		o->world_size = (int)num;
		return 0;
	case 'a':
		if (strcmp(arg, "auto") != 0 && strcmp(arg, "always") != 0 &&
		    strcmp(arg, "never") != 0)
			return client_usage_error(e, "bad --align '%s' (auto, "
			    "always or never)", arg);
		o->align = strcmp(arg, "always") == 0 ? ANALYSIS_ALIGN_ALWAYS :
		    strcmp(arg, "never") == 0 ? ANALYSIS_ALIGN_NEVER :
		    ANALYSIS_ALIGN_AUTO;
		return 0;
	case 'N':
		o->align = ANALYSIS_ALIGN_NEVER;
		return 0;
	default:
		return -1;
	}
}

static int
cmd_report_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "csv", no_argument, NULL, 'c' },
		{ "section", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 't' },
		CLIENT_ANALYSIS_OPTS,
		{ "step-marker", required_argument, NULL, 'm' },
		{ "strict", no_argument, NULL, 'S' },
		{ "steps-all", no_argument, NULL, 'A' },
		{ "jobs", required_argument, NULL, 'J' },
		{ "cluster", required_argument, NULL, 'C' },
		{ "hosts", required_argument, NULL, 'H' },
		{ "job", required_argument, NULL, 'B' },
		{ "allow-partial", no_argument, NULL, 'P' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "partial-out", required_argument, NULL, 'O' },
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_report_entry;
	struct analysis_opts o;
	struct analysis *a;
	struct analysis_totals tot;
	unsigned long num;
	enum table_format fmt = c->json ? TABLE_JSON : TABLE_TEXT;
	bool want[ANALYSIS_SECTION_MAX], any = false, strict = false;
	bool all_steps = false, allow_partial = false;
	const char *kind = NULL, *hosts = NULL, *job = NULL, *pout = NULL;
	const char *node = NULL;
	int ch, n = 0, timeout_ms = 0, orc;
	char **paths;
	size_t npaths;

	analysis_opts_init(&o);
	/* Bounded summaries, the same here as on the nodes of a distributed
	 * report (doc/report.md, "Partial results"). */
	o.coll_cap = ANALYSIS_COLL_CAP;
	o.step_cap = ANALYSIS_STEP_CAP;
	memset(want, 0, sizeof(want));
	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv,
	    "jcs:t:w:m:a:NSAJ:C:H:B:PT:O:n:", opts)) != -1) {
		switch (ch) {
		case 'j':
			fmt = TABLE_JSON;
			break;
		case 'c':
			fmt = TABLE_CSV;
			break;
		case 's': {
			char *dup = strdup(optarg), *tok, *save = NULL;

			for (tok = strtok_r(dup, ",", &save); tok != NULL;
			    tok = strtok_r(NULL, ",", &save)) {
				int s = analysis_section_from_name(tok);

				if (s < 0) {
					client_usage_error(&cmd_report_entry,
					    "unknown section '%s'", tok);
					free(dup);
					return EXIT_USAGE;
				}
				want[s] = any = true;
			}
			free(dup);
			break;
		}
		case 't':
			if (client_parse_uint(e, "--top", optarg, 1000000,
			    &num) != 0)
				return EXIT_USAGE;
			o.top_n = (unsigned)num;
			break;
		case 'm':
			o.step_marker = optarg;
			break;
		case 'S':
			strict = true;
			break;
		case 'A':
			all_steps = true;
			break;
		case 'J':
			if (client_parse_uint(e, "--jobs", optarg, 256,
			    &num) != 0)
				return EXIT_USAGE;
			if (num < 1)
				return client_usage_error(e, "bad --jobs '%s' "
				    "(1 to 256)", optarg);
			o.jobs = (unsigned)num;
			break;
		case 'C':
			if (strcmp(optarg, "slurm") != 0)
				return client_usage_error(e, "--cluster takes "
				    "'slurm'");
			kind = optarg;
			break;
		case 'H':
			hosts = optarg;
			break;
		case 'B':
			job = optarg;
			break;
		case 'P':
			allow_partial = true;
			break;
		case 'T': {
			int64_t d = util_parse_duration(optarg);

			if (d <= 0)
				return client_usage_error(e, "bad --timeout "
				    "'%s'", optarg);
			timeout_ms = (int)(d / 1000000 > 0 ? d / 1000000 : 1);
			break;
		}
		case 'O':
			pout = optarg;
			break;
		case 'n':
			node = optarg;
			break;
		default:
			if ((orc = client_analysis_opt(e, ch, optarg, &o)) < 0)
				return client_opt_exit(e, ch);
			if (orc > 0)
				return orc;
			break;
		}
	}
	if (optind >= argc) {
		client_usage_error(&cmd_report_entry, kind || hosts ?
		    "no capture directory" : "no trace file");
		return EXIT_USAGE;
	}
	report_jobs(&o);
	if (kind != NULL || hosts != NULL) {
		/* Distributed: the nodes analyse, this host merges. */
		int rc;

		if ((kind != NULL) == (hosts != NULL))
			return client_usage_error(e, "give one of --cluster "
			    "slurm or --hosts FILE");
		if (kind != NULL && job == NULL)
			return client_usage_error(e, "--cluster slurm needs "
			    "--job ID");
		if (optind + 1 != argc || pout != NULL)
			return client_usage_error(e, "a distributed report "
			    "takes one capture directory");
		if ((rc = cluster_report(e, kind, hosts, job, timeout_ms,
		    allow_partial, &o, argv[optind], &a)) != EXIT_OK)
			return rc;
		if ((a = analyse_done(e, a, 1)) == NULL)
			return EXIT_FAIL;
	} else {
		if (job != NULL || allow_partial)
			return client_usage_error(e, "--job and "
			    "--allow-partial go with --cluster or --hosts");
		if ((paths = report_paths(e, argc, argv, node,
		    &npaths)) == NULL)
			return EXIT_FAIL;
		if (pout != NULL) {
			int rc = report_partial_out(e, &o, paths, npaths,
			    pout);

			report_paths_free(paths, npaths);
			return rc;
		}
		/* Each file its own partial result, merged in order: the
		 * same path as a distributed report's. */
		if ((a = analysis_new(&o)) == NULL) {
			report_paths_free(paths, npaths);
			return EXIT_FAIL;
		}
		a = analyse_done(e, a, analysis_add_files_merged(a, paths,
		    npaths));
		report_paths_free(paths, npaths);
		if (a == NULL)
			return EXIT_FAIL;
	}
	if (fmt == TABLE_JSON)
		fputs("{", stdout);
	for (int s = 0; s < ANALYSIS_SECTION_MAX; s++) {
		const struct table *t = analysis_table(a, s);

		if ((any && !want[s]) || t == NULL)
			continue;
		if (fmt == TABLE_JSON)
			printf("%s\"%s\":", n ? ",\n" : "",
			    analysis_section_name(s));
		else if (fmt == TABLE_CSV)
			printf("%s# %s\n", n ? "\n" : "",
			    analysis_section_name(s));
		else if (n)
			putchar('\n');
		/* Text is for reading: the steps section is summarized
		 * (analysis_print_text) unless --steps-all. */
		if (fmt == TABLE_TEXT && !all_steps)
			analysis_print_text(a, s, stdout);
		else
			table_print(t, fmt, stdout);
		n++;
	}
	if (fmt == TABLE_JSON) {
		size_t nw;
		const char *const *w = analysis_warnings(a, &nw);

		printf("%s\"warnings\":[", n ? ",\n" : "");
		for (size_t i = 0; i < nw; i++) {
			printf("%s\"", i ? "," : "");
			for (const char *p = w[i]; *p; p++)
				if (*p == '"' || *p == '\\')
					printf("\\%c", *p);
				else
					putchar(*p);
			putchar('"');
		}
		puts("]}");
	}
	analysis_get_totals(a, &tot);
	analysis_free(a);
	return strict && tot.partial ? EXIT_FAIL : EXIT_OK;
}

const struct cmd_entry cmd_report_entry = {
	.name = "report",
	.usage = "FILE|DIR... [--json|--csv] [--section LIST] [--top N] "
	    "[--world-size N]\n"
	    "    [--step-marker NAME] [--align auto|always|never] [--no-align] "
	    "[--strict]\n"
	    "    [--steps-all] [--jobs N] [--partial-out FILE|-] [--node NAME]\n"
	    "  report --cluster slurm --job ID DIR | --hosts FILE DIR "
	    "[--allow-partial]\n"
	    "    [--timeout D] [options]\n"
	    "  Text output shows per rank a step summary and the --top N "
	    "(10) slowest\n  steps; --steps-all prints every step (--json "
	    "and --csv always do).\n"
	    "  Missing ranks, lost records and truncated files are printed "
	    "on stderr\n  under an INCOMPLETE INPUT banner; the exit status "
	    "is 0 unless --strict\n  (then 1 when the input is partial).\n"
	    "  --jobs N analyses the files in N threads (default: the online "
	    "CPUs); a file\n  of several processes (a node's) is shared "
	    "among its threads by process;\n  the results are the same for "
	    "every N.  A DIR stands for its *.mspti files\n  (not "
	    "snapshots), in name order.\n"
	    "  --cluster/--hosts: each node analyses its own files in DIR "
	    "and only the\n  summaries move; the merged report is the one "
	    "`report DIR` gives on all\n  the files gathered in one place.  "
	    "Nodes that fail are named on stderr;\n  the exit status is 1 "
	    "unless --allow-partial.  --partial-out writes the\n  partial "
	    "results instead of a report (--node NAME: only DIR/NAME.mspti "
	    "when\n  it exists); that is what each node runs.",
	.summary = "op/kernel/API/memory/communication/step tables, "
	    "slow ranks, advice",
	.exec = cmd_report_exec,
};

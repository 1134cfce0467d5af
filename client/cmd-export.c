/* msptictl export: trace files to Chrome JSON, Perfetto, CSV or the
 * ascend_pt tree msprof-analyze reads. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis.h"
#include "export.h"
#include "util.h"
#include "client.h"

#define EXPORT_MAX_DEPTH	8	/* of a directory format's tree */

/* One file of an output directory, to tell what an export wrote. */
struct export_file {
	char		*path;
	dev_t		 dev;
	ino_t		 ino;
	struct timespec	 mtime;
	off_t		 size;
};

struct export_files {
	struct export_file	*v;
	size_t			 n;
};

static void
export_files_free(struct export_files *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->v[i].path);
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

/* Every regular file under dir (none if it does not exist); 0 or -1. */
static int
export_files_scan(struct export_files *f, const char *dir, int depth)
{
	struct dirent *de;
	struct stat st;
	char p[PATH_MAX];
	DIR *d;
	int rc = 0;

	if (depth > EXPORT_MAX_DEPTH || (d = opendir(dir)) == NULL)
		return 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		struct export_file *nv;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >=
		    sizeof(p) || lstat(p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			rc = export_files_scan(f, p, depth + 1);
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		if ((nv = realloc(f->v, (f->n + 1) * sizeof(*nv))) == NULL ||
		    (nv[f->n].path = strdup(p)) == NULL) {
			if (nv != NULL)
				f->v = nv;
			rc = -1;
			break;
		}
		f->v = nv;
		nv[f->n].dev = st.st_dev;
		nv[f->n].ino = st.st_ino;
		nv[f->n].mtime = st.st_mtim;
		nv[f->n].size = st.st_size;
		f->n++;
	}
	closedir(d);
	return rc;
}

/* Whether a file is new since before, or was written again. */
static bool
export_files_changed(const struct export_files *before,
    const struct export_file *a)
{
	for (size_t i = 0; i < before->n; i++) {
		const struct export_file *b = &before->v[i];

		if (strcmp(a->path, b->path) == 0)
			return a->dev != b->dev || a->ino != b->ino ||
			    a->size != b->size ||
			    a->mtime.tv_sec != b->mtime.tv_sec ||
			    a->mtime.tv_nsec != b->mtime.tv_nsec;
	}
	return true;
}

static int
export_cmp_path(const void *a, const void *b)
{
	return strcmp(((const struct export_file *)a)->path,
	    ((const struct export_file *)b)->path);
}

/* --json: what was written, from what, and how complete it is. */
static void
export_json(const char *fmt, const char *out, int argc, char **argv,
    const struct export_files *before, const struct export_files *after,
    const struct analysis_totals *tot)
{
	size_t n = 0;

	printf("{\"format\":");
	util_json_str(stdout, fmt);
	printf(",\"output\":");
	util_json_str(stdout, out);
	printf(",\"inputs\":[");
	for (int i = optind; i < argc; i++) {
		printf("%s", i > optind ? "," : "");
		util_json_str(stdout, argv[i]);
	}
	printf("],\"files\":[");
	if (after == NULL)
		util_json_str(stdout, out);
	for (size_t i = 0; after != NULL && i < after->n; i++) {
		if (!export_files_changed(before, &after->v[i]))
			continue;
		printf("%s", n++ ? "," : "");
		util_json_str(stdout, after->v[i].path);
	}
	printf("],\"records\":%llu,\"lost\":%llu,\"ranks_seen\":%u,"
	    "\"world_size\":%u,\"partial\":%s}\n",
	    (unsigned long long)tot->records, (unsigned long long)tot->lost,
	    tot->ranks_seen, tot->world_size, tot->partial ? "true" : "false");
}

static int
cmd_export_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		CLIENT_ANALYSIS_OPTS,
		{ "strict", no_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_export_entry;
	struct analysis_opts o;
	struct analysis *a;
	const char *fmt = "chrome", *out = NULL;
	struct analysis_totals tot;
	struct export_files before = { 0 }, after = { 0 };
	struct client_output oo;
	bool strict = false, dir;
	FILE *f = NULL;
	int ch, rc;

	analysis_opts_init(&o);
	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv, "f:o:w:Sja:N", opts)) != -1) {
		switch (ch) {
		case 'f':
			fmt = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'S':
			strict = true;
			break;
		case 'j':
			c->json = true;
			break;
		default:
			if ((rc = client_analysis_opt(e, ch, optarg, &o)) < 0)
				return client_opt_exit(e, ch);
			if (rc > 0)
				return rc;
			break;
		}
	}
	if (strcmp(fmt, "chrome") && strcmp(fmt, "perfetto") &&
	    strcmp(fmt, "csv") && strcmp(fmt, "ascend-pt"))
		return client_usage_error(e, "unknown format '%s'", fmt);
	if (optind >= argc)
		return client_usage_error(e, "no trace file");
	if (out == NULL)
		return client_usage_error(e, "-o OUT is required");
	dir = strcmp(fmt, "csv") == 0 || strcmp(fmt, "ascend-pt") == 0;
	if (c->json && strcmp(out, "-") == 0)
		return client_usage_error(e, "--json prints on stdout: give "
		    "-o FILE, not -o -");
	/* Each input is read twice (the analysis, then the records): a
	 * stream (a pipe, a FIFO) cannot be. */
	for (int i = optind; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISFIFO(st.st_mode)) {
			fprintf(stderr, "msptictl export: %s: not a regular "
			    "file (export reads its input twice: save a "
			    "stream to a file first)\n", argv[i]);
			return EXIT_FAIL;
		}
	}
	/* The output first: a FIFO with no reader is refused before the
	 * work, a file is written aside (client_out_open). */
	if (!dir && (f = client_out_open(&oo, out, &rc)) == NULL) {
		fprintf(stderr, "msptictl export: %s: %s\n", out,
		    client_out_strerror(rc));
		return EXIT_FAIL;
	}
	/* The overlap track needs the compute/communication unions. */
	o.keep_segments = strcmp(fmt, "csv") != 0;
	if ((a = client_analyse(e, &o, argc, argv)) == NULL) {
		if (!dir)
			(void)client_out_close(&oo, f, -ECANCELED);
		return EXIT_FAIL;
	}
	if (dir && c->json && export_files_scan(&before, out, 0) != 0) {
		fprintf(stderr, "msptictl export: out of memory\n");
		rc = -ENOMEM;
	} else if (strcmp(fmt, "ascend-pt") == 0)
		rc = export_ascendpt(a, out);
	else if (dir)
		rc = export_csv(a, out);
	else {
		rc = strcmp(fmt, "chrome") == 0 ? export_chrome(a, f) :
		    export_perfetto(a, f);
		rc = client_out_close(&oo, f, rc);
	}
	analysis_get_totals(a, &tot);
	analysis_free(a);
	if (rc == 0 && dir && c->json) {
		if (export_files_scan(&after, out, 0) != 0)
			rc = -ENOMEM;
		else
			qsort(after.v, after.n, sizeof(*after.v),
			    export_cmp_path);
	}
	if (rc != 0) {
		fprintf(stderr, "msptictl export: %s: %s\n", out,
		    dir && rc == -ENXIO ? "a file to write in it is a FIFO "
		    "or a device (left as it is)" : client_out_strerror(rc));
		export_files_free(&before);
		export_files_free(&after);
		return EXIT_FAIL;
	}
	if (c->json)
		export_json(fmt, out, argc, argv, &before, dir ? &after : NULL,
		    &tot);
	export_files_free(&before);
	export_files_free(&after);
	return strict && tot.partial ? EXIT_FAIL : EXIT_OK;
}

const struct cmd_entry cmd_export_entry = {
	.name = "export",
	.usage = "FILE... --format chrome|perfetto|csv|ascend-pt -o OUT "
	    "[--world-size N] [--strict]\n    [--json] [--align auto|always|never] "
	    "[--no-align]\n"
	    "  -o, --output OUT: a file (- for stdout), the directory of "
	    "csv and ascend-pt.\n  The output records any missing rank or loss; --strict "
	    "exits 1 when the\n  input is partial.  --json prints what was "
	    "written: the files, records\n  and losses.  Each host's times are "
	    "shifted onto the first host's clock\n  by the offset estimated from "
	    "collective ends (--no-align: not shifted).",
	.summary = "write a timeline (Chrome JSON, Perfetto), CSV tables or "
	    "an ascend_pt tree",
	.exec = cmd_export_exec,
};

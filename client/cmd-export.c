/* msptictl export: trace files to Chrome JSON, Perfetto, CSV or the
 * ascend_pt tree msprof-analyze reads. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "export.h"
#include "client.h"

static int
cmd_export_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "world-size", required_argument, NULL, 'w' },
		{ "strict", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct analysis_opts o;
	struct analysis *a;
	const char *fmt = "chrome", *out = NULL;
	struct analysis_totals tot;
	bool strict = false;
	FILE *f;
	int ch, rc;

	analysis_opts_init(&o);
	client_rescan(&argc, &argv);
	while ((ch = getopt_long(argc, argv, "f:o:w:Sh", opts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			fmt = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'w':
			o.world_size = atoi(optarg);
			break;
		case 'S':
			strict = true;
			break;
		case 'h':
			printf("usage: msptictl export %s\n",
			    cmd_export_entry.usage);
			return EXIT_OK;
		default:
			client_usage_error(&cmd_export_entry, "bad option");
			return EXIT_USAGE;
		}
	}
	if (strcmp(fmt, "chrome") && strcmp(fmt, "perfetto") &&
	    strcmp(fmt, "csv") && strcmp(fmt, "ascend-pt")) {
		client_usage_error(&cmd_export_entry, "unknown format '%s'",
		    fmt);
		return EXIT_USAGE;
	}
	if (optind >= argc || out == NULL) {
		client_usage_error(&cmd_export_entry, optind >= argc ?
		    "no trace file" : "-o OUT is required");
		return EXIT_USAGE;
	}
	/* The overlap track needs the compute/communication unions. */
	o.keep_segments = strcmp(fmt, "csv") != 0;
	if ((a = client_analyse(&cmd_export_entry, &o, argc, argv)) == NULL)
		return EXIT_FAIL;
	if (strcmp(fmt, "csv") == 0)
		rc = export_csv(a, out);
	else if (strcmp(fmt, "ascend-pt") == 0)
		rc = export_ascendpt(a, out);
	else if ((f = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb")) ==
	    NULL)
		rc = -errno;
	else {
		rc = strcmp(fmt, "chrome") == 0 ? export_chrome(a, f) :
		    export_perfetto(a, f);
		if (f != stdout && fclose(f) != 0 && rc == 0)
			rc = -EIO;
	}
	analysis_get_totals(a, &tot);
	analysis_free(a);
	if (rc != 0) {
		fprintf(stderr, "msptictl export: %s: %s\n", out,
		    strerror(-rc));
		return EXIT_FAIL;
	}
	return strict && tot.partial ? EXIT_FAIL : EXIT_OK;
}

const struct cmd_entry cmd_export_entry = {
	.name = "export",
	.usage = "FILE... --format chrome|perfetto|csv|ascend-pt -o OUT "
	    "[--world-size N] "
	    "[--strict]\n  The output records any missing rank or loss; "
	    "--strict exits 1 when the input is partial.",
	.summary = "write a timeline (Chrome JSON, Perfetto), CSV tables or "
	    "an ascend_pt tree",
	.exec = cmd_export_exec,
};

/* msptictl report: analysis tables and advice from trace files. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "client.h"

/* Loads files into a new analysis and runs it; NULL after printing why. */
struct analysis *
client_analyse(const struct cmd_entry *e, const struct analysis_opts *o,
    int argc, char **argv)
{
	struct analysis_opts oj = *o;
	struct analysis *a;
	size_t nw, ok;
	const char *const *w;
	struct analysis_totals tot;

	/* Reading threads: every online CPU unless --jobs says. */
	if (oj.jobs == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		oj.jobs = n > 1 ? (unsigned)(n < 16 ? n : 16) : 1;
	}
	if ((a = analysis_new(&oj)) == NULL) {
		fprintf(stderr, "msptictl %s: out of memory\n", e->name);
		return NULL;
	}
	ok = analysis_add_files(a, argv + optind, (size_t)(argc - optind));
	if (ok == 0 || analysis_run(a) != 0) {
		/* Say why for each file ("x: cannot read: bad magic"). */
		w = analysis_warnings(a, &nw);
		for (size_t i = 0; i < nw; i++)
			fprintf(stderr, "msptictl %s: %s\n", e->name, w[i]);
		fprintf(stderr, "msptictl %s: no readable trace\n", e->name);
		analysis_free(a);
		return NULL;
	}
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
	return a;
}

static int
cmd_report_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "csv", no_argument, NULL, 'c' },
		{ "section", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 't' },
		{ "world-size", required_argument, NULL, 'w' },
		{ "step-marker", required_argument, NULL, 'm' },
		{ "align", required_argument, NULL, 'a' },
		{ "no-align", no_argument, NULL, 'N' },
		{ "strict", no_argument, NULL, 'S' },
		{ "steps-all", no_argument, NULL, 'A' },
		{ "jobs", required_argument, NULL, 'J' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_report_entry;
	struct analysis_opts o;
	struct analysis *a;
	struct analysis_totals tot;
	unsigned long num;
	enum table_format fmt = c->json ? TABLE_JSON : TABLE_TEXT;
	bool want[ANALYSIS_SECTION_MAX], any = false, strict = false;
	bool all_steps = false;
	int ch, n = 0;

	analysis_opts_init(&o);
	memset(want, 0, sizeof(want));
	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv, "jcs:t:w:m:a:NSAJ:",
	    opts)) != -1) {
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
		case 'w':
			if (client_parse_uint(e, "--world-size", optarg,
			    1 << 20, &num) != 0)
				return EXIT_USAGE;
			o.world_size = (int)num;
			break;
		case 'm':
			o.step_marker = optarg;
			break;
		case 'a':
			if (strcmp(optarg, "auto") != 0 &&
			    strcmp(optarg, "always") != 0 &&
			    strcmp(optarg, "never") != 0)
				return client_usage_error(e, "bad --align '%s' "
				    "(auto, always or never)", optarg);
			o.align = strcmp(optarg, "always") == 0 ?
			    ANALYSIS_ALIGN_ALWAYS : strcmp(optarg, "never") ==
			    0 ? ANALYSIS_ALIGN_NEVER : ANALYSIS_ALIGN_AUTO;
			break;
		case 'N':
			o.align = ANALYSIS_ALIGN_NEVER;
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
		default:
			return client_opt_exit(e, ch);
		}
	}
	if (optind >= argc) {
		client_usage_error(&cmd_report_entry, "no trace file");
		return EXIT_USAGE;
	}
	if ((a = client_analyse(&cmd_report_entry, &o, argc, argv)) == NULL)
		return EXIT_FAIL;
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
	.usage = "FILE... [--json|--csv] [--section LIST] [--top N] "
	    "[--world-size N]\n"
	    "    [--step-marker NAME] [--align auto|always|never] [--no-align] "
	    "[--strict]\n"
	    "    [--steps-all] [--jobs N]\n"
	    "  Text output shows per rank a step summary and the --top N "
	    "(10) slowest\n  steps; --steps-all prints every step (--json "
	    "and --csv always do).\n"
	    "  Missing ranks, lost records and truncated files are printed "
	    "on stderr\n  under an INCOMPLETE INPUT banner; the exit status "
	    "is 0 unless --strict\n  (then 1 when the input is partial).\n"
	    "  --jobs N reads the files with N threads (default: the online "
	    "CPUs);\n  the results are the same for every N.",
	.summary = "op/kernel/API/memory/communication/step tables, "
	    "slow ranks, advice",
	.exec = cmd_report_exec,
};

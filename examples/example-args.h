/*
 * example-args.h - the command line of the msPTI examples.  They take no
 * options; like every mspti program they answer --help and --version,
 * and refuse anything else with exit status 2.
 */
#ifndef EXAMPLE_ARGS_H
#define EXAMPLE_ARGS_H

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void
example_args(int argc, char **argv, const char *prog, const char *what)
{
	if (argc < 2)
		return;
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("%s %s\n", prog, PACKAGE_VERSION);
		exit(0);
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		printf("usage: %s [--help] [--version]\n  %s\n", prog, what);
		exit(0);
	}
	fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--help] "
	    "[--version]\n", prog, argv[1], prog);
	exit(2);
}

#endif

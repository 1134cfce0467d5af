/* msptid: command line, then the server. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "msptid.h"

static void
usage(FILE *f)
{
	fprintf(f, "usage: msptid [-fv] [-r|--runtime-dir DIR] [--foreground] "
	    "[--verbose]\n"
	    "    [--ring-memory-per-uid SIZE] [--ring-memory-total SIZE]\n"
	    "    [--metrics-listen HOST:PORT] [-h|--help] [--version]\n");
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ "ring-memory-per-uid", required_argument, NULL, 'U' },
		{ "ring-memory-total", required_argument, NULL, 'T' },
		{ "metrics-listen", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	const char *rundir = NULL, *metrics_listen = NULL;
	int64_t ring_uid = -1, ring_total = -1;
	struct daemon *d;
	int c, verbose = 0, foreground = 0, rc;

	while ((c = getopt_long(argc, argv, "r:fvh", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			rundir = optarg;
			break;
		case 'f':
			foreground = 1;
			break;
		case 'v':
			verbose++;
			break;
		case 'V':
			printf("msptid %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		case 'M':
			metrics_listen = optarg;
			break;
		case 'U':
		case 'T':
			if ((c == 'U' ? (ring_uid = util_parse_size(optarg)) :
			    (ring_total = util_parse_size(optarg))) <= 0) {
				fprintf(stderr, "msptid: bad size '%s'\n",
				    optarg);
				return 2;
			}
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	log_init("msptid", sd_journal() ? LOG_DEST_JOURNAL : LOG_DEST_STDERR,
	    verbose);
	rundir = util_runtime_dir(rundir);
	if ((d = server_create(rundir)) == NULL)
		fatalx("out of memory");
	if (ring_uid > 0)
		d->lim.ring_mem_per_uid = (uint64_t)ring_uid;
	if (ring_total > 0)
		d->lim.ring_mem_total = (uint64_t)ring_total;
	if (server_listen(d) != 0) {
		server_free(d);
		return 1;
	}
	/* Off unless asked for: an HTTP port is a new way in. */
	if (metrics_listen != NULL &&
	    (d->http = httpmetrics_start(d, metrics_listen)) == NULL) {
		server_shutdown(d);
		server_free(d);
		return 1;
	}
	/* Under systemd or a supervisor we stay in the foreground; otherwise
	 * detach, after the sockets exist so callers may use them at once. */
	if (!foreground && getenv("NOTIFY_SOCKET") == NULL &&
	    daemon(0, 0) != 0)
		fatal("daemon");
	rc = server_run(d);
	server_shutdown(d);
	server_free(d);
	return rc == 0 ? 0 : 1;
}

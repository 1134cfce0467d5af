/* msptictl: global options, the verb table, and the request helpers. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "client.h"

#define CLIENT_TIMEOUT_MS	10000

static const struct cmd_entry *cmd_table[] = {
	&cmd_status_entry,
	&cmd_list_entry,
	&cmd_report_entry,
	&cmd_export_entry,
	&cmd_start_entry,
	&cmd_stop_entry,
	&cmd_retarget_entry,
	&cmd_sessions_entry,
	&cmd_wait_entry,
	&cmd_snapshot_entry,
	&cmd_metrics_entry,
	&cmd_run_entry,
	&cmd_help_entry,
};

#define CLIENT_GLOBAL_USAGE						\
	"usage: msptictl [-r|--runtime-dir DIR] [-j|--json] COMMAND [ARGS]\n" \
	"       msptictl -h | --help | --version | help [COMMAND]\n"

static void
usage(FILE *f)
{
	fprintf(f, CLIENT_GLOBAL_USAGE "\ncommands:\n");
	for (size_t i = 0; i < nitems(cmd_table); i++)
		fprintf(f, "  %-10s %s\n", cmd_table[i]->name,
		    cmd_table[i]->summary);
	fprintf(f, "\n'msptictl COMMAND --help' prints the usage of a command.\n");
}

const struct cmd_entry *
client_cmd_find(const char *name)
{
	for (size_t i = 0; i < nitems(cmd_table); i++)
		if (strcmp(name, cmd_table[i]->name) == 0)
			return cmd_table[i];
	return NULL;
}

/*
 * main() parses with "+" so global options stop at the verb; a verb that
 * takes operands rescans its own arguments from the verb on, and optind 0
 * re-initialises GNU getopt in its permuting mode.
 */
void
client_rescan(int *argc, char ***argv)
{
	*argc = *argc - optind + 1;
	*argv += optind - 1;
	optind = 0;
}

void
client_usage(const struct cmd_entry *e, FILE *f)
{
	fprintf(f, "usage: msptictl %s %s\n", e->name, e->usage);
	if (e->cluster)
		fprintf(f, "  On every node of a job: add --cluster slurm --job ID "
		    "or --hosts FILE,\n  and --output-dir DIR, "
		    "--allow-partial, --timeout D (see msptictl(1)).\n");
}

/*
 * The one form of every usage error, at the top level (e NULL) and for
 * each verb: one line on stderr, "msptictl VERB: WHAT (see msptictl VERB
 * --help)".  Returns EXIT_USAGE.
 */
int
client_usage_error(const struct cmd_entry *e, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "msptictl%s%s: ", e ? " " : "", e ? e->name : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see msptictl%s%s --help)\n", e ? " " : "",
	    e ? e->name : "");
	return EXIT_USAGE;
}

/* Options of a cluster capture (cluster.c parses them); a capture verb
 * knows them only to say they need --cluster or --hosts.  After the
 * verb's own: start's --job is its own. */
static const struct option client_cluster_opts[] = {
	{ "cluster", required_argument, NULL, CLIENT_OPT_CLUSTER },
	{ "job", required_argument, NULL, CLIENT_OPT_CLUSTER },
	{ "hosts", required_argument, NULL, CLIENT_OPT_CLUSTER },
	{ "output-dir", required_argument, NULL, CLIENT_OPT_CLUSTER },
	{ "timeout", required_argument, NULL, CLIENT_OPT_CLUSTER },
	{ "allow-partial", no_argument, NULL, CLIENT_OPT_CLUSTER },
};

/*
 * Says what was wrong with the option getopt_long just refused.  optopt
 * is 0 for an unknown or ambiguous long option, the option's value for a
 * long one with a value missing or one too many, else the short option.
 */
static void
client_getopt_refused(const struct cmd_entry *e, int ch, char **argv,
    const struct option *opts)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";
	const struct option *hit = NULL;
	size_t len = 0, n = 0;

	if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0') {
		len = strcspn(arg + 2, "=");
		for (const struct option *o = opts; o->name != NULL; o++) {
			if (strncmp(o->name, arg + 2, len) != 0)
				continue;
			hit = o;
			if (strlen(o->name) == len) {
				n = 1;
				break;
			}
			n++;
		}
	}
	if (optopt != 0 && (n != 1 || hit->val != optopt)) {
		/* A short option, maybe in a bundle (-jZ). */
		if (ch == ':')
			client_usage_error(e, "option '-%c' needs a value", optopt);
		else
			client_usage_error(e, "unknown option '-%c'", optopt);
	} else if (ch == ':')
		client_usage_error(e, "option '--%s' needs a value", hit->name);
	else if (optopt != 0)
		client_usage_error(e, "option '--%s' takes no value", hit->name);
	else if (n > 1)
		client_usage_error(e, "ambiguous option '%.*s'", (int)len + 2,
		    arg);
	else
		client_usage_error(e, "unknown option '%.*s'", (int)len + 2, arg);
}

/*
 * getopt_long for a verb: its options, plus -h/--help and, for the
 * capture verbs, the cluster options.  Returns the option as getopt_long
 * does, CLIENT_OPT_HELP after printing the verb's usage on stdout, or
 * CLIENT_OPT_BAD after printing a usage error (client_opt_exit maps both
 * to the exit code).  getopt's own messages are off: every error has the
 * one form of client_usage_error.
 */
int
client_getopt(const struct cmd_entry *e, int argc, char **argv,
    const char *optstring, const struct option *opts)
{
	static struct option all[64];
	static char shortopts[128];
	size_t n = 0;
	int ch;

	for (const struct option *o = opts; o->name != NULL &&
	    n < nitems(all) - 8; o++)
		all[n++] = *o;
	all[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	for (size_t i = 0; e->cluster && i < nitems(client_cluster_opts); i++)
		all[n++] = client_cluster_opts[i];
	all[n] = (struct option){ NULL, 0, NULL, 0 };
	snprintf(shortopts, sizeof(shortopts), "%s:%sh",
	    *optstring == '+' ? "+" : "",
	    optstring + (*optstring == '+'));
	opterr = 0;
	switch ((ch = getopt_long(argc, argv, shortopts, all, NULL))) {
	case 'h':
		client_usage(e, stdout);
		return CLIENT_OPT_HELP;
	case '?':
	case ':':
		client_getopt_refused(e, ch, argv, all);
		return CLIENT_OPT_BAD;
	case CLIENT_OPT_CLUSTER: {
		/* "--timeout 5s" or "--timeout=5s": name the option. */
		const char *o = argv[optind - 1 - (optarg != NULL &&
		    optarg == argv[optind - 1])];

		client_usage_error(e, "%.*s is for a capture on every node of "
		    "a job: add --cluster slurm or --hosts FILE",
		    (int)strcspn(o, "="), o);
		return CLIENT_OPT_BAD;
	}
	}
	return ch;
}

/* The exit code of a verb whose option loop ended on ch (its default:
 * case): 0 after --help, 2 after a usage error. */
int
client_opt_exit(const struct cmd_entry *e, int ch)
{
	if (ch == CLIENT_OPT_HELP)
		return EXIT_OK;
	if (ch != CLIENT_OPT_BAD)
		client_usage_error(e, "option '%c' is not handled", ch);
	return EXIT_USAGE;
}

/* An unsigned number option ("--top 5") at most max; 0, or -1 after the
 * usage error. */
int
client_parse_uint(const struct cmd_entry *e, const char *opt, const char *arg,
    unsigned long max, unsigned long *v)
{
	char *end;

	errno = 0;
	*v = strtoul(arg, &end, 10);
	if (errno != 0 || end == arg || *end != '\0' || *arg == '-' ||
	    *arg == '+' || *v > max) {
		client_usage_error(e, "bad %s '%s'", opt, arg);
		return -1;
	}
	return 0;
}

/* msptictl help [COMMAND]: the usage of msptictl or of COMMAND. */
static int
cmd_help_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e;
	int ch;

	(void)c;
	client_rescan(&argc, &argv);
	/* No options of its own: any is --help or an error. */
	if ((ch = client_getopt(&cmd_help_entry, argc, argv, "", opts)) != -1)
		return client_opt_exit(&cmd_help_entry, ch);
	if (optind == argc) {
		usage(stdout);
		return EXIT_OK;
	}
	if (optind + 1 != argc)
		return client_usage_error(&cmd_help_entry, "give one COMMAND");
	if ((e = client_cmd_find(argv[optind])) == NULL)
		return client_usage_error(&cmd_help_entry,
		    "unknown command '%s'", argv[optind]);
	client_usage(e, stdout);
	return EXIT_OK;
}

const struct cmd_entry cmd_help_entry = {
	.name = "help",
	.usage = "[COMMAND]",
	.summary = "the usage of msptictl or of one command",
	.exec = cmd_help_exec,
};

/* Connects to ctl.sock; prints one clear line and returns an exit code on failure. */
int
client_connect(struct client *c)
{
	char path[PATH_MAX];
	int fd;

	if (util_path(path, sizeof(path), c->rundir, MSPTI_CTL_SOCK) != 0) {
		fprintf(stderr, "msptictl: runtime dir path too long: %s\n",
		    c->rundir);
		return EXIT_USAGE;
	}
	fd = util_unix_connect(path, 0);
	if (fd < 0) {
		if (fd == -ENOENT || fd == -ECONNREFUSED)
			fprintf(stderr, "msptictl: msptid is not running "
			    "(no daemon listening on %s)\n", path);
		else
			fprintf(stderr, "msptictl: cannot connect to %s: %s\n",
			    path, strerror(-fd));
		return EXIT_FAIL;
	}
	c->sock = fd;
	return EXIT_OK;
}

/*
 * Sends req and waits for a reply of reply_type.  An Error reply is printed
 * and its code returned; on success *reply is set and EXIT_OK returned.
 */
int
client_request(struct client *c, uint16_t type, const ProtobufCMessage *req,
    uint16_t reply_type, ProtobufCMessage **reply)
{
	return client_request_fd(c, type, req, -1, reply_type, reply,
	    CLIENT_TIMEOUT_MS);
}

int
client_request_fd(struct client *c, uint16_t type, const ProtobufCMessage *req,
    int fd, uint16_t reply_type, ProtobufCMessage **reply, int timeout_ms)
{
	struct frame_hdr h;
	ProtobufCMessage *msg;
	int rc;

	if (c->sock < 0 && (rc = client_connect(c)) != EXIT_OK)
		return rc;
	if ((rc = frame_send(c->sock, type, req, fd)) != 0) {
		fprintf(stderr, "msptictl: cannot send %s: %s\n", msg_name(type),
		    frame_strerror(rc));
		return EXIT_FAIL;
	}
	c->timed_out = false;
	if ((rc = frame_recv(c->sock, timeout_ms, &h, &msg, NULL)) != 0) {
		c->timed_out = rc == -ETIMEDOUT;
		if (!c->timed_out || !c->quiet_timeout)
			fprintf(stderr, "msptictl: no reply from msptid: %s\n",
			    frame_strerror(rc));
		return EXIT_FAIL;
	}
	if (h.type == MSPTI__MSG_TYPE__MSG_ERROR) {
		Mspti__Error *e = (Mspti__Error *)msg;
		size_t vl = strspn(e->message, "abcdefghijklmnopqrstuvwxyz");

		/* The daemon's usage errors ("VERB: what") read as ours,
		 * under the verb the user ran. */
		if (e->code == EXIT_USAGE && vl > 0 &&
		    strncmp(e->message + vl, ": ", 2) == 0) {
			const char *v = c->verb ? c->verb : e->message;
			int n = c->verb ? (int)strlen(c->verb) : (int)vl;

			fprintf(stderr, "msptictl %.*s: %s (see msptictl %.*s "
			    "--help)\n", n, v, e->message + vl + 2, n, v);
		}
		else
			fprintf(stderr, "msptictl: %s\n", e->message);
		rc = e->code >= 1 && e->code <= 3 ? e->code : EXIT_FAIL;
		protobuf_c_message_free_unpacked(msg, NULL);
		return rc;
	}
	if (h.type != reply_type) {
		fprintf(stderr, "msptictl: unexpected %s reply from msptid\n",
		    msg_name(h.type));
		protobuf_c_message_free_unpacked(msg, NULL);
		return EXIT_FAIL;
	}
	*reply = msg;
	return EXIT_OK;
}

const char *
client_user(uint32_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char pbuf[1024];

	if (getpwuid_r(uid, &pw, pbuf, sizeof(pbuf), &res) == 0 && res != NULL)
		snprintf(buf, len, "%s", pw.pw_name);
	else
		snprintf(buf, len, "%u", uid);
	return buf;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct client c = { .sock = -1 };
	const struct cmd_entry *e;
	const char *rundir = NULL;
	int ch, rc;

	log_init("msptictl", LOG_DEST_STDERR, 0);
	opterr = 0;
	/* "+": stop at the verb, whose options are its own. */
	while ((ch = getopt_long(argc, argv, "+:r:jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			rundir = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'V':
			printf("msptictl %s\n", PACKAGE_VERSION);
			return EXIT_OK;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case ':':
			return client_usage_error(NULL, "option '%s' needs a "
			    "value", argv[optind - 1]);
		default:
			if (optopt != 0 && strncmp(argv[optind - 1], "--", 2))
				return client_usage_error(NULL,
				    "unknown option '-%c'", optopt);
			return client_usage_error(NULL, "unknown option '%s'",
			    argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return client_usage_error(NULL, "no command given");
	c.rundir = util_runtime_dir(rundir);
	if ((e = client_cmd_find(argv[optind])) == NULL)
		return client_usage_error(NULL, "unknown command '%s'",
		    argv[optind]);
	if (e->cluster && cluster_wanted(argv[optind], argc - optind,
	    argv + optind))
		return cluster_exec(&c, argv[optind], argc - optind,
		    argv + optind);
	optind++;
	/* Each verb parses its own options from argv[optind..]. */
	c.verb = e->name;
	rc = e->exec(&c, argc, argv);
	if (c.sock >= 0)
		close(c.sock);
	return rc;
}

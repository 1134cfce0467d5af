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
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: msptictl [--runtime-dir DIR] [--json] COMMAND [ARGS]\n\n"
	    "commands:\n");
	for (size_t i = 0; i < nitems(cmd_table); i++)
		fprintf(f, "  %-10s %s\n", cmd_table[i]->name,
		    cmd_table[i]->summary);
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
client_usage_error(const struct cmd_entry *e, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "msptictl %s: ", e->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: msptictl %s %s\n", e->name, e->usage);
}

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
	if ((rc = frame_recv(c->sock, timeout_ms, &h, &msg, NULL)) != 0) {
		fprintf(stderr, "msptictl: no reply from msptid: %s\n",
		    frame_strerror(rc));
		return EXIT_FAIL;
	}
	if (h.type == MSPTI__MSG_TYPE__MSG_ERROR) {
		Mspti__Error *e = (Mspti__Error *)msg;

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
	const char *rundir = NULL;
	int ch, rc;

	log_init("msptictl", LOG_DEST_STDERR, 0);
	/* "+": stop at the verb, whose options are its own. */
	while ((ch = getopt_long(argc, argv, "+r:jh", opts, NULL)) != -1) {
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
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	c.rundir = util_runtime_dir(rundir);
	for (size_t i = 0; i < nitems(cmd_table); i++) {
		if (strcmp(argv[optind], cmd_table[i]->name) != 0)
			continue;
		if (cluster_wanted(argv[optind], argc - optind, argv + optind))
			return cluster_exec(&c, argv[optind], argc - optind,
			    argv + optind);
		optind++;
		/* Each verb parses its own options from argv[optind..]. */
		rc = cmd_table[i]->exec(&c, argc, argv);
		if (c.sock >= 0)
			close(c.sock);
		return rc;
	}
	fprintf(stderr, "msptictl: unknown command '%s' (try msptictl --help)\n",
	    argv[optind]);
	return EXIT_USAGE;
}

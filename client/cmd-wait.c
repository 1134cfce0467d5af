/* msptictl wait: blocks until a session is finalized (the daemon pushes
 * the answer; nothing polls). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "client.h"

static int
cmd_wait_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_wait_entry;
	Mspti__WaitSession req = MSPTI__WAIT_SESSION__INIT;
	ProtobufCMessage *msg;
	int ch, rc;

	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv, "j", opts)) != -1) {
		if (ch != 'j')
			return client_opt_exit(e, ch);
		c->json = true;
	}
	if (optind + 1 != argc) {
		client_usage_error(e, "give one SESSION");
		return EXIT_USAGE;
	}
	if (client_parse_session(e, argv[optind], &req.session_id))
		return EXIT_USAGE;
	rc = client_request_fd(c, MSPTI__MSG_TYPE__MSG_WAIT_SESSION, &req.base,
	    -1, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &msg, -1);
	if (rc != EXIT_OK)
		return rc;
	return client_session_result(c, msg);
}

const struct cmd_entry cmd_wait_entry = {
	.name = "wait",
	.usage = "[--json] SESSION",
	.summary = "wait until a session is finalized, then print its summary",
	.cluster = true,
	.exec = cmd_wait_exec,
};

/* msptictl stop: stops a session and prints its file, records and losses. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "client.h"

static int
cmd_stop_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_stop_entry;
	Mspti__StopSession req = MSPTI__STOP_SESSION__INIT;
	ProtobufCMessage *msg;
	uint32_t *pids = NULL;
	size_t npids = 0;
	int ch, rc;

	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv, "p:j", opts)) != -1) {
		switch (ch) {
		case 'p':
			if (client_parse_pids(optarg, &pids, &npids) != 0 ||
			    npids != 1) {
				client_usage_error(e, "bad pid '%s'", optarg);
				return EXIT_USAGE;
			}
			req.pid = pids[0];
			free(pids);
			pids = NULL;
			npids = 0;
			break;
		case 'j':
			c->json = true;
			break;
		default:
			return client_opt_exit(e, ch);
		}
	}
	if (req.pid == 0) {
		if (optind + 1 != argc) {
			client_usage_error(e, "give a SESSION or --pid N");
			return EXIT_USAGE;
		}
		if (client_parse_session(e, argv[optind], &req.session_id))
			return EXIT_USAGE;
	} else if (optind != argc) {
		client_usage_error(e, "give a SESSION or --pid N, not both");
		return EXIT_USAGE;
	}
	rc = client_request_fd(c, MSPTI__MSG_TYPE__MSG_STOP_SESSION, &req.base,
	    -1, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &msg, 60000);
	if (rc != EXIT_OK)
		return rc;
	return client_session_result(c, msg);
}

const struct cmd_entry cmd_stop_entry = {
	.name = "stop",
	.usage = "[--json] SESSION | --pid N",
	.summary = "stop a session: finalize its file, print records and losses",
	.cluster = true,
	.exec = cmd_stop_exec,
};

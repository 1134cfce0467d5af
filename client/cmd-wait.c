/* msptictl wait: blocks until a session is finalized (the daemon pushes
 * the answer; nothing polls), or --timeout D passed. */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "client.h"

static int
cmd_wait_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const char *timeout = NULL;
	int64_t timeout_ns = -1;
	const struct cmd_entry *e = &cmd_wait_entry;
	Mspti__WaitSession req = MSPTI__WAIT_SESSION__INIT;
	ProtobufCMessage *msg;
	int ch, rc;

	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv, "jt:", opts)) != -1) {
		if (ch == 'j')
			c->json = true;
		else if (ch == 't') {
			timeout = optarg;
			if ((timeout_ns = util_parse_duration(optarg)) <= 0) {
				client_usage_error(e, "bad --timeout '%s'",
				    optarg);
				return EXIT_USAGE;
			}
		} else
			return client_opt_exit(e, ch);
	}
	if (optind + 1 != argc) {
		client_usage_error(e, "give one SESSION");
		return EXIT_USAGE;
	}
	if (client_parse_session(e, argv[optind], &req.session_id))
		return EXIT_USAGE;
	c->quiet_timeout = timeout != NULL;
	rc = client_request_fd(c, MSPTI__MSG_TYPE__MSG_WAIT_SESSION, &req.base,
	    -1, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &msg, timeout_ns < 0 ? -1 :
	    (int)(timeout_ns / 1000000 > INT_MAX ? INT_MAX :
	    timeout_ns / 1000000 > 0 ? timeout_ns / 1000000 : 1));
	if (rc != EXIT_OK && c->timed_out) {
		/* The session goes on; only this wait ends. */
		fprintf(stderr, "msptictl wait: session %llu not finalized "
		    "within %s\n", (unsigned long long)req.session_id, timeout);
		return EXIT_FAIL;
	}
	if (rc != EXIT_OK)
		return rc;
	return client_session_result(c, msg);
}

const struct cmd_entry cmd_wait_entry = {
	.name = "wait",
	.usage = "[--json] [--timeout D] SESSION",
	.summary = "wait until a session is finalized, then print its summary",
	.cluster = true,
	.exec = cmd_wait_exec,
};

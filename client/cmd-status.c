/* msptictl status: the daemon's version, uptime, agents and sessions. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>

#include "util.h"
#include "client.h"

static int
cmd_status_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	Mspti__StatusRequest req = MSPTI__STATUS_REQUEST__INIT;
	Mspti__StatusReply *rep;
	ProtobufCMessage *msg;
	char up[32];
	int ch, rc;

	while ((ch = client_getopt(&cmd_status_entry, argc, argv,
	    "j", opts)) != -1) {
		if (ch != 'j')
			return client_opt_exit(&cmd_status_entry, ch);
		c->json = true;
	}
	if (optind != argc) {
		client_usage_error(&cmd_status_entry, "unexpected argument '%s'",
		    argv[optind]);
		return EXIT_USAGE;
	}
	rc = client_request(c, MSPTI__MSG_TYPE__MSG_STATUS_REQ, &req.base,
	    MSPTI__MSG_TYPE__MSG_STATUS_REP, &msg);
	if (rc != EXIT_OK)
		return rc;
	rep = (Mspti__StatusReply *)msg;
	if (c->json) {
		printf("{\"version\":");
		util_json_str(stdout, rep->version);
		printf(",\"pid\":%u,\"start_time_ns\":%llu,\"uptime_ns\":%llu,"
		    "\"agents\":%u,\"sessions\":%u,\"runtime_dir\":",
		    rep->pid, (unsigned long long)rep->start_time_ns,
		    (unsigned long long)rep->uptime_ns, rep->agents,
		    rep->sessions);
		util_json_str(stdout, rep->runtime_dir);
		printf(",\"frames_rejected\":%llu,\"peers_dropped\":%llu,"
		    "\"uid\":%u,\"limits\":[",
		    (unsigned long long)rep->frames_rejected,
		    (unsigned long long)rep->peers_dropped, rep->uid);
		for (size_t i = 0; i < rep->n_limits; i++) {
			printf("%s", i ? "," : "");
			util_json_str(stdout, rep->limits[i]);
		}
		printf("]}\n");
	} else {
		printf("msptid %s (pid %u), up %s\n", rep->version, rep->pid,
		    util_fmt_duration(rep->uptime_ns, up, sizeof(up)));
		printf("runtime dir:     %s\n", rep->runtime_dir);
		printf("agents:          %u\n", rep->agents);
		printf("sessions:        %u\n", rep->sessions);
		printf("frames rejected: %llu\n",
		    (unsigned long long)rep->frames_rejected);
		printf("peers dropped:   %llu\n",
		    (unsigned long long)rep->peers_dropped);
		printf("runs as:         uid %u\n", rep->uid);
		/* What the daemon's privileges do not allow (msptid(8)). */
		for (size_t i = 0; i < rep->n_limits; i++)
			printf("limited:         %s\n", rep->limits[i]);
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return EXIT_OK;
}

const struct cmd_entry cmd_status_entry = {
	.name = "status",
	.usage = "[--json]",
	.summary = "daemon version, uptime, agents, sessions, losses",
	.exec = cmd_status_exec,
};

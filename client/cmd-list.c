/* msptictl list: one line per registered agent. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"
#include "client.h"

static const char *
fmt_rank(int32_t r, char *buf, size_t len)
{
	if (r < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%d", r);
	return buf;
}

static void
list_json(const Mspti__ListReply *rep)
{
	char user[64];

	printf("[");
	for (size_t i = 0; i < rep->n_agents; i++) {
		const Mspti__AgentInfo *a = rep->agents[i];

		printf("%s{\"agent_id\":%llu,\"pid\":%u,\"uid\":%u,\"gid\":%u,"
		    "\"user\":", i ? "," : "", (unsigned long long)a->agent_id,
		    a->pid, a->uid, a->gid);
		util_json_str(stdout, client_user(a->uid, user, sizeof(user)));
		printf(",\"job\":");
		util_json_str(stdout, a->job_id);
		printf(",\"rank\":%d,\"local_rank\":%d,\"world_size\":%d,"
		    "\"devices\":[", a->rank, a->local_rank, a->world_size);
		for (size_t d = 0; d < a->n_devices; d++)
			printf("%s%u", d ? "," : "", a->devices[d]);
		printf("],\"exe\":");
		util_json_str(stdout, a->exe);
		printf(",\"exe_checked\":%s,\"cmdline\":",
		    a->exe_checked ? "true" : "false");
		util_json_str(stdout, a->cmdline);
		printf(",\"since_ns\":%llu,\"session\":%llu,\"agent_version\":",
		    (unsigned long long)a->since_ns,
		    (unsigned long long)a->session_id);
		util_json_str(stdout, a->agent_version);
		printf("}");
	}
	printf("]\n");
}

static void
list_table(const Mspti__ListReply *rep)
{
	static const char *const head[] = { "PID", "USER", "JOB", "RANK",
	    "DEVICES", "SINCE", "EXE" };
	struct client_table *t = client_table_new(nitems(head), head);
	char user[64], rank[16], since[32], devs[64];
	time_t tt;
	struct tm tm;

	for (size_t i = 0; i < rep->n_agents; i++) {
		const Mspti__AgentInfo *a = rep->agents[i];
		size_t off = 0;

		tt = (time_t)(a->since_ns / 1000000000ull);
		localtime_r(&tt, &tm);
		strftime(since, sizeof(since), "%Y-%m-%d %H:%M:%S", &tm);
		devs[0] = '\0';
		for (size_t d = 0; d < a->n_devices && off < sizeof(devs) - 8; d++)
			off += (size_t)snprintf(devs + off, sizeof(devs) - off,
			    "%s%u", d ? "," : "", a->devices[d]);
		client_table_cell(t, "%u", a->pid);
		client_table_cell(t, "%s", client_user(a->uid, user,
		    sizeof(user)));
		client_table_cell(t, "%s", *a->job_id ? a->job_id : "-");
		client_table_cell(t, "%s", fmt_rank(a->rank, rank,
		    sizeof(rank)));
		client_table_cell(t, "%s", *devs ? devs : "-");
		client_table_cell(t, "%s", since);
		client_table_cell(t, "%s", a->exe);
	}
	client_table_print(t, stdout);
	client_table_free(t);
}

static int
cmd_list_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	Mspti__ListRequest req = MSPTI__LIST_REQUEST__INIT;
	ProtobufCMessage *msg;
	int ch, rc;

	while ((ch = client_getopt(&cmd_list_entry, argc, argv,
	    "j", opts)) != -1) {
		if (ch != 'j')
			return client_opt_exit(&cmd_list_entry, ch);
		c->json = true;
	}
	if (optind != argc) {
		client_usage_error(&cmd_list_entry, "unexpected argument '%s'",
		    argv[optind]);
		return EXIT_USAGE;
	}
	rc = client_request(c, MSPTI__MSG_TYPE__MSG_LIST_REQ, &req.base,
	    MSPTI__MSG_TYPE__MSG_LIST_REP, &msg);
	if (rc != EXIT_OK)
		return rc;
	if (c->json)
		list_json((Mspti__ListReply *)msg);
	else
		list_table((Mspti__ListReply *)msg);
	protobuf_c_message_free_unpacked(msg, NULL);
	return EXIT_OK;
}

const struct cmd_entry cmd_list_entry = {
	.name = "list",
	.usage = "[--json]",
	.summary = "agents: PID USER JOB RANK DEVICES SINCE EXE",
	.exec = cmd_list_exec,
};

/*
 * msptictl sessions: every session the daemon knows, live and recent; and
 * the printing and parsing helpers the other session verbs share.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "client.h"

static const char *loss_names[] = {
	"device_channel", "agent_ring", "daemon_reject", "disk", "agent_buffer",
	"device_unmatched",
};

void
client_json_acks(Mspti__TargetAck **acks, size_t n)
{
	printf("[");
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"pid\":%u,\"rank\":%d,\"agent_id\":%llu,\"ok\":%s,"
		    "\"code\":%d,\"message\":", i ? "," : "", acks[i]->pid,
		    acks[i]->rank, (unsigned long long)acks[i]->agent_id,
		    acks[i]->code == 0 ? "true" : "false", acks[i]->code);
		util_json_str(stdout, acks[i]->message);
		printf(",\"first_step\":%lld,\"steps\":%u,"
		    "\"window_start_ns\":%llu", (long long)acks[i]->first_step,
		    acks[i]->steps,
		    (unsigned long long)acks[i]->window_start_ns);
		printf(",\"step_now\":%lld,\"step_period_ns\":%llu,"
		    "\"capture_start_ns\":%llu", (long long)acks[i]->step_now,
		    (unsigned long long)acks[i]->step_period_ns,
		    (unsigned long long)acks[i]->capture_start_ns);
		printf(",\"step_source\":");
		util_json_str(stdout, acks[i]->step_source ?
		    acks[i]->step_source : "");
		if (acks[i]->n_losses > 0) {
			printf(",\"losses\":{");
			for (size_t k = 0; k < acks[i]->n_losses &&
			    k < nitems(loss_names); k++)
				printf("%s\"%s\":%llu", k ? "," : "",
				    loss_names[k],
				    (unsigned long long)acks[i]->losses[k]);
			printf("}");
		}
		printf("}");
	}
	printf("]");
}

void
client_fprint_losses(FILE *f, const uint64_t *losses, size_t n)
{
	for (size_t k = 0; k < n && k < nitems(loss_names); k++)
		if (losses[k])
			fprintf(f, " %s=%llu", loss_names[k],
			    (unsigned long long)losses[k]);
}

/* One line per target that lost records, by stage: "pid N rank R: ...". */
static void
client_print_target_losses(Mspti__TargetAck **t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t lost = 0;

		for (size_t k = 0; k < t[i]->n_losses; k++)
			lost += t[i]->losses[k];
		if (lost == 0)
			continue;
		printf("    pid %u rank %d:", t[i]->pid, t[i]->rank);
		client_fprint_losses(stdout, t[i]->losses, t[i]->n_losses);
		printf("\n");
	}
}

/* ", steps from MSTX" (or synchronize, or both) for the ranks' sources;
 * "" when none said. */
const char *
client_step_source(Mspti__TargetAck **t, size_t n)
{
	bool mstx = false, sync = false;

	for (size_t i = 0; i < n; i++) {
		if (t[i]->step_source == NULL)
			continue;
		mstx |= strcmp(t[i]->step_source, "mstx") == 0;
		sync |= strcmp(t[i]->step_source, "synchronize") == 0;
	}
	return mstx && sync ? ", steps from MSTX and synchronize" :
	    mstx ? ", steps from MSTX" : sync ? ", steps from synchronize" : "";
}

void
client_json_session(const Mspti__SessionInfo *i)
{
	printf("{\"session\":%llu,\"state\":", (unsigned long long)i->session_id);
	util_json_str(stdout, i->state);
	printf(",\"uid\":%u,\"target\":", i->uid);
	util_json_str(stdout, i->target);
	printf(",\"output\":");
	util_json_str(stdout, i->output);
	printf(",\"mode\":");
	util_json_str(stdout, i->mode);
	printf(",\"kinds\":[");
	for (size_t k = 0; k < i->n_kinds; k++) {
		printf("%s", k ? "," : "");
		util_json_str(stdout, i->kinds[k]);
	}
	printf("],\"start_ns\":%llu,\"end_ns\":%llu,\"records\":%llu,"
	    "\"bytes\":%llu,\"steps\":%u,\"losses\":{",
	    (unsigned long long)i->start_ns, (unsigned long long)i->end_ns,
	    (unsigned long long)i->records, (unsigned long long)i->bytes,
	    i->steps);
	for (size_t k = 0; k < i->n_losses && k < nitems(loss_names); k++)
		printf("%s\"%s\":%llu", k ? "," : "", loss_names[k],
		    (unsigned long long)i->losses[k]);
	printf("},\"step_from\":%lld,\"step_skew_ns\":%llu,"
	    "\"dev_tasks_waiting\":%llu,\"launches_waiting\":%llu,"
	    "\"stop_reason\":", (long long)i->step_from,
	    (unsigned long long)i->step_skew_ns,
	    (unsigned long long)i->dev_tasks_waiting,
	    (unsigned long long)i->launches_waiting);
	util_json_str(stdout, i->stop_reason);
	printf(",\"error\":");
	util_json_str(stdout, i->error);
	printf(",\"targets\":");
	client_json_acks(i->targets, i->n_targets);
	printf("}");
}

void
client_print_acks(const struct client *c, Mspti__TargetAck **acks, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const Mspti__TargetAck *a = acks[i];

		if (a->pid == 0)
			printf("  %s\n", a->message);
		else
			printf("  pid %-8u %s%s\n", a->pid,
			    a->code == 0 ? "" : "FAILED: ", a->message);
	}
}

void
client_print_session(const struct client *c, const Mspti__SessionInfo *i)
{
	uint64_t lost = 0;

	printf("session %llu %s", (unsigned long long)i->session_id, i->state);
	if (i->stop_reason != NULL && *i->stop_reason)
		printf(" (%s)", i->stop_reason);
	printf(": %llu records, %llu bytes",
	    (unsigned long long)i->records, (unsigned long long)i->bytes);
	if (i->steps)
		printf(", %u steps", i->steps);
	printf("\n");
	if (i->step_from >= 0 && i->steps)
		printf("  step window from %lld, start skew %.3f ms across "
		    "ranks%s\n", (long long)i->step_from,
		    (double)i->step_skew_ns / 1e6,
		    client_step_source(i->targets, i->n_targets));
	/* Only a file the session actually wrote is named. */
	if (i->output != NULL && *i->output && (strcmp(i->state, "finalized") == 0 ||
	    strcmp(i->state, "failed") == 0 || strcmp(i->state, "active") == 0 ||
	    strcmp(i->state, "stopping") == 0))
		printf("  file: %s\n", i->output);
	for (size_t k = 0; k < i->n_losses; k++)
		lost += i->losses[k];
	if (lost == 0)
		printf("  losses: none\n");
	else {
		printf("  losses:");
		client_fprint_losses(stdout, i->losses, i->n_losses);
		printf("\n");
		client_print_target_losses(i->targets, i->n_targets);
	}
	if (i->error != NULL && *i->error)
		printf("  error: %s\n", i->error);
}

int
client_session_result(const struct client *c, ProtobufCMessage *msg)
{
	const Mspti__SessionInfo *info = (const Mspti__SessionInfo *)msg;
	int rc;

	if (c->json) {
		client_json_session(info);
		printf("\n");
	} else
		client_print_session(c, info);
	rc = strcmp(info->state, "finalized") == 0 ? EXIT_OK : EXIT_FAIL;
	protobuf_c_message_free_unpacked(msg, NULL);
	return rc;
}

int
client_parse_session(const struct cmd_entry *e, const char *arg, uint64_t *id)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0 || *arg == '-') {
		client_usage_error(e, "bad session id '%s'", arg);
		return -1;
	}
	*id = v;
	return 0;
}

int
client_parse_pids(const char *arg, uint32_t **pids, size_t *n)
{
	char *copy = strdup(arg), *tok, *save = NULL, *end;
	uint32_t *v;

	if (copy == NULL)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		unsigned long l;

		errno = 0;
		l = strtoul(tok, &end, 10);
		if (errno != 0 || *end != '\0' || l == 0 || l > INT32_MAX ||
		    *tok == '-') {
			free(copy);
			return -1;
		}
		if ((v = realloc(*pids, (*n + 1) * sizeof(*v))) == NULL) {
			free(copy);
			return -1;
		}
		*pids = v;
		v[(*n)++] = (uint32_t)l;
	}
	free(copy);
	return *n > 0 ? 0 : -1;
}

static int
push(char ***v, size_t *n, const char *s, size_t len)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (nv == NULL)
		return -1;
	*v = nv;
	if ((nv[*n] = strndup(s, len)) == NULL)
		return -1;
	(*n)++;
	return 0;
}

int
client_split_signed(const char *arg, char ***on, size_t *non, char ***off,
    size_t *noff)
{
	const char *p = arg, *e;

	while (*p) {
		bool neg = false;
		size_t len;

		e = strchr(p, ',');
		len = e ? (size_t)(e - p) : strlen(p);
		if (len > 0 && (*p == '+' || *p == '-')) {
			neg = *p == '-';
			p++;
			len--;
		}
		if (len == 0)
			return -1;
		if (push(neg ? off : on, neg ? noff : non, p, len) != 0)
			return -1;
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int
cmd_sessions_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	Mspti__SessionsRequest req = MSPTI__SESSIONS_REQUEST__INIT;
	Mspti__SessionsReply *rep;
	ProtobufCMessage *msg;
	char user[64];
	int ch, rc;

	while ((ch = client_getopt(&cmd_sessions_entry, argc, argv,
	    "j", opts)) != -1) {
		if (ch != 'j')
			return client_opt_exit(&cmd_sessions_entry, ch);
		c->json = true;
	}
	if (optind != argc) {
		client_usage_error(&cmd_sessions_entry,
		    "unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	rc = client_request(c, MSPTI__MSG_TYPE__MSG_SESSIONS_REQ, &req.base,
	    MSPTI__MSG_TYPE__MSG_SESSIONS_REP, &msg);
	if (rc != EXIT_OK)
		return rc;
	rep = (Mspti__SessionsReply *)msg;
	if (c->json) {
		printf("[");
		for (size_t i = 0; i < rep->n_sessions; i++) {
			printf("%s", i ? "," : "");
			client_json_session(rep->sessions[i]);
		}
		printf("]\n");
	} else {
		static const char *const head[] = { "SESSION", "STATE",
		    "USER", "MODE", "TARGETS", "RECORDS", "LOST", "TARGET" };
		struct client_table *t = client_table_new(nitems(head), head);

		for (size_t i = 0; i < rep->n_sessions; i++) {
			const Mspti__SessionInfo *s = rep->sessions[i];
			uint64_t lost = 0;
			size_t live = 0;

			for (size_t k = 0; k < s->n_losses; k++)
				lost += s->losses[k];
			for (size_t k = 0; k < s->n_targets; k++)
				if (strcmp(s->targets[k]->message,
				    "capturing") == 0)
					live++;
			client_table_cell(t, "%llu",
			    (unsigned long long)s->session_id);
			client_table_cell(t, "%s", s->state);
			client_table_cell(t, "%s", client_user(s->uid, user,
			    sizeof(user)));
			client_table_cell(t, "%s", s->mode);
			client_table_cell(t, "%zu/%zu", live, s->n_targets);
			client_table_cell(t, "%llu",
			    (unsigned long long)s->records);
			client_table_cell(t, "%llu", (unsigned long long)lost);
			client_table_cell(t, "%s", s->target);
		}
		/* Each session's row, then its targets' losses. */
		client_table_print_row(t, 0, stdout);
		for (size_t i = 0; i < rep->n_sessions; i++) {
			const Mspti__SessionInfo *s = rep->sessions[i];

			client_table_print_row(t, i + 1, stdout);
			if (s->step_from >= 0)
				printf("    step window from %lld%s\n",
				    (long long)s->step_from,
				    client_step_source(s->targets,
				    s->n_targets));
			if (s->dev_tasks_waiting + s->launches_waiting > 0)
				printf("    device join: %llu task(s) waiting for "
				    "their launch, %llu launch(es) for their "
				    "task\n",
				    (unsigned long long)s->dev_tasks_waiting,
				    (unsigned long long)s->launches_waiting);
			client_print_target_losses(s->targets, s->n_targets);
		}
		client_table_free(t);
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return EXIT_OK;
}

const struct cmd_entry cmd_sessions_entry = {
	.name = "sessions",
	.usage = "[--json]",
	.summary = "live and recent capture sessions: state, targets, losses",
	.cluster = true,
	.exec = cmd_sessions_exec,
};

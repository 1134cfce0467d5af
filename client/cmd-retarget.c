/* msptictl retarget: changes the pids, kinds and marker domains of a live
 * session without restarting it or its targets. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"
#include "client.h"

/* What the option parsers allocated; freed on every return (cleanup). */
static void
retarget_free(Mspti__RetargetSession *req)
{
	free(req->add_pids);
	free(req->remove_pids);
	client_free_strv(req->kinds_on, req->n_kinds_on);
	client_free_strv(req->kinds_off, req->n_kinds_off);
	client_free_strv(req->domains_on, req->n_domains_on);
	client_free_strv(req->domains_off, req->n_domains_off);
}

static int
cmd_retarget_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "add-pid", required_argument, NULL, 'a' },
		{ "remove-pid", required_argument, NULL, 'r' },
		{ "kinds", required_argument, NULL, 'k' },
		{ "domains", required_argument, NULL, 'D' },
		{ "start-step", required_argument, NULL, 'K' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_retarget_entry;
	Mspti__RetargetSession req __attribute__((cleanup(retarget_free))) =
	    MSPTI__RETARGET_SESSION__INIT;
	Mspti__RetargetReply *rep;
	ProtobufCMessage *msg;
	size_t bad = 0;
	int ch, rc;

	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv, "a:r:k:D:K:j", opts)) != -1) {
		switch (ch) {
		case 'a':
			if (client_parse_pids(optarg, &req.add_pids,
			    &req.n_add_pids) != 0) {
				client_usage_error(e, "bad pid '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'r':
			if (client_parse_pids(optarg, &req.remove_pids,
			    &req.n_remove_pids) != 0) {
				client_usage_error(e, "bad pid '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'k':
			if (client_split_signed(optarg, &req.kinds_on,
			    &req.n_kinds_on, &req.kinds_off,
			    &req.n_kinds_off) != 0) {
				client_usage_error(e, "bad kind list '%s'",
				    optarg);
				return EXIT_USAGE;
			}
			break;
		case 'D':
			if (client_split_signed(optarg, &req.domains_on,
			    &req.n_domains_on, &req.domains_off,
			    &req.n_domains_off) != 0) {
				client_usage_error(e, "bad domain list '%s'",
				    optarg);
				return EXIT_USAGE;
			}
			break;
		case 'K': {
			char *end;
			long long k;

			errno = 0;
			k = strtoll(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    k < 0) {
				client_usage_error(e, "bad start step '%s'",
				    optarg);
				return EXIT_USAGE;
			}
			req.start_step = (uint64_t)k;
			req.start_step_set = true;
			break;
		}
		case 'j':
			c->json = true;
			break;
		default:
			return client_opt_exit(e, ch);
		}
	}
	if (optind + 1 != argc) {
		client_usage_error(e, "give one SESSION");
		return EXIT_USAGE;
	}
	if (client_parse_session(e, argv[optind], &req.session_id))
		return EXIT_USAGE;
	if (req.n_add_pids + req.n_remove_pids + req.n_kinds_on +
	    req.n_kinds_off + req.n_domains_on + req.n_domains_off == 0 &&
	    !req.start_step_set) {
		client_usage_error(e, "nothing to change");
		return EXIT_USAGE;
	}
	rc = client_request_fd(c, MSPTI__MSG_TYPE__MSG_RETARGET_SESSION,
	    &req.base, -1, MSPTI__MSG_TYPE__MSG_RETARGET_REP, &msg, 30000);
	if (rc != EXIT_OK)
		return rc;
	rep = (Mspti__RetargetReply *)msg;
	for (size_t i = 0; i < rep->n_acks; i++)
		if (rep->acks[i]->code != 0)
			bad++;
	if (c->json) {
		printf("{\"session\":%llu,\"acks\":",
		    (unsigned long long)rep->session->session_id);
		client_json_acks(rep->acks, rep->n_acks);
		printf("}\n");
	} else {
		printf("session %llu retargeted\n",
		    (unsigned long long)rep->session->session_id);
		client_print_acks(c, rep->acks, rep->n_acks);
	}
	rc = bad == 0 ? EXIT_OK : bad == rep->n_acks ? EXIT_NOTFOUND : EXIT_FAIL;
	protobuf_c_message_free_unpacked(msg, NULL);
	return rc;
}

const struct cmd_entry cmd_retarget_entry = {
	.name = "retarget",
	.usage = "[--add-pid N] [--remove-pid N] [--kinds +x,-y]\n"
	    "    [--domains +a,-b] [--start-step K] [--json] SESSION",
	.summary = "change the pids, kinds, marker domains or step window of a "
	    "live session",
	.exec = cmd_retarget_exec,
};

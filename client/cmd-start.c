/*
 * msptictl start: starts a capture session.  The CLI opens the output file
 * itself, as the requester, and passes the descriptor: the daemon never
 * opens a path for anyone.  A file we created for a session that captured
 * nothing is removed again, so no path is ever printed for a file that
 * does not hold a capture.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "util.h"
#include "client.h"

static void
split_list(const char *arg, char ***v, size_t *n)
{
	char *copy = strdup(arg), *tok, *save = NULL;

	if (copy == NULL)
		return;
	for (tok = strtok_r(copy, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		char **nv = realloc(*v, (*n + 1) * sizeof(*nv));

		if (nv == NULL)
			break;
		*v = nv;
		nv[(*n)++] = strdup(tok);
	}
	free(copy);
}

static int
start_ranks(const char *arg, int32_t **ranks, size_t *n)
{
	char *copy = strdup(arg), *tok, *save = NULL, *end;

	if (copy == NULL)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		long l;
		int32_t *v;

		errno = 0;
		l = strtol(tok, &end, 10);
		if (errno != 0 || *end != '\0' || l < 0 || l > INT32_MAX ||
		    (v = realloc(*ranks, (*n + 1) * sizeof(*v))) == NULL) {
			free(copy);
			return -1;
		}
		*ranks = v;
		v[(*n)++] = (int32_t)l;
	}
	free(copy);
	return *n > 0 ? 0 : -1;
}

/*
 * One session config option of start (and run, which takes the same):
 * 0 when ch was one and is applied to cfg, 1 when ch is not a config
 * option, EXIT_USAGE after printing why the value is bad.  kinds gets the
 * --kinds text for messages.
 */
int
client_config_option(const struct cmd_entry *e, int ch, const char *arg,
    Mspti__SessionConfig *cfg, const char **output, char *kinds,
    size_t kindslen)
{
	int64_t v;

	switch (ch) {
	case 'k':
		split_list(arg, &cfg->kinds, &cfg->n_kinds);
		snprintf(kinds, kindslen, "%s", arg);
		return 0;
	case 'd':
		if ((v = util_parse_duration(arg)) <= 0) {
			client_usage_error(e, "bad duration '%s'", arg);
			return EXIT_USAGE;
		}
		cfg->duration_ns = (uint64_t)v;
		return 0;
	case 's':
		if ((v = util_parse_size(arg)) <= 0 || v > UINT32_MAX) {
			client_usage_error(e, "bad step count '%s'", arg);
			return EXIT_USAGE;
		}
		cfg->steps = (uint32_t)v;
		return 0;
	case 'N':
		cfg->step_name = (char *)arg;
		return 0;
	case 'K': {
		char *end;
		long long k;

		errno = 0;
		k = strtoll(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || k < 0) {
			client_usage_error(e, "bad start step '%s'", arg);
			return EXIT_USAGE;
		}
		cfg->start_step = (uint64_t)k;
		cfg->start_step_set = true;
		return 0;
	}
	case 'o':
		/* "--output -- cmd": getopt took the separator as the name. */
		if (strcmp(arg, "--") == 0) {
			client_usage_error(e, "--output needs a file name");
			return EXIT_USAGE;
		}
		*output = arg;
		return 0;
	case 'b':
		if ((v = util_parse_size(arg)) <= 0) {
			client_usage_error(e, "bad buffer size '%s'", arg);
			return EXIT_USAGE;
		}
		cfg->buffer_size = (uint64_t)v;
		return 0;
	case 'm':
		if (strcmp(arg, "stream") != 0 && strcmp(arg, "ring") != 0) {
			client_usage_error(e, "mode must be stream or ring");
			return EXIT_USAGE;
		}
		cfg->mode = (char *)arg;
		return 0;
	case 'D':
		if (client_split_signed(arg, &cfg->domains_on,
		    &cfg->n_domains_on, &cfg->domains_off,
		    &cfg->n_domains_off) != 0) {
			client_usage_error(e, "bad domain list '%s'", arg);
			return EXIT_USAGE;
		}
		return 0;
	case 'M':
		if ((v = util_parse_size(arg)) <= 0) {
			client_usage_error(e, "bad size '%s'", arg);
			return EXIT_USAGE;
		}
		cfg->max_size = (uint64_t)v;
		return 0;
	case 'F':
		if (client_parse_file_mode(arg) != 0) {
			client_usage_error(e, "bad file mode '%s' (octal, e.g. "
			    "0640)", arg);
			return EXIT_USAGE;
		}
		return 0;
	default:
		return 1;
	}
}

/* While a start waits for its instant in the daemon: SIGINT, SIGTERM
 * and SIGHUP remove the temporary output before they end us (path NULL:
 * the default actions again). */
static const char *volatile start_tmp_path;

static void
start_tmp_signal(int sig)
{
	const char *p = start_tmp_path;

	if (p != NULL)
		(void)unlink(p);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
start_tmp_guard(const char *path)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	static struct sigaction old[3];
	static bool set[3];
	struct sigaction sa;

	start_tmp_path = path;
	for (size_t i = 0; i < nitems(sigs); i++) {
		if (path == NULL) {
			if (set[i])
				sigaction(sigs[i], &old[i], NULL);
			set[i] = false;
			continue;
		}
		/* A signal the caller ignores stays ignored. */
		if (sigaction(sigs[i], NULL, &old[i]) != 0 ||
		    old[i].sa_handler == SIG_IGN)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = start_tmp_signal;
		sigemptyset(&sa.sa_mask);
		set[i] = sigaction(sigs[i], &sa, NULL) == 0;
	}
}

/* What the option parsers allocated; freed on every return (cleanup). */
void
client_free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
start_free_target(Mspti__SessionTarget *tg)
{
	free(tg->pids);
	free(tg->ranks);
}

void
client_config_free(Mspti__SessionConfig *cfg)
{
	client_free_strv(cfg->kinds, cfg->n_kinds);
	client_free_strv(cfg->domains_on, cfg->n_domains_on);
	client_free_strv(cfg->domains_off, cfg->n_domains_off);
}

#define START_AT_MAX_NS	(600ull * 1000000000ull)
/* A held start begins at the instant (its timer re-arms when early by
 * more than 1 us); one that began 1 ms before it was not held. */
#define START_HELD_SLACK_NS	1000000ull

/*
 * A step window every target has passed already (a --start-step behind
 * them all): the start took them, but none will record a step.  Said on
 * stderr, with what becomes of the session: one of pids ends; one of a
 * job, rank or all waits for processes that join later.
 */
static void
start_warn_past(const Mspti__StartSessionReply *rep, uint32_t steps,
    bool elastic)
{
	size_t ok = 0, past = 0;
	int64_t k = rep->session->step_from;

	if (steps == 0 || k < 0)
		return;
	for (size_t i = 0; i < rep->n_acks; i++) {
		const Mspti__TargetAck *t = rep->acks[i];

		if (t->code != 0 || t->pid == 0)
			continue;
		ok++;
		if (t->first_step < 0 && t->step_now >= k)
			past++;
	}
	if (ok == 0 || past < ok)
		return;
	fprintf(stderr, "msptictl start: no target will record a step: all "
	    "%zu are past step %lld already (%s)\n", past, (long long)k,
	    elastic ? "the session waits for processes that join later; "
	    "msptictl stop ends it" : "the session ends");
}

static int
cmd_start_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "job", required_argument, NULL, 'J' },
		{ "rank", required_argument, NULL, 'R' },
		{ "all", no_argument, NULL, 'a' },
		CLIENT_CONFIG_OPTIONS,
		{ "wait", no_argument, NULL, 'w' },
		{ "start-at", required_argument, NULL, 'A' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_start_entry;
	Mspti__StartSession req = MSPTI__START_SESSION__INIT;
	Mspti__SessionTarget tg __attribute__((cleanup(start_free_target))) =
	    MSPTI__SESSION_TARGET__INIT;
	Mspti__SessionConfig cfg __attribute__((cleanup(client_config_free))) =
	    MSPTI__SESSION_CONFIG__INIT;
	Mspti__StartSessionReply *rep;
	ProtobufCMessage *msg;
	const char *output = NULL;
	struct client_output out;
	bool held;
	const char *path = out.path;
	char kinds[256] = "";
	bool wait = false;
	uint64_t start_at = 0, sent_ns = 0;
	size_t started = 0, failed = 0, notfound = 0, elastic = 0;
	int ch, rc, fd, ntargets = 0;

	while ((ch = client_getopt(e, argc, argv, CLIENT_START_OPTSTRING,
	    opts)) != -1) {
		if ((rc = client_config_option(e, ch, optarg, &cfg, &output,
		    kinds, sizeof(kinds))) != 1) {
			if (rc != 0)
				return rc;
			continue;
		}
		switch (ch) {
		case 'p':
			if (client_parse_pids(optarg, &tg.pids, &tg.n_pids)) {
				client_usage_error(e, "bad pid list '%s'", optarg);
				return EXIT_USAGE;
			}
			ntargets++;
			break;
		case 'J':
			tg.job_id = optarg;
			ntargets++;
			break;
		case 'R':
			if (start_ranks(optarg, &tg.ranks, &tg.n_ranks)) {
				client_usage_error(e, "bad rank list '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'a':
			tg.all = true;
			ntargets++;
			break;
		case 'w':
			wait = true;
			break;
		case 'A': {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    v == 0) {
				client_usage_error(e, "bad --start-at '%s' (ns "
				    "since the epoch)", optarg);
				return EXIT_USAGE;
			}
			start_at = v;
			break;
		}
		case 'j':
			c->json = true;
			break;
		default:
			return client_opt_exit(e, ch);
		}
	}
	if (optind != argc) {
		client_usage_error(e, "unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (ntargets == 0 && tg.n_ranks == 0) {
		client_usage_error(e, "no target: give --pid, --job, --rank or "
		    "--all");
		return EXIT_USAGE;
	}
	if (ntargets > 1 && !(tg.job_id != NULL && ntargets == 1)) {
		client_usage_error(e, "give one of --pid, --job, --all");
		return EXIT_USAGE;
	}
	if (cfg.start_step_set && cfg.steps == 0) {
		client_usage_error(e, "--start-step needs --steps N");
		return EXIT_USAGE;
	}
	if (start_at > util_realtime_ns() + START_AT_MAX_NS) {
		client_usage_error(e, "--start-at is more than 10 minutes ahead");
		return EXIT_USAGE;
	}
	/* A common wall-clock start (a cluster's --duration): the daemon
	 * starts the session when its clock reaches start_at (one already
	 * past starts now); the reply comes after.  Killed by a signal
	 * meanwhile, we take the temporary file with us (and the daemon
	 * drops the start when our connection closes). */
	if ((fd = client_output_open(&out, output)) < 0)
		return EXIT_FAIL;
	sent_ns = util_realtime_ns();
	req.target = &tg;
	req.config = &cfg;
	req.output = out.path;
	req.start_at_ns = start_at;
	if (start_at > sent_ns)
		start_tmp_guard(out.tmp);
	rc = client_request_fd(c, MSPTI__MSG_TYPE__MSG_START_SESSION, &req.base,
	    fd, MSPTI__MSG_TYPE__MSG_START_SESSION_REP, &msg, 30000 +
	    (int)(start_at > sent_ns ? (start_at - sent_ns) / 1000000 : 0));
	start_tmp_guard(NULL);
	close(fd);
	if (rc != EXIT_OK) {
		client_output_abort(&out);
		return rc;
	}
	rep = (Mspti__StartSessionReply *)msg;
	for (size_t i = 0; i < rep->n_acks; i++) {
		if (rep->acks[i]->code == 0 && rep->acks[i]->pid != 0)
			started++;
		else if (rep->acks[i]->code == 0)
			elastic++;
		else if (rep->acks[i]->code == EXIT_NOTFOUND)
			notfound++;
		else
			failed++;
	}
	if (started == 0 && elastic == 0) {
		client_output_abort(&out);
		if (c->json) {
			printf("{\"started\":false,\"session\":%llu,\"acks\":",
			    (unsigned long long)rep->session->session_id);
			client_json_acks(rep->acks, rep->n_acks);
			printf("}\n");
		} else {
			fprintf(stderr, "msptictl: no target could be captured\n");
			client_print_acks(c, rep->acks, rep->n_acks);
		}
		rc = failed == 0 && notfound > 0 ? EXIT_NOTFOUND : EXIT_FAIL;
		protobuf_c_message_free_unpacked(msg, NULL);
		return rc;
	}
	if (client_output_commit(&out) != 0) {
		Mspti__StopSession st = MSPTI__STOP_SESSION__INIT;
		ProtobufCMessage *m2;

		/* Its file has no name: capturing into it would lose it all. */
		st.session_id = rep->session->session_id;
		fprintf(stderr, "msptictl: stopping session %llu\n",
		    (unsigned long long)st.session_id);
		if (client_request(c, MSPTI__MSG_TYPE__MSG_STOP_SESSION,
		    &st.base, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &m2) ==
		    EXIT_OK)
			protobuf_c_message_free_unpacked(m2, NULL);
		protobuf_c_message_free_unpacked(msg, NULL);
		return EXIT_FAIL;
	}
	/* An msptid that predates held starts ignores start_at_ns and
	 * starts at once (a package upgraded, the daemon not restarted):
	 * its session began well before the instant. */
	held = start_at <= sent_ns ||
	    rep->session->start_ns + START_HELD_SLACK_NS >= start_at;
	if (!held)
		fprintf(stderr, "msptictl start: msptid started the session "
		    "%.3f ms before --start-at: it does not hold starts (an "
		    "older msptid? restart it)\n", (double)(start_at -
		    rep->session->start_ns) / 1e6);
	start_warn_past(rep, cfg.steps, tg.n_pids == 0);
	if (c->json) {
		printf("{\"started\":true,\"session\":%llu,\"start_ns\":%llu,",
		    (unsigned long long)rep->session->session_id,
		    (unsigned long long)rep->session->start_ns);
		if (start_at != 0)
			printf("\"start_at_ns\":%llu,\"sent_ns\":%llu,"
			    "\"start_held\":%s,", (unsigned long long)start_at,
			    (unsigned long long)sent_ns, held ? "true" : "false");
		printf("\"output\":");
		util_json_str(stdout, path);
		if (cfg.steps > 0)
			printf(",\"step_from\":%lld,\"step_to\":%lld",
			    (long long)rep->session->step_from,
			    rep->session->step_from < 0 ? -1LL : (long long)
			    (rep->session->step_from + cfg.steps));
		printf(",\"acks\":");
		client_json_acks(rep->acks, rep->n_acks);
		printf("}\n");
	} else {
		printf("session %llu started (%s%s%s), %zu of %zu target(s) "
		    "capturing\n", (unsigned long long)rep->session->session_id,
		    rep->session->mode, *kinds ? ", kinds " : "", kinds, started,
		    started + failed + notfound);
		if (cfg.steps > 0 && rep->session->step_from >= 0)
			printf("  steps [%lld, %lld) on every rank%s\n",
			    (long long)rep->session->step_from,
			    (long long)(rep->session->step_from + cfg.steps),
			    client_step_source(rep->acks, rep->n_acks));
		client_print_acks(c, rep->acks, rep->n_acks);
		printf("  output: %s\n", path);
	}
	fflush(stdout);
	if (wait) {
		Mspti__WaitSession w = MSPTI__WAIT_SESSION__INIT;
		ProtobufCMessage *m2;
		Mspti__SessionInfo *info;

		w.session_id = rep->session->session_id;
		rc = client_request_fd(c, MSPTI__MSG_TYPE__MSG_WAIT_SESSION,
		    &w.base, -1, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &m2, -1);
		if (rc == EXIT_OK) {
			info = (Mspti__SessionInfo *)m2;
			if (c->json) {
				client_json_session(info);
				printf("\n");
			} else
				client_print_session(c, info);
			rc = strcmp(info->state, "finalized") == 0 ? EXIT_OK :
			    EXIT_FAIL;
			protobuf_c_message_free_unpacked(m2, NULL);
		}
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return rc;
}

const struct cmd_entry cmd_start_entry = {
	.name = "start",
	.usage = "--pid N[,N] | --job ID [--rank R[,R]] | --rank R[,R] | --all\n"
	    "    [--kinds LIST] [--duration D] [--steps N] [--step-name NAME]\n"
	    "    [--start-step K] [--output FILE] [--file-mode 0600] [--buffer 8M] "
	    "[--mode stream|ring]\n"
	    "    [--domains +a,-b] [--max-size S] [--start-at NS] [--wait] [--json]",
	.summary = "start capturing running processes into a trace file",
	.cluster = true,
	.exec = cmd_start_exec,
};

/*
 * msptictl --cluster slurm | --hosts FILE: runs a capture verb on every
 * node of a job through the cluster's own machinery and aggregates the
 * replies.  Slurm: one `srun --overlap --jobid ID -N n --ntasks-per-node=1
 * --label` step, one task per node; hosts: one BatchMode ssh per host, all
 * in parallel.  Each node runs its own node-local `msptictl --json VERB`
 * under a small sh wrapper that names the node and reports the exit code,
 * so no cluster protocol of ours crosses the network.
 *
 * The capture is a directory (--output-dir): node-local traces named
 * <node>.mspti and, on the host running this command, manifest.json with
 * the nodes, their sessions, ranks, files and (after stop/wait) records
 * and losses.  This file holds the verbs; reaching the nodes is
 * cluster-fanout.c's, the manifest cluster-manifest.c's (cluster-int.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "client.h"
#include "cluster-int.h"

static const char *
self_exe(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("MSPTI_REMOTE_MSPTICTL");
	ssize_t n;

	if (env != NULL && *env)
		return env;
	n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n <= 0)
		return "msptictl";
	path[n] = '\0';
	return path;
}

/* ---- the verbs ---- */

static bool
cluster_opt(const char *arg, const char *name, int argc, char **argv, int *i,
    const char **val)
{
	size_t n = strlen(name);

	if (strncmp(arg, name, n) != 0)
		return false;
	if (arg[n] == '=') {
		*val = arg + n + 1;
		return true;
	}
	if (arg[n] != '\0')
		return false;
	*val = *i + 1 < argc ? argv[++*i] : NULL;
	return true;
}

/*
 * A word of start's short options as getopt reads it ("-s3", "-s 3",
 * "-js3"): true when one of them takes a value, with its letter in *opt
 * and the value in *val (the next word, *i moved past it, when the word
 * ends with the letter; NULL when there is none).
 */
static bool
cluster_short(const char *arg, int argc, char **argv, int *i, char *opt,
    const char **val)
{
	const char *p, *o;

	if (arg[0] != '-' || arg[1] == '-' || arg[1] == '\0')
		return false;
	for (p = arg + 1; *p != '\0'; p++) {
		if ((o = strchr(CLIENT_START_OPTSTRING, *p)) == NULL || *p == ':')
			return false;	/* getopt refuses it on the node */
		if (o[1] != ':')
			continue;
		*opt = *p;
		if (p[1] != '\0')
			*val = p + 1;
		else
			*val = *i + 1 < argc ? argv[++*i] : NULL;
		return true;
	}
	return false;
}

/* Parses each node's JSON reply into rep[i]; false when a node has none. */
static void
cluster_parse_replies(struct cluster *cl, struct json_object **rep)
{
	for (size_t i = 0; i < cl->nnodes; i++) {
		struct cluster_node *n = &cl->nodes[i];

		rep[i] = n->out != NULL ? jparse(n->out) : NULL;
		if (jget(rep[i], "session") != NULL)
			n->session = (uint64_t)jint(rep[i], "session", 0);
	}
}

/*
 * --steps N: each node's daemon chose its window [k, k+N) (or took
 * --start-step K, which every node got): one line saying whether all
 * nodes record the same steps.
 */
static void
cluster_start_steps(const struct cluster *cl, struct json_object **rep)
{
	long long k = -2, to = -2;
	bool same = true, any = false;

	for (size_t i = 0; i < cl->nnodes; i++) {
		long long f = jint(rep[i], "step_from", -2);

		if (jget(rep[i], "step_from") == NULL)
			continue;
		if (any && f != k)
			same = false;
		if (!any) {
			k = f;
			to = jint(rep[i], "step_to", -1);
		}
		any = true;
	}
	if (cl->common_k) {
		bool kept = false;

		for (size_t i = 0; i < cl->nnodes; i++)
			kept |= cl->nodes[i].k_kept;
		if (cl->k < 0)
			printf("  no common step window: no node took one\n");
		else if (!kept)
			printf("  steps [%lld, %lld) on every node (one k for all: "
			    "ranks were at most at step %lld, asked in %lld ms)\n",
			    cl->k, cl->k + cl->steps, cl->max_step,
			    (long long)cl->ask_ms);
		else {
			printf("  step windows differ across nodes (k was chosen "
			    "again after a node's window had opened at the "
			    "earlier one):");
			for (size_t i = 0; i < cl->nnodes; i++)
				if (!cl->nodes[i].k_failed &&
				    jget(rep[i], "step_from") != NULL)
					printf(" %s from %lld", cl->nodes[i].name,
					    jint(rep[i], "step_from", -1));
			printf("\n");
		}
		return;
	}
	if (!any)
		return;
	if (same && k >= 0) {
		printf("  steps [%lld, %lld) on every node\n", k, to);
		return;
	}
	printf("  step windows differ across nodes (give --start-step K for "
	    "one window):");
	for (size_t i = 0; i < cl->nnodes; i++)
		if (jget(rep[i], "step_from") != NULL)
			printf(" %s from %lld", cl->nodes[i].name,
			    jint(rep[i], "step_from", -1));
	printf("\n");
}

#define CLUSTER_AT_LEAD_MS	100

/* How long a fan-out takes (ms): every node runs `msptictl --version`. */
static int64_t
cluster_probe(struct cluster *cl)
{
	struct cluster sub = *cl;
	char *argv[3];
	int64_t t0;

	sub.fanerr[0] = '\0';

	sub.nodes = calloc(cl->nnodes, sizeof(*sub.nodes));
	if (sub.nodes == NULL)
		return 0;
	for (size_t i = 0; i < cl->nnodes; i++) {
		sub.nodes[i].name = cl->nodes[i].name;
		sub.nodes[i].rc = -1;
		sub.nodes[i].task = -1;
	}
	argv[0] = (char *)self_exe();
	argv[1] = "--version";
	argv[2] = NULL;
	t0 = cluster_fanout_now_ms();
	cluster_fanout(&sub, argv, "-");
	t0 = cluster_fanout_now_ms() - t0;
	for (size_t i = 0; i < cl->nnodes; i++) {
		free(sub.nodes[i].out);
		free(sub.nodes[i].err);
	}
	free(sub.nodes);
	return t0;
}

/*
 * --duration: when each rank's capture began (its start ack reached its
 * node's daemon, on that node's clock), the spread of those instants and
 * how late the last one was.  0 ranks: none known.
 */
static size_t
cluster_start_skew(const struct cluster *cl, struct json_object **rep,
    long long *skew_ns, long long *late_ns)
{
	long long lo = 0, hi = 0;
	size_t n = 0;

	for (size_t i = 0; i < cl->nnodes; i++) {
		struct json_object *acks = jget(rep[i], "acks");

		if (jget(rep[i], "start_at_ns") == NULL)
			continue;
		for (size_t k = 0; k < jlen(acks); k++) {
			long long t = jint(json_object_array_get_idx(acks, k),
			    "capture_start_ns", 0);

			if (t <= 0)
				continue;
			if (n == 0 || t < lo)
				lo = t;
			if (n == 0 || t > hi)
				hi = t;
			n++;
		}
	}
	*skew_ns = hi - lo;
	*late_ns = n > 0 ? hi - (long long)cl->start_at : 0;
	return n;
}

/* The start step given to every node while it is asked where its ranks
 * are: no rank reaches it, so no window opens before k is set. */
#define CLUSTER_HOLD_STEP	"1000000000000000"
/* How far ahead of the furthest rank k lies: the setting fan-out (as long
 * as the asking one, twice for a slow node) plus the daemons' own lead. */
#define CLUSTER_LEAD_MS		300
#define CLUSTER_LEAD_MAX	10000	/* steps */

/* Round 2 is tried this often while some rank is already past k. */
#define CLUSTER_K_TRIES		3

/*
 * Past the step each rank of acks will have reached when it hears of k,
 * lead_ms from now: *k and *max_step grow to it (step_now: where the
 * rank is; step_period_ns: how long its steps take).
 */
static void
cluster_k_acks(struct json_object *acks, int64_t lead_ms, long long *k,
    long long *max_step)
{
	for (size_t a = 0; a < jlen(acks); a++) {
		struct json_object *t = json_object_array_get_idx(acks, a);
		long long at = jint(t, "step_now", -1);
		long long per = jint(t, "step_period_ns", 0);
		long long m = per > 0 ? lead_ms * 1000000LL / per : 0;

		if (jint(t, "code", 1) != 0 || at < 0)
			continue;
		if (at > *max_step)
			*max_step = at;
		at += 1 + (m > CLUSTER_LEAD_MAX ? CLUSTER_LEAD_MAX : m);
		if (at > *k)
			*k = at;
	}
}

/*
 * k for every node from the asking round's replies (-1: no node took a
 * window).  The lead covers the setting fan-out (as long as the asking
 * one, twice for a slow node) plus the daemons' own.
 */
static long long
cluster_choose_k(struct cluster *cl, struct json_object **rep)
{
	long long k = -1;

	cl->max_step = -1;
	for (size_t i = 0; i < cl->nnodes; i++) {
		if (cl->nodes[i].rc != 0 || jget(rep[i], "step_from") ==
		    NULL)
			continue;
		if (k < 0)
			k = 0;
		cluster_k_acks(jget(rep[i], "acks"), 2 * cl->ask_ms +
		    CLUSTER_LEAD_MS, &k, &cl->max_step);
	}
	return k;
}

/* Ranks of a setting round's acks that were past k when it reached them
 * (they record nothing): the first step they answer is none. */
static size_t
cluster_k_passed(struct json_object *acks, long long k)
{
	size_t n = 0;

	for (size_t a = 0; a < jlen(acks); a++) {
		struct json_object *t = json_object_array_get_idx(acks, a);

		if (jint(t, "code", 1) == 0 && jint(t, "first_step", -1) < 0 &&
		    jint(t, "step_now", -1) >= k)
			n++;
	}
	return n;
}

/* The nodes' "step_from"/"step_to" become k's (for the manifest). */
static void
cluster_set_window(struct json_object *r, long long k, long long n)
{
	if (jis_num(jget(r, "step_from")))
		json_object_object_add(r, "step_from", json_object_new_int64(k));
	if (jis_num(jget(r, "step_to")))
		json_object_object_add(r, "step_to",
		    json_object_new_int64(k + n));
}

/*
 * sub (a copy of cl) gets the nodes pick() takes, each not yet run, and
 * *map "NODE=SESSION ..." for the fan-out's @S.  0, or -1 without memory.
 */
static int
cluster_sub(const struct cluster *cl, struct cluster *sub,
    bool (*pick)(const struct cluster_node *), char **map)
{
	size_t maplen = 0;

	if ((sub->nodes = calloc(cl->nnodes, sizeof(*sub->nodes))) == NULL)
		return -1;
	sub->nnodes = 0;
	for (size_t i = 0; i < cl->nnodes; i++) {
		char kv[320];

		if (cl->nodes[i].session == 0 || !pick(&cl->nodes[i]))
			continue;
		sub->nodes[sub->nnodes].name = cl->nodes[i].name;
		sub->nodes[sub->nnodes].rc = -1;
		sub->nodes[sub->nnodes].task = -1;
		sub->nnodes++;
		snprintf(kv, sizeof(kv), "%s%s=%llu", maplen ? " " : "",
		    cl->nodes[i].name, (unsigned long long)cl->nodes[i].session);
		cluster_fanout_buf_add(map, &maplen, kv, strlen(kv));
		(*map)[--maplen] = '\0';
	}
	return 0;
}

/* Nodes whose round 2 failed (rolled back), and those round 1 started. */
static bool
cluster_pick_rollback(const struct cluster_node *n)
{
	return n->k_failed;
}

static bool
cluster_pick_started(const struct cluster_node *n)
{
	return n->rc == 0;
}

/*
 * The nodes that did not take k hold a session whose window no rank
 * reaches: `stop` them (one more fan-out step), so nothing stays held,
 * and say so in each node's reason.
 */
static void
cluster_rollback(struct cluster *cl)
{
	struct cluster sub = *cl;
	char *map = NULL, *argv[5], why[640];

	sub.fanerr[0] = '\0';
	if (cluster_sub(cl, &sub, cluster_pick_rollback, &map) != 0)
		return;
	argv[0] = (char *)self_exe();
	argv[1] = "--json";
	argv[2] = "stop";
	argv[3] = "@S";
	argv[4] = NULL;
	if (sub.nnodes > 0 && map != NULL)
		cluster_fanout(&sub, argv, map);
	for (size_t j = 0; j < sub.nnodes; j++) {
		struct cluster_node *sn = &sub.nodes[j];

		for (size_t i = 0; i < cl->nnodes; i++) {
			struct cluster_node *n = &cl->nodes[i];

			if (n->name != sn->name)
				continue;
			if (sn->rc == 0)
				snprintf(why, sizeof(why), "%s; its session %llu "
				    "was stopped (rolled back)", cluster_fanout_why(cl, n),
				    (unsigned long long)n->session);
			else
				snprintf(why, sizeof(why), "%s; its session %llu "
				    "is still held at no step (stop failed: %s; "
				    "stop --output-dir ends it)", cluster_fanout_why(cl, n),
				    (unsigned long long)n->session,
				    cluster_fanout_why(&sub, sn));
			free(n->err);
			n->err = strdup(why);
		}
		free(sn->out);
		free(sn->err);
	}
	free(sub.nodes);
	free(map);
}

/*
 * Whether a node's refusal of `retarget --start-step` says its window
 * had opened already: its session recorded (or is recording) the window
 * it was given, or finished it and ended.
 */
static bool
cluster_window_opened(const char *err)
{
	return err != NULL && (strstr(err, "step window has started "
	    "already") != NULL || strstr(err, ", not active") != NULL);
}

/*
 * Second round of a common-k start: `retarget --start-step k` on every
 * node that started (through the same fan-out, one step); a node that
 * could not take it fails the start, and its session is rolled back.
 * A rank already past k when it heard of it (its steps were quicker than
 * its node said, or the fan-out slower than the lead) records nothing:
 * then k is chosen again from the round's own acks, with a lead twice
 * that round's length, up to CLUSTER_K_TRIES rounds, and a node whose
 * ranks still pass it fails.  Meanwhile a node whose ranks took the
 * earlier k may have opened its window there, or recorded it whole and
 * ended: a window that opened cannot move, so that node keeps its k
 * (the reply says the windows differ) rather than losing its capture.
 */
static void
cluster_set_k(struct cluster *cl, struct json_object **rep)
{
	const char *test_back = getenv("MSPTI_TEST_CLUSTER_K_BACK");
	struct cluster sub = *cl;
	char *map = NULL, kbuf[32];
	size_t nfailed = 0;
	char *argv[8];
	struct json_object **r2;
	bool *ok;
	long long *took;	/* per node: the last k none of its ranks passed */
	int64_t lead_ms = 2 * cl->ask_ms + CLUSTER_LEAD_MS;
	int tries = 0;

	if ((cl->k = cluster_choose_k(cl, rep)) < 0)
		return;
	sub.fanerr[0] = '\0';	/* round 2's own reasons, not round 1's */
	if (cluster_sub(cl, &sub, cluster_pick_started, &map) != 0)
		return;
	r2 = calloc(sub.nnodes + 1, sizeof(*r2));
	ok = calloc(sub.nnodes + 1, sizeof(*ok));
	took = calloc(sub.nnodes + 1, sizeof(*took));
	if (r2 == NULL || ok == NULL || took == NULL)
		goto out;
	for (size_t j = 0; j < sub.nnodes; j++)
		took[j] = -1;
	argv[0] = (char *)self_exe();
	argv[1] = "--json";
	argv[2] = "retarget";
	argv[3] = "--start-step";
	argv[4] = kbuf;
	argv[5] = "@S";
	argv[6] = NULL;
	for (;;) {
		size_t passed = 0;
		long long next = -1, max_step = cl->max_step;
		int64_t t0 = cluster_fanout_now_ms(), rt_lead;

		/* Tests: the first rounds' k lies that many steps back, so
		 * every rank has passed it. */
		if (test_back != NULL && tries < atoi(test_back))
			cl->k = cl->max_step > 8 ? cl->max_step - 8 : 0;
		tries++;
		snprintf(kbuf, sizeof(kbuf), "%lld", cl->k);
		for (size_t j = 0; j < sub.nnodes; j++) {
			struct cluster_node *sn = &sub.nodes[j];

			json_object_put(r2[j]);
			r2[j] = NULL;
			free(sn->out);
			free(sn->err);
			*sn = (struct cluster_node){ .name = sn->name, .rc = -1,
			    .task = -1 };
		}
		if (sub.nnodes > 0 && map != NULL)
			cluster_fanout(&sub, argv, map);
		rt_lead = 2 * (cluster_fanout_now_ms() - t0) + CLUSTER_LEAD_MS;
		if (rt_lead < lead_ms)
			rt_lead = lead_ms;
		for (size_t j = 0; j < sub.nnodes; j++) {
			struct cluster_node *sn = &sub.nodes[j];
			struct json_object *acks = NULL;
			size_t pj;

			ok[j] = sn->rc == 0 && sn->out != NULL &&
			    (r2[j] = jparse(sn->out)) != NULL &&
			    (acks = jget(r2[j], "acks")) != NULL &&
			    json_object_is_type(acks, json_type_array);
			for (size_t a = 0; ok[j] && a < jlen(acks); a++)
				if (jint(json_object_array_get_idx(acks, a),
				    "code", 1) != 0)
					ok[j] = false;
			if (!ok[j])
				continue;
			if ((pj = cluster_k_passed(acks, cl->k)) == 0)
				took[j] = cl->k;
			passed += pj;
			cluster_k_acks(acks, rt_lead, &next, &max_step);
		}
		if (passed == 0 || tries >= CLUSTER_K_TRIES)
			break;
		fprintf(stderr, "msptictl: %zu rank(s) had passed step %lld "
		    "when it reached them; choosing k again\n", passed, cl->k);
		lead_ms = 2 * rt_lead;
		cl->max_step = max_step;
		cl->k = next > cl->k ? next : cl->k + 1;
	}
	for (size_t j = 0; j < sub.nnodes; j++) {
		struct cluster_node *sn = &sub.nodes[j];
		size_t passed = ok[j] ? cluster_k_passed(jget(r2[j],
		    "acks"), cl->k) : 0;

		for (size_t i = 0; i < cl->nnodes; i++) {
			struct cluster_node *n = &cl->nodes[i];
			char why[200];

			if (n->name != sn->name)
				continue;
			if (ok[j] && passed == 0) {
				cluster_set_window(rep[i], cl->k, cl->steps);
				continue;
			}
			if (!ok[j] && took[j] >= 0 && took[j] != cl->k &&
			    cluster_window_opened(sn->err)) {
				n->k_kept = true;
				n->k_at = took[j];
				cluster_set_window(rep[i], took[j], cl->steps);
				continue;
			}
			n->k_failed = true;
			nfailed++;
			n->rc = sn->rc != 0 ? sn->rc : 1;
			free(n->err);
			if (ok[j]) {
				snprintf(why, sizeof(why), "%zu of its ranks had "
				    "passed step %lld when it reached them, in "
				    "each of %d tries", passed, cl->k, tries);
				n->err = strdup(why);
			} else {
				n->err = sn->err != NULL ? sn->err :
				    strdup(sub.fanerr[0] ? sub.fanerr :
				    "its daemon refused the step window");
				sn->err = NULL;
			}
		}
	}
out:
	for (size_t j = 0; r2 != NULL && j < sub.nnodes; j++)
		json_object_put(r2[j]);
	for (size_t j = 0; j < sub.nnodes; j++) {
		free(sub.nodes[j].out);
		free(sub.nodes[j].err);
	}
	free(r2);
	free(ok);
	free(took);
	free(sub.nodes);
	free(map);
	if (nfailed > 0)
		cluster_rollback(cl);
}

/* JSON: the nodes that kept an earlier k, "kept_step_from": {node: k}. */
static void
cluster_start_kept_json(const struct cluster *cl)
{
	bool any = false;

	for (size_t i = 0; i < cl->nnodes; i++) {
		if (!cl->nodes[i].k_kept)
			continue;
		printf("%s", any ? "," : "\"kept_step_from\":{");
		util_json_str(stdout, cl->nodes[i].name);
		printf(":%lld", cl->nodes[i].k_at);
		any = true;
	}
	if (any)
		printf("},");
}

static int
cluster_start_report(struct client *c, struct cluster *cl,
    struct json_object **rep)
{
	size_t nok = 0, rok = 0, rall = 0, nat;
	long long skew = 0, late = 0;

	for (size_t i = 0; i < cl->nnodes; i++) {
		struct json_object *acks = jget(rep[i], "acks");
		struct json_object *st = jget(rep[i], "started");
		size_t good = 0;

		for (size_t k = 0; k < jlen(acks); k++) {
			struct json_object *a = json_object_array_get_idx(acks,
			    k);

			if (jint(a, "pid", 0) == 0)
				continue;
			rall++;
			/* A rolled-back node's ranks capture nothing. */
			if (jint(a, "code", 1) == 0 &&
			    !cl->nodes[i].k_failed)
				good++;
		}
		rok += good;
		if (cl->nodes[i].rc == 0 && jtrue(st) &&
		    good == jlen(acks))
			nok++;
	}
	nat = cl->common_at ? cluster_start_skew(cl, rep, &skew, &late) : 0;
	if (c->json) {
		printf("{\"nodes_total\":%zu,\"nodes_ok\":%zu,\"ranks_total\":%zu,"
		    "\"ranks_capturing\":%zu,", cl->nnodes, nok, rall, rok);
		if (cl->common_at)
			printf("\"start_at_ns\":%llu,\"probe_ms\":%lld,",
			    (unsigned long long)cl->start_at,
			    (long long)cl->probe_ms);
		if (nat > 0)
			printf("\"start_skew_ns\":%lld,\"start_late_ns\":%lld,",
			    skew, late);
		if (cl->common_k)
			printf("\"step_from\":%lld,\"step_to\":%lld,"
			    "\"max_step\":%lld,\"ask_ms\":%lld,", cl->k,
			    cl->k < 0 ? -1 : cl->k + cl->steps, cl->max_step,
			    (long long)cl->ask_ms);
		cluster_start_kept_json(cl);
		printf("\"manifest\":");
		{
			char p[PATH_MAX];

			cluster_manifest_path(cl, p, sizeof(p));
			util_json_str(stdout, p);
		}
		printf(",\"nodes\":[");
		for (size_t i = 0; i < cl->nnodes; i++) {
			printf("%s{\"node\":", i ? "," : "");
			util_json_str(stdout, cl->nodes[i].name);
			printf(",\"exit\":%d,\"reply\":%s", cl->nodes[i].rc,
			    cl->nodes[i].out && jis_obj(rep[i]) ?
			    cl->nodes[i].out : "null\n");
			printf(",\"error\":");
			util_json_str(stdout, cl->nodes[i].rc == 0 ? "" :
			    cluster_fanout_why(cl, &cl->nodes[i]));
			printf("}");
		}
		printf("]}\n");
	} else {
		printf("%zu of %zu nodes, %zu of %zu ranks capturing\n", nok,
		    cl->nnodes, rok, rall);
		cluster_start_steps(cl, rep);
		if (nat > 0)
			printf("  started together: %zu ranks within %.3f ms of "
			    "each other, the last %.3f ms after the common "
			    "instant (each on its node's clock; chosen %lld ms "
			    "ahead after a %lld ms fan-out)\n", nat,
			    (double)skew / 1e6, (double)late / 1e6,
			    (long long)cl->lead_ms, (long long)cl->probe_ms);
		for (size_t i = 0; i < cl->nnodes; i++) {
			const struct cluster_node *n = &cl->nodes[i];
			struct json_object *acks = jget(rep[i], "acks");

			struct json_object *st = jget(rep[i], "started");

			if (st == NULL || n->k_failed) {
				printf("  %s: FAILED: %s\n", n->name,
				    cluster_fanout_why(cl, n));
				continue;
			}
			if (jtrue(st)) {
				struct json_object *h = jget(rep[i],
				    "start_held");

				printf("  %s: session %llu, file %s\n", n->name,
				    (unsigned long long)n->session,
				    jstr(rep[i], "output"));
				if (h != NULL && !jtrue(h))
					printf("    started at once, not at the "
					    "common instant: its msptid does "
					    "not hold starts (restart it)\n");
			} else
				printf("  %s: FAILED: no rank could be captured\n",
				    n->name);
			for (size_t k = 0; k < jlen(acks); k++) {
				struct json_object *a =
				    json_object_array_get_idx(acks, k);

				if (jint(a, "code", 1) == 0)
					printf("    rank %lld pid %lld capturing\n",
					    jint(a, "rank", -1),
					    jint(a, "pid", 0));
				else
					printf("    rank %lld pid %lld FAILED: %s\n",
					    jint(a, "rank", -1),
					    jint(a, "pid", 0),
					    jstr(a, "message"));
			}
		}
		printf("  manifest: %s/manifest.json\n", cl->outdir);
	}
	if (nok == cl->nnodes && rok == rall)
		return EXIT_OK;
	if (cl->allow_partial && rok > 0)
		return EXIT_OK;
	return EXIT_FAIL;
}

/*
 * The spread of the ranks' window starts (the first recorded step's
 * start), over every node: the achieved skew of a --steps window.  Each
 * start is on its node's own clock (no offset applied).  0 ranks: none.
 */
static size_t
cluster_window_skew(const struct cluster *cl, struct json_object **rep,
    long long *skew_ns)
{
	long long lo = 0, hi = 0;
	size_t n = 0;

	for (size_t i = 0; i < cl->nnodes; i++) {
		struct json_object *t = jget(rep[i], "targets");

		for (size_t k = 0; k < jlen(t); k++) {
			long long w = jint(json_object_array_get_idx(t, k),
			    "window_start_ns", 0);

			if (w <= 0)
				continue;
			if (n == 0 || w < lo)
				lo = w;
			if (n == 0 || w > hi)
				hi = w;
			n++;
		}
	}
	*skew_ns = hi - lo;
	return n;
}

static int
cluster_session_report(struct client *c, struct cluster *cl,
    struct json_object **rep,
    const char *verb)
{
	size_t nok = 0, nwin;
	unsigned long long records = 0, lost = 0;
	long long skew = 0;

	for (size_t i = 0; i < cl->nnodes; i++) {
		struct json_object *l = jget(rep[i], "losses");

		if (cl->nodes[i].rc == 0 && jis_obj(rep[i]))
			nok++;
		records += (unsigned long long)jint(rep[i], "records", 0);
		if (jis_obj(l)) {
			json_object_object_foreach(l, key, val) {
				(void)key;
				if (jis_num(val))
					lost += (unsigned long long)
					    json_object_get_int64(val);
			}
		}
	}
	nwin = cluster_window_skew(cl, rep, &skew);
	if (c->json) {
		printf("{\"verb\":\"%s\",\"nodes_total\":%zu,\"nodes_ok\":%zu,"
		    "\"records\":%llu,\"lost\":%llu,", verb, cl->nnodes, nok,
		    records, lost);
		if (nwin > 0)
			printf("\"window_ranks\":%zu,\"window_start_skew_ns\":"
			    "%lld,", nwin, skew);
		printf("\"nodes\":[");
		for (size_t i = 0; i < cl->nnodes; i++) {
			printf("%s{\"node\":", i ? "," : "");
			util_json_str(stdout, cl->nodes[i].name);
			printf(",\"exit\":%d,\"reply\":%s,\"error\":",
			    cl->nodes[i].rc, cl->nodes[i].out &&
			    jis_obj(rep[i]) ? cl->nodes[i].out : "null\n");
			util_json_str(stdout, cl->nodes[i].rc == 0 ? "" :
			    cluster_fanout_why(cl, &cl->nodes[i]));
			printf("}");
		}
		printf("]}\n");
	} else {
		if (strcmp(verb, "snapshot") == 0)
			printf("snapshot: %zu of %zu nodes\n", nok, cl->nnodes);
		else
			printf("%s: %zu of %zu nodes, %llu records, %llu lost\n",
			    verb, nok, cl->nnodes, records, lost);
		if (nwin > 0)
			printf("  window starts: %.3f ms apart across %zu ranks "
			    "(each on its node's clock)\n", (double)skew / 1e6,
			    nwin);
		for (size_t i = 0; i < cl->nnodes; i++) {
			const struct cluster_node *n = &cl->nodes[i];

			if (n->rc != 0 || !jis_obj(rep[i]))
				printf("  %s: FAILED: %s\n", n->name,
				    cluster_fanout_why(cl, n));
			else if (*jstr(rep[i], "snapshot"))
				printf("  %s: session %llu snapshot written to "
				    "%s\n", n->name,
				    (unsigned long long)n->session,
				    jstr(rep[i], "snapshot"));
			else
				printf("  %s: session %llu %s, %lld records, "
				    "file %s\n", n->name,
				    (unsigned long long)n->session,
				    jstr(rep[i], "state"),
				    jint(rep[i], "records", 0),
				    jstr(rep[i], "output"));
		}
	}
	return nok == cl->nnodes ? EXIT_OK : EXIT_FAIL;
}

/* sessions: each node's table, labelled. */
static int
cluster_sessions_report(struct client *c, struct cluster *cl)
{
	size_t nok = 0;

	if (c->json)
		printf("[");
	for (size_t i = 0; i < cl->nnodes; i++) {
		const struct cluster_node *n = &cl->nodes[i];

		if (n->rc == 0)
			nok++;
		if (c->json) {
			printf("%s{\"node\":", i ? "," : "");
			util_json_str(stdout, n->name);
			printf(",\"exit\":%d,\"sessions\":%s,\"error\":", n->rc,
			    n->out ? n->out : "null\n");
			util_json_str(stdout, n->rc == 0 ? "" : cluster_fanout_why(cl, n));
			printf("}");
		} else if (n->rc != 0)
			printf("%s: FAILED: %s\n", n->name, cluster_fanout_why(cl, n));
		else
			printf("%s:\n%s", n->name, n->out ? n->out : "");
	}
	if (c->json)
		printf("]\n");
	return nok == cl->nnodes ? EXIT_OK : EXIT_FAIL;
}

/* wait --timeout: one line naming the nodes whose sessions were not
 * finalized in time (their wait gave up, or they did not answer). */
static void
cluster_wait_expired(const struct cluster *cl)
{
	size_t n = 0;

	for (size_t i = 0; i < cl->nnodes; i++) {
		const char *why = cluster_fanout_why(cl, &cl->nodes[i]);

		if (cl->nodes[i].rc != 0 && (strstr(why, "not finalized within") ||
		    strstr(why, "no reply within")))
			n++;
	}
	if (n == 0)
		return;
	fprintf(stderr, "msptictl wait: %zu of %zu nodes not finalized within "
	    "%s:", n, cl->nnodes, cl->wait_timeout);
	for (size_t i = 0; i < cl->nnodes; i++) {
		const char *why = cluster_fanout_why(cl, &cl->nodes[i]);

		if (cl->nodes[i].rc != 0 && (strstr(why, "not finalized within") ||
		    strstr(why, "no reply within")))
			fprintf(stderr, " %s", cl->nodes[i].name);
	}
	fprintf(stderr, "\n");
}

/* Frees *p on every return (cleanup attribute). */
static void
cluster_free_ptr(void *p)
{
	free(*(void **)p);
}

int
cluster_exec(struct client *c, const char *verb, int argc, char **argv)
{
	const struct cmd_entry *e = client_cmd_find(verb);
	struct cluster cl = { .e = e, .timeout_ms = CLUSTER_TIMEOUT_MS };
	char **margv __attribute__((cleanup(cluster_free_ptr))) = NULL;
	char *map __attribute__((cleanup(cluster_free_ptr))) = NULL;
	char outdir[PATH_MAX], stamp[32];
	size_t m = 0, maplen = 0;
	bool session_arg = false, is_start = strcmp(verb, "start") == 0;
	bool start_step = false, duration = false, timeout_set = false;
	char sopt;
	char atbuf[32];
	int64_t t0;
	struct json_object **rep = NULL;
	const char *val;
	int rc;

	/* Each user word takes at most two slots (--job=X becomes --job X),
	 * plus up to 11 added around them (self, --json, verb, --all, the
	 * hold step, --output, @S, --start-at) and the NULL. */
	margv = calloc(2 * (size_t)argc + 16, sizeof(*margv));
	if (margv == NULL)
		return EXIT_FAIL;
	margv[m++] = (char *)self_exe();
	margv[m++] = "--json";
	margv[m++] = (char *)verb;
	cl.raw = strcmp(verb, "sessions") == 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (cluster_opt(a, "--cluster", argc, argv, &i, &val)) {
			if (val == NULL || strcmp(val, "slurm") != 0) {
				return client_usage_error(e, val == NULL ?
				    "option '--cluster' needs a value" :
				    "--cluster takes 'slurm'");
			}
			cl.kind = "slurm";
		} else if (cluster_opt(a, "--hosts", argc, argv, &i, &val)) {
			if (val == NULL) {
				return client_usage_error(e, "option '--hosts' "
				    "needs a value");
			}
			cl.hosts = val;
		} else if (cluster_opt(a, "--output-dir", argc, argv, &i, &val)) {
			if (val == NULL || *val == '\0') {
				return client_usage_error(e, "option "
				    "'--output-dir' needs a value");
			}
			cl.outdir = val;
		} else if (cluster_opt(a, "--timeout", argc, argv, &i, &val)) {
			int64_t d = val ? util_parse_duration(val) : -1;

			if (d <= 0)
				return client_usage_error(e, val == NULL ?
				    "option '--timeout' needs a value" :
				    "bad --timeout '%s'", val);
			cl.timeout_ms = (int)(d / 1000000 > 0 ? d / 1000000 : 1);
			timeout_set = true;
			if (strcmp(verb, "wait") == 0) {
				/* Each node's wait gives up with its own line;
				 * the fan-out allows for reaching the nodes. */
				cl.wait_timeout = val;
				margv[m++] = "--timeout";
				margv[m++] = (char *)val;
				if (cl.timeout_ms < INT_MAX - CLUSTER_WAIT_GRACE_MS)
					cl.timeout_ms += CLUSTER_WAIT_GRACE_MS;
			}
		} else if (strcmp(a, "--allow-partial") == 0) {
			cl.allow_partial = true;
		} else if (strcmp(a, "--json") == 0) {
			c->json = true;
		} else if (strcmp(a, "--output") == 0 || strncmp(a, "--output=", 9) == 0 ||
		    strcmp(a, "-o") == 0) {
			return client_usage_error(e, "a cluster capture takes "
			    "--output-dir DIR, not --output");
		} else if (is_start && cluster_short(a, argc, argv, &i, &sopt,
		    &val)) {
			/* -J ID, -s N, -d D, -K K, -o: as the long forms. */
			if (val == NULL)
				return client_usage_error(e, "option '-%c' needs "
				    "a value", sopt);
			if (sopt == 'o')
				return client_usage_error(e, "a cluster capture "
				    "takes --output-dir DIR, not --output");
			if (sopt == 'J') {
				cl.job = val;
				margv[m++] = "--job";
				margv[m++] = (char *)val;
				continue;
			}
			if (sopt == 's')
				cl.steps = atoll(val);
			start_step |= sopt == 'K';
			duration |= sopt == 'd';
			margv[m++] = (char *)a;
			if (val != a + strlen(a) - strlen(val))
				margv[m++] = (char *)val;	/* its own word */
		} else {
			if (cluster_opt(a, "--job", argc, argv, &i, &val)) {
				if (val == NULL)
					return client_usage_error(e, "option "
					    "'--job' needs a value");
				cl.job = val;
				if (!is_start)
					continue;
				margv[m++] = "--job";
				margv[m++] = (char *)val;
				continue;
			}
			if (a[0] != '-' && !is_start && strcmp(verb, "sessions"))
				session_arg = true;
			if (strcmp(a, "--start-step") == 0 ||
			    strncmp(a, "--start-step=", 13) == 0)
				start_step = true;
			if (strcmp(a, "--duration") == 0 ||
			    strncmp(a, "--duration=", 11) == 0)
				duration = true;
			if (strcmp(a, "--steps") == 0 && i + 1 < argc)
				cl.steps = atoll(argv[i + 1]);
			else if (strncmp(a, "--steps=", 8) == 0)
				cl.steps = atoll(a + 8);
			margv[m++] = (char *)a;
		}
	}
	if ((cl.kind != NULL) == (cl.hosts != NULL))
		return client_usage_error(e, "give one of --cluster slurm or "
		    "--hosts FILE");
	if (cl.kind != NULL && cl.job == NULL)
		return client_usage_error(e, "--cluster slurm needs --job ID");
	if (is_start && cl.job == NULL) {
		/* ssh without a job: every agent of each host. */
		margv[m++] = "--all";
	}
	cl.k = -1;
	if (is_start && cl.steps > 0 && !start_step) {
		/* Every node starts with a window no rank reaches and says
		 * where its ranks are; then all get the same k. */
		cl.common_k = true;
		margv[m++] = "--start-step";
		margv[m++] = CLUSTER_HOLD_STEP;
	}
	if (cl.outdir == NULL && is_start) {
		time_t now = time(NULL);
		struct tm tm;
		char cwd[PATH_MAX - 64];

		localtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			snprintf(cwd, sizeof(cwd), ".");
		snprintf(outdir, sizeof(outdir), "%s/mspti-cluster-%s", cwd, stamp);
		cl.outdir = outdir;
	} else if (cl.outdir != NULL && cl.outdir[0] != '/') {
		/* Nodes run in srun's or ssh's cwd: name the same path there. */
		char cwd[PATH_MAX / 2];

		if (getcwd(cwd, sizeof(cwd)) != NULL) {
			snprintf(outdir, sizeof(outdir), "%s/%s", cwd, cl.outdir);
			cl.outdir = outdir;
		}
	}
	if (!is_start && strcmp(verb, "sessions") != 0 && !session_arg) {
		/* stop/wait/snapshot: the sessions the manifest names. */
		if (cl.outdir == NULL)
			return client_usage_error(e, "give --output-dir DIR (the "
			    "capture's manifest) or a SESSION");
		if ((rc = cluster_manifest_read(&cl)) != EXIT_OK)
			return rc;
		for (size_t i = 0; i < cl.nnodes; i++) {
			char kv[320];

			snprintf(kv, sizeof(kv), "%s%s=%llu", i ? " " : "",
			    cl.nodes[i].name,
			    (unsigned long long)cl.nodes[i].session);
			cluster_fanout_buf_add(&map, &maplen, kv, strlen(kv));
			map[--maplen] = '\0';
		}
		if (strcmp(verb, "snapshot") == 0) {
			static char snap[PATH_MAX + 32];

			snprintf(snap, sizeof(snap), "%s/@N-snapshot.mspti",
			    cl.outdir);
			margv[m++] = "--output";
			margv[m++] = snap;
		}
		margv[m++] = "@S";
	}
	if (is_start) {
		static char out[PATH_MAX + 16];

		snprintf(out, sizeof(out), "%s/@N.mspti", cl.outdir);
		margv[m++] = "--output";
		margv[m++] = out;
	}
	if (is_start && duration && cl.steps == 0)
		cl.common_at = true;
	margv[m] = NULL;
	if (cl.raw && !c->json)		/* sessions: the nodes' own tables */
		memmove(&margv[1], &margv[2], (m - 1) * sizeof(*margv));
	if (strcmp(verb, "wait") == 0 && !timeout_set)
		cl.timeout_ms = INT_MAX;	/* wait: as long as the sessions run */
	if (cl.nnodes == 0 && (rc = cluster_fanout_resolve(&cl)) != EXIT_OK)
		return rc;
	if (cl.common_at) {
		/* One start instant for all: ahead by twice what a fan-out
		 * takes (measured now), so every node has it in time. */
		cl.probe_ms = cluster_probe(&cl);
		cl.lead_ms = 2 * cl.probe_ms + CLUSTER_AT_LEAD_MS;
		/* A node that hung in the probe must not put the instant
		 * past the start fan-out's own deadline. */
		if (cl.lead_ms > cl.timeout_ms / 2)
			cl.lead_ms = cl.timeout_ms / 2;
		cl.start_at = util_realtime_ns() + (uint64_t)cl.lead_ms *
		    1000000ull;
		snprintf(atbuf, sizeof(atbuf), "%llu",
		    (unsigned long long)cl.start_at);
		margv[m++] = "--start-at";
		margv[m++] = atbuf;
		margv[m] = NULL;
	}
	t0 = cluster_fanout_now_ms();
	cluster_fanout(&cl, margv, map != NULL ? map : "-");
	cl.ask_ms = cluster_fanout_now_ms() - t0;
	rep = calloc(cl.nnodes, sizeof(*rep));
	if (rep == NULL)
		return EXIT_FAIL;
	if (strcmp(verb, "sessions") == 0)
		rc = cluster_sessions_report(c, &cl);
	else {
		cluster_parse_replies(&cl, rep);
		if (cl.common_k) {
			/* The sessions exist now: a caller killed before k is
			 * set still finds them in the manifest (stop). */
			if (cl.outdir != NULL)
				cluster_manifest_write(&cl, verb, rep);
			cluster_set_k(&cl, rep);
		}
		/* A snapshot adds files; the manifest keeps the session's. */
		if (cl.outdir != NULL && strcmp(verb, "snapshot") != 0)
			cluster_manifest_write(&cl, verb, rep);
		rc = is_start ? cluster_start_report(c, &cl, rep) :
		    cluster_session_report(c, &cl, rep, verb);
		if (cl.wait_timeout != NULL)
			cluster_wait_expired(&cl);
	}
	for (size_t i = 0; i < cl.nnodes; i++) {
		json_object_put(rep[i]);
		free(cl.nodes[i].name);
		free(cl.nodes[i].out);
		free(cl.nodes[i].err);
	}
	free(rep);
	free(cl.nodes);
	return rc;
}

/* True when a capture verb's arguments ask for the cluster fan-out (and
 * not for its usage: --help is answered here). */
bool
cluster_wanted(const char *verb, int argc, char **argv)
{
	static const char *verbs[] = { "start", "stop", "sessions", "wait",
	    "snapshot" };
	bool capture = false, fanout = false;

	for (size_t i = 0; i < nitems(verbs); i++)
		capture |= strcmp(verb, verbs[i]) == 0;
	if (!capture)
		return false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return false;
		if (strncmp(argv[i], "--cluster", 9) == 0 ||
		    strncmp(argv[i], "--hosts", 7) == 0)
			fanout = true;
	}
	return fanout;
}

/*
 * For other fan-outs (cluster-report.c): runs margv (with @N) on every
 * node of the Slurm job (kind "slurm") or of the hosts file, like the
 * capture verbs, and hands back each node's stdout lines that start with
 * '{' and why it failed.  An exit code when the nodes cannot be found.
 */
int
cluster_run(const struct cmd_entry *e, const char *kind, const char *hosts,
    const char *job, int timeout_ms, char **margv,
    struct cluster_reply **out, size_t *nout)
{
	struct cluster cl = { .e = e, .kind = kind, .hosts = hosts, .job = job,
	    .timeout_ms = timeout_ms > 0 ? timeout_ms : CLUSTER_TIMEOUT_MS };
	struct cluster_reply *r;
	int rc;

	*out = NULL;
	*nout = 0;
	if ((rc = cluster_fanout_resolve(&cl)) != EXIT_OK)
		return rc;
	cluster_fanout(&cl, margv, "-");
	if ((r = calloc(cl.nnodes, sizeof(*r))) == NULL)
		return EXIT_FAIL;
	for (size_t i = 0; i < cl.nnodes; i++) {
		struct cluster_node *n = &cl.nodes[i];

		r[i].name = n->name;
		r[i].out = n->out;
		r[i].outlen = n->outlen;
		r[i].rc = n->rc;
		r[i].why = strdup(cluster_fanout_why(&cl, n));
		free(n->err);
	}
	free(cl.nodes);
	*out = r;
	*nout = cl.nnodes;
	return EXIT_OK;
}

const char *
cluster_self_exe(void)
{
	return self_exe();
}

/*
 * The cluster fan-out's map (msptictl --cluster/--hosts): its structs,
 * the JSON helpers every part reads replies with, and the prototypes of
 * its files.
 *
 *   cluster.c           the verbs: start's rounds (one k, one instant),
 *                       stop/wait/snapshot/sessions, their reports
 *   cluster-fanout.c    resolving the nodes, running msptictl on each of
 *                       them through srun or ssh, collecting the replies
 *   cluster-manifest.c  the capture directory's manifest.json
 *   cluster-report.c    report --cluster/--hosts (client.h)
 */
#ifndef MSPTI_CLUSTER_INT_H
#define MSPTI_CLUSTER_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#define CLUSTER_TIMEOUT_MS	60000
#define CLUSTER_MAX_NODES	4096
#define CLUSTER_MAX_REPLY	(16u << 20)
#define CLUSTER_WAIT_GRACE_MS	10000	/* wait --timeout: reaching nodes */

struct cluster_node {
	char		*name;
	char		*out;		/* the node's stdout (msptictl's JSON) */
	size_t		 outlen;
	char		*err;		/* last line of complaint about it */
	int		 rc;		/* -1: never reported */
	uint64_t	 session;
	int		 task;		/* srun task id, -1 until "@node" */
	bool		 open;		/* out holds a reply cut short (srun) */
	bool		 cut;		/* raw: the last piece was a cut one */
	bool		 k_failed;	/* did not take the common k */
	/* Kept an earlier k: its window had opened at it before k was
	 * chosen again, and an opened window cannot move. */
	bool		 k_kept;
	long long	 k_at;		/* that k */
	/* The node read node_ns on its CLOCK_REALTIME after we launched at
	 * launch_ns and before its line reached us at recv_ns (both ours):
	 * its offset to us lies in [node - recv, node - launch]. */
	int64_t		 node_ns, launch_ns, recv_ns;
};

struct cluster {
	const struct cmd_entry *e;	/* the verb, for its usage errors */
	const char	*kind;		/* "slurm" or NULL */
	const char	*hosts;
	const char	*job;
	const char	*outdir;
	bool		 allow_partial;
	bool		 raw;		/* keep every output line (sessions) */
	int		 timeout_ms;
	struct cluster_node *nodes;
	size_t		 nnodes;
	char		 fanerr[256];	/* why the fan-out itself failed */
	/* start --steps N without --start-step: one k for every node. */
	bool		 common_k;
	long long	 k;		/* chosen, -1 none */
	long long	 steps;		/* N */
	long long	 max_step;	/* the furthest rank's step when asked */
	int64_t		 ask_ms;	/* the asking fan-out's duration */
	/* start --duration D: every node starts at start_at (its clock). */
	bool		 common_at;
	uint64_t	 start_at;
	int64_t		 probe_ms;	/* the fan-out that measured the lead */
	int64_t		 lead_ms;	/* start_at's lead over the choice */
	const char	*wait_timeout;	/* wait --timeout D, as given */
};

/* The nodes' replies and the manifest, read with json-c. */

/*
 * text as JSON: the first value in it (what follows is left, as a reply
 * may end a longer output), or NULL when it is not JSON or not whole yet
 * (a reply that srun cut).  Nesting deeper than json-c's 32 is refused.
 */
static inline struct json_object *
jparse(const char *text)
{
	size_t len = strlen(text);
	struct json_tokener *tok;
	struct json_object *o;

	if (len > INT_MAX || (tok = json_tokener_new()) == NULL)
		return NULL;
	o = json_tokener_parse_ex(tok, text, (int)len);
	json_tokener_free(tok);
	return o;
}

static inline bool
jis_obj(struct json_object *o)
{
	return o != NULL && json_object_is_type(o, json_type_object);
}

static inline bool
jis_num(struct json_object *o)
{
	return o != NULL && (json_object_is_type(o, json_type_int) ||
	    json_object_is_type(o, json_type_double));
}

static inline bool
jtrue(struct json_object *o)
{
	return o != NULL && json_object_get_boolean(o);
}

/* Member key of object o; NULL when o is no object or has none. */
static inline struct json_object *
jget(struct json_object *o, const char *key)
{
	struct json_object *m;

	return jis_obj(o) && json_object_object_get_ex(o, key, &m) ? m : NULL;
}

static inline long long
jint(struct json_object *o, const char *key, long long dflt)
{
	struct json_object *m = jget(o, key);

	return jis_num(m) ? (long long)json_object_get_int64(m) : dflt;
}

static inline const char *
jstr(struct json_object *o, const char *key)
{
	struct json_object *m = jget(o, key);

	return m != NULL && json_object_is_type(m, json_type_string) ?
	    json_object_get_string(m) : "";
}

/* The length of array a; 0 when a is no array. */
static inline size_t
jlen(struct json_object *a)
{
	return a != NULL && json_object_is_type(a, json_type_array) ?
	    json_object_array_length(a) : 0;
}

/* cluster-fanout.c */
/* Appends n bytes of s and a NUL to the growable buffer *buf. */
void		 cluster_fanout_buf_add(char **buf, size_t *len, const char *s,
		     size_t n);
/* Adds the node named by len bytes of name; -1 past CLUSTER_MAX_NODES. */
int		 cluster_fanout_add(struct cluster *cl, const char *name,
		     size_t len);
/* cl's nodes from its hosts file or its Slurm job; an exit code. */
int		 cluster_fanout_resolve(struct cluster *cl);
int64_t		 cluster_fanout_now_ms(void);
/* Runs margv on every node (map: "node=session ..." or "-"). */
void		 cluster_fanout(struct cluster *cl, char **margv,
		     const char *map);
/* Why node n failed, in a few words. */
const char	*cluster_fanout_why(const struct cluster *cl,
		     const struct cluster_node *n);

/* cluster-manifest.c */
/* DIR/manifest.json of cl's --output-dir into out. */
void		 cluster_manifest_path(const struct cluster *cl, char *out,
		     size_t len);
int		 cluster_manifest_write(const struct cluster *cl,
		     const char *verb, struct json_object **rep);
int		 cluster_manifest_read(struct cluster *cl);

#endif

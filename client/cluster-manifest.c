/*
 * A cluster capture's manifest (cluster-int.h): DIR/manifest.json, on
 * the host that ran the command, lists the nodes, their sessions, ranks,
 * files, the bracket of each node's clock offset and, after stop/wait,
 * records and losses; stop/wait/snapshot read the sessions back from it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "client.h"
#include "cluster-int.h"

void
cluster_manifest_path(const struct cluster *cl, char *out, size_t len)
{
	snprintf(out, len, "%s/manifest.json", cl->outdir);
}

static void
json_out_str(FILE *f, const char *s)
{
	util_json_str(f, s != NULL ? s : "");
}

/*
 * Writes DIR/manifest.json: per node its session, file, ranks and, from
 * stop/wait replies, state, records and losses.  sess holds each node's
 * parsed reply (start's or a SessionInfo).
 */
int
cluster_manifest_write(const struct cluster *cl, const char *verb,
    struct json_object **rep)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;

	if (mkdir(cl->outdir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "msptictl: cannot create %s: %s\n", cl->outdir,
		    strerror(errno));
		return -1;
	}
	cluster_manifest_path(cl, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((f = fopen(tmp, "w")) == NULL) {
		fprintf(stderr, "msptictl: cannot write %s: %s\n", tmp,
		    strerror(errno));
		return -1;
	}
	fprintf(f, "{\"format\":\"mspti-cluster-capture\",\"version\":1,"
	    "\"via\":\"%s\",\"job\":", cl->kind ? "slurm" : "ssh");
	json_out_str(f, cl->job);
	fprintf(f, ",\"updated_by\":\"%s\",\"output_dir\":", verb);
	json_out_str(f, cl->outdir);
	fprintf(f, ",\"nodes\":[");
	for (size_t i = 0; i < cl->nnodes; i++) {
		const struct cluster_node *n = &cl->nodes[i];
		struct json_object *r = rep[i], *acks, *losses;
		bool ok = n->rc == 0 && jis_obj(r);

		fprintf(f, "%s{\"node\":", i ? "," : "");
		json_out_str(f, n->name);
		fprintf(f, ",\"ok\":%s,\"session\":%llu,\"file\":",
		    ok ? "true" : "false", (unsigned long long)n->session);
		json_out_str(f, ok ? jstr(r, "output") : "");
		if (!ok) {
			fprintf(f, ",\"error\":");
			json_out_str(f, cluster_fanout_why(cl, n));
		}
		if (n->node_ns > 0 && n->recv_ns > 0)
			fprintf(f, ",\"clock\":{\"node_realtime_ns\":%lld,"
			    "\"launch_ns\":%lld,\"reply_ns\":%lld,"
			    "\"offset_min_ns\":%lld,\"offset_max_ns\":%lld}",
			    (long long)n->node_ns, (long long)n->launch_ns,
			    (long long)n->recv_ns,
			    (long long)(n->node_ns - n->recv_ns),
			    (long long)(n->node_ns - n->launch_ns));
		if (jget(r, "state") != NULL) {
			fprintf(f, ",\"state\":");
			json_out_str(f, jstr(r, "state"));
			fprintf(f, ",\"records\":%lld", jint(r, "records", 0));
		}
		losses = jget(r, "losses");
		if (jis_obj(losses)) {
			const char *sep = "";

			fprintf(f, ",\"losses\":{");
			json_object_object_foreach(losses, key, val) {
				fprintf(f, "%s", sep);
				json_out_str(f, key);
				fprintf(f, ":%lld", jis_num(val) ? (long long)
				    json_object_get_int64(val) : 0);
				sep = ",";
			}
			fprintf(f, "}");
		}
		acks = jget(r, "acks");
		if (acks == NULL)
			acks = jget(r, "targets");
		fprintf(f, ",\"ranks\":[");
		for (size_t k = 0; k < jlen(acks); k++) {
			struct json_object *a = json_object_array_get_idx(acks,
			    k);

			fprintf(f, "%s{\"pid\":%lld,\"rank\":%lld,\"ok\":%s,"
			    "\"message\":", k ? "," : "", jint(a, "pid", 0),
			    jint(a, "rank", -1),
			    jint(a, "code", 1) == 0 ? "true" : "false");
			json_out_str(f, jstr(a, "message"));
			fprintf(f, "}");
		}
		fprintf(f, "]}");
	}
	fprintf(f, "]}\n");
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "msptictl: cannot write %s: %s\n", path,
		    strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Reads node sessions from DIR/manifest.json into cl (the nodes it names). */
int
cluster_manifest_read(struct cluster *cl)
{
	char path[PATH_MAX], *text = NULL;
	struct json_object *m, *nodes;
	struct stat st;
	FILE *f;
	long len;
	int fd;

	cluster_manifest_path(cl, path, sizeof(path));
	/* Not blocking on a FIFO, nor reading a device, put there. */
	f = NULL;
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) >= 0 &&
	    fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
		errno = EINVAL;
	else if (fd >= 0)
		f = fdopen(fd, "r");
	if (f == NULL) {
		fprintf(stderr, "msptictl: cannot read %s: %s\n", path,
		    errno == EINVAL ? "not a regular file" : strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_NOTFOUND;
	}
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 &&
	    len < (64 << 20) && (text = malloc((size_t)len + 1)) != NULL) {
		rewind(f);
		text[fread(text, 1, (size_t)len, f)] = '\0';
	}
	fclose(f);
	if (text == NULL || (m = jparse(text)) == NULL) {
		fprintf(stderr, "msptictl: %s is not a cluster manifest\n", path);
		free(text);
		return EXIT_FAIL;
	}
	free(text);
	nodes = jget(m, "nodes");
	for (size_t i = 0; i < jlen(nodes); i++) {
		struct json_object *n = json_object_array_get_idx(nodes, i);
		const char *name = jstr(n, "node");
		long long s = jint(n, "session", 0);

		if (s <= 0 || *name == '\0')
			continue;
		cluster_fanout_add(cl, name, strlen(name));
		cl->nodes[cl->nnodes - 1].session = (uint64_t)s;
	}
	json_object_put(m);
	if (cl->nnodes == 0) {
		fprintf(stderr, "msptictl: %s names no started session\n", path);
		return EXIT_NOTFOUND;
	}
	return EXIT_OK;
}


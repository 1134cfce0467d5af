/*
 * The registry of agents.  An agent is known from its Hello until its
 * connection closes, which the kernel does the moment the process exits, so
 * the registry never holds a dead process.  Identity (pid, uid, gid) comes
 * from SO_PEERCRED at connect time, never from the message.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "msptid.h"
#include "metrics.h"

#define REG_MAX_STR	4096
/* A command line is kept to 1 KiB so that thousands of agents fit one
 * ListReply (the full one is in /proc/PID/cmdline). */
#define REG_MAX_CMDLINE	1024
#define REG_MAX_DEVICES	64

/* Copies a peer-supplied string, bounded, with control characters replaced. */
static char *
registry_strdup(const char *s, size_t max)
{
	size_t len = s ? strnlen(s, max) : 0;
	char *out = malloc(len + 1);

	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	out[len] = '\0';
	return out;
}

static char *
registry_join_argv(char **argv, size_t argc)
{
	char *out = malloc(REG_MAX_CMDLINE + 1);
	size_t off = 0;

	if (out == NULL)
		return NULL;
	out[0] = '\0';
	for (size_t i = 0; i < argc && off < REG_MAX_CMDLINE; i++) {
		int n = snprintf(out + off, REG_MAX_CMDLINE + 1 - off, "%s%s",
		    i ? " " : "", argv[i] ? argv[i] : "");
		if (n < 0)
			break;
		off += (size_t)n;
	}
	for (char *c = out; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return out;
}

static void
registry_agent_free(struct agent *a)
{
	if (a == NULL)
		return;
	free(a->exe);
	free(a->cmdline);
	free(a->job_id);
	free(a->version);
	free(a->devices);
	session_dev_agent_free(a);
	free(a);
}

int
registry_hello(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__Hello *hello = (const Mspti__Hello *)m;
	Mspti__Welcome welcome = MSPTI__WELCOME__INIT;
	struct daemon *d = p->d;
	struct agent *a;

	if (hello->n_devices > REG_MAX_DEVICES) {
		peer_drop(p, "too many devices in Hello");
		return -1;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		goto nomem;
	a->peer = p;
	a->id = d->next_agent_id++;
	a->cred = p->cred;
	a->exe = registry_strdup(hello->exe, REG_MAX_STR);
	a->cmdline = registry_join_argv(hello->argv, hello->n_argv);
	a->job_id = registry_strdup(hello->job_id, 256);
	a->version = registry_strdup(hello->agent_version, 64);
	a->rank = hello->rank;
	a->local_rank = hello->local_rank;
	a->world_size = hello->world_size;
	a->capabilities = hello->capabilities;
	a->since_ns = util_realtime_ns();
	if (hello->n_devices > 0) {
		a->devices = calloc(hello->n_devices, sizeof(*a->devices));
		if (a->devices == NULL)
			goto nomem;
		memcpy(a->devices, hello->devices,
		    hello->n_devices * sizeof(*a->devices));
		a->ndevices = hello->n_devices;
	}
	if (a->exe == NULL || a->cmdline == NULL || a->job_id == NULL ||
	    a->version == NULL)
		goto nomem;
	priv_agent_exe(a);
	p->agent = a;
	TAILQ_INSERT_TAIL(&d->agents, a, entry);
	d->nagents++;
	log_info("agent %llu registered: pid %ld uid %lu job '%s' rank %d %s",
	    (unsigned long long)a->id, (long)a->cred.pid,
	    (unsigned long)a->cred.uid, a->job_id, a->rank, a->exe);
	sd_status("%u agents, %u sessions", d->nagents, d->nsessions);
	metrics_sync_agents(d->metrics, d);

	welcome.agent_id = a->id;
	welcome.daemon_version = (char *)MSPTID_VERSION;
	welcome.protocol = MSPTID_PROTOCOL;
	if (peer_send(p, MSPTI__MSG_TYPE__MSG_WELCOME, &welcome.base, -1) != 0)
		return -1;
	/* A session following this agent's job takes it (elastic restart). */
	return session_agent_registered(d, a);
nomem:
	registry_agent_free(a);
	peer_drop(p, "out of memory");
	return -1;
}

/* The set of devices an agent uses changes as it calls aclrtSetDevice. */
int
registry_update(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__AgentUpdate *u = (const Mspti__AgentUpdate *)m;
	struct agent *a = p->agent;
	uint32_t *devs = NULL;

	if (u->n_devices > REG_MAX_DEVICES) {
		peer_drop(p, "too many devices in AgentUpdate");
		return -1;
	}
	if (u->n_devices > 0) {
		if ((devs = calloc(u->n_devices, sizeof(*devs))) == NULL) {
			peer_drop(p, "out of memory");
			return -1;
		}
		memcpy(devs, u->devices, u->n_devices * sizeof(*devs));
	}
	free(a->devices);
	a->devices = devs;
	a->ndevices = u->n_devices;
	metrics_sync_agents(p->d->metrics, p->d);
	session_dev_agent_changed(p->d, a);
	if (strcmp(a->job_id, u->job_id ? u->job_id : "") != 0 ||
	    a->rank != u->rank || a->local_rank != u->local_rank ||
	    a->world_size != u->world_size) {
		char *job = registry_strdup(u->job_id, 256);

		if (job == NULL) {
			peer_drop(p, "out of memory");
			return -1;
		}
		free(a->job_id);
		a->job_id = job;
		a->rank = u->rank;
		a->local_rank = u->local_rank;
		a->world_size = u->world_size;
		log_info("agent %llu (pid %ld) is now job '%s' rank %d",
		    (unsigned long long)a->id, (long)a->cred.pid, a->job_id,
		    a->rank);
		/* A job or rank selector may take it now. */
		if (a->session_id == 0)
			return session_agent_registered(p->d, a);
	}
	return 0;
}

/*
 * AgentSync (msptictl run's start gate): answered in order on the agent's
 * connection, so the reply follows every StartCapture sent at its Hello.
 */
int
registry_sync(struct peer *p, const ProtobufCMessage *m)
{
	const Mspti__AgentSync *req = (const Mspti__AgentSync *)m;
	Mspti__AgentSyncReply rep = MSPTI__AGENT_SYNC_REPLY__INIT;

	rep.cookie = req->cookie;
	return peer_send(p, MSPTI__MSG_TYPE__MSG_AGENT_SYNC_REP, &rep.base, -1)
	    != 0 ? -1 : 0;
}

/* Called when the agent's connection closes. */
void
registry_remove(struct daemon *d, struct agent *a)
{
	log_info("agent %llu (pid %ld) gone", (unsigned long long)a->id,
	    (long)a->cred.pid);
	session_agent_gone(d, a);
	TAILQ_REMOVE(&d->agents, a, entry);
	d->nagents--;
	a->peer->agent = NULL;
	registry_agent_free(a);
	sd_status("%u agents, %u sessions", d->nagents, d->nsessions);
	metrics_sync_agents(d->metrics, d);
}

struct agent *
registry_find_pid(struct daemon *d, pid_t pid)
{
	struct agent *a;

	TAILQ_FOREACH(a, &d->agents, entry)
		if (a->cred.pid == pid)
			return a;
	return NULL;
}

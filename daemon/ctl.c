/*
 * Control requests from msptictl.  Every request is answered with its reply
 * type or with an Error carrying the CLI exit-code class.
 */
#include "config.h"

#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "msptid.h"

/*
 * Root and members of the "mspti" group may act on any agent; anyone else
 * only on agents running under its own uid.
 */
bool
ctl_may_act_on(const struct peer_cred *caller, uid_t owner)
{
	struct group gr, *res = NULL;
	char buf[4096];

	if (caller->uid == 0 || caller->uid == owner)
		return true;
	if (getgrnam_r("mspti", &gr, buf, sizeof(buf), &res) != 0 || res == NULL)
		return false;
	if (caller->gid == gr.gr_gid)
		return true;
	/* Supplementary groups of the caller's user. */
	struct passwd pw, *pres = NULL;
	char pbuf[4096];
	if (getpwuid_r(caller->uid, &pw, pbuf, sizeof(pbuf), &pres) != 0 ||
	    pres == NULL)
		return false;
	for (char **m = gr.gr_mem; m != NULL && *m != NULL; m++)
		if (strcmp(*m, pw.pw_name) == 0)
			return true;
	return false;
}

int
ctl_status(struct peer *p, const ProtobufCMessage *m)
{
	Mspti__StatusReply rep = MSPTI__STATUS_REPLY__INIT;
	struct daemon *d = p->d;
	char limbuf[256], *limits[1];

	rep.version = (char *)MSPTID_VERSION;
	rep.pid = (uint32_t)getpid();
	rep.start_time_ns = d->start_ns;
	rep.uptime_ns = util_monotonic_ns() - d->start_mono;
	rep.agents = d->nagents;
	rep.sessions = d->nsessions;
	rep.runtime_dir = d->rundir;
	rep.frames_rejected = d->frames_rejected;
	rep.peers_dropped = d->peers_dropped;
	rep.uid = (uint32_t)geteuid();
	rep.limits = limits;
	rep.n_limits = priv_limits(d, limbuf, sizeof(limbuf), limits,
	    nitems(limits));
	return peer_send(p, MSPTI__MSG_TYPE__MSG_STATUS_REP, &rep.base, -1);
}

int
ctl_list(struct peer *p, const ProtobufCMessage *m)
{
	Mspti__ListReply rep = MSPTI__LIST_REPLY__INIT;
	Mspti__AgentInfo *infos = NULL, **ptrs = NULL;
	struct daemon *d = p->d;
	struct agent *a;
	size_t n = 0;
	int rc;

	if (d->nagents > 0) {
		infos = calloc(d->nagents, sizeof(*infos));
		ptrs = calloc(d->nagents, sizeof(*ptrs));
		if (infos == NULL || ptrs == NULL) {
			free(infos);
			free(ptrs);
			return peer_send_error(p, 1, "daemon out of memory");
		}
	}
	/* Everyone may list every agent, as ps(1) shows every process. */
	TAILQ_FOREACH(a, &d->agents, entry) {
		Mspti__AgentInfo *i = &infos[n];

		mspti__agent_info__init(i);
		i->agent_id = a->id;
		i->pid = (uint32_t)a->cred.pid;
		i->uid = (uint32_t)a->cred.uid;
		i->gid = (uint32_t)a->cred.gid;
		i->job_id = a->job_id;
		i->rank = a->rank;
		i->local_rank = a->local_rank;
		i->world_size = a->world_size;
		i->devices = a->devices;
		i->n_devices = a->ndevices;
		i->exe = a->exe;
		i->cmdline = a->cmdline;
		i->since_ns = a->since_ns;
		i->session_id = a->session_id;
		i->agent_version = a->version;
		i->exe_checked = a->exe_checked;
		ptrs[n++] = i;
	}
	rep.agents = ptrs;
	rep.n_agents = n;
	rc = peer_send(p, MSPTI__MSG_TYPE__MSG_LIST_REP, &rep.base, -1);
	free(infos);
	free(ptrs);
	return rc;
}

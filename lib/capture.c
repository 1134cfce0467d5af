/* In-process capture: msPTI activity records -> trace file (capture.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "trace.h"
#include "util.h"

#define CAP_ATTR	__attribute__((visibility("default")))
#define CAP_CACHE	1024

struct capture {
	pthread_mutex_t		 mtx;
	int			 fd;
	struct trace_writer	*w;
	uint32_t		 pid;
	int			 error;
	uint64_t		 lost;
	struct {
		const char	*p;
		uint32_t	 id;
	}			 cache[CAP_CACHE];	/* by pointer */
	struct {
		uint64_t	 corr;
		uint32_t	 tid;
	}			 tids[4096];		/* corr -> tid */
};

static uint64_t
cap_now(void)
{
	return util_realtime_ns();
}

/* The trace id of s; the agent interns names, so pointers repeat. */
static uint32_t
cap_str(struct capture *c, const char *s)
{
	size_t i;
	uint32_t id = 0;

	if (s == NULL || *s == '\0')
		return 0;
	i = ((uintptr_t)s >> 3) % CAP_CACHE;
	if (c->cache[i].p == s)
		return c->cache[i].id;
	if (trace_writer_intern(c->w, s, strlen(s), &id) != 0)
		return 0;
	c->cache[i].p = s;
	c->cache[i].id = id;
	return id;
}

static int
cap_env_int(const char *name)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (v == NULL || *v == '\0')
		return -1;
	n = strtol(v, &end, 10);
	return *end == '\0' && n >= 0 && n < (1L << 30) ? (int)n : -1;
}

CAP_ATTR int
capture_open(const char *path, struct capture **cp)
{
	struct trace_header hdr;
	struct rec_process pr;
	struct capture *c;
	char host[256], exe[1024];
	const char *job;
	ssize_t n;
	int rc;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	pthread_mutex_init(&c->mtx, NULL);
	/* A regular file: a FIFO or device is refused at once. */
	if ((c->fd = util_create_output(path, 0644, false)) < 0) {
		rc = c->fd;
		free(c);
		return rc;
	}
	memset(&hdr, 0, sizeof(hdr));
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	hdr.created_ns = cap_now();
	hdr.hostname = host;
	hdr.producer = "mspti-capture " PACKAGE_VERSION;
	if ((rc = trace_writer_open(c->fd, &hdr, 0, &c->w)) != 0) {
		close(c->fd);
		free(c);
		return rc;
	}
	c->pid = (uint32_t)getpid();
	REC_INIT(&pr, REC_PROCESS, 0);
	pr.start_ns = hdr.created_ns;
	pr.pid = c->pid;
	pr.uid = (uint32_t)getuid();
	pr.rank = cap_env_int("RANK");
	pr.local_rank = cap_env_int("LOCAL_RANK");
	pr.world_size = cap_env_int("WORLD_SIZE");
	if (pr.world_size > 0 && pr.rank >= pr.world_size)
		pr.world_size = -1;
	if ((job = getenv("MSPTI_JOB_ID")) == NULL &&
	    (job = getenv("SLURM_JOB_ID")) == NULL)
		job = getenv("TORCHELASTIC_RUN_ID");
	pr.job_id = cap_str(c, job);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	pr.exe_id = cap_str(c, exe);
	trace_writer_add(c->w, &pr);
	*cp = c;
	return 0;
}

static uint32_t
cap_tid(struct capture *c, uint64_t corr)
{
	size_t i = corr % 4096;

	return c->tids[i].corr == corr ? c->tids[i].tid : 0;
}

static int
cap_add_locked(struct capture *c, const msptiActivity *a)
{
	union {
		struct rec_api api;
		struct rec_kernel k;
		struct rec_memcpy mc;
		struct rec_memset ms;
		struct rec_memory mem;
		struct rec_hccl h;
		struct rec_communication cm;
		struct rec_marker m;
		struct rec_external_correlation x;
	} u;

	switch (a->kind) {
	case MSPTI_ACTIVITY_KIND_API:
	case MSPTI_ACTIVITY_KIND_ACL_API:
	case MSPTI_ACTIVITY_KIND_NODE_API:
	case MSPTI_ACTIVITY_KIND_RUNTIME_API: {
		const msptiActivityApi *r = (const void *)a;

		REC_INIT(&u.api, REC_API, 0);
		u.api.start = r->start;
		u.api.end = r->end < r->start ? r->start : r->end;
		u.api.correlation_id = r->correlationId;
		u.api.pid = r->pt.processId;
		u.api.tid = r->pt.threadId;
		u.api.name_id = cap_str(c, r->name);
		u.api.kind = (uint16_t)a->kind;
		c->tids[r->correlationId % 4096].corr = r->correlationId;
		c->tids[r->correlationId % 4096].tid = r->pt.threadId;
		break;
	}
	case MSPTI_ACTIVITY_KIND_KERNEL: {
		const msptiActivityKernel *r = (const void *)a;

		REC_INIT(&u.k, REC_KERNEL, 0);
		u.k.start = r->start;
		u.k.end = r->end < r->start ? r->start : r->end;
		u.k.correlation_id = r->correlationId;
		u.k.pid = c->pid;
		u.k.tid = cap_tid(c, r->correlationId);
		u.k.device = r->ds.deviceId;
		u.k.stream = r->ds.streamId;
		u.k.task_id = REC_NONE;
		u.k.name_id = cap_str(c, r->name);
		u.k.type_id = cap_str(c, r->type);
		break;
	}
	case MSPTI_ACTIVITY_KIND_MEMCPY: {
		const msptiActivityMemcpy *r = (const void *)a;

		REC_INIT(&u.mc, REC_MEMCPY, r->isAsync ? REC_F_ASYNC : 0);
		u.mc.start = r->start;
		u.mc.end = r->end < r->start ? r->start : r->end;
		u.mc.correlation_id = r->correlationId;
		u.mc.bytes = r->bytes;
		u.mc.pid = c->pid;
		u.mc.tid = cap_tid(c, r->correlationId);
		u.mc.device = r->deviceId;
		u.mc.stream = r->streamId;
		u.mc.task_id = REC_NONE;
		u.mc.copy_kind = (uint32_t)r->copyKind <= 5 ?
		    (uint32_t)r->copyKind : 0;
		break;
	}
	case MSPTI_ACTIVITY_KIND_MEMSET: {
		const msptiActivityMemset *r = (const void *)a;

		REC_INIT(&u.ms, REC_MEMSET, r->isAsync ? REC_F_ASYNC : 0);
		u.ms.start = r->start;
		u.ms.end = r->end < r->start ? r->start : r->end;
		u.ms.correlation_id = r->correlationId;
		u.ms.bytes = r->bytes;
		u.ms.pid = c->pid;
		u.ms.tid = cap_tid(c, r->correlationId);
		u.ms.device = r->deviceId;
		u.ms.stream = r->streamId;
		u.ms.task_id = REC_NONE;
		u.ms.value = r->value;
		break;
	}
	case MSPTI_ACTIVITY_KIND_MEMORY: {
		const msptiActivityMemory *r = (const void *)a;

		REC_INIT(&u.mem, REC_MEMORY, 0);
		u.mem.start = r->start;
		u.mem.end = r->end < r->start ? r->start : r->end;
		u.mem.correlation_id = r->correlationId;
		u.mem.address = r->address;
		u.mem.bytes = r->bytes;
		u.mem.pid = r->processId ? r->processId : c->pid;
		u.mem.tid = cap_tid(c, r->correlationId);
		u.mem.device = r->deviceId;
		u.mem.stream = r->streamId;
		u.mem.op = (uint16_t)(r->memoryOperationType ? 1 : 0);
		u.mem.mem_kind = (uint16_t)(r->memoryKind ? 1 : 0);
		break;
	}
	case MSPTI_ACTIVITY_KIND_HCCL: {
		const msptiActivityHccl *r = (const void *)a;

		REC_INIT(&u.h, REC_HCCL, 0);
		u.h.start = r->start;
		u.h.end = r->end < r->start ? r->start : r->end;
		u.h.bandwidth = r->bandWidth == r->bandWidth ? r->bandWidth : 0;
		u.h.pid = c->pid;
		u.h.device = r->ds.deviceId;
		u.h.stream = r->ds.streamId;
		u.h.task_id = REC_NONE;
		u.h.name_id = cap_str(c, r->name);
		u.h.comm_name_id = cap_str(c, r->commName);
		break;
	}
	case MSPTI_ACTIVITY_KIND_COMMUNICATION: {
		const msptiActivityCommunication *r = (const void *)a;

		REC_INIT(&u.cm, REC_COMMUNICATION, 0);
		u.cm.start = r->start;
		u.cm.end = r->end < r->start ? r->start : r->end;
		u.cm.correlation_id = r->correlationId;
		u.cm.count = r->count;
		u.cm.pid = c->pid;
		u.cm.tid = cap_tid(c, r->correlationId);
		u.cm.device = r->ds.deviceId;
		u.cm.stream = r->ds.streamId;
		u.cm.task_id = REC_NONE;
		u.cm.name_id = cap_str(c, r->name);
		u.cm.comm_name_id = cap_str(c, r->commName);
		u.cm.alg_type_id = cap_str(c, r->algType);
		u.cm.data_type = (uint32_t)r->dataType;
		break;
	}
	case MSPTI_ACTIVITY_KIND_MARKER: {
		const msptiActivityMarker *r = (const void *)a;

		REC_INIT(&u.m, REC_MARKER, 0);
		u.m.timestamp = r->timestamp;
		u.m.id = r->id;
		u.m.flag = (uint32_t)r->flag;
		u.m.source_kind = (uint32_t)r->sourceKind;
		if (r->sourceKind == MSPTI_ACTIVITY_SOURCE_KIND_DEVICE) {
			u.m.pid = u.m.tid = REC_NONE;
			u.m.device = r->objectId.ds.deviceId;
			u.m.stream = r->objectId.ds.streamId;
		} else {
			u.m.pid = r->objectId.pt.processId;
			u.m.tid = r->objectId.pt.threadId;
			u.m.device = u.m.stream = REC_NONE;
		}
		u.m.name_id = cap_str(c, r->name);
		u.m.domain_id = cap_str(c, r->domain);
		break;
	}
	case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const msptiActivityExternalCorrelation *r = (const void *)a;

		REC_INIT(&u.x, REC_EXTERNAL_CORRELATION, 0);
		u.x.external_id = r->externalId;
		u.x.correlation_id = r->correlationId;
		u.x.external_kind = (uint32_t)r->externalKind;
		u.x.pid = c->pid;
		break;
	}
	default:
		return 0;
	}
	/* An invalid record (-EBADMSG) is dropped and counted. */
	if (trace_writer_add(c->w, &u) == -EBADMSG)
		c->lost++;
	return 0;
}

CAP_ATTR int
capture_add(struct capture *c, const msptiActivity *a)
{
	int rc;

	pthread_mutex_lock(&c->mtx);
	rc = cap_add_locked(c, a);
	pthread_mutex_unlock(&c->mtx);
	return rc;
}

CAP_ATTR void
capture_lost(struct capture *c, uint64_t n)
{
	struct rec_loss l;

	if (n == 0)
		return;
	pthread_mutex_lock(&c->mtx);
	REC_INIT(&l, REC_LOSS, 0);
	l.timestamp = cap_now();
	l.count = n;
	l.stage = LOSS_AGENT_BUFFER;
	l.pid = c->pid;
	trace_writer_add(c->w, &l);
	c->lost += n;
	pthread_mutex_unlock(&c->mtx);
}

CAP_ATTR int
capture_close(struct capture *c)
{
	struct trace_footer f;
	int rc;

	if (c == NULL)
		return 0;
	memset(&f, 0, sizeof(f));
	f.end_ns = cap_now();
	f.losses[LOSS_AGENT_BUFFER] = c->lost;
	rc = trace_writer_close(c->w, &f, NULL);
	if (close(c->fd) != 0 && rc == 0)
		rc = -errno;
	pthread_mutex_destroy(&c->mtx);
	free(c);
	return rc;
}

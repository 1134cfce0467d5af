/*
 * A session's trace output: the writer, with msptid's compression
 * settings, and the records the daemon itself adds (session events,
 * processes).
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"
#include "util.h"
#include "record.h"
#include "ring.h"
#include "trace.h"
#include "join.h"
#include "msptid.h"
#include "devcol.h"
#include "metrics.h"

/* Appends a daemon-made record to the session's output. */
void
session_sink_emit(struct session *s, const void *rec)
{
	int rc;

	if (s->w == NULL)
		return;
	if ((rc = trace_writer_add(s->w, rec)) != 0 && rc != -EBADMSG &&
	    s->error == NULL) {
		session_fail(s, rc, "writing the trace");
	}
}

/* session_sink_emit for a record known to be valid (ring_drain checked it). */
void
session_sink_emit_valid(struct session *s, const struct rec_hdr *rec)
{
	int rc;

	if (s->w == NULL)
		return;
	if ((rc = trace_writer_add_valid(s->w, rec)) != 0 && s->error == NULL)
		session_fail(s, rc, "writing the trace");
}

uint32_t
session_sink_intern(struct session *s, const char *str)
{
	uint32_t id = 0;

	if (s->w == NULL || str == NULL)
		return 0;
	if (trace_writer_intern(s->w, str, strlen(str), &id) != 0)
		return 0;
	return id;
}

void
session_sink_event(struct session *s, unsigned ev, uint32_t pid, const char *detail)
{
	struct rec_session r;

	REC_INIT(&r, REC_SESSION, ev);
	r.timestamp = util_realtime_ns();
	r.session_id = s->id;
	r.pid = pid;
	r.detail_id = session_sink_intern(s, detail);
	session_sink_emit(s, &r);
}

void
session_sink_process(struct session *s, const struct agent *a)
{
	struct rec_process r;

	REC_INIT(&r, REC_PROCESS, 0);
	r.start_ns = a->since_ns;
	r.pid = (uint32_t)a->cred.pid;
	r.uid = (uint32_t)a->cred.uid;
	r.rank = a->rank;
	r.local_rank = a->local_rank;
	r.world_size = a->world_size;
	r.job_id = session_sink_intern(s, a->job_id);
	r.exe_id = session_sink_intern(s, a->exe);
	r.cmdline_id = session_sink_intern(s, a->cmdline);
	session_sink_emit(s, &r);
}

/*
 * Opens a trace writer with msptid's compression: zstd level 1 without
 * zstd's per-frame XXH64 content checksum (~20 % of the compression time;
 * each chunk keeps its CRC-32C and the reader checks every record, see
 * doc/trace-format.md).  MSPTID_ZSTD_LEVEL (e.g. -1: zstd's fast levels)
 * and MSPTID_ZSTD_CHECKSUM=1 change that.
 */
static int
session_sink_writer_open(int fd, const struct trace_header *h,
    size_t queue, struct trace_writer **wp)
{
	const char *lv = getenv("MSPTID_ZSTD_LEVEL");
	const char *ck = getenv("MSPTID_ZSTD_CHECKSUM");
	bool sum = ck != NULL && strcmp(ck, "1") == 0;
	long level = 0;
	char *end = NULL;
	int rc;

	/* Async: the writer's thread does every write, the header too. */
	if ((rc = trace_writer_open_async(fd, h, 0, queue, wp)) != 0)
		return rc;
	if (lv != NULL && *lv != '\0')
		level = strtol(lv, &end, 10);
	if ((end != NULL && *end != '\0') || level < INT_MIN / 2 ||
	    level > INT_MAX / 2 || trace_writer_tune(*wp, (int)level, sum) != 0) {
		log_warnx("MSPTID_ZSTD_LEVEL %s: not a zstd level, using 1", lv);
		(void)trace_writer_tune(*wp, 0, sum);
	}
	return 0;
}

int
session_sink_open(struct session *s, int fd, size_t queue,
    struct trace_writer **wp)
{
	struct trace_header h;
	struct trace_kv kv[12];
	char host[256], dur[32], steps[32], buf[32], maxs[32], model[1024];
	char late[32];
	char kinds[256] = "";
	char *names[16];
	size_t nk, nkv = 0;

	memset(&h, 0, sizeof(h));
	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	nk = session_kind_names(s->kinds, names);
	for (size_t i = 0; i < nk; i++) {
		strncat(kinds, names[i], sizeof(kinds) - strlen(kinds) - 2);
		if (i + 1 < nk)
			strcat(kinds, ",");
	}
	snprintf(dur, sizeof(dur), "%llu", (unsigned long long)s->duration_ns);
	snprintf(steps, sizeof(steps), "%u", s->steps_max);
	snprintf(buf, sizeof(buf), "%zu", s->ring_size);
	snprintf(maxs, sizeof(maxs), "%llu", (unsigned long long)s->max_size);
	kv[nkv++] = (struct trace_kv){ "target", s->target_text };
	kv[nkv++] = (struct trace_kv){ "kinds", kinds };
	kv[nkv++] = (struct trace_kv){ "mode", s->ring_mode ? "ring" :
	    "stream" };
	kv[nkv++] = (struct trace_kv){ "duration_ns", dur };
	kv[nkv++] = (struct trace_kv){ "steps", steps };
	kv[nkv++] = (struct trace_kv){ "step_name", s->step_name };
	kv[nkv++] = (struct trace_kv){ "buffer_size", buf };
	kv[nkv++] = (struct trace_kv){ "max_size", maxs };
	/* msptid maps device time to host time; the model of each device
	 * at the start, and REC_CLOCK_SYNC records as it is refitted. */
	/* Device records trail the others by up to this much. */
	snprintf(late, sizeof(late), "%llu",
	    (unsigned long long)SESS_MAX_LATENESS_NS);
	kv[nkv++] = (struct trace_kv){ "max_lateness_ns", late };
	kv[nkv++] = (struct trace_kv){ "clock_sync", "daemon" };
	session_dev_clock_text(s, model, sizeof(model));
	kv[nkv++] = (struct trace_kv){ "clock_model", model };
	h.created_ns = util_realtime_ns();
	h.session_id = s->id;
	h.hostname = host;
	h.producer = "msptid " MSPTID_VERSION;
	h.config = kv;
	h.nconfig = nkv;
	return session_sink_writer_open(fd, &h, queue, wp);
}

/* Writes out the writer's partial chunk about once a second, so a killed
 * daemon leaves at most that much of the capture unwritten. */
int
session_sink_flush_tick(struct session *s)
{
	if (++s->ticks % (1000 / SESS_DRAIN_MS) != 0)
		return 0;
	session_dev_clock_records(s, s->devmask);
	if (s->records == s->flushed_records)
		return 0;
	s->flushed_records = s->records;
	return trace_writer_flush(s->w);
}

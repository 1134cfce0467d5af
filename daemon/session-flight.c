/*
 * Ring mode: each agent's flight recorder, a circular buffer of its latest
 * records (agent string namespace), written out as a trace on snapshot and
 * at the end.
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

/* Copies len bytes at offset at of sa's flight recorder, wrapping. */
static void
session_flight_read(const struct sess_agent *sa, size_t at, void *dst,
    size_t len)
{
	size_t first = sa->frcap - at < len ? sa->frcap - at : len;

	memcpy(dst, sa->fr + at, first);
	memcpy((uint8_t *)dst + first, sa->fr, len - first);
}

/* Ring mode: keeps the record, evicting the oldest ones to make room. */
void
session_flight_add(struct sess_agent *sa, const struct rec_hdr *h)
{
	size_t len = h->size, end, first;

	if (sa->fr == NULL || len > sa->frcap)
		return;
	while (sa->frlen + len > sa->frcap) {
		struct rec_hdr oh;

		session_flight_read(sa, sa->frstart, &oh, sizeof(oh));
		sa->frstart = (sa->frstart + oh.size) % sa->frcap;
		sa->frlen -= oh.size;
		sa->fr_evicted++;
	}
	end = (sa->frstart + sa->frlen) % sa->frcap;
	first = sa->frcap - end < len ? sa->frcap - end : len;
	memcpy(sa->fr + end, h, first);
	memcpy(sa->fr, (const uint8_t *)h + first, len - first);
	sa->frlen += len;
}

/*
 * Ring mode: every agent's flight recorder as a new trace on fd, in *wp,
 * open: the caller closes it (trace_writer_close_start, with the footer).
 * The writer is async with room for the whole recorder, so nothing here
 * waits for the disk.
 */
int
session_flight_write(struct session *s, int fd, uint64_t *nrec,
    struct trace_writer **wp)
{
	struct trace_writer *w, *saved = s->w;
	struct sess_agent *sa;
	uint64_t buf[REC_MAX_SIZE / 8];
	size_t room = 16u << 20;
	int rc;

	*nrec = 0;
	TAILQ_FOREACH(sa, &s->agents, entry)
		room += sa->frlen;
	if ((rc = session_sink_open(s, fd, room, &w)) != 0)
		return rc;
	s->w = w;
	session_sink_event(s, SESSION_EV_SNAPSHOT, 0, "snapshot");
	session_dev_clock_records(s, s->devmask);
	TAILQ_FOREACH(sa, &s->agents, entry) {
		size_t at = sa->frstart, left = sa->frlen;

		if (sa->agent != NULL)
			session_sink_process(s, sa->agent);
		memset(sa->strmap, 0, (SESS_ALLSTR + 1) * sizeof(*sa->strmap));
		while (left >= sizeof(struct rec_hdr) && sa->fr != NULL) {
			struct rec_hdr h;

			session_flight_read(sa, at, &h, sizeof(h));
			if (h.size < sizeof(h) || h.size > left)
				break;
			session_flight_read(sa, at, buf, h.size);
			session_drain_remap(s, sa, (struct rec_hdr *)buf);
			session_sink_emit(s, buf);
			(*nrec)++;
			at = (at + h.size) % sa->frcap;
			left -= h.size;
		}
		memset(sa->strmap, 0, (SESS_ALLSTR + 1) * sizeof(*sa->strmap));
	}
	s->w = saved;
	*wp = w;
	return 0;
}

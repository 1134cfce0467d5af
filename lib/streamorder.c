/*
 * Tasks of one device stream never overlap in host time (streamorder.h).
 */
#include "config.h"

#include <string.h>

#include "streamorder.h"

void
streamorder_init(struct streamorder *so)
{
	memset(so, 0, sizeof(*so));
}

/* The slot of (pid, stream), or the one to take for it (*found false). */
static struct streamorder_slot *
streamorder_find(struct streamorder *so, uint32_t pid, uint32_t stream,
    bool *found)
{
	uint32_t h = (pid * 0x9e3779b1u) ^ (stream * 0x85ebca6bu);
	struct streamorder_slot *e, *take = NULL;

	h ^= h >> 15;
	for (uint32_t i = 0; i < STREAMORDER_PROBES; i++) {
		e = &so->slot[(h + i) & (STREAMORDER_SLOTS - 1)];
		if (e->used != 0 && e->pid == pid && e->stream == stream) {
			*found = true;
			return e;
		}
		if (take == NULL || (take->used != 0 && e->used < take->used))
			take = e;
	}
	*found = false;
	return take;
}

void
streamorder_apply(struct streamorder *so, uint32_t pid, uint32_t stream,
    uint64_t dev_start, uint64_t dev_end, uint64_t *start, uint64_t *end)
{
	struct streamorder_slot *e;
	bool found;

	if (*end < *start)
		*end = *start;
	e = streamorder_find(so, pid, stream, &found);
	if (found && dev_start >= e->dev_end && *start < e->end) {
		/* Keep the device's order and the task's duration. */
		*end += e->end - *start;
		*start = e->end;
	}
	if (!found || dev_end >= e->dev_end) {
		e->pid = pid;
		e->stream = stream;
		e->dev_end = dev_end;
		e->end = *end;
	}
	e->used = ++so->clock;
}

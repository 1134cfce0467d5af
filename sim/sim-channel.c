/*
 * sim-channel.c - reader side of the profiling channel and metrics page.
 *
 * This is the reference implementation of the protocol described in
 * npusim/npusim.h; msptid may link it or reimplement it.  A reader never
 * writes anything but enable_count, so a slow or dead reader cannot stall
 * the device.
 */
#include <sys/mman.h>

#include <errno.h>
#include <string.h>

#include "sim.h"

SIM_EXPORT int
npusim_channel_open(int32_t dev, struct npusim_channel_reader *r)
{
	struct npusim_channel_header	*h;
	size_t				 size;

	if (r == NULL)
		return (-EINVAL);
	memset(r, 0, sizeof *r);
	sim_env_load();
	if (dev < 0 || dev >= sim_cfg.ndevices)
		return (-EINVAL);
	if ((h = sim_shm_channel_attach(dev, &size)) == NULL)
		return (errno == 0 ? -EPROTO : -errno);
	r->device = dev;
	r->base = h;
	r->size = size;
	r->hdr = h;
	r->records = (struct npusim_record *)((char *)h + h->header_size);
	__atomic_fetch_add(&h->enable_count, 1, __ATOMIC_ACQ_REL);
	r->enabled = 1;
	r->cursor = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
	return (0);
}

SIM_EXPORT int
npusim_channel_read(struct npusim_channel_reader *r,
    struct npusim_record *out, size_t max, uint64_t *lost)
{
	struct npusim_channel_header	*h;
	struct npusim_record		*slot;
	uint64_t			 head, cap, s1, s2, lost0;
	size_t				 n = 0;

	if (r == NULL || r->hdr == NULL || (out == NULL && max > 0))
		return (-EINVAL);
	h = r->hdr;
	cap = h->capacity;
	lost0 = r->lost;
	head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
	while (n < max && r->cursor < head) {
		if (head - r->cursor > cap) {
			/* Lapped: everything older than head - cap is gone. */
			r->lost += head - cap - r->cursor;
			r->cursor = head - cap;
			r->stuck_since = 0;
		}
		slot = &r->records[r->cursor & (cap - 1)];
		s1 = __atomic_load_n(&slot->stamp, __ATOMIC_ACQUIRE);
		if (s1 == r->cursor + 1) {
			memcpy(&out[n], slot, sizeof *slot);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			s2 = __atomic_load_n(&slot->stamp, __ATOMIC_RELAXED);
			if (s2 == s1)
				n++;
			else
				r->lost++;
			r->cursor++;
			r->stuck_since = 0;
		} else if (s1 > r->cursor + 1) {
			/* A writer reused the slot before we got there. */
			r->lost++;
			r->cursor++;
			r->stuck_since = 0;
		} else {
			/*
			 * Reserved but not published.  A live writer finishes
			 * in microseconds; one that died never does, so give
			 * up on the slot once it is far behind head.
			 */
			if (head - r->cursor > cap / 2) {
				r->lost++;
				r->cursor++;
				continue;
			}
			break;
		}
		if (n < max && r->cursor == head)
			head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
	}
	if (lost != NULL)
		*lost = r->lost - lost0;
	return ((int)n);
}

SIM_EXPORT int
npusim_channel_clock(struct npusim_channel_reader *r,
    struct npusim_clock_sample *out)
{
	struct npusim_channel_header	*h;
	uint32_t			 s1, s2;
	int				 i;

	if (r == NULL || r->hdr == NULL || out == NULL)
		return (-EINVAL);
	h = r->hdr;
	for (i = 0; i < 1000; i++) {
		s1 = __atomic_load_n(&h->clock_seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		out->host_realtime_ns = __atomic_load_n(
		    &h->clock.host_realtime_ns, __ATOMIC_RELAXED);
		out->device_ns = __atomic_load_n(&h->clock.device_ns,
		    __ATOMIC_RELAXED);
		out->host_monotonic_ns = __atomic_load_n(
		    &h->clock.host_monotonic_ns, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&h->clock_seq, __ATOMIC_RELAXED);
		if (s1 == s2)
			return (out->device_ns == 0 ? -EAGAIN : 0);
	}
	return (-EAGAIN);
}

SIM_EXPORT void
npusim_channel_close(struct npusim_channel_reader *r)
{
	if (r == NULL || r->hdr == NULL)
		return;
	if (r->enabled)
		__atomic_fetch_sub(&r->hdr->enable_count, 1, __ATOMIC_ACQ_REL);
	munmap(r->base, r->size);
	memset(r, 0, sizeof *r);
}

static struct npusim_metrics_page	*sim_channel_metrics[SIM_MAX_DEVICES];

SIM_EXPORT int
npusim_metrics_read(int32_t dev, struct npusim_metrics_snapshot *out)
{
	struct npusim_metrics_page	*m, *old = NULL;
	uint32_t			 s1, s2;
	int				 i;

	sim_env_load();
	if (out == NULL || dev < 0 || dev >= sim_cfg.ndevices)
		return (-EINVAL);
	m = __atomic_load_n(&sim_channel_metrics[dev], __ATOMIC_ACQUIRE);
	if (m == NULL) {
		if ((m = sim_shm_metrics_attach(dev)) == NULL)
			return (-EINVAL);
		/* Another thread may have won; keep one mapping. */
		if (!__atomic_compare_exchange_n(&sim_channel_metrics[dev],
		    &old, m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			munmap(m, sizeof *m);
			m = old;
		}
	}
	for (i = 0; i < 1000; i++) {
		s1 = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		memcpy(out, &m->snap, sizeof *out);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&m->seq, __ATOMIC_RELAXED);
		if (s1 == s2)
			return (0);
	}
	return (-EAGAIN);
}

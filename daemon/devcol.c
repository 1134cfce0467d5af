/*
 * Device channel reader.  The protocol is the one documented in
 * npusim/npusim.h and doc/npusim.md, implemented here rather than linked
 * from libnpusim so that the daemon (a) never creates a device's shared
 * memory objects (as root they would be unusable to the application) and
 * (b) caches the layout it validated at open: a writer that scribbles over
 * the header later can cost records, never an out-of-bounds read.
 *
 * Each open channel has its own cursor; everything runs on the event loop.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npusim/npusim.h>

#include "log.h"
#include "util.h"
#include "streamorder.h"
#include "devcol.h"

#define DEVCOL_BATCH		256
#define DEVCOL_RETRY_NS		1000000000ull	/* reopen a missing channel */
#define DEVCOL_BAD_RETRY_NS	5000000000ull	/* and an invalid one */

struct devcol_chan {
	uint32_t			 users;
	bool				 open;
	void				*base;
	size_t				 size;
	struct npusim_channel_header	*hdr;
	struct npusim_record		*rec;
	uint64_t			 cap;		/* validated at open */
	uint64_t			 cursor;
	struct clocksync		 cs;
	struct devcol_stats		 st;
	uint64_t			 retry_at;	/* monotonic ns */
	bool				 warned;
	/* A stream's tasks never overlap in host time across refits. */
	struct streamorder		 order;
};

struct devcol {
	struct event_base	*base;
	struct event		*clock_ev;
	unsigned		 nused;		/* devices with users > 0 */
	devcol_filter_cb	 filter;
	void			*filter_arg;
	unsigned		 fill;		/* devcol_last_fill */
	struct devcol_chan	 dev[DEVCOL_MAX_DEVICES];
	struct npusim_record	 batch[DEVCOL_BATCH];
};

static void devcol_clock_cb(evutil_socket_t, short, void *);

int
devcol_shm_name(char *buf, size_t len, uint32_t device, const char *what)
{
	const char *prefix = getenv("NPUSIM_SHM_PREFIX");
	int n;

	if (prefix == NULL || *prefix == '\0')
		prefix = "npusim";
	if (strchr(prefix, '/') != NULL || device >= DEVCOL_MAX_DEVICES)
		return -EINVAL;
	n = snprintf(buf, len, "/%s-dev%u-%s", prefix, device, what);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

struct devcol *
devcol_new(struct event_base *base)
{
	struct devcol *dc = calloc(1, sizeof(*dc));

	if (dc == NULL)
		return NULL;
	dc->base = base;
	dc->clock_ev = event_new(base, -1, EV_PERSIST, devcol_clock_cb, dc);
	if (dc->clock_ev == NULL) {
		free(dc);
		return NULL;
	}
	return dc;
}

static void
devcol_close(struct devcol_chan *c)
{
	if (!c->open)
		return;
	__atomic_fetch_sub(&c->hdr->enable_count, 1, __ATOMIC_ACQ_REL);
	munmap(c->base, c->size);
	c->open = false;
	c->base = NULL;
	c->hdr = NULL;
	c->rec = NULL;
}

void
devcol_free(struct devcol *dc)
{
	if (dc == NULL)
		return;
	for (size_t i = 0; i < DEVCOL_MAX_DEVICES; i++)
		devcol_close(&dc->dev[i]);
	event_free(dc->clock_ev);
	free(dc);
}

/* Checks a mapped header against what this build understands. */
static bool
devcol_header_ok(const struct npusim_channel_header *h, size_t size,
    uint32_t device)
{
	uint64_t cap;

	if (size < sizeof(*h) ||
	    __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != NPUSIM_CHANNEL_MAGIC)
		return false;
	cap = h->capacity;
	return h->version == NPUSIM_SHM_VERSION &&
	    h->header_size == sizeof(*h) &&
	    h->record_size == sizeof(struct npusim_record) &&
	    cap != 0 && (cap & (cap - 1)) == 0 && cap <= (1u << 24) &&
	    size >= sizeof(*h) + cap * sizeof(struct npusim_record) &&
	    h->device == (int32_t)device;
}

/*
 * Maps device's channel if it exists and is valid, enables recording and
 * starts at the current head.  A missing object is normal (no process has
 * used the device yet); an invalid one is counted and logged once.
 */
static int
devcol_open(uint32_t device, struct devcol_chan *c)
{
	char name[NPUSIM_SHM_NAME_MAX];
	struct stat st;
	void *p;
	int fd, rc;

	if ((rc = devcol_shm_name(name, sizeof(name), device, "chan")) != 0)
		return rc;
	if ((fd = shm_open(name, O_RDWR | O_CLOEXEC, 0)) < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(*c->hdr) ||
	    (uint64_t)st.st_size > ((uint64_t)1 << 34)) {
		close(fd);
		return -EPROTO;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	if (!devcol_header_ok(p, (size_t)st.st_size, device)) {
		munmap(p, (size_t)st.st_size);
		return -EPROTO;
	}
	c->base = p;
	c->size = (size_t)st.st_size;
	c->hdr = p;
	c->cap = c->hdr->capacity;
	c->rec = (struct npusim_record *)((char *)p + sizeof(*c->hdr));
	__atomic_fetch_add(&c->hdr->enable_count, 1, __ATOMIC_ACQ_REL);
	c->cursor = __atomic_load_n(&c->hdr->head, __ATOMIC_ACQUIRE);
	c->open = true;
	return 0;
}

/* Opens a used channel that is not open yet, at most once per retry period. */
static void
devcol_try_open(uint32_t device, struct devcol_chan *c, uint64_t now)
{
	int rc;

	if (c->open || c->users == 0 || now < c->retry_at)
		return;
	rc = devcol_open(device, c);
	if (rc == 0) {
		uint32_t opens = (uint32_t)c->st.open_failures;

		memset(&c->st, 0, sizeof(c->st));
		c->st.open_failures = opens;
		clocksync_init(&c->cs);
		c->warned = false;
		log_debug("device %u: channel open (capacity %llu)", device,
		    (unsigned long long)c->cap);
		return;
	}
	if (rc == -ENOENT) {
		c->retry_at = now + DEVCOL_RETRY_NS;
		return;
	}
	c->st.open_failures++;
	c->retry_at = now + DEVCOL_BAD_RETRY_NS;
	if (!c->warned)
		log_warnx("device %u: cannot use profiling channel: %s", device,
		    rc == -EPROTO ? "invalid layout" : strerror(-rc));
	c->warned = true;
}

/* Adds the header's latest clock sample (seqlock read) to the fit. */
static void
devcol_clock_sample(struct devcol_chan *c)
{
	struct npusim_channel_header *h = c->hdr;
	uint64_t host, dev;
	uint32_t s1, s2, br;

	for (int i = 0; i < 100; i++) {
		s1 = __atomic_load_n(&h->clock_seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		host = __atomic_load_n(&h->clock.host_realtime_ns,
		    __ATOMIC_RELAXED);
		dev = __atomic_load_n(&h->clock.device_ns, __ATOMIC_RELAXED);
		br = __atomic_load_n(&h->clock_bracket_ns, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&h->clock_seq, __ATOMIC_RELAXED);
		if (s1 == s2) {
			clocksync_add(&c->cs, host, dev, br);
			return;
		}
	}
}

static void
devcol_timer_update(struct devcol *dc)
{
	struct timeval tv = { 0, DEVCOL_CLOCK_MS * 1000 };

	if (dc->nused > 0 && !event_pending(dc->clock_ev, EV_TIMEOUT, NULL))
		event_add(dc->clock_ev, &tv);
	else if (dc->nused == 0)
		event_del(dc->clock_ev);
}

static void
devcol_clock_cb(evutil_socket_t fd, short what, void *arg)
{
	struct devcol *dc = arg;
	uint64_t now = util_monotonic_ns();

	(void)fd;
	(void)what;
	for (uint32_t i = 0; i < DEVCOL_MAX_DEVICES; i++) {
		struct devcol_chan *c = &dc->dev[i];

		devcol_try_open(i, c, now);
		if (c->open)
			devcol_clock_sample(c);
	}
}

int
devcol_use(struct devcol *dc, uint32_t device)
{
	struct devcol_chan *c;

	if (device >= DEVCOL_MAX_DEVICES)
		return -EINVAL;
	c = &dc->dev[device];
	if (c->users++ == 0) {
		dc->nused++;
		c->retry_at = 0;
		devcol_try_open(device, c, util_monotonic_ns());
		if (c->open)
			devcol_clock_sample(c);
		devcol_timer_update(dc);
	}
	return 0;
}

void
devcol_unuse(struct devcol *dc, uint32_t device)
{
	struct devcol_chan *c;

	if (device >= DEVCOL_MAX_DEVICES || dc->dev[device].users == 0)
		return;
	c = &dc->dev[device];
	if (--c->users == 0) {
		devcol_close(c);
		dc->nused--;
		devcol_timer_update(dc);
	}
}

void
devcol_set_filter(struct devcol *dc, devcol_filter_cb cb, void *arg)
{
	dc->filter = cb;
	dc->filter_arg = arg;
}

/*
 * Copies up to max published records from c's ring (the documented reader
 * protocol, with the capacity cached at open).  Adds losses to c->st.lost.
 */
static size_t
devcol_read(struct devcol_chan *c, struct npusim_record *out, size_t max)
{
	struct npusim_record *slot;
	uint64_t head, s1, s2, cap = c->cap;
	size_t n = 0;

	head = __atomic_load_n(&c->hdr->head, __ATOMIC_ACQUIRE);
	while (n < max && c->cursor < head) {
		if (head - c->cursor > cap) {
			c->st.lost += head - cap - c->cursor;
			c->cursor = head - cap;
		}
		slot = &c->rec[c->cursor & (cap - 1)];
		s1 = __atomic_load_n(&slot->stamp, __ATOMIC_ACQUIRE);
		if (s1 == c->cursor + 1) {
			memcpy(&out[n], slot, sizeof(*slot));
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			s2 = __atomic_load_n(&slot->stamp, __ATOMIC_RELAXED);
			if (s2 == s1)
				n++;
			else
				c->st.lost++;
			c->cursor++;
		} else if (s1 > c->cursor + 1) {
			c->st.lost++;		/* overwritten before we got there */
			c->cursor++;
		} else if (head - c->cursor > cap / 2) {
			c->st.lost++;		/* writer died mid-write */
			c->cursor++;
		} else
			break;			/* not published yet */
		if (c->cursor == head)
			head = __atomic_load_n(&c->hdr->head, __ATOMIC_ACQUIRE);
	}
	return n;
}

/* Validates one record and converts it; false for garbage. */
static bool
devcol_convert(struct devcol_chan *c, uint32_t device,
    const struct npusim_record *r, struct devcol_task *t)
{

	if (r->kind < NPUSIM_TASK_KERNEL || r->kind > NPUSIM_TASK_EVENT ||
	    r->device != (int32_t)device || r->end_ns < r->start_ns ||
	    r->pid <= 0 || (r->kind == NPUSIM_TASK_KERNEL &&
	    r->kernel_type > NPUSIM_KERNEL_AI_CPU))
		return false;
	memset(t, 0, sizeof(*t));
	t->dev_start = r->start_ns;
	t->dev_end = r->end_ns;
	t->start = clock_model_to_host(&c->cs.model, r->start_ns);
	t->end = clock_model_to_host(&c->cs.model, r->end_ns);
	streamorder_apply(&c->order, (uint32_t)r->pid, r->stream_id,
	    r->start_ns, r->end_ns, &t->start, &t->end);
	t->device = device;
	t->stream = r->stream_id;
	t->task_id = r->task_id;
	t->pid = (uint32_t)r->pid;
	t->tid = (uint32_t)r->tid;
	t->kind = r->kind;
	t->kernel_type = r->kernel_type;
	t->status = r->status;
	t->tag_id = r->tag_id;
	t->block_dim = r->block_dim;
	t->bytes = r->bytes;
	t->flops = r->flops;
	t->aicore_cycles = r->aicore_cycles;
	t->mte_bytes = r->mte_bytes;
	t->memcpy_kind = r->memcpy_kind;
	t->data_type = r->data_type;
	t->reduce_op = r->reduce_op;
	t->algorithm = r->algorithm;
	t->rank = r->rank;
	t->rank_size = r->rank_size;
	t->peer = r->peer;
	t->comm_seq = r->comm_seq;
	t->count = r->count;
	t->wait_ns = r->wait_ns;
	t->marker_id = r->marker_id;
	t->model_id = r->model_id;
	memcpy(t->name, r->name, sizeof(t->name) - 1);
	memcpy(t->comm_name, r->comm_name, sizeof(t->comm_name) - 1);
	return true;
}

size_t
devcol_poll(struct devcol *dc, devcol_task_cb cb, void *arg)
{
	uint64_t now = util_monotonic_ns();
	struct devcol_task t;
	size_t total = 0, n, i, budget;

	dc->fill = 0;
	for (uint32_t dev = 0; dev < DEVCOL_MAX_DEVICES; dev++) {
		struct devcol_chan *c = &dc->dev[dev];
		uint64_t backlog;

		devcol_try_open(dev, c, now);
		if (!c->open)
			continue;
		devcol_clock_sample(c);
		backlog = __atomic_load_n(&c->hdr->head, __ATOMIC_ACQUIRE) -
		    c->cursor;
		if (backlog > c->cap)
			backlog = c->cap;
		if (backlog * 1000 / c->cap > dc->fill)
			dc->fill = (unsigned)(backlog * 1000 / c->cap);
		/* One lap at most per call, so a flood cannot stall the loop. */
		for (budget = c->cap; budget > 0; budget -= n) {
			n = devcol_read(c, dc->batch, budget < DEVCOL_BATCH ?
			    budget : DEVCOL_BATCH);
			for (i = 0; i < n; i++) {
				if (!devcol_convert(c, dev, &dc->batch[i], &t)) {
					c->st.bad++;
					continue;
				}
				if (dc->filter != NULL &&
				    !dc->filter(dev, t.pid, dc->filter_arg)) {
					c->st.filtered++;
					continue;
				}
				c->st.tasks++;
				total++;
				if (cb != NULL)
					cb(&t, arg);
			}
			if (n < DEVCOL_BATCH)
				break;
		}
	}
	return total;
}

unsigned
devcol_last_fill(const struct devcol *dc)
{
	return dc->fill;
}

bool
devcol_in_use(const struct devcol *dc)
{
	return dc->nused > 0;
}

uint64_t
devcol_lost(struct devcol *dc, uint32_t device)
{
	return device < DEVCOL_MAX_DEVICES ? dc->dev[device].st.lost : 0;
}

int
devcol_stats(struct devcol *dc, uint32_t device, struct devcol_stats *out)
{
	struct devcol_chan *c;

	if (device >= DEVCOL_MAX_DEVICES)
		return -EINVAL;
	c = &dc->dev[device];
	*out = c->st;
	out->open = c->open;
	out->users = c->users;
	out->clock_samples = c->cs.model.samples;
	return 0;
}

int
devcol_clock_model(struct devcol *dc, uint32_t device, struct clock_model *out)
{
	struct devcol_chan *c;

	if (device >= DEVCOL_MAX_DEVICES)
		return -EINVAL;
	c = &dc->dev[device];
	if (c->open)
		devcol_clock_sample(c);
	if (!clocksync_ready(&c->cs))
		return -EAGAIN;
	*out = c->cs.model;
	return 0;
}

uint64_t
devcol_to_host(struct devcol *dc, uint32_t device, uint64_t device_ns)
{
	if (device >= DEVCOL_MAX_DEVICES)
		return device_ns;
	return clock_model_to_host(&dc->dev[device].cs.model, device_ns);
}

/*
 * Metric sampling.  Entities are devices (a fixed array) and pids (a small
 * array searched linearly: at most METRICS_MAX_PIDS).  Each entity has a
 * ring of METRICS_HISTORY_LEN points per track, allocated on first use.
 * A point is kept in history at most once per METRICS_SLOW_MS; faster
 * ticks (while a session subscribes) only feed subscribers.  Missing values
 * (cpu % before a second /proc reading) are NAN and skipped by summaries.
 *
 * The device metrics page is mapped read-only and validated here rather
 * than through npusim_metrics_read, which would create the page (as root,
 * unusable by the application) when no process has used the device yet.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npusim/npusim.h>

#include "log.h"
#include "util.h"
#include "msptid.h"
#include "devcol.h"
#include "metrics.h"

#define METRICS_DEFAULT_WINDOW_NS	60000000000ull
#define METRICS_EXE_LEN			64

struct ment {
	uint32_t	 id;		/* device or pid */
	unsigned	 ntracks;
	uint32_t	 refs;		/* session references */
	bool		 reg;		/* the registry wants it */
	uint64_t	 devmask;	/* pid: devices its agent uses */
	uint64_t	*ts;		/* [METRICS_HISTORY_LEN] */
	double		*v;		/* [ntracks][METRICS_HISTORY_LEN] */
	unsigned	 n, next;
	uint64_t	 last_hist;	/* realtime of the newest point */
	uint64_t	 last_seen;	/* realtime of the last data */
	/* pid */
	uint64_t	 prev_ticks;
	uint64_t	 prev_mono;
	uint64_t	 hist_ticks;	/* at the newest history point */
	uint64_t	 hist_mono;
	bool		 have_prev;
	char		 exe[METRICS_EXE_LEN];
	/* device */
	struct npusim_metrics_page *page;
};

struct metrics_sub {
	TAILQ_ENTRY(metrics_sub) entry;
	struct metrics		*m;
	metrics_counter_cb	 cb;
	void			*arg;
};

struct metrics {
	struct event_base	*base;
	struct event		*ev;
	unsigned		 period_ms;	/* 0: timer off */
	struct ment		*dev[METRICS_MAX_DEVICES];
	struct ment		*pid[METRICS_MAX_PIDS];
	size_t			 npid;
	TAILQ_HEAD(, metrics_sub) subs;
	long			 clk_tck;
	long			 page_size;
};

static const char *dev_names[MT_DEV_NTRACKS] = {
	"npu.util", "npu.mem.used", "npu.mem.total", "npu.power", "npu.temp",
};
static const char *dev_units[MT_DEV_NTRACKS] = {
	"%", "bytes", "bytes", "W", "C",
};
static const char *pid_names[MT_PID_NTRACKS] = { "cpu.percent", "mem.rss" };
static const char *pid_units[MT_PID_NTRACKS] = { "%", "bytes" };

const char *
metrics_dev_track_name(enum metrics_dev_track t)
{
	return (unsigned)t < MT_DEV_NTRACKS ? dev_names[t] : "?";
}

const char *
metrics_dev_track_unit(enum metrics_dev_track t)
{
	return (unsigned)t < MT_DEV_NTRACKS ? dev_units[t] : "";
}

const char *
metrics_pid_track_name(enum metrics_pid_track t)
{
	return (unsigned)t < MT_PID_NTRACKS ? pid_names[t] : "?";
}

const char *
metrics_pid_track_unit(enum metrics_pid_track t)
{
	return (unsigned)t < MT_PID_NTRACKS ? pid_units[t] : "";
}

static void metrics_tick_cb(evutil_socket_t, short, void *);

struct metrics *
metrics_new(struct event_base *base)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->base = base;
	TAILQ_INIT(&m->subs);
	m->clk_tck = sysconf(_SC_CLK_TCK);
	if (m->clk_tck <= 0)
		m->clk_tck = 100;
	m->page_size = sysconf(_SC_PAGESIZE);
	if (m->page_size <= 0)
		m->page_size = 4096;
	if ((m->ev = event_new(base, -1, EV_PERSIST, metrics_tick_cb, m)) ==
	    NULL) {
		free(m);
		return NULL;
	}
	return m;
}

static void
ment_free(struct ment *e)
{
	if (e == NULL)
		return;
	if (e->page != NULL)
		munmap(e->page, sizeof(*e->page));
	free(e->ts);
	free(e->v);
	free(e);
}

static struct ment *
ment_new(uint32_t id, unsigned ntracks)
{
	struct ment *e = calloc(1, sizeof(*e));

	if (e == NULL)
		return NULL;
	e->id = id;
	e->ntracks = ntracks;
	e->ts = calloc(METRICS_HISTORY_LEN, sizeof(*e->ts));
	e->v = calloc((size_t)ntracks * METRICS_HISTORY_LEN, sizeof(*e->v));
	if (e->ts == NULL || e->v == NULL) {
		ment_free(e);
		return NULL;
	}
	return e;
}

void
metrics_free(struct metrics *m)
{
	struct metrics_sub *s;

	if (m == NULL)
		return;
	while ((s = TAILQ_FIRST(&m->subs)) != NULL) {
		TAILQ_REMOVE(&m->subs, s, entry);
		free(s);
	}
	for (size_t i = 0; i < METRICS_MAX_DEVICES; i++)
		ment_free(m->dev[i]);
	for (size_t i = 0; i < m->npid; i++)
		ment_free(m->pid[i]);
	event_free(m->ev);
	free(m);
}

static bool
ment_active(const struct ment *e)
{
	return e != NULL && (e->refs > 0 || e->reg);
}

static size_t
metrics_pid_index(struct metrics *m, uint32_t pid)
{
	for (size_t i = 0; i < m->npid; i++)
		if (m->pid[i]->id == pid)
			return i;
	return SIZE_MAX;
}

/* Frees inactive entities whose history is older than the window (and,
 * when out of room, the inactive one seen longest ago). */
static void
metrics_gc(struct metrics *m, uint64_t now, bool need_room)
{
	uint64_t horizon = (uint64_t)METRICS_HISTORY_S * 1000000000ull;
	size_t i, oldest = SIZE_MAX;

	for (i = 0; i < METRICS_MAX_DEVICES; i++) {
		struct ment *e = m->dev[i];

		if (e != NULL && !ment_active(e) && now - e->last_seen > horizon) {
			ment_free(e);
			m->dev[i] = NULL;
		}
	}
	for (i = 0; i < m->npid;) {
		struct ment *e = m->pid[i];

		if (!ment_active(e) && now - e->last_seen > horizon) {
			ment_free(e);
			m->pid[i] = m->pid[--m->npid];
			continue;
		}
		if (!ment_active(e) && (oldest == SIZE_MAX ||
		    e->last_seen < m->pid[oldest]->last_seen))
			oldest = i;
		i++;
	}
	if (need_room && m->npid >= METRICS_MAX_PIDS && oldest != SIZE_MAX) {
		ment_free(m->pid[oldest]);
		m->pid[oldest] = m->pid[--m->npid];
	}
}

static struct ment *
metrics_pid_get(struct metrics *m, uint32_t pid)
{
	size_t i = metrics_pid_index(m, pid);
	struct ment *e;

	if (i != SIZE_MAX)
		return m->pid[i];
	if (m->npid >= METRICS_MAX_PIDS)
		metrics_gc(m, util_realtime_ns(), true);
	if (m->npid >= METRICS_MAX_PIDS ||
	    (e = ment_new(pid, MT_PID_NTRACKS)) == NULL)
		return NULL;
	e->last_seen = util_realtime_ns();
	m->pid[m->npid++] = e;
	return e;
}

static struct ment *
metrics_dev_get(struct metrics *m, uint32_t dev)
{
	if (dev >= METRICS_MAX_DEVICES)
		return NULL;
	if (m->dev[dev] == NULL) {
		m->dev[dev] = ment_new(dev, MT_DEV_NTRACKS);
		if (m->dev[dev] != NULL)
			m->dev[dev]->last_seen = util_realtime_ns();
	}
	return m->dev[dev];
}

/* Arms the timer iff something is sampled, at the period subscribers need. */
static void
metrics_timer_update(struct metrics *m)
{
	bool any = false;
	unsigned period;
	struct timeval tv;

	for (size_t i = 0; i < METRICS_MAX_DEVICES && !any; i++)
		any = ment_active(m->dev[i]);
	for (size_t i = 0; i < m->npid && !any; i++)
		any = ment_active(m->pid[i]);
	period = !any ? 0 : TAILQ_EMPTY(&m->subs) ? METRICS_SLOW_MS :
	    METRICS_FAST_MS;
	if (period == m->period_ms)
		return;
	event_del(m->ev);
	m->period_ms = period;
	if (period == 0)
		return;
	tv.tv_sec = period / 1000;
	tv.tv_usec = (period % 1000) * 1000;
	event_add(m->ev, &tv);
	/* A first point right away, so the history is never a period late. */
	metrics_sample_now(m);
}

bool
metrics_timer_active(const struct metrics *m)
{
	return m->period_ms != 0;
}

int
metrics_use_device(struct metrics *m, uint32_t device)
{
	struct ment *e = metrics_dev_get(m, device);

	if (e == NULL)
		return device >= METRICS_MAX_DEVICES ? -EINVAL : -ENOMEM;
	e->refs++;
	metrics_timer_update(m);
	return 0;
}

void
metrics_unuse_device(struct metrics *m, uint32_t device)
{
	if (device >= METRICS_MAX_DEVICES || m->dev[device] == NULL ||
	    m->dev[device]->refs == 0)
		return;
	m->dev[device]->refs--;
	metrics_timer_update(m);
}

int
metrics_watch_pid(struct metrics *m, uint32_t pid)
{
	struct ment *e;

	if (pid == 0)
		return -EINVAL;
	if ((e = metrics_pid_get(m, pid)) == NULL)
		return -ENOMEM;
	e->refs++;
	metrics_timer_update(m);
	return 0;
}

void
metrics_unwatch_pid(struct metrics *m, uint32_t pid)
{
	size_t i = metrics_pid_index(m, pid);

	if (i == SIZE_MAX || m->pid[i]->refs == 0)
		return;
	m->pid[i]->refs--;
	metrics_timer_update(m);
}

void
metrics_sync_agents(struct metrics *m, struct daemon *d)
{
	struct agent *a;
	struct ment *e;
	const char *base;

	if (m == NULL)
		return;
	for (size_t i = 0; i < METRICS_MAX_DEVICES; i++)
		if (m->dev[i] != NULL)
			m->dev[i]->reg = false;
	for (size_t i = 0; i < m->npid; i++) {
		m->pid[i]->reg = false;
		m->pid[i]->devmask = 0;
	}
	TAILQ_FOREACH(a, &d->agents, entry) {
		uint64_t mask = 0;

		if (a->ndevices == 0)
			continue;
		for (size_t i = 0; i < a->ndevices; i++) {
			if (a->devices[i] >= METRICS_MAX_DEVICES)
				continue;
			mask |= 1ull << a->devices[i];
			if ((e = metrics_dev_get(m, a->devices[i])) != NULL)
				e->reg = true;
		}
		if (mask == 0 || (e = metrics_pid_get(m, (uint32_t)a->cred.pid))
		    == NULL)
			continue;
		e->reg = true;
		e->devmask |= mask;
		base = a->exe != NULL ? strrchr(a->exe, '/') : NULL;
		snprintf(e->exe, sizeof(e->exe), "%s",
		    base != NULL ? base + 1 : a->exe != NULL ? a->exe : "");
	}
	metrics_timer_update(m);
}

struct metrics_sub *
metrics_subscribe(struct metrics *m, metrics_counter_cb cb, void *arg)
{
	struct metrics_sub *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->m = m;
	s->cb = cb;
	s->arg = arg;
	TAILQ_INSERT_TAIL(&m->subs, s, entry);
	metrics_timer_update(m);
	return s;
}

void
metrics_unsubscribe(struct metrics_sub *s)
{
	struct metrics *m;

	if (s == NULL)
		return;
	m = s->m;
	TAILQ_REMOVE(&m->subs, s, entry);
	free(s);
	metrics_timer_update(m);
}

/* Delivers one sample to every subscriber. */
static void
metrics_emit(struct metrics *m, const char *track, const char *unit,
    uint32_t pid, uint32_t dev, uint64_t ts, double v)
{
	struct metrics_counter c = { track, unit, pid, dev, ts, v };
	struct metrics_sub *s, *next;

	if (isnan(v))
		return;
	for (s = TAILQ_FIRST(&m->subs); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);	/* cb may unsubscribe itself */
		s->cb(&c, s->arg);
	}
}

/* Appends a point to e's history unless the last one is too recent;
 * returns whether it did. */
static bool
ment_record(struct ment *e, uint64_t ts, const double *vals)
{
	uint64_t min_gap = (uint64_t)METRICS_SLOW_MS * 900000ull;

	e->last_seen = ts;
	if (e->n > 0 && ts - e->last_hist < min_gap)
		return false;
	e->ts[e->next] = ts;
	for (unsigned t = 0; t < e->ntracks; t++)
		e->v[(size_t)t * METRICS_HISTORY_LEN + e->next] = vals[t];
	e->next = (e->next + 1) % METRICS_HISTORY_LEN;
	if (e->n < METRICS_HISTORY_LEN)
		e->n++;
	e->last_hist = ts;
	return true;
}

/* Maps device dev's metrics page read-only if it exists and is valid. */
static struct npusim_metrics_page *
metrics_page_map(uint32_t dev)
{
	char name[NPUSIM_SHM_NAME_MAX];
	struct npusim_metrics_page *p;
	struct stat st;
	int fd;

	if (devcol_shm_name(name, sizeof(name), dev, "metrics") != 0)
		return NULL;
	if ((fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0)) < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(*p)) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, sizeof(*p), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	if (__atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) != NPUSIM_METRICS_MAGIC ||
	    p->version != NPUSIM_SHM_VERSION || p->size != sizeof(*p) ||
	    p->device != (int32_t)dev) {
		munmap(p, sizeof(*p));
		return NULL;
	}
	return p;
}

/* Seqlock read of the page's snapshot; false if busy or absent. */
static bool
metrics_page_read(struct ment *e, struct npusim_metrics_snapshot *out)
{
	uint32_t s1, s2;

	if (e->page == NULL && (e->page = metrics_page_map(e->id)) == NULL)
		return false;
	for (int i = 0; i < 100; i++) {
		s1 = __atomic_load_n(&e->page->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		memcpy(out, &e->page->snap, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->page->seq, __ATOMIC_RELAXED);
		if (s1 == s2)
			return true;
	}
	return false;
}

static double
metrics_sane(double v, double lo, double hi)
{
	return isfinite(v) && v >= lo && v <= hi ? v : NAN;
}

/* True when a point was taken (false: no page, or no snapshot in it yet). */
static bool
metrics_sample_dev(struct metrics *m, struct ment *e, uint64_t now)
{
	struct npusim_metrics_snapshot s;
	double v[MT_DEV_NTRACKS];

	if (!metrics_page_read(e, &s) || s.host_realtime_ns == 0)
		return false;
	v[MT_DEV_UTIL] = metrics_sane(s.utilization * 100.0, 0, 100);
	v[MT_DEV_MEM_USED] = (double)s.mem_used;
	v[MT_DEV_MEM_TOTAL] = (double)s.mem_total;
	v[MT_DEV_POWER] = metrics_sane(s.power_w, 0, 1e5);
	v[MT_DEV_TEMP] = metrics_sane(s.temperature_c, -100, 1000);
	ment_record(e, now, v);
	for (unsigned t = 0; t < MT_DEV_NTRACKS; t++)
		metrics_emit(m, dev_names[t], dev_units[t], 0, e->id, now, v[t]);
	return true;
}

/* Reads utime+stime (ticks) from /proc/pid/stat and resident pages from
 * /proc/pid/statm.  The comm field may hold spaces and parentheses, so
 * parsing starts after the last ')'. */
static int
metrics_proc_read(uint32_t pid, uint64_t *ticks, uint64_t *rss_pages)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st, size, res;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return -EPROTO;
	/* After ")": state(3) ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime(14) stime(15). */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
	    &ut, &st) != 2)
		return -EPROTO;
	snprintf(path, sizeof(path), "/proc/%u/statm", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &size, &res) != 2)
		return -EPROTO;
	*ticks = ut + st;
	*rss_pages = res;
	return 0;
}

static double
metrics_cpu(const struct metrics *m, uint64_t t0, uint64_t m0, uint64_t t1,
    uint64_t m1)
{
	if (m1 <= m0 || t1 < t0)
		return NAN;
	return (double)(t1 - t0) / (double)m->clk_tck * 1e9 /
	    (double)(m1 - m0) * 100.0;
}

/* Live samples get cpu % over the last tick; a history point gets it over
 * the whole interval since the previous history point. */
static void
metrics_sample_pid(struct metrics *m, struct ment *e, uint64_t now,
    uint64_t mono)
{
	uint64_t ticks, pages;
	double live[MT_PID_NTRACKS], hist[MT_PID_NTRACKS];

	if (metrics_proc_read(e->id, &ticks, &pages) != 0) {
		e->have_prev = false;
		return;
	}
	live[MT_PID_CPU] = hist[MT_PID_CPU] = NAN;
	if (e->have_prev) {
		live[MT_PID_CPU] = metrics_cpu(m, e->prev_ticks, e->prev_mono,
		    ticks, mono);
		hist[MT_PID_CPU] = metrics_cpu(m, e->hist_ticks, e->hist_mono,
		    ticks, mono);
	}
	live[MT_PID_RSS] = hist[MT_PID_RSS] = (double)pages *
	    (double)m->page_size;
	e->prev_ticks = ticks;
	e->prev_mono = mono;
	if (ment_record(e, now, hist) || !e->have_prev) {
		e->hist_ticks = ticks;
		e->hist_mono = mono;
	}
	e->have_prev = true;
	for (unsigned t = 0; t < MT_PID_NTRACKS; t++)
		metrics_emit(m, pid_names[t], pid_units[t], e->id,
		    METRICS_NO_DEVICE, now, live[t]);
}

void
metrics_sample_now(struct metrics *m)
{
	uint64_t now = util_realtime_ns(), mono = util_monotonic_ns();

	for (size_t i = 0; i < METRICS_MAX_DEVICES; i++) {
		struct ment *e = m->dev[i];

		if (!ment_active(e)) {
			if (e != NULL && e->page != NULL) {
				munmap(e->page, sizeof(*e->page));
				e->page = NULL;
			}
			continue;
		}
		(void)metrics_sample_dev(m, e, now);
	}
	for (size_t i = 0; i < m->npid; i++)
		if (ment_active(m->pid[i]))
			metrics_sample_pid(m, m->pid[i], now, mono);
	metrics_gc(m, now, false);
}

bool
metrics_sample_device(struct metrics *m, uint32_t device)
{
	if (m == NULL || device >= METRICS_MAX_DEVICES ||
	    !ment_active(m->dev[device]))
		return false;
	return metrics_sample_dev(m, m->dev[device], util_realtime_ns());
}

static void
metrics_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	metrics_sample_now(arg);
}

static size_t
ment_history(const struct ment *e, unsigned track, uint64_t since,
    struct metrics_point *out, size_t max)
{
	size_t k = 0;
	unsigned i, idx;

	if (e == NULL || track >= e->ntracks)
		return 0;
	for (i = 0; i < e->n && k < max; i++) {
		idx = (e->next + METRICS_HISTORY_LEN - e->n + i) %
		    METRICS_HISTORY_LEN;
		if (e->ts[idx] < since)
			continue;
		out[k].ts = e->ts[idx];
		out[k].value = e->v[(size_t)track * METRICS_HISTORY_LEN + idx];
		k++;
	}
	return k;
}

static void
ment_summary(const struct ment *e, unsigned track, uint64_t since,
    struct metrics_summary *out)
{
	double sum = 0, v;
	unsigned i, idx;

	memset(out, 0, sizeof(*out));
	if (e == NULL || track >= e->ntracks)
		return;
	for (i = 0; i < e->n; i++) {
		idx = (e->next + METRICS_HISTORY_LEN - e->n + i) %
		    METRICS_HISTORY_LEN;
		v = e->v[(size_t)track * METRICS_HISTORY_LEN + idx];
		if (e->ts[idx] < since || isnan(v))
			continue;
		if (out->samples == 0 || v < out->min)
			out->min = v;
		if (out->samples == 0 || v > out->max)
			out->max = v;
		sum += v;
		out->samples++;
		out->latest = v;
		out->latest_ns = e->ts[idx];
	}
	if (out->samples > 0)
		out->avg = sum / out->samples;
}

size_t
metrics_device_history(struct metrics *m, uint32_t device,
    enum metrics_dev_track t, uint64_t since, struct metrics_point *out,
    size_t max)
{
	if (device >= METRICS_MAX_DEVICES)
		return 0;
	return ment_history(m->dev[device], t, since, out, max);
}

size_t
metrics_pid_history(struct metrics *m, uint32_t pid, enum metrics_pid_track t,
    uint64_t since, struct metrics_point *out, size_t max)
{
	size_t i = metrics_pid_index(m, pid);

	return i == SIZE_MAX ? 0 : ment_history(m->pid[i], t, since, out, max);
}

void
metrics_device_summary(struct metrics *m, uint32_t device,
    enum metrics_dev_track t, uint64_t since, struct metrics_summary *out)
{
	ment_summary(device < METRICS_MAX_DEVICES ? m->dev[device] : NULL, t,
	    since, out);
}

void
metrics_pid_summary(struct metrics *m, uint32_t pid, enum metrics_pid_track t,
    uint64_t since, struct metrics_summary *out)
{
	size_t i = metrics_pid_index(m, pid);

	ment_summary(i == SIZE_MAX ? NULL : m->pid[i], t, since, out);
}

/* ---- MetricsRequest ---- */

static Mspti__MetricTrack **
metrics_tracks(const struct ment *e, const char **names, const char **units,
    unsigned n, uint64_t since)
{
	Mspti__MetricTrack **v = calloc(n, sizeof(*v));
	struct metrics_summary s;

	if (v == NULL)
		return NULL;
	for (unsigned t = 0; t < n; t++) {
		if ((v[t] = malloc(sizeof(**v))) == NULL)
			goto fail;
		mspti__metric_track__init(v[t]);
		ment_summary(e, t, since, &s);
		v[t]->name = (char *)names[t];
		v[t]->unit = (char *)units[t];
		v[t]->samples = s.samples;
		v[t]->min = s.min;
		v[t]->avg = s.avg;
		v[t]->max = s.max;
		v[t]->latest = s.latest;
		v[t]->latest_ns = s.latest_ns;
	}
	return v;
fail:
	for (unsigned t = 0; t < n; t++)
		free(v[t]);
	free(v);
	return NULL;
}

static void
metrics_reply_free(Mspti__MetricsReply *r)
{
	for (size_t i = 0; i < r->n_devices; i++) {
		for (size_t t = 0; t < r->devices[i]->n_tracks; t++)
			free(r->devices[i]->tracks[t]);
		free(r->devices[i]->tracks);
		free(r->devices[i]);
	}
	free(r->devices);
	for (size_t i = 0; i < r->n_processes; i++) {
		for (size_t t = 0; t < r->processes[i]->n_tracks; t++)
			free(r->processes[i]->tracks[t]);
		free(r->processes[i]->tracks);
		free(r->processes[i]);
	}
	free(r->processes);
}

int
metrics_request(struct peer *p, const ProtobufCMessage *msg)
{
	const Mspti__MetricsRequest *req = (const Mspti__MetricsRequest *)msg;
	Mspti__MetricsReply rep = MSPTI__METRICS_REPLY__INIT;
	struct metrics *m = p->d->metrics;
	uint64_t now = util_realtime_ns(), window, since, horizon;
	int rc;

	horizon = (uint64_t)METRICS_HISTORY_S * 1000000000ull;
	window = req->last_ns != 0 ? req->last_ns : METRICS_DEFAULT_WINDOW_NS;
	if (window > horizon)
		window = horizon;
	since = now > window ? now - window : 0;
	if (req->device < -1 || req->device >= METRICS_MAX_DEVICES)
		return peer_send_error(p, 2,
		    "device %d out of range", (int)req->device);
	rep.now_ns = now;
	rep.window_ns = window;
	rep.period_ms = m->period_ms;
	rep.devices = calloc(METRICS_MAX_DEVICES, sizeof(*rep.devices));
	rep.processes = calloc(m->npid > 0 ? m->npid : 1,
	    sizeof(*rep.processes));
	if (rep.devices == NULL || rep.processes == NULL)
		goto nomem;
	for (uint32_t i = 0; i < METRICS_MAX_DEVICES; i++) {
		struct ment *e = m->dev[i];
		Mspti__DeviceMetrics *dm;

		if (e == NULL || (req->device >= 0 && (uint32_t)req->device != i))
			continue;
		if ((dm = malloc(sizeof(*dm))) == NULL)
			goto nomem;
		mspti__device_metrics__init(dm);
		rep.devices[rep.n_devices++] = dm;
		dm->device = i;
		dm->in_use = ment_active(e);
		if ((dm->tracks = metrics_tracks(e, dev_names, dev_units,
		    MT_DEV_NTRACKS, since)) == NULL)
			goto nomem;
		dm->n_tracks = MT_DEV_NTRACKS;
	}
	for (size_t i = 0; i < m->npid; i++) {
		struct ment *e = m->pid[i];
		Mspti__ProcessMetrics *pm;

		if (req->device >= 0 && !(e->devmask & (1ull << req->device)))
			continue;
		if ((pm = malloc(sizeof(*pm))) == NULL)
			goto nomem;
		mspti__process_metrics__init(pm);
		rep.processes[rep.n_processes++] = pm;
		pm->pid = e->id;
		pm->alive = ment_active(e);
		pm->exe = e->exe;
		if ((pm->tracks = metrics_tracks(e, pid_names, pid_units,
		    MT_PID_NTRACKS, since)) == NULL)
			goto nomem;
		pm->n_tracks = MT_PID_NTRACKS;
	}
	rc = peer_send(p, MSPTI__MSG_TYPE__MSG_METRICS_REP, &rep.base, -1);
	metrics_reply_free(&rep);
	return rc;
nomem:
	metrics_reply_free(&rep);
	return peer_send_error(p, 1, "out of memory");
}

/*
 * sim-shm.c - the per-device shared-memory objects: mapping, the channel
 * writer, and the sampler thread that keeps the clock samples and the
 * metrics page fresh while this process has the device open.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"
#include "util.h"

/*
 * Open or create a shared-memory object of (at least) size bytes and map
 * it.  If another process created it, its size wins and is returned in
 * *sizep.  *created says whether we made it (and must initialise it).
 */
static void *
sim_shm_open_map(const char *name, size_t *sizep, int *created)
{
	struct stat	 st;
	void		*p;
	int		 fd, i;

	*created = 0;
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd != -1) {
		/*
		 * A device is node-wide, as /dev/davinci* is: processes of
		 * any user may run on it and the daemon reads its channel.
		 * fchmod, because the creation mode is cut by the umask.
		 */
		if (fchmod(fd, 0666) == -1 ||
		    ftruncate(fd, (off_t)*sizep) == -1) {
			close(fd);
			shm_unlink(name);
			return (NULL);
		}
		*created = 1;
	} else {
		if (errno != EEXIST ||
		    (fd = shm_open(name, O_RDWR, 0)) == -1)
			return (NULL);
		/* The creator may not have sized it yet. */
		for (i = 0; i < 1000; i++) {
			if (fstat(fd, &st) == -1) {
				close(fd);
				return (NULL);
			}
			if (st.st_size > 0)
				break;
			usleep(1000);
		}
		if (st.st_size <= 0) {
			close(fd);
			return (NULL);
		}
		*sizep = (size_t)st.st_size;
	}
	p = mmap(NULL, *sizep, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return (NULL);
	return (p);
}

/* Wait up to a second for a creator to publish the magic. */
static int
sim_shm_wait_magic(uint32_t *magic, uint32_t want)
{
	int	i;

	for (i = 0; i < 1000; i++) {
		if (__atomic_load_n(magic, __ATOMIC_ACQUIRE) == want)
			return (0);
		usleep(1000);
	}
	return (-1);
}

/* Map device dev's channel; creates and initialises it if needed. */
static struct npusim_channel_header *
sim_shm_channel_map(int dev, size_t *sizep)
{
	struct npusim_channel_header	*h;
	char				 name[NPUSIM_SHM_NAME_MAX];
	size_t				 size;
	int				 created;

	if (npusimShmName(name, sizeof name, dev, "chan") < 0)
		return (NULL);
	size = sizeof *h + (size_t)sim_cfg.channel_records *
	    sizeof(struct npusim_record);
	if ((h = sim_shm_open_map(name, &size, &created)) == NULL)
		return (NULL);
	if (created) {
		h->version = NPUSIM_SHM_VERSION;
		h->header_size = sizeof *h;
		h->record_size = sizeof(struct npusim_record);
		h->capacity = sim_cfg.channel_records;
		h->device = dev;
		h->clock_offset_ns = sim_clock_offset(dev);
		h->clock_drift_ppb = sim_clock_drift(dev);
		__atomic_store_n(&h->magic, NPUSIM_CHANNEL_MAGIC,
		    __ATOMIC_RELEASE);
	} else if (sim_shm_wait_magic(&h->magic, NPUSIM_CHANNEL_MAGIC) != 0)
		goto bad;
	if (h->version != NPUSIM_SHM_VERSION || h->header_size != sizeof *h ||
	    h->record_size != sizeof(struct npusim_record) ||
	    h->capacity == 0 || (h->capacity & (h->capacity - 1)) != 0 ||
	    size < sizeof *h + (size_t)h->capacity * h->record_size ||
	    h->device != dev)
		goto bad;
	*sizep = size;
	return (h);
bad:
	munmap(h, size);
	return (NULL);
}

static struct npusim_metrics_page *
sim_shm_metrics_map(int dev)
{
	struct npusim_metrics_page	*m;
	char				 name[NPUSIM_SHM_NAME_MAX];
	size_t				 size = sizeof *m;
	int				 created;

	if (npusimShmName(name, sizeof name, dev, "metrics") < 0)
		return (NULL);
	if ((m = sim_shm_open_map(name, &size, &created)) == NULL)
		return (NULL);
	if (created) {
		m->version = NPUSIM_SHM_VERSION;
		m->size = sizeof *m;
		m->device = dev;
		m->snap.mem_total = sim_cfg.mem_bytes;
		m->snap.temperature_c = 35.0;
		m->snap.power_w = 80.0;
		__atomic_store_n(&m->magic, NPUSIM_METRICS_MAGIC,
		    __ATOMIC_RELEASE);
	} else if (sim_shm_wait_magic(&m->magic, NPUSIM_METRICS_MAGIC) != 0)
		goto bad;
	if (size < sizeof *m || m->version != NPUSIM_SHM_VERSION ||
	    m->size != sizeof *m || m->device != dev)
		goto bad;
	return (m);
bad:
	munmap(m, size);
	return (NULL);
}

/*
 * Try to take a multi-writer seqlock (even = free).  A writer that died
 * holding it would block everyone, so after many failed tries in a row we
 * assume that and release it.
 */
int
sim_shm_seq_trylock(uint32_t *seq, unsigned *stuck)
{
	uint32_t	s = __atomic_load_n(seq, __ATOMIC_RELAXED);

	if (s & 1) {
		if (++*stuck > 50) {
			__atomic_compare_exchange_n(seq, &s, s + 1, 0,
			    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
			*stuck = 0;
		}
		return (0);
	}
	*stuck = 0;
	if (!__atomic_compare_exchange_n(seq, &s, s + 1, 0, __ATOMIC_ACQUIRE,
	    __ATOMIC_RELAXED))
		return (0);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return (1);
}

void
sim_shm_seq_unlock(uint32_t *seq)
{
	__atomic_fetch_add(seq, 1, __ATOMIC_RELEASE);
}

#define SIM_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

/*
 * Once a reader wants records, map the whole channel into this process
 * for writing, off the host's path (at the device's open, or from the
 * sampler): else the first pass over it faults a page per 16 records in
 * the host wait that publishes them.  Best effort: an older kernel
 * faults on first touch instead.
 */
static void
sim_shm_channel_populate(struct sim_device *d)
{
	if (d->chan == NULL || d->chan_populated ||
	    __atomic_load_n(&d->chan->enable_count, __ATOMIC_RELAXED) == 0)
		return;
	d->chan_populated = 1;
	(void)madvise(d->chan, d->chan_size, MADV_POPULATE_WRITE);
}

static void
sim_shm_clock_sample(struct sim_device *d, unsigned *stuck)
{
	struct npusim_channel_header	*h = d->chan;
	uint64_t			 real, m, br;

	if (h == NULL || !sim_shm_seq_trylock(&h->clock_seq, stuck))
		return;
	br = sim_clock_pair(&real, &m);
	SIM_STORE(&h->clock_bracket_ns, br > UINT32_MAX ? UINT32_MAX :
	    (uint32_t)br);
	SIM_STORE(&h->clock.host_realtime_ns, real);
	SIM_STORE(&h->clock.device_ns, sim_clock_device(d->id, m));
	SIM_STORE(&h->clock.host_monotonic_ns, m);
	sim_shm_seq_unlock(&h->clock_seq);
}

/*
 * Busy ledgers: each stream notes its modelled busy segments and holds
 * the records of tasks that have not ended yet; the sampler (and the
 * stream itself, on each task and host wait) credits busy_ns and
 * tasks_completed with what the host clock has passed and publishes the
 * records that are due, so the metrics page and the channel follow the
 * model, not the threads.
 */
struct sim_busy *
sim_shm_busy_new(struct sim_device *d)
{
	struct sim_busy	*b;

	if ((d->metrics == NULL && d->chan == NULL) ||
	    (b = calloc(1, sizeof *b)) == NULL)
		return (NULL);
	pthread_mutex_lock(&d->busy_lock);
	LIST_INSERT_HEAD(&d->busy, b, entry);
	pthread_mutex_unlock(&d->busy_lock);
	return (b);
}

/* Publish b's records that ended by now; caller holds busy_lock. */
static void
sim_shm_busy_publish(struct sim_device *d, struct sim_busy *b, uint64_t now)
{
	struct npusim_record	*r;

	while (b->rn > 0) {
		r = &b->recs[b->rhead];
		if (r->stamp > now)
			break;
		sim_shm_record(d, r);
		b->rhead = (b->rhead + 1) % SIM_BUSY_RECS;
		b->rn--;
	}
}

/* Credit what b did up to now; caller holds busy_lock. */
static uint64_t
sim_shm_busy_credit(struct sim_device *d, struct sim_busy *b, uint64_t now)
{
	struct sim_busy_seg	*g;
	uint64_t		 sum = 0, part, tasks = 0;

	while (b->n > 0) {
		g = &b->seg[b->head];
		if (g->end <= now) {
			sum += g->busy - g->credited;
			tasks += g->tasks;
			b->head = (b->head + 1) % SIM_BUSY_SEGS;
			b->n--;
			continue;
		}
		if (g->start >= now)
			break;
		part = g->busy == g->end - g->start ? now - g->start :
		    (uint64_t)((double)g->busy * (double)(now - g->start) /
		    (double)(g->end - g->start));
		if (part > g->credited) {
			sum += part - g->credited;
			g->credited = part;
		}
		break;
	}
	if (d->metrics != NULL && tasks > 0)
		__atomic_fetch_add(&d->metrics->tasks_completed, tasks,
		    __ATOMIC_RELAXED);
	return (sum);
}

/*
 * A task ran from start to end (modelled): account its busy time and
 * publish rec (NULL: none) once the host clock (now, recently read)
 * passes end.
 */
void
sim_shm_task_done(struct sim_device *d, struct sim_busy *b, uint64_t start,
    uint64_t end, struct npusim_record *rec, uint64_t now)
{
	struct sim_busy_seg	*last;

	if (b == NULL) {
		if (d->metrics != NULL)
			__atomic_fetch_add(&d->metrics->tasks_completed, 1,
			    __ATOMIC_RELAXED);
		if (rec != NULL)
			sim_shm_record(d, rec);
		return;
	}
	pthread_mutex_lock(&d->busy_lock);
	if (d->metrics != NULL) {
		last = b->n > 0 ? &b->seg[(b->head + b->n - 1) %
		    SIM_BUSY_SEGS] : NULL;
		if (last != NULL && (last->end == start ||
		    b->n == SIM_BUSY_SEGS)) {
			last->end = end;
			last->busy += end - start;
			last->tasks++;
		} else {
			last = &b->seg[(b->head + b->n) % SIM_BUSY_SEGS];
			last->start = start;
			last->end = end;
			last->busy = end - start;
			last->credited = 0;
			last->tasks = 1;
			b->n++;
		}
	}
	sim_shm_busy_publish(d, b, now);
	if (rec != NULL && d->chan != NULL) {
		if (b->rn == 0 && end <= now)
			sim_shm_record(d, rec);
		else if (__atomic_load_n(&d->chan->enable_count,
		    __ATOMIC_RELAXED) == 0)
			sim_shm_record(d, rec);	/* counts it as dropped */
		else {
			if (b->recs == NULL)
				b->recs = calloc(SIM_BUSY_RECS,
				    sizeof *b->recs);
			if (b->recs == NULL)
				sim_shm_record(d, rec);
			else {
				if (b->rn == SIM_BUSY_RECS) {
					/* Full: the oldest goes early. */
					sim_shm_record(d,
					    &b->recs[b->rhead]);
					b->rhead = (b->rhead + 1) %
					    SIM_BUSY_RECS;
					b->rn--;
				}
				rec->stamp = end;
				b->recs[(b->rhead + b->rn) % SIM_BUSY_RECS] =
				    *rec;
				b->rn++;
			}
		}
	}
	pthread_mutex_unlock(&d->busy_lock);
}

/*
 * Before a host wait at whose end b's held records fall due: take the
 * channel slots they will most likely fill into this CPU's cache for
 * writing, so that publishing them after the wait, on the waiter's
 * critical path, does not stall on a cache miss per line.  Only a hint:
 * another writer may take some of those slots first.
 */
void
sim_shm_busy_prefetch(struct sim_device *d, struct sim_busy *b)
{
	struct npusim_channel_header	*h = d->chan;
	const char			*p;
	uint64_t			 idx;
	unsigned			 i, n;
	size_t				 off;

	if (b == NULL || h == NULL ||
	    __atomic_load_n(&h->enable_count, __ATOMIC_RELAXED) == 0)
		return;
	pthread_mutex_lock(&d->busy_lock);
	n = b->rn + 1;		/* and a paced copy's, not held yet */
	pthread_mutex_unlock(&d->busy_lock);
	if (n > SIM_PREFETCH_RECS)
		n = SIM_PREFETCH_RECS;
	idx = __atomic_load_n(&h->head, __ATOMIC_RELAXED);
	for (i = 0; i < n; i++) {
		p = (const char *)&d->chan_rec[(idx + i) & (h->capacity - 1)];
		for (off = 0; off < sizeof *d->chan_rec; off += 64)
			__builtin_prefetch(p + off, 1, 3);
	}
}

/* After a host wait: publish what is due now (everything waited for). */
void
sim_shm_busy_flush(struct sim_device *d, struct sim_busy *b)
{
	if (b == NULL)
		return;
	pthread_mutex_lock(&d->busy_lock);
	sim_shm_busy_publish(d, b, sim_clock_mono());
	pthread_mutex_unlock(&d->busy_lock);
}

/* Credit every ledger of d up to now (UINT64_MAX: all), publish what is
 * due, drop dead ones. */
void
sim_shm_busy_sweep(struct sim_device *d, uint64_t now)
{
	struct sim_busy	*b, *nb;
	uint64_t	 sum = 0;

	pthread_mutex_lock(&d->busy_lock);
	for (b = LIST_FIRST(&d->busy); b != NULL; b = nb) {
		nb = LIST_NEXT(b, entry);
		sum += sim_shm_busy_credit(d, b, now);
		sim_shm_busy_publish(d, b, now);
		if (b->dead && b->n == 0 && b->rn == 0) {
			LIST_REMOVE(b, entry);
			free(b->recs);
			free(b);
		}
	}
	pthread_mutex_unlock(&d->busy_lock);
	if (sum > 0 && d->metrics != NULL)
		__atomic_fetch_add(&d->metrics->busy_ns, sum,
		    __ATOMIC_RELAXED);
}

/* At exit, publish the records whose time has come (a process that
 * exits without synchronizing still reports the work it saw finish). */
__attribute__((destructor)) static void
sim_shm_exit(void)
{
	struct sim_device	*d;
	int			 i;

	for (i = 0; i < SIM_MAX_DEVICES; i++) {
		d = &sim_rt.devices[i];
		if (__atomic_load_n(&d->open, __ATOMIC_ACQUIRE))
			sim_shm_busy_sweep(d, sim_clock_mono());
	}
}

/* The stream is gone; the sampler credits the rest and frees it. */
void
sim_shm_busy_release(struct sim_device *d, struct sim_busy *b)
{
	if (b == NULL)
		return;
	pthread_mutex_lock(&d->busy_lock);
	b->dead = 1;
	pthread_mutex_unlock(&d->busy_lock);
}

struct sim_shm_sampler {
	uint64_t	last_mono;
	uint64_t	last_busy;
	unsigned	stuck;
};

static void
sim_shm_metrics_sample(struct sim_device *d, struct sim_shm_sampler *s)
{
	struct npusim_metrics_page	*m = d->metrics;
	uint64_t			 now, busy, dt;
	double				 util, temp, target, alpha;

	if (m == NULL) {
		sim_shm_busy_sweep(d, sim_clock_mono());
		return;
	}
	now = sim_clock_mono();
	sim_shm_busy_sweep(d, now);
	busy = __atomic_load_n(&m->busy_ns, __ATOMIC_RELAXED);
	dt = now - s->last_mono;
	util = dt > 0 ? (double)(busy - s->last_busy) / (double)dt : 0.0;
	if (util > 1.0)
		util = 1.0;
	if (util < 0.0)
		util = 0.0;
	s->last_mono = now;
	s->last_busy = busy;
	if (!sim_shm_seq_trylock(&m->seq, &s->stuck))
		return;
	/* Temperature relaxes toward a load-dependent target (tau 3 s). */
	temp = m->snap.temperature_c;
	if (!(temp > 0.0 && temp < 200.0))
		temp = 35.0;
	target = 35.0 + 45.0 * util;
	alpha = 1.0 - exp(-(double)dt / 3e9);
	temp += (target - temp) * alpha;
	m->snap.host_realtime_ns = sim_clock_realtime();
	m->snap.device_ns = sim_clock_device(d->id, now);
	m->snap.mem_used = __atomic_load_n(&m->mem_used, __ATOMIC_RELAXED);
	m->snap.mem_total = sim_cfg.mem_bytes;
	m->snap.tasks_launched = __atomic_load_n(&m->tasks_launched,
	    __ATOMIC_RELAXED);
	m->snap.tasks_completed = __atomic_load_n(&m->tasks_completed,
	    __ATOMIC_RELAXED);
	m->snap.utilization = util;
	m->snap.power_w = 80.0 + 270.0 * util;
	m->snap.temperature_c = temp;
	m->snap.processes = __atomic_load_n(&m->processes, __ATOMIC_RELAXED);
	sim_shm_seq_unlock(&m->seq);
}

static void *
sim_shm_sampler_main(void *arg)
{
	struct sim_device	*d = arg;
	struct sim_shm_sampler	 s;
	unsigned		 cstuck = 0;
	struct timespec		 ts;
	uint64_t		 next, first;

	memset(&s, 0, sizeof s);
	s.last_mono = sim_clock_mono();
	first = s.last_mono + (uint64_t)sim_cfg.test_metrics_delay_ms *
	    1000000ULL;
	if (d->metrics != NULL)
		s.last_busy = __atomic_load_n(&d->metrics->busy_ns,
		    __ATOMIC_RELAXED);
	pthread_mutex_lock(&d->sampler_lock);
	while (!d->sampler_stop) {
		pthread_mutex_unlock(&d->sampler_lock);
		sim_shm_channel_populate(d);
		sim_shm_clock_sample(d, &cstuck);
		if (sim_clock_mono() >= first)
			sim_shm_metrics_sample(d, &s);
		else
			sim_shm_busy_sweep(d, sim_clock_mono());
		pthread_mutex_lock(&d->sampler_lock);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		next = (uint64_t)ts.tv_nsec + (uint64_t)sim_cfg.metrics_ms *
		    1000000ULL;
		ts.tv_sec += (time_t)(next / 1000000000ULL);
		ts.tv_nsec = (long)(next % 1000000000ULL);
		if (!d->sampler_stop)
			pthread_cond_timedwait(&d->sampler_cond,
			    &d->sampler_lock, &ts);
	}
	pthread_mutex_unlock(&d->sampler_lock);
	/* The device is closing: the page keeps this process's last state. */
	sim_shm_metrics_sample(d, &s);
	return (NULL);
}

/* Map the device's shm objects and start its sampler; caller holds lock. */
int
sim_shm_device_open(struct sim_device *d)
{
	pthread_condattr_t	ca;
	sigset_t		old;

	d->chan = sim_shm_channel_map(d->id, &d->chan_size);
	if (d->chan != NULL)
		d->chan_rec = (struct npusim_record *)((char *)d->chan +
		    d->chan->header_size);
	d->chan_populated = 0;
	sim_shm_channel_populate(d);	/* the sampler once recording starts */
	d->metrics = sim_shm_metrics_map(d->id);
	if (d->metrics != NULL)
		__atomic_fetch_add(&d->metrics->processes, 1,
		    __ATOMIC_RELAXED);
	sim_memory_share_open(d);
	pthread_mutex_init(&d->busy_lock, NULL);
	LIST_INIT(&d->busy);
	pthread_mutex_init(&d->sampler_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->sampler_cond, &ca);
	pthread_condattr_destroy(&ca);
	d->sampler_stop = 0;
	sim_shm_clock_sample(d, &(unsigned){ 0 });
	/* Runtime threads must not take the application's signals. */
	util_block_async_signals(&old);
	if (pthread_create(&d->sampler, NULL, sim_shm_sampler_main, d) != 0)
		d->sampler_stop = -1;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return (0);
}

void
sim_shm_device_close(struct sim_device *d)
{
	if (d->sampler_stop == 0) {
		pthread_mutex_lock(&d->sampler_lock);
		d->sampler_stop = 1;
		pthread_cond_signal(&d->sampler_cond);
		pthread_mutex_unlock(&d->sampler_lock);
		pthread_join(d->sampler, NULL);
	}
	pthread_mutex_destroy(&d->sampler_lock);
	pthread_cond_destroy(&d->sampler_cond);
	/* Streams are gone and waited for their modelled ends. */
	sim_shm_busy_sweep(d, UINT64_MAX);
	pthread_mutex_destroy(&d->busy_lock);
	if (d->metrics != NULL) {
		sim_memory_share_close(d);
		__atomic_fetch_sub(&d->metrics->processes, 1,
		    __ATOMIC_RELAXED);
		munmap(d->metrics, sizeof *d->metrics);
		d->metrics = NULL;
	}
	if (d->chan != NULL) {
		munmap(d->chan, d->chan_size);
		d->chan = NULL;
		d->chan_rec = NULL;
	}
}

/*
 * Publish one record if any reader has recording enabled.  Lock-free: a
 * slot is reserved by fetch_add on head and published by its stamp, so
 * several processes can write the same device's channel.
 */
void
sim_shm_record(struct sim_device *d, struct npusim_record *rec)
{
	struct npusim_channel_header	*h = d->chan;
	struct npusim_record		*slot;
	uint64_t			 idx;

	if (h == NULL)
		return;
	if (__atomic_load_n(&h->enable_count, __ATOMIC_ACQUIRE) == 0) {
		__atomic_fetch_add(&h->dropped_disabled, 1, __ATOMIC_RELAXED);
		return;
	}
	idx = __atomic_fetch_add(&h->head, 1, __ATOMIC_ACQ_REL);
	slot = &d->chan_rec[idx & (h->capacity - 1)];
	__atomic_store_n(&slot->stamp, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy((char *)slot + sizeof slot->stamp, (char *)rec +
	    sizeof rec->stamp, sizeof *rec - sizeof rec->stamp);
	__atomic_store_n(&slot->stamp, idx + 1, __ATOMIC_RELEASE);
}

/* Channel mapping for readers (sim-channel.c). */
struct npusim_channel_header *
sim_shm_channel_attach(int dev, size_t *sizep)
{
	sim_env_load();
	return (sim_shm_channel_map(dev, sizep));
}

struct npusim_metrics_page *
sim_shm_metrics_attach(int dev)
{
	sim_env_load();
	return (sim_shm_metrics_map(dev));
}

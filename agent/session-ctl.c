/*
 * Start, update and stop of a daemon session's capture in this process,
 * all on the registration thread (register.c), and what a fork does to
 * it.  Start maps the ring msptid made, publishes the session to the
 * producers (session.c) and switches the kinds on; stop switches them
 * off, clears the session, waits out the threads still inside the sink
 * (the fence at the top of session.c) and unmaps the ring.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>

#include "log.h"
#include "session-int.h"

#define SESS_MAX_DOMAINS_OFF	32

struct agent_session *sess_cur;
static uint64_t sess_gen;		/* sessions started: their gen */

/*
 * live is sess_cur while capturing: what producers check after entering
 * the sink (the fence at the top of session.c).  It lives in a page the
 * kernel wipes in a child at fork (MADV_WIPEONFORK), so a child never
 * writes into its parent's ring, however it was forked (fork(), or
 * _Fork()/clone() without the atfork handlers); 'mine' is 0 in such a
 * child until the agent has made it a new agent of its own.
 */
static struct sess_forkpage sess_fp_static = { NULL, 1 };
API_HOT struct sess_forkpage *sess_fp = &sess_fp_static;

/* Registration thread: the bytes each per-thread segment took in this
 * process's last session, populated up front in the next one. */
static uint64_t sess_written[RING_MAX_SEGMENTS];

/* A producer came near the end of its segment's populated part (the
 * ring's populate hook, from its write): the registration thread
 * populates further. */
static void
session_pop_hook(struct ring *r, unsigned seg, void *arg)
{
	struct agent_session *s = arg;

	(void)r;
	if (!(atomic_fetch_or(&s->populate_due, 1ull << seg) &
	    (1ull << seg)))
		register_wake();
}

/* Stopper side, after 'live' is cleared: waits until no thread is inside
 * the sink.  False when one stays inside for ~2 s (stopped in a debugger):
 * the caller must then not free what it may still use. */
static bool
session_quiesce(void)
{
	struct sess_thread *t;
	int spins = 0;

	if (atomic_load(&sess_membarrier)) {
		if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED,
		    0, 0) != 0) {
			/* Cannot happen once registered; be safe anyway:
			 * full fences from now on, and time for racers. */
			atomic_store(&sess_membarrier, 0);
			usleep(10000);
		}
	} else
		atomic_thread_fence(memory_order_seq_cst);
	for (t = atomic_load(&sess_threads); t != NULL; t = t->next) {
		while (atomic_load_explicit(&t->in, memory_order_acquire) != 0) {
			if (++spins > 2000)
				return false;
			if (spins < 100)
				sched_yield();
			else
				usleep(1000);
		}
	}
	return true;
}

/*
 * Registration thread, once the start is acked (so that the capture is
 * active without waiting for it): the pages of the segment the first
 * producing thread claims, here rather than one fault at a time on the
 * application's records.  The shared segment 0 takes nested records and
 * the threads past the per-thread segments: it is populated when the
 * first thread falls back to it (session_prod).  A segment is 8 MB by
 * default, and populating all of it cost ~5 ms of CPU, and its memory,
 * in every session however little it recorded: now 1 MiB, or what the
 * segment took in the last session when more, and more as the thread's
 * writes pass half of it (session_pop_hook, ring_populate_ahead).
 */
void
session_prefault(void)
{
	if (sess_cur == NULL)
		return;
	ring_populate_ahead(sess_cur->ring, 1);
}

/* Registration thread: populates ahead of the threads that claimed a
 * segment or came near the end of its populated part since (the shared
 * segment 0, written by any thread, whole). */
void
session_populate_due(void)
{
	uint64_t due;

	if (sess_cur == NULL ||
	    (due = atomic_exchange(&sess_cur->populate_due, 0)) == 0)
		return;
	for (unsigned i = 0; i < 64; i++)
		if (due & (1ull << i)) {
			if (i == 0)
				ring_populate(sess_cur->ring, 0);
			else
				ring_populate_ahead(sess_cur->ring, i);
		}
}

static char **
session_domains_dup(char **names, size_t n)
{
	char **out;

	if (n > SESS_MAX_DOMAINS_OFF)
		n = SESS_MAX_DOMAINS_OFF;
	if ((out = calloc(n + 1, sizeof(*out))) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if ((out[i] = strdup(names[i] ? names[i] : "")) == NULL) {
			out[i] = strdup("");
			if (out[i] == NULL)
				break;
		}
	return out;
}

/* The old list is kept until the session ends: a producer may read it. */
static char **retired_domains[64];
static size_t nretired;

static void
session_domains_free(char **off)
{
	if (off == NULL)
		return;
	for (char **p = off; *p != NULL; p++)
		free(*p);
	free(off);
}

/* A session no producer can enter any more: its ring, eventfd and domain
 * lists (the retired ones too) go. */
static void
session_free(struct agent_session *s)
{
	ring_unmap(s->ring);
	close(s->wakefd);
	session_domains_free(atomic_load(&s->domains_off));
	for (size_t i = 0; i < nretired; i++)
		session_domains_free(retired_domains[i]);
	nretired = 0;
	free(s);
}

uint64_t
session_current(void)
{
	return sess_cur != NULL ? sess_cur->id : 0;
}

/*
 * Starts capturing into the ring in ringfd (which this takes) for session
 * id.  On success *wakefdp is an eventfd the caller passes to the daemon
 * (and then closes; we keep our own copy).  Returns 0 or a negative errno
 * with a reason in why.
 */
int
session_start(uint64_t id, uint32_t kinds, char **domains_off,
    size_t ndomains_off, const struct session_step_cfg *sc, int ringfd,
    int *wakefdp, const char **why, struct session_step_info *si)
{
	struct agent_session *s;
	int rc;

	memset(si, 0, sizeof(*si));
	si->first = -1;
	*wakefdp = -1;
	if (sess_cur != NULL) {
		close(ringfd);
		*why = "already capturing for another session";
		return -EBUSY;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		close(ringfd);
		*why = "out of memory";
		return -ENOMEM;
	}
	s->id = id;
	s->gen = ++sess_gen;
	/* Not api_pid(): its cache may be a parent's in a child forked
	 * without the atfork handlers. */
	s->pid = (uint32_t)getpid();
	s->win_n = sc != NULL ? sc->steps : 0;
	s->win_from = -1;
	atomic_store(&s->win, s->win_n ? SESS_WIN_BEFORE : SESS_WIN_OPEN);
	rc = ring_map(ringfd, &s->ring);
	close(ringfd);
	if (rc != 0) {
		*why = "cannot map the ring";
		free(s);
		return rc;
	}
	ring_set_lazy(s->ring, true);
	ring_set_populate_hook(s->ring, session_pop_hook, s);
	for (unsigned i = 1; i < RING_MAX_SEGMENTS; i++)
		ring_set_populate_hint(s->ring, i, sess_written[i]);
	ring_producer_shared(s->ring, &s->shared);
	s->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wakefd < 0 || (*wakefdp = dup(s->wakefd)) < 0) {
		rc = -errno;
		if (s->wakefd >= 0)
			close(s->wakefd);
		ring_unmap(s->ring);
		free(s);
		*why = "cannot create an eventfd";
		return rc;
	}
	/* Once per process; producers switch to the cheap fence. */
	if (!atomic_load(&sess_membarrier) && syscall(__NR_membarrier,
	    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		atomic_store(&sess_membarrier, 1);
	atomic_store(&s->domains_off, session_domains_dup(domains_off,
	    ndomains_off));
	atomic_store(&s->active, true);
	sess_step_start(s, sc, si);
	api_session_set_sink(session_sink, session_host_marker, s);
	api_session_set_kinds(kinds);
	log_debug("session %llu: capturing kinds 0x%x",
	    (unsigned long long)id, kinds);
	return 0;
}

int
session_update(uint64_t id, uint32_t kinds, char **domains_off,
    size_t ndomains_off, int64_t step_from, struct session_step_info *si)
{
	char **old;

	memset(si, 0, sizeof(*si));
	si->first = -1;
	if (sess_cur == NULL || sess_cur->id != id)
		return -ENOENT;
	sess_step_update(sess_cur, step_from, si);
	old = atomic_exchange(&sess_cur->domains_off,
	    session_domains_dup(domains_off, ndomains_off));
	if (old != NULL) {
		if (nretired < sizeof(retired_domains) /
		    sizeof(retired_domains[0]))
			retired_domains[nretired++] = old;
		/* else: leak rather than free under a reader */
	}
	api_session_set_kinds(kinds);
	return 0;
}

/* MSPTI_TEST_STOP_DELAY_US (tests): a stop sleeps this long between
 * taking the session's kinds away and taking the session away, where a
 * call that launched in the session may end. */
static void
session_test_stop_delay(void)
{
	char v[16];

	if (env_get("MSPTI_TEST_STOP_DELAY_US", v, sizeof(v)) && atoi(v) > 0 &&
	    atoi(v) < 1000000)
		usleep((useconds_t)atoi(v));
}

/*
 * Stops the current session (id 0: whatever is running): device records
 * already launched are drained into the ring first when flush is set (a
 * clean stop), then producers are fenced out and the ring is unmapped.
 */
int
session_stop(uint64_t id, bool flush)
{
	struct agent_session *s = sess_cur;

	if (s == NULL || (id != 0 && s->id != id))
		return -ENOENT;
	/* Device timing of a session is joined in msptid; this only drains
	 * what the in-process API still waits for. */
	if (flush)
		devtime_drain();
	api_session_set_kinds(0);
	session_test_stop_delay();
	api_session_set_sink(NULL, NULL, NULL);
	atomic_store(&sess_fp->live, NULL);
	atomic_store(&s->active, false);
	/* Threads already inside the sink finish within a few records; a
	 * thread that never comes back (stopped by a debugger) must not make
	 * us unmap under it, so give up and leak after ~2 s. */
	if (!session_quiesce()) {
		sess_cur = NULL;
		return 0;
	}
	sess_cur = NULL;
	for (unsigned i = 1; i < RING_MAX_SEGMENTS; i++)
		sess_written[i] = ring_written(s->ring, i);
	log_debug("session %llu: stopped", (unsigned long long)s->id);
	session_free(s);
	return 0;
}

/*
 * In a forked child: the parent's session is not ours.  Only this thread
 * exists, so nothing is inside the sink; drop the mapping quietly.
 */
void
session_after_fork_child(void)
{
	struct agent_session *s = sess_cur;
	struct sess_thread *t;

	memset(sess_written, 0, sizeof(sess_written));
	sess_step_after_fork_child();
	steps_after_fork_child();
	atomic_store(&sess_fp->live, NULL);
	if (atomic_load(&sess_fp->mine) == 0)
		atomic_store(&sess_fp->mine, 2);	/* set to 1 below */
	/* Slots of the parent's other threads: they do not exist here.
	 * No record waits for a call of the parent's session. */
	for (t = atomic_load(&sess_threads); t != NULL; t = t->next) {
		t->nstash = 0;
		if (t != tls_sess) {
			atomic_store(&t->in, 0);
			atomic_store(&t->used, 0);
		}
	}
	atomic_store(&sess_fp->mine, 1);
	if (s == NULL)
		return;
	api_session_set_kinds(0);
	api_session_set_sink(NULL, NULL, NULL);
	sess_cur = NULL;
	session_free(s);
}

/* The fork page (see sess_forkpage): before any session can start. */
__attribute__((constructor(150))) static void
session_forkpage_init(void)
{
	struct sess_forkpage *p;
	long pg = sysconf(_SC_PAGESIZE);

	p = mmap(NULL, pg > 0 ? (size_t)pg : 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
#ifdef MADV_WIPEONFORK
	if (madvise(p, pg > 0 ? (size_t)pg : 4096, MADV_WIPEONFORK) == 0) {
		atomic_store(&p->mine, 1);
		sess_fp = p;
		return;
	}
#endif
	/* Older kernels: the atfork handler alone guards the parent's ring. */
	munmap(p, pg > 0 ? (size_t)pg : 4096);
}

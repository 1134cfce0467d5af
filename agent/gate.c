/*
 * The start gate for processes launched by `msptictl run`: the first
 * interposed runtime call waits until this process's session config has
 * arrived, so capture covers it from its first call.  Like LTTng-UST's
 * LTTNG_UST_REGISTER_TIMEOUT, the wait is bounded (MSPTI_RUN_GATE_MS,
 * set by run) and the application proceeds regardless when it passes.
 *
 * The registration thread opens the gate when the daemon answered the
 * Sync it sends right after Welcome (the daemon sends any StartCapture for
 * a session that selects us before that answer, and the thread applies it
 * before it reads the next frame), when it cannot register at all, or when
 * the connection ends.  A process that never calls the runtime is never
 * delayed; one that is not under run (no MSPTI_RUN_GATE_MS) only pays one
 * relaxed load on the not-capturing path.
 *
 * Locking: gate_lock and gate_cond only pair the waiting application
 * threads with gate_open; 'closed' is read without the lock on the fast
 * path and written under it.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "api.h"
#include "agent.h"

#define GATE_MAX_MS	600000

/* The first of the mspti_hot words in link order (api.h): its alignment
 * starts the section on a cache line, so that its 64 bytes are one line,
 * not the ends of two. */
API_HOT _Atomic bool gate_closed __attribute__((aligned(64)));
static int gate_timeout_ms;
static bool gate_forked;	/* a forked child that has not said Hello */
static bool gate_called;	/* the application reached the gate */
/* Device tickets: an application thread that starts using a device takes
 * one; the registration thread sends AgentSync with the highest after the
 * AgentUpdate naming it, and the reply acknowledges up to that cookie. */
static uint64_t gate_dev_req, gate_dev_sent, gate_dev_acked;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond;

static void
gate_cond_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&gate_cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* Reads MSPTI_RUN_GATE_MS at load; called before the registration thread
 * starts.  An absent, empty, zero or bad value leaves the gate open. */
void
gate_init(void)
{
	const char *v = getenv("MSPTI_RUN_GATE_MS");
	char *end;
	long ms;

	if (v == NULL || *v == '\0')
		return;
	ms = strtol(v, &end, 10);
	if (*end != '\0' || ms <= 0)
		return;
	gate_timeout_ms = ms > GATE_MAX_MS ? GATE_MAX_MS : (int)ms;
	gate_cond_init();
	atomic_store(&gate_closed, true);
	api_mstx_gate(true);
}

/* A forked child registers anew, so it waits for its own config. */
void
gate_after_fork_child(void)
{
	pthread_mutex_init(&gate_lock, NULL);
	if (gate_timeout_ms <= 0)
		return;
	gate_cond_init();
	gate_forked = true;
	gate_called = false;
	gate_dev_req = gate_dev_sent = gate_dev_acked = 0;
	atomic_store(&gate_closed, true);
	api_mstx_gate(true);
}

/*
 * In a forked child under run, the registration thread holds its Hello
 * until the application's first runtime call, or hold_ms: a launcher sets
 * RANK, LOCAL_RANK and WORLD_SIZE between fork and that call, and Hello
 * must carry them.  Once per child; the registration thread only.
 */
void
gate_hold_hello(int hold_ms)
{
	struct timespec ts;
	int rc = 0;

	if (!gate_forked || !atomic_load(&gate_closed))
		return;
	gate_forked = false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)hold_ms * 1000000L;
	while (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&gate_lock);
	while (!gate_called && atomic_load(&gate_closed) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&gate_cond, &gate_lock, &ts);
	pthread_mutex_unlock(&gate_lock);
}

bool
gate_is_closed(void)
{
	return atomic_load(&gate_closed);
}

/* Lets every waiting and future caller through (registration thread). */
void
gate_open(void)
{
	if (!atomic_load(&gate_closed))
		return;
	pthread_mutex_lock(&gate_lock);
	atomic_store(&gate_closed, false);
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	api_mstx_gate(false);
	log_debug("start gate open");
}

/*
 * Blocks the calling application thread until the gate opens or the
 * timeout passes; a timeout opens the gate for everyone, so no later call
 * waits again.
 */
void
gate_wait(void)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += gate_timeout_ms / 1000;
	ts.tv_nsec += (long)(gate_timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&gate_lock);
	if (!gate_called) {
		gate_called = true;
		pthread_cond_broadcast(&gate_cond);
	}
	while (atomic_load(&gate_closed) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&gate_cond, &gate_lock, &ts);
	if (atomic_load(&gate_closed)) {
		atomic_store(&gate_closed, false);
		pthread_cond_broadcast(&gate_cond);
		log_debug("start gate: no session config after %d ms, "
		    "going on", gate_timeout_ms);
	}
	pthread_mutex_unlock(&gate_lock);
	if (!atomic_load(&gate_closed))
		api_mstx_gate(false);
}

/*
 * The same for a device: under run, a thread that starts using a device
 * while capturing waits, bounded, until the daemon has seen the device
 * (its device channel is read from then on), so the first kernel on it is
 * captured too.  Returns a ticket for gate_device_wait, or 0: no wait.
 */
uint64_t
gate_device_ticket(void)
{
	uint64_t t;

	if (gate_timeout_ms <= 0 || api_kinds_wanted() == 0)
		return 0;
	pthread_mutex_lock(&gate_lock);
	t = ++gate_dev_req;
	pthread_mutex_unlock(&gate_lock);
	return t;
}

void
gate_device_wait(uint64_t ticket)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += gate_timeout_ms / 1000;
	ts.tv_nsec += (long)(gate_timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&gate_lock);
	while (gate_dev_acked < ticket && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&gate_cond, &gate_lock, &ts);
	pthread_mutex_unlock(&gate_lock);
}

/* Registration thread: whether an AgentSync for devices is due, and its
 * cookie (the newest ticket). */
bool
gate_device_sync_due(uint64_t *cookie)
{
	bool due = false;

	pthread_mutex_lock(&gate_lock);
	if (gate_dev_req > gate_dev_sent) {
		*cookie = gate_dev_sent = gate_dev_req;
		due = true;
	}
	pthread_mutex_unlock(&gate_lock);
	return due;
}

/* The daemon answered the device Sync cookie, or (cookie 0) the
 * connection ended: every ticket up to it may go. */
void
gate_device_acked(uint64_t cookie)
{
	pthread_mutex_lock(&gate_lock);
	if (cookie == 0)
		cookie = gate_dev_req;
	if (cookie > gate_dev_acked)
		gate_dev_acked = cookie;
	if (gate_dev_sent < gate_dev_acked)
		gate_dev_sent = gate_dev_acked;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

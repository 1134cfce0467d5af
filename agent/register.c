/*
 * Registration with msptid, on one background thread.
 *
 * The thread connects without blocking, says Hello, and then sleeps in
 * poll() until the daemon speaks or goes away.  While no daemon is there it
 * waits on inotify for agent.sock to appear (with a slow timer as a safety
 * net), so an idle agent costs no CPU and re-registers the moment a
 * restarted daemon binds its socket.  Nothing here ever blocks or signals
 * the application: the thread blocks every signal, every socket call has a
 * timeout, and any error just means "try again later".
 *
 * Locking: reg_lock guards the descriptors in struct reg; it is held only
 * for non-blocking work, and taken around fork() so a child never sees a
 * half-updated descriptor.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "api.h"
#include "agent.h"

#define REG_BACKOFF_MIN_MS	50
#define REG_BACKOFF_MAX_MS	5000
#define REG_WATCH_WAIT_MS	30000	/* safety net when inotify watches */
#define REG_IO_TIMEOUT_MS	2000
#define REG_FORK_HOLD_MS	50	/* forked child under run: gate.c */
#define REG_MAX_ARGS		256
#define REG_MAX_CMDLINE		8192

/* Who the process says it is; read from the environment each time. */
struct reg_identity {
	char	job[256];
	int32_t	rank;
	int32_t	local_rank;
	int32_t	world_size;
};

static struct reg {
	pthread_mutex_t		lock;
	int			sock;
	int			ino;
	int			wakefd;
	bool			started;
	_Atomic uint64_t	agent_id;
	_Atomic uint64_t	devices;	/* bit per device id < 64 */
	uint64_t		sent_devices;
	struct reg_identity	sent_id;
} reg = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.sock = -1,
	.ino = -1,
	.wakefd = -1,
};

static int	 reg_delay_ms;	/* MSPTI_TEST_REGISTER_DELAY_MS */

static void	*register_main(void *);
static int	 register_send_sync(int, uint64_t);

static void
register_prepare_fork(void)
{
	pthread_mutex_lock(&reg.lock);
}

static void
register_parent_fork(void)
{
	pthread_mutex_unlock(&reg.lock);
}

/*
 * In the child the thread is gone but its descriptors are not: close our
 * copies (the parent keeps its connection) and start afresh as a new agent.
 */
void
register_after_fork_child(void)
{
	pthread_mutex_init(&reg.lock, NULL);
	api_after_fork_child();
	gate_after_fork_child();
	session_after_fork_child();
	if (reg.sock >= 0)
		close(reg.sock);
	if (reg.ino >= 0)
		close(reg.ino);
	if (reg.wakefd >= 0)
		close(reg.wakefd);
	reg.sock = reg.ino = reg.wakefd = -1;
	reg.started = false;
	atomic_store(&reg.agent_id, 0);
	reg.sent_devices = 0;
	if (register_start() != 0) {
		gate_open();
		log_warnx("child: cannot start the registration thread");
	}
}

int
register_start(void)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t old;
	const char *v;
	int rc;

	if ((v = getenv("MSPTI_TEST_REGISTER_DELAY_MS")) != NULL)
		reg_delay_ms = atoi(v) > 0 && atoi(v) < 60000 ? atoi(v) : 0;
	reg.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	/* Created with the mask, so no application signal reaches it before
	 * register_main runs. */
	util_block_async_signals(&old);
	rc = pthread_create(&t, &attr, register_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		return -1;
	reg.started = true;
	return 0;
}

uint64_t
register_agent_id(void)
{
	return atomic_load(&reg.agent_id);
}

/* Wakes the registration thread: it has something to tell msptid. */
void
register_wake(void)
{
	uint64_t one = 1;

	if (reg.wakefd >= 0)
		(void)!write(reg.wakefd, &one, sizeof(one));
}

/* Called from the runtime hooks when the application selects a device. */
void
register_note_device(uint32_t device)
{
	uint64_t bit, old;
	uint64_t one = 1;

	if (device >= 64)
		return;
	bit = 1ull << device;
	old = atomic_fetch_or(&reg.devices, bit);
	if ((old & bit) == 0 && reg.wakefd >= 0) {
		/* Under run: wait until the daemon has seen the device. */
		uint64_t ticket = atomic_load(&reg.agent_id) != 0 ?
		    gate_device_ticket() : 0;

		(void)!write(reg.wakefd, &one, sizeof(one));
		if (ticket != 0)
			gate_device_wait(ticket);
	}
}

static size_t
register_devices(uint32_t *out)
{
	uint64_t bits = atomic_load(&reg.devices);
	size_t n = 0;

	for (uint32_t i = 0; i < 64; i++)
		if (bits & (1ull << i))
			out[n++] = i;
	return n;
}

static int32_t
env_int(const char *name)
{
	char v[32], *end;
	long l;

	if (!env_get(name, v, sizeof(v)) || *v == '\0')
		return -1;
	l = strtol(v, &end, 10);
	if (*end != '\0' || l < 0 || l > INT32_MAX)
		return -1;
	return (int32_t)l;
}

/*
 * The launcher's variable, else srun's: a rank srun starts directly has
 * only SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS, while torchrun under srun
 * sets RANK for its children and that is the rank the app uses.
 */
static int32_t
env_int2(const char *name, const char *slurm)
{
	int32_t v = env_int(name);

	return v >= 0 ? v : env_int(slurm);
}

static void
env_job(char *job, size_t len)
{
	static const char *vars[] = { "MSPTI_JOB_ID", "SLURM_JOB_ID",
	    "TORCHELASTIC_RUN_ID" };

	for (size_t i = 0; i < nitems(vars); i++)
		if (env_get(vars[i], job, len) && *job != '\0')
			return;
	job[0] = '\0';
}

static void
register_identity(struct reg_identity *id)
{
	memset(id, 0, sizeof(*id));
	env_job(id->job, sizeof(id->job));
	id->rank = env_int2("RANK", "SLURM_PROCID");
	id->local_rank = env_int2("LOCAL_RANK", "SLURM_LOCALID");
	id->world_size = env_int2("WORLD_SIZE", "SLURM_NTASKS");
}

/* Sends Hello built from /proc/self and the environment. */
static int
register_hello(int sock)
{
	Mspti__Hello hello = MSPTI__HELLO__INIT;
	char exe[PATH_MAX], cmdline[REG_MAX_CMDLINE], *args[REG_MAX_ARGS];
	uint32_t devices[64];
	ssize_t n;
	size_t nargs = 0;
	int fd;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	n = 0;
	if ((fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, cmdline, sizeof(cmdline) - 1);
		close(fd);
	}
	if (n < 0)
		n = 0;
	cmdline[n] = '\0';
	for (ssize_t off = 0; off < n && nargs < REG_MAX_ARGS;) {
		args[nargs++] = cmdline + off;
		off += (ssize_t)strlen(cmdline + off) + 1;
	}
	hello.exe = exe;
	hello.argv = args;
	hello.n_argv = nargs;
	register_identity(&reg.sent_id);
	hello.job_id = reg.sent_id.job;
	hello.rank = reg.sent_id.rank;
	hello.local_rank = reg.sent_id.local_rank;
	hello.world_size = reg.sent_id.world_size;
	hello.n_devices = register_devices(devices);
	hello.devices = devices;
	reg.sent_devices = atomic_load(&reg.devices);
	hello.agent_version = (char *)AGENT_VERSION;
	hello.capabilities = AGENT_CAP_MSPTI | AGENT_CAP_MSTX;
	hello.start_time_ns = agent_start_ns();
	return frame_send(sock, MSPTI__MSG_TYPE__MSG_HELLO, &hello.base, -1);
}

static void
register_close(void)
{
	pthread_mutex_lock(&reg.lock);
	if (reg.sock >= 0)
		close(reg.sock);
	reg.sock = -1;
	pthread_mutex_unlock(&reg.lock);
	atomic_store(&reg.agent_id, 0);
}

/*
 * Connects and completes Hello/Welcome; returns 0 when registered, else a
 * negative errno (-ENOENT: no socket, so waiting on inotify is enough).
 */
static int
register_connect(void)
{
	char path[128];
	struct frame_hdr h;
	ProtobufCMessage *msg;
	struct pollfd pf;
	int fd, rc, err = 0;
	socklen_t len = sizeof(err);

	if (util_path(path, sizeof(path), agent_config.rundir,
	    MSPTI_AGENT_SOCK) != 0)
		return -1;
	pthread_mutex_lock(&reg.lock);
	fd = util_unix_connect(path, 1);
	if (fd >= 0)
		reg.sock = fd;
	pthread_mutex_unlock(&reg.lock);
	if (fd < 0)
		return fd;
	pf.fd = fd;
	pf.events = POLLOUT;
	if (poll(&pf, 1, REG_IO_TIMEOUT_MS) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
		goto fail;
	if ((rc = register_hello(fd)) != 0) {
		log_debug("Hello: %s", frame_strerror(rc));
		goto fail;
	}
	rc = frame_recv(fd, REG_IO_TIMEOUT_MS, &h, &msg, NULL);
	if (rc != 0) {
		log_debug("Welcome: %s", frame_strerror(rc));
		goto fail;
	}
	if (h.type != MSPTI__MSG_TYPE__MSG_WELCOME) {
		log_debug("expected Welcome, got %s", msg_name(h.type));
		protobuf_c_message_free_unpacked(msg, NULL);
		goto fail;
	}
	atomic_store(&reg.agent_id, ((Mspti__Welcome *)msg)->agent_id);
	api_mstx_count_steps(true);
	log_debug("registered as agent %llu",
	    (unsigned long long)((Mspti__Welcome *)msg)->agent_id);
	protobuf_c_message_free_unpacked(msg, NULL);
	/* Under msptictl run: the answer to Sync follows any StartCapture
	 * the daemon sends us at registration, and opens the start gate. */
	if (gate_is_closed() && register_send_sync(fd, 0) != 0)
		goto fail;
	return 0;
fail:
	register_close();
	return -EPROTO;
}

/* AgentSync: cookie 0 for the start gate, else a device ticket (gate.c). */
static int
register_send_sync(int sock, uint64_t cookie)
{
	Mspti__AgentSync sync = MSPTI__AGENT_SYNC__INIT;

	sync.cookie = cookie;
	return frame_send(sock, MSPTI__MSG_TYPE__MSG_AGENT_SYNC, &sync.base, -1);
}

static int
register_send_update(int sock)
{
	Mspti__AgentUpdate u = MSPTI__AGENT_UPDATE__INIT;
	uint32_t devices[64];

	reg.sent_devices = atomic_load(&reg.devices);
	u.n_devices = register_devices(devices);
	u.devices = devices;
	register_identity(&reg.sent_id);
	u.job_id = reg.sent_id.job;
	u.rank = reg.sent_id.rank;
	u.local_rank = reg.sent_id.local_rank;
	u.world_size = reg.sent_id.world_size;
	return frame_send(sock, MSPTI__MSG_TYPE__MSG_AGENT_UPDATE, &u.base, -1);
}

/* True when the devices or the identity changed since we last said. */
static bool
register_update_due(void)
{
	struct reg_identity now;

	if (atomic_load(&reg.devices) != reg.sent_devices)
		return true;
	register_identity(&now);
	return memcmp(&now, &reg.sent_id, sizeof(now)) != 0;
}

static void
register_ack(int sock, uint64_t id, Mspti__CaptureOp op, int code,
    const char *why, int fd, const struct session_step_info *si)
{
	Mspti__CaptureAck ack = MSPTI__CAPTURE_ACK__INIT;

	ack.session_id = id;
	ack.op = op;
	ack.code = code;
	ack.message = (char *)(why ? why : "");
	ack.first_step = -1;
	if (si != NULL) {
		ack.step = si->step;
		ack.step_period_ns = si->period_ns;
		ack.first_step = si->first;
		ack.fork_lost = si->fork_lost;
		ack.step_source = si->src;
	}
	(void)frame_send(sock, MSPTI__MSG_TYPE__MSG_CAPTURE_ACK, &ack.base, fd);
}

/*
 * Handles one daemon-initiated message; returns false when the connection
 * should end.  fd is a descriptor that came with it (or -1), which this
 * takes.
 */
static bool
register_handle(const struct frame_hdr *h, ProtobufCMessage *msg, int fd)
{
	struct session_step_info si;
	const char *why = NULL;
	int wakefd = -1, rc;

	switch (h->type) {
	case MSPTI__MSG_TYPE__MSG_START_CAPTURE: {
		Mspti__StartCapture *m = (Mspti__StartCapture *)msg;
		struct session_step_cfg sc = { m->steps, m->step_name,
		    m->steps ? m->step_from : -1 };

		if (fd < 0) {
			register_ack(reg.sock, m->session_id,
			    MSPTI__CAPTURE_OP__CAPTURE_START, 1,
			    "StartCapture without a ring", -1, NULL);
			return true;
		}
		rc = session_start(m->session_id, m->kinds, m->domains_off,
		    m->n_domains_off, &sc, fd, &wakefd, &why, &si);
		register_ack(reg.sock, m->session_id,
		    MSPTI__CAPTURE_OP__CAPTURE_START, rc == 0 ? 0 : 1, why,
		    wakefd, &si);
		if (wakefd >= 0)
			close(wakefd);
		if (rc == 0)
			session_prefault();
		return true;
	}
	case MSPTI__MSG_TYPE__MSG_UPDATE_CAPTURE: {
		Mspti__UpdateCapture *m = (Mspti__UpdateCapture *)msg;

		rc = session_update(m->session_id, m->kinds, m->domains_off,
		    m->n_domains_off, m->step_from, &si);
		register_ack(reg.sock, m->session_id,
		    MSPTI__CAPTURE_OP__CAPTURE_UPDATE, rc == 0 ? 0 : 1,
		    rc == 0 ? NULL : "no such session here", -1, &si);
		break;
	}
	case MSPTI__MSG_TYPE__MSG_STOP_CAPTURE: {
		Mspti__StopCapture *m = (Mspti__StopCapture *)msg;

		rc = session_stop(m->session_id, true);
		register_ack(reg.sock, m->session_id,
		    MSPTI__CAPTURE_OP__CAPTURE_STOP, rc == 0 ? 0 : 1,
		    rc == 0 ? NULL : "no such session here", -1, NULL);
		break;
	}
	case MSPTI__MSG_TYPE__MSG_AGENT_SYNC_REP:
		if (((Mspti__AgentSyncReply *)msg)->cookie == 0)
			gate_open();
		else
			gate_device_acked(((Mspti__AgentSyncReply *)msg)->cookie);
		break;
	case MSPTI__MSG_TYPE__MSG_ERROR:
		break;
	default:
		if (fd >= 0)
			close(fd);
		return false;
	}
	if (fd >= 0)
		close(fd);
	return true;
}

/* Serves a registered connection until the daemon goes away. */
static void
register_serve(void)
{
	struct pollfd pf[2];
	struct frame_hdr h;
	ProtobufCMessage *msg;
	uint64_t v;
	bool go_on;
	int rc, fd;

	for (;;) {
		struct session_step_info si;
		uint64_t cookie, sid;

		if (register_update_due() &&
		    register_send_update(reg.sock) != 0)
			break;
		if (gate_device_sync_due(&cookie) &&
		    register_send_sync(reg.sock, cookie) != 0)
			break;
		session_populate_due();
		if (session_first_due(&sid, &si))
			register_ack(reg.sock, sid, MSPTI__CAPTURE_OP__CAPTURE_FIRST,
			    0, NULL, -1, &si);
		pf[0].fd = reg.sock;
		pf[0].events = POLLIN;
		pf[1].fd = reg.wakefd;
		pf[1].events = POLLIN;
		rc = poll(pf, reg.wakefd >= 0 ? 2 : 1, -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			break;
		if (reg.wakefd >= 0 && (pf[1].revents & POLLIN))
			(void)!read(reg.wakefd, &v, sizeof(v));
		if (pf[0].revents == 0)
			continue;
		fd = -1;
		rc = frame_recv(reg.sock, REG_IO_TIMEOUT_MS, &h, &msg, &fd);
		if (rc != 0) {
			log_debug("daemon connection: %s", frame_strerror(rc));
			break;
		}
		log_debug("daemon sent %s", msg_name(h.type));
		go_on = register_handle(&h, msg, fd);
		protobuf_c_message_free_unpacked(msg, NULL);
		if (!go_on)
			break;
	}
	/* The daemon is gone (or misbehaved): stop capturing silently. */
	session_stop(0, false);
	register_close();
	gate_open();
	gate_device_acked(0);
}

/* Makes sure inotify watches the runtime dir; returns false if it cannot. */
static bool
register_watch(void)
{
	if (reg.ino < 0) {
		int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);

		pthread_mutex_lock(&reg.lock);
		reg.ino = fd;
		pthread_mutex_unlock(&reg.lock);
		if (fd < 0)
			return false;
	}
	return inotify_add_watch(reg.ino, agent_config.rundir,
	    IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF) >= 0;
}

/* Closes the inotify descriptor, if any (on this thread, not the app's). */
static void
register_unwatch(void)
{
	int fd;

	pthread_mutex_lock(&reg.lock);
	fd = reg.ino;
	reg.ino = -1;
	pthread_mutex_unlock(&reg.lock);
	if (fd >= 0)
		close(fd);
}

/* Sleeps until agent.sock may have appeared, or timeout_ms passed. */
static void
register_wait(int timeout_ms)
{
	char buf[4096] __attribute__((aligned(8)));
	struct pollfd pf = { reg.ino, POLLIN, 0 };

	if (reg.ino < 0) {
		poll(NULL, 0, timeout_ms);
		return;
	}
	if (poll(&pf, 1, timeout_ms) > 0) {
		/* Let the daemon finish bind() and listen(). */
		while (read(reg.ino, buf, sizeof(buf)) > 0)
			;
		poll(NULL, 0, 20);
	}
}

static void *
register_main(void *arg)
{
	int backoff = REG_BACKOFF_MIN_MS;
	bool first = true;

	util_block_async_signals(NULL);
	/* The clock's checks (CPUID, sysfs) here, not on an app thread. */
	hostclock_init();
	gate_hold_hello(REG_FORK_HOLD_MS);
	/* Tests: a registration that comes late, as on a loaded machine. */
	if (reg_delay_ms > 0)
		poll(NULL, 0, reg_delay_ms);
	for (;;) {
		bool watching = false;
		int rc = register_connect();

		/*
		 * No daemon: after a first short sleep (most short-lived
		 * processes are gone by then), watch the runtime dir and try
		 * once more so a bind in between is not missed.  The watch is
		 * dropped once registered: a process whose exit races with an
		 * inotify watch being set up or torn down waits for an SRCU
		 * grace period (milliseconds) in exit.
		 */
		if (rc != 0 && !first) {
			watching = register_watch();
			rc = register_connect();
		}
		first = false;
		if (rc == 0) {
			register_unwatch();
			backoff = REG_BACKOFF_MIN_MS;
			register_serve();
			/* The daemon went away; it may be restarting. */
			poll(NULL, 0, REG_BACKOFF_MIN_MS);
			continue;
		}
		/* No daemon to wait for: the application goes on, and its
		 * MSTX calls stay inline (no step to count for anyone). */
		gate_open();
		api_mstx_count_steps(false);
		/* A stale socket (daemon killed) also retries on a timer. */
		register_wait(watching && rc == -ENOENT ? REG_WATCH_WAIT_MS :
		    backoff);
		if (backoff < REG_BACKOFF_MAX_MS)
			backoff *= 2;
	}
	return NULL;
}

/* Runs before agent_init, so fork() always takes reg_lock first. */
__attribute__((constructor(200))) static void
register_install_atfork(void)
{
	pthread_atfork(register_prepare_fork, register_parent_fork, NULL);
}

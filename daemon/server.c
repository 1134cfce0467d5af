/*
 * The daemon's process-wide state: the runtime dir and its lock, the two
 * listening sockets, signals, and the event loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "log.h"
#include "util.h"
#include "msptid.h"
#include "devcol.h"
#include "metrics.h"

static void
server_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	peer_reap(arg);
}

/* Gives freed memory back to the system: after a burst of hostile peers
 * or a session, malloc's arenas would otherwise keep the peak. */
static void
server_trim_cb(evutil_socket_t fd, short what, void *arg)
{
	malloc_trim(0);
}

void
server_trim_soon(struct daemon *d)
{
	struct timeval tv = { SERVER_TRIM_DELAY_MS / 1000,
	    (SERVER_TRIM_DELAY_MS % 1000) * 1000 };

	if (d->trim_ev != NULL && !evtimer_pending(d->trim_ev, NULL))
		evtimer_add(d->trim_ev, &tv);
}

struct daemon *
server_create(const char *rundir)
{
	struct daemon *d;

	if ((d = calloc(1, sizeof(*d))) == NULL)
		return NULL;
	if ((d->rundir = strdup(rundir)) == NULL) {
		free(d);
		return NULL;
	}
	d->lockfd = d->agent_lfd = d->ctl_lfd = -1;
	d->lim.max_queued = PEER_MAX_QUEUED;
	d->lim.prehello_per_uid = PEER_MAX_PREHELLO_PER_UID;
	d->lim.hello_timeout_ms = PEER_HELLO_TIMEOUT_MS;
	d->lim.frame_timeout_ms = PEER_FRAME_TIMEOUT_MS;
	d->lim.ring_mem_per_uid = SESS_RING_MEM_PER_UID;
	d->lim.ring_mem_total = SESS_RING_MEM_TOTAL;
	d->lim.write_queue = SESS_WRITE_QUEUE;
	d->next_agent_id = 1;
	d->next_session_id = 1;
	TAILQ_INIT(&d->sessions);
	d->start_ns = util_realtime_ns();
	d->start_mono = util_monotonic_ns();
	TAILQ_INIT(&d->peers);
	TAILQ_INIT(&d->dead_peers);
	TAILQ_INIT(&d->agents);
	if ((d->base = event_base_new()) == NULL) {
		free(d->rundir);
		free(d);
		return NULL;
	}
	if ((d->reap_ev = event_new(d->base, -1, 0, server_reap_cb, d)) ==
	    NULL || (d->trim_ev = evtimer_new(d->base, server_trim_cb, d)) ==
	    NULL || (d->devpoll_ev = evtimer_new(d->base, session_dev_poll_cb,
	    d)) == NULL || (d->devcol = devcol_new(d->base)) == NULL ||
	    (d->metrics = metrics_new(d->base)) == NULL) {
		devcol_free(d->devcol);
		if (d->reap_ev != NULL)
			event_free(d->reap_ev);
		if (d->trim_ev != NULL)
			event_free(d->trim_ev);
		if (d->devpoll_ev != NULL)
			event_free(d->devpoll_ev);
		event_base_free(d->base);
		free(d->rundir);
		free(d);
		return NULL;
	}
	return d;
}

/*
 * Takes the runtime dir's lock.  A live msptid holds it for its lifetime,
 * so a second daemon fails here with the owner's pid; a dead one's lock is
 * released by the kernel, which is what lets us take over its stale sockets.
 */
static int
server_lock(struct daemon *d)
{
	char path[PATH_MAX], buf[32];
	ssize_t n;
	int fd;

	if (util_path(path, sizeof(path), d->rundir, MSPTI_LOCK_FILE) != 0) {
		log_warnx("runtime dir path too long: %s", d->rundir);
		return -1;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_warn("cannot open %s", path);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		log_warnx("another msptid (pid %s) is running on %s",
		    *buf ? buf : "?", d->rundir);
		close(fd);
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
		log_warn("cannot write pid to %s", path);
	d->lockfd = fd;
	return 0;
}

/* Binds a listening socket at rundir/name, replacing a stale one. */
static int
server_bind(struct daemon *d, const char *name)
{
	struct sockaddr_un sun;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (util_path(sun.sun_path, sizeof(sun.sun_path), d->rundir, name) != 0) {
		log_warnx("socket path too long: %s/%s", d->rundir, name);
		return -1;
	}
	if (unlink(sun.sun_path) == 0)
		log_info("removed stale %s", sun.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("socket");
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		log_warn("bind %s", sun.sun_path);
		close(fd);
		return -1;
	}
	/* Anyone may connect: authorization is per request, from SO_PEERCRED. */
	if (chmod(sun.sun_path, 0666) != 0)
		log_warn("chmod %s", sun.sun_path);
	if (listen(fd, 128) != 0) {
		log_warn("listen %s", sun.sun_path);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Out of descriptors (or memory): stop listening instead of retrying a
 * readable listener forever.  The listeners come back when a peer closes
 * (server_accept_resume from peer_free) or after SERVER_ACCEPT_PAUSE_MS.
 */
static void
server_accept_pause(struct daemon *d, int err)
{
	struct timeval tv = { SERVER_ACCEPT_PAUSE_MS / 1000,
	    (SERVER_ACCEPT_PAUSE_MS % 1000) * 1000 };

	d->accept_refused++;
	if (d->accept_paused)
		return;
	d->accept_paused = true;
	event_del(d->agent_lev);
	event_del(d->ctl_lev);
	evtimer_add(d->accept_tv, &tv);
	/* One line per pause, not per connection. */
	if (d->accept_pauses++ % 100 == 0)
		log_warnx("accept: %s: pausing the listeners until a "
		    "descriptor frees (%llu pauses so far)", strerror(err),
		    (unsigned long long)d->accept_pauses);
}

void
server_accept_resume(struct daemon *d)
{
	if (!d->accept_paused)
		return;
	d->accept_paused = false;
	evtimer_del(d->accept_tv);
	event_add(d->agent_lev, NULL);
	event_add(d->ctl_lev, NULL);
}

static void
server_accept_tv_cb(evutil_socket_t fd, short what, void *arg)
{
	server_accept_resume(arg);
}

static void
server_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct daemon *d = arg;
	enum peer_kind kind = lfd == d->agent_lfd ? PEER_AGENT : PEER_CTL;
	int fd;

	/* A bounded batch: the Hellos of those just accepted are read
	 * before more connections count against the per-uid bound. */
	for (int n = 0; n < SERVER_ACCEPT_BATCH; n++) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				server_accept_pause(d, errno);
			else if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				log_warn("accept");
			return;
		}
		if (peer_new(d, kind, fd) == NULL)
			close(fd);
	}
}

static void
server_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	if (sig == SIGHUP) {
		log_info("SIGHUP: nothing to reload");
		return;
	}
	log_info("signal %d: shutting down", (int)sig);
	event_base_loopbreak(d->base);
}

int
server_listen(struct daemon *d)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	struct stat st;

	if (mkdir(d->rundir, 0755) != 0 && errno != EEXIST) {
		log_warn("cannot create runtime dir %s", d->rundir);
		return -1;
	}
	if (stat(d->rundir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		log_warnx("runtime dir %s is not a directory", d->rundir);
		return -1;
	}
	if (server_lock(d) != 0)
		return -1;
	if (sd_sockets(&d->agent_lfd, &d->ctl_lfd) > 0) {
		d->activated = true;
		log_info("using sockets passed by systemd");
	}
	if (d->agent_lfd < 0 &&
	    (d->agent_lfd = server_bind(d, MSPTI_AGENT_SOCK)) < 0)
		return -1;
	if (d->ctl_lfd < 0 && (d->ctl_lfd = server_bind(d, MSPTI_CTL_SOCK)) < 0)
		return -1;
	evutil_make_socket_nonblocking(d->agent_lfd);
	evutil_make_socket_nonblocking(d->ctl_lfd);
	d->agent_lev = event_new(d->base, d->agent_lfd, EV_READ | EV_PERSIST,
	    server_accept_cb, d);
	d->ctl_lev = event_new(d->base, d->ctl_lfd, EV_READ | EV_PERSIST,
	    server_accept_cb, d);
	d->accept_tv = evtimer_new(d->base, server_accept_tv_cb, d);
	if (d->agent_lev == NULL || d->ctl_lev == NULL || d->accept_tv == NULL ||
	    event_add(d->agent_lev, NULL) != 0 || event_add(d->ctl_lev, NULL) != 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < nitems(sigs); i++) {
		d->sigev[i] = evsignal_new(d->base, sigs[i], server_signal_cb, d);
		if (d->sigev[i] == NULL || event_add(d->sigev[i], NULL) != 0)
			return -1;
	}
	return 0;
}

int
server_run(struct daemon *d)
{
	log_info("msptid %s listening on %s", MSPTID_VERSION, d->rundir);
	sd_ready("ready");
	if (sd_watchdog_start(d->base) != 0)
		return -1;
	if (event_base_dispatch(d->base) < 0) {
		log_warnx("event loop failed");
		return -1;
	}
	return 0;
}

/* Closes every peer and removes what we created in the runtime dir. */
void
server_shutdown(struct daemon *d)
{
	char path[PATH_MAX];
	struct peer *p;

	sd_stopping();
	httpmetrics_free(d->http);
	d->http = NULL;
	session_shutdown(d);
	while ((p = TAILQ_FIRST(&d->peers)) != NULL)
		peer_free(p);
	if (!d->activated) {
		if (d->agent_lfd >= 0 && util_path(path, sizeof(path),
		    d->rundir, MSPTI_AGENT_SOCK) == 0)
			unlink(path);
		if (d->ctl_lfd >= 0 && util_path(path, sizeof(path),
		    d->rundir, MSPTI_CTL_SOCK) == 0)
			unlink(path);
	}
	/* The lock file stays: unlinking it would let two daemons lock
	 * different inodes of the same name. */
}

void
server_free(struct daemon *d)
{
	if (d == NULL)
		return;
	for (size_t i = 0; i < nitems(d->sigev); i++)
		if (d->sigev[i] != NULL)
			event_free(d->sigev[i]);
	httpmetrics_free(d->http);
	d->http = NULL;
	if (d->agent_lev != NULL)
		event_free(d->agent_lev);
	if (d->ctl_lev != NULL)
		event_free(d->ctl_lev);
	if (d->accept_tv != NULL)
		event_free(d->accept_tv);
	if (d->agent_lfd >= 0)
		close(d->agent_lfd);
	if (d->ctl_lfd >= 0)
		close(d->ctl_lfd);
	if (d->lockfd >= 0)
		close(d->lockfd);
	peer_reap(d);
	if (d->reap_ev != NULL)
		event_free(d->reap_ev);
	if (d->trim_ev != NULL)
		event_free(d->trim_ev);
	if (d->devpoll_ev != NULL)
		event_free(d->devpoll_ev);
	metrics_free(d->metrics);
	d->metrics = NULL;
	devcol_free(d->devcol);
	d->devcol = NULL;
	event_base_free(d->base);
	free(d->rundir);
	free(d);
}

/*
 * Everything systemd: readiness and status notifications, and sockets
 * passed by socket activation.  Without libsystemd these are no-ops.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#ifdef ENABLE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "log.h"
#include "util.h"
#include "msptid.h"

void
sd_ready(const char *status)
{
#ifdef ENABLE_SYSTEMD
	sd_notifyf(0, "READY=1\nSTATUS=%s\nMAINPID=%lu", status,
	    (unsigned long)getpid());
#endif
}

/* The watchdog timer (sd_watchdog_start); NULL when none was asked for. */
static struct event *sd_wdog_ev;

void
sd_stopping(void)
{
	if (sd_wdog_ev != NULL) {
		event_free(sd_wdog_ev);
		sd_wdog_ev = NULL;
	}
#ifdef ENABLE_SYSTEMD
	sd_notify(0, "STOPPING=1");
#endif
}

#ifdef ENABLE_SYSTEMD
static void
sd_watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
}
#endif

/*
 * When systemd asked for a watchdog (WatchdogSec=, so WATCHDOG_USEC is
 * set), pings it every half period from a timer on the event loop: a
 * callback that blocks or a loop that stops keeps the ping from being
 * sent, and systemd kills and restarts us.  Returns 0, or -1 when the
 * timer cannot be set up.
 */
int
sd_watchdog_start(struct event_base *base)
{
#ifdef ENABLE_SYSTEMD
	uint64_t usec = 0, half;
	struct timeval tv;
	int r;

	if ((r = sd_watchdog_enabled(0, &usec)) < 0) {
		log_warnx("ignoring bad watchdog settings from systemd: %s",
		    strerror(-r));
		return 0;
	}
	if (r == 0 || usec == 0 || sd_wdog_ev != NULL)
		return 0;
	half = usec / 2 > 0 ? usec / 2 : 1;
	tv.tv_sec = (time_t)(half / 1000000);
	tv.tv_usec = (suseconds_t)(half % 1000000);
	if ((sd_wdog_ev = event_new(base, -1, EV_PERSIST, sd_watchdog_cb,
	    NULL)) == NULL || event_add(sd_wdog_ev, &tv) != 0) {
		log_warnx("cannot set up the watchdog timer");
		return -1;
	}
	sd_notify(0, "WATCHDOG=1");
	log_info("watchdog: pinging systemd every %llu ms",
	    (unsigned long long)(half / 1000));
#else
	(void)base;
#endif
	return 0;
}

void
sd_status(const char *fmt, ...)
{
#ifdef ENABLE_SYSTEMD
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sd_notifyf(0, "STATUS=%s", buf);
#else
	(void)fmt;
#endif
}

/*
 * Takes the listening sockets systemd passed.  msptid.socket lists both
 * paths in one unit, so each is recognised by the name it is bound to.
 * Returns how many it took.
 */
int
sd_sockets(int *agent_fd, int *ctl_fd)
{
#ifdef ENABLE_SYSTEMD
	int n, taken = 0;

	n = sd_listen_fds(1);
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		struct sockaddr_un sun;
		socklen_t len = sizeof(sun);
		const char *base;

		memset(&sun, 0, sizeof(sun));
		if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0 ||
		    getsockname(fd, (struct sockaddr *)&sun, &len) != 0) {
			log_warnx("ignoring unexpected descriptor %d from systemd", fd);
			continue;
		}
		base = strrchr(sun.sun_path, '/');
		base = base ? base + 1 : sun.sun_path;
		if (strcmp(base, MSPTI_AGENT_SOCK) == 0 && *agent_fd < 0) {
			*agent_fd = fd;
			taken++;
		} else if (strcmp(base, MSPTI_CTL_SOCK) == 0 && *ctl_fd < 0) {
			*ctl_fd = fd;
			taken++;
		} else
			log_warnx("ignoring unexpected socket %s from systemd",
			    sun.sun_path);
	}
	return taken;
#else
	(void)agent_fd;
	(void)ctl_fd;
	return 0;
#endif
}

/* True when stderr goes to the journal, so lines take "<N>" prefixes. */
bool
sd_journal(void)
{
	return getenv("JOURNAL_STREAM") != NULL;
}

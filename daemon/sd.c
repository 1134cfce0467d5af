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

void
sd_stopping(void)
{
#ifdef ENABLE_SYSTEMD
	sd_notify(0, "STOPPING=1");
#endif
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
 * Takes the listening sockets systemd passed (msptid.socket names them
 * "agent" and "ctl").  Returns how many it took.
 */
int
sd_sockets(int *agent_fd, int *ctl_fd)
{
#ifdef ENABLE_SYSTEMD
	char **names = NULL;
	int n, taken = 0;

	n = sd_listen_fds_with_names(1, &names);
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		if (names != NULL && strcmp(names[i], "agent") == 0 &&
		    *agent_fd < 0) {
			*agent_fd = fd;
			taken++;
		} else if (names != NULL && strcmp(names[i], "ctl") == 0 &&
		    *ctl_fd < 0) {
			*ctl_fd = fd;
			taken++;
		} else
			log_warnx("ignoring unexpected socket %d from systemd", fd);
	}
	if (names != NULL) {
		for (int i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
	return taken;
#else
	return 0;
#endif
}

/* True when stderr goes to the journal, so lines take "<N>" prefixes. */
bool
sd_journal(void)
{
	return getenv("JOURNAL_STREAM") != NULL;
}

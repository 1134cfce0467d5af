/*
 * Logging.  On a terminal messages are prefixed with the program name; under
 * systemd (JOURNAL_STREAM set, or asked for) each line carries a "<N>" syslog
 * priority prefix so journald files it at the right level.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "log.h"

static const char *log_ident = "mspti";
static enum log_dest log_dest = LOG_DEST_STDERR;
static int log_verbose;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void
log_init(const char *ident, enum log_dest dest, int verbose)
{
	log_ident = ident;
	log_dest = dest;
	log_verbose = verbose;
}

void
log_set_verbose(int verbose)
{
	log_verbose = verbose;
}

int
log_get_verbose(void)
{
	return log_verbose;
}

/* Writes one line; prio is a syslog priority (3 err, 4 warning, 6 info, 7 debug). */
static void
log_vwrite(int prio, const char *suffix, const char *fmt, va_list ap)
{
	char msg[1024];

	if (log_dest == LOG_DEST_NONE)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	pthread_mutex_lock(&log_lock);
	if (log_dest == LOG_DEST_JOURNAL)
		fprintf(stderr, "<%d>%s%s%s\n", prio, msg,
		    suffix ? ": " : "", suffix ? suffix : "");
	else
		fprintf(stderr, "%s: %s%s%s\n", log_ident, msg,
		    suffix ? ": " : "", suffix ? suffix : "");
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}

void
log_warn(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(4, strerror(saved), fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(4, NULL, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	if (log_verbose < 1 && log_dest != LOG_DEST_JOURNAL)
		return;
	va_start(ap, fmt);
	log_vwrite(6, NULL, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_verbose < 2)
		return;
	va_start(ap, fmt);
	log_vwrite(7, NULL, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(3, strerror(saved), fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(3, NULL, fmt, ap);
	va_end(ap);
	exit(1);
}

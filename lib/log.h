/* Diagnostics for msptid and msptictl: the one place messages are written. */
#ifndef MSPTI_LOG_H
#define MSPTI_LOG_H

#include <stdarg.h>

enum log_dest {
	LOG_DEST_STDERR,	/* "prog: message" */
	LOG_DEST_JOURNAL,	/* "<N>message", read by journald from stderr */
	LOG_DEST_NONE,		/* silent (the agent, unless MSPTI_DEBUG is set) */
};

void	log_init(const char *ident, enum log_dest dest, int verbose);
void	log_set_verbose(int verbose);
int	log_get_verbose(void);

/* log_warn appends strerror(errno) and preserves errno. */
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2), noreturn));

#endif

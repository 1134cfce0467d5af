/* Small helpers shared by every program: clocks, runtime dir, strings. */
#ifndef MSPTI_UTIL_H
#define MSPTI_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MSPTI_AGENT_SOCK	"agent.sock"
#define MSPTI_CTL_SOCK		"ctl.sock"
#define MSPTI_LOCK_FILE		"msptid.lock"

#ifndef nitems
#define nitems(a)	(sizeof(a) / sizeof((a)[0]))
#endif

uint64_t	util_realtime_ns(void);
uint64_t	util_monotonic_ns(void);

/* The runtime dir: arg if given, else $MSPTID_RUNTIME_DIR, else
 * RUNSTATEDIR/msptid.  Returns a static string. */
const char	*util_runtime_dir(const char *arg);

/* Joins dir and name into out; returns -ENAMETOOLONG if it does not fit
 * (sun_path is short). */
int	util_path(char *out, size_t outlen, const char *dir, const char *name);

/* Connects a SOCK_STREAM|SOCK_CLOEXEC Unix socket to path.  With
 * nonblock, the socket stays non-blocking.  Returns the fd or -errno. */
int	util_unix_connect(const char *path, int nonblock);

/* Parses "500ms", "10s", "2m", "1h" or plain seconds into ns; -1 on error. */
int64_t	util_parse_duration(const char *s);
/* Parses "8M", "64K", "1G" or bytes; -1 on error. */
int64_t	util_parse_size(const char *s);

/* Writes s as a JSON string literal (quotes included) to f. */
void	util_json_str(FILE *f, const char *s);

/* Formats a duration in ns as "1.5s", "12ms" into buf. */
const char	*util_fmt_duration(uint64_t ns, char *buf, size_t len);

#endif

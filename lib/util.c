/* Helpers shared by every program. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "util.h"

#ifndef RUNSTATEDIR
#define RUNSTATEDIR "/run"
#endif

uint64_t
util_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *
util_runtime_dir(const char *arg)
{
	const char *env;

	if (arg != NULL && *arg != '\0')
		return arg;
	if ((env = getenv("MSPTID_RUNTIME_DIR")) != NULL && *env != '\0')
		return env;
	return RUNSTATEDIR "/msptid";
}

int
util_path(char *out, size_t outlen, const char *dir, const char *name)
{
	int n = snprintf(out, outlen, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

int
util_unix_connect(const char *path, int nonblock)
{
	struct sockaddr_un sun;
	int fd, err;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 &&
	    errno != EINPROGRESS) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int64_t
util_parse_duration(const char *s)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v < 0)
		return -1;
	if (*end == '\0' || strcmp(end, "s") == 0)
		v *= 1e9;
	else if (strcmp(end, "ms") == 0)
		v *= 1e6;
	else if (strcmp(end, "us") == 0)
		v *= 1e3;
	else if (strcmp(end, "ns") == 0)
		;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		v *= 60e9;
	else if (strcmp(end, "h") == 0)
		v *= 3600e9;
	else
		return -1;
	if (v > 9.2e18)
		return -1;
	return (int64_t)v;
}

int64_t
util_parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (s == NULL || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	default:
		return -1;
	}
	if (*end != '\0') {
		end++;
		if (*end == 'B' || *end == 'b' ||
		    ((*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b')))
			end += (*end == 'i' || *end == 'I') ? 2 : 1;
		if (*end != '\0')
			return -1;
	}
	if (v > (1ull << (62 - shift)))
		return -1;
	return (int64_t)(v << shift);
}

void
util_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

const char *
util_fmt_duration(uint64_t ns, char *buf, size_t len)
{
	if (ns >= 3600000000000ull)
		snprintf(buf, len, "%.1fh", ns / 3.6e12);
	else if (ns >= 60000000000ull)
		snprintf(buf, len, "%.1fm", ns / 6e10);
	else if (ns >= 1000000000ull)
		snprintf(buf, len, "%.1fs", ns / 1e9);
	else if (ns >= 1000000ull)
		snprintf(buf, len, "%.1fms", ns / 1e6);
	else
		snprintf(buf, len, "%.1fus", ns / 1e3);
	return buf;
}

/*
 * Files msptictl writes: a capture's trace (client_output_*: created
 * under a temporary name, renamed once the daemon took it), and what
 * export and report write (client_out_*: the same for a regular file,
 * renamed only once all of it was written; a FIFO or a device as it is).
 * A failed or refused output never touches an existing file.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "client.h"

/*
 * A temporary file next to o->path (".NAME.XXXXXX", O_EXCL), mode less
 * the umask, as open(2) would make it: its descriptor, or -errno.
 */
static int
output_tmp(struct client_output *o, mode_t mode)
{
	char *slash = strrchr(o->path, '/');
	mode_t um;
	int fd, rc;

	if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%.*s.%s.XXXXXX",
	    slash ? (int)(slash - o->path + 1) : 0, o->path,
	    slash ? slash + 1 : o->path) >= sizeof(o->tmp)) {
		o->tmp[0] = '\0';
		return -ENAMETOOLONG;
	}
	/* mkostemp creates 0600; then the mode asked for. */
	if ((fd = mkostemp(o->tmp, O_CLOEXEC)) < 0) {
		rc = -errno;
		o->tmp[0] = '\0';
		return rc;
	}
	um = umask(0);
	umask(um);
	if (fchmod(fd, mode & ~um) != 0) {
		rc = -errno;
		close(fd);
		client_output_abort(o);
		return rc;
	}
	return fd;
}

/* The local time now as YYYYmmdd-HHMMSS, for a default output name. */
void
client_stamp(char *buf, size_t len)
{
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(buf, len, "%Y%m%d-%H%M%S", &tm);
}

/* Traces hold command lines and timings: owner only unless asked. */
static mode_t client_file_mode = 0600;

/* --file-mode OCTAL (at most 0777). */
int
client_parse_file_mode(const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 8);
	if (errno != 0 || end == arg || *end != '\0' || v < 0 || v > 0777)
		return -1;
	client_file_mode = (mode_t)v;
	return 0;
}

/*
 * Opens the session's output as the requester: output, or a new
 * ./mspti-YYYYmmdd-HHMMSS-PID.mspti.  The descriptor is of a temporary
 * file next to it (client_output_commit renames it).  An existing output
 * that is not a regular file (a FIFO, a device) is refused: the daemon
 * writes only regular files.  Returns the descriptor, or < 0 after
 * printing why.
 */
int
client_output_open(struct client_output *o, const char *output)
{
	struct stat st;
	int fd;

	if (output == NULL) {
		char stamp[32];

		client_stamp(stamp, sizeof(stamp));
		snprintf(o->path, sizeof(o->path), "mspti-%s-%ld.mspti", stamp,
		    (long)getpid());
	} else if ((size_t)snprintf(o->path, sizeof(o->path), "%s", output) >=
	    sizeof(o->path)) {
		fprintf(stderr, "msptictl: output path too long\n");
		return -1;
	}
	if (stat(o->path, &st) == 0 && !S_ISREG(st.st_mode)) {
		fprintf(stderr, "msptictl: %s is not a regular file; traces "
		    "are written to regular files only\n", o->path);
		return -1;
	}
	if ((fd = output_tmp(o, client_file_mode)) < 0)
		fprintf(stderr, "msptictl: cannot create %s: %s\n", o->path,
		    strerror(-fd));
	return fd;
}


/* The daemon took the file: it gets its name.  0, or -1 after saying why
 * (the temporary is removed then). */
int
client_output_commit(struct client_output *o)
{
	if (o->tmp[0] == '\0')
		return 0;
	if (rename(o->tmp, o->path) != 0) {
		fprintf(stderr, "msptictl: cannot rename %s to %s: %s\n",
		    o->tmp, o->path, strerror(errno));
		client_output_abort(o);
		return -1;
	}
	o->tmp[0] = '\0';
	return 0;
}

/* Refused or failed: the temporary goes, an existing file stays. */
void
client_output_abort(struct client_output *o)
{
	if (o->tmp[0] != '\0')
		unlink(o->tmp);
	o->tmp[0] = '\0';
}

/* What client_out_* returned, in words. */
const char *
client_out_strerror(int rc)
{
	if (rc == -ENXIO)
		return "a FIFO that no reader has open";
	return strerror(-rc);
}

/* fopencookie's write: write(2), the first error kept for the caller. */
static ssize_t
out_write(void *cookie, const char *buf, size_t n)
{
	struct client_output *o = cookie;
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(o->fd, buf + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (o->werr == 0)
				o->werr = w < 0 ? errno : EIO;
			return done > 0 ? (ssize_t)done : -1;
		}
		done += (size_t)w;
	}
	return (ssize_t)n;
}

static int
out_close(void *cookie)
{
	struct client_output *o = cookie;
	int rc = close(o->fd);

	o->fd = -1;
	if (rc != 0 && o->werr == 0)
		o->werr = errno;
	return rc;
}

/*
 * Opens path ("-": stdout) for an export or report to write: a regular
 * file, or a new one, under a temporary name next to it (mode 0666 less
 * the umask, as fopen makes it); a FIFO only when a reader has it open
 * (-ENXIO at once otherwise, not a wait for ever); another file (a
 * device) as it is.  Returns the stream, or NULL with *err -errno.
 */
FILE *
client_out_open(struct client_output *o, const char *path, int *err)
{
	static const cookie_io_functions_t io = {
		.write = out_write, .close = out_close,
	};
	struct stat st, lst;
	FILE *f;
	int fl;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	if (strcmp(path, "-") == 0)
		return stdout;
	if ((size_t)snprintf(o->path, sizeof(o->path), "%s", path) >=
	    sizeof(o->path)) {
		*err = -ENAMETOOLONG;
		return NULL;
	}
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* O_NONBLOCK: a FIFO with no reader fails (ENXIO). */
		o->fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (o->fd >= 0 && ((fl = fcntl(o->fd, F_GETFL)) == -1 ||
		    fcntl(o->fd, F_SETFL, fl & ~O_NONBLOCK) == -1)) {
			fl = errno;
			close(o->fd);
			o->fd = -1;
			errno = fl;
		}
		if (o->fd < 0) {
			*err = -errno;
			return NULL;
		}
	} else if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) &&
	    realpath(path, o->path) == NULL) {
		/* A link to a file: the file it names is replaced, not
		 * the link. */
		*err = -errno;
		return NULL;
	} else if ((o->fd = output_tmp(o, 0666)) < 0) {
		*err = o->fd;
		o->fd = -1;
		return NULL;
	}
	if ((f = fopencookie(o, "w", io)) == NULL) {
		*err = -errno;
		close(o->fd);
		client_output_abort(o);
		return NULL;
	}
	/* Large writes: the exports write megabytes. */
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	return f;
}

/*
 * Ends what client_out_open began, rc the writer's result: flushes and
 * closes f, and renames the temporary over the path when all of it was
 * written, else removes it.  Returns rc, or the write's own error (the
 * first write(2) that failed: ENOSPC, EFBIG, ... rather than the
 * writer's EIO).
 */
int
client_out_close(struct client_output *o, FILE *f, int rc)
{
	if (f == stdout)
		return fflush(stdout) != 0 && rc == 0 ? -errno : rc;
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	if (o->werr != 0 && (rc == 0 || rc == -EIO))
		rc = -o->werr;
	if (rc != 0)
		client_output_abort(o);
	else if (o->tmp[0] != '\0' && rename(o->tmp, o->path) != 0) {
		rc = -errno;
		client_output_abort(o);
	}
	o->tmp[0] = '\0';
	return rc;
}

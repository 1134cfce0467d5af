/*
 * What msptid can and cannot do with the privileges it runs with.
 *
 * The hardened unit (systemd/msptid.service) runs it as its own user with
 * no capabilities, and everything works: sockets come from systemd, rings
 * and outputs arrive as descriptors, device channels are mode 0666.  The
 * one thing lost is reading another user's /proc/<pid>/exe, which needs
 * CAP_SYS_PTRACE: the executable of such an agent stays what it reported
 * in its Hello, and `status` says so.  Where the link can be read, it
 * replaces what the agent reported.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "msptid.h"

#define PRIV_CAP_SYS_PTRACE	19	/* linux/capability.h */

/* Whether CAP_SYS_PTRACE is in our effective set (/proc/self/status). */
bool
priv_can_read_any_exe(void)
{
	char line[256];
	unsigned long long eff;
	bool have = false;
	FILE *f;

	if ((f = fopen("/proc/self/status", "re")) == NULL)
		return geteuid() == 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			have = (eff >> PRIV_CAP_SYS_PTRACE) & 1;
			break;
		}
	fclose(f);
	return have;
}

/*
 * Checks a newly registered agent's executable against the kernel's.
 * When /proc/<pid>/exe cannot be read (another uid, no CAP_SYS_PTRACE)
 * the reported one stays and exe_checked is false.
 */
void
priv_agent_exe(struct agent *a)
{
	char path[64], buf[PATH_MAX];
	ssize_t n;
	char *exe;

	a->exe_checked = false;
	snprintf(path, sizeof(path), "/proc/%ld/exe", (long)a->cred.pid);
	if ((n = readlink(path, buf, sizeof(buf) - 1)) < 0) {
		log_debug("agent %llu: %s: %s; keeping the reported %s",
		    (unsigned long long)a->id, path, strerror(errno), a->exe);
		return;
	}
	buf[n] = '\0';
	/* As registry.c does with what peers send: no control characters
	 * in what we print. */
	for (ssize_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = '?';
	a->exe_checked = true;
	if (a->exe != NULL && strcmp(a->exe, buf) == 0)
		return;
	if ((exe = strdup(buf)) == NULL)
		return;
	log_info("agent %llu (pid %ld) reported executable %s, runs %s",
	    (unsigned long long)a->id, (long)a->cred.pid,
	    a->exe != NULL ? a->exe : "(none)", exe);
	free(a->exe);
	a->exe = exe;
}

/*
 * The status lines for what we cannot do, into buf (one sentence per
 * line); returns how many.
 */
size_t
priv_limits(const struct daemon *d, char *buf, size_t len, char **lines,
    size_t max)
{
	const struct agent *a;
	unsigned unchecked = 0;
	size_t n = 0;

	if (max == 0 || len == 0 || priv_can_read_any_exe())
		return 0;
	TAILQ_FOREACH(a, &d->agents, entry)
		if (!a->exe_checked)
			unchecked++;
	snprintf(buf, len, "no CAP_SYS_PTRACE: executables of other users' "
	    "agents are as they reported them (%u now)", unchecked);
	lines[n++] = buf;
	return n;
}

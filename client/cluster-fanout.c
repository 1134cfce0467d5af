/*
 * The cluster fan-out's reach (cluster-int.h): the nodes of a hosts file
 * or a Slurm job (squeue), and msptictl run on each of them, in parallel,
 * through one `srun --overlap --jobid ID -N n --ntasks-per-node=1 --label`
 * step or one BatchMode ssh per host, under a small sh wrapper that names
 * the node, reads its clock and reports the exit code.  Each node's
 * stdout (its msptictl's JSON) and last complaint are collected, srun's
 * 1024-byte line cuts joined.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "client.h"
#include "cluster-int.h"

/*
 * Runs on each node: $1 is the node->session map ("-" when none), the
 * rest the msptictl command line, in which @N stands for the node's name
 * and @S for its session.  The @clock line is the node's CLOCK_REALTIME
 * as our programs there see it (lib/util.h's test hooks: skew and drift).
 */
static const char cluster_wrapper[] =
    "n=${MSPTI_NODE:-${SLURMD_NODENAME:-$(hostname)}}; m=$1; shift; s=\n"
    "for kv in $m; do case $kv in \"$n=\"*) s=${kv#*=};; esac; done\n"
    "t=$(date +%s%N); d=$((t - ${MSPTI_TEST_CLOCK_DRIFT_T0_NS:-$t}))\n"
    "p=${MSPTI_TEST_CLOCK_DRIFT_PPB:-0}; t=$((t + ${MSPTI_TEST_CLOCK_SKEW_NS:-0}"
    " + d / 1000000000 * p + d % 1000000000 * p / 1000000000))\n"
    "echo \"@node $n\"; echo \"@clock $t\"\n"
    "if [ \"$m\" != - ] && [ -z \"$s\" ]; then\n"
    "  echo \"no session of this capture on $n\" >&2; echo \"@rc 3\"; exit 0; fi\n"
    "for a; do shift; case $a in *@N*) a=$(printf %s \"$a\" | sed \"s/@N/$n/g\");;\n"
    "  @S) a=$s;; esac; set -- \"$@\" \"$a\"; done\n"
    "prev=; for a; do case $prev in --output) mkdir -p \"$(dirname \"$a\")\";; esac; prev=$a; done\n"
    "\"$@\" 2>&1; echo \"@rc $?\"\n";

/* ---- running commands ---- */

/* Appends a line of text to a growable buffer. */
void
cluster_fanout_buf_add(char **buf, size_t *len, const char *s, size_t n)
{
	char *nb = realloc(*buf, *len + n + 2);

	if (nb == NULL)
		return;
	memcpy(nb + *len, s, n);
	*len += n;
	nb[(*len)++] = '\n';
	nb[*len] = '\0';
	*buf = nb;
}

struct proc {
	pid_t		 pid;
	int		 fd[2];		/* stdout, stderr */
	char		*part[2];	/* incomplete line */
	size_t		 plen[2];
	int		 node;		/* the node, -1: srun's tasks say */
	int		 status;
};

static pid_t
spawn(char **argv, int fds[2])
{
	int out[2], err[2];
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(err, O_CLOEXEC) != 0) {
		close(out[0]);
		close(out[1]);
		return -1;
	}
	if ((pid = fork()) == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		/* Its own process group, so a timeout can end it whole. */
		setpgid(0, 0);
		execvp(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (pid < 0) {
		close(out[0]);
		close(err[0]);
		return -1;
	}
	fds[0] = out[0];
	fds[1] = err[0];
	return pid;
}

/* Runs argv, returns its stdout (NUL-terminated) or NULL; *status its exit. */
static char *
run_capture(char **argv, int *status, char *err, size_t errlen)
{
	int fds[2];
	char *buf = NULL, tmp[4096];
	size_t len = 0;
	ssize_t n;
	pid_t pid = spawn(argv, fds);

	if (pid < 0) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(errno));
		return NULL;
	}
	while ((n = read(fds[0], tmp, sizeof(tmp))) > 0) {
		char *nb = realloc(buf, len + (size_t)n + 1);

		if (nb == NULL)
			break;
		buf = nb;
		memcpy(buf + len, tmp, (size_t)n);
		len += (size_t)n;
		buf[len] = '\0';
	}
	n = read(fds[1], tmp, sizeof(tmp) - 1);
	tmp[n > 0 ? n : 0] = '\0';
	tmp[strcspn(tmp, "\n")] = '\0';
	snprintf(err, errlen, "%.200s", tmp);
	close(fds[0]);
	close(fds[1]);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	if (buf == NULL)
		buf = strdup("");
	return buf;
}

int
cluster_fanout_add(struct cluster *cl, const char *name, size_t len)
{
	struct cluster_node *nn;

	if (cl->nnodes >= CLUSTER_MAX_NODES)
		return -1;
	if ((nn = realloc(cl->nodes, (cl->nnodes + 1) * sizeof(*nn))) == NULL)
		return -1;
	cl->nodes = nn;
	memset(&nn[cl->nnodes], 0, sizeof(*nn));
	nn[cl->nnodes].name = strndup(name, len);
	nn[cl->nnodes].rc = -1;
	nn[cl->nnodes].task = -1;
	cl->nnodes++;
	return 0;
}

/* Adds each whitespace-separated word of text as a node. */
static int
cluster_add_words(struct cluster *cl, const char *text)
{
	for (const char *p = text; *p;) {
		size_t n;

		p += strspn(p, " \t\r\n");
		if (*p == '#') {
			p += strcspn(p, "\n");
			continue;
		}
		if ((n = strcspn(p, " \t\r\n#")) == 0)
			break;
		if (cluster_fanout_add(cl, p, n) != 0)
			return -1;
		p += n;
	}
	return 0;
}

/* The job's nodes from squeue and scontrol; an exit code on failure. */
int
cluster_fanout_resolve(struct cluster *cl)
{
	char err[256], *list, *names;
	int st;

	if (cl->hosts != NULL) {
		/* A FIFO nobody writes to: an error, not a wait. */
		int fd = util_open_input(cl->hosts);
		FILE *f = NULL;
		char line[1024];

		if (fd >= 0 && (f = fdopen(fd, "r")) == NULL) {
			int e = errno;

			close(fd);
			fd = -e;
		}
		if (f == NULL)
			return client_usage_error(cl->e, "cannot read hosts "
			    "file %s: %s", cl->hosts, util_input_strerror(fd));
		while (fgets(line, sizeof(line), f) != NULL) {
			line[strcspn(line, "#")] = '\0';
			if (cluster_add_words(cl, line) != 0)
				break;
		}
		fclose(f);
		if (cl->nnodes == 0)
			return client_usage_error(cl->e, "hosts file %s names "
			    "no host", cl->hosts);
		return EXIT_OK;
	}
	{
		char *sq[] = { "squeue", "-h", "-t", "R", "-j", (char *)cl->job,
		    "-o", "%N", NULL };

		if ((list = run_capture(sq, &st, err, sizeof(err))) == NULL ||
		    !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "msptictl: cannot resolve Slurm job %s: %s\n",
			    cl->job, *err ? err : "squeue failed");
			free(list);
			return EXIT_NOTFOUND;
		}
	}
	list[strcspn(list, " \t\r\n")] = '\0';
	if (*list == '\0') {
		fprintf(stderr, "msptictl: Slurm job %s is not running\n", cl->job);
		free(list);
		return EXIT_NOTFOUND;
	}
	{
		char *sc[] = { "scontrol", "show", "hostnames", list, NULL };

		names = run_capture(sc, &st, err, sizeof(err));
	}
	free(list);
	if (names == NULL || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "msptictl: cannot expand the nodes of job %s: %s\n",
		    cl->job, err);
		free(names);
		return EXIT_FAIL;
	}
	cluster_add_words(cl, names);
	free(names);
	return cl->nnodes > 0 ? EXIT_OK : EXIT_NOTFOUND;
}

/* Single-quotes s for a remote shell. */
static void
shell_quote(char **buf, size_t *len, const char *s)
{
	size_t need = *len + 4 * strlen(s) + 4;
	char *nb = realloc(*buf, need), *o;

	if (nb == NULL)
		return;
	*buf = nb;
	o = nb + *len;
	*o++ = ' ';
	*o++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else
			*o++ = *s;
	}
	*o++ = '\'';
	*o = '\0';
	*len = (size_t)(o - nb);
}

static struct cluster_node *
node_by_task(struct cluster *cl, int task)
{
	for (size_t i = 0; i < cl->nnodes; i++)
		if (cl->nodes[i].task == task)
			return &cl->nodes[i];
	return NULL;
}

/* One line from a process: srun's are "TASK: text". */
static void
cluster_line(struct cluster *cl, struct proc *p, int stream, char *line)
{
	struct cluster_node *n = NULL;
	int task = -1;

	if (p->node >= 0)
		n = &cl->nodes[p->node];
	else {
		char *s = line, *end;
		long t;

		s += strspn(s, " ");
		t = strtol(s, &end, 10);
		if (end != s && end[0] == ':' && end[1] == ' ') {
			task = (int)t;
			line = end + 2;
			n = node_by_task(cl, task);
		}
	}
	if (stream == 0 && strncmp(line, "@node ", 6) == 0) {
		if (n == NULL && task >= 0)
			for (size_t i = 0; i < cl->nnodes; i++)
				if (strcmp(cl->nodes[i].name, line + 6) == 0) {
					cl->nodes[i].task = task;
					n = &cl->nodes[i];
				}
		return;
	}
	if (n == NULL) {
		/* srun's own complaint: every node not yet heard of gets it. */
		if (*line)
			snprintf(cl->fanerr, sizeof(cl->fanerr), "%s", line);
		return;
	}
	if (stream == 0 && strncmp(line, "@clock ", 7) == 0) {
		n->recv_ns = (int64_t)util_realtime_ns();
		n->node_ns = strtoll(line + 7, NULL, 10);
		return;
	}
	if (stream == 0 && strncmp(line, "@rc ", 4) == 0) {
		n->rc = atoi(line + 4);
		return;
	}
	if (stream == 0 && n->open && !cl->raw) {
		/* srun cuts a task's lines every 1024 bytes, labelling each
		 * piece: a piece of a reply joins it, without the newline. */
		struct json_object *v;

		if (n->outlen > 0 && n->out[n->outlen - 1] == '\n')
			n->out[--n->outlen] = '\0';
		if (n->outlen < CLUSTER_MAX_REPLY)
			cluster_fanout_buf_add(&n->out, &n->outlen, line, strlen(line));
		n->open = (v = jparse(n->out)) == NULL;
		json_object_put(v);
		return;
	}
	if (stream == 0 && (line[0] == '{' || line[0] == '[' || cl->raw)) {
		size_t len = strlen(line);

		/* A node's reply is small; one that is not is cut, not grown.
		 * Raw output (sessions) passes through as lines: a piece
		 * after one srun cut at 1024 bytes continues its line. */
		if (cl->raw && n->cut && n->outlen > 0 &&
		    n->out[n->outlen - 1] == '\n')
			n->out[--n->outlen] = '\0';
		if (cl->raw)
			n->cut = p->node < 0 && len >= 1024;
		if (n->outlen < CLUSTER_MAX_REPLY)
			cluster_fanout_buf_add(&n->out, &n->outlen, line, len);
		if (!cl->raw && p->node < 0 && strlen(line) >= 1024) {
			struct json_object *v;

			n->open = (v = jparse(n->out)) == NULL;
			json_object_put(v);
		}
		if (!cl->raw || strncmp(line, "msptictl: ", 10) != 0)
			return;
	}
	if (*line) {
		free(n->err);
		n->err = strdup(strncmp(line, "msptictl: ", 10) == 0 ?
		    line + 10 : line);
	}
}

static void
cluster_read(struct cluster *cl, struct proc *p, int stream)
{
	char tmp[8192], *nl, *b;
	ssize_t r = read(p->fd[stream], tmp, sizeof(tmp));
	size_t off = 0;

	if (r <= 0) {
		if (p->plen[stream] > 0)
			cluster_line(cl, p, stream, p->part[stream]);
		close(p->fd[stream]);
		p->fd[stream] = -1;
		return;
	}
	b = realloc(p->part[stream], p->plen[stream] + (size_t)r + 1);
	if (b == NULL)
		return;
	memcpy(b + p->plen[stream], tmp, (size_t)r);
	p->plen[stream] += (size_t)r;
	b[p->plen[stream]] = '\0';
	p->part[stream] = b;
	while ((nl = memchr(b + off, '\n', p->plen[stream] - off)) != NULL) {
		*nl = '\0';
		cluster_line(cl, p, stream, b + off);
		off = (size_t)(nl - b) + 1;
	}
	memmove(b, b + off, p->plen[stream] - off + 1);
	p->plen[stream] -= off;
}

int64_t
cluster_fanout_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Runs margv (msptictl's command line, with @N/@S) on every node, map
 * the "node=session ..." list or "-", and collects each node's output.
 */
void
cluster_fanout(struct cluster *cl, char **margv, const char *map)
{
	struct proc *procs;
	size_t nprocs = 0, nargs = 0, alive;
	struct pollfd *pfd;
	int64_t deadline = cluster_fanout_now_ms() + cl->timeout_ms;

	while (margv[nargs] != NULL)
		nargs++;
	{
		int64_t now = (int64_t)util_realtime_ns();

		for (size_t i = 0; i < cl->nnodes; i++)
			cl->nodes[i].launch_ns = now;
	}
	procs = calloc(cl->nnodes, sizeof(*procs));
	pfd = calloc(2 * cl->nnodes, sizeof(*pfd));
	if (procs == NULL || pfd == NULL) {
		snprintf(cl->fanerr, sizeof(cl->fanerr), "out of memory");
		goto out;
	}
	if (cl->kind != NULL) {
		char nn[32], **argv = calloc(nargs + 16, sizeof(*argv));
		char *nodelist = NULL;
		size_t a = 0, nl = 0;

		if (argv == NULL)
			goto out;
		for (size_t i = 0; i < cl->nnodes; i++) {
			char *b = realloc(nodelist, nl + strlen(cl->nodes[i].name) + 2);

			if (b == NULL)
				break;
			nodelist = b;
			nl += (size_t)sprintf(nodelist + nl, "%s%s", i ? "," : "",
			    cl->nodes[i].name);
		}
		snprintf(nn, sizeof(nn), "-N%zu", cl->nnodes);
		argv[a++] = "srun";
		argv[a++] = "--overlap";
		argv[a++] = "--jobid";
		argv[a++] = (char *)cl->job;
		argv[a++] = nn;
		argv[a++] = "--ntasks-per-node=1";
		argv[a++] = "-w";
		argv[a++] = nodelist;
		argv[a++] = "--label";
		argv[a++] = "--quiet";
		argv[a++] = "sh";
		argv[a++] = "-c";
		argv[a++] = (char *)cluster_wrapper;
		argv[a++] = "sh";
		argv[a++] = (char *)map;
		for (size_t i = 0; i < nargs; i++)
			argv[a++] = margv[i];
		argv[a] = NULL;
		procs[0].node = -1;
		procs[0].pid = spawn(argv, procs[0].fd);
		if (procs[0].pid < 0)
			snprintf(cl->fanerr, sizeof(cl->fanerr), "cannot run srun: %s",
			    strerror(errno));
		else
			nprocs = 1;
		free(argv);
		free(nodelist);
	} else {
		const char *ssh = getenv("MSPTI_SSH");
		char *sshcmd = strdup(ssh != NULL && *ssh ? ssh : "ssh");

		for (size_t i = 0; sshcmd != NULL && i < cl->nnodes; i++) {
			char *argv[64], *remote = NULL, *save = NULL, *tok, *copy;
			size_t a = 0, rl = 0;

			copy = strdup(sshcmd);
			for (tok = strtok_r(copy, " ", &save); tok != NULL && a < 50;
			    tok = strtok_r(NULL, " ", &save))
				argv[a++] = tok;
			argv[a++] = "-o";
			argv[a++] = "BatchMode=yes";
			argv[a++] = "-o";
			argv[a++] = "ConnectTimeout=10";
			argv[a++] = cl->nodes[i].name;
			/* MSPTI_NODE: the name the hosts file gives, which the
			 * manifest and the session map use. */
			remote = strdup("env");
			rl = strlen(remote);
			{
				char kv[300];

				snprintf(kv, sizeof(kv), "MSPTI_NODE=%s",
				    cl->nodes[i].name);
				shell_quote(&remote, &rl, kv);
			}
			shell_quote(&remote, &rl, "sh");
			shell_quote(&remote, &rl, "-c");
			shell_quote(&remote, &rl, cluster_wrapper);
			shell_quote(&remote, &rl, "sh");
			shell_quote(&remote, &rl, map);
			for (size_t k = 0; k < nargs; k++)
				shell_quote(&remote, &rl, margv[k]);
			argv[a++] = remote;
			argv[a] = NULL;
			procs[nprocs].node = (int)i;
			procs[nprocs].pid = spawn(argv, procs[nprocs].fd);
			if (procs[nprocs].pid >= 0)
				nprocs++;
			else {
				free(cl->nodes[i].err);
				cl->nodes[i].err = strdup("cannot run ssh");
			}
			free(remote);
			free(copy);
		}
		free(sshcmd);
	}
	for (;;) {
		size_t np = 0;
		int64_t left = deadline - cluster_fanout_now_ms();
		int r;

		alive = 0;
		for (size_t i = 0; i < nprocs; i++)
			for (int s = 0; s < 2; s++)
				if (procs[i].fd[s] >= 0) {
					pfd[np].fd = procs[i].fd[s];
					pfd[np].events = POLLIN;
					np++;
					alive++;
				}
		if (alive == 0)
			break;
		if (left <= 0) {
			snprintf(cl->fanerr, sizeof(cl->fanerr),
			    "no reply within %d s", cl->timeout_ms / 1000);
			for (size_t i = 0; i < nprocs; i++)
				kill(-procs[i].pid, SIGKILL);
			break;
		}
		r = poll(pfd, np, (int)(left > INT_MAX ? INT_MAX : left));
		if (r < 0 && errno != EINTR)
			break;
		np = 0;
		for (size_t i = 0; i < nprocs; i++)
			for (int s = 0; s < 2; s++)
				if (procs[i].fd[s] >= 0 &&
				    (pfd[np++].revents & (POLLIN | POLLHUP | POLLERR)))
					cluster_read(cl, &procs[i], s);
	}
	for (size_t i = 0; i < nprocs; i++) {
		for (int s = 0; s < 2; s++) {
			if (procs[i].fd[s] >= 0)
				close(procs[i].fd[s]);
			free(procs[i].part[s]);
		}
		while (waitpid(procs[i].pid, &procs[i].status, 0) < 0 &&
		    errno == EINTR)
			;
		if (procs[i].node >= 0 && cl->nodes[procs[i].node].rc < 0 &&
		    cl->nodes[procs[i].node].err == NULL) {
			char why[64];

			snprintf(why, sizeof(why), "ssh exited with %d",
			    WIFEXITED(procs[i].status) ?
			    WEXITSTATUS(procs[i].status) : 255);
			/* Killed at the deadline: say that. */
			cl->nodes[procs[i].node].err = strdup(
			    WIFSIGNALED(procs[i].status) && *cl->fanerr ?
			    cl->fanerr : why);
		}
	}
out:
	free(procs);
	free(pfd);
}

/* Why node n failed, in a few words. */
const char *
cluster_fanout_why(const struct cluster *cl, const struct cluster_node *n)
{
	if (n->err != NULL)
		return n->err;
	if (n->rc < 0)
		return *cl->fanerr ? cl->fanerr : "no reply";
	return "failed";
}


/*
 * msptictl run: launches a command with the agent preloaded, under a job
 * id of its own, and captures it and everything it spawns from their
 * first runtime call; stops the session when the command exits and exits
 * with the command's status, as a shell would.
 *
 * Order matters: the job session is started before the command, so every
 * agent joins it at registration (elastic job selector), and the agents
 * hold their first runtime call until their config has arrived (the start
 * gate, agent/gate.c, enabled by MSPTI_RUN_GATE_MS).  Without a running
 * msptid, run starts a private one on a temporary runtime dir, in its own
 * process group so the terminal's Ctrl-C does not reach it, and removes
 * both when the capture is finalized.
 *
 * Signals: the command stays in our process group, so the terminal's
 * Ctrl-C reaches it directly; we only forward what was sent to us alone
 * (kill), and never die of it ourselves, so the capture is finalized.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "record.h"
#include "util.h"
#include "client.h"

#ifndef MSPTI_LIBDIR
#define MSPTI_LIBDIR		"/usr/local/lib"
#endif
#ifndef MSPTI_SBINDIR
#define MSPTI_SBINDIR		"/usr/local/sbin"
#endif

#define RUN_GATE_MS		"5000"	/* default start gate, MSPTI_RUN_GATE_MS */
#define RUN_DAEMON_UP_MS	10000	/* a private msptid answering */
#define RUN_DAEMON_DOWN_MS	10000	/* its shutdown before SIGKILL */
#define RUN_STOP_MS		60000	/* StopSession reply */

static const int run_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

/* The command's pid while it runs; the first signal that came before. */
static volatile sig_atomic_t run_child;
static volatile sig_atomic_t run_early_sig;

struct run {
	struct client	*c;
	char		 rundir[PATH_MAX];	/* the daemon used */
	char		 tmpdir[PATH_MAX];	/* private daemon's, or "" */
	pid_t		 daemon;		/* private daemon, or 0 */
	char		 agent[PATH_MAX];	/* libmspti.so */
	char		 job[64];
	struct client_output out;		/* trace file */
	uint64_t	 session;
	bool		 json_open;		/* run's --json object begun */
};

static void
run_signal_cb(int sig, siginfo_t *si, void *uc)
{
	pid_t pid = run_child;
	int saved = errno;

	(void)uc;
	/* The terminal signals the whole foreground group, the command
	 * included: only what was addressed to us is forwarded. */
	if (pid > 0 && si->si_code != SI_KERNEL)
		kill(pid, sig);
	else if (pid == 0 && run_early_sig == 0)
		run_early_sig = sig;
	errno = saved;
}

static void
run_signals_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = run_signal_cb;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < nitems(run_signals); i++)
		sigaction(run_signals[i], &sa, NULL);
}

/* In a child before exec: the signals we caught act as usual again,
 * ignored INT and TERM included, since run forwards those on purpose. */
static void
run_signals_default(void)
{
	for (size_t i = 0; i < nitems(run_signals); i++) {
		struct sigaction old;

		sigaction(run_signals[i], NULL, &old);
		if (old.sa_handler != SIG_IGN || run_signals[i] == SIGINT ||
		    run_signals[i] == SIGTERM)
			signal(run_signals[i], SIG_DFL);
	}
}

static void
run_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * Finds a file we ship: the path in env var envname if set, else the
 * first existing one of rel (relative to this binary's directory: the
 * build tree, a relocated install), else the configured install path.
 * Returns 0 with an absolute path in out, or -1 after printing why.
 */
static int
run_locate(const char *what, const char *envname, const char *const *rel,
    size_t nrel, const char *installed, char *out, size_t len)
{
	char exe[PATH_MAX], cand[PATH_MAX * 2], *slash;
	const char *v = getenv(envname);
	ssize_t n;

	if (v != NULL && *v != '\0') {
		if (realpath(v, out) == NULL || access(out, R_OK) != 0) {
			fprintf(stderr, "msptictl run: %s=%s: %s\n", envname, v,
			    strerror(errno));
			return -1;
		}
		return 0;
	}
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL)
			*slash = '\0';
		for (size_t i = 0; i < nrel; i++) {
			snprintf(cand, sizeof(cand), "%s/%s", exe, rel[i]);
			if (access(cand, R_OK) == 0 &&
			    realpath(cand, out) != NULL)
				return 0;
		}
	}
	if (access(installed, R_OK) == 0 && strlen(installed) < len) {
		snprintf(out, len, "%s", installed);
		return 0;
	}
	fprintf(stderr, "msptictl run: cannot find %s (looked next to msptictl "
	    "and at %s; set %s)\n", what, installed, envname);
	return -1;
}

/*
 * Looks name up as execvp would: 0 when it can be executed, else ENOENT
 * or EACCES (found, but not executable), as a shell reports 127 and 126.
 */
static int
run_lookup(const char *name)
{
	const char *path, *p, *end;
	char cand[PATH_MAX];
	struct stat st;
	int err = ENOENT;

	if (*name == '\0')
		return ENOENT;
	if (strchr(name, '/') != NULL) {
		if (stat(name, &st) != 0)
			return errno == EACCES ? EACCES : ENOENT;
		if (S_ISDIR(st.st_mode) || access(name, X_OK) != 0)
			return EACCES;
		return 0;
	}
	if ((path = getenv("PATH")) == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path;; p = end + 1) {
		size_t dl;

		end = strchr(p, ':');
		dl = end != NULL ? (size_t)(end - p) : strlen(p);
		if ((int)snprintf(cand, sizeof(cand), "%.*s%s%s", (int)dl, p,
		    dl ? "/" : "", name) < (int)sizeof(cand) &&
		    stat(cand, &st) == 0 && !S_ISDIR(st.st_mode)) {
			if (access(cand, X_OK) == 0)
				return 0;
			err = EACCES;
		}
		if (end == NULL)
			break;
	}
	return err;
}

/* Removes the private runtime dir and what the daemon left in it. */
static void
run_rmdir(const char *dir)
{
	char p[PATH_MAX * 2];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			if (unlink(p) != 0 && errno == EISDIR)
				rmdir(p);
		}
		closedir(d);
	}
	if (rmdir(dir) != 0)
		fprintf(stderr, "msptictl run: cannot remove %s: %s\n", dir,
		    strerror(errno));
}

/* Stops the private daemon (its shutdown finalizes any session left)
 * and removes its runtime dir. */
static void
run_daemon_stop(struct run *r)
{
	int status;

	if (r->daemon > 0) {
		kill(r->daemon, SIGTERM);
		for (int ms = 0; waitpid(r->daemon, &status, WNOHANG) == 0;
		    ms += 10) {
			if (ms >= RUN_DAEMON_DOWN_MS) {
				fprintf(stderr, "msptictl run: the private "
				    "msptid did not stop; killing it\n");
				kill(r->daemon, SIGKILL);
				waitpid(r->daemon, &status, 0);
				break;
			}
			run_sleep_ms(10);
		}
		r->daemon = 0;
	}
	if (*r->tmpdir != '\0') {
		run_rmdir(r->tmpdir);
		*r->tmpdir = '\0';
	}
}

/*
 * Starts a private msptid on a new temporary runtime dir and waits until
 * its ctl.sock answers (the connection is kept in r->c).  Returns an exit
 * code after printing why it could not.
 */
static int
run_daemon_start(struct run *r)
{
	static const char *const rel[] = { "../daemon/msptid", "msptid",
	    "../sbin/msptid" };
	char msptid[PATH_MAX], sock[PATH_MAX * 2], log[PATH_MAX * 2];
	const char *tmp = getenv("TMPDIR");
	pid_t parent = getpid();
	int status, fd;

	if (run_locate("msptid", "MSPTID_PATH", rel, nitems(rel),
	    MSPTI_SBINDIR "/msptid", msptid, sizeof(msptid)) != 0)
		return EXIT_FAIL;
	/* Socket paths are short (108 bytes): fall back to /tmp. */
	if (tmp == NULL || *tmp == '\0' || strlen(tmp) > 64)
		tmp = "/tmp";
	snprintf(r->tmpdir, sizeof(r->tmpdir), "%s/msptid-run.XXXXXX", tmp);
	if (mkdtemp(r->tmpdir) == NULL) {
		fprintf(stderr, "msptictl run: cannot create a runtime dir in "
		    "%s: %s\n", tmp, strerror(errno));
		*r->tmpdir = '\0';
		return EXIT_FAIL;
	}
	snprintf(log, sizeof(log), "%s/msptid.log", r->tmpdir);
	switch ((r->daemon = fork())) {
	case -1:
		fprintf(stderr, "msptictl run: fork: %s\n", strerror(errno));
		r->daemon = 0;
		run_daemon_stop(r);
		return EXIT_FAIL;
	case 0:
		/* Its own group: the terminal's Ctrl-C is for the command;
		 * and it goes when we go, whatever happens to us. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		run_signals_default();
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDNAMES");
		if ((fd = open("/dev/null", O_RDONLY)) >= 0) {
			dup2(fd, 0);
			close(fd);
		}
		if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600)) >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execl(msptid, "msptid", "--foreground", "--runtime-dir",
		    r->tmpdir, (char *)NULL);
		_exit(127);
	}
	snprintf(sock, sizeof(sock), "%s/" MSPTI_CTL_SOCK, r->tmpdir);
	for (int ms = 0;; ms += 10) {
		if ((fd = util_unix_connect(sock, 0)) >= 0)
			break;
		if (waitpid(r->daemon, &status, WNOHANG) == r->daemon) {
			r->daemon = 0;
			fprintf(stderr, "msptictl run: the private msptid (%s) "
			    "exited at start\n", msptid);
			run_daemon_stop(r);
			return EXIT_FAIL;
		}
		if (ms >= RUN_DAEMON_UP_MS || run_early_sig != 0) {
			if (run_early_sig == 0)
				fprintf(stderr, "msptictl run: the private "
				    "msptid did not come up\n");
			run_daemon_stop(r);
			return EXIT_FAIL;
		}
		run_sleep_ms(10);
	}
	r->c->sock = fd;
	snprintf(r->rundir, sizeof(r->rundir), "%s", r->tmpdir);
	r->c->rundir = r->rundir;
	fprintf(stderr, "msptictl run: no msptid is running; using a private "
	    "one on %s for this command\n", r->tmpdir);
	return EXIT_OK;
}

/* Connects to the daemon of the runtime dir, or starts a private one. */
static int
run_connect(struct run *r)
{
	char sock[PATH_MAX * 2];
	int fd;

	if (realpath(r->c->rundir, r->rundir) == NULL)
		snprintf(r->rundir, sizeof(r->rundir), "%s", r->c->rundir);
	snprintf(sock, sizeof(sock), "%s/" MSPTI_CTL_SOCK, r->rundir);
	fd = util_unix_connect(sock, 0);
	if (fd >= 0) {
		r->c->sock = fd;
		r->c->rundir = r->rundir;
		return EXIT_OK;
	}
	if (fd != -ENOENT && fd != -ECONNREFUSED && fd != -ENOTDIR) {
		fprintf(stderr, "msptictl run: cannot connect to %s: %s\n", sock,
		    strerror(-fd));
		return EXIT_FAIL;
	}
	return run_daemon_start(r);
}

/* Starts the job session that every process of the command joins. */
static int
run_start_session(struct run *r, Mspti__SessionConfig *cfg,
    const char *output)
{
	Mspti__StartSession req = MSPTI__START_SESSION__INIT;
	Mspti__SessionTarget tg = MSPTI__SESSION_TARGET__INIT;
	Mspti__StartSessionReply *rep;
	ProtobufCMessage *msg;
	int fd, rc;

	snprintf(r->job, sizeof(r->job), "run-%ld-%llx", (long)getpid(),
	    (unsigned long long)util_realtime_ns());
	if ((fd = client_output_open(&r->out, output)) < 0)
		return EXIT_FAIL;
	tg.job_id = r->job;
	req.target = &tg;
	req.config = cfg;
	req.output = r->out.path;
	rc = client_request_fd(r->c, MSPTI__MSG_TYPE__MSG_START_SESSION,
	    &req.base, fd, MSPTI__MSG_TYPE__MSG_START_SESSION_REP, &msg, 30000);
	close(fd);
	if (rc != EXIT_OK) {
		client_output_abort(&r->out);
		return rc;
	}
	rep = (Mspti__StartSessionReply *)msg;
	r->session = rep->session != NULL ? rep->session->session_id : 0;
	protobuf_c_message_free_unpacked(msg, NULL);
	if (r->session == 0) {
		fprintf(stderr, "msptictl run: msptid did not start a session\n");
		client_output_abort(&r->out);
		return EXIT_FAIL;
	}
	/* Nothing to say until the end; the stop asks on a new connection. */
	close(r->c->sock);
	r->c->sock = -1;
	return EXIT_OK;
}

/* Sets the child's environment: agent preloaded, our job, our daemon. */
static void
run_child_env(const struct run *r)
{
	const char *pre = getenv("LD_PRELOAD");
	const char *agent = r->agent;
	char *v;

#ifdef MSPTI_ASAN_RUNTIME
	/* Sanitizer build: the agent needs the ASan runtime loaded first. */
	if (asprintf(&v, "%s:%s", MSPTI_ASAN_RUNTIME, r->agent) > 0)
		agent = v;
#endif
	if (pre != NULL && *pre != '\0' && strstr(pre, r->agent) == NULL) {
		if (asprintf(&v, "%s:%s", agent, pre) > 0)
			setenv("LD_PRELOAD", v, 1);
	} else if (pre == NULL || *pre == '\0')
		setenv("LD_PRELOAD", agent, 1);
	setenv("MSPTI_JOB_ID", r->job, 1);
	setenv("MSPTID_RUNTIME_DIR", r->rundir, 1);
	setenv("MSPTI_RUN_GATE_MS", RUN_GATE_MS, 0);
}

/*
 * Runs the command and waits for it.  Returns its exit code as a shell
 * gives it (128 + signal when killed), 127/126 when it could not be
 * executed (*execfail set), or -1 when fork failed.
 */
static int
run_command(struct run *r, char **argv, bool *execfail)
{
	sigset_t set, old;
	int pfd[2], err = 0, status;
	pid_t pid;
	ssize_t n;

	*execfail = false;
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		fprintf(stderr, "msptictl run: pipe: %s\n", strerror(errno));
		return -1;
	}
	sigemptyset(&set);
	for (size_t i = 0; i < nitems(run_signals); i++)
		sigaddset(&set, run_signals[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) == 0) {
		close(pfd[0]);
		run_signals_default();
		sigprocmask(SIG_SETMASK, &old, NULL);
		run_child_env(r);
		/* --json: our stdout is the JSON; the command's goes to
		 * stderr (msptictl(1), doc/run.md). */
		if (r->c->json)
			dup2(2, 1);
		execvp(argv[0], argv);
		err = errno;
		(void)!write(pfd[1], &err, sizeof(err));
		_exit(err == EACCES || err == ENOEXEC ? 126 : 127);
	}
	if (pid > 0)
		run_child = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(pfd[1]);
	if (pid < 0) {
		fprintf(stderr, "msptictl run: fork: %s\n", strerror(errno));
		close(pfd[0]);
		return -1;
	}
	/* A signal that came while we set up goes to the command now. */
	if (run_early_sig != 0)
		kill(pid, run_early_sig);
	while ((n = read(pfd[0], &err, sizeof(err))) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (n == (ssize_t)sizeof(err)) {
		*execfail = true;
		fprintf(stderr, "msptictl run: %s: %s\n", argv[0],
		    err == ENOENT ? "command not found" : strerror(err));
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			run_child = 0;
			return -1;
		}
	run_child = 0;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* Stops the session and prints where the capture went (stderr: stdout
 * belongs to the command; with --json the start of run's JSON object on
 * stdout, which cmd_run_exec ends); the state is returned in *finalized. */
static int
run_stop_session(struct run *r, bool quiet, bool *finalized)
{
	Mspti__StopSession req = MSPTI__STOP_SESSION__INIT;
	Mspti__SessionInfo *i;
	ProtobufCMessage *msg;
	uint64_t lost = 0;
	int rc;

	*finalized = false;
	req.session_id = r->session;
	rc = client_request_fd(r->c, MSPTI__MSG_TYPE__MSG_STOP_SESSION,
	    &req.base, -1, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &msg, RUN_STOP_MS);
	if (rc != EXIT_OK)
		return rc;
	i = (Mspti__SessionInfo *)msg;
	*finalized = strcmp(i->state, "finalized") == 0;
	for (size_t k = 0; k < i->n_losses; k++)
		lost += i->losses[k];
	if (quiet) {
		/* The command never ran: nothing to point at. */
	} else if (r->c->json) {
		printf("{\"session\":");
		client_json_session(i);
		r->json_open = true;
	} else {
		fprintf(stderr, "msptictl run: session %llu %s: %zu process(es), "
		    "%llu records, %llu lost%s%s\n",
		    (unsigned long long)i->session_id, i->state, i->n_targets,
		    (unsigned long long)i->records, (unsigned long long)lost,
		    i->error != NULL && *i->error ? ": " : "",
		    i->error != NULL ? i->error : "");
		if (lost > 0) {
			/* Which stage lost them: stop's "losses:" line.  The
			 * last stage is the one a user cannot guess. */
			fputs("msptictl run: losses:", stderr);
			client_fprint_losses(stderr, i->losses, i->n_losses);
			if (i->n_losses > LOSS_DEVICE_UNMATCHED &&
			    i->losses[LOSS_DEVICE_UNMATCHED] > 0)
				fputs(" (launches whose device tasks never "
				    "reached msptid: msptid's log says why)",
				    stderr);
			fputc('\n', stderr);
		}
		/* --steps: a rank that joined late says what it missed. */
		for (size_t k = 0; k < i->n_targets; k++)
			if (i->step_from >= 0 && i->targets[k]->rank >= 0 &&
			    i->targets[k]->first_step != i->step_from &&
			    (strstr(i->targets[k]->message, "missed") ||
			    strstr(i->targets[k]->message, "none captured")))
				fprintf(stderr, "msptictl run: rank %d (pid %u): "
				    "%s\n", i->targets[k]->rank,
				    i->targets[k]->pid, i->targets[k]->message);
		fprintf(stderr, "msptictl run: trace: %s\n", r->out.path);
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return *finalized ? EXIT_OK : EXIT_FAIL;
}

/* --report[=SECTIONS]: the report verb's own code on the new file. */
static void
run_report(struct client *c, const char *path, const char *sections)
{
	char *argv[5];
	int argc = 0;

	argv[argc++] = (char *)"report";
	if (strcmp(sections, "all") != 0) {
		argv[argc++] = (char *)"--section";
		argv[argc++] = (char *)sections;
	}
	argv[argc++] = (char *)path;
	argv[argc] = NULL;
	fflush(stdout);
	optind = 1;
	(void)cmd_report_entry.exec(c, argc, argv);
	fflush(stdout);
}

static int
cmd_run_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		CLIENT_CONFIG_OPTIONS,
		{ "report", optional_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const agent_rel[] = {
		"../agent/.libs/libmspti.so", "../lib/libmspti.so",
		"../lib64/libmspti.so",
	};
	const struct cmd_entry *e = &cmd_run_entry;
	Mspti__SessionConfig cfg __attribute__((cleanup(client_config_free))) =
	    MSPTI__SESSION_CONFIG__INIT;
	struct run r;
	const char *output = NULL, *report = NULL;
	char kinds[256];
	bool execfail, finalized;
	int ch, rc, code;

	memset(&r, 0, sizeof(r));
	r.c = c;
	/* "+": the command's own options are not ours. */
	while ((ch = client_getopt(e, argc, argv,
	    "+" CLIENT_CONFIG_OPTSTRING "j", opts)) != -1) {
		if ((rc = client_config_option(e, ch, optarg, &cfg, &output,
		    kinds, sizeof(kinds))) != 1) {
			if (rc != 0)
				return rc;
			continue;
		}
		switch (ch) {
		case 'r':
			/* The summary: what was captured, the hottest ops,
			 * the step breakdown per rank, the verdict, advice. */
			report = optarg != NULL && *optarg ? optarg :
			    "summary,top_kernels,ranks,slow_rank,advice";
			break;
		case 'j':
			c->json = true;
			break;
		default:
			return client_opt_exit(e, ch);
		}
	}
	if (optind >= argc) {
		client_usage_error(e, "no command to run");
		return EXIT_USAGE;
	}
	argv += optind;
	/* A command that cannot run is refused before anything starts. */
	if ((rc = run_lookup(argv[0])) != 0) {
		fprintf(stderr, "msptictl run: %s: %s\n", argv[0],
		    rc == ENOENT ? "command not found" : strerror(rc));
		return rc == EACCES ? 126 : 127;
	}
	if (run_locate("the agent (libmspti.so)", "MSPTI_AGENT_PATH",
	    agent_rel, nitems(agent_rel), MSPTI_LIBDIR "/libmspti.so", r.agent,
	    sizeof(r.agent)) != 0)
		return EXIT_FAIL;
	run_signals_install();
	if ((rc = run_connect(&r)) != EXIT_OK)
		return run_early_sig ? 128 + run_early_sig : rc;
	if ((rc = run_start_session(&r, &cfg, output)) != EXIT_OK) {
		run_daemon_stop(&r);
		return rc;
	}
	code = run_command(&r, argv, &execfail);
	rc = run_stop_session(&r, execfail, &finalized);
	/* The trace gets its name once the command ran: a command that
	 * could not run leaves an existing file as it was. */
	if (execfail)
		client_output_abort(&r.out);
	else if (client_output_commit(&r.out) != 0)
		finalized = false;
	/* --json: one object, {"session", "trace", "exit_code", "report"}. */
	if (r.json_open) {
		printf(",\"trace\":");
		util_json_str(stdout, r.out.path);
		printf(",\"exit_code\":%d%s", code, report != NULL &&
		    finalized ? ",\"report\":" : "}\n");
	}
	if (report != NULL && finalized && !execfail)
		run_report(c, r.out.path, report);
	if (r.json_open && report != NULL && finalized)
		printf("}\n");
	run_daemon_stop(&r);
	if (code < 0)
		return EXIT_FAIL;
	return code;
}

const struct cmd_entry cmd_run_entry = {
	.name = "run",
	.usage = "[--kinds LIST] [--duration D] [--steps N] [--step-name NAME]\n"
	    "    [--start-step K] [--output FILE] [--file-mode 0600] [--buffer 8M] "
	    "[--mode stream|ring]\n"
	    "    [--domains +a,-b] [--max-size S] [--report[=SECTIONS|all]]\n"
	    "    [--json] -- COMMAND [ARGS...]\n"
	    "  --json: the stdout of msptictl is one JSON object (session, "
	    "trace,\n  exit_code, report); the command's stdout goes to "
	    "stderr.",
	.summary = "run a command and capture it and every process it starts",
	.exec = cmd_run_exec,
};

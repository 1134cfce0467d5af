/*
 * msptictl: one file per verb (cmd-<verb>.c), each exporting one struct
 * cmd_entry collected in the table in msptictl.c.
 */
#ifndef MSPTICTL_H
#define MSPTICTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "frame.h"

/* Exit codes (DESIGN.md). */
#define EXIT_OK		0
#define EXIT_FAIL	1
#define EXIT_USAGE	2
#define EXIT_NOTFOUND	3

struct client {
	const char	*rundir;
	bool		 json;
	int		 sock;
	bool		 quiet_timeout;	/* the verb words a reply timeout */
	bool		 timed_out;	/* the last request's reply timed out */
	/* The verb the user ran: the daemon's usage errors are shown as
	 * its own ("run" sends a StartSession whose errors say "start"). */
	const char	*verb;
};

struct cmd_entry {
	const char	*name;
	const char	*usage;		/* after "usage: msptictl NAME " */
	const char	*summary;
	bool		 cluster;	/* takes --cluster/--hosts (cluster.c) */
	int		(*exec)(struct client *, int argc, char **argv);
};

/* client_getopt's answers besides getopt_long's (client_opt_exit). */
#define CLIENT_OPT_HELP		(-2)
#define CLIENT_OPT_BAD		(-3)
#define CLIENT_OPT_CLUSTER	0x300

/* msptictl.c */
const struct cmd_entry *client_cmd_find(const char *name);
/* The verb's usage (--help) on f. */
void	client_usage(const struct cmd_entry *, FILE *f);
/* Every usage error: one line "msptictl VERB: WHAT (see msptictl VERB
 * --help)" on stderr (e NULL: the top level); returns EXIT_USAGE. */
int	client_usage_error(const struct cmd_entry *, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* getopt_long for a verb, with -h/--help and the cluster options added
 * and every refusal reported by client_usage_error. */
int	client_getopt(const struct cmd_entry *, int argc, char **argv,
	    const char *optstring, const struct option *opts);
int	client_opt_exit(const struct cmd_entry *, int ch);
int	client_parse_uint(const struct cmd_entry *, const char *opt,
	    const char *arg, unsigned long max, unsigned long *v);
int	client_connect(struct client *);
int	client_request(struct client *, uint16_t type,
	    const ProtobufCMessage *req, uint16_t reply_type,
	    ProtobufCMessage **reply);
/* As client_request, with a descriptor passed along (fd >= 0) and a reply
 * timeout in ms (-1: wait as long as it takes). */
int	client_request_fd(struct client *, uint16_t type,
	    const ProtobufCMessage *req, int fd, uint16_t reply_type,
	    ProtobufCMessage **reply, int timeout_ms);
/* Lets a verb's options and operands interleave ("stop 3 --json"). */
void	client_rescan(int *argc, char ***argv);
/* Prints a SessionInfo reply (text or JSON), frees it, and returns 0 when
 * the session finalized, else 1. */
int	client_session_result(const struct client *, ProtobufCMessage *msg);
const char *client_user(uint32_t uid, char *buf, size_t len);

/* client-table.c: text tables with columns as wide as their cells. */
struct client_table;
struct client_table *client_table_new(size_t ncols, const char *const *header);
void	client_table_free(struct client_table *);
void	client_table_cell(struct client_table *, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
size_t	client_table_rows(const struct client_table *);
void	client_table_print_row(const struct client_table *, size_t row,
	    FILE *f);
void	client_table_print(const struct client_table *, FILE *f);

/* cmd-sessions.c: shared by the session verbs. */
void	client_print_session(const struct client *, const Mspti__SessionInfo *);
void	client_print_acks(const struct client *, Mspti__TargetAck **, size_t);
void	client_json_session(const Mspti__SessionInfo *);
void	client_json_acks(Mspti__TargetAck **, size_t);
const char *client_step_source(Mspti__TargetAck **, size_t);
/* " stage=N" for each stage of a loss vector that lost any, to f. */
void	client_fprint_losses(FILE *f, const uint64_t *losses, size_t n);
int	client_parse_session(const struct cmd_entry *, const char *arg,
	    uint64_t *id);
int	client_parse_pids(const char *arg, uint32_t **pids, size_t *n);
/* Frees what the option parsers allocated (for cleanup attributes). */
void	client_free_strv(char **v, size_t n);
void	client_config_free(Mspti__SessionConfig *cfg);
/* Splits "+a,-b,c" into on (a, c) and off (b) lists; 0 or -1. */
int	client_split_signed(const char *arg, char ***on, size_t *non,
	    char ***off, size_t *noff);

/* cmd-start.c: the session config options start and run share. */
#define CLIENT_CONFIG_OPTSTRING	"k:d:s:N:K:o:b:m:D:M:F:"
/* start's short options (cmd-start.c; the cluster fan-out reads them). */
#define CLIENT_START_OPTSTRING	"p:J:R:a" CLIENT_CONFIG_OPTSTRING "wA:j"
#define CLIENT_CONFIG_OPTIONS						\
	{ "kinds", required_argument, NULL, 'k' },			\
	{ "duration", required_argument, NULL, 'd' },			\
	{ "steps", required_argument, NULL, 's' },			\
	{ "step-name", required_argument, NULL, 'N' },			\
	{ "start-step", required_argument, NULL, 'K' },			\
	{ "output", required_argument, NULL, 'o' },			\
	{ "buffer", required_argument, NULL, 'b' },			\
	{ "mode", required_argument, NULL, 'm' },			\
	{ "domains", required_argument, NULL, 'D' },			\
	{ "max-size", required_argument, NULL, 'M' },			\
	{ "file-mode", required_argument, NULL, 'F' }
int	client_config_option(const struct cmd_entry *, int ch, const char *arg,
	    Mspti__SessionConfig *cfg, const char **output, char *kinds,
	    size_t kindslen);
/*
 * output.c: a trace file being created is written under a temporary name
 * (O_EXCL, mode 0600 or --file-mode, less the umask) in the target's
 * directory, renamed over path only once the daemon accepted it, so a
 * refused or failed request never touches an existing file.
 */
struct client_output {
	char	path[PATH_MAX];
	char	tmp[PATH_MAX];
	int	fd;		/* client_out_*: the file written */
	int	werr;		/* client_out_*: the first write's errno */
};
int	client_output_open(struct client_output *, const char *output);
int	client_output_commit(struct client_output *);
void	client_output_abort(struct client_output *);
int	client_parse_file_mode(const char *arg);
void	client_stamp(char *buf, size_t len);
/* An export's or report's output, the same way for a regular file (see
 * output.c). */
FILE	*client_out_open(struct client_output *, const char *path, int *err);
int	client_out_close(struct client_output *, FILE *f, int rc);
const char *client_out_strerror(int rc);

/* cluster.c: capture verbs over all nodes of a job (--cluster/--hosts);
 * its fan-out and manifest files share cluster-int.h. */
bool	cluster_wanted(const char *verb, int argc, char **argv);
int	cluster_exec(struct client *, const char *verb, int argc, char **argv);
/* One node's answer to cluster_run. */
struct cluster_reply {
	char	*name;
	char	*out;		/* its stdout lines starting with '{' */
	size_t	 outlen;
	char	*why;		/* why it failed, when rc != 0 */
	int	 rc;		/* its command's exit code, -1: no answer */
};
int	cluster_run(const struct cmd_entry *, const char *kind,
	    const char *hosts, const char *job, int timeout_ms, char **margv,
	    struct cluster_reply **out, size_t *n);
const char	*cluster_self_exe(void);

/* cluster-report.c: msptictl report --cluster/--hosts DIR. */
struct analysis;
struct analysis_opts;
int	cluster_report(const struct cmd_entry *, const char *kind,
	    const char *hosts, const char *job, int timeout_ms,
	    bool allow_partial, const struct analysis_opts *o,
	    const char *dir, struct analysis **out);
/* Base64 (RFC 4648) of a partial result bundle for a node's reply. */
char	*cluster_report_b64enc(const void *buf, size_t len);
/* Decodes; NULL on a bad character.  *len: the bytes. */
void	*cluster_report_b64dec(const char *s, size_t n, size_t *len);

/* cmd-*.c */
extern const struct cmd_entry cmd_status_entry;
extern const struct cmd_entry cmd_list_entry;
extern const struct cmd_entry cmd_report_entry;
extern const struct cmd_entry cmd_export_entry;

/* cmd-report.c: loads argv[optind..] into an analysis and runs it. */
struct analysis;
struct analysis	*client_analyse(const struct cmd_entry *,
	    const struct analysis_opts *, int argc, char **argv);
/* Prints the INCOMPLETE INPUT banner and the warnings of a (run). */
void	client_analyse_warn(const struct cmd_entry *, struct analysis *a);
/* The options report and export share: --world-size N (w), --align
 * auto|always|never (a), --no-align (N); client_analysis_opt applies
 * one (0), refuses its value (an exit code) or is not one (-1). */
#define CLIENT_ANALYSIS_OPTS \
	{ "world-size", required_argument, NULL, 'w' }, \
	{ "align", required_argument, NULL, 'a' }, \
	{ "no-align", no_argument, NULL, 'N' }
int	client_analysis_opt(const struct cmd_entry *, int ch, const char *arg,
	    struct analysis_opts *o);

extern const struct cmd_entry cmd_start_entry;
extern const struct cmd_entry cmd_stop_entry;
extern const struct cmd_entry cmd_retarget_entry;
extern const struct cmd_entry cmd_sessions_entry;
extern const struct cmd_entry cmd_wait_entry;
extern const struct cmd_entry cmd_snapshot_entry;
extern const struct cmd_entry cmd_metrics_entry;
extern const struct cmd_entry cmd_run_entry;
extern const struct cmd_entry cmd_help_entry;	/* msptictl.c */

#endif

/*
 * msptictl: one file per verb (cmd-<verb>.c), each exporting one struct
 * cmd_entry collected in the table in msptictl.c.
 */
#ifndef MSPTICTL_H
#define MSPTICTL_H

#include <stdbool.h>
#include <stdint.h>

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
};

struct cmd_entry {
	const char	*name;
	const char	*usage;
	const char	*summary;
	int		(*exec)(struct client *, int argc, char **argv);
};

/* msptictl.c */
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
void	client_usage_error(const struct cmd_entry *, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
const char *client_user(uint32_t uid, char *buf, size_t len);

/* cmd-sessions.c: shared by the session verbs. */
void	client_print_session(const struct client *, const Mspti__SessionInfo *);
void	client_print_acks(const struct client *, Mspti__TargetAck **, size_t);
void	client_json_session(const Mspti__SessionInfo *);
void	client_json_acks(Mspti__TargetAck **, size_t);
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
 * A trace file being created: written under a temporary name (O_EXCL,
 * mode 0600 or --file-mode, less the umask) in the target's directory,
 * renamed over path only once the daemon accepted it, so a refused or
 * failed request never touches an existing file.
 */
struct client_output {
	char	path[PATH_MAX];
	char	tmp[PATH_MAX];
};
int	client_output_open(struct client_output *, const char *output);
int	client_output_commit(struct client_output *);
void	client_output_abort(struct client_output *);
int	client_parse_file_mode(const char *arg);

/* cluster.c: capture verbs over all nodes of a job (--cluster/--hosts). */
bool	cluster_wanted(const char *verb, int argc, char **argv);
int	cluster_exec(struct client *, const char *verb, int argc, char **argv);

/* cmd-*.c */
extern const struct cmd_entry cmd_status_entry;
extern const struct cmd_entry cmd_list_entry;
extern const struct cmd_entry cmd_report_entry;
extern const struct cmd_entry cmd_export_entry;

/* cmd-report.c: loads argv[optind..] into an analysis and runs it. */
struct analysis;
struct analysis_opts;
struct analysis	*client_analyse(const struct cmd_entry *,
	    const struct analysis_opts *, int argc, char **argv);
extern const struct cmd_entry cmd_start_entry;
extern const struct cmd_entry cmd_stop_entry;
extern const struct cmd_entry cmd_retarget_entry;
extern const struct cmd_entry cmd_sessions_entry;
extern const struct cmd_entry cmd_wait_entry;
extern const struct cmd_entry cmd_snapshot_entry;
extern const struct cmd_entry cmd_metrics_entry;
extern const struct cmd_entry cmd_run_entry;

#endif

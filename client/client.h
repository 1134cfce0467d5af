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
void	client_usage_error(const struct cmd_entry *, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
const char *client_user(uint32_t uid, char *buf, size_t len);

/* cmd-*.c */
extern const struct cmd_entry cmd_status_entry;
extern const struct cmd_entry cmd_list_entry;

#endif

/* msptictl snapshot: writes a ring-mode session's flight recorder to a
 * file the CLI opens (as the requester) and passes to the daemon. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "client.h"

static int
cmd_snapshot_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "file-mode", required_argument, NULL, 'F' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cmd_entry *e = &cmd_snapshot_entry;
	Mspti__SnapshotSession req = MSPTI__SNAPSHOT_SESSION__INIT;
	ProtobufCMessage *msg;
	const char *output = NULL;
	struct client_output out;
	const char *path = out.path;
	char name[128];
	int ch, rc, fd;

	client_rescan(&argc, &argv);
	while ((ch = client_getopt(e, argc, argv, "o:F:j", opts)) != -1) {
		switch (ch) {
		case 'o':
			output = optarg;
			break;
		case 'F':
			if (client_parse_file_mode(optarg) != 0) {
				client_usage_error(e, "bad file mode '%s'",
				    optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			c->json = true;
			break;
		default:
			return client_opt_exit(e, ch);
		}
	}
	if (optind + 1 != argc) {
		client_usage_error(e, "give one SESSION");
		return EXIT_USAGE;
	}
	if (client_parse_session(e, argv[optind], &req.session_id))
		return EXIT_USAGE;
	if (output == NULL) {
		char stamp[32];

		client_stamp(stamp, sizeof(stamp));
		snprintf(name, sizeof(name), "mspti-%llu-snapshot-%s.mspti",
		    (unsigned long long)req.session_id, stamp);
		output = name;
	}
	if ((fd = client_output_open(&out, output)) < 0)
		return EXIT_FAIL;
	req.output = out.path;
	rc = client_request_fd(c, MSPTI__MSG_TYPE__MSG_SNAPSHOT_SESSION,
	    &req.base, fd, MSPTI__MSG_TYPE__MSG_SESSION_INFO, &msg, 60000);
	close(fd);
	if (rc != EXIT_OK) {
		client_output_abort(&out);
		return rc;
	}
	if (client_output_commit(&out) != 0) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return EXIT_FAIL;
	}
	if (c->json) {
		printf("{\"session\":%llu,\"snapshot\":",
		    (unsigned long long)req.session_id);
		util_json_str(stdout, path);
		printf("}\n");
	} else
		printf("session %llu: snapshot written to %s\n",
		    (unsigned long long)req.session_id, path);
	protobuf_c_message_free_unpacked(msg, NULL);
	return EXIT_OK;
}

const struct cmd_entry cmd_snapshot_entry = {
	.name = "snapshot",
	.usage = "[--output FILE] [--file-mode 0600] [--json] SESSION",
	.summary = "write a ring-mode session's flight recorder to a file",
	.cluster = true,
	.exec = cmd_snapshot_exec,
};

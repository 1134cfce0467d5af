/* msptictl metrics: the daemon's recent device and host metrics. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "client.h"

/* Prints a value in its unit's natural scale. */
static void
cmd_metrics_value(const char *unit, double v, char *buf, size_t len)
{
	if (strcmp(unit, "bytes") == 0) {
		if (v >= 1024.0 * 1024 * 1024)
			snprintf(buf, len, "%.2fG", v / (1024.0 * 1024 * 1024));
		else
			snprintf(buf, len, "%.1fM", v / (1024.0 * 1024));
	} else
		snprintf(buf, len, "%.1f", v);
}

static void
cmd_metrics_table(Mspti__MetricTrack **tracks, size_t n)
{
	char a[32], b[32], c[32], d[32];

	printf("  %-14s %-6s %10s %10s %10s %10s %7s\n", "TRACK", "UNIT", "MIN",
	    "AVG", "MAX", "LATEST", "SAMPLES");
	for (size_t i = 0; i < n; i++) {
		Mspti__MetricTrack *t = tracks[i];

		if (t->samples == 0) {
			printf("  %-14s %-6s %10s %10s %10s %10s %7u\n", t->name,
			    t->unit, "-", "-", "-", "-", 0u);
			continue;
		}
		cmd_metrics_value(t->unit, t->min, a, sizeof(a));
		cmd_metrics_value(t->unit, t->avg, b, sizeof(b));
		cmd_metrics_value(t->unit, t->max, c, sizeof(c));
		cmd_metrics_value(t->unit, t->latest, d, sizeof(d));
		printf("  %-14s %-6s %10s %10s %10s %10s %7u\n", t->name,
		    strcmp(t->unit, "bytes") == 0 ? "" : t->unit, a, b, c, d,
		    t->samples);
	}
}

static void
cmd_metrics_json_tracks(Mspti__MetricTrack **tracks, size_t n)
{
	printf("{");
	for (size_t i = 0; i < n; i++) {
		Mspti__MetricTrack *t = tracks[i];

		printf("%s", i ? "," : "");
		util_json_str(stdout, t->name);
		printf(":{\"unit\":");
		util_json_str(stdout, t->unit);
		if (t->samples == 0)
			printf(",\"samples\":0,\"min\":null,\"avg\":null,"
			    "\"max\":null,\"latest\":null,\"latest_ns\":null}");
		else if (strcmp(t->unit, "bytes") == 0)
			/* Byte counts exactly, as integers (the average
			 * rounded to a byte), never 1.71799e+10. */
			printf(",\"samples\":%u,\"min\":%.0f,\"avg\":%.0f,"
			    "\"max\":%.0f,\"latest\":%.0f,\"latest_ns\":%llu}",
			    t->samples, t->min, t->avg, t->max, t->latest,
			    (unsigned long long)t->latest_ns);
		else
			printf(",\"samples\":%u,\"min\":%.6g,\"avg\":%.6g,"
			    "\"max\":%.6g,\"latest\":%.6g,\"latest_ns\":%llu}",
			    t->samples, t->min, t->avg, t->max, t->latest,
			    (unsigned long long)t->latest_ns);
	}
	printf("}");
}

static void
cmd_metrics_json(const Mspti__MetricsReply *r)
{
	printf("{\"now_ns\":%llu,\"window_ns\":%llu,\"period_ms\":%u,"
	    "\"devices\":[", (unsigned long long)r->now_ns,
	    (unsigned long long)r->window_ns, r->period_ms);
	for (size_t i = 0; i < r->n_devices; i++) {
		printf("%s{\"device\":%u,\"in_use\":%s,\"tracks\":", i ? "," : "",
		    r->devices[i]->device, r->devices[i]->in_use ? "true" :
		    "false");
		cmd_metrics_json_tracks(r->devices[i]->tracks,
		    r->devices[i]->n_tracks);
		printf("}");
	}
	printf("],\"processes\":[");
	for (size_t i = 0; i < r->n_processes; i++) {
		printf("%s{\"pid\":%u,\"alive\":%s,\"exe\":", i ? "," : "",
		    r->processes[i]->pid, r->processes[i]->alive ? "true" :
		    "false");
		util_json_str(stdout, r->processes[i]->exe);
		printf(",\"tracks\":");
		cmd_metrics_json_tracks(r->processes[i]->tracks,
		    r->processes[i]->n_tracks);
		printf("}");
	}
	printf("]}\n");
}

static int
cmd_metrics_exec(struct client *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "last", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	Mspti__MetricsRequest req = MSPTI__METRICS_REQUEST__INIT;
	Mspti__MetricsReply *rep;
	ProtobufCMessage *msg;
	char win[32], *end;
	long dev;
	int64_t last;
	int ch, rc;

	req.device = -1;
	while ((ch = client_getopt(&cmd_metrics_entry, argc, argv,
	    "d:l:j", opts)) != -1) {
		switch (ch) {
		case 'd':
			errno = 0;
			dev = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || end == optarg ||
			    dev < 0 || dev > 1023) {
				client_usage_error(&cmd_metrics_entry,
				    "bad device '%s'", optarg);
				return EXIT_USAGE;
			}
			req.device = (int32_t)dev;
			break;
		case 'l':
			if ((last = util_parse_duration(optarg)) <= 0) {
				client_usage_error(&cmd_metrics_entry,
				    "bad duration '%s'", optarg);
				return EXIT_USAGE;
			}
			req.last_ns = (uint64_t)last;
			break;
		case 'j':
			c->json = true;
			break;
		default:
			return client_opt_exit(&cmd_metrics_entry, ch);
		}
	}
	if (optind != argc) {
		client_usage_error(&cmd_metrics_entry, "unexpected argument '%s'",
		    argv[optind]);
		return EXIT_USAGE;
	}
	rc = client_request(c, MSPTI__MSG_TYPE__MSG_METRICS_REQ, &req.base,
	    MSPTI__MSG_TYPE__MSG_METRICS_REP, &msg);
	if (rc != EXIT_OK)
		return rc;
	rep = (Mspti__MetricsReply *)msg;
	if (c->json) {
		cmd_metrics_json(rep);
	} else {
		util_fmt_duration(rep->window_ns, win, sizeof(win));
		if (rep->n_devices == 0 && rep->n_processes == 0)
			printf("no metrics in the last %s (no agent uses a "
			    "device)\n", win);
		for (size_t i = 0; i < rep->n_devices; i++) {
			printf("device %u%s, last %s:\n", rep->devices[i]->device,
			    rep->devices[i]->in_use ? " (in use)" : "", win);
			cmd_metrics_table(rep->devices[i]->tracks,
			    rep->devices[i]->n_tracks);
		}
		for (size_t i = 0; i < rep->n_processes; i++) {
			printf("pid %u %s%s, last %s:\n", rep->processes[i]->pid,
			    rep->processes[i]->exe,
			    rep->processes[i]->alive ? "" : " (gone)", win);
			cmd_metrics_table(rep->processes[i]->tracks,
			    rep->processes[i]->n_tracks);
		}
	}
	protobuf_c_message_free_unpacked(msg, NULL);
	return EXIT_OK;
}

const struct cmd_entry cmd_metrics_entry = {
	.name = "metrics",
	.usage = "[--device N] [--last 60s] [--json]",
	.summary = "recent device and host metrics",
	.exec = cmd_metrics_exec,
};

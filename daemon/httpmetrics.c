/*
 * httpmetrics: a read-only Prometheus endpoint (text exposition format
 * 0.0.4) at GET /metrics, served by evhttp on the daemon's own loop.
 *
 * Only node- and job-level figures leave here: what `msptictl list`,
 * `status` and `metrics` already show any local user.  No command lines,
 * executables or paths.  Each scrape renders from memory and never blocks:
 * evhttp bounds request headers, bodies and idle time, and the listener
 * pauses on EMFILE instead of spinning.
 */
#include "config.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "log.h"
#include "util.h"
#include "msptid.h"
#include "metrics.h"

#define HTTPMETRICS_MAX_HEADERS	8192
#define HTTPMETRICS_MAX_BODY	1024
#define HTTPMETRICS_TIMEOUT_S	5
#define HTTPMETRICS_PAUSE_MS	1000
#define HTTPMETRICS_FRESH_NS	(5ull * METRICS_SLOW_MS * 1000000ull)
#define HTTPMETRICS_LABEL_MAX	128

struct httpmetrics {
	struct daemon		*d;
	struct evhttp		*http;
	struct evconnlistener	*lev;
	struct event		*resume;
	uint16_t		 port;
	uint64_t		 scrapes;
};

/* Appends v as a label value: quoted, escaped, bounded. */
static void
hm_label(struct evbuffer *b, const char *v)
{
	size_t n = 0;

	evbuffer_add(b, "\"", 1);
	for (; v != NULL && *v != '\0' && n < HTTPMETRICS_LABEL_MAX; v++, n++) {
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(b, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, v, 1);
	}
	evbuffer_add(b, "\"", 1);
}

static void
hm_head(struct evbuffer *b, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	    name, type);
}

static void
hm_value(struct evbuffer *b, double v)
{
	if (isnan(v))
		evbuffer_add_printf(b, " NaN\n");
	else if (v == floor(v) && fabs(v) < 1e15)
		evbuffer_add_printf(b, " %.0f\n", v);
	else
		evbuffer_add_printf(b, " %.6g\n", v);
}

/* Device tracks: name, help, scale from the sampled unit. */
static const struct {
	const char	*name;
	const char	*help;
	double		 scale;
} hm_dev[MT_DEV_NTRACKS] = {
	[MT_DEV_UTIL] = { "mspti_device_utilization_ratio",
	    "NPU busy fraction, 0..1 (DCGM_FI_DEV_GPU_UTIL / 100).", 0.01 },
	[MT_DEV_MEM_USED] = { "mspti_device_memory_used_bytes",
	    "NPU memory in use (DCGM_FI_DEV_FB_USED, in bytes).", 1 },
	[MT_DEV_MEM_TOTAL] = { "mspti_device_memory_total_bytes",
	    "NPU memory size (DCGM FB_USED + FB_FREE, in bytes).", 1 },
	[MT_DEV_POWER] = { "mspti_device_power_watts",
	    "NPU power draw (DCGM_FI_DEV_POWER_USAGE).", 1 },
	[MT_DEV_TEMP] = { "mspti_device_temperature_celsius",
	    "NPU temperature (DCGM_FI_DEV_GPU_TEMP).", 1 },
};

static void
hm_agent_labels(struct evbuffer *b, const struct agent *a)
{
	evbuffer_add_printf(b, "{pid=\"%ld\",job=", (long)a->cred.pid);
	hm_label(b, a->job_id);
	evbuffer_add_printf(b, ",rank=\"%d\"}", a->rank);
}

static void
hm_devices(struct httpmetrics *hm, struct evbuffer *b)
{
	struct metrics_summary sum;
	uint64_t now = util_realtime_ns();
	uint64_t since = now > HTTPMETRICS_FRESH_NS ?
	    now - HTTPMETRICS_FRESH_NS : 0;

	for (unsigned t = 0; t < MT_DEV_NTRACKS; t++) {
		hm_head(b, hm_dev[t].name, "gauge", hm_dev[t].help);
		for (uint32_t dev = 0; dev < METRICS_MAX_DEVICES; dev++) {
			metrics_device_summary(hm->d->metrics, dev, t, since,
			    &sum);
			if (sum.samples == 0 || isnan(sum.latest))
				continue;
			evbuffer_add_printf(b, "%s{device=\"%u\"}",
			    hm_dev[t].name, dev);
			hm_value(b, sum.latest * hm_dev[t].scale);
		}
	}
}

static void
hm_agents(struct httpmetrics *hm, struct evbuffer *b)
{
	struct daemon *d = hm->d;
	struct metrics_summary sum;
	struct agent *a;
	uint64_t now = util_realtime_ns();
	uint64_t since = now > HTTPMETRICS_FRESH_NS ?
	    now - HTTPMETRICS_FRESH_NS : 0;

	hm_head(b, "mspti_agents", "gauge", "Agents registered.");
	evbuffer_add_printf(b, "mspti_agents %u\n", d->nagents);
	hm_head(b, "mspti_agent_info", "gauge",
	    "One per registered agent: its job, rank and world size.");
	TAILQ_FOREACH(a, &d->agents, entry) {
		evbuffer_add_printf(b, "mspti_agent_info{pid=\"%ld\",job=",
		    (long)a->cred.pid);
		hm_label(b, a->job_id);
		evbuffer_add_printf(b, ",rank=\"%d\",local_rank=\"%d\","
		    "world_size=\"%d\"} 1\n", a->rank, a->local_rank,
		    a->world_size);
	}
	hm_head(b, "mspti_agent_device_info", "gauge",
	    "One per device an agent uses.");
	TAILQ_FOREACH(a, &d->agents, entry)
		for (size_t i = 0; i < a->ndevices; i++) {
			evbuffer_add_printf(b, "mspti_agent_device_info"
			    "{device=\"%u\",pid=\"%ld\",job=", a->devices[i],
			    (long)a->cred.pid);
			hm_label(b, a->job_id);
			evbuffer_add_printf(b, ",rank=\"%d\"} 1\n", a->rank);
		}
	hm_head(b, "mspti_process_cpu_usage_ratio", "gauge",
	    "Agent process CPU use, in cores (1 = one core busy).");
	TAILQ_FOREACH(a, &d->agents, entry) {
		metrics_pid_summary(d->metrics, (uint32_t)a->cred.pid,
		    MT_PID_CPU, since, &sum);
		if (sum.samples == 0 || isnan(sum.latest))
			continue;
		evbuffer_add_printf(b, "mspti_process_cpu_usage_ratio");
		hm_agent_labels(b, a);
		hm_value(b, sum.latest / 100.0);
	}
	hm_head(b, "mspti_process_resident_memory_bytes", "gauge",
	    "Agent process resident set size.");
	TAILQ_FOREACH(a, &d->agents, entry) {
		metrics_pid_summary(d->metrics, (uint32_t)a->cred.pid,
		    MT_PID_RSS, since, &sum);
		if (sum.samples == 0 || isnan(sum.latest))
			continue;
		evbuffer_add_printf(b, "mspti_process_resident_memory_bytes");
		hm_agent_labels(b, a);
		hm_value(b, sum.latest);
	}
}

static void
hm_sessions(struct httpmetrics *hm, struct evbuffer *b)
{
	struct daemon *d = hm->d;
	uint64_t bystate[SESS_FAILED + 1] = { 0 };
	uint64_t lost[LOSS_STAGE_MAX], total[LOSS_STAGE_MAX];
	uint64_t records = d->retired_records;
	struct session *s;

	memcpy(total, d->retired_losses, sizeof(total));
	TAILQ_FOREACH(s, &d->sessions, entry) {
		bystate[s->state]++;
		records += s->records;
		session_drain_losses(s, lost);
		for (unsigned i = 0; i < LOSS_STAGE_MAX; i++)
			total[i] += lost[i];
	}
	hm_head(b, "mspti_sessions", "gauge",
	    "Capture sessions the daemon holds, by state.");
	for (unsigned i = 0; i <= SESS_FAILED; i++)
		evbuffer_add_printf(b, "mspti_sessions{state=\"%s\"} %llu\n",
		    session_state_names[i], (unsigned long long)bystate[i]);
	hm_head(b, "mspti_records_written_total", "counter",
	    "Records written to traces by all sessions since start.");
	evbuffer_add_printf(b, "mspti_records_written_total %llu\n",
	    (unsigned long long)records);
	hm_head(b, "mspti_records_lost_total", "counter",
	    "Records lost by all sessions since start, by pipeline stage.");
	for (unsigned i = 0; i < LOSS_STAGE_MAX; i++)
		evbuffer_add_printf(b, "mspti_records_lost_total{stage=\"%s\"}"
		    " %llu\n", record_loss_stage_name(i),
		    (unsigned long long)total[i]);
	/* Per session, labelled by the job it selects. */
	hm_head(b, "mspti_session_records_written_total", "counter",
	    "Records written by one session.");
	TAILQ_FOREACH(s, &d->sessions, entry) {
		evbuffer_add_printf(b, "mspti_session_records_written_total"
		    "{session=\"%llu\",job=", (unsigned long long)s->id);
		hm_label(b, s->job_id);
		evbuffer_add_printf(b, "} %llu\n",
		    (unsigned long long)s->records);
	}
	hm_head(b, "mspti_session_records_lost_total", "counter",
	    "Records lost by one session, by pipeline stage.");
	TAILQ_FOREACH(s, &d->sessions, entry) {
		session_drain_losses(s, lost);
		for (unsigned i = 0; i < LOSS_STAGE_MAX; i++) {
			evbuffer_add_printf(b, "mspti_session_records_lost_"
			    "total{session=\"%llu\",job=",
			    (unsigned long long)s->id);
			hm_label(b, s->job_id);
			evbuffer_add_printf(b, ",stage=\"%s\"} %llu\n",
			    record_loss_stage_name(i),
			    (unsigned long long)lost[i]);
		}
	}
}

static double
hm_self_rss(void)
{
	unsigned long size, rss;
	FILE *f = fopen("/proc/self/statm", "r");
	int n;

	if (f == NULL)
		return NAN;
	n = fscanf(f, "%lu %lu", &size, &rss);
	fclose(f);
	return n == 2 ? (double)rss * (double)sysconf(_SC_PAGESIZE) : NAN;
}

static void
hm_self(struct httpmetrics *hm, struct evbuffer *b)
{
	struct daemon *d = hm->d;
	struct peer *p;
	unsigned npeers = 0;

	TAILQ_FOREACH(p, &d->peers, entry)
		npeers++;
	hm_head(b, "mspti_daemon_build_info", "gauge", "msptid's version.");
	evbuffer_add_printf(b, "mspti_daemon_build_info{version=\"%s\"} 1\n",
	    MSPTID_VERSION);
	hm_head(b, "mspti_daemon_start_time_seconds", "gauge",
	    "When msptid started, seconds since the epoch.");
	evbuffer_add_printf(b, "mspti_daemon_start_time_seconds %.3f\n",
	    (double)d->start_ns / 1e9);
	hm_head(b, "mspti_daemon_uptime_seconds", "gauge",
	    "Seconds since msptid started.");
	evbuffer_add_printf(b, "mspti_daemon_uptime_seconds %.3f\n",
	    (double)(util_monotonic_ns() - d->start_mono) / 1e9);
	hm_head(b, "mspti_daemon_resident_memory_bytes", "gauge",
	    "msptid's resident set size.");
	evbuffer_add_printf(b, "mspti_daemon_resident_memory_bytes");
	hm_value(b, hm_self_rss());
	hm_head(b, "mspti_daemon_peers", "gauge",
	    "Connected peers (agents and msptictl).");
	evbuffer_add_printf(b, "mspti_daemon_peers %u\n", npeers);
	hm_head(b, "mspti_daemon_accept_pauses_total", "counter",
	    "Times the listeners paused for lack of descriptors.");
	evbuffer_add_printf(b, "mspti_daemon_accept_pauses_total %llu\n",
	    (unsigned long long)d->accept_pauses);
	hm_head(b, "mspti_daemon_accept_refused_total", "counter",
	    "Connections refused over the per-uid bounds.");
	evbuffer_add_printf(b, "mspti_daemon_accept_refused_total %llu\n",
	    (unsigned long long)d->accept_refused);
	hm_head(b, "mspti_daemon_frames_rejected_total", "counter",
	    "Malformed or unauthorized frames rejected.");
	evbuffer_add_printf(b, "mspti_daemon_frames_rejected_total %llu\n",
	    (unsigned long long)d->frames_rejected);
	hm_head(b, "mspti_daemon_peers_dropped_total", "counter",
	    "Peers dropped for misbehaviour or limits.");
	evbuffer_add_printf(b, "mspti_daemon_peers_dropped_total %llu\n",
	    (unsigned long long)d->peers_dropped);
	hm_head(b, "mspti_daemon_scrapes_total", "counter",
	    "Requests served at /metrics.");
	evbuffer_add_printf(b, "mspti_daemon_scrapes_total %llu\n",
	    (unsigned long long)hm->scrapes);
}

int
httpmetrics_render(struct httpmetrics *hm, struct evbuffer *b)
{
	hm_devices(hm, b);
	hm_agents(hm, b);
	hm_sessions(hm, b);
	hm_self(hm, b);
	return 0;
}

static void
hm_request_cb(struct evhttp_request *req, void *arg)
{
	struct httpmetrics *hm = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(
	    req));
	struct evbuffer *b;

	if (path == NULL || strcmp(path, "/metrics") != 0) {
		evhttp_send_error(req, HTTP_NOTFOUND, NULL);
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, HTTP_BADMETHOD, NULL);
		return;
	}
	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, HTTP_SERVUNAVAIL, NULL);
		return;
	}
	hm->scrapes++;
	httpmetrics_render(hm, b);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, HTTP_OK, "OK", b);
	evbuffer_free(b);
}

static void
hm_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct httpmetrics *hm = arg;

	evconnlistener_enable(hm->lev);
}

/* Out of descriptors: stop accepting for a while rather than spin. */
static void
hm_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct httpmetrics *hm = arg;
	struct timeval tv = { HTTPMETRICS_PAUSE_MS / 1000,
	    (HTTPMETRICS_PAUSE_MS % 1000) * 1000 };

	log_warnx("metrics: accept: %s",
	    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	evconnlistener_disable(lev);
	hm->d->accept_pauses++;
	evtimer_add(hm->resume, &tv);
}

/* "HOST:PORT" or "[V6]:PORT" (port 0: any free one) into a socket
 * address; -1 if malformed.  Numeric addresses only: no resolver here. */
int
httpmetrics_parse(const char *spec, struct sockaddr_storage *ss,
    socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 2], *end;
	const char *colon;
	unsigned long port;
	size_t hl;

	if (spec == NULL || (colon = strrchr(spec, ':')) == NULL ||
	    colon[1] == '\0')
		return -1;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || port > 65535 || colon[1] == '-')
		return -1;
	hl = (size_t)(colon - spec);
	if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
		spec++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return -1;
	memcpy(host, spec, hl);
	host[hl] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (strchr(host, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		if (evutil_inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return -1;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		if (evutil_inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return -1;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
	}
	return 0;
}

struct httpmetrics *
httpmetrics_start(struct daemon *d, const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct httpmetrics *hm;
	char host[INET6_ADDRSTRLEN] = "?";
	int fd;

	if (httpmetrics_parse(spec, &ss, &len) != 0) {
		log_warnx("--metrics-listen: expected HOST:PORT, got '%s'",
		    spec);
		return NULL;
	}
	if ((hm = calloc(1, sizeof(*hm))) == NULL)
		return NULL;
	hm->d = d;
	hm->http = evhttp_new(d->base);
	hm->resume = evtimer_new(d->base, hm_resume_cb, hm);
	if (hm->http == NULL || hm->resume == NULL)
		goto fail;
	hm->lev = evconnlistener_new_bind(d->base, NULL, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    64, (struct sockaddr *)&ss, (int)len);
	if (hm->lev == NULL) {
		log_warn("--metrics-listen %s", spec);
		goto fail;
	}
	evconnlistener_set_error_cb(hm->lev, hm_accept_error_cb);
	evhttp_set_max_headers_size(hm->http, HTTPMETRICS_MAX_HEADERS);
	evhttp_set_max_body_size(hm->http, HTTPMETRICS_MAX_BODY);
	evhttp_set_timeout(hm->http, HTTPMETRICS_TIMEOUT_S);
	/* Every method reaches hm_request_cb, which answers 405 (evhttp's
	 * own refusal would be 501). */
	evhttp_set_allowed_methods(hm->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	evhttp_set_gencb(hm->http, hm_request_cb, hm);
	if (evhttp_bind_listener(hm->http, hm->lev) == NULL) {
		evconnlistener_free(hm->lev);
		hm->lev = NULL;
		goto fail;
	}
	/* The chosen port, for ":0". */
	fd = evconnlistener_get_fd(hm->lev);
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
			hm->port = ntohs(s6->sin6_port);
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
			hm->port = ntohs(s4->sin_port);
		}
	}
	log_info("metrics: listening on %s port %u", host, hm->port);
	return hm;
fail:
	httpmetrics_free(hm);
	return NULL;
}

uint16_t
httpmetrics_port(const struct httpmetrics *hm)
{
	return hm != NULL ? hm->port : 0;
}

void
httpmetrics_free(struct httpmetrics *hm)
{
	if (hm == NULL)
		return;
	/* evhttp_free frees the bound listener, which closes its socket. */
	if (hm->http != NULL)
		evhttp_free(hm->http);
	else if (hm->lev != NULL)
		evconnlistener_free(hm->lev);
	if (hm->resume != NULL)
		event_free(hm->resume);
	free(hm);
}

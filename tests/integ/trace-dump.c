/*
 * trace-dump: prints a trace file as JSON lines for the session tests:
 * one {"type":...} object per record (strings resolved), then one
 * {"end":...} object with the header config, footer and reader stats.
 * Exit 0 when the file was readable (truncated or not), 1 otherwise.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "record.h"
#include "trace.h"

static void
jstr(const char *s)
{
	putchar('"');
	for (; s != NULL && *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static const char *
str(const struct trace_reader *r, uint32_t id)
{
	const char *s = trace_reader_string(r, id);

	return s != NULL ? s : "";
}

int
main(int argc, char **argv)
{
	struct trace_reader *r;
	const struct rec_hdr *h;
	const struct trace_header *th;
	const struct trace_footer *f;
	struct trace_reader_stats st;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: trace-dump FILE\n");
		return 2;
	}
	if ((rc = trace_reader_open(argv[1], &r)) != 0) {
		fprintf(stderr, "trace-dump: %s: %s\n", argv[1],
		    trace_strerror(rc));
		return 1;
	}
	while ((rc = trace_reader_next(r, &h)) != 0) {
		if (rc < 0) {
			fprintf(stderr, "trace-dump: %s\n", trace_reader_error(r));
			continue;
		}
		if (h->type == REC_STRING_DEF)
			continue;
		printf("{\"type\":\"%s\",\"ts\":%llu,\"pid\":%u",
		    record_type_name(h->type),
		    (unsigned long long)record_timestamp(h), record_pid(h));
		switch (h->type) {
		case REC_KERNEL: {
			const struct rec_kernel *k = (const void *)h;

			printf(",\"end\":%llu,\"corr\":%llu,\"flags\":%u,"
			    "\"device\":%u,\"task\":%u,\"stream\":%u,"
			    "\"tid\":%u,\"name\":", (unsigned long long)k->end,
			    (unsigned long long)k->correlation_id, h->aux,
			    k->device, k->task_id, k->stream, k->tid);
			jstr(str(r, k->name_id));
			printf(",\"ktype\":");
			jstr(str(r, k->type_id));
			break;
		}
		case REC_MEMCPY: {
			const struct rec_memcpy *k = (const void *)h;

			printf(",\"end\":%llu,\"corr\":%llu,\"flags\":%u,"
			    "\"device\":%u,\"stream\":%u,\"task\":%u,"
			    "\"bytes\":%llu", (unsigned long long)k->end,
			    (unsigned long long)k->correlation_id, h->aux,
			    k->device, k->stream, k->task_id,
			    (unsigned long long)k->bytes);
			break;
		}
		case REC_MEMSET: {
			const struct rec_memset *k = (const void *)h;

			printf(",\"end\":%llu,\"corr\":%llu,\"flags\":%u,"
			    "\"device\":%u,\"stream\":%u,\"task\":%u,"
			    "\"bytes\":%llu", (unsigned long long)k->end,
			    (unsigned long long)k->correlation_id, h->aux,
			    k->device, k->stream, k->task_id,
			    (unsigned long long)k->bytes);
			break;
		}
		case REC_CLOCK_SYNC: {
			const struct rec_clock_sync *k = (const void *)h;

			printf(",\"device\":%u,\"samples\":%u,\"drift\":%g,"
			    "\"host_ref\":%llu,\"device_ref\":%llu", k->device,
			    k->samples, k->drift,
			    (unsigned long long)k->host_ref_ns,
			    (unsigned long long)k->device_ref_ns);
			break;
		}
		case REC_COUNTER: {
			const struct rec_counter *k = (const void *)h;

			printf(",\"device\":%u,\"value\":%g,\"track\":",
			    k->device, k->value);
			jstr(str(r, k->track_id));
			break;
		}
		case REC_API: {
			const struct rec_api *k = (const void *)h;

			printf(",\"end\":%llu,\"corr\":%llu,\"tid\":%u,"
			    "\"kind\":%u,\"name\":", (unsigned long long)k->end,
			    (unsigned long long)k->correlation_id, k->tid,
			    k->kind);
			jstr(str(r, k->name_id));
			break;
		}
		case REC_EXTERNAL_CORRELATION: {
			const struct rec_external_correlation *k =
			    (const void *)h;

			printf(",\"corr\":%llu,\"external_id\":%llu,"
			    "\"external_kind\":%u,\"tid\":%u",
			    (unsigned long long)k->correlation_id,
			    (unsigned long long)k->external_id,
			    k->external_kind, k->tid);
			break;
		}
		case REC_HCCL: {
			const struct rec_hccl *k = (const void *)h;

			printf(",\"end\":%llu,\"corr\":%llu,\"flags\":%u,"
			    "\"seq\":%u,\"comm\":", (unsigned long long)k->end,
			    (unsigned long long)k->correlation_id, h->aux,
			    k->seq);
			jstr(str(r, k->comm_name_id));
			printf(",\"name\":");
			jstr(str(r, k->name_id));
			break;
		}
		case REC_COMMUNICATION: {
			const struct rec_communication *k = (const void *)h;

			printf(",\"end\":%llu,\"corr\":%llu,\"flags\":%u,"
			    "\"count\":%llu,\"dtype\":%u,\"seq\":%u,"
			    "\"comm\":", (unsigned long long)k->end,
			    (unsigned long long)k->correlation_id, h->aux,
			    (unsigned long long)k->count, k->data_type, k->seq);
			jstr(str(r, k->comm_name_id));
			printf(",\"name\":");
			jstr(str(r, k->name_id));
			printf(",\"comm\":");
			jstr(str(r, k->comm_name_id));
			break;
		}
		case REC_MARKER: {
			const struct rec_marker *k = (const void *)h;

			printf(",\"flag\":%u,\"id\":%llu,\"source\":%u,"
			    "\"tid\":%u,\"name\":", k->flag,
			    (unsigned long long)k->id, k->source_kind, k->tid);
			jstr(str(r, k->name_id));
			printf(",\"domain\":");
			jstr(str(r, k->domain_id));
			break;
		}
		case REC_SESSION: {
			const struct rec_session *k = (const void *)h;

			printf(",\"event\":%u,\"detail\":", h->aux);
			jstr(str(r, k->detail_id));
			break;
		}
		case REC_HOST_CLOCK: {
			const struct rec_host_clock *k = (const void *)h;

			printf(",\"source\":\"%s\",\"base_tsc\":%llu,"
			    "\"base_ns\":%llu,\"mult\":%llu,"
			    "\"correction_ns\":%lld,\"bracket_ns\":%u",
			    h->aux == HOST_CLOCK_TSC ? "tsc" : "realtime",
			    (unsigned long long)k->base_tsc,
			    (unsigned long long)k->base_ns,
			    (unsigned long long)k->mult,
			    (long long)k->correction_ns, k->bracket_ns);
			break;
		}
		case REC_LOSS: {
			const struct rec_loss *k = (const void *)h;

			printf(",\"count\":%llu,\"stage\":%u,\"lost_type\":%u",
			    (unsigned long long)k->count, k->stage,
			    k->lost_type);
			break;
		}
		case REC_PROCESS: {
			const struct rec_process *k = (const void *)h;

			printf(",\"rank\":%d,\"exe\":", k->rank);
			jstr(str(r, k->exe_id));
			break;
		}
		default:
			break;
		}
		printf("}\n");
	}
	trace_reader_get_stats(r, &st);
	th = trace_reader_header(r);
	f = trace_reader_footer(r);
	printf("{\"end\":true,\"truncated\":%s,\"records\":%llu,"
	    "\"corrupt_chunks\":%llu,\"session\":%llu,\"host\":",
	    st.truncated ? "true" : "false", (unsigned long long)st.records,
	    (unsigned long long)st.corrupt_chunks,
	    (unsigned long long)th->session_id);
	jstr(th->hostname);
	printf(",\"config\":{");
	for (size_t i = 0; i < th->nconfig; i++) {
		printf("%s", i ? "," : "");
		jstr(th->config[i].key);
		putchar(':');
		jstr(th->config[i].value);
	}
	printf("}");
	if (f != NULL) {
		printf(",\"footer\":{\"records\":%llu,\"losses\":[",
		    (unsigned long long)f->records);
		for (int i = 0; i < LOSS_STAGE_MAX; i++)
			printf("%s%llu", i ? "," : "",
			    (unsigned long long)f->losses[i]);
		printf("]}");
	}
	printf("}\n");
	trace_reader_close(r);
	return 0;
}

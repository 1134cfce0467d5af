/*
 * A device task's record, read from its channel, as the msPTI activity
 * records it stands for (KERNEL, MEMCPY, MEMSET, HCCL and COMMUNICATION,
 * device MARKER), emitted for the kinds wanted: those of its launch call
 * when it was joined to one (p), else those wanted now.  devtime.c reads,
 * joins and times the records; this only fills the activity structures.
 */
#include "config.h"

#include <string.h>

#include <npusim/npusim.h>

#include "api.h"

static const char *
devrec_kernel_type(unsigned t)
{
	switch (t) {
	case NPUSIM_KERNEL_AI_CORE:	return "KERNEL_AICORE";
	case NPUSIM_KERNEL_AI_VECTOR:	return "KERNEL_AIVEC";
	case NPUSIM_KERNEL_AI_CPU:	return "KERNEL_AICPU";
	}
	return "KERNEL_UNKNOWN";
}

static const char *
devrec_alg(unsigned a)
{
	switch (a) {
	case NPUSIM_COMM_ALG_RING:	return "RING";
	case NPUSIM_COMM_ALG_P2P:	return "P2P";
	}
	return "NONE";
}

static msptiCommunicationDataType
devrec_data_type(uint32_t t)
{
	if (t <= MSPTI_ACTIVITY_COMMUNICATION_INT128)
		return (msptiCommunicationDataType)t;
	return MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE;
}

/* The fields a MEMCPY and a MEMSET record share (the same names in
 * both structures). */
#define DEVREC_COPY(r, rec, p, t0, t1, corr) do {			\
	(r)->bytes = (rec)->bytes;					\
	(r)->start = (t0);						\
	(r)->end = (t1);						\
	(r)->deviceId = (uint32_t)(rec)->device;			\
	(r)->streamId = (rec)->stream_id;				\
	(r)->correlationId = (corr);					\
	(r)->isAsync = (p) != NULL ? (p)->is_async : 1;			\
} while (0)

void
devrec_emit(const struct npusim_record *rec, const struct pending *p,
    uint64_t start, uint64_t end)
{
	uint32_t dev = (uint32_t)rec->device;
	uint64_t corr = p != NULL && p->kind != MSPTI_ACTIVITY_KIND_MARKER ?
	    p->corr : MSPTI_INVALID_CORRELATION_ID;
	/* Joined: the kinds wanted when the call was made. */
	uint32_t w = p != NULL ? p->kinds : api_kinds_api();
	void (*emit)(const void *, size_t) = p != NULL ?
	    activity_emit_api_always : activity_emit_api;
	char name[NPUSIM_NAME_LEN], comm[NPUSIM_COMM_NAME_LEN];

	memcpy(name, rec->name, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	switch (rec->kind) {
	case NPUSIM_TASK_KERNEL:
		if (w & (1u << MSPTI_ACTIVITY_KIND_KERNEL)) {
			msptiActivityKernel r;

			memset(&r, 0, sizeof(r));
			r.kind = MSPTI_ACTIVITY_KIND_KERNEL;
			r.start = start;
			r.end = end;
			r.ds.deviceId = dev;
			r.ds.streamId = rec->stream_id;
			r.correlationId = corr;
			r.type = devrec_kernel_type(rec->kernel_type);
			r.name = api_intern(name);
			emit(&r, sizeof(r));
		}
		break;
	case NPUSIM_TASK_MEMCPY:
		if (w & (1u << MSPTI_ACTIVITY_KIND_MEMCPY)) {
			msptiActivityMemcpy r;

			memset(&r, 0, sizeof(r));
			r.kind = MSPTI_ACTIVITY_KIND_MEMCPY;
			r.copyKind = p != NULL && p->kind ==
			    MSPTI_ACTIVITY_KIND_MEMCPY ?
			    (msptiActivityMemcpyKind)p->copy_kind :
			    icall_memcpy_kind(rec->memcpy_kind);
			DEVREC_COPY(&r, rec, p, start, end, corr);
			emit(&r, sizeof(r));
		}
		break;
	case NPUSIM_TASK_MEMSET:
		if (w & (1u << MSPTI_ACTIVITY_KIND_MEMSET)) {
			msptiActivityMemset r;

			memset(&r, 0, sizeof(r));
			r.kind = MSPTI_ACTIVITY_KIND_MEMSET;
			r.value = p != NULL ? p->value : 0;
			DEVREC_COPY(&r, rec, p, start, end, corr);
			emit(&r, sizeof(r));
		}
		break;
	case NPUSIM_TASK_COMM:
		memcpy(comm, rec->comm_name, sizeof(comm));
		comm[sizeof(comm) - 1] = '\0';
		if (w & (1u << MSPTI_ACTIVITY_KIND_HCCL)) {
			msptiActivityHccl r;

			memset(&r, 0, sizeof(r));
			r.kind = MSPTI_ACTIVITY_KIND_HCCL;
			r.start = start;
			r.end = end;
			r.ds.deviceId = dev;
			r.ds.streamId = rec->stream_id;
			r.bandWidth = end > start ?
			    (double)rec->bytes / (double)(end - start) : 0;
			r.name = api_intern(name);
			r.commName = api_intern(comm);
			emit(&r, sizeof(r));
		}
		if (w & (1u << MSPTI_ACTIVITY_KIND_COMMUNICATION)) {
			msptiActivityCommunication r;

			memset(&r, 0, sizeof(r));
			r.kind = MSPTI_ACTIVITY_KIND_COMMUNICATION;
			r.dataType = devrec_data_type(rec->data_type);
			r.count = rec->count;
			r.ds.deviceId = dev;
			r.ds.streamId = rec->stream_id;
			r.start = start;
			r.end = end;
			r.algType = devrec_alg(rec->algorithm);
			r.name = api_intern(name);
			r.commName = api_intern(comm);
			r.correlationId = corr;
			emit(&r, sizeof(r));
		}
		break;
	case NPUSIM_TASK_MARKER:
		if (w & (1u << MSPTI_ACTIVITY_KIND_MARKER)) {
			msptiActivityMarker r;
			const char *mname = NULL, *mdom = NULL;
			uint64_t host_ts = 0;

			memset(&r, 0, sizeof(r));
			mstx_marker_take(rec->marker_id, rec->tag_id, &mname,
			    &mdom, &host_ts);
			r.kind = MSPTI_ACTIVITY_KIND_MARKER;
			r.flag = (msptiActivityFlag)rec->tag_id;
			r.sourceKind = MSPTI_ACTIVITY_SOURCE_KIND_DEVICE;
			/* The device reached the marker after the host queued
			 * it: a clock model error must not put it before. */
			r.timestamp = start > host_ts ? start : host_ts;
			r.id = rec->marker_id;
			r.objectId.ds.deviceId = dev;
			r.objectId.ds.streamId = rec->stream_id;
			r.name = mname;
			r.domain = mdom;
			emit(&r, sizeof(r));
		}
		break;
	default:
		break;
	}
}

/*
 * Perfetto protobuf export: the protobuf encoding is written by hand (a
 * varint writer), following proto/perfetto/trace.proto.  Each record is
 * one or two TracePackets; a TrackDescriptor precedes a track's first use.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "export-int.h"

#define PF_ATTR	__attribute__((visibility("default")))
#define PF_SEQ	1
/* perfetto.protos.BuiltinClock: our timestamps are CLOCK_REALTIME ns. */
#define PF_CLOCK_REALTIME	1
/* TracePacket.sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED. */
#define PF_SEQ_CLEARED		1
/* CounterDescriptor.Unit: UNIT_SIZE_BYTES. */
#define PF_UNIT_BYTES		3

struct pf_buf {
	uint8_t	b[4096];
	size_t	n;
};

struct pf {
	uint64_t	*seen;		/* open addressing of track uuids */
	size_t		 nseen, cap;
};

static void
pf_varint(struct pf_buf *b, uint64_t v)
{
	while (v >= 0x80 && b->n < sizeof(b->b)) {
		b->b[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	if (b->n < sizeof(b->b))
		b->b[b->n++] = (uint8_t)v;
}

static void
pf_tag(struct pf_buf *b, unsigned field, unsigned wt)
{
	pf_varint(b, (uint64_t)field << 3 | wt);
}

static void
pf_uint(struct pf_buf *b, unsigned field, uint64_t v)
{
	pf_tag(b, field, 0);
	pf_varint(b, v);
}

static void
pf_fixed64(struct pf_buf *b, unsigned field, uint64_t v)
{
	pf_tag(b, field, 1);
	for (int i = 0; i < 8 && b->n < sizeof(b->b); i++)
		b->b[b->n++] = (uint8_t)(v >> (8 * i));
}

static void
pf_double(struct pf_buf *b, unsigned field, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	pf_fixed64(b, field, v);
}

static void
pf_bytes(struct pf_buf *b, unsigned field, const void *p, size_t n)
{
	if (b->n + n + 16 > sizeof(b->b))
		n = sizeof(b->b) > b->n + 16 ? sizeof(b->b) - b->n - 16 : 0;
	pf_tag(b, field, 2);
	pf_varint(b, n);
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
pf_str(struct pf_buf *b, unsigned field, const char *s)
{
	pf_bytes(b, field, s, strlen(s));
}

/* Writes one TracePacket (body in pkt) as Trace.packet (field 1). */
static void
pf_packet(struct ex *x, const struct pf_buf *pkt)
{
	struct pf_buf h = { .n = 0 };

	pf_tag(&h, 1, 2);
	pf_varint(&h, pkt->n);
	fwrite(h.b, 1, h.n, x->out);
	fwrite(pkt->b, 1, pkt->n, x->out);
}

static uint64_t
pf_hash(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool
pf_first(struct pf *p, uint64_t key)
{
	size_t i;

	if (p->nseen * 2 >= p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 256;
		uint64_t *nv = calloc(nc, sizeof(uint64_t));

		if (nv == NULL)
			abort();
		for (size_t j = 0; j < p->cap; j++)
			if (p->seen[j]) {
				i = p->seen[j] & (nc - 1);
				while (nv[i])
					i = (i + 1) & (nc - 1);
				nv[i] = p->seen[j];
			}
		free(p->seen);
		p->seen = nv;
		p->cap = nc;
	}
	i = key & (p->cap - 1);
	while (p->seen[i]) {
		if (p->seen[i] == key)
			return false;
		i = (i + 1) & (p->cap - 1);
	}
	p->seen[i] = key;
	p->nseen++;
	return true;
}

/* The uuid of t (declaring it and its process on first use). */
static uint64_t
pf_track(struct ex *x, const struct ex_track *t, const char *counter,
    const char *unit)
{
	struct pf *p = x->priv;
	uint64_t puid = (0x5000000000000000ull | t->pid) * 0x100000001b3ull;
	uint64_t uid = pf_hash(puid ^ ((uint64_t)t->tid << 1),
	    counter ? counter : "");
	struct pf_buf b, d, pd;

	puid |= 1;
	uid |= 1;
	if (pf_first(p, puid)) {
		b.n = d.n = pd.n = 0;
		pf_uint(&pd, 1, t->pid & 0x7fffffff);
		pf_str(&pd, 6, t->pname);
		pf_uint(&d, 1, puid);
		pf_bytes(&d, 3, pd.b, pd.n);
		pf_uint(&b, 10, PF_SEQ);
		pf_bytes(&b, 60, d.b, d.n);
		pf_packet(x, &b);
	}
	if (pf_first(p, uid)) {
		b.n = d.n = pd.n = 0;
		pf_uint(&d, 1, uid);
		if (counter == NULL && t->os_pid != 0) {
			/* A real thread: ThreadDescriptor (pid, tid, name);
			 * it belongs to its process by pid. */
			pf_uint(&pd, 1, t->os_pid & 0x7fffffff);
			pf_uint(&pd, 2, t->tid);
			pf_str(&pd, 5, t->tname);
			pf_bytes(&d, 4, pd.b, pd.n);
		} else {
			pf_str(&d, 2, counter ? counter : t->tname);
			pf_uint(&d, 5, puid);
		}
		if (counter) {
			/* CounterDescriptor: unit (bytes) or unit_name. */
			pd.n = 0;
			if (unit != NULL && strcmp(unit, "bytes") == 0)
				pf_uint(&pd, 3, PF_UNIT_BYTES);
			else if (unit != NULL)
				pf_str(&pd, 6, unit);
			pf_bytes(&d, 8, pd.b, pd.n);
		}
		pf_uint(&b, 10, PF_SEQ);
		pf_bytes(&b, 60, d.b, d.n);
		pf_packet(x, &b);
	}
	return uid;
}

static void
pf_event(struct ex *x, uint64_t ts, const struct pf_buf *ev)
{
	struct pf_buf b = { .n = 0 };

	pf_uint(&b, 8, ts);
	pf_uint(&b, 58, PF_CLOCK_REALTIME);
	pf_uint(&b, 10, PF_SEQ);
	pf_bytes(&b, 11, ev->b, ev->n);
	pf_packet(x, &b);
	x->events++;
}

/*
 * The slice's args (the walk's JSON fragment: "key":number or
 * "key":"string", comma-separated, no nesting) as DebugAnnotations, so
 * both formats carry the same arguments (correlation_id, bytes, ...).
 */
static void
pf_args(struct pf_buf *ev, const char *args)
{
	const char *p = args, *k, *v;
	char key[64], val[128];
	size_t kn, vn;

	while (*p == '"') {
		k = ++p;
		while (*p && *p != '"')
			p++;
		kn = (size_t)(p - k);
		if (*p++ != '"' || *p++ != ':')
			return;
		if (*p == '"') {
			v = ++p;
			while (*p && *p != '"')
				p++;
			vn = (size_t)(p - v);
			if (*p == '"')
				p++;
		} else {
			v = p;
			while (*p && *p != ',')
				p++;
			vn = (size_t)(p - v);
		}
		if (kn < sizeof(key) && vn < sizeof(val)) {
			struct pf_buf d = { .n = 0 };
			char *end;

			memcpy(key, k, kn);
			key[kn] = '\0';
			memcpy(val, v, vn);
			val[vn] = '\0';
			pf_str(&d, 10, key);
			if (v[-1] == '"')
				pf_str(&d, 6, val);
			else if (strpbrk(val, ".eE") == NULL && val[0] != '-')
				pf_uint(&d, 3, strtoull(val, &end, 10));
			else
				pf_double(&d, 5, strtod(val, &end));
			pf_bytes(ev, 4, d.b, d.n);
		}
		if (*p == ',')
			p++;
	}
}

static void
pf_slice(struct ex *x, const struct ex_track *t, const char *name,
    const char *cat, uint64_t ts, uint64_t dur, uint64_t flow_out,
    uint64_t flow_in, const char *args)
{
	uint64_t uid = pf_track(x, t, NULL, NULL);
	struct pf_buf ev = { .n = 0 };

	pf_uint(&ev, 9, 1);
	pf_uint(&ev, 11, uid);
	pf_str(&ev, 22, cat);
	pf_str(&ev, 23, name);
	pf_args(&ev, args);
	if (flow_out) {
		pf_fixed64(&ev, 47, flow_out);
		x->flows++;
	}
	if (flow_in)
		pf_fixed64(&ev, 48, flow_in);
	pf_event(x, ts, &ev);
	ev.n = 0;
	pf_uint(&ev, 9, 2);
	pf_uint(&ev, 11, uid);
	pf_event(x, ts + dur, &ev);
}

static void
pf_instant(struct ex *x, const struct ex_track *t, const char *name,
    uint64_t ts)
{
	struct pf_buf ev = { .n = 0 };

	pf_uint(&ev, 9, 3);
	pf_uint(&ev, 11, pf_track(x, t, NULL, NULL));
	pf_str(&ev, 23, name);
	pf_event(x, ts, &ev);
}

static void
pf_counter(struct ex *x, const struct ex_track *t, const char *name,
    const char *unit, uint64_t ts, double v)
{
	struct pf_buf ev = { .n = 0 };

	pf_uint(&ev, 9, 4);
	pf_uint(&ev, 11, pf_track(x, t, name, unit));
	pf_double(&ev, 44, v);
	pf_event(x, ts, &ev);
}

/*
 * The first packet: a ClockSnapshot that makes CLOCK_REALTIME the trace
 * clock (every timed packet also names it in timestamp_clock_id), and the
 * start of the sequence's incremental state.
 */
static void
pf_clock(struct ex *x)
{
	struct pf_buf b = { .n = 0 }, cs = { .n = 0 }, c = { .n = 0 };

	pf_uint(&c, 1, PF_CLOCK_REALTIME);
	pf_uint(&c, 2, x->a->base_ts);
	pf_bytes(&cs, 1, c.b, c.n);
	pf_uint(&cs, 2, PF_CLOCK_REALTIME);
	pf_bytes(&b, 6, cs.b, cs.n);
	pf_uint(&b, 10, PF_SEQ);
	pf_uint(&b, 13, PF_SEQ_CLEARED);
	pf_packet(x, &b);
}

static const struct ex_emit pf_emit = { pf_slice, pf_instant, pf_counter };

PF_ATTR int
export_perfetto(struct analysis *a, FILE *out)
{
	struct pf p;
	struct ex x;
	int rc;

	memset(&x, 0, sizeof(x));
	memset(&p, 0, sizeof(p));
	x.a = a;
	x.out = out;
	x.em = &pf_emit;
	x.priv = &p;
	pf_clock(&x);
	rc = ex_walk(&x);
	free(p.seen);
	if (rc == 0 && (fflush(out) != 0 || ferror(out)))
		rc = -EIO;
	return rc;
}

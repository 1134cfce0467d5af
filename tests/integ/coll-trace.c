/*
 * coll-trace FILE HOST RANK N: writes the trace of a long capture of one
 * rank of two, as msptid would: N all-reduces on "dp" carrying their seq
 * (10 us apart, ending together on both ranks; rank 1 arrives late by
 * 0..800 ns in a cycle of 5), a send on "pp" without a seq after every
 * 10th, and an MSTX "step" range over every 4 all-reduces.  Its host
 * name is HOST.  The report tests use it where a capture with this many
 * collectives would take minutes to record.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record.h"
#include "trace.h"

#define T0	1700000000000000000ull

static void
put(struct trace_writer *w, const void *rec)
{
	int rc = trace_writer_add(w, rec);

	if (rc != 0) {
		fprintf(stderr, "coll-trace: %s\n", trace_strerror(rc));
		exit(1);
	}
}

static uint32_t
intern(struct trace_writer *w, const char *s)
{
	uint32_t id;
	int rc = trace_writer_intern(w, s, strlen(s), &id);

	if (rc != 0) {
		fprintf(stderr, "coll-trace: %s\n", trace_strerror(rc));
		exit(1);
	}
	return id;
}

int
main(int argc, char **argv)
{
	struct trace_header h;
	struct trace_footer ft;
	struct trace_writer *w;
	struct rec_process p;
	struct rec_marker m;
	struct rec_communication c;
	uint32_t ar, dp, send, pp;
	long rank, n;
	int fd, rc;

	if (argc != 5 || (rank = atol(argv[3])) < 0 || rank > 1 ||
	    (n = atol(argv[4])) < 1) {
		fprintf(stderr, "usage: coll-trace FILE HOST RANK(0|1) N\n");
		return 2;
	}
	if ((fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
		perror(argv[1]);
		return 1;
	}
	memset(&h, 0, sizeof(h));
	h.hostname = argv[2];
	h.producer = "coll-trace";
	if ((rc = trace_writer_open(fd, &h, 0, &w)) != 0) {
		fprintf(stderr, "coll-trace: %s\n", trace_strerror(rc));
		return 1;
	}
	REC_INIT(&p, REC_PROCESS, 0);
	p.pid = 300 + (uint32_t)rank;
	p.rank = (int32_t)rank;
	p.local_rank = 0;
	p.world_size = 2;
	put(w, &p);
	REC_INIT(&m, REC_MARKER, 0);
	m.pid = p.pid;
	m.tid = p.pid;
	m.device = m.stream = REC_NONE;
	m.name_id = intern(w, "step");
	REC_INIT(&c, REC_COMMUNICATION, 0);
	c.pid = c.tid = p.pid;
	c.count = 1u << 20;
	ar = intern(w, "hcom_allReduce_");
	dp = intern(w, "dp");
	send = intern(w, "hcom_send_");
	pp = intern(w, "pp");
	for (long k = 0; k < n; k++) {
		uint64_t b = T0 + (uint64_t)k * 10000;

		if (k % 4 == 0) {
			if (k > 0) {
				m.flag = 4;	/* range end */
				m.timestamp = b - 1;
				put(w, &m);
			}
			m.flag = 2;		/* range start */
			m.id = (uint64_t)k / 4 + 1;
			m.timestamp = b;
			put(w, &m);
		}
		c.name_id = ar;
		c.comm_name_id = dp;
		c.seq = (uint32_t)k + 1;
		c.start = b + 100 + (rank == 1 ? (uint64_t)(k % 5) * 200 : 0);
		c.end = b + 8000;
		c.correlation_id = (uint64_t)k + 1;
		put(w, &c);
		if (k % 10 == 9) {
			c.name_id = send;
			c.comm_name_id = pp;
			c.seq = 0;
			c.start = b + 8100;
			c.end = b + 9000;
			put(w, &c);
		}
	}
	m.flag = 4;
	m.timestamp = T0 + (uint64_t)n * 10000;
	put(w, &m);
	memset(&ft, 0, sizeof(ft));
	if ((rc = trace_writer_close(w, &ft, NULL)) != 0) {
		fprintf(stderr, "coll-trace: %s\n", trace_strerror(rc));
		return 1;
	}
	return close(fd) == 0 ? 0 : 1;
}

/*
 * Private: the ascend-pt exporter's pieces (lib/export-ascendpt*.c), its
 * structs and the prototypes of each file.
 */
#ifndef MSPTI_EXPORT_ASCENDPT_H
#define MSPTI_EXPORT_ASCENDPT_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis-int.h"

#define AP_CSV_SPECIAL	",\"\n"

/* Pseudo pids of trace_view.json's device-side processes (host ones use
 * the real pid); one rank per file, so constants do. */
#define AP_PID_CANN	0x7ff00001u
#define AP_PID_HW	0x7ff00002u
#define AP_PID_HCCL	0x7ff00003u
#define AP_PID_OVERLAP	0x7ff00004u

struct ap_stat {
	uint32_t	name;		/* global string id */
	const char	*kind;		/* core type or API level */
	struct an_stat	st;
};

/* What one rank collects while its files are streamed. */
struct ap_st {
	FILE		*kd, *tv;
	bool		 tv_any;
	struct {
		uint32_t	stream;
		uint64_t	last_end;
	}		*streams;
	size_t		 nstreams, cstreams;
	uint32_t	*tids;
	size_t		 ntids, ctids;
	struct ap_stat	*ops, *apis;
	size_t		 nops, cops, napis, capis;
	uint64_t	 kernel_time;
};

/* One rank's directory. */
struct ap_rank {
	struct an_proc	*p;
	char		*out;		/* its ASCEND_PROFILER_OUTPUT */
	uint32_t	 device;	/* first device it used */
	bool		 has_device;
};

/* A communicator: its ranks in order and its msprof group id. */
struct ap_group {
	uint32_t	 comm;		/* global string id */
	char		 gid[24];	/* str(double_hash(name)) */
	int		*ranks;		/* global ranks, sorted */
	size_t		 nranks;
	bool		 remote;	/* spans hosts: RDMA, else HCCS */
};

struct ap {
	struct analysis	*a;
	struct ap_rank	*r;
	size_t		 nr;
	struct ap_group	*g;
	size_t		 ng;
};

/* export-ascendpt.c */
AN_HIDDEN FILE		*ap_fopen(const char *dir, const char *name);
AN_HIDDEN int		 ap_fclose(FILE *f);
AN_HIDDEN const struct ap_group *ap_group(const struct ap *x, uint32_t comm);
AN_HIDDEN int		 ap_local_rank(const struct ap_group *g, int rank);
AN_HIDDEN void		 ap_hcom_name(const struct analysis *a,
			    const struct ap_group *g, const struct an_coll *c,
			    char *buf, size_t n);
AN_HIDDEN const char	*ap_hcom_type(const char *api);
AN_HIDDEN ssize_t	 ap_step_of(const struct an_proc *p, uint64_t t);
/* export-ascendpt-tables.c */
AN_HIDDEN int		 ap_op_statistic(struct ap *x, struct ap_rank *r,
			    struct ap_st *s);
AN_HIDDEN int		 ap_api_statistic(struct ap *x, struct ap_rank *r,
			    struct ap_st *s);
AN_HIDDEN int		 ap_step_trace(struct ap *x, struct ap_rank *r);
AN_HIDDEN int		 ap_info(struct ap *x, struct ap_rank *r,
			    const char *dir);
AN_HIDDEN int		 ap_metadata(struct ap *x, struct ap_rank *r,
			    const char *dir);
/* export-ascendpt-trace.c */
/* ns as "us.nnn". */
AN_HIDDEN void		 ap_us(FILE *f, uint64_t ns);
AN_HIDDEN void		 ap_tv_slice(struct ap_st *s, uint32_t pid,
			    uint32_t tid, const char *name, uint64_t ts,
			    uint64_t dur, const char *args);
AN_HIDDEN void		 ap_tv_meta(struct ap_st *s, const char *what,
			    uint32_t pid, uint32_t tid, const char *key,
			    const char *sval, long ival);
AN_HIDDEN int		 ap_trace_view_end(struct ap *x, struct ap_rank *r,
			    struct ap_st *s);
/* export-ascendpt-comm.c */
AN_HIDDEN int		 ap_comm_json(struct ap *x, struct ap_rank *r);
/* a / (a + b) rounded to 4 places as Python's round() does (0: none). */
AN_HIDDEN double	 ap_ratio(uint64_t a, uint64_t b);
AN_HIDDEN int		 ap_matrix_json(struct ap *x, struct ap_rank *r);

#endif

/*
 * Private structures of the analysis engine (lib/analysis*.c) and the
 * exporters (lib/export*.c).  Not for other users: see analysis.h.
 */
#ifndef MSPTI_ANALYSIS_INT_H
#define MSPTI_ANALYSIS_INT_H

#define AN_MAX_WARN	4096		/* warnings kept (an_warn) */

#include <stdlib.h>

#include "analysis.h"

struct trace_reader;
struct trace_chunk_aux;

#define AN_HIDDEN	__attribute__((visibility("hidden")))

/*
 * qsort for arrays that may be empty.  An empty array here is often NULL,
 * and qsort(NULL, 0, ...) is undefined (the pointer is declared nonnull;
 * UBSan stops on it).  An array already in order is left as it is, as a
 * stable sort leaves it: a rank's collectives and steps mostly come in
 * order, and one pass to see it costs a fraction of glibc's merge sort.
 */
static inline void
an_sort(void *base, size_t n, size_t size,
    int (*cmp)(const void *, const void *))
{
	const char *b = base;
	size_t i;

	if (n < 2)
		return;
	for (i = 1; i < n && cmp(b + (i - 1) * size, b + i * size) <= 0; i++)
		;
	if (i < n)
		qsort(base, n, size, cmp);
}

/* analysis-table.c */
struct table {
	char		*name;
	char		*title;
	size_t		 ncols;
	char		**cols;
	size_t		 nrows, cap;
	/* nrows * ncols cells: text in the arena, or a number as given,
	 * written out (into the arena, in its place) on the first
	 * table_cell: a report builds a row a step and rank, and the text
	 * report prints only a summary of them.  numeric[] says which
	 * (TAB_*, analysis-table.c). */
	union tab_val {
		const char	*s;
		double		 d;
		int64_t		 i;
		uint64_t	 u;
	}		*cells;
	unsigned char	*numeric;
	size_t		 cur;		/* cells filled in the last row */
	/* The cells' text, packed in blocks freed together: a report
	 * builds hundreds of thousands of cells (a row a step), and one
	 * malloc and free each cost more than their formatting. */
	struct trace_arena *arena;
};

struct table	*table_new(const char *name, const char *title, size_t ncols,
		    const char *const *cols);
void		 table_free(struct table *t);
void		 table_row(struct table *t);
/* Room for n more rows (table_row grows the table as it goes, this at
 * once: a table of a row a step). */
AN_HIDDEN void	 table_reserve(struct table *t, size_t n);
void		 table_str(struct table *t, const char *s);
void		 table_num(struct table *t, double v, int prec);
void		 table_u64(struct table *t, uint64_t v);
void		 table_i64(struct table *t, int64_t v);
/* Writes s to f as a JSON string literal, quotes included; control
 * characters become \u00XX.  Shared by table_print and the exporters. */
AN_HIDDEN void	 table_json_str(FILE *f, const char *s);
/* Writes s to f as a CSV field, quoted (quotes doubled) when it holds a
 * character of special. */
AN_HIDDEN void	 table_csv_str(FILE *f, const char *s, const char *special);

/* Running statistics of one duration series (ns). */
struct an_stat {
	uint64_t	count;
	uint64_t	total;
	/* The least value's complement, the greatest of ~v, so that the
	 * zeroed empty statistic needs no test (an_stat_min reads it). */
	uint64_t	nmin;
	uint64_t	max;
	/* Sum of squares in ns^2, exact, so that statistics merged from
	 * partial results in any grouping equal a single pass. */
	unsigned __int128 sumsq;
};

/* Sum of squares in us^2, for the variance. */
static inline double
an_stat_sumsq_us(const struct an_stat *s)
{
	return (double)s->sumsq / 1e6;
}

/* The least value (0 when there is none). */
static inline uint64_t
an_stat_min(const struct an_stat *s)
{
	return s->count ? ~s->nmin : 0;
}

static inline void
an_stat_add(struct an_stat *s, uint64_t v)
{
	if (~v > s->nmin)
		s->nmin = ~v;
	if (v > s->max)
		s->max = v;
	s->count++;
	s->total += v;
	s->sumsq += (unsigned __int128)v * v;
}

/* v counted n times (a sampled collective standing for n). */
static inline void
an_stat_addn(struct an_stat *s, uint64_t v, uint64_t n)
{
	if (~v > s->nmin)
		s->nmin = ~v;
	if (v > s->max)
		s->max = v;
	s->count += n;
	s->total += v * n;
	s->sumsq += (unsigned __int128)v * v * n;
}

/* Device interval classes for the step breakdown. */
enum an_cls {
	AN_COMPUTE = 0,
	AN_COMM_C = 1,		/* from COMMUNICATION records */
	AN_COMM_H = 2,		/* from HCCL records */
	AN_MEMCPY = 3,		/* memcpy and memset */
};

/*
 * Union groups swept per rank (analysis-sweep.c): each device interval
 * feeds the groups its class belongs to; overlap within a window is
 * |compute| + |comm| - |compute u comm|, so no intersection is kept.
 */
enum an_group {
	AN_G_COMP = 0,
	AN_G_COMMC,
	AN_G_COMMH,
	AN_G_CC,		/* compute u COMMUNICATION */
	AN_G_CH,		/* compute u HCCL */
	AN_G_MEM,
	AN_G_MAX,
};

struct an_ival {
	uint64_t	start;
	uint32_t	dur;		/* ns, clamped */
	uint32_t	cls;
};

/* Orders intervals by start (an_sort). */
static inline int
an_cmp_ival(const void *x, const void *y)
{
	const struct an_ival *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* Orders uint64_t values (an_sort). */
static inline int
an_cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* A closed union segment waiting for its steps to be known: of every
 * group in gm (bits of enum an_group; groups whose segments closed with
 * the same bounds go together). */
struct an_seg {
	uint64_t	s, e;
	uint32_t	gm;
};

/* Bounds of the step-breakdown sweep, per rank. */
/* Device intervals may arrive src->reorder_ns out of start order
 * (ANALYSIS_REORDER_NS by default, see analysis_opts.reorder_ns). */
#define AN_REORDER_MAX	(1u << 18)	/* intervals (16 bytes each) */
#define AN_PENDING_MAX	(1u << 18)	/* segments (24 bytes each) */
#define AN_HOST_WINDOW_NS 1000000000ull	/* host records may trail device
					   records this much */

/* One collective on one rank. */
struct an_coll {
	uint64_t	start, end;
	uint64_t	bytes;
	uint32_t	name;		/* global string ids */
	uint32_t	comm;
	uint32_t	alg;
	uint32_t	seq;		/* ordinal on comm used for matching */
	uint32_t	rseq;		/* the record's seq, 0: none */
	uint32_t	w;		/* instances it stands for in sums over
					   the capture: 1, or the stride it
					   was sampled at (analysis-sample.c) */
	uint64_t	wait, transit;	/* after matching */
	/* Matching found this instance on fewer ranks than its communicator
	 * has elsewhere: wait and transit are not split (both 0). */
	bool		unmatched;
};

/* How an_proc.seq_from keyed its collectives: not yet; by ordinal on
 * the communicator (no input carried seqs); where some input carried
 * seqs (the records' seq, else an ordinal with the top bit). */
enum { AN_SEQ_NONE = 0, AN_SEQ_ORDINAL, AN_SEQ_RECORDS };

struct an_step {
	uint64_t	start, end;
	int64_t		step;
	uint64_t	acc[AN_G_MAX];	/* covered time of each group */
	uint64_t	first;		/* first device activity, 0: none */
};

/* Disjoint sorted intervals with prefix sums. */
struct an_union {
	uint64_t	*s, *e, *pre;
	size_t		 n;
};

/* Step breakdown row. */
struct an_stepres {
	int64_t		step;
	uint64_t	start, end;
	uint64_t	compute, comm, overlap, free, memcpy, data;
	uint64_t	wait, transit;
};

/* Where a process's steps came from (an_proc.step_src, bits). */
#define AN_STEPS_MSTX	1u	/* MSTX ranges named the step marker */
#define AN_STEPS_SYNC	2u	/* the agent's, from the synchronize pattern */
#define AN_STEPS_RECS	4u	/* step records */

/*
 * A clock correction onto the reference timeline (analysis-clock.c): add
 * off, and drift_ppb ns per s of reference time away from mid (a host
 * whose clock drifts, lib/clockalign.h).
 */
struct an_clk {
	int64_t		 off;
	int64_t		 drift_ppb;
	uint64_t	 mid;
};

static inline uint64_t
an_clk_ts(const struct an_clk *c, uint64_t t)
{
	uint64_t r = t + (uint64_t)c->off;

	if (c->drift_ppb != 0)
		r += (uint64_t)(int64_t)((double)(int64_t)(r - c->mid) *
		    (double)c->drift_ppb / 1e9);
	return r;
}

/* A process's launch join: its launches and device work waiting for
 * each other, direct-mapped by correlation id (which a process counts
 * up: a launch waits for up to AN_PEND_SIZE later ones). */
#define AN_PEND_SIZE	65536u
/* Its pages (of 4 KiB at least), for their first touch. */
#define AN_PAGE		4096u
#define AN_PEND_PAGES	((AN_PEND_SIZE * sizeof(struct an_pend) + \
			    AN_PAGE - 1) / AN_PAGE)
/* A cache line each: a slot is one miss, and lies in one page. */
struct an_pend {
	uint64_t	corr;		/* the process's */
	uint64_t	start, end;	/* API or device op */
	uint64_t	prev_end;	/* device op: the process's device work
					   seen before it ended here */
	uint32_t	name;		/* global: API name or kernel name */
	uint32_t	pid;
	uint8_t		is_dev;
} __attribute__((aligned(64)));
_Static_assert(AN_PAGE % sizeof(struct an_pend) == 0, "an_pend in a page");

/* One process (rank) of one source. */
struct an_proc {
	struct analysis_source *src;
	uint32_t	 pid;
	uint64_t	 launch_dev_end;	/* latest device end joined */
	/* Launch join: NULL until its first correlated record
	 * (an_pend_free unmaps it); the pages of it written to already
	 * (each is first touched by a write).  A process's own: keyed by
	 * (id, pid) in one table for a file, processes took each other's
	 * waiting slots. */
	struct an_pend	*pend;
	uint64_t	 pend_touched[AN_PEND_PAGES / 64 + 1];
	uint32_t	 pend_left;		/* its pages not touched yet */
	uint32_t	 idx;			/* creation order: flow ids */
	uint64_t	 seq;			/* analysis.seq at creation */
	int32_t		 rank, local_rank, world_size;
	uint32_t	 job, exe;		/* global string ids */
	struct an_clk	 clk;			/* added to align clocks */
	int64_t		 skew;			/* measured offset to the reference */
	/* How far its times may sit from another rank's after alignment:
	 * the uncertainty of its own offset estimate (on the reference
	 * host too), at least CLOCKALIGN_FLOOR_NS (analysis-clock.c). */
	int64_t		 clk_unc;
	/* The index of its first step in a steps window (the daemon's record
	 * of it leaving says "steps K..M"), else -1: its steps are numbered
	 * from there, as every rank's window starts at the same K. */
	int64_t		 step_base;
	/* Where its steps came from: AN_STEPS_MSTX | _SYNC | _RECS. */
	uint32_t	 step_src;
	/* Past the caps its steps are a sample (an_sample): the rows whose
	 * index is a multiple of step_w, each numbered (step set);
	 * steps_seen is how many there were.  step_w 0: not sampled yet. */
	uint32_t	 step_w;
	uint64_t	 steps_seen;
	bool		 aligned;		/* skew measured */
	int		 cw;			/* coll[] in use: 0 or 1 */
	/* Whether its collectives' keys (seq) are set, and how: AN_SEQ_*
	 * (analysis-sample.c). */
	uint8_t		 seq_from;
	size_t		 cur;			/* matching cursor */
	uint64_t	 first_ts, last_ts;
	uint64_t	 host_ts;		/* latest host timestamp */
	/* Step-breakdown sweep (analysis-sweep.c). */
	struct an_ival	*rb;			/* reorder ring */
	size_t		 rb_head, rb_n, rb_cap, rb_next_sort;
	uint64_t	 rb_max, rb_last;
	bool		 rb_unsorted;
	uint64_t	 lo;			/* latest released start */
	uint64_t	 late;			/* beyond the reorder window */
	uint64_t	 sw_s[AN_G_MAX], sw_e[AN_G_MAX]; /* open segments */
	uint64_t	 whole[AN_G_MAX];	/* whole-capture totals */
	uint64_t	 gap_last[AN_G_MAX], gap_max[AN_G_MAX]; /* longest
						   idle gap between segments */
	uint64_t	 gap_from[AN_G_MAX];	/* where it started */
	struct an_seg	*pq;			/* pending segments */
	size_t		 pq_head, pq_n, pq_cap;
	uint64_t	 pq_moved;	/* segments moved to compact pq */
	/* Steps found after device time over them was attributed (the
	 * pending queue was full): the breakdown is approximate. */
	uint64_t	 forced;
	uint64_t	 forced_hi;	/* latest end attributed so */
	uint64_t	 safe_static;		/* no step opened before */
	bool		 step_recs;		/* REC_STEP seen */
	struct an_union	 seg[3];		/* kept for export:
						   comp, commC, commH */
	struct an_ival	*data;			/* data-loading ranges */
	size_t		 ndata, cdata;
	struct an_coll	*coll[2];		/* [0] COMMUNICATION, [1] HCCL */
	size_t		 ncoll[2], ccoll[2];
	struct an_step	*steps;
	size_t		 nsteps, csteps;
	size_t		 step_hint[AN_G_MAX];	/* sw_attribute's last answer
						   per group */
	struct an_open {
		uint64_t id, ts;
		uint32_t name;
	}		*open;			/* open marker ranges, at most
						   AN_OPEN_MAX */
	size_t		 nopen, copen;
	uint64_t	 open_evicted;		/* STARTs never paired */
	struct an_union	 u_comp, u_comm;	/* export: chosen unions */
	struct an_stepres *res;
	size_t		 nres;
	uint64_t	 votes;
	uint64_t	 kernel_time, api_time, sync_calls;
	uint64_t	 gap, gap_at;		/* longest device idle gap */
	uint64_t	 lead_total;		/* step start -> first work */
	uint64_t	 lead_max;
	bool		 finished;		/* an_sweep_finish done */
};

struct an_dev {
	uint32_t	device;
	uint64_t	allocs, frees, alloc_bytes, free_bytes;
	int64_t		cur, peak;
	uint64_t	peak_ts;
};

/* MSTX ranges open at once per process before the oldest is given up
 * (counted, warned): bounds memory against STARTs that never end. */
#define AN_OPEN_MAX	65536u

struct analysis_source {
	struct analysis	*a;
	char		*name;
	char		*path;		/* NULL for direct feeds */
	char		*host;
	uint32_t	*map;		/* local string id -> global */
	size_t		 nmap;
	/* Caches by local string id, valid while map is (cleared when an
	 * id is redefined, freed when a merge reorders ops and APIs):
	 * name id -> its local type id << 32 | op index + 1, and name id ->
	 * API index + 1; 0: not cached. */
	uint64_t	*op_of;
	size_t		 nop_of;
	uint32_t	*api_of;
	size_t		 napi_of;
	struct an_proc	*last;		/* cache of proc_get */
	struct rec_clock_sync clocks[64];
	size_t		 nclocks;
	uint64_t	 reorder_ns;	/* reorder window of its ranks */
	struct an_clk	 clk;		/* its host's clock correction, for
					   records of no process
					   (analysis-clock.c) */
	uint64_t	 losses[LOSS_STAGE_MAX];
	uint64_t	 loss_records[LOSS_STAGE_MAX];
	uint64_t	 records;
	bool		 truncated;
	uint64_t	 corrupt;
	/* A file's shard but the first: device memory totals are the first
	 * shard's, which sees every MEMORY record in order (an_mem_dev). */
	bool		 no_mem_dev;
};

struct an_op {
	uint32_t	name, type;	/* global ids */
	bool		aicpu;		/* type names an AI_CPU core */
	uint64_t	seq;		/* analysis.seq of its first record */
	struct an_stat	st;
	uint64_t	host_total;	/* launch API time of its kernels */
	uint64_t	host_count;
};

/* Launch API time whose device name had no op yet in this partial
 * result: a merge gives it to an earlier partial's op of that name, as a
 * single pass would have (analysis-partial.c). */
struct an_orphan {
	uint32_t	name;
	uint64_t	total, count;
	uint64_t	seq;		/* analysis.seq of its first launch */
};

struct an_launch_out {
	uint64_t	corr;
	uint32_t	api, kernel;
	uint64_t	runtime, dur, delay;
	int32_t		rank;
	uint64_t	seq;		/* analysis.seq of the joining record */
};

struct an_str {
	char		**v;		/* id -> string; v[0] = "" */
	size_t		 n, cap;
	uint32_t	*ht;		/* open addressing: id or 0 */
	size_t		 htcap;
};

struct analysis {
	struct analysis_opts	 o;
	/* o's launch thresholds in ns (o.launch_runtime_us * 1e3, ...),
	 * set with o by analysis_new: an_launch compares every launch. */
	double			 l_runtime_ns, l_delay_ns;
	struct an_str		 str;
	struct analysis_source	**src;
	size_t			 nsrc;
	struct an_proc		**proc;
	size_t			 nproc;
	struct an_op		*ops;
	size_t			 nops, cops;
	/* Global name id -> 1 + the first op of that name (0: none). */
	uint32_t		*op_first;
	size_t			 nop_first;
	struct an_orphan	*orph;
	size_t			 norph, corph;
	struct an_op		*apis;
	size_t			 napis, capis;
	struct an_stat		 memcpy_st[6];
	uint64_t		 memcpy_bytes[6];
	uint64_t		 memcpy_misaligned[6];
	struct an_dev		 devs[65];
	size_t			 ndevs;
	/* Launch statistics. */
	uint64_t		 launches;
	struct an_stat		 l_runtime, l_dur, l_delay;
	uint64_t		 l_slow_runtime, l_slow_delay, l_short;
	struct an_launch_out	 l_top[32];
	size_t			 nl_top;
	uint64_t		 counts[REC_TYPE_MAX];
	uint64_t		 records;
	/* Records walked, in every file in order, this analysis's or not
	 * (a file's shards, analysis-shard.c, each walk all of it): what
	 * orders first sights (an_op, an_proc, ... .seq) when the shards
	 * merge. */
	uint64_t		 seq;
	uint64_t		 aicpu_time, aicpu_count, kernel_time;
	char			**warn;
	size_t			 nwarn;
	struct analysis_advice	*adv;
	size_t			 nadv;
	struct analysis_verdict	 verdict;
	struct table		*tables[ANALYSIS_SECTION_MAX];
	int			 world_size;
	unsigned		 files;
	unsigned		 threads;	/* analysis_totals.threads */
	bool			 ran;
	bool			 partial;
	uint32_t		 step_gid;	/* interned o.step_marker */
	uint64_t		 base_ts;	/* earliest aligned timestamp */
	bool			 coll_abs;	/* some collective records
						 * carry seq: seq is theirs */
};

/* analysis.c */
AN_HIDDEN const char	*an_str_get(const struct analysis *a, uint32_t id);
AN_HIDDEN uint32_t	 an_str_intern(struct analysis *a, const char *s);
/* The device's totals (the 65th slot takes every device past 64). */
AN_HIDDEN struct an_dev	*an_dev_get(struct analysis *a, uint32_t device);
AN_HIDDEN void		 an_warn(struct analysis *a, const char *fmt, ...)
			    __attribute__((format(printf, 2, 3)));
/* an_proc_find's search past its cache (src->last). */
AN_HIDDEN struct an_proc *an_proc_lookup(struct analysis_source *src,
			    uint32_t pid);
AN_HIDDEN uint64_t	 an_dev_time(const struct analysis_source *src,
			    uint32_t device, uint64_t t);
AN_HIDDEN uint64_t	 an_union_measure(const struct an_union *u,
			    uint64_t a, uint64_t b);
AN_HIDDEN void		*an_realloc(void *p, size_t n);
/* analysis_source_add for each record of [p, end) (records back to back,
 * already checked, as a reader's chunk holds them). */
AN_HIDDEN void		 an_add_run(struct analysis_source *src,
			    const uint8_t *p, const uint8_t *end);

/* The process record of pid in src (created on first sight); pid 0: the
 * last one seen.  Inline: nearly every record asks for the one before. */
static inline struct an_proc *
an_proc_find(struct analysis_source *src, uint32_t pid)
{
	if (src->last != NULL && (src->last->pid == pid || pid == 0))
		return src->last;
	return an_proc_lookup(src, pid);
}
AN_HIDDEN void		 an_grow(void *vp, size_t *cap, size_t n, size_t sz);
/* Unmaps a process's launch join table (made on first use). */
AN_HIDDEN void		 an_pend_free(struct an_proc *p);
/* A device's clock model from here on. */
AN_HIDDEN void		 an_clock_sync(struct analysis_source *src,
			    const struct rec_clock_sync *c);
/* A MEMORY record's device totals (analysis_source_add does it too). */
AN_HIDDEN void		 an_mem_dev(struct analysis *a,
			    const struct rec_memory *r);
/* The source of a trace file open in r: its host, reorder window and
 * device clocks from the header. */
AN_HIDDEN struct analysis_source *an_src_open(struct analysis *a,
			    const char *path, struct trace_reader *r);
/* Gives launch time that waited for an op of its name (an_orphan) to
 * the first op of that name now there is one. */
AN_HIDDEN void		 an_orphans_settle(struct analysis *a);
/* analysis-shard.c */
#define AN_SHARD_QUEUE	8	/* chunks a file's shards hold at most */
/* Of jobs threads for a file, how many analyse (the rest decompress
 * ahead of them): 1, or more for an_shards. */
AN_HIDDEN unsigned	 an_shard_plan(unsigned jobs);
/* The trace_chunk_fn an_shards needs on the reader (before its threads). */
AN_HIDDEN void		 an_shard_index(const uint8_t *data, size_t len,
			    uint32_t records, struct trace_chunk_aux *aux);
/* Reads the rest of the file in r into src, chunk by chunk, in up to
 * an_shard_plan(a->o.jobs) threads, each analysing the processes it is
 * given, merged into a; 0 or a read error.  Warnings and corrupt chunks
 * are a's. */
AN_HIDDEN int		 an_shards(struct analysis *a,
			    struct analysis_source *src, struct trace_reader *r,
			    const char *path);
/* analysis-merge.c */
AN_HIDDEN void		 an_finish_input(struct analysis *a);
/* Folds shard b of a file into a, the file's first shard (its source
 * is a's last): b's input is finished, its sums and statistics added,
 * its ops, APIs, orphans and launch outliers joined, its ranks moved to
 * a's source. */
AN_HIDDEN void		 an_merge_shard(struct analysis *a, struct analysis *b);
/* After the last an_merge_shard of a file: first sights in file order
 * (ops, APIs, orphans and ranks since the counts in *before). */
struct an_counts {
	size_t		 nops, napis, norph, nproc;
};
AN_HIDDEN void		 an_merge_shards_end(struct analysis *a,
			    const struct an_counts *before);
/* 1 + the first op named name (0: none); sets it unless set. */
AN_HIDDEN uint32_t	 an_op_first(const struct analysis *a, uint32_t name);
AN_HIDDEN void		 an_op_first_set(struct analysis *a, uint32_t name,
			    size_t idx);
/* A new op (name, type: global ids) at the end of a's ops; its index. */
AN_HIDDEN size_t	 an_op_new(struct analysis *a, uint32_t name,
			    uint32_t type, bool aicpu, uint64_t seq);
/* Host launch time of kernels of name with no op of their own. */
AN_HIDDEN void		 an_orphan_add(struct analysis *a, uint32_t name,
			    uint64_t total, uint64_t count, uint64_t seq);
/* analysis-sample.c: keys every rank's collectives; then, past
 * opts.step_cap or .coll_cap, keeps a sample of steps (and what lies in
 * them) and of the collectives outside steps: each rank at its own
 * strides (!alike: a partial result), or every rank at the largest
 * (alike: the analysis).  Sets an_coll.w, an_proc.step_w. */
AN_HIDDEN void		 an_sample(struct analysis *a, bool alike);
/* analysis-sweep.c */
AN_HIDDEN void		 an_sweep_add(struct analysis *a, struct an_proc *p,
			    uint64_t s, uint64_t e, enum an_cls cls);
AN_HIDDEN void		 an_sweep_step(struct analysis *a, struct an_proc *p,
			    uint64_t s, uint64_t e, int64_t step);
AN_HIDDEN void		 an_sweep_markers(struct analysis *a,
			    struct an_proc *p);
AN_HIDDEN void		 an_sweep_finish(struct analysis *a,
			    struct an_proc *p);
AN_HIDDEN void		 an_sweep_free(struct an_proc *p);
/* analysis-sections.c */
AN_HIDDEN int		 an_sections(struct analysis *a);
AN_HIDDEN int		 an_steps(struct analysis *a);
/* analysis-clock.c: estimates, the clocks table, offsets per proc. */
AN_HIDDEN struct an_clk	*an_clock(struct analysis *a);
/* analysis-verdict.c */
AN_HIDDEN void		 an_verdict(struct analysis *a);

#endif

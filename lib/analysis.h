/*
 * The analysis engine behind `msptictl report` and `export`, and the
 * Python Profile class: aggregates trace records on the fly and turns them
 * into tables.  Memory is bounded by the number of distinct names, steps,
 * data-loading ranges and collectives, plus, per rank, a reorder window of
 * device intervals and the union segments of one open step (see
 * doc/report.md); never by the number of kernels.
 *
 * Typical use:
 *
 *	struct analysis_opts o;
 *	analysis_opts_init(&o);
 *	struct analysis *a = analysis_new(&o);
 *	analysis_add_file(a, "rank0.trace");	   (any number of files)
 *	analysis_run(a);
 *	table_print(analysis_table(a, ANALYSIS_OPS), TABLE_TEXT, stdout);
 *	analysis_free(a);
 *
 * Records can also be fed without a file: analysis_source_new(), then
 * analysis_source_string() for each string id and analysis_source_add()
 * for each record (validated with record_validate first).
 *
 * Functions return 0 or a negative errno-style code; analysis_strerror().
 * Problems with the input (missing ranks, lost records, truncated files)
 * are not errors: they are collected as warnings (analysis_warnings) and
 * shown by every output.
 */
#ifndef MSPTI_ANALYSIS_H
#define MSPTI_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "record.h"

/* Report sections; each is one table. */
enum analysis_section {
	ANALYSIS_SUMMARY = 0,	/* inputs, ranks, records, losses */
	ANALYSIS_OPS,		/* op_statistic */
	ANALYSIS_TOP_KERNELS,	/* top-N kernels by total time */
	ANALYSIS_APIS,		/* api_statistic */
	ANALYSIS_LAUNCH,	/* launch statistics (HTA) */
	ANALYSIS_LAUNCH_OUTLIERS,	/* worst launches */
	ANALYSIS_MEMCPY,	/* memcpy by direction */
	ANALYSIS_MEMORY,	/* allocations per device, peak */
	ANALYSIS_COMM,		/* communication_statistic + wait/transit */
	ANALYSIS_COMM_MATRIX,	/* src -> dst rank */
	ANALYSIS_STEPS,		/* per rank and step breakdown */
	ANALYSIS_RANKS,		/* per rank: clock offset, averages, votes */
	ANALYSIS_CLOCKS,	/* per host and rank: offset +- uncertainty */
	ANALYSIS_SLOW_RANK,	/* verdict and cause */
	ANALYSIS_ADVICE,	/* advisor findings */
	ANALYSIS_SECTION_MAX,
};

enum table_format {
	TABLE_TEXT = 0,
	TABLE_JSON,
	TABLE_CSV,
};

/* Clock alignment from collective end times (lib/clockalign.h). */
enum analysis_align {
	ANALYSIS_ALIGN_AUTO = 0,	/* per host (per rank where a host's
					   ranks disagree) */
	ANALYSIS_ALIGN_ALWAYS,		/* each rank its own estimate */
	ANALYSIS_ALIGN_NEVER,		/* estimate and show, apply none */
};

struct analysis_opts {
	unsigned	 top_n;		/* rows of the top tables (10) */
	const char	*step_marker;	/* marker range that is a step ("step") */
	const char	*data_marker;	/* marker range prefix for data loading
					   ("data") */
	int		 world_size;	/* expected ranks; 0: from the traces */
	enum analysis_align align;
	/* Advisor thresholds (defaults from ANALYSIS.md). */
	double		 launch_runtime_us;	/* 50 */
	double		 launch_delay_us;	/* 100 */
	/* Slow rank: a rank's excess in a category must be over
	 * rank_sigmas times the noise measured in the capture, over
	 * rank_imbalance of the device work (plus a tenth of the
	 * step), and for host/launch over rank_host_floor of the step
	 * (analysis-verdict.c). */
	double		 rank_imbalance;	/* 0.01 */
	double		 rank_sigmas;		/* 5 */
	double		 rank_host_floor;	/* 0.03 of the step */
	double		 dataloader_ms;		/* 10 per step */
	double		 malloc_ms;		/* 10 in total */
	double		 host_gap_ms;		/* 200 */
	double		 comm_retrans_s;	/* 4 */
	double		 small_packet_ratio;	/* 0.2 of transfers */
	/* Device records may be this much (ns) out of start order in a
	 * trace: the reorder window of the step breakdown.  0: the default,
	 * ANALYSIS_REORDER_NS, or a trace header's "max_lateness_ns" (what
	 * its writer guarantees) plus 1 s when that is larger. */
	uint64_t	 reorder_ns;
	/* Keep the per-rank compute/communication unions for the
	 * exporters' overlap track (memory grows with the trace). */
	bool		 keep_segments;
	/* Threads for reading trace files: 0 or 1 reads in the caller's
	 * thread; N > 1 decompresses and checks chunks in N - 1 workers
	 * ahead of the analysis, and opens the next file while one is
	 * analysed.  Results are the same for every N. */
	unsigned	 jobs;
	/* Steps, and collectives in them, a rank may have before they are
	 * sampled: past either, the steps whose index is a multiple of 2^k
	 * (the same on every rank) are kept whole and stand for all, with a
	 * warning; collectives outside steps past a quarter of coll_cap (all
	 * of it on a rank without steps) keep 1 in 2^j instances alike.  So
	 * partial results stay bounded and a distributed report equals the
	 * central one (lib/analysis-sample.c).  0 keeps every one (the
	 * exports, which draw each); msptictl report uses the defaults. */
	size_t		 coll_cap;
	size_t		 step_cap;
};

/* About 260 kB of a partial result a rank for the collectives, 200 kB
 * for the steps. */
#define ANALYSIS_COLL_CAP	16384u
#define ANALYSIS_STEP_CAP	8192u

/* Default reorder window: msptid writes a device record up to about 2 s
 * after records that started later (its task waited for the launch). */
#define ANALYSIS_REORDER_NS	5000000000ull
/* Upper bound on a window taken from a trace header. */
#define ANALYSIS_REORDER_MAX_NS	60000000000ull

struct analysis;
struct analysis_source;
struct table;

/* Fills o with the defaults. */
void	analysis_opts_init(struct analysis_opts *o);

/* A new, empty analysis (opts copied; NULL: defaults), or NULL (ENOMEM).
 * Freed with analysis_free. */
struct analysis	*analysis_new(const struct analysis_opts *opts);
void	analysis_free(struct analysis *a);

/*
 * Streams every record of the trace file at path into the analysis.  A
 * truncated file, corrupt chunks and footer losses become warnings.
 * Returns 0, or a negative errno when the file cannot be read at all
 * (then also a warning).  The path is kept for the exporters.
 */
int	analysis_add_file(struct analysis *a, const char *path);
/* analysis_add_file for each of n paths, the next one read ahead while
 * one is analysed (opts.jobs > 1).  Returns how many were read. */
size_t	analysis_add_files(struct analysis *a, char *const *paths, size_t n);

/*
 * Partial results (doc/report.md "Partial results"): an analysis that has
 * had its input and not yet analysis_run is a partial result; it merges
 * into another one exactly.  Merging the partials of files in order gives
 * what analysis_add_files over the same files gives.
 *
 * analysis_merge moves part's input into a (part is left empty: free it);
 * neither may have run.  0 or -EINVAL.
 */
int	analysis_merge(struct analysis *a, struct analysis *part);
/* Each file in its own partial result, in opts.jobs threads (files in
 * parallel; threads beyond the files decompress ahead), merged into a in
 * file order.  Returns how many were read. */
size_t	analysis_add_files_merged(struct analysis *a, char *const *paths,
	    size_t n);
/* Serializes a (ends its input) into *buf (malloc'd, *len bytes): a
 * self-checking, versioned format whose size grows with names, steps and
 * collectives, not records.  0, -EINVAL after analysis_run, -E2BIG. */
int	analysis_partial_encode(struct analysis *a, void **buf, size_t *len);
/* Checks and merges the partial at buf (at most len bytes; *used: its
 * size, so partials may be concatenated) into a, made with the same
 * options.  0, or -EBADMSG with a one-line reason in err. */
int	analysis_partial_decode(struct analysis *a, const void *buf,
	    size_t len, size_t *used, char *err, size_t errlen);
/* The same checks, the partial decoded into *part (a new analysis with
 * a's options, to analysis_merge into a later, then free) and not
 * merged: a caller that must check every partial before merging any
 * decodes each once. */
int	analysis_partial_read(const struct analysis *a, const void *buf,
	    size_t len, size_t *used, struct analysis **part, char *err,
	    size_t errlen);
/* Each file's partial result, encoded, in opts->jobs threads: bufs[i]
 * (malloc'd, lens[i] bytes; NULL when it could not be encoded), ranks[i]
 * its ranks, rcs[i] analysis_add_file's result.  0 or -ENOMEM. */
int	analysis_encode_files(const struct analysis_opts *opts,
	    char *const *paths, size_t n, void **bufs, size_t *lens,
	    unsigned *ranks, int *rcs);
/* Ranks (processes with a rank) in a. */
unsigned	analysis_partial_ranks(const struct analysis *a);

/*
 * Direct feeding (no file).  A source is one record stream with its own
 * string id namespace (one trace file, or one process's records); name is
 * shown in the summary.  hostname may be NULL.  The source belongs to a.
 */
struct analysis_source	*analysis_source_new(struct analysis *a,
	    const char *name, const char *hostname);
/* Defines string id (non-zero) of src as s. 0 or -ENOMEM. */
int	analysis_source_string(struct analysis_source *src, uint32_t id,
	    const char *s);
/* Adds one record (it must pass record_validate; STRING_DEF records are
 * handled too).  Returns 0 or -EBADMSG. */
int	analysis_source_add(struct analysis_source *src,
	    const struct rec_hdr *rec);
/* Adds losses known for the source (e.g. a footer's). */
void	analysis_source_losses(struct analysis_source *src,
	    const uint64_t losses[LOSS_STAGE_MAX]);

/* Finishes the analysis: clock alignment, cross-rank matching, steps,
 * slow rank, advice and all tables.  Call once, after all input.  0 or
 * -ENOMEM. */
int	analysis_run(struct analysis *a);

/* The table of a section after analysis_run (NULL before); owned by a. */
const struct table	*analysis_table(struct analysis *a,
	    enum analysis_section s);

/*
 * Prints section s as text for a reader (TABLE_TEXT).  The steps section,
 * which grows with the capture, is shortened when a rank has more than
 * top_n steps: a per-rank summary (step count, avg/p50/p90/max step time,
 * average breakdown), each rank's top_n slowest steps and a line saying
 * how many were left out.  Other sections print their whole table
 * (table_print).  0, -EINVAL before analysis_run, or -EIO.
 */
int	analysis_print_text(struct analysis *a, enum analysis_section s,
	    FILE *out);

/* A section's short name ("ops", "steps", ...) or NULL; and the reverse
 * (-1 when unknown). */
const char	*analysis_section_name(enum analysis_section s);
int		 analysis_section_from_name(const char *name);

/* Warnings about the input, NULL-terminated, owned by a. */
const char *const	*analysis_warnings(const struct analysis *a,
	    size_t *n);

/* One advisor finding (the ADVICE table holds the same). */
struct analysis_advice {
	const char	*severity;	/* "High", "Medium", "Low" */
	const char	*rule;		/* "slow_rank", "launch_delay", ... */
	const char	*message;	/* with the numbers */
};
/* The findings, most severe first; owned by a. */
const struct analysis_advice	*analysis_advice(const struct analysis *a,
	    size_t *n);

/* Verdict of the slow-rank analysis: rank -1 when none. */
struct analysis_verdict {
	int		 rank;
	const char	*cause;		/* "compute", "host/launch",
					   "data loading", "link", or NULL */
	double		 share;		/* of the slow rank's step time, 0..1 */
	double		 imbalance;	/* (max-min)/mean of own time */
	double		 threshold;	/* excess needed, share of the step */
	double		 noise;		/* measured noise, share of the step */
};
void	analysis_verdict(const struct analysis *a,
	    struct analysis_verdict *v);

/* Totals for tests and tools. */
struct analysis_totals {
	uint64_t	records;
	uint64_t	lost;		/* footer + LOSS records */
	unsigned	ranks_seen;
	unsigned	world_size;	/* largest declared, 0 unknown */
	unsigned	files;
	bool		partial;	/* missing ranks, losses or truncation */
	/* The most threads that analysed one file at once: of the
	 * threads analysis_opts.jobs gives a file, those that had a
	 * process to analyse; 1 when one thread read every file. */
	unsigned	threads;
};
void	analysis_get_totals(const struct analysis *a,
	    struct analysis_totals *t);

const char	*analysis_strerror(int err);

/*
 * Tables: named columns of cells.  Numeric cells print unquoted in JSON.
 * table_print writes TEXT (aligned columns with a title line), JSON (an
 * array of objects keyed by column name) or CSV (header row, RFC 4180
 * quoting).  Returns 0 or -EIO.
 */
const char	*table_name(const struct table *t);
const char	*table_title(const struct table *t);
size_t		 table_ncols(const struct table *t);
size_t		 table_nrows(const struct table *t);
const char	*table_col(const struct table *t, size_t col);
/* The cell's text ("" when out of range); *numeric (may be NULL) says
 * whether it is a number.  Numbers are written out when first read, so
 * one table is read (and printed) by one thread at a time. */
const char	*table_cell(const struct table *t, size_t row, size_t col,
	    bool *numeric);
int		 table_print(const struct table *t, enum table_format f,
	    FILE *out);

#endif

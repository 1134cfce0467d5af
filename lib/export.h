/*
 * Exporters: re-read the trace files of an analysis (after analysis_run,
 * which provides clock offsets, ranks and the overlap unions) and write
 * them as a timeline or as CSV tables.  Directly fed sources (no file) are
 * not exported.  Each returns 0 or a negative errno.
 */
#ifndef MSPTI_EXPORT_H
#define MSPTI_EXPORT_H

#include <stdio.h>

#include "analysis.h"

/* Chrome trace JSON (Perfetto UI, chrome://tracing): tracks per process,
 * thread, device stream; launch -> kernel flows by correlation id;
 * counters; an "Overlap Analysis" track per rank; distributedInfo. */
int	export_chrome(struct analysis *a, FILE *out);

/* Perfetto protobuf (perfetto.protos.Trace, proto/perfetto/trace.proto). */
int	export_perfetto(struct analysis *a, FILE *out);

/* CSV tables with msprof column names into directory dir (created):
 * op_summary.csv, op_statistic.csv, api_statistic.csv,
 * communication_statistic.csv, plus the other report sections. */
int	export_csv(struct analysis *a, const char *dir);

/* torch_npu's profiler tree (ascend_pt) into directory dir (created):
 * one <host>_<pid>_<time>_ascend_pt directory per rank, for
 * msprof-analyze and MindStudio Insight (doc/export.md).  Needs
 * keep_segments for the Overlap Analysis track.  -ENOTDIR when dir is
 * not a directory, -ENODATA when no process has anything to export. */
int	export_ascendpt(struct analysis *a, const char *dir);

#endif

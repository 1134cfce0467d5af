/*
 * In-process capture: converts msPTI activity records (from the buffers
 * libmspti delivers to msptiActivityRegisterCallbacks) into lib/record.h
 * records and writes a trace file with lib/trace's writer, with a PROCESS
 * record (pid, rank from $RANK, $LOCAL_RANK, $WORLD_SIZE, job from
 * $MSPTI_JOB_ID / $SLURM_JOB_ID / $TORCHELASTIC_RUN_ID).
 *
 *	struct capture *c;
 *	capture_open("rank0.trace", &c);
 *	... in the buffer-complete callback, for each record r from
 *	    msptiActivityGetNextRecord: capture_add(c, r);
 *	capture_close(c, dropped);
 *
 * capture_add takes an internal lock, so callbacks from several threads
 * may call it.  Functions return 0 or a negative errno (trace_strerror).
 */
#ifndef MSPTI_CAPTURE_H
#define MSPTI_CAPTURE_H

#include <stdint.h>

#include "mspti/mspti_activity.h"

struct capture;

/* Creates path (truncating it) and writes the header and the PROCESS
 * record.  *cp is freed by capture_close. */
int	capture_open(const char *path, struct capture **cp);

/* Converts and appends one msPTI activity record.  Unknown kinds are
 * skipped (returns 0). */
int	capture_add(struct capture *c, const msptiActivity *rec);

/* Records that n activity records were lost before reaching capture_add
 * (e.g. the agent had no buffer): written as a REC_LOSS and in the footer. */
void	capture_lost(struct capture *c, uint64_t n);

/* Writes the footer, closes the file and frees c.  0 or the first error. */
int	capture_close(struct capture *c);

#endif

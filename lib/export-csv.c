/* CSV export: msprof-named tables, one file each, into a directory. */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export.h"
#include "analysis-int.h"
#include "trace.h"
#include "util.h"

#define CSV_ATTR	__attribute__((visibility("default")))

/* dir/name.csv for writing (util_create_output: a FIFO or device there
 * is refused at once); NULL with errno set. */
static FILE *
csv_open(const char *dir, const char *name)
{
	char path[PATH_MAX];
	FILE *f;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s.csv", dir, name) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if ((fd = util_create_output(path, 0666, false)) < 0) {
		errno = -fd;
		return NULL;
	}
	if ((f = fdopen(fd, "w")) == NULL)
		close(fd);
	return f;
}

/* Fields are quoted on these only (not on CR, unlike table_print). */
#define CSV_SPECIAL	",\"\n"

/* The end of the last task on one stream of one process. */
struct csv_stream {
	uint32_t	pid, device, stream;
	uint64_t	last_end;
};

static struct csv_stream *
csv_stream(struct csv_stream **v, size_t *n, size_t *cap, uint32_t pid,
    uint32_t device, uint32_t stream)
{
	struct csv_stream *nv;

	for (size_t i = *n; i-- > 0;)
		if ((*v)[i].pid == pid && (*v)[i].device == device &&
		    (*v)[i].stream == stream)
			return &(*v)[i];
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		if ((nv = realloc(*v, *cap * sizeof(**v))) == NULL)
			abort();
		*v = nv;
	}
	(*v)[*n] = (struct csv_stream){ pid, device, stream, 0 };
	return &(*v)[(*n)++];
}

/* op_summary: one row per kernel, streamed from the files again.  Task
 * Wait Time is the gap since the previous task of the same stream of the
 * same process (stream ids are per process). */
static int
csv_op_summary(struct analysis *a, FILE *f)
{
	struct csv_stream *st = NULL;
	size_t nst = 0, cst = 0;
	int rc = 0;

	fputs("Rank,Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,"
	    "OP State,Task Type,Task Start Time(us),Task Duration(us),"
	    "Task Wait Time(us),Block Num,Correlation ID\n", f);
	for (size_t i = 0; i < a->nsrc; i++) {
		struct analysis_source *src = a->src[i];
		struct trace_reader *r;
		const struct rec_hdr *h;

		nst = 0;
		if (src->path == NULL)
			continue;
		if ((rc = trace_reader_open(src->path, &r)) != 0) {
			free(st);
			return rc;
		}
		while ((rc = trace_reader_next(r, &h)) != 0) {
			const struct rec_kernel *k = (const void *)h;
			struct an_proc *p;
			struct csv_stream *cs;
			const char *n, *ty;
			uint64_t s, e, wait = 0;

			if (rc < 0) {
				if (rc == -EBADMSG)
					continue;
				break;
			}
			if (h->type != REC_KERNEL ||
			    (h->aux & REC_F_HOST_LAUNCH))
				continue;
			s = k->start;
			e = k->end;
			if (h->aux & REC_F_DEVICE_CLOCK) {
				s = an_dev_time(src, k->device, s);
				e = an_dev_time(src, k->device, e);
			}
			p = an_proc_find(src, k->pid);
			s = an_clk_ts(&p->clk, s);
			e = an_clk_ts(&p->clk, e);
			cs = csv_stream(&st, &nst, &cst, k->pid, k->device,
			    k->stream);
			if (cs->last_end != 0 && s > cs->last_end)
				wait = s - cs->last_end;
			cs->last_end = e;
			n = trace_reader_string(r, k->name_id);
			ty = trace_reader_string(r, k->type_id);
			fprintf(f, "%d,%u,N/A,%u,%u,", p->rank, k->device,
			    k->task_id, k->stream);
			table_csv_str(f, n ? n : "", CSV_SPECIAL);
			fputc(',', f);
			table_csv_str(f, n ? n : "", CSV_SPECIAL);
			fputs(",N/A,", f);
			table_csv_str(f, ty ? ty : "", CSV_SPECIAL);
			fprintf(f, ",%" PRIu64 ".%03u,%.3f,%.3f,N/A,%" PRIu64
			    "\n", s / 1000, (unsigned)(s % 1000),
			    (double)(e - s) / 1e3, (double)wait / 1e3,
			    k->correlation_id);
		}
		trace_reader_close(r);
		if (rc < 0 && rc != -EBADMSG) {
			free(st);
			return rc;
		}
	}
	free(st);
	return 0;
}

CSV_ATTR int
export_csv(struct analysis *a, const char *dir)
{
	static const struct {
		const char *file;
		enum analysis_section s;
	} files[] = {
		{ "op_statistic", ANALYSIS_OPS },
		{ "api_statistic", ANALYSIS_APIS },
		{ "communication_statistic", ANALYSIS_COMM },
		{ "communication_matrix", ANALYSIS_COMM_MATRIX },
		{ "step_trace", ANALYSIS_STEPS },
		{ "memcpy_statistic", ANALYSIS_MEMCPY },
		{ "memory_statistic", ANALYSIS_MEMORY },
		{ "launch_statistic", ANALYSIS_LAUNCH },
		{ "slow_rank", ANALYSIS_SLOW_RANK },
		{ "advice", ANALYSIS_ADVICE },
		{ "summary", ANALYSIS_SUMMARY },
	};
	FILE *f;
	int rc;

	if (!a->ran)
		return -EINVAL;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -errno;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if ((f = csv_open(dir, files[i].file)) == NULL)
			return -errno;
		table_print(analysis_table(a, files[i].s), TABLE_CSV, f);
		if (fclose(f) != 0)
			return -EIO;
	}
	if ((f = csv_open(dir, "op_summary")) == NULL)
		return -errno;
	rc = csv_op_summary(a, f);
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	return rc;
}

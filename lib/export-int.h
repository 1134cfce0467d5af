/* Private: the timeline walk and its emitters (lib/export*.c). */
#ifndef MSPTI_EXPORT_INT_H
#define MSPTI_EXPORT_INT_H

#include <stdint.h>
#include <stdio.h>

#include "analysis-int.h"

struct ex_track {
	uint32_t	pid, tid, sort;
	char		pname[96];
	char		tname[64];
};

struct ex;

struct ex_emit {
	void	(*slice)(struct ex *, const struct ex_track *, const char *name,
		    const char *cat, uint64_t ts, uint64_t dur,
		    uint64_t flow_out, uint64_t flow_in, const char *args);
	void	(*instant)(struct ex *, const struct ex_track *,
		    const char *name, uint64_t ts);
	void	(*counter)(struct ex *, const struct ex_track *,
		    const char *name, uint64_t ts, double v);
};

struct ex {
	struct analysis		*a;
	FILE			*out;
	const struct ex_emit	*em;
	void			*priv;
	uint64_t		 events, flows;
	uint32_t		 mem_dev[64];
	int64_t			 mem_cur[64];
	size_t			 nmem;
};

AN_HIDDEN int	ex_walk(struct ex *x);

#endif

/* Private: the timeline walk and its emitters (lib/export*.c). */
#ifndef MSPTI_EXPORT_INT_H
#define MSPTI_EXPORT_INT_H

#include <stdint.h>
#include <stdio.h>

#include "analysis-int.h"

struct ex_track {
	uint32_t	pid, tid, sort;
	uint32_t	os_pid;		/* the real process of a thread track;
					   0: not a thread (device, counter) */
	char		pname[96];
	char		tname[64];
};

struct ex;

/* One argument of a slice: the walk hands them over as values, each
 * emitter encodes them its way (no JSON text made for Perfetto to parse
 * back).  key is a literal "name" (stable pointer); a string value is
 * NUL-terminated, slen its length or EX_SLEN_UNKNOWN (JSON-escaped by
 * the Chrome writer). */
enum { EX_ARG_U64, EX_ARG_STR, EX_ARG_DBL3 };	/* DBL3: printed %.3f */
struct ex_arg {
	const char	*key;
	uint8_t		 klen, kind;
	uint32_t	 slen;
	union {
		uint64_t	 u;
		double		 d;
		const char	*s;
	}		 v;
};
#define EX_ARGS_MAX	4
#define EX_SLEN_UNKNOWN	UINT32_MAX	/* slen: NUL-terminated, not measured */

struct ex_emit {
	void	(*slice)(struct ex *, const struct ex_track *, const char *name,
		    const char *cat, uint64_t ts, uint64_t dur,
		    uint64_t flow_out, uint64_t flow_in,
		    const struct ex_arg *args, unsigned nargs);
	void	(*instant)(struct ex *, const struct ex_track *,
		    const char *name, uint64_t ts);
	/* unit: "bytes", or a free-form unit name ("%", "W"), or NULL. */
	void	(*counter)(struct ex *, const struct ex_track *,
		    const char *name, const char *unit, uint64_t ts, double v);
};

/* An MSTX range START waiting for its END: paired by (pid, id). */
struct ex_open {
	uint64_t	id, ts;
	uint32_t	name, tid, pid;
};

struct ex {
	struct analysis		*a;
	FILE			*out;
	const struct ex_emit	*em;
	void			*priv;
	uint64_t		 events, flows;
	uint64_t		 nrec;		/* records walked */
	/* While stable, the names and string args handed to the emitter
	 * stay at their address, unchanged, as long as gen does (string
	 * literals, the trace reader's strings of the file being walked). */
	unsigned		 gen;
	bool			 stable;
	struct {
		uint32_t	 pid, device;
		int64_t		 cur;
	}			*mem;		/* bytes in use per (pid, device) */
	size_t			 nmem, cmem;
	struct ex_open		*open;		/* MSTX ranges open */
	size_t			 nopen, copen;
	bool			 hosts;		/* several hosts: name them */
	/* The last host and device track made (names are formatted once
	 * per track change, not per record). */
	struct ex_track		 tc_host, tc_dev;
	const void		*tc_hp, *tc_dp, *tc_dwhat;
	uint32_t		 tc_htid, tc_ddev, tc_dstream;
};

AN_HIDDEN int	ex_walk(struct ex *x);

#endif

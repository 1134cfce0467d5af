/*
 * example.h - map of the npusim example workloads (npusim-train,
 * npusim-dist): the helpers they share and the scenario library.
 */
#ifndef EXAMPLE_H
#define EXAMPLE_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include <acl/acl.h>
#include <hccl/hccl.h>

/* example.c */
extern volatile sig_atomic_t example_stop;

void		 example_signals(void);
double		 example_now_ms(void);
uint64_t	 example_range_start(const char *, aclrtStream);
void		 example_range_end(uint64_t);
aclrtFuncHandle	 example_kernel(const char *, int, double, double);
int		 example_check(aclError, const char *);
/* --help and --version, which every example answers (example_option). */
#define EXAMPLE_OPT_VERSION	0x2ff
#define EXAMPLE_LONGOPTS						\
	{ "help", no_argument, NULL, 'h' },				\
	{ "version", no_argument, NULL, EXAMPLE_OPT_VERSION }
void		 example_option(const char *, const char *, int)
		    __attribute__((noreturn));
void		 example_usage(const char *, const char *, int)
		    __attribute__((noreturn));

/* scenario.c */

/* The scenarios, each a workload with a known answer (doc/npusim.md). */
enum scenario_kind {
	SCENARIO_NONE = 0,		/* the program's own legacy workload */
	SCENARIO_BALANCED,
	SCENARIO_SLOW_COMPUTE,
	SCENARIO_SLOW_LINK,
	SCENARIO_HOST_BOUND,
	SCENARIO_LAUNCH_BOUND,
	SCENARIO_AICPU,
	SCENARIO_MEMORY_BOUND,
	SCENARIO_ROTATING,
	SCENARIO_JITTER,
	SCENARIO_MAX,
};

/* Long options every example accepts (values SCENARIO_OPT_BASE + n). */
#define SCENARIO_OPT_BASE	0x200
#define SCENARIO_LONGOPTS						\
	{ "scenario", required_argument, NULL, SCENARIO_OPT_BASE + 0 },	\
	{ "fault-pct", required_argument, NULL, SCENARIO_OPT_BASE + 1 },\
	{ "jitter-pct", required_argument, NULL, SCENARIO_OPT_BASE + 2 },\
	{ "seed", required_argument, NULL, SCENARIO_OPT_BASE + 3 },	\
	{ "scenario-file", required_argument, NULL, SCENARIO_OPT_BASE + 4 },\
	{ "truth", no_argument, NULL, SCENARIO_OPT_BASE + 5 },		\
	{ "list-scenarios", no_argument, NULL, SCENARIO_OPT_BASE + 6 }
#define SCENARIO_USAGE							\
	"[--scenario NAME] [--fault-pct P] [--jitter-pct J] [--seed S]\n" \
	"    [--scenario-file FILE] [--truth] [--list-scenarios]"

/* What the command line and a scenario file chose. */
struct scenario {
	enum scenario_kind kind;
	int		 ranks;		/* world size */
	long		 steps;
	int		 slow_rank;	/* -1: the scenario's default */
	double		 fault_pct;	/* < 0: the scenario's default */
	double		 jitter_pct;	/* compute jitter on every rank */
	uint64_t	 seed;
	int		 truth;		/* --truth: print it, run nothing */
	int		 multi;		/* the program runs ranks (dist) */
	/* Filled by scenario_prepare from the simulator's cost model. */
	double		 time_scale;
	uint64_t	 compute_ns;	/* modelled compute of one step */
	uint64_t	 extra_ns;	/* what the fault adds per step */
	double		 slow_link_gbs;	/* slow-link bandwidth, GB/s */
};

/* Per-rank state of a running scenario; private to scenario.c. */
struct scenario_rank;

void		 scenario_init(struct scenario *, int multi, int ranks,
		    long steps);
int		 scenario_option(struct scenario *, int, const char *);
int		 scenario_file(struct scenario *, const char *);
int		 scenario_prepare(struct scenario *);
void		 scenario_truth(const struct scenario *, FILE *);
void		 scenario_list(FILE *);
const char	*scenario_name(enum scenario_kind);
int		 scenario_slow_rank(const struct scenario *);
struct scenario_rank *scenario_rank_new(const struct scenario *, int rank,
		    HcclComm, aclrtStream);
int		 scenario_step(struct scenario_rank *, long step);
void		 scenario_rank_free(struct scenario_rank *);

#endif /* EXAMPLE_H */

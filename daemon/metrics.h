/*
 * metrics: device and host metric sampling in msptid, with a fixed-size
 * in-memory history per track and live COUNTER samples for sessions.
 *
 * Tracks per device: npu.util (%), npu.mem.used, npu.mem.total (bytes),
 * npu.power (W), npu.temp (C), from the device's metrics page
 * (npusim_metrics_read).  Tracks per watched pid: cpu.percent (% of one
 * core) and mem.rss (bytes), from /proc/<pid>/stat and /proc/<pid>/statm.
 *
 * What is sampled is the union of (a) the devices in use by registered
 * agents and those agents' pids (metrics_sync_agents, called by the
 * registry whenever an agent comes, goes or changes devices), and (b)
 * explicit references taken by sessions (metrics_use_device,
 * metrics_watch_pid).  A libevent timer runs only while that set is not
 * empty: every METRICS_SLOW_MS, or METRICS_FAST_MS while a subscriber
 * wants live samples.  History keeps at most one point per
 * METRICS_SLOW_MS for METRICS_HISTORY_S seconds per track, so memory is
 * fixed per device and per pid; entities idle for longer than the window
 * are freed.
 *
 * Single-threaded: the daemon's event loop owns it.
 */
#ifndef MSPTID_METRICS_H
#define MSPTID_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <protobuf-c/protobuf-c.h>

#define METRICS_FAST_MS		200
#define METRICS_SLOW_MS		1000
#define METRICS_HISTORY_S	600	/* 10 minutes */
#define METRICS_HISTORY_LEN	(METRICS_HISTORY_S * 1000 / METRICS_SLOW_MS)
#define METRICS_MAX_DEVICES	64
#define METRICS_MAX_PIDS	1024

/* Track indices. */
enum metrics_dev_track {
	MT_DEV_UTIL = 0,	/* percent */
	MT_DEV_MEM_USED,	/* bytes */
	MT_DEV_MEM_TOTAL,	/* bytes */
	MT_DEV_POWER,		/* W */
	MT_DEV_TEMP,		/* C */
	MT_DEV_NTRACKS,
};
enum metrics_pid_track {
	MT_PID_CPU = 0,		/* percent of one core */
	MT_PID_RSS,		/* bytes */
	MT_PID_NTRACKS,
};

/* One live sample for a session's COUNTER records. */
struct metrics_counter {
	const char	*track;		/* "npu.util", "cpu.percent", ... */
	const char	*unit;		/* "%", "bytes", "W", "C" */
	uint32_t	 pid;		/* 0 for device tracks */
	uint32_t	 device;	/* METRICS_NO_DEVICE for pid tracks */
	uint64_t	 timestamp;	/* host CLOCK_REALTIME ns */
	double		 value;
};
#define METRICS_NO_DEVICE	0xffffffffu

/* Aggregates over a window of history. */
struct metrics_summary {
	uint32_t	samples;	/* 0: no data in the window */
	double		min;
	double		avg;
	double		max;
	double		latest;
	uint64_t	latest_ns;
};

struct metrics_point {
	uint64_t	ts;
	double		value;
};

struct metrics;
struct metrics_sub;
struct daemon;
struct peer;

typedef void (*metrics_counter_cb)(const struct metrics_counter *, void *arg);

/* Returns a sampler on base (free with metrics_free), or NULL. */
struct metrics	*metrics_new(struct event_base *base);
void		 metrics_free(struct metrics *);

/* Session references (refcounted); they keep the timer running. */
int		 metrics_use_device(struct metrics *, uint32_t device);
void		 metrics_unuse_device(struct metrics *, uint32_t device);
int		 metrics_watch_pid(struct metrics *, uint32_t pid);
void		 metrics_unwatch_pid(struct metrics *, uint32_t pid);

/* Recomputes the registry part of the sampled set from d->agents: every
 * device an agent uses, and the pids of agents that use a device. */
void		 metrics_sync_agents(struct metrics *, struct daemon *d);

/* Live samples: cb gets every sample of every tick while subscribed (the
 * timer runs at METRICS_FAST_MS then).  Free with metrics_unsubscribe. */
struct metrics_sub *metrics_subscribe(struct metrics *, metrics_counter_cb,
		     void *arg);
void		 metrics_unsubscribe(struct metrics_sub *);

/* Takes one sample of everything now (tests; the timer calls it too). */
void		 metrics_sample_now(struct metrics *);
/* One sample of a device in use now, to the subscribers: a session takes
 * one when it starts using the device and one at its end, so a capture
 * shorter than a tick still has the device's metrics.  False when no
 * point was taken (the device's page holds no snapshot yet). */
bool		 metrics_sample_device(struct metrics *, uint32_t device);
/* Whether the timer is armed (tests: no timer while nothing is used). */
bool		 metrics_timer_active(const struct metrics *);

/* History of one track since since_ns (0: all), oldest first, at most max
 * points into out; returns the count (0 for an unknown device/pid). */
size_t		 metrics_device_history(struct metrics *, uint32_t device,
		     enum metrics_dev_track, uint64_t since_ns,
		     struct metrics_point *out, size_t max);
size_t		 metrics_pid_history(struct metrics *, uint32_t pid,
		     enum metrics_pid_track, uint64_t since_ns,
		     struct metrics_point *out, size_t max);
/* Aggregates of one track since since_ns. */
void		 metrics_device_summary(struct metrics *, uint32_t device,
		     enum metrics_dev_track, uint64_t since_ns,
		     struct metrics_summary *out);
void		 metrics_pid_summary(struct metrics *, uint32_t pid,
		     enum metrics_pid_track, uint64_t since_ns,
		     struct metrics_summary *out);

/* Track names and units. */
const char	*metrics_dev_track_name(enum metrics_dev_track);
const char	*metrics_dev_track_unit(enum metrics_dev_track);
const char	*metrics_pid_track_name(enum metrics_pid_track);
const char	*metrics_pid_track_unit(enum metrics_pid_track);

/* Handler of MetricsRequest (dispatch table, PEER_CTL). */
int		 metrics_request(struct peer *, const ProtobufCMessage *);

#endif

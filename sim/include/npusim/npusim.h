/*
 * npusim/npusim.h - simulator-only API and shared-memory layouts of
 * libnpusim, the simulated NPU.
 *
 * Everything here is specific to the simulator: kernel registration (the
 * real runtime loads kernels from binaries), the device clock, and the two
 * per-device shared-memory objects a profiler reads:
 *
 *   /<prefix>-dev<D>-chan     profiling channel: header + record ring
 *   /<prefix>-dev<D>-metrics  metrics page
 *
 * <prefix> is $NPUSIM_SHM_PREFIX (default "npusim"), D the device id.
 * Layouts are versioned (NPUSIM_SHM_VERSION); a reader must check magic,
 * version, header_size and record_size before trusting anything else.
 * All multi-process fields are naturally aligned and accessed with atomic
 * loads/stores (__atomic builtins or C11 atomics on the same addresses).
 * See doc/npusim.md for the full protocol.
 */
#ifndef NPUSIM_NPUSIM_H
#define NPUSIM_NPUSIM_H

#include <stddef.h>
#include <stdint.h>

#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef NPUSIM_API
#define NPUSIM_API __attribute__((visibility("default")))
#endif

#define NPUSIM_SHM_VERSION	1
#define NPUSIM_CHANNEL_MAGIC	0x4348534eU	/* "NSHC" little endian */
#define NPUSIM_METRICS_MAGIC	0x4d54534eU	/* "NSTM" */
#define NPUSIM_NAME_LEN		64
#define NPUSIM_COMM_NAME_LEN	40
#define NPUSIM_SHM_NAME_MAX	128
#define NPUSIM_ID_NONE		0xffffffffU

/* Kernel types (record field kernel_type). */
enum npusim_kernel_type {
	NPUSIM_KERNEL_AI_CORE = 0,
	NPUSIM_KERNEL_AI_VECTOR = 1,
	NPUSIM_KERNEL_AI_CPU = 2,
};

/* Device task kinds (record field kind). */
enum npusim_task_kind {
	NPUSIM_TASK_KERNEL = 1,
	NPUSIM_TASK_MEMCPY = 2,
	NPUSIM_TASK_MEMSET = 3,
	NPUSIM_TASK_COMM = 4,
	NPUSIM_TASK_MARKER = 5,		/* rtProfilerTraceEx */
	NPUSIM_TASK_EVENT = 6,		/* aclrtRecordEvent */
};

/* Collective algorithms (record field algorithm). */
enum npusim_comm_alg {
	NPUSIM_COMM_ALG_NONE = 0,
	NPUSIM_COMM_ALG_RING = 1,	/* collectives */
	NPUSIM_COMM_ALG_P2P = 2,	/* send/recv */
};

/* ------------------------------------------------------------------ */
/* Simulator-only calls.                                               */
/* ------------------------------------------------------------------ */

/**
 * Register a named kernel and return a handle for aclrtLaunchKernel.
 * Its duration is fixed_ns if non-zero, else the cost model:
 * max(flops / peak_flops(type), bytes / hbm_bandwidth) + launch overhead,
 * times $NPUSIM_TIME_SCALE.  The name is truncated to NPUSIM_NAME_LEN-1.
 * Handles stay valid for the life of the process.  ACL_ERROR_INVALID_PARAM
 * on a NULL or empty name, a bad type, a negative cost or a NULL out.
 */
NPUSIM_API aclError npusimKernelRegister(const char *name,
    enum npusim_kernel_type type, double flops, double bytes,
    uint64_t fixed_ns, aclrtFuncHandle *out);
/** Name of a registered kernel, NULL if the handle is not one. */
NPUSIM_API const char *npusimKernelName(aclrtFuncHandle func);
/** enum npusim_kernel_type of a registered kernel, -1 if not one. */
NPUSIM_API int npusimKernelType(aclrtFuncHandle func);
/** Modelled duration of one launch in ns (before any slow-rank factor). */
NPUSIM_API uint64_t npusimKernelDuration(aclrtFuncHandle func);

/**
 * How many times the runtime has put a thread of this process to sleep
 * (host waits for a modelled end, paced copies to host memory, p2p
 * back-off).  Device time never depends on these; tests count them.
 */
NPUSIM_API uint64_t npusimHostSleeps(void);

/**
 * The calling thread's last queued task, as rtGetTaskIdAndStreamID, and
 * the device it was queued on: one call where a profiler would otherwise
 * look the stream up (NPUSIM_ID_NONE, NPUSIM_ID_NONE and -1 before the
 * thread queued any).
 */
NPUSIM_API void npusimLastTask(uint32_t *taskId, uint32_t *streamId,
    int32_t *deviceId);
/** Device a stream belongs to (NULL = the thread's current device). */
NPUSIM_API aclError npusimStreamGetDevice(aclrtStream stream,
    int32_t *deviceId);

/**
 * Take one clock sample for device dev: CLOCK_REALTIME and the device
 * clock at the same instant (device time is computed from one
 * CLOCK_MONOTONIC reading; the realtime read is adjacent).  Works in any
 * process without opening the device; the device clock is the same
 * function everywhere:
 *   device_ns = mono + mono * drift_ppb / 1e9 + offset_ns
 * ACL_ERROR_INVALID_DEVICE for a bad dev, ACL_ERROR_INVALID_PARAM on NULL.
 */
NPUSIM_API aclError npusimReadClock(int32_t dev, uint64_t *host_realtime_ns,
    uint64_t *device_ns);
/**
 * npusimReadClock, and how far apart the two realtime reads around the
 * device read were (*bracket_ns): the host time, their midpoint, is off
 * by at most half of it.
 */
NPUSIM_API aclError npusimReadClockPair(int32_t dev,
    uint64_t *host_realtime_ns, uint64_t *device_ns, uint32_t *bracket_ns);
/** Clock parameters of dev (offset in ns, drift in parts per billion). */
NPUSIM_API aclError npusimClockParams(int32_t dev, int64_t *offset_ns,
    int64_t *drift_ppb);

/**
 * Shared-memory object name for dev: what is "chan" or "metrics".
 * Returns the length written (as snprintf) or -1.
 */
NPUSIM_API int npusimShmName(char *buf, size_t len, int32_t dev,
    const char *what);

/* ------------------------------------------------------------------ */
/* Profiling channel layout (version 1).                               */
/* ------------------------------------------------------------------ */

struct npusim_clock_sample {
	uint64_t host_realtime_ns;	/* CLOCK_REALTIME */
	uint64_t device_ns;		/* device clock, same instant */
	uint64_t host_monotonic_ns;	/* CLOCK_MONOTONIC, same instant */
};

/*
 * Channel header, at offset 0 of /<prefix>-dev<D>-chan; records start at
 * header_size.  The object is header_size + capacity * record_size bytes.
 *
 * Writer protocol (any number of processes):
 *   if (enable_count == 0) skip;
 *   idx = atomic_fetch_add(&head, 1);
 *   slot = &records[idx & (capacity - 1)];
 *   store(slot->stamp, 0, relaxed); release fence;
 *   write the body; store(slot->stamp, idx + 1, release).
 * Reader protocol (per reader cursor, starting at head when opened):
 *   h = load(head, acquire); if (h - cursor > capacity) { lost +=
 *     h - capacity - cursor; cursor = h - capacity; }
 *   s1 = load(slot->stamp, acquire); if s1 == cursor + 1: copy body,
 *     acquire fence, s2 = load(slot->stamp); s2 == s1 ? accept : lost.
 *   s1 > cursor + 1: overwritten, count lost, advance.
 *   s1 < cursor + 1 (not published yet): stop, retry later; if the
 *     writer died mid-write the slot is skipped once it is capacity/2
 *     behind head.
 * The device never waits for a reader.
 */
struct npusim_channel_header {
	uint32_t magic;			/* NPUSIM_CHANNEL_MAGIC, stored last */
	uint16_t version;		/* NPUSIM_SHM_VERSION */
	uint16_t header_size;		/* sizeof(struct npusim_channel_header) */
	uint32_t record_size;		/* sizeof(struct npusim_record) */
	uint32_t capacity;		/* records, a power of two */
	int32_t device;
	uint32_t reserved0;
	int64_t clock_offset_ns;	/* informational, see npusimReadClock */
	int64_t clock_drift_ppb;
	uint8_t pad0[24];
	/* Cache line 1: reservation counter. */
	uint64_t head;			/* atomic: records ever reserved */
	uint8_t pad1[56];
	/* Cache line 2: readers. */
	uint32_t enable_count;		/* atomic: readers that want records */
	uint32_t reserved1;
	uint64_t dropped_disabled;	/* atomic: tasks not recorded (off) */
	uint8_t pad2[48];
	/* Cache line 3: clock samples under a seqlock. */
	uint32_t clock_seq;		/* odd while a writer updates */
	uint32_t clock_bracket_ns;	/* the host reads around the device
					 * read this far apart: host_realtime_ns
					 * (their midpoint) is off by at most
					 * half of it; 0: unknown */
	struct npusim_clock_sample clock;	/* refreshed every ~20 ms */
	uint8_t pad3[32];
};

/* One device task, 256 bytes.  Times are in the DEVICE clock. */
struct npusim_record {
	uint64_t stamp;			/* slot index + 1 once published */
	uint16_t kind;			/* enum npusim_task_kind */
	uint16_t kernel_type;		/* enum npusim_kernel_type (KERNEL) */
	int32_t device;
	uint32_t stream_id;		/* device-wide, as aclrtStreamGetId */
	uint32_t task_id;		/* as rtGetTaskIdAndStreamID */
	int32_t pid;			/* submitting process */
	int32_t tid;			/* submitting thread (gettid) */
	uint64_t start_ns;
	uint64_t end_ns;
	uint64_t bytes;			/* moved/modelled bytes */
	uint64_t flops;			/* KERNEL */
	uint64_t aicore_cycles;		/* KERNEL: duration * 1.8 GHz */
	uint64_t mte_bytes;		/* KERNEL: bytes through the MTE */
	uint32_t block_dim;		/* KERNEL */
	uint32_t memcpy_kind;		/* MEMCPY: aclrtMemcpyKind */
	uint64_t marker_id;		/* MARKER: indexId */
	uint64_t model_id;		/* MARKER: modelId */
	uint16_t tag_id;		/* MARKER: tagId */
	uint16_t status;		/* 0 ok, else the task failed */
	uint32_t comm_seq;		/* COMM collective: its ordinal on the
					 * communicator, from 1 at its
					 * creation (the same on every rank);
					 * 0 for send/recv */
	uint32_t data_type;		/* COMM: HcclDataType */
	uint32_t reduce_op;		/* COMM: HcclReduceOp or NPUSIM_ID_NONE */
	uint64_t count;			/* COMM: elements */
	uint32_t algorithm;		/* COMM: enum npusim_comm_alg */
	uint32_t rank;			/* COMM: this rank */
	uint32_t rank_size;		/* COMM */
	uint32_t peer;			/* COMM: root/peer or NPUSIM_ID_NONE */
	uint64_t wait_ns;		/* COMM: waited for the slowest rank */
	char name[NPUSIM_NAME_LEN];	/* kernel or op name, NUL-terminated */
	char comm_name[NPUSIM_COMM_NAME_LEN];	/* COMM */
};

/* Reader state; fields are private to npusim_channel_*. */
struct npusim_channel_reader {
	int32_t device;
	int enabled;
	void *base;
	size_t size;
	struct npusim_channel_header *hdr;
	struct npusim_record *records;
	uint64_t cursor;		/* next index to read */
	uint64_t lost;			/* total lost by this reader */
	uint64_t stuck_since;		/* internal */
};

/**
 * Map device dev's channel (creating it if no process has yet), increment
 * enable_count and start reading at the current head.  Returns 0 or a
 * negative errno (-EINVAL bad device, -EPROTO bad layout).
 */
NPUSIM_API int npusim_channel_open(int32_t dev,
    struct npusim_channel_reader *r);
/**
 * Copy up to max published records into out.  Returns how many (0 when
 * none are ready) or a negative errno; *lost (may be NULL) gets the
 * records lost since the previous call (overrun or torn slots).
 */
NPUSIM_API int npusim_channel_read(struct npusim_channel_reader *r,
    struct npusim_record *out, size_t max, uint64_t *lost);
/** Latest clock sample from the header (seqlock read); 0 or -EAGAIN. */
NPUSIM_API int npusim_channel_clock(struct npusim_channel_reader *r,
    struct npusim_clock_sample *out);
/** Decrement enable_count and unmap; safe on a closed reader. */
NPUSIM_API void npusim_channel_close(struct npusim_channel_reader *r);

/* ------------------------------------------------------------------ */
/* Metrics page layout (version 1), /<prefix>-dev<D>-metrics.          */
/* ------------------------------------------------------------------ */

/* Values a sampler publishes under the seqlock every NPUSIM_METRICS_MS. */
struct npusim_metrics_snapshot {
	uint64_t host_realtime_ns;	/* when sampled */
	uint64_t device_ns;
	uint64_t mem_used;		/* bytes, all processes */
	uint64_t mem_total;
	uint64_t tasks_launched;	/* since the page was created */
	uint64_t tasks_completed;
	double utilization;		/* busy fraction over last interval */
	double power_w;
	double temperature_c;
	uint32_t processes;		/* processes with the device open */
	uint32_t reserved;
};

/*
 * One process's share of a device's memory (aclrtMalloc bytes it holds).
 * A process claims a free entry (pid 0 -> its pid, compare-and-swap) when
 * it opens the device and clears it on aclFinalize or exit.  An entry whose
 * process is gone (pid absent, or start_time no longer matches) is
 * reclaimed by any process: it swaps pid to NPUSIM_MEM_OWNER_RECLAIMING,
 * takes bytes back from mem_used, and frees the entry.
 */
#define NPUSIM_MEM_OWNERS		128
#define NPUSIM_MEM_OWNER_RECLAIMING	(-1)
struct npusim_mem_owner {
	int32_t pid;			/* 0 free */
	uint32_t reserved;
	uint64_t start_time;		/* /proc/<pid>/stat field 22, 0 unknown */
	uint64_t bytes;			/* counted in mem_used */
};

struct npusim_metrics_page {
	uint32_t magic;			/* NPUSIM_METRICS_MAGIC, stored last */
	uint16_t version;
	uint16_t size;			/* sizeof(struct npusim_metrics_page) */
	int32_t device;
	uint32_t seq;			/* seqlock over snap, odd = writing */
	uint8_t pad0[48];
	struct npusim_metrics_snapshot snap;
	uint8_t pad1[48];
	/* Live counters, atomically updated by every process. */
	uint64_t mem_used;		/* node-wide: reserved by CAS before an
					 * allocation succeeds */
	uint64_t tasks_launched;
	uint64_t tasks_completed;
	uint64_t busy_ns;		/* modelled busy time passed so far */
	uint32_t next_stream_id;	/* device-wide stream id allocator */
	uint32_t processes;
	uint8_t pad2[24];
	struct npusim_mem_owner mem_owners[NPUSIM_MEM_OWNERS];
};

/**
 * Read dev's latest metrics snapshot (maps the page on first use, creating
 * it if no process has used the device yet).  Returns 0, -EINVAL (bad
 * device or layout) or -EAGAIN (a writer is busy; retry).
 */
NPUSIM_API int npusim_metrics_read(int32_t dev,
    struct npusim_metrics_snapshot *out);

#ifdef __cplusplus
}
#endif

#endif /* NPUSIM_NPUSIM_H */

/*
 * sim.h - private map of libnpusim: every struct, then the prototypes of
 * each file.
 *
 * Locking: sim_rt.lock guards process-wide state (devices, allocations);
 * each stream has its own lock for its queue; each event its own lock.
 * The handle table has its own lock (sim-handle.c).  Never take
 * sim_rt.lock while holding a stream or event lock.  Order: stream lock,
 * then an event lock, then a device's busy_lock.
 *
 * Timeline: every time below named *_ns or vtime without "device" is a
 * CLOCK_MONOTONIC instant of the model, not of a host thread's progress;
 * records convert them to the device clock.
 */
#ifndef SIM_H
#define SIM_H

#include <sys/queue.h>
#include <sys/types.h>

#include <pthread.h>
#include <stdint.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <runtime/rt.h>
#include <npusim/npusim.h>

#define SIM_EXPORT __attribute__((visibility("default")))

#define SIM_MAX_DEVICES	64
#define SIM_MAX_RANKS	64

/* Handle kinds; each live object starts with a struct sim_obj. */
#define SIM_MAGIC_STREAM	0x5354524dU
#define SIM_MAGIC_EVENT		0x4556454eU
#define SIM_MAGIC_CONTEXT	0x43545854U
#define SIM_MAGIC_KERNEL	0x4b45524eU
#define SIM_MAGIC_COMM		0x434f4d4dU
#define SIM_MAGIC_TENSOR	0x54454e53U	/* sim-aclnn.c */
#define SIM_MAGIC_SCALAR	0x5343414cU
#define SIM_MAGIC_INTARRAY	0x49415252U
#define SIM_MAGIC_EXECUTOR	0x45584543U

struct sim_obj {
	uint32_t		 magic;
	int			 refs;
	void			(*destroy)(struct sim_obj *);
	struct sim_obj		*next;		/* hash chain */
};

struct sim_config {
	int			 ndevices;
	uint64_t		 mem_bytes;
	double			 time_scale;
	char			 prefix[64];
	int64_t			 clock_offset_ns;
	int64_t			 clock_drift_ppb;
	int			 slow_rank;
	double			 slow_factor;
	int			 slow_link;
	double			 link_bw;	/* in a node (HCCS), bytes/s */
	double			 link_lat_ns;	/* in a node, per hop */
	double			 roce_bw;	/* across nodes (RoCE), bytes/s */
	double			 roce_lat_ns;	/* across nodes, per hop */
	double			 slow_link_bw;
	uint64_t		 node_id;	/* hash of $NPUSIM_NODE/hostname */
	char			 node[64];
	char			 comm_dir[192];	/* $NPUSIM_COMM_DIR, or "" */
	double			 hccl_timeout_s;
	uint32_t		 channel_records;
	int			 metrics_ms;
	int			 test_metrics_delay_ms;
	int			 test_worker_lag_ms;
	int			 test_clock_preempt;
	int			 env_rank;	/* $RANK, -1 if unset */
};

/*
 * A kernel with a body (the aclnn operators, sim-aclnn.c): its cost comes
 * from the launch arguments, which are copied into the task as a real
 * launch copies them, and the body runs on them when the task executes.
 */
struct sim_kernel_ops {
	int			(*cost)(const void *, size_t, double *,
				    double *);	/* 0 if the args are valid */
	void			(*run)(const void *);
};

struct sim_kernel {
	struct sim_obj		 obj;
	char			 name[NPUSIM_NAME_LEN];
	int			 type;
	double			 flops;
	double			 bytes;
	uint64_t		 fixed_ns;
	const struct sim_kernel_ops *ops;	/* NULL: no body */
};

struct sim_event {
	struct sim_obj		 obj;
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;
	uint64_t		 recorded;	/* generation last submitted */
	uint64_t		 completed;	/* generation last reached */
	uint64_t		 ts_ns;		/* device clock at completion */
	uint64_t		 mono_ns;	/* the same instant, monotonic */
	struct sim_device	*dev;		/* that recorded it last */
};

struct sim_context {
	struct sim_obj		 obj;
	int			 dev;
};

struct sim_comm;

/* One collective or p2p operation, as queued on a stream. */
struct sim_comm_op {
	int			 op;		/* enum sim_comm_kind */
	struct sim_comm		*comm;		/* holds a reference */
	const void		*send;
	void			*recv;
	uint64_t		 count;		/* elements (op specific) */
	uint64_t		 count2;	/* AlltoAll recvCount */
	int			 dtype;
	int			 dtype2;
	int			 redop;
	uint32_t		 root;		/* root or peer */
	uint64_t		*v;		/* AlltoAllV: 4 * nranks counts */
	HcclSendRecvItem	*items;		/* BatchSendRecv copy */
	uint32_t		 nitems;
};

enum sim_comm_kind {
	SIM_COMM_ALLREDUCE,
	SIM_COMM_BROADCAST,
	SIM_COMM_ALLGATHER,
	SIM_COMM_REDUCESCATTER,
	SIM_COMM_REDUCE,
	SIM_COMM_ALLTOALL,
	SIM_COMM_ALLTOALLV,
	SIM_COMM_BARRIER,
	SIM_COMM_SCATTER,
	SIM_COMM_SEND,
	SIM_COMM_RECV,
	SIM_COMM_BATCHSENDRECV,
};

/* Internal task kinds, never recorded in the channel. */
#define SIM_TASK_WAIT		100	/* aclrtStreamWaitEvent */

struct sim_task {
	TAILQ_ENTRY(sim_task)	 entry;
	int			 kind;		/* npusim_task_kind, SIM_TASK_* */
	uint32_t		 task_id;
	pid_t			 tid;
	uint64_t		 submit_ns;	/* host submission, monotonic */
	uint64_t		 dur_ns;	/* modelled, 0 for COMM */
	char			 name[NPUSIM_NAME_LEN];
	union {
		struct {
			int		 type;
			uint32_t	 block_dim;
			double		 flops;
			double		 bytes;
			const struct sim_kernel_ops *ops;
			void		*args;	/* owned copy, for ops */
		} kernel;
		struct {
			void		*dst;
			const void	*src;
			size_t		 count;
			int		 kind;
		} memcpy;
		struct {
			void		*dst;
			int		 value;
			size_t		 count;
		} memset;
		struct {
			struct sim_event *ev;	/* holds a reference */
			uint64_t	 gen;	/* recorded, or waited for */
		} event;
		struct {
			uint64_t	 index;
			uint64_t	 model;
			uint16_t	 tag;
		} marker;
		struct sim_comm_op	 comm;
	} u;
};
TAILQ_HEAD(sim_tasks, sim_task);

struct sim_device;

/*
 * What one stream's tasks do on the device after the host clock: their
 * busy time not yet credited to the metrics page, and their records not
 * yet published (a record appears once its task has ended, as on real
 * hardware).  Busy time is a FIFO of segments in time order, contiguous
 * tasks merged, so a busy stream needs one; when full, a new segment
 * merges into the last (busy < end - start), credited linearly.  Records
 * wait in a ring; when it is full the oldest is published early.
 */
#define SIM_BUSY_SEGS	64
#define SIM_BUSY_RECS	256
#define SIM_PREFETCH_RECS 128	/* slots taken into cache before a wait */
struct sim_busy_seg {
	uint64_t		 start;
	uint64_t		 end;
	uint64_t		 busy;		/* ns of work in [start, end) */
	uint64_t		 credited;	/* of busy, already counted */
	uint64_t		 tasks;		/* ending in the segment */
};

struct sim_busy {
	LIST_ENTRY(sim_busy)	 entry;		/* on dev->busy */
	int			 dead;		/* stream gone: free when empty */
	unsigned		 head;
	unsigned		 n;
	struct sim_busy_seg	 seg[SIM_BUSY_SEGS];
	unsigned		 rhead;
	unsigned		 rn;
	struct npusim_record	*recs;		/* stamp holds the end */
};
LIST_HEAD(sim_busies, sim_busy);

struct sim_stream {
	struct sim_obj		 obj;
	struct sim_device	*dev;
	uint32_t		 id;
	int			 is_default;
	pthread_mutex_t		 lock;
	pthread_cond_t		 wake;		/* worker: work or stop */
	pthread_cond_t		 done;		/* syncers: a task finished */
	struct sim_tasks	 queue;
	uint32_t		 next_task_id;
	uint64_t		 submitted;
	uint64_t		 completed;
	uint64_t		 wake_at;	/* syncers' least target, or
						 * UINT64_MAX: none waits */
	uint64_t		 vtime;		/* modelled end of last task */
	struct sim_busy		*busy;		/* NULL: publish at once */
	aclError		 error;		/* sticky until a sync reports it */
	int			 stop;
	pthread_t		 thread;
	LIST_ENTRY(sim_stream)	 entry;		/* on dev->streams */
	/*
	 * A copy into host memory waits for its modelled end before its
	 * bytes move; the worker sleeps to it, and a host wait that
	 * reaches it first finishes the copy itself rather than wait for
	 * the worker's wake-up too (sim_stream_paced_finish).  paced_n is
	 * its number (completed + 1 when it ran), 0 when none waits.
	 */
	uint64_t		 paced_n;
	uint64_t		 paced_host;	/* = paced_n: a host wait took it */
	uint64_t		 paced_start;
	struct npusim_record	 paced_rec;	/* the queue's head's */
};
LIST_HEAD(sim_streams, sim_stream);

struct sim_device {
	int			 id;
	int			 open;
	uint64_t		 mem_used;	/* this process */
	/* Node-wide accounting in metrics->mem_used (sim-memory.c): set
	 * while this process's bytes count there; mem_pid guards against a
	 * forked child settling its parent's share. */
	int			 mem_shared;
	pid_t			 mem_pid;
	struct npusim_mem_owner	*mem_owner;	/* NULL: table was full */
	struct sim_stream	*default_stream;
	struct sim_streams	 streams;
	struct npusim_channel_header *chan;
	struct npusim_record	*chan_rec;
	size_t			 chan_size;
	int			 chan_populated;	/* sampler's, after open */
	struct npusim_metrics_page *metrics;
	pthread_t		 sampler;
	int			 sampler_stop;
	pthread_mutex_t		 sampler_lock;
	pthread_cond_t		 sampler_cond;
	pthread_mutex_t		 busy_lock;	/* busy and every ledger on it */
	struct sim_busies	 busy;
};

struct sim_alloc {
	LIST_ENTRY(sim_alloc)	 entry;
	char			*base;
	size_t			 size;
	int			 dev;		/* -1 for aclrtMallocHost */
};
LIST_HEAD(sim_allocs, sim_alloc);

struct sim_runtime {
	pthread_mutex_t		 lock;
	int			 inited;	/* aclInit called */
	struct sim_device	 devices[SIM_MAX_DEVICES];
	struct sim_allocs	 allocs;
	int			 default_dev;	/* for threads with no device */
	int			 rank;		/* from RANK or HCCL, -1 */
};

extern struct sim_config sim_cfg;
extern struct sim_runtime sim_rt;

/* sim-env.c */
void		 sim_env_load(void);
const char	*sim_env_errmsg(aclError);

/* sim-clock.c */
uint64_t	 sim_clock_mono(void);
uint64_t	 sim_clock_realtime(void);
uint64_t	 sim_clock_pair(uint64_t *, uint64_t *);
uint64_t	 sim_clock_device(int, uint64_t);
int64_t		 sim_clock_offset(int);
int64_t		 sim_clock_drift(int);
void		 sim_clock_sleep_until(uint64_t);
void		 sim_clock_wait_until(uint64_t);

/* sim-handle.c */
void		 sim_handle_add(struct sim_obj *, uint32_t,
		     void (*)(struct sim_obj *));
void		*sim_handle_get(const void *, uint32_t);
void		 sim_handle_ref(struct sim_obj *);
void		 sim_handle_put(struct sim_obj *);
int		 sim_handle_remove(const void *, uint32_t);

/* sim-shm.c */
struct npusim_channel_header *sim_shm_channel_attach(int, size_t *);
struct npusim_metrics_page *sim_shm_metrics_attach(int);
int		 sim_shm_device_open(struct sim_device *);
void		 sim_shm_device_close(struct sim_device *);
void		 sim_shm_record(struct sim_device *, struct npusim_record *);
int		 sim_shm_seq_trylock(uint32_t *, unsigned *);
void		 sim_shm_seq_unlock(uint32_t *);
struct sim_busy	*sim_shm_busy_new(struct sim_device *);
void		 sim_shm_task_done(struct sim_device *, struct sim_busy *,
		     uint64_t, uint64_t, struct npusim_record *, uint64_t);
void		 sim_shm_busy_flush(struct sim_device *, struct sim_busy *);
void		 sim_shm_busy_prefetch(struct sim_device *, struct sim_busy *);
void		 sim_shm_busy_sweep(struct sim_device *, uint64_t);
void		 sim_shm_busy_release(struct sim_device *, struct sim_busy *);

/* sim-runtime.c */
void		 sim_runtime_init(void);
void		 sim_runtime_set_error(aclError, const char *, ...)
		     __attribute__((format(printf, 2, 3)));
int		 sim_runtime_current_device(void);
struct sim_device *sim_runtime_device(int);
aclError	 sim_runtime_open_device(int);

/* sim-stream.c */
struct sim_stream *sim_stream_create(struct sim_device *, int);
void		 sim_stream_shutdown(struct sim_stream *);
aclError	 sim_stream_resolve(aclrtStream, struct sim_stream **);
void		 sim_stream_task_init(struct sim_task *, int, const char *);
struct sim_task	*sim_stream_task(int, const char *);
aclError	 sim_stream_submit(struct sim_stream *, struct sim_task *);
aclError	 sim_stream_submit_copy(struct sim_stream *, struct sim_task *);
aclError	 sim_stream_sync(struct sim_stream *);
aclError	 sim_stream_drain(struct sim_stream *, uint64_t *, uint64_t *);
void		 sim_stream_free_task(struct sim_task *);
aclError	 sim_stream_sync_device(struct sim_device *);

/* sim-memory.c */
int		 sim_memory_find(const void *, size_t, int *);
void		 sim_memory_free_all(void);
void		 sim_memory_share_open(struct sim_device *);
void		 sim_memory_share_close(struct sim_device *);

/* sim-kernel.c */
uint64_t	 sim_kernel_model(int, double, double);
aclError	 sim_kernel_register(const char *, int,
		     const struct sim_kernel_ops *, aclrtFuncHandle *);

/* sim-topo.c: the collective cost model (pure, unit-tested) */
struct sim_link {
	double			 bw;		/* bytes per second */
	double			 lat_ns;	/* per hop */
};
uint64_t	 sim_topo_hash(const char *);
uint32_t	 sim_topo_nodes(const uint64_t *, uint32_t);
struct sim_link	 sim_topo_ring_link(uint32_t, const struct sim_link *,
		     const struct sim_link *, double);
uint64_t	 sim_topo_coll_ns(int, uint32_t, uint64_t, struct sim_link);

/* sim-reduce.c */
size_t		 sim_reduce_dtype_size(int);
void		 sim_reduce(void *, const void *, size_t, int, int);
float		 sim_reduce_bf16_to_float(uint16_t);
uint16_t	 sim_reduce_float_to_bf16(float);

/* sim-comm.c */
aclError	 sim_comm_exec(struct sim_comm_op *, uint64_t,
		     struct npusim_record *);
void		 sim_comm_release(struct sim_comm_op *);

#endif /* SIM_H */

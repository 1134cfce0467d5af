/*
 * check_sim_runtime.c - libnpusim devices, streams, events, memory,
 * handles and clocks.  Timing checks are one-sided or loose on purpose:
 * the machine running them may be small and busy.
 */
#define _GNU_SOURCE	/* RTLD_NEXT */
#include <sys/mman.h>
#include <sys/wait.h>

#include <check.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acl/acl.h>
#include <npusim/npusim.h>
#include <runtime/rt.h>

static char	prefix[64];

/*
 * Fault injection: while armed, the test thread pauses after every mutex
 * it lets go of, so a stream worker gets to run (and free what it ran)
 * right after a submission unlocks its stream.  Interposes the runtime's
 * calls; everything else passes straight through.
 */
static int		unlock_pause_armed;
static pthread_t	unlock_pause_thread;

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NO_UNLOCK_PAUSE	/* TSan has its own pthread_mutex_unlock */
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define NO_UNLOCK_PAUSE
#endif

#ifndef NO_UNLOCK_PAUSE
int
pthread_mutex_unlock(pthread_mutex_t *m)
{
	static int	(*real)(pthread_mutex_t *);
	int		rc;

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	rc = real(m);
	if (__atomic_load_n(&unlock_pause_armed, __ATOMIC_RELAXED) &&
	    pthread_equal(pthread_self(), unlock_pause_thread))
		usleep(2000);
	return (rc);
}
#endif

static uint64_t
mono_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

static aclrtFuncHandle
kernel(const char *name, uint64_t ns)
{
	aclrtFuncHandle	h = NULL;

	ck_assert_int_eq(npusimKernelRegister(name, NPUSIM_KERNEL_AI_CORE,
	    0, 0, ns, &h), ACL_SUCCESS);
	return (h);
}

START_TEST(test_devices)
{
	uint32_t	n = 0;
	int32_t		d = -1;

	ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
	ck_assert_int_eq(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
	ck_assert_int_eq(aclrtGetDeviceCount(&n), ACL_SUCCESS);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
	ck_assert_int_eq(aclrtSetDevice(2), ACL_ERROR_RT_INVALID_DEVICEID);
	ck_assert_int_eq(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
	ck_assert_int_eq(aclrtSetDevice(1), ACL_SUCCESS);
	ck_assert_int_eq(aclrtGetDevice(&d), ACL_SUCCESS);
	ck_assert_int_eq(d, 1);
	ck_assert_int_eq(aclrtResetDevice(1), ACL_SUCCESS);
	ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
}
END_TEST

START_TEST(test_stream_order)
{
	aclrtStream	 s;
	aclrtFuncHandle	 k = kernel("Slow", 3000000);
	char		*dev, host[4096], out[4096];
	uint64_t	 t0;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMalloc((void **)&dev, sizeof host,
	    ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
	memset(host, 7, sizeof host);
	memset(out, 0, sizeof out);
	t0 = mono_ns();
	/* Memset, a slow kernel, then the copy: the copy must win. */
	ck_assert_int_eq(aclrtMemsetAsync(dev, sizeof host, 1, sizeof host,
	    s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtLaunchKernel(k, 8, NULL, 0, s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemcpyAsync(dev, sizeof host, host, sizeof host,
	    ACL_MEMCPY_HOST_TO_DEVICE, s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemcpyAsync(out, sizeof out, dev, sizeof out,
	    ACL_MEMCPY_DEVICE_TO_HOST, s), ACL_SUCCESS);
	/* Asynchronous: nothing is copied back before the model says the
	 * kernel ended (one-sided: a slow host may see it already). */
	if (out[0] != 0)
		ck_assert_uint_ge(mono_ns() - t0, 3000000);
	ck_assert_int_eq(aclrtSynchronizeStream(s), ACL_SUCCESS);
	ck_assert(mono_ns() - t0 >= 3000000);
	ck_assert_int_eq(memcmp(out, host, sizeof out), 0);
	ck_assert_int_eq(aclrtFree(dev), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyStream(s), ACL_SUCCESS);
}
END_TEST

START_TEST(test_event_timing)
{
	aclrtStream	s;
	aclrtEvent	a, b;
	aclrtFuncHandle	k = kernel("Two", 2000000);
	float		ms = 0;
	int		i;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateEvent(&a), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateEvent(&b), ACL_SUCCESS);
	ck_assert_int_eq(aclrtEventElapsedTime(&ms, a, b),
	    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
	ck_assert_int_eq(aclrtRecordEvent(a, s), ACL_SUCCESS);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, s),
		    ACL_SUCCESS);
	ck_assert_int_eq(aclrtRecordEvent(b, s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeEvent(b), ACL_SUCCESS);
	ck_assert_int_eq(aclrtEventElapsedTime(&ms, a, b), ACL_SUCCESS);
	/* The model says 6 ms; the device clock drifts by ppm only. */
	ck_assert_msg(ms >= 5.99f && ms < 60.0f, "elapsed %f ms", ms);
	ck_assert_int_eq(aclrtDestroyEvent(a), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyEvent(b), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyEvent(b), ACL_ERROR_RT_INVALID_HANDLE);
}
END_TEST

START_TEST(test_memory)
{
	size_t	 freeb, total, freeb2;
	void	*p, *q, *h;
	char	 buf[64];

	ck_assert_int_eq(aclrtMalloc(&p, 16, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_ERROR_RT_CONTEXT_NULL);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &freeb, &total),
	    ACL_SUCCESS);
	ck_assert_uint_eq(total, 64U << 20);
	ck_assert_uint_eq(freeb, total);
	ck_assert_int_eq(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtMalloc(&p, 40U << 20,
	    ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
	ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &freeb2, &total),
	    ACL_SUCCESS);
	ck_assert_uint_eq(freeb2, freeb - (40U << 20));
	ck_assert_int_eq(aclrtMalloc(&q, 40U << 20,
	    ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_BAD_ALLOC);
	/* Out-of-range copies and sets are refused, not performed. */
	ck_assert_int_eq(aclrtMemcpy(p, 8, buf, 16,
	    ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtMemcpy(buf, sizeof buf, buf + 8, 8,
	    ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtMemcpy((char *)p + (40U << 20) - 8, 64, buf, 64,
	    ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtMemcpy(p, 64, buf, 64, (aclrtMemcpyKind)42),
	    ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtMemset(buf, sizeof buf, 0, sizeof buf),
	    ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtMemset(p, 64, 3, 64), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemcpy(buf, sizeof buf, p, 64,
	    ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
	ck_assert_int_eq(buf[63], 3);
	ck_assert_int_eq(aclrtFree(buf), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtFree(p), ACL_SUCCESS);
	ck_assert_int_eq(aclrtFree(p), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &freeb2, &total),
	    ACL_SUCCESS);
	ck_assert_uint_eq(freeb2, total);
	ck_assert_int_eq(aclrtMallocHost(&h, 128), ACL_SUCCESS);
	ck_assert_int_eq(aclrtFree(h), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtFreeHost(h), ACL_SUCCESS);
}
END_TEST

/*
 * Device memory is node-wide: a second process cannot take what the first
 * holds, and gets it once the first is gone, even when it died without
 * freeing (_exit: no aclrtFree, no aclFinalize, no exit handlers).
 */
START_TEST(test_memory_node_wide)
{
	size_t	 freeb, total;
	void	*p;
	pid_t	 pid;
	int	 up[2], down[2], status;
	char	 c = 0;

	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		void	*mine;

		if (aclrtSetDevice(0) != ACL_SUCCESS ||
		    aclrtMalloc(&mine, 48U << 20, ACL_MEM_MALLOC_HUGE_FIRST) !=
		    ACL_SUCCESS)
			c = 1;
		if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
			_exit(3);
		_exit(c);
	}
	ck_assert_int_eq(read(up[0], &c, 1), 1);
	ck_assert_int_eq(c, 0);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &freeb, &total),
	    ACL_SUCCESS);
	ck_assert_uint_eq(total, 64U << 20);
	ck_assert_uint_eq(freeb, 16U << 20);
	ck_assert_int_eq(aclrtMalloc(&p, 32U << 20, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_ERROR_BAD_ALLOC);
	ck_assert_int_eq(aclrtMalloc(&p, 8U << 20, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_SUCCESS);
	ck_assert_int_eq(aclrtFree(p), ACL_SUCCESS);
	/* The first process dies holding 48 MiB. */
	ck_assert_int_eq(write(down[1], &c, 1), 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(aclrtMalloc(&p, 32U << 20, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_SUCCESS);
	ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &freeb, &total),
	    ACL_SUCCESS);
	ck_assert_uint_eq(freeb, 32U << 20);
	ck_assert_int_eq(aclrtFree(p), ACL_SUCCESS);
	ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &freeb, &total),
	    ACL_SUCCESS);
	ck_assert_uint_eq(freeb, total);
	/* aclFinalize gives back what is still held. */
	ck_assert_int_eq(aclrtMalloc(&p, 40U << 20, ACL_MEM_MALLOC_HUGE_FIRST),
	    ACL_SUCCESS);
	ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtGetMemInfo(ACL_HBM_MEM, &freeb, &total),
	    ACL_SUCCESS);
	ck_assert_uint_eq(freeb, total);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
}
END_TEST

START_TEST(test_bad_handles)
{
	void		*junk = (void *)(uintptr_t)0xdead0;
	aclrtStream	 s;
	aclrtEvent	 e;
	aclrtFuncHandle	 k;
	uint32_t	 task, sid;
	int32_t		 id;
	float		 ms;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyStream(junk), ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtSynchronizeStream(junk),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtRecordEvent(junk, NULL),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtSynchronizeEvent(junk),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtEventElapsedTime(&ms, junk, junk),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtLaunchKernel(junk, 1, NULL, 0, NULL),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_ptr_null(npusimKernelName(junk));
	ck_assert_int_eq(npusimKernelType(junk), -1);
	ck_assert_int_eq(aclrtDestroyContext(junk),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(npusimKernelRegister(NULL, NPUSIM_KERNEL_AI_CORE, 1,
	    1, 0, &k), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(npusimKernelRegister("x", (enum npusim_kernel_type)9,
	    1, 1, 0, &k), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(npusimKernelRegister("x", NPUSIM_KERNEL_AI_CORE, -1,
	    1, 0, &k), ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(rtGetTaskIdAndStreamID(NULL, &sid),
	    ACL_ERROR_RT_PARAM_INVALID);

	/* A destroyed stream or event is just an invalid handle. */
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyStream(s), ACL_SUCCESS);
	k = kernel("K", 1000);
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, s),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtLaunchKernel(k, 0, NULL, 0, NULL),
	    ACL_ERROR_INVALID_PARAM);
	ck_assert_int_eq(aclrtStreamGetId(s, &id),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtCreateEvent(&e), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyEvent(e), ACL_SUCCESS);
	ck_assert_int_eq(aclrtRecordEvent(e, NULL),
	    ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(aclrtDestroyStream(NULL), ACL_ERROR_RT_INVALID_HANDLE);
	ck_assert_int_eq(rtGetTaskIdAndStreamID(&task, &sid), RT_ERROR_NONE);
}
END_TEST

START_TEST(test_task_ids)
{
	aclrtStream	s;
	aclrtFuncHandle	k = kernel("Id", 1000);
	uint32_t	t1, t2, s1, s2;
	int32_t		id;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_str_eq(npusimKernelName(k), "Id");
	ck_assert_int_eq(npusimKernelType(k), NPUSIM_KERNEL_AI_CORE);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtStreamGetId(s, &id), ACL_SUCCESS);
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, s), ACL_SUCCESS);
	ck_assert_int_eq(rtGetTaskIdAndStreamID(&t1, &s1), RT_ERROR_NONE);
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, s), ACL_SUCCESS);
	ck_assert_int_eq(rtGetTaskIdAndStreamID(&t2, &s2), RT_ERROR_NONE);
	ck_assert_uint_eq(s1, (uint32_t)id);
	ck_assert_uint_eq(s2, (uint32_t)id);
	ck_assert_uint_eq(t2, t1 + 1);
	ck_assert_int_eq(aclrtSynchronizeDevice(), ACL_SUCCESS);
}
END_TEST

/*
 * The ids rtGetTaskIdAndStreamID reports come from the submission, not
 * from the task after the stream let go of it: a copy to host memory runs
 * on the worker, which frees it while the submitter is still returning
 * (forced by pausing after each unlock; AddressSanitizer reports a read
 * of the freed task otherwise).
 */
START_TEST(test_task_id_after_free)
{
	aclrtStream	 s;
	char		*dev, out[8];
	uint32_t	 t0, t1, s0, s1;
	int		 i;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMalloc((void **)&dev, sizeof out,
	    ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
	ck_assert_int_eq(aclrtMemsetAsync(dev, sizeof out, 5, sizeof out, s),
	    ACL_SUCCESS);
	ck_assert_int_eq(rtGetTaskIdAndStreamID(&t0, &s0), RT_ERROR_NONE);
	unlock_pause_thread = pthread_self();
	for (i = 0; i < 5; i++) {
		__atomic_store_n(&unlock_pause_armed, 1, __ATOMIC_RELAXED);
		ck_assert_int_eq(aclrtMemcpyAsync(out, sizeof out, dev,
		    sizeof out, ACL_MEMCPY_DEVICE_TO_HOST, s), ACL_SUCCESS);
		__atomic_store_n(&unlock_pause_armed, 0, __ATOMIC_RELAXED);
		ck_assert_int_eq(rtGetTaskIdAndStreamID(&t1, &s1),
		    RT_ERROR_NONE);
		ck_assert_uint_eq(s1, s0);
		ck_assert_uint_eq(t1, t0 + 1 + (uint32_t)i);
	}
	ck_assert_int_eq(aclrtSynchronizeStream(s), ACL_SUCCESS);
	ck_assert_int_eq(out[7], 5);
	ck_assert_int_eq(aclrtFree(dev), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyStream(s), ACL_SUCCESS);
}
END_TEST

/*
 * Stream ids are 16 bits from a device-wide allocator that every process
 * using the device shares: on a device used long enough it wraps.  A new
 * stream must still never get the id of one of this process's live
 * streams (device, stream and task id key a task).  The allocator is
 * wound to the live stream's id by hand.
 */
START_TEST(test_stream_id_wrap)
{
	struct npusim_metrics_page	*m;
	aclrtStream			 a, b;
	char				 name[NPUSIM_SHM_NAME_MAX];
	int32_t				 ida, idb;
	int				 fd;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&a), ACL_SUCCESS);
	ck_assert_int_eq(aclrtStreamGetId(a, &ida), ACL_SUCCESS);
	ck_assert_int_ge(npusimShmName(name, sizeof name, 0, "metrics"), 0);
	fd = shm_open(name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert_ptr_ne(m, MAP_FAILED);
	__atomic_store_n(&m->next_stream_id, (uint32_t)ida + 0x10000,
	    __ATOMIC_RELAXED);
	munmap(m, sizeof *m);
	ck_assert_int_eq(aclrtCreateStream(&b), ACL_SUCCESS);
	ck_assert_int_eq(aclrtStreamGetId(b, &idb), ACL_SUCCESS);
	ck_assert_int_ne(idb, ida);
	ck_assert_int_eq(aclrtDestroyStream(b), ACL_SUCCESS);
	ck_assert_int_eq(aclrtDestroyStream(a), ACL_SUCCESS);
}
END_TEST

/* A forked child's records name the child's thread, not the parent's
 * (the submitting thread's id is cached). */
START_TEST(test_fork_tid)
{
	struct npusim_channel_reader	r;
	struct npusim_record		rec[8];
	aclrtFuncHandle			k = kernel("ForkTid", 1000);
	aclrtStream			s;
	pid_t				pid;
	int				status, n;

	ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
	ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtLaunchKernel(k, 1, NULL, 0, s), ACL_SUCCESS);
	ck_assert_int_eq(aclrtSynchronizeStream(s), ACL_SUCCESS);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		aclrtStream cs;

		alarm(20);
		if (aclrtSetDevice(0) != ACL_SUCCESS ||
		    npusim_channel_open(0, &r) != 0 ||
		    aclrtCreateStream(&cs) != ACL_SUCCESS ||
		    aclrtLaunchKernel(k, 1, NULL, 0, cs) != ACL_SUCCESS ||
		    aclrtSynchronizeStream(cs) != ACL_SUCCESS)
			_exit(2);
		n = npusim_channel_read(&r, rec, 8, NULL);
		for (int i = 0; i < n; i++)
			if (rec[i].pid == getpid() &&
			    rec[i].tid != (int32_t)getpid())
				_exit(3);
		_exit(n >= 1 ? 0 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child status %d", status);
	ck_assert_int_eq(aclrtDestroyStream(s), ACL_SUCCESS);
}
END_TEST

START_TEST(test_clock)
{
	int64_t		off0, off1, drift0, drift1;
	uint64_t	rt, dns, m0, m1, lo, hi;

	ck_assert_int_eq(npusimClockParams(0, &off0, &drift0), ACL_SUCCESS);
	ck_assert_int_eq(npusimClockParams(1, &off1, &drift1), ACL_SUCCESS);
	ck_assert_int_eq(off0, 1500000000LL);
	ck_assert_int_eq(off1 - off0, 137000);
	ck_assert(drift0 != 0 && drift1 != drift0);
	ck_assert_int_eq(npusimReadClock(5, &rt, &dns),
	    ACL_ERROR_INVALID_DEVICE);
	m0 = mono_ns();
	ck_assert_int_eq(npusimReadClock(1, &rt, &dns), ACL_SUCCESS);
	m1 = mono_ns();
	/* device = mono * (1 + drift) + offset, bracketed by two reads. */
	lo = m0 + (uint64_t)((double)m0 * (double)drift1 / 1e9) +
	    (uint64_t)off1;
	hi = m1 + (uint64_t)((double)m1 * (double)drift1 / 1e9) +
	    (uint64_t)off1;
	ck_assert_msg(dns + 1000 >= lo && dns <= hi + 1000,
	    "device %llu not in [%llu, %llu]", (unsigned long long)dns,
	    (unsigned long long)lo, (unsigned long long)hi);
	ck_assert(rt > 1600000000ULL * 1000000000ULL);
}
END_TEST

static Suite *
sim_runtime_suite(void)
{
	Suite	*s = suite_create("sim_runtime");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_devices);
	tcase_add_test(tc, test_stream_order);
	tcase_add_test(tc, test_event_timing);
	tcase_add_test(tc, test_memory);
	tcase_add_test(tc, test_memory_node_wide);
	tcase_add_test(tc, test_bad_handles);
	tcase_add_test(tc, test_task_ids);
	tcase_add_test(tc, test_task_id_after_free);
	tcase_add_test(tc, test_clock);
	tcase_add_test(tc, test_stream_id_wrap);
	tcase_add_test(tc, test_fork_tid);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr;
	char	 name[128];
	int	 failed, d;

	snprintf(prefix, sizeof prefix, "npusimtest-rt-%d", (int)getpid());
	setenv("NPUSIM_SHM_PREFIX", prefix, 1);
	setenv("NPUSIM_DEVICES", "2", 1);
	setenv("NPUSIM_MEM_MB", "64", 1);
	unsetenv("NPUSIM_CLOCK_OFFSET_NS");
	unsetenv("NPUSIM_CLOCK_DRIFT_PPM");
	unsetenv("NPUSIM_TIME_SCALE");
	sr = srunner_create(sim_runtime_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (d = 0; d < 2; d++) {
		snprintf(name, sizeof name, "/%s-dev%d-chan", prefix, d);
		shm_unlink(name);
		snprintf(name, sizeof name, "/%s-dev%d-metrics", prefix, d);
		shm_unlink(name);
	}
	return (failed == 0 ? 0 : 1);
}

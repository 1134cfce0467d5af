/*
 * Helper of bench/overhead.sh (not a benchmark by itself: bench/run.sh
 * skips it): aclrtLaunchKernel called with cold caches, as a framework
 * calls it between stretches of its own work (on the PyTorch bridge a
 * ResNet-50 step makes a runtime call every ~30 us, into caches the
 * interpreter has refilled).  Before each launch it writes one byte in
 * every cache line of EVICT_KIB KiB (1024: twice a core's L2 here), then
 * times the call alone; after every 64 launches (and an untimed
 * synchronize) it prints "step N: X ms", X the 64 calls' time.  Runs
 * until killed, or for STEPS such steps (0: until killed).
 *
 * With CODE_KIB, it also runs through that much code before each call: a
 * chain of jumps, one every CODE_STRIDE bytes, so the instruction caches,
 * the branch predictors and the instruction TLB (one page per 16 jumps,
 * small pages) lose the agent's code as an interpreter's own code makes
 * them lose it between a framework's runtime calls.
 *
 *   bench-launch-cold [EVICT_KIB [STEPS [CODE_KIB]]]
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <acl/acl.h>
#include <npusim/npusim.h>

#include "util.h"

#define PER_STEP	64
#define CODE_STRIDE	256	/* bytes between two jumps of the chain */

typedef void	(*code_fn)(void);

/*
 * The chain of jumps through kib KiB: a jmp rel32 in every CODE_STRIDE
 * bytes, the last a ret.  The k-th sits at line k % 4 of its stride, so
 * the chain goes through every set of the caches, not one in four.
 * NULL where the machine is not x86-64 or the mapping cannot be made
 * executable.
 */
static code_fn
code_chain(size_t kib)
{
#if defined(__x86_64__)
	size_t len = kib * 1024, off, next, k;
	unsigned char *m;
	int32_t rel;

	if (len < 2 * CODE_STRIDE)
		return NULL;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	/* Small pages: one huge page would hold the whole chain in one TLB
	 * entry. */
	(void)madvise(m, len, MADV_NOHUGEPAGE);
	for (k = 0, off = 0;; k++, off = next) {
		next = (k + 1) * CODE_STRIDE + ((k + 1) % 4) * 64;
		if (next + 5 > len)
			break;
		rel = (int32_t)(next - off - 5);
		m[off] = 0xe9;			/* jmp rel32 */
		memcpy(m + off + 1, &rel, sizeof(rel));
	}
	m[off] = 0xc3;				/* ret */
	if (mprotect(m, len, PROT_READ | PROT_EXEC) != 0) {
		munmap(m, len);
		return NULL;
	}
	__builtin___clear_cache((char *)m, (char *)m + len);
	return (code_fn)(uintptr_t)m;
#else
	(void)kib;
	return NULL;
#endif
}

int
main(int argc, char **argv)
{
	size_t evict = (size_t)(argc > 1 ? atol(argv[1]) : 1024) * 1024;
	long steps = argc > 2 ? atol(argv[2]) : 0;
	size_t code_kib = argc > 3 ? (size_t)atol(argv[3]) : 0;
	code_fn code = NULL;
	volatile unsigned char *buf;
	aclrtFuncHandle k;
	aclrtStream s;

	if (evict == 0 || (buf = calloc(1, evict)) == NULL) {
		fputs("usage: bench-launch-cold [EVICT_KIB [STEPS [CODE_KIB]]]\n",
		    stderr);
		return 2;
	}
	if (code_kib > 0 && (code = code_chain(code_kib)) == NULL) {
		fprintf(stderr, "bench-launch-cold: no executable chain of %zu "
		    "KiB here\n", code_kib);
		return 1;
	}
	if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
	    aclrtCreateStream(&s) != ACL_SUCCESS ||
	    npusimKernelRegister("aclnnConvolution_cold_bench",
	    NPUSIM_KERNEL_AI_CORE, 0, 0, 2000, &k) != ACL_SUCCESS) {
		fprintf(stderr, "bench-launch-cold: %s\n",
		    aclGetRecentErrMsg());
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (long n = 0; steps == 0 || n < steps; n++) {
		uint64_t in_calls = 0, t0;

		for (int i = 0; i < PER_STEP; i++) {
			for (size_t j = 0; j < evict; j += 64)
				buf[j]++;
			if (code != NULL)
				code();
			t0 = util_monotonic_ns();
			if (aclrtLaunchKernel(k, 1, NULL, 0, s) != ACL_SUCCESS) {
				fprintf(stderr, "bench-launch-cold: launch: "
				    "%s\n", aclGetRecentErrMsg());
				return 1;
			}
			in_calls += util_monotonic_ns() - t0;
		}
		if (aclrtSynchronizeStream(s) != ACL_SUCCESS) {
			fprintf(stderr, "bench-launch-cold: synchronize: %s\n",
			    aclGetRecentErrMsg());
			return 1;
		}
		printf("step %ld: %.4f ms\n", n, (double)in_calls / 1e6);
	}
	return 0;
}

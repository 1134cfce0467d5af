/*
 * Test support for sanitizer builds: makes fork() of a threaded process
 * safe under gcc 12's AddressSanitizer.
 *
 * That runtime takes no allocator locks around fork (LLVM added this in
 * its version 18), so a child forked while another thread was inside
 * malloc or free inherits a held allocator lock and hangs on its first
 * allocation or in the leak check at exit.  Our agents, the simulator's
 * multi-rank examples and libtool's wrapper scripts (bash, with the agent
 * and its thread preloaded) fork like that all the time.
 *
 * tests/wrap.sh preloads this library (not itself instrumented) into every
 * process of a test.  Where the ASan runtime is loaded it installs fork
 * handlers that take the runtime's thread registry and allocator locks
 * before fork and release them after, in parent and child,
 * as newer runtimes do themselves.
 *
 * The stack depot (the table of allocation stacks, a spin lock in the top
 * bit of each of its 2^20 buckets) is not locked before fork: in this
 * runtime a thread may hold a bucket while it waits for the allocator.
 * So a child can inherit a bucket held by a thread it does not have, and
 * every thread of the child that records a stack hashing there spins
 * forever (seen: a rank of capture-inproc, five threads in
 * StackDepotBase::lock, for 36 minutes).  In the child alone, where no
 * other thread exists, every held bucket is released (as the runtime's
 * StackDepotUnlockAll would): a bucket's word keeps its list head while it
 * is held, and an insertion the lost thread had not linked yet is lost.  The runtime does not export these
 * functions; they are found in its symbol table (Debian ships it
 * unstripped).  Our prepare handler must run after every other one (they
 * may allocate), so it is registered before any other: __register_atfork,
 * which pthread_atfork calls, is wrapped to register ours first.
 * _Fork() runs no fork handlers, so it is wrapped to do the same locking
 * itself: a rank forked by _Fork() from a process whose agent thread was
 * refilling its allocator cache hung in its first thread's start (seen:
 * run-steps.sh, the child's registration thread in
 * SizeClassAllocator64::GetFromAllocator, its rank never registered).
 * The application's own fork handlers still do not run, as _Fork says.
 * Elsewhere (sh, sed, python3 without the runtime) it does nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef void (*fn_t)(void);

/* Lock functions, in the order they are called before fork; the unlock
 * ones after it, in reverse.  (The stack depot's locks are not taken: in
 * this runtime a thread may hold one while it waits for the allocator.) */
static const char *const names[] = {
	"_ZN6__lsan18LockThreadRegistryEv",
	"_ZN6__lsan13LockAllocatorEv",
	"_ZN6__lsan15UnlockAllocatorEv",
	"_ZN6__lsan20UnlockThreadRegistryEv",
	"_ZN11__sanitizer19StackDepotUnlockAllEv",
	"_ZN11__sanitizerL8theDepotE",
	"_ZN11__sanitizer24StackDepotLockBeforeForkEv",
};
#define NLOCK	4	/* names[0..NLOCK): before fork, then after */
#define DEPOT_UNLOCK	4	/* not called: with the table's size, the layout */
#define DEPOT_TABLE	5
#define DEPOT_OWN	6	/* a runtime that locks its depot around fork */
#define NFN	(sizeof(names) / sizeof(names[0]))
static fn_t fns[NFN];
static size_t sizes[NFN];
static int found;	/* 1: the four lock functions found */
static int depot_ok;	/* 1: gcc 12's depot: 2^20 u32 buckets, top bit */
static int done;	/* our handlers registered (or not wanted) */

int	__register_atfork(void (*)(void), void (*)(void), void (*)(void),
	    void *);
extern void *__dso_handle;

struct lookup {
	char	path[4096];
	ElfW(Addr) base;
};

static int
find_asan(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lookup *l = arg;

	(void)size;
	if (info->dlpi_name == NULL || strstr(info->dlpi_name, "/libasan.so") == NULL)
		return 0;
	snprintf(l->path, sizeof(l->path), "%s", info->dlpi_name);
	l->base = info->dlpi_addr;
	return 1;
}

/* Finds the lock functions in the runtime's .symtab. */
static void
resolve(void)
{
	struct lookup l = { "", 0 };
	const ElfW(Ehdr) *eh;
	const ElfW(Shdr) *sh;
	struct stat st;
	unsigned n = 0;
	void *map;
	int fd;

	if (dl_iterate_phdr(find_asan, &l) == 0)
		return;
	if ((fd = open(l.path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	if (fstat(fd, &st) != 0 || (map = mmap(NULL, (size_t)st.st_size,
	    PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		close(fd);
		return;
	}
	close(fd);
	eh = map;
	sh = (const ElfW(Shdr) *)((const char *)map + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		const ElfW(Sym) *sym;
		const char *str;
		size_t nsym;

		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		sym = (const ElfW(Sym) *)((const char *)map + sh[i].sh_offset);
		str = (const char *)map + sh[sh[i].sh_link].sh_offset;
		nsym = sh[i].sh_size / sizeof(*sym);
		for (size_t j = 0; j < nsym; j++)
			for (unsigned k = 0; k < NFN; k++)
				if (fns[k] == NULL && sym[j].st_value != 0 &&
				    strcmp(str + sym[j].st_name, names[k]) == 0) {
					fns[k] = (fn_t)(l.base + sym[j].st_value);
					sizes[k] = sym[j].st_size;
					n += k < NLOCK;
				}
	}
	munmap(map, (size_t)st.st_size);
	found = n == NLOCK;
	/* The runtime's table starts with the buckets: 4 MiB of u32 words
	 * in gcc 12's (gcc 11's held 8 MiB of pointers, locked in bit 0). */
	depot_ok = found && fns[DEPOT_UNLOCK] != NULL &&
	    fns[DEPOT_TABLE] != NULL && fns[DEPOT_OWN] == NULL &&
	    sizes[DEPOT_TABLE] >= (4u << 20) && sizes[DEPOT_TABLE] < (8u << 20);
	if ((!found || !depot_ok) && getenv("MSPTI_ASAN_FORK_DEBUG") != NULL)
		fprintf(stderr, "asan-fork: %u of %u lock functions, depot %s "
		    "in %s\n", n, NLOCK, depot_ok ? "known" : "not known",
		    l.path);
}

static void
before(void)
{
	for (unsigned k = 0; k < NLOCK / 2; k++)
		fns[k]();
}

static void
after(void)
{
	for (unsigned k = NLOCK / 2; k < NLOCK; k++)
		fns[k]();
}

/*
 * The depot's buckets: 2^20 words, the lock in the top bit, as the
 * runtime's StackDepotUnlockAll (found, so this runtime has that depot)
 * clears it.  Only held ones are written: that function stores every word,
 * and the child would copy the whole 4 MiB table page by page.
 */
static void
after_child(void)
{
	volatile unsigned *tab = (volatile unsigned *)fns[DEPOT_TABLE];

	if (depot_ok)
		for (unsigned i = 0; i < (1u << 20); i++)
			if (tab[i] & 0x80000000u)
				tab[i] &= 0x7fffffffu;
	after();
}

/* For tests/unit/check_asan_fork: the depot's bucket words, or NULL. */
__attribute__((visibility("default"))) void *asan_fork_depot_table(void);

void *
asan_fork_depot_table(void)
{
	return depot_ok ? (void *)fns[DEPOT_TABLE] : NULL;
}

static void
install(void)
{
	if (done)
		return;
	done = 1;
	resolve();
	if (found)
		__register_atfork(before, after, after_child, __dso_handle);
}

int
__register_atfork(void (*prepare)(void), void (*parent)(void),
    void (*child)(void), void *dso)
{
	static int (*real)(void (*)(void), void (*)(void), void (*)(void),
	    void *);

	if (real == NULL)
		real = (int (*)(void (*)(void), void (*)(void), void (*)(void),
		    void *))dlsym(RTLD_NEXT, "__register_atfork");
	if (real == NULL)
		return -1;
	if (!done && prepare != before) {
		done = 1;
		resolve();
		if (found)
			real(before, after, after_child, __dso_handle);
	}
	return real(prepare, parent, child, dso);
}

pid_t
_Fork(void)
{
	static pid_t (*real)(void);
	pid_t pid;

	if (real == NULL)
		real = (pid_t (*)(void))dlsym(RTLD_NEXT, "_Fork");
	if (real == NULL)
		return -1;
	install();
	if (found)
		before();
	pid = real();
	if (found) {
		if (pid == 0)
			after_child();
		else
			after();
	}
	return pid;
}

__attribute__((constructor)) static void
asan_fork_init(void)
{
	install();
}

//go:build linux && cgo

package testflags

// DuckDB allocates through its own jemalloc (symbols prefixed duckdb_je_,
// one per process), and every database close purges all of jemalloc's
// arenas (JemallocExtension::FlushAll, mallctl "arena.<all>.purge"): each
// free page is given back to the kernel with madvise(MADV_DONTNEED). The
// tests open and close a database for every in-process command, so the
// next open faulted every page back in, zeroed by the kernel: a fresh
// 256 KiB block for each column of each table a commit appends to, and as
// much again for a checkpoint. On this 2-core VM, where a page fault is
// expensive, that was most of the suite's system time (a datatest package
// run took 3.4 million minor faults), and a loop of 60 opens that append
// to 5 tables and checkpoint took 21 CPU-seconds instead of 5.
//
// A purge that ignores decay settings cannot be switched off by jemalloc's
// options, but it goes through the arena's extent hooks. This package gives
// every automatic arena hooks that map memory as jemalloc's defaults do
// and refuse to purge or decommit it (jemalloc then keeps the pages as
// retained memory and reuses them, already mapped): the test process
// keeps the memory of its peak instead of giving it back, which no test
// measures (TestChunkedBackfillPeakRSS runs the built idem binary, which
// does not import this package and keeps jemalloc's defaults).
//
// The hooks call nothing of jemalloc's (a hook that calls back into it
// can deadlock on a thread whose jemalloc state is not set up yet, as
// jemalloc's own default merge hook did when called through custom
// hooks): only mmap, munmap and sbrk(0).

/*
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

// jemalloc 5's extent_hooks_t (include/jemalloc/jemalloc_typedefs.h).
typedef struct extent_hooks_s extent_hooks_t;
struct extent_hooks_s {
	void *(*alloc)(extent_hooks_t *, void *, size_t, size_t, bool *, bool *, unsigned);
	bool (*dalloc)(extent_hooks_t *, void *, size_t, bool, unsigned);
	void (*destroy)(extent_hooks_t *, void *, size_t, bool, unsigned);
	bool (*commit)(extent_hooks_t *, void *, size_t, size_t, size_t, unsigned);
	bool (*decommit)(extent_hooks_t *, void *, size_t, size_t, size_t, unsigned);
	bool (*purge_lazy)(extent_hooks_t *, void *, size_t, size_t, size_t, unsigned);
	bool (*purge_forced)(extent_hooks_t *, void *, size_t, size_t, size_t, unsigned);
	bool (*split)(extent_hooks_t *, void *, size_t, size_t, size_t, bool, unsigned);
	bool (*merge)(extent_hooks_t *, void *, size_t, void *, size_t, bool, unsigned);
};

// Weak: a test binary without DuckDB (this package's own) links without it.
extern int duckdb_je_mallctl(const char *, void *, size_t *, void *, size_t) __attribute__((weak));

// mmap as jemalloc's pages_map: at new_addr exactly or not at all, else
// anywhere aligned to alignment. Fresh anonymous memory is zeroed and
// committed.
static void *idem_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment, bool *zero, bool *commit, unsigned arena) {
	const size_t page = 4096;
	if (alignment < page) alignment = page;
	if (new_addr != NULL) {
		void *p = mmap(new_addr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) return NULL;
		if (p != new_addr) { munmap(p, size); return NULL; }
		*zero = true; *commit = true;
		return p;
	}
	size_t alloc = size + alignment - page;
	if (alloc < size) return NULL;
	void *p = mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) return NULL;
	uintptr_t start = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
	size_t lead = start - (uintptr_t)p, trail = alloc - lead - size;
	if (lead) munmap(p, lead);
	if (trail) munmap((void *)(start + size), trail);
	*zero = true; *commit = true;
	return (void *)start;
}

// true is "not done": jemalloc keeps the extent, mapped, as retained
// memory (its default with retain, which Linux builds use).
static bool idem_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena) { return true; }
static void idem_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena) { munmap(addr, size); }
// Memory stays committed: a commit has nothing to do.
static bool idem_commit(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length, unsigned arena) { return false; }
static bool idem_keep(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length, unsigned arena) { return true; }
static bool idem_split(extent_hooks_t *h, void *addr, size_t size, size_t a, size_t b, bool committed, unsigned arena) { return false; }
// As jemalloc's default on Linux: any two mmapped extents merge; one of
// the data segment (sbrk) and one mapped do not.
static bool idem_merge(extent_hooks_t *h, void *a, size_t sa, void *b, size_t sb, bool committed, unsigned arena) {
	uintptr_t brk = (uintptr_t)sbrk(0);
	return ((uintptr_t)a < brk) != ((uintptr_t)b < brk);
}

static extent_hooks_t idem_hooks = {
	idem_alloc, idem_dalloc, idem_destroy, idem_commit, idem_keep, idem_keep, idem_keep, idem_split, idem_merge,
};

// idem_keep_pages sets idem_hooks on each of jemalloc's automatic arenas
// (opt.narenas; it creates those not made yet), and returns how many took
// them, -1 without DuckDB. The arena of allocations over DuckDB's
// oversize_threshold (256 MiB), made on first use, keeps the defaults.
static int idem_keep_pages(unsigned *narenas) {
	*narenas = 0;
	if (duckdb_je_mallctl == NULL) return -1;
	size_t len = sizeof(*narenas);
	if (duckdb_je_mallctl("opt.narenas", narenas, &len, NULL, 0) != 0) return 0;
	extent_hooks_t *hooks = &idem_hooks;
	int set = 0;
	for (unsigned i = 0; i < *narenas; i++) {
		char name[48];
		snprintf(name, sizeof name, "arena.%u.extent_hooks", i);
		if (duckdb_je_mallctl(name, NULL, NULL, &hooks, sizeof(hooks)) == 0) set++;
	}
	return set;
}
*/
import "C"

// keptArenas and arenas are what keepPages did when the package was
// initialised: how many of jemalloc's arenas took the hooks, of how many
// (-1, 0 in a binary without DuckDB).
var keptArenas, arenas = keepPages()

func keepPages() (int, int) {
	var n C.uint
	set := C.idem_keep_pages(&n)
	return int(set), int(n)
}

// KeptArenas reports how many of DuckDB's jemalloc arenas keep their
// pages (the hooks above), and how many arenas there are; -1 when the
// binary has no DuckDB.
func KeptArenas() (kept, of int) { return keptArenas, arenas }

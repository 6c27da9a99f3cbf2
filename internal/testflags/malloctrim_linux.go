//go:build linux && cgo

package testflags

// DuckDB calls glibc's malloc_trim(0) each time a database closes
// (Allocator::FlushAll in ~DatabaseInstance). The tests open and close a
// database for every in-process command and every look at a file, in
// one long-lived test process whose glibc heap is large: each close walked
// every arena and gave its free pages back with madvise, and the next
// open faulted them in again. Profiled on a test of 30 expiring batches, the
// trim alone was 4% of the CPU, and with the faults it causes a good part
// of the third of the suite's CPU spent in the kernel.
//
// Defining malloc_trim here, in the executable, takes the place of
// glibc's for the whole process: it gives nothing back. Only test
// binaries import this package (the idem binary keeps glibc's trim), and
// no test measures a test process's memory. malloc_trim is advisory: 0
// says that no memory was released, which callers may always be told.

/*
#include <stddef.h>

int malloc_trim(size_t pad) { (void)pad; return 0; }
*/
import "C"

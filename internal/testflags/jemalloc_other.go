//go:build !(linux && cgo)

package testflags

// KeptArenas reports how many of DuckDB's jemalloc arenas keep their
// pages; elsewhere than on Linux with cgo nothing is changed: -1.
func KeptArenas() (kept, of int) { return -1, 0 }

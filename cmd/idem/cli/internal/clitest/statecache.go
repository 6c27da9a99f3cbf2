package clitest

import (
	"crypto/sha256"
	"os"
	"sync"
)

// Reading a database's whole state (CaptureState, DumpState) costs DuckDB
// a statement per table, and the tests read it before and after commands
// that must leave it as it was, most of which leave the file's bytes as
// they were too. What the inspector reads is the database file and its
// WAL and nothing else, so a state already read from the same bytes is
// the state: stateCache keeps each state read by the sha256 of the two
// files, and a state is kept only when the files' bytes were the same
// before and after it was read (no writer in between).
var stateCache sync.Map // stateKey -> DBState or string

// stateKey names the bytes of a database file and of its WAL (none when
// absent), for one kind of reading.
type stateKey struct {
	kind   string
	db     [sha256.Size]byte
	wal    [sha256.Size]byte
	hasWAL bool
}

// maxCachedState is the largest state kept, in bytes of text: the states
// the tests compare are of small databases; a large one is read again.
const maxCachedState = 1 << 20

// filesKey is the key of the database at path as its files are now; ok is
// false when they cannot be read.
func filesKey(kind, path string) (k stateKey, ok bool) {
	k.kind = kind
	db, err := os.ReadFile(path)
	if err != nil {
		return k, false
	}
	k.db = sha256.Sum256(db)
	wal, err := os.ReadFile(path + ".wal")
	switch {
	case err == nil:
		k.wal, k.hasWAL = sha256.Sum256(wal), true
	case !os.IsNotExist(err):
		return k, false
	}
	return k, true
}

// cachedState returns read(), or the value read before from the same
// bytes of the database at path.
func cachedState[V any](kind, path string, size func(V) int, read func() V) V {
	before, ok := filesKey(kind, path)
	if ok {
		if v, hit := stateCache.Load(before); hit {
			return v.(V)
		}
	}
	v := read()
	if after, same := filesKey(kind, path); ok && same && after == before && size(v) <= maxCachedState {
		stateCache.Store(before, v)
	}
	return v
}

// stateSize is the text size of a DBState.
func stateSize(s DBState) int {
	n := 0
	for k, v := range s {
		n += len(k) + len(v)
	}
	return n
}

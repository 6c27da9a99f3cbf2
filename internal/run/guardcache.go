package run

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// guardCache keeps, for one open database (a *DB, for the life of the
// handle in this process), the verdicts of the guards whose answer is a
// function of content: the seal check of a job's SQL texts (seal.Seal.Check,
// before the names it leaves to the database are looked up, which is done
// again every run), DuckDB's EXPLAIN of a step statement (the tables it
// scans, its plan's root), and the released-SQL and owner checks a
// committed run passed. A project run or a batch loop runs the same SQL
// again and again; each of these costs a parse or a plan, a round trip and
// JSON decoding.
//
// A verdict is stored under a guardKey: a sha256 over the engine's version,
// the kind of verdict and everything it depends on, so that a key a verdict
// was not computed for can never find it. The seal check's answer is kept
// whole (a function of its key alone); the others only when they passed. A
// miss recomputes. The passes are also kept across processes, signed, in
// idem.verdicts (verdicts.go). The cache lives in memory beside the open handle: no
// other process writes the file while this one holds it (DuckDB's lock),
// and within the process every change to the catalog is a run whose guards
// confine it to its own tables. Verdicts learned inside a transaction that
// writes (released, owners) are kept only once it commits (guardLearn).
// A nil *guardCache keeps nothing.
type guardCache struct {
	mu sync.Mutex
	m  map[[32]byte]any
	// store is what is kept across processes in idem.verdicts
	// (verdicts.go).
	store verdictStore
}

// guardCacheMax bounds the verdicts a handle keeps: past it the cache is
// emptied and fills again (a project of a few hundred jobs keeps each
// job's handful).
const guardCacheMax = 1 << 14

func newGuardCache() *guardCache { return &guardCache{m: map[[32]byte]any{}} }

// guardKey is the sha256 of the engine's version, kind and parts, each
// length-prefixed so that no two lists of parts share a key.
func guardKey(kind string, parts ...string) [32]byte {
	return guardKeyOf(mapping.LibraryVersion(), kind, parts...)
}

// guardKeyOf is guardKey for the engine of version engine.
func guardKeyOf(engine, kind string, parts ...string) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, p := range append([]string{engine, kind}, parts...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (c *guardCache) get(k [32]byte) (any, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *guardCache) put(k [32]byte, v any) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, v)
}

func (c *guardCache) putLocked(k [32]byte, v any) {
	if len(c.m) >= guardCacheMax {
		clear(c.m)
	}
	c.m[k] = v
}

// guardLearn collects the verdicts a writing transaction passed that are
// true only if it commits (a name it claimed, a released version it
// recorded): keep adds them to the cache after COMMIT.
type guardLearn struct {
	keys  [][32]byte
	kinds []string // the kind of each key's verdict
}

func (l *guardLearn) add(k [32]byte, kind string) {
	if l != nil {
		l.keys = append(l.keys, k)
		l.kinds = append(l.kinds, kind)
	}
}

// keep stores what l learned in c: the transaction committed.
func (l *guardLearn) keep(c *guardCache) {
	if l == nil {
		return
	}
	for _, k := range l.keys {
		c.put(k, true)
	}
	l.keys, l.kinds = nil, nil
}

package run

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/seal"
)

// Verdicts kept across processes. The guard cache (guardcache.go) lives
// as long as a handle; a nightly run or a no-op run is a new process, so
// it checked every job's SQL again. A committing run now writes the
// verdicts its process learned into idem.verdicts (catalog migration
// 0010) in its own transaction, and a handle loads them before its first
// decision. Only passes are kept: the seal check of texts that broke no
// rule (with the names it leaves to the database, looked up every run as
// before), an EXPLAIN that scanned only the run's tables, and the owner
// and released-SQL checks of a run that committed (true only because it
// committed, and written in the same transaction as the claims and
// released sums they stand for).
//
// What a row may be trusted for. Its key is a sha256 over the engine's
// version, the verdict's kind and every text it depends on (guardKey), so
// other SQL, another engine or other scanned tables never find it. A
// database file can be written by anyone who holds it, though, and a
// forged row "this text passed the seal" would let SQL the seal refuses
// run. So each row carries an HMAC-SHA256 of the database's id, its key,
// kind and value under a secret that is not in the database: 32 random
// bytes in <db>.verdicts-key beside it, mode 0600, made by the first
// commit that keeps a verdict. A row whose MAC does not match (forged, changed, copied
// from another database: the id differs) is ignored and the guard runs.
// Someone who can also read the key file can forge rows; they can equally
// edit the job files, the released sums in idem.released or the targets,
// which the guards trust as much, so the cache adds no power they lack. A
// database without its key file (a copy, a restored backup) trusts none
// of its rows and writes new ones under a new secret.

// verdictKeyFile is the file beside the database at path holding the
// secret the rows of idem.verdicts are signed with.
func verdictKeyFile(path string) string { return path + ".verdicts-key" }

// verdictSecret reads the secret beside the database at path, making it
// when create is set and there is none. A secret that cannot be read or
// made gives nil: nothing is kept across processes.
func verdictSecret(path string, create bool) []byte {
	name := verdictKeyFile(path)
	if b, err := os.ReadFile(name); err == nil {
		if len(b) != 32 {
			return nil
		}
		return b
	} else if !errors.Is(err, fs.ErrNotExist) || !create {
		return nil
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil
	}
	_, werr := f.Write(secret)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(name)
		return nil
	}
	return secret
}

// verdictStore is the part of a guard cache kept in idem.verdicts.
type verdictStore struct {
	secret []byte // nil: nothing kept across processes
	dbID   string
	loaded bool
	// fresh are the verdicts learned in this process and not yet written,
	// by key.
	fresh map[[32]byte]verdictRow
}

type verdictRow struct{ kind, value string }

func (s *verdictStore) mac(k [32]byte, r verdictRow) string {
	m := hmac.New(sha256.New, s.secret)
	for _, p := range []string{s.dbID, hex.EncodeToString(k[:]), r.kind, r.value} {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// decodeVerdict is the cached value of a stored row.
func decodeVerdict(r verdictRow) (any, bool) {
	switch r.kind {
	case "seal":
		var unknown []seal.NameAt
		if err := json.Unmarshal([]byte(r.value), &unknown); err != nil {
			return nil, false
		}
		return sealChecked{unknown: unknown}, true
	case "explain":
		return r.value, true
	case "describe":
		var cols []string
		if err := json.Unmarshal([]byte(r.value), &cols); err != nil || cols == nil {
			return nil, false
		}
		return cols, true
	case "owners", "released":
		return true, true
	}
	return nil, false
}

// load reads the stored verdicts into c once per handle: those whose MAC
// matches under secret. q is a transaction of the handle; a database
// without idem.verdicts (a read-only open of an older catalog) has none.
func (c *guardCache) load(ctx context.Context, q catalog.Querier, secret []byte) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store.loaded {
		return nil
	}
	c.store.loaded = true
	if secret == nil {
		return nil
	}
	ok, err := catalog.TableExists(ctx, q, "idem", "verdicts")
	if err != nil || !ok {
		return err
	}
	if c.store.dbID, err = databaseID(ctx, q); err != nil {
		return err
	}
	c.store.secret = secret
	rows, err := q.QueryContext(ctx, `SELECT key, kind, value, mac FROM idem.verdicts`)
	if err != nil {
		return fmt.Errorf("read verdicts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, mac string
		var r verdictRow
		if err := rows.Scan(&key, &r.kind, &r.value, &mac); err != nil {
			return fmt.Errorf("read verdicts: %w", err)
		}
		var k [32]byte
		if b, err := hex.DecodeString(key); err != nil || len(b) != len(k) {
			continue
		} else {
			copy(k[:], b)
		}
		if !hmac.Equal([]byte(mac), []byte(c.store.mac(k, r))) {
			continue // not signed with this database's secret
		}
		if v, ok := decodeVerdict(r); ok {
			c.putLocked(k, v)
		}
	}
	return rows.Err()
}

// learnt notes that c's verdict under k, a pass of kind with value, is to
// be written with the handle's next commit.
func (c *guardCache) learnt(k [32]byte, kind, value string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store.fresh == nil {
		c.store.fresh = map[[32]byte]verdictRow{}
	}
	c.store.fresh[k] = verdictRow{kind, value}
}

// save writes, in the committing transaction tx of the database at path,
// the verdicts learnt in this process and those learn holds (true once tx
// commits), and returns the keys written: stored marks them once tx has
// committed. The first commit beside no secret makes one.
func (c *guardCache) save(ctx context.Context, tx *sql.Tx, path string, learn *guardLearn) ([][32]byte, error) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store.secret == nil {
		secret := verdictSecret(path, true)
		if secret == nil {
			return nil, nil
		}
		var err error
		if c.store.dbID, err = databaseID(ctx, tx); err != nil {
			return nil, err
		}
		c.store.secret = secret
	}
	rows := map[[32]byte]verdictRow{}
	for k, r := range c.store.fresh {
		rows[k] = r
	}
	if learn != nil {
		for i, k := range learn.keys {
			rows[k] = verdictRow{kind: learn.kinds[i]}
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	var values []string
	var args []any
	var keys [][32]byte
	for k, r := range rows {
		values = append(values, "(?, ?, ?, ?)")
		args = append(args, hex.EncodeToString(k[:]), r.kind, r.value, c.store.mac(k, r))
		keys = append(keys, k)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idem.verdicts (key, kind, value, mac) VALUES `+strings.Join(values, ", "), args...); err != nil {
		return nil, fmt.Errorf("write verdicts: %w", err)
	}
	return keys, nil
}

// stored drops keys from the verdicts still to write: their transaction
// committed.
func (c *guardCache) stored(keys [][32]byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.store.fresh, k)
	}
}

// databaseID is the database's id (idem.meta's db_id).
func databaseID(ctx context.Context, q catalog.Querier) (string, error) {
	var id string
	if err := q.QueryRowContext(ctx, `SELECT value FROM idem.meta WHERE key = 'db_id'`).Scan(&id); err != nil {
		return "", fmt.Errorf("read the database's id: %w", err)
	}
	return id, nil
}

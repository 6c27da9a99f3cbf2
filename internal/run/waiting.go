package run

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A command that waits for a database another process holds (--wait)
// announces it with a file beside the database, <db>.waiting-<pid>-<n>,
// removed once its open returns. A follower (idem run --follow) looks for
// such files between batches and, when one names a live process, closes
// the database, lets the waiters in and opens it again (Yield): a
// maintenance command beside a follower runs within one batch interval
// instead of never.

const waitingTag = "waiting"

// markWaiting announces a wait for the database at path; "" when the file
// cannot be made (the wait goes on unannounced).
func markWaiting(path string) string {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+"."+waitingTag+"-"+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return ""
	}
	f.Close()
	return f.Name()
}

func unmarkWaiting(marker string) {
	if marker != "" {
		_ = os.Remove(marker)
	}
}

// waiters counts the live processes waiting for the database at path,
// removing the marks of processes that are gone.
func waiters(path string) int {
	dir := filepath.Dir(path)
	prefix := filepath.Base(path) + "." + waitingTag + "-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if pid != os.Getpid() && !ProcessAlive(pid) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		n++
	}
	return n
}

// Yield closes d when another process waits for it, waits until every
// waiter has had its turn (its mark is gone: it holds the database or
// gave up) and opens it again, waiting as long as ctx allows for the
// waiters to finish. It reports how long d was let go; 0 when nobody
// waited. On error d is closed.
func (d *DB) Yield(ctx context.Context) (time.Duration, error) {
	if d.readOnly || waiters(d.path) == 0 {
		return 0, nil
	}
	start := time.Now()
	opts := d.opts
	if err := d.Close(); err != nil {
		return 0, err
	}
	for waiters(d.path) > 0 {
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	opts.Wait = 100 * 365 * 24 * time.Hour // until ctx ends
	nd, err := open(ctx, d.path, opts, nil)
	if err != nil {
		return time.Since(start), err
	}
	*d = *nd
	return time.Since(start), nil
}

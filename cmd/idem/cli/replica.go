package cli

import (
	"fmt"
	"strings"

	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/runner"
)

// printReplica adds the line of a read replica's publication to a writing
// command's human output.
func (a *app) printReplica(r *runner.ReplicaInfo) {
	if r == nil {
		return
	}
	if r.Error != "" {
		fmt.Fprintf(a.stdout, "  replica   not published: %s\n", r.Error)
		fmt.Fprintf(a.stderr, "idem: warning: the commit stands but the read replica was not published (%s); the next command that opens the database publishes it\n", r.Error)
		return
	}
	fmt.Fprintf(a.stdout, "  replica   %s (%s bytes, %s, %.3fs)\n", r.Path, report.Thousands(r.Bytes), r.Method, r.Seconds)
}

// replicaOption lets a read of pinned snapshots fall back on the read
// replica of a database a writer holds; stderr then names the replica and
// its snapshots.
func (a *app) replicaOption() runner.Option {
	return runner.WithReplicaReads(a.noteReplica)
}

// noteReplica tells, on stderr, that a command reads a replica and what it
// holds.
func (a *app) noteReplica(n runner.ReplicaNote) {
	held := make([]string, len(n.Snapshots))
	for i, s := range n.Snapshots {
		held[i] = fmt.Sprintf("%s snapshot %d", s.Job, s.Snapshot)
	}
	if len(held) == 0 {
		held = []string{"no job"}
	}
	fmt.Fprintf(a.stderr, "idem: %s is held by a writer; reading its read replica %s (commit %d, published %s): %s\n",
		n.Primary, n.Path, n.Commit, n.PublishedAt.UTC().Format("2006-01-02 15:04:05Z"), strings.Join(held, ", "))
}

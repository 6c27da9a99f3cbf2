package history

import (
	"fmt"
	"os"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/run"
)

// RefuseUnpublished refuses (exit 3) an erasure that reaches a job
// declaring [publish.iceberg] when the caller does not publish after it
// (opts.Publishes: the idem binary, which carries no publisher): the lake
// would serve the subject until someone ran the publisher, unannounced.
// A dry run changes nothing and is not refused. EraseChain checks it; a
// caller that changes anything before (drops environments) checks first.
func RefuseUnpublished(roots, beside []*job.Job, opts EraseOptions) error {
	if opts.Publishes || opts.DryRun {
		return nil
	}
	for _, j := range append(append([]*job.Job{}, roots...), beside...) {
		if j.Publish.Iceberg != nil {
			return report.Refuse("publish", "%s declares [publish.iceberg] and this idem binary does not publish: after the erasure the Iceberg table would keep serving the subject until a publisher ran; nothing was erased. Erase with idem-iceberg erase (same arguments), which publishes the table again without the subject in the same command", j.Name)
		}
	}
	return nil
}

// removePublishTemps removes the temporary exports publishers keep beside
// the database (job.PublishTempDir): a killed publisher's may hold the
// subject. A publisher running now loses its export and fails.
func removePublishTemps(d *run.DB) error {
	if err := os.RemoveAll(job.PublishTempDir(d.Path())); err != nil {
		return fmt.Errorf("remove the publishers' temporary exports: %w", err)
	}
	return nil
}

package run

import (
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/internal/source"
)

// An apply pipeline that reads upstream jobs reads only what changed in
// them since the snapshots its last commit pinned (source.Upstream with
// Changes). Each run over a range of upstream snapshots is one batch, named
// from the range ("upstream:trips_clean:4-5"), so that running the same
// range again answers already_committed.

// checkChangesRun refuses the options an apply run over upstream changes
// cannot take: its batch is the range of upstream snapshots, not a name or
// source positions. A generic pipeline reads view input, so it reads one
// upstream.
func checkChangesRun(j *job.Job, opts RunOptions) error {
	switch {
	case opts.BatchID != "":
		return report.Usage("--batch-id: job %s applies the changes of its upstream jobs; its batch is named from their snapshots", j.Name)
	case opts.From != nil:
		return report.Usage("--from/--to: job %s applies the changes of its upstream jobs, between the snapshots it pinned and their latest", j.Name)
	case j.Pipeline.Generic && len(j.Input.Upstream) != 1:
		return report.Usage("job %s: pipeline %s applies the changes of one upstream job; [input] upstream names %d", j.Name, j.Pipeline.Name, len(j.Input.Upstream))
	}
	return nil
}

// pinnedSnapshots are the upstream snapshots the job's committed state
// pinned, by job name.
func pinnedSnapshots(st catalog.State) map[string]int64 {
	out := map[string]int64{}
	if st.HasParts {
		for _, r := range st.Parts.Upstream {
			out[r.Job] = r.Snapshot
		}
	}
	return out
}

// changesBatch names the batch of an apply run over upstream changes from
// the ranges it pinned ("upstream:a:0-3,b:2-4", sorted by job), and derives
// its ledger digest from the refs it starts from and the refs it pinned.
// A run in which no upstream moved is marked unchanged (it skips).
func changesBatch(p *Prepared, up *source.Upstream, st catalog.State, refs []jobkey.UpstreamRef) {
	ranges := up.Ranges()
	names := make([]string, len(ranges))
	p.unchanged = st.HasParts
	for i, r := range ranges {
		names[i] = r.String()
		if r.From != r.To {
			p.unchanged = false
		}
	}
	p.batchID = "upstream:" + strings.Join(names, ",")
	from := []jobkey.UpstreamRef{}
	if st.HasParts && st.Parts.Upstream != nil {
		from = st.Parts.Upstream
	}
	p.digest = pipeline.DigestString(string(jobkey.CanonicalJSON(map[string]any{
		"from": from, "to": refs,
	})))
}

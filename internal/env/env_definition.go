// Promote's check of the definition: the job file promote runs must be
// the one the environment was built from, part by part.

package env

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
	"github.com/idem-dev/idem/internal/report"
)

// checkDefinition refuses (exit 3) a promote of job j whose definition now
// (transform, config and schema of its key, now) is not the one
// environment env built its snapshot from (built): the rows reviewed in
// the environment would be committed under another job key and model
// text, and run and plan would then see nothing to do. The input part is
// not compared: promote pins other upstream snapshots than the
// environment's build by design.
func checkDefinition(env *Environment, j *job.Job, built, now jobkey.Parts) error {
	changed := definitionChanges(j, built, now)
	if len(changed) == 0 {
		return nil
	}
	return report.Refuse("environment", "job %s changed since environment %s was built from it: %s; nothing promoted: run --env %s again and review its diff, or restore the job's files",
		j.Name, env.Name, strings.Join(changed, "; "), env.Name)
}

// checkFileDefinition is checkDefinition before any run, for the parts
// the job's files give alone: its transform, its config (read with the
// input format the environment recorded) and, but for a model (whose
// schema part is its result's columns), its schema. The environment's
// state row is read through q (production, the environment attached).
func checkFileDefinition(ctx context.Context, q catalog.Querier, env *Environment, e Job, j *job.Job) error {
	est, err := catalog.ReadStateIn(ctx, q, EnvironmentCatalog, e.Job)
	if err != nil || !est.HasParts {
		return err
	}
	return checkDefinition(env, j, est.Parts, fileParts(j, est.Parts))
}

// fileParts are built's parts with what j's files give in place: its
// transform, its config (read with the input format built recorded) and,
// but for a model (whose schema part is its result's columns), its
// schema.
func fileParts(j *job.Job, built jobkey.Parts) jobkey.Parts {
	now := built
	now.Transform = j.TransformPart()
	format, _ := built.Config["format"].(string)
	now.Config = j.Config(format)
	if !j.IsModel() {
		now.Schema = j.SchemaPart()
	}
	return now
}

// definitionChanges names what differs between the transform, config and
// schema parts of built and now, as a reader of the job's files would
// say it: the model's SQL, a param, the schema version.
func definitionChanges(j *job.Job, built, now jobkey.Parts) []string {
	var out []string
	bt, nt := built.Transform, now.Transform
	switch {
	case bt.Pipeline != nt.Pipeline:
		out = append(out, fmt.Sprintf("pipeline (built from %s, now %s)", bt.Pipeline, nt.Pipeline))
	case bt.Version != nt.Version:
		out = append(out, fmt.Sprintf("transform_version (built from %d, now %d)", bt.Version, nt.Version))
	case bt.SHA256 != nt.SHA256 && j.IsModel():
		out = append(out, fmt.Sprintf("model SQL %s (built from sha256 %s, now %s)", j.ModelFile, report.Short(bt.SHA256), report.Short(nt.SHA256)))
	case bt.SHA256 != nt.SHA256:
		out = append(out, fmt.Sprintf("transform SQL of pipeline %s v%d (built from sha256 %s, now %s)", nt.Pipeline, nt.Version, report.Short(bt.SHA256), report.Short(nt.SHA256)))
	}
	out = append(out, configChanges(built.Config, now.Config)...)
	bs, ns := built.Schema, now.Schema
	switch {
	case bs.Version != ns.Version:
		out = append(out, fmt.Sprintf("schema_version (built from %d, now %d)", bs.Version, ns.Version))
	case bs.SHA256 != ns.SHA256 && j.IsModel():
		out = append(out, "the model's result columns")
	case bs.SHA256 != ns.SHA256:
		out = append(out, fmt.Sprintf("schema DDL v%d (built from sha256 %s, now %s)", ns.Version, report.Short(bs.SHA256), report.Short(ns.SHA256)))
	}
	return out
}

// configChanges names the entries of the config part that differ: each
// param by name, any other entry (target, format, rules ...) as config.
func configChanges(built, now map[string]any) []string {
	var out []string
	for _, k := range unionKeys(built, now) {
		b, n := built[k], now[k]
		if k == "params" {
			bp, _ := b.(map[string]any)
			np, _ := n.(map[string]any)
			for _, p := range unionKeys(bp, np) {
				if !sameValue(bp[p], np[p]) {
					out = append(out, fmt.Sprintf("param %s (built from %s, now %s)", p, valueText(bp, p), valueText(np, p)))
				}
			}
			continue
		}
		if !sameValue(b, n) {
			out = append(out, fmt.Sprintf("config %s (built from %s, now %s)", k, valueText(built, k), valueText(now, k)))
		}
	}
	return out
}

func unionKeys(a, b map[string]any) []string {
	keys := report.SortedKeys(a)
	for _, k := range report.SortedKeys(b) {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// sameValue compares two values of a key part as its key does: by their
// canonical JSON (an int and the float64 read back from JSON are equal).
func sameValue(a, b any) bool {
	return string(jobkey.CanonicalJSON(a)) == string(jobkey.CanonicalJSON(b))
}

func valueText(m map[string]any, k string) string {
	v, ok := m[k]
	if !ok {
		return "absent"
	}
	s := string(jobkey.CanonicalJSON(v))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

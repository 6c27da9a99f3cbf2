package jobkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// Part names of a job key.
const (
	PartInput     = "input"
	PartTransform = "transform"
	PartConfig    = "config"
	PartSchema    = "schema"
)

// Parts are the four parts of a job key: input (the sha256 of the input
// bytes, or of the sorted list of file digests for several files, with the
// upstream snapshots and partitions a run read), transform, config and
// schema. The key is the sha256 of their canonical JSON (docs/concepts.md, Words), so
// a field or JSON tag renamed here changes every job's key and reloads every
// job: internal/job/key_golden_test.go pins the parts of every kind of job.
type Parts struct {
	Input string `json:"input"`
	// Upstream is the rest of the input part for a job that reads other
	// jobs: each upstream's pinned snapshot and its job key, by job name.
	// Absent for jobs that read only files, so their keys are unchanged.
	Upstream []UpstreamRef `json:"upstream,omitempty"`
	// Partitions is the rest of the input part for a run of a partitioned
	// job given --partitions: the declared partitions, sorted. Absent
	// otherwise, so other keys are unchanged.
	Partitions []string       `json:"partitions,omitempty"`
	Transform  TransformPart  `json:"transform"`
	Config     map[string]any `json:"config"`
	Schema     SchemaPart     `json:"schema"`
}

// TransformPart names the pipeline, the transform version and its files' sha256.
type TransformPart struct {
	Pipeline string `json:"pipeline"`
	Version  int    `json:"version"`
	SHA256   string `json:"sha256"`
}

// SchemaPart names the schema version and its DDL's sha256.
type SchemaPart struct {
	Version int    `json:"version"`
	SHA256  string `json:"sha256"`
}

// CanonicalJSON encodes v with sorted keys, no spaces and no HTML escaping.
func CanonicalJSON(v any) []byte {
	// Round-trip through a generic value so every object's keys are sorted.
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain data reaches here
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		panic(err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		panic(err)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// Key is the job key: sha256 over the canonical JSON of the parts.
func (p Parts) Key() string {
	sum := sha256.Sum256(CanonicalJSON(p))
	return hex.EncodeToString(sum[:])
}

// JSON is the parts' canonical JSON, as stored in the state row.
func (p Parts) JSON() string { return string(CanonicalJSON(p)) }

// Changed lists the parts that differ from old, in a fixed order.
func (p Parts) Changed(old Parts) []string {
	var out []string
	if p.Input != old.Input || !slices.Equal(p.Upstream, old.Upstream) || !slices.Equal(p.Partitions, old.Partitions) {
		out = append(out, PartInput)
	}
	if p.Transform != old.Transform {
		out = append(out, PartTransform)
	}
	if !bytes.Equal(CanonicalJSON(p.Config), CanonicalJSON(old.Config)) {
		out = append(out, PartConfig)
	}
	if p.Schema != old.Schema {
		out = append(out, PartSchema)
	}
	return out
}

func ParseParts(s string) (Parts, error) {
	var p Parts
	err := json.Unmarshal([]byte(s), &p)
	return p, err
}

// UpstreamRef is one upstream input in the input part of a job key: the
// upstream job, the snapshot of it this run pinned, and that snapshot's job
// key. A run whose upstreams all name the snapshots its state row pinned
// reads the same rows again.
type UpstreamRef struct {
	Job      string `json:"job"`
	Snapshot int64  `json:"snapshot"`
	JobKey   string `json:"job_key"`
}

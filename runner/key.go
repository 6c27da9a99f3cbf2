package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"sort"
)

// Part names of a job key.
const (
	PartInput     = "input"
	PartTransform = "transform"
	PartConfig    = "config"
	PartSchema    = "schema"
)

// Parts are the four parts of a job key (SPEC section 1).
type Parts struct {
	Input     string         `json:"input"`
	Transform TransformPart  `json:"transform"`
	Config    map[string]any `json:"config"`
	Schema    SchemaPart     `json:"schema"`
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

// transformPart is the transform part of job's key. Run, plan and rerun
// all compute it here, so a rerun checks exactly what a run recorded.
func (j *Job) transformPart() TransformPart {
	return TransformPart{Pipeline: j.Pipeline.Name, Version: j.TransformVersion, SHA256: StepsDigest(j.Steps)}
}

// schemaPart is the schema part of job's key (see schemaDigest: a generic
// pipeline's DDL is hashed as expanded with the job's columns). Run, plan
// and rerun all compute it here.
func (j *Job) schemaPart() SchemaPart {
	return SchemaPart{Version: j.SchemaVersion, SHA256: j.schemaDigest()}
}

// canonicalJSON encodes v with sorted keys, no spaces and no HTML escaping.
func canonicalJSON(v any) []byte {
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
	sum := sha256.Sum256(canonicalJSON(p))
	return hex.EncodeToString(sum[:])
}

// JSON is the parts' canonical JSON, as stored in the state row.
func (p Parts) JSON() string { return string(canonicalJSON(p)) }

// Changed lists the parts that differ from old, in a fixed order.
func (p Parts) Changed(old Parts) []string {
	var out []string
	if p.Input != old.Input {
		out = append(out, PartInput)
	}
	if p.Transform != old.Transform {
		out = append(out, PartTransform)
	}
	if !bytes.Equal(canonicalJSON(p.Config), canonicalJSON(old.Config)) {
		out = append(out, PartConfig)
	}
	if p.Schema != old.Schema {
		out = append(out, PartSchema)
	}
	return out
}

func parseParts(s string) (Parts, error) {
	var p Parts
	err := json.Unmarshal([]byte(s), &p)
	return p, err
}

// inputDigest is the input part: the sha256 of the bytes of one file, or of
// the canonical JSON list of the sorted file digests for several.
func inputDigest(files []InputFile) string {
	if len(files) == 1 {
		return files[0].SHA256
	}
	digests := make([]string, len(files))
	for i, f := range files {
		digests[i] = f.SHA256
	}
	sort.Strings(digests)
	sum := sha256.Sum256(canonicalJSON(digests))
	return hex.EncodeToString(sum[:])
}

func equalJSON(a, b any) bool {
	return reflect.DeepEqual(canonicalJSON(a), canonicalJSON(b))
}

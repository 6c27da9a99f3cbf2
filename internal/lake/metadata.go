package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Metadata is the part of an Iceberg table metadata file that a read
// needs.
type Metadata struct {
	FormatVersion   int        `json:"format-version"`
	TableUUID       string     `json:"table-uuid"`
	Location        string     `json:"location"`
	CurrentSchemaID int        `json:"current-schema-id"`
	Schemas         []Schema   `json:"schemas"`
	OldSchema       *Schema    `json:"schema"` // format v1
	DefaultSpecID   int        `json:"default-spec-id"`
	Specs           []Spec     `json:"partition-specs"`
	CurrentSnapshot *int64     `json:"current-snapshot-id"`
	Snapshots       []Snapshot `json:"snapshots"`

	// File is where the metadata was read from.
	File string `json:"-"`
}

// Schema is one schema of the table: its top-level fields.
type Schema struct {
	ID     int     `json:"schema-id"`
	Fields []Field `json:"fields"`
}

// Field is a top-level field of a schema. Type is the Iceberg type as the
// metadata writes it: a string for a primitive, an object for a struct,
// list or map (which idem does not read).
type Field struct {
	ID       int             `json:"id"`
	Name     string          `json:"name"`
	Required bool            `json:"required"`
	Type     json.RawMessage `json:"type"`
}

// Spec is a partition spec.
type Spec struct {
	ID     int         `json:"spec-id"`
	Fields []SpecField `json:"fields"`
}

// SpecField is one partition field of a spec.
type SpecField struct {
	Name      string `json:"name"`
	Transform string `json:"transform"`
	SourceID  int    `json:"source-id"`
	FieldID   int    `json:"field-id"`
}

// Snapshot is one snapshot of the table.
type Snapshot struct {
	ID           int64             `json:"snapshot-id"`
	Parent       *int64            `json:"parent-snapshot-id"`
	Sequence     int64             `json:"sequence-number"`
	TimestampMS  int64             `json:"timestamp-ms"`
	ManifestList string            `json:"manifest-list"`
	Manifests    []string          `json:"manifests"` // format v1 without a manifest list
	Summary      map[string]string `json:"summary"`
	SchemaID     *int              `json:"schema-id"`
}

// Operation is the snapshot's summary operation (append, overwrite,
// delete, replace).
func (s *Snapshot) Operation() string { return s.Summary["operation"] }

// ReadMetadata reads the table metadata file at location.
func ReadMetadata(ctx context.Context, st Store, location string) (*Metadata, error) {
	f, err := st.Open(ctx, location)
	if err != nil {
		return nil, fmt.Errorf("read iceberg metadata %s: %w", location, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read iceberg metadata %s: %w", location, err)
	}
	var m Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read iceberg metadata %s: %w", location, err)
	}
	m.File = location
	if m.FormatVersion < 1 || m.FormatVersion > 2 {
		return nil, fmt.Errorf("iceberg metadata %s: format version %d: idem reads Iceberg format versions 1 and 2", location, m.FormatVersion)
	}
	if m.TableUUID == "" {
		return nil, fmt.Errorf("iceberg metadata %s: no table-uuid", location)
	}
	if len(m.Schemas) == 0 && m.OldSchema != nil {
		m.Schemas = []Schema{*m.OldSchema}
		m.CurrentSchemaID = m.OldSchema.ID
	}
	return &m, nil
}

// Current is the table's current snapshot, nil for a table without one.
func (m *Metadata) Current() *Snapshot {
	if m.CurrentSnapshot == nil || *m.CurrentSnapshot == -1 {
		return nil
	}
	return m.Snapshot(*m.CurrentSnapshot)
}

// Snapshot is the snapshot id, nil when the metadata does not hold it
// (never there, or expired).
func (m *Metadata) Snapshot(id int64) *Snapshot {
	for i := range m.Snapshots {
		if m.Snapshots[i].ID == id {
			return &m.Snapshots[i]
		}
	}
	return nil
}

// SchemaOf is the schema snapshot s was written with (the current one when
// the snapshot does not say).
func (m *Metadata) SchemaOf(s *Snapshot) (*Schema, error) {
	id := m.CurrentSchemaID
	if s != nil && s.SchemaID != nil {
		id = *s.SchemaID
	}
	for i := range m.Schemas {
		if m.Schemas[i].ID == id {
			return &m.Schemas[i], nil
		}
	}
	return nil, fmt.Errorf("iceberg metadata %s: no schema %d", m.File, id)
}

// Spec is partition spec id.
func (m *Metadata) Spec(id int) *Spec {
	for i := range m.Specs {
		if m.Specs[i].ID == id {
			return &m.Specs[i]
		}
	}
	return nil
}

// Ancestors lists the snapshots from id back through its parents, id
// first, stopping before stop (excluded; it may be expired already) or at
// the oldest one the metadata holds. found says whether stop was reached.
func (m *Metadata) Ancestors(id, stop int64) (chain []*Snapshot, found bool) {
	seen := map[int64]bool{}
	for s := m.Snapshot(id); s != nil && !seen[s.ID]; s = m.Snapshot(*s.Parent) {
		if s.ID == stop {
			return chain, true
		}
		seen[s.ID] = true
		chain = append(chain, s)
		if s.Parent == nil {
			return chain, false
		}
		if *s.Parent == stop {
			return chain, true
		}
	}
	return chain, false
}

// metadataName matches the metadata file names writers use: v3.metadata.json
// (Hadoop tables) and 00003-<uuid>.metadata.json (catalogs), optionally
// compressed (.gz.metadata.json is refused below).
var metadataName = regexp.MustCompile(`^(?:v(\d+)|(\d+)-[0-9a-fA-F-]+)\.metadata\.json$`)

// ErrNoMetadata is returned by LatestMetadata for a folder without a
// metadata file.
var ErrNoMetadata = errors.New("no iceberg metadata file")

// LatestMetadata finds the newest metadata file of the table at location
// (its folder, holding metadata/): the one version-hint.text names, or
// else the highest numbered one.
func LatestMetadata(ctx context.Context, st Store, location string) (string, error) {
	dir := strings.TrimSuffix(location, "/") + "/metadata"
	if f, err := st.Open(ctx, dir+"/version-hint.text"); err == nil {
		data, err := io.ReadAll(f)
		f.Close()
		if err == nil {
			hint := strings.TrimSpace(string(data))
			if _, err := strconv.Atoi(hint); err == nil {
				return dir + "/v" + hint + ".metadata.json", nil
			}
		}
	}
	names, err := st.List(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("iceberg table %s: %w", location, err)
	}
	best, bestN := "", int64(-1)
	for _, n := range names {
		sm := metadataName.FindStringSubmatch(n)
		if sm == nil {
			continue
		}
		num := sm[1] + sm[2]
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			continue
		}
		if v > bestN || (v == bestN && n > best) {
			best, bestN = n, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("iceberg table %s: %w in %s", location, ErrNoMetadata, dir)
	}
	return dir + "/" + best, nil
}

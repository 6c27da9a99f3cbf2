package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/avro/ocf"
)

// Content kinds of a data file entry (the manifest's data_file.content).
const (
	ContentData        = 0
	ContentPosDeletes  = 1
	ContentEqDeletes   = 2
	entryStatusDeleted = 2
)

// File is a data or delete file live in a snapshot.
type File struct {
	Location string
	Content  int
	Format   string // PARQUET, AVRO, ORC, PUFFIN as written
	Records  int64
	// Sequence is the file's data sequence number: a position delete
	// applies to data files of a lower or equal one, an equality delete to
	// data files of a strictly lower one.
	Sequence int64
	SpecID   int
	// Partition is the partition tuple as canonical JSON ("{}" unpartitioned).
	Partition   string
	EqualityIDs []int
	// Snapshot is the snapshot that added the file.
	Snapshot int64
}

// record is an Avro record of a manifest list or manifest, decoded
// generically: writers differ in the fields they add and in their record
// names, and format v1 leaves out content and sequence numbers.
type record map[string]any

// int64 is field name as a number; ok is false when it is absent or null.
func (r record) int64(name string) (int64, bool) {
	switch v := r[name].(type) {
	case int32:
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

func (r record) str(name string) string {
	s, _ := r[name].(string)
	return s
}

func (r record) rec(name string) record {
	m, _ := r[name].(map[string]any)
	return m
}

// readAvro decodes every record of the Avro container file at location
// with decode.
func readAvro(ctx context.Context, st Store, location string, decode func(r *ocf.Reader) error) error {
	f, err := st.Open(ctx, location)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := ocf.NewReader(f)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := decode(r); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// LiveFiles lists the data and delete files live in snapshot s: every
// entry of its manifests that is not a deletion, in manifest then entry
// order, with sequence numbers and snapshot ids inherited from the
// manifest where the entry leaves them out.
func LiveFiles(ctx context.Context, st Store, m *Metadata, s *Snapshot) ([]File, error) {
	if s.ManifestList == "" {
		return nil, fmt.Errorf("iceberg snapshot %d of %s lists its manifests inline (format v1 without a manifest list): not supported", s.ID, m.File)
	}
	var manifests []record
	err := readAvro(ctx, st, s.ManifestList, func(r *ocf.Reader) error {
		var mf map[string]any
		if err := r.Decode(&mf); err != nil {
			return err
		}
		manifests = append(manifests, mf)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read iceberg manifest list %s of snapshot %d: %w", s.ManifestList, s.ID, err)
	}
	var files []File
	for _, mf := range manifests {
		path := mf.str("manifest_path")
		spec, _ := mf.int64("partition_spec_id")
		mcontent, _ := mf.int64("content")
		mseq, _ := mf.int64("sequence_number")
		msnap, _ := mf.int64("added_snapshot_id")
		err := readAvro(ctx, st, path, func(r *ocf.Reader) error {
			var e record
			if err := r.Decode(&e); err != nil {
				return err
			}
			if status, _ := e.int64("status"); status == entryStatusDeleted {
				return nil
			}
			df := e.rec("data_file")
			content, _ := df.int64("content")
			count, _ := df.int64("record_count")
			f := File{Location: df.str("file_path"), Content: int(content), Format: strings.ToUpper(df.str("file_format")),
				Records: count, SpecID: int(spec), Sequence: mseq, Snapshot: msnap}
			if v, ok := e.int64("sequence_number"); ok {
				f.Sequence = v
			}
			if v, ok := e.int64("snapshot_id"); ok {
				f.Snapshot = v
			}
			if mcontent == 0 && f.Content != ContentData {
				return fmt.Errorf("entry %s: a delete file in a data manifest", f.Location)
			}
			ids, _ := df["equality_ids"].([]any)
			for _, id := range ids {
				switch v := id.(type) {
				case int32:
					f.EqualityIDs = append(f.EqualityIDs, int(v))
				case int64:
					f.EqualityIDs = append(f.EqualityIDs, int(v))
				}
			}
			part, err := canonical(df.rec("partition"))
			if err != nil {
				return fmt.Errorf("entry %s: partition: %w", f.Location, err)
			}
			f.Partition = part
			files = append(files, f)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read iceberg manifest %s of snapshot %d: %w", path, s.ID, err)
		}
	}
	return files, nil
}

// canonical is v as JSON with sorted keys ("{}" for nil).
func canonical(v map[string]any) (string, error) {
	if len(v) == 0 {
		return "{}", nil
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, _ := json.Marshal(k)
		vj, err := json.Marshal(v[k])
		if err != nil {
			return "", err
		}
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	return b.String(), nil
}

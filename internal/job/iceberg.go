package job

import (
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/idem-dev/idem/internal/jobfs"
	"github.com/idem-dev/idem/internal/pipeline"
)

// Iceberg reads of [input] iceberg = { read = ... }.
const (
	// IcebergReadSnapshot reads the whole table at its current snapshot
	// (the default): the snapshot is the input part of the key.
	IcebergReadSnapshot = "snapshot"
	// IcebergReadAppends, for an apply pipeline, reads the rows appended
	// since the lake snapshot the job committed last, exactly once: the
	// lake snapshot reached commits with the rows (idem.positions).
	IcebergReadAppends = "appends"
)

// IcebergSpec is [input] iceberg: an Apache Iceberg table read at a
// snapshot. The table is found by exactly one of Location (the table's
// folder, holding metadata/), Metadata (one metadata file) or Catalog and
// Table (a SQL catalog's iceberg_tables row). Where the table is found is
// not part of the job key: the table's UUID and the snapshot read are, in
// the input part.
type IcebergSpec struct {
	Location string
	Metadata string
	Catalog  string
	Table    string // namespace.table in Catalog
	// CatalogName is the catalog_name of the table's row, when the SQL
	// catalog's tables hold several catalogs.
	CatalogName string
	Read        string // IcebergReadSnapshot or IcebergReadAppends
}

type icebergTable struct {
	Location    string `toml:"location"`
	Metadata    string `toml:"metadata"`
	Catalog     string `toml:"catalog"`
	Table       string `toml:"table"`
	CatalogName string `toml:"catalog_name"`
	Read        string `toml:"read"`
}

// ReadsIceberg says whether the job reads an Iceberg table.
func (j *Job) ReadsIceberg() bool { return j.Input.Iceberg != nil }

// applyIceberg validates [input] iceberg; paths resolve from the job
// file's folder. Errors are *JobFileError naming the key.
func (j *Job) applyIceberg(data []byte, md toml.MetaData, jf *jobFile) error {
	ice := jf.Input.Iceberg
	if ice == nil {
		return nil
	}
	bad := jobfs.KeyErrors(j.File, data)
	in := jf.Input
	n := 0
	for _, set := range []bool{ice.Location != "", ice.Metadata != "", ice.Catalog != "" || ice.Table != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return bad("input.iceberg", "name the table once: location = \"path/to/table\" (its folder), metadata = \"path/to/vN.metadata.json\", or catalog = \"...\" with table = \"namespace.table\"")
	}
	if (ice.Catalog == "") != (ice.Table == "") {
		return bad("input.iceberg", "catalog and table go together: catalog = \"path/to/catalog.db\" or \"postgres://...\", table = \"namespace.table\"")
	}
	if ice.CatalogName != "" && ice.Catalog == "" {
		return bad("input.iceberg", "catalog_name names a catalog of catalog = \"...\"")
	}
	if ice.Table != "" && !strings.Contains(ice.Table, ".") {
		return bad("input.iceberg", "table = %q: write namespace.table", ice.Table)
	}
	spec := &IcebergSpec{Read: IcebergReadSnapshot, Table: ice.Table, CatalogName: ice.CatalogName}
	dir := filepath.Dir(j.File)
	spec.Location = resolveLakePath(dir, ice.Location)
	spec.Metadata = resolveLakePath(dir, ice.Metadata)
	spec.Catalog = ice.Catalog
	if ice.Catalog != "" && !strings.HasPrefix(ice.Catalog, "postgres://") && !strings.HasPrefix(ice.Catalog, "postgresql://") {
		spec.Catalog = resolveLakePath(dir, ice.Catalog)
	}
	switch ice.Read {
	case "", IcebergReadSnapshot:
	case IcebergReadAppends:
		if j.Pipeline.Mode != pipeline.ModeApply {
			return bad("input.iceberg", "read = %q feeds an apply pipeline (each batch the rows appended since the last); %s is a %s pipeline: read the whole snapshot (read = %q)", IcebergReadAppends, j.Pipeline.Name, j.Pipeline.Mode, IcebergReadSnapshot)
		}
		spec.Read = IcebergReadAppends
	default:
		return bad("input.iceberg", "read must be %q or %q (got %q)", IcebergReadSnapshot, IcebergReadAppends, ice.Read)
	}
	switch {
	case j.Pipeline.Model:
		return bad("input.iceberg", "pipeline %s is a model over upstream jobs: read the Iceberg table in a job with input columns, and that job as {{upstream:NAME}}", j.Pipeline.Name)
	case in.Path != "":
		return bad("input.path", "an Iceberg input reads its table, not files: remove path")
	case len(in.Upstream) > 0:
		return bad("input.upstream", "an Iceberg input and upstream jobs do not combine")
	case in.Kind != "":
		return bad("input.kind", "an Iceberg input and a stream do not combine")
	case in.Mode != "":
		return bad("input.mode", "an Iceberg input and mode = %q do not combine", in.Mode)
	case md.IsDefined("input", "chunk_rows") || in.Watermark != "":
		return bad("input.chunk_rows", "an Iceberg input is read a snapshot at a time; chunk_rows does not apply")
	case in.Format != "" && in.Format != FormatIceberg:
		return bad("input.format", "an Iceberg input's files are the table's: remove format")
	}
	j.Input.Iceberg = spec
	j.Input.Format = FormatIceberg
	return nil
}

// FormatIceberg is the input format recorded for an Iceberg input.
const FormatIceberg = "iceberg"

// resolveLakePath resolves a path of [input] iceberg from the job file's
// folder; a URL (file://, s3://) is kept.
func resolveLakePath(dir, p string) string {
	if p == "" || strings.Contains(p, "://") {
		return p
	}
	return resolveJobPath(dir, p)
}

// icebergConfig is the Iceberg part of the config part: how the table is
// read. The table's identity and snapshot are the input part.
func (j *Job) icebergConfig(c map[string]any) {
	if j.Input.Iceberg != nil {
		c["iceberg"] = map[string]any{"read": j.Input.Iceberg.Read}
	}
}

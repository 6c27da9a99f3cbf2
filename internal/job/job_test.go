package job_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/pipeline"
	"github.com/idem-dev/idem/internal/report"
	"github.com/idem-dev/idem/pipelines"
)

// The heads of job files for each built-in pipeline, completed by each case.
const (
	sampleHead = "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n"
	vcHead     = "name = \"vc\"\npipeline = \"versioned_changes\"\ntransform_version = 1\nschema_version = 1\n"
	mergeHead  = "name = \"m\"\npipeline = \"merge_by_key\"\ntransform_version = 1\nschema_version = 1\n"
	pHead      = "name = \"j\"\npipeline = \"p\"\ntransform_version = 1\nschema_version = 1\n"
	applyPipe  = "name = \"p\"\nmode = \"apply\"\nkey = [\"id\"]\ncolumns = [{ name = \"id\", type = \"BIGINT\" }, { name = \"v\", type = \"BIGINT\" }, { name = \"operation\", type = \"VARCHAR\" }]\n"
	mergeCols  = "[input.columns]\nid = \"BIGINT\"\nv = \"BIGINT\"\nname = \"VARCHAR\"\n"
)

// loadJobText writes text as job.toml (and files, path → text) in a new
// folder and loads it with the built-in pipelines. The error's text is
// returned with the folder cut, "" when the job loads.
func loadJobText(t *testing.T, text string, files map[string]string) (*job.Job, string) {
	t.Helper()
	all := map[string]string{"job.toml": text}
	for p, s := range files {
		all[p] = s
	}
	dir := writeTree(t, all)
	j, err := job.LoadJob(filepath.Join(dir, "job.toml"), pipelines.FS)
	if err != nil {
		var jfe *report.JobFileError
		require.True(t, errors.As(err, &jfe), "a *JobFileError: %v", err)
		require.Equal(t, report.ExitUsage, report.ExitCode(err))
		return nil, strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
	}
	return j, ""
}

// TestLoadJobErrors: every refusal of a job file names the file, the line
// and the key, with a message that says what to write.
func TestLoadJobErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text string
		files      map[string]string
		want       string
	}{
		{"toml syntax", "name = \"x\nbad", nil, "job.toml:1: name: strings cannot contain newlines"},
		{"unknown key", sampleHead + "colour = 1\n", nil, "job.toml:5: colour: unknown key"},
		{"unknown key in a table", sampleHead + "[input]\npth = \"a.csv\"\n", nil, "job.toml:6: input.pth: unknown key"},
		{"missing name", "pipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n", nil, "job.toml: name: missing required key"},
		{"missing pipeline", "name = \"s\"\ntransform_version = 1\nschema_version = 1\n", nil, "job.toml: pipeline: missing required key"},
		{"missing transform_version", "name = \"s\"\npipeline = \"sample\"\nschema_version = 1\n", nil, "job.toml: transform_version: missing required key"},
		{"missing schema_version", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\n", nil, "job.toml: schema_version: missing required key"},
		{"bad name", "name = \"1x\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 1\n", nil, `job.toml:1: name: must be letters, digits and underscores, starting with a letter (got "1x")`},
		{"transform_version zero", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 0\nschema_version = 1\n", nil, "job.toml:3: transform_version: must be a positive integer"},
		{"schema_version zero", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 0\n", nil, "job.toml:4: schema_version: must be a positive integer"},
		{"bad table", sampleHead + "[target]\ntable = \"a-b\"\n", nil, `job.toml:6: target.table: must be a table name of letters, digits and underscores, starting with a letter (got "a-b")`},
		{"idem table", sampleHead + "[target]\ntable = \"IDEM_x\"\n", nil, "job.toml:6: target.table: names starting with idem are reserved"},
		{"format", sampleHead + "[input]\nformat = \"xml\"\n", nil, `job.toml:6: input.format: must be csv, jsonl or parquet (got "xml")`},
		{"extra_columns", sampleHead + "[input]\nextra_columns = \"drop\"\n", nil, `job.toml:6: input.extra_columns: must be "error" or "ignore" (got "drop")`},
		{"fencing", sampleHead + "[job]\nfencing = \"maybe\"\n", nil, `job.toml:6: job.fencing: must be "optional" or "required" (got "maybe")`},
		{"keep_snapshots", sampleHead + "[retention]\nkeep_snapshots = 0\n", nil, "job.toml:6: retention.keep_snapshots: must be a positive integer (got 0)"},
		{"checkpoint_every", sampleHead + "[retention]\ncheckpoint_every = -1\n", nil, "job.toml:6: retention.checkpoint_every: must be a positive integer (got -1)"},
		{"threads", sampleHead + "[duckdb]\nthreads = 5000\n", nil, "job.toml:6: duckdb.threads: must be a positive integer of at most 1024 (got 5000)"},
		{"bad tag", "tags = [\"a b\"]\n" + sampleHead, nil, `job.toml:1: tags: tag "a b": want letters, digits, _, - and . (starting with a letter or digit)`},
		{"tag twice", "tags = [\"mart\", \"mart\"]\n" + sampleHead, nil, "job.toml:1: tags: tag mart is named twice"},
		{"no such pipeline", "name = \"s\"\npipeline = \"nope\"\ntransform_version = 1\nschema_version = 1\n", nil, `job.toml:2: pipeline: no built-in pipeline named "nope" (built-ins: merge_by_key, orders, sample, select, versioned_changes) and no folder nope with a pipeline.toml (nope is read from the job file's folder)`},
		{"no transform version", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 9\nschema_version = 1\n", nil, "job.toml:3: transform_version: pipeline sample has no transform version 9 (present: v1, v2): file does not exist"},
		{"no schema version", "name = \"s\"\npipeline = \"sample\"\ntransform_version = 1\nschema_version = 9\n", nil, "job.toml:4: schema_version: pipeline sample has no schema version 9 (present: v1, v2): file does not exist"},
		{"transform for a pipeline", sampleHead + "[transform]\nsql = \"m\"\n", nil, `job.toml:5: transform: [transform] sql names a model folder; pipeline sample is not a model pipeline (pipeline = "select")`},
		{"undeclared param", sampleHead + "[params]\nsize = 3\n", nil, "job.toml:6: params.size: pipeline sample does not declare this parameter (declared: cap, licenses)"},
		{"param type", sampleHead + "[params]\ncap = \"many\"\n", nil, `job.toml:6: params.cap: want integer, found a string "many"`},
		{"partition_by name", sampleHead + "[target]\npartition_by = \"a b\"\n", nil, `job.toml:6: target.partition_by: must be a column name of letters, digits and underscores (got "a b")`},
		{"partition_by apply", vcHead + "[target]\npartition_by = \"entity_id\"\n", nil, "job.toml:6: target.partition_by: partitions are replaced by refresh pipelines; pipeline versioned_changes is an apply pipeline"},
		{"columns of a built-in", vcHead + mergeCols, nil, "job.toml:5: input.columns: pipeline versioned_changes declares its own input columns"},
		{"key of a built-in", vcHead + "[target]\nkey = [\"x\"]\n", nil, "job.toml:6: target.key: pipeline versioned_changes declares its own key"},
		{"order_by of a built-in", vcHead + "[target]\norder_by = \"x\"\n", nil, "job.toml:6: target.order_by: pipeline versioned_changes declares its own ordering"},
		{"generic without columns", mergeHead + "[target]\nkey = [\"id\"]\n", nil, `job.toml: input.columns: pipeline merge_by_key takes its input columns from the job: add [input.columns] name = "TYPE"`},
		{"generic column name", mergeHead + "[input.columns]\n\"a-b\" = \"BIGINT\"\n", nil, `job.toml:6: input.columns.a-b: column name "a-b" must be letters, digits and underscores, starting with a letter`},
		{"generic reserved column", mergeHead + "[input.columns]\nidem_x = \"BIGINT\"\n", nil, "job.toml:6: input.columns.idem_x: column names starting with _ or idem are reserved"},
		{"generic column type", mergeHead + "[input.columns]\nx = \"JSON\"\n", nil, `job.toml:6: input.columns.x: type "JSON" is not one idem accepts (one of BIGINT, BLOB, BOOLEAN, DATE, DOUBLE, FLOAT, HUGEINT, INTEGER, INTERVAL, SMALLINT, TIME, TIMESTAMP, TINYINT, UBIGINT, UINTEGER, USMALLINT, UTINYINT, UUID, VARCHAR, or DECIMAL(p,s))`},
		{"generic without key", mergeHead + mergeCols + "[target]\norder_by = \"v\"\n", nil, `job.toml:9: target.key: pipeline merge_by_key needs the key columns: add key = ["..."] to [target] (rows would double on replay)`},
		{"generic key not a column", mergeHead + mergeCols + "[target]\nkey = [\"x\"]\n", nil, `job.toml:10: target.key: key column "x" is not one of [input.columns]`},
		{"generic key twice", mergeHead + mergeCols + "[target]\nkey = [\"id\", \"id\"]\n", nil, `job.toml:10: target.key: key column "id" is named twice`},
		{"generic order not a column", mergeHead + mergeCols + "[target]\nkey = [\"id\"]\norder_by = \"x\"\n", nil, `job.toml:11: target.order_by: ordering column "x" is not one of [input.columns]`},
		{"generic order is key", mergeHead + mergeCols + "[target]\nkey = [\"id\"]\norder_by = \"id\"\n", nil, `job.toml:11: target.order_by: ordering column "id" is a key column`},
		{"generic no payload", mergeHead + "[input.columns]\nid = \"BIGINT\"\nv = \"BIGINT\"\n[target]\nkey = [\"id\"]\norder_by = \"v\"\n", nil, "job.toml:5: input.columns: declare at least one column besides the key and the ordering column"},
		{"batch without files mode", vcHead + "[input]\nbatch = \"all\"\n", nil, `job.toml:6: input.batch: batch applies to mode = "files"`},
		{"files mode refresh", sampleHead + "[input]\nmode = \"files\"\n", nil, `job.toml:6: input.mode: mode = "files" needs an apply pipeline; sample is a refresh pipeline`},
		{"files mode batch", vcHead + "[input]\nmode = \"files\"\nbatch = \"some\"\n", nil, `job.toml:7: input.batch: must be "per_file" or "all" (got "some")`},
		{"mode", vcHead + "[input]\nmode = \"dirs\"\n", nil, `job.toml:6: input.mode: must be "files", "replace" or absent (got "dirs")`},
		{"replace on a built-in pipeline", vcHead + "[input]\nmode = \"replace\"\n", nil, `job.toml:6: input.mode: mode = "replace" takes a generic apply pipeline such as merge_by_key, not versioned_changes`},
		{"chunk_rows zero", vcHead + "[input]\nchunk_rows = 0\nwatermark = \"source_version\"\n", nil, "job.toml:6: input.chunk_rows: must be a positive number of rows"},
		{"chunk without watermark", vcHead + "[input]\nchunk_rows = 10\n", nil, `job.toml:5: input.watermark: chunk_rows needs watermark = "<column>": the column the chunks are ordered by`},
		{"chunk and files", vcHead + "[input]\nmode = \"files\"\nchunk_rows = 10\nwatermark = \"source_version\"\n", nil, `job.toml:7: input.chunk_rows: chunked input and mode = "files" do not combine`},
		{"chunk refresh", sampleHead + "[input]\nchunk_rows = 10\nwatermark = \"id\"\n", nil, "job.toml:6: input.chunk_rows: chunked input needs an apply pipeline; sample is a refresh pipeline"},
		{"watermark not a column", vcHead + "[input]\nchunk_rows = 10\nwatermark = \"x\"\n", nil, `job.toml:7: input.watermark: watermark column "x" is not an input column of versioned_changes (change_id, entity_id, source_version, operation, value)`},
		{"watermark not integer", vcHead + "[input]\nchunk_rows = 10\nwatermark = \"value\"\n", nil, `job.toml:7: input.watermark: watermark column "value" has type VARCHAR; a watermark is an integer column`},
		{"rule name", vcHead + "[[quality.rules]]\nname = \"a b\"\nsql = \"true\"\n", nil, `job.toml:5: quality.rules[1]: rule name "a b" must be letters, digits and underscores, starting with a letter`},
		{"rule twice", vcHead + "[[quality.rules]]\nname = \"r\"\nsql = \"true\"\n[[quality.rules]]\nname = \"r\"\nsql = \"true\"\n", nil, "job.toml:8: quality.rules[2]: rule r is declared twice"},
		{"rule empty", vcHead + "[[quality.rules]]\nname = \"r\"\nsql = \" \"\n", nil, "job.toml:5: quality.rules[1]: rule r: sql is empty"},
		{"upstream self", "name = \"d\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"d\"]\n[transform]\nsql = \"m\"\n[target]\nkey = [\"k\"]\n",
			map[string]string{"m/v1.sql": "SELECT 1 AS k"}, "job.toml:5: input.upstream: job d cannot read itself as an upstream"},
		{"model without key", "name = \"d\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"u\"]\n[transform]\nsql = \"m\"\n",
			map[string]string{"m/v1.sql": "SELECT 1 AS k FROM {{upstream:u}}"}, "job.toml: target.key: a model names the columns that identify one row of its result: add key = [\"...\"] to [target]"},
		{"undeclared upstream", "name = \"d\"\npipeline = \"select\"\ntransform_version = 1\n[input]\nupstream = [\"u\"]\n[transform]\nsql = \"m\"\n[target]\nkey = [\"k\"]\n",
			map[string]string{"m/v1.sql": "SELECT 1 AS k FROM {{upstream:w}}"}, "job.toml:2: pipeline: step 01_model.sql: placeholder {{upstream:w}}: job w is not a declared upstream: add it to [input] upstream"},
		{"tombstone not a column", pHead, map[string]string{"p/pipeline.toml": applyPipe + "[tombstone]\nop = \"delete\"\n"},
			`p/pipeline.toml:6: tombstone.op: "op" is not one of the pipeline's columns (id, v, operation)`},
		{"tombstone a list", pHead, map[string]string{"p/pipeline.toml": applyPipe + "[tombstone]\noperation = [\"delete\"]\n"},
			`p/pipeline.toml:6: tombstone.operation: want a string, an integer or a boolean, found a list`},
		{"tombstone of a refresh pipeline", pHead, map[string]string{"p/pipeline.toml": strings.Replace(applyPipe, "apply", "refresh", 1) + "[tombstone]\noperation = \"delete\"\n"},
			`p/pipeline.toml:5: tombstone: a delete marker belongs to an apply pipeline that declares its columns (a tombstone is a delete of a change batch)`},
		{"stream key without kind", vcHead + "[input]\ntopic = \"t\"\n", nil, `job.toml:6: input.topic: topic applies to a stream input: set kind = "kafka" or "sse"`},
		{"stream refresh", sampleHead + "[input]\nkind = \"sse\"\nurl = \"http://x\"\n", nil, "job.toml:6: input.kind: a stream input needs an apply pipeline (each batch is a set of changes applied once); sample is a refresh pipeline, which would replace its target with the last batch alone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, got := loadJobText(t, c.text, c.files)
			require.Equal(t, c.want, got)
		})
	}
}

// TestLoadJob: what a loaded job holds, for each kind of job.
func TestLoadJob(t *testing.T) {
	t.Parallel()
	t.Run("params and defaults", func(t *testing.T) {
		t.Parallel()
		j, msg := loadJobText(t, sampleHead+"database = \"d/x.duckdb\"\n[input]\npath = \"in/a.csv\"\n[params]\ncap = 5\n", nil)
		require.Empty(t, msg)
		require.Equal(t, "s", j.Table, "the table defaults to the name")
		require.Equal(t, map[string]any{"cap": int64(5), "licenses": []string{"CC0 1.0", "CC BY 4.0"}}, j.Params)
		require.Equal(t, filepath.Join(filepath.Dir(j.File), "d", "x.duckdb"), j.Database, "resolved from the job file's folder")
		require.Equal(t, filepath.Join(filepath.Dir(j.File), "in", "a.csv"), j.Input.Path)
		require.Len(t, j.Steps, 4)
		require.NotEmpty(t, j.DDL)
	})
	t.Run("generic", func(t *testing.T) {
		t.Parallel()
		j, msg := loadJobText(t, mergeHead+mergeCols+"[target]\ntable = \"t\"\nkey = [\"id\"]\norder_by = \"v\"\n", nil)
		require.Empty(t, msg)
		require.Equal(t, []pipeline.Column{{Name: "id", Type: "BIGINT"}, {Name: "v", Type: "BIGINT"}, {Name: "name", Type: "VARCHAR"}}, j.Columns)
		require.Equal(t, []string{"id"}, j.Key)
		require.Equal(t, "v", j.OrderBy)
		require.Equal(t, j.Columns, j.Pipeline.Columns, "the job's own copy of the pipeline")
	})
	t.Run("files mode and chunks", func(t *testing.T) {
		t.Parallel()
		j, msg := loadJobText(t, vcHead+"[input]\nmode = \"files\"\n", nil)
		require.Empty(t, msg)
		require.Equal(t, job.BatchPerFile, j.Input.Batch)
		j, msg = loadJobText(t, vcHead+"[input]\nchunk_rows = 10\nwatermark = \"source_version\"\n", nil)
		require.Empty(t, msg)
		require.Equal(t, int64(10), j.Input.ChunkRows)
	})
	t.Run("description is not part of the key", func(t *testing.T) {
		t.Parallel()
		plain, msg := loadJobText(t, sampleHead, nil)
		require.Empty(t, msg)
		described, msg := loadJobText(t, sampleHead+"description = \"Sampled rows, <b>by year</b>.\"\n", nil)
		require.Empty(t, msg)
		require.Equal(t, "Sampled rows, <b>by year</b>.", described.Description)
		require.Equal(t, plain.Config("csv"), described.Config("csv"))
		_, msg = loadJobText(t, sampleHead+"description = 3\n", nil)
		require.Contains(t, msg, "job.toml:5")
	})
	t.Run("partition and rules", func(t *testing.T) {
		t.Parallel()
		j, msg := loadJobText(t, sampleHead+"[target]\npartition_by = \"year\"\n[[quality.rules]]\nname = \"r\"\nsql = \"year > 0\"\n", nil)
		require.Empty(t, msg)
		require.Equal(t, "year", j.PartitionBy)
		require.Equal(t, []job.Rule{{Name: "r", SQL: "year > 0"}}, j.Rules)
	})
}

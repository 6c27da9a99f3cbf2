package job_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/jobkey"
)

// TestColumnDocs: [columns] gives each column's description; a value that
// is no string, or is empty, is refused at load naming the file, the line
// and the key; and descriptions are no part of the job key.
func TestColumnDocs(t *testing.T) {
	t.Parallel()
	plain := mergeHead + "[input]\npath = \"in.csv\"\n" + mergeCols + "[target]\nkey = [\"id\"]\n"
	documented := plain + "\n[columns]\nid = \"  the record's id \"\n\"odd name\" = \"quoted\"\n"

	j, msg := loadJobText(t, documented, nil)
	require.Empty(t, msg)
	docs, err := job.ColumnDocs(j.File, []byte(documented))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"id": "the record's id", "odd name": "quoted"}, docs)
	none, err := job.ColumnDocs("job.toml", []byte(plain))
	require.NoError(t, err)
	require.Nil(t, none)

	// The key's parts are the same with and without descriptions.
	p, msg := loadJobText(t, plain, nil)
	require.Empty(t, msg)
	require.Equal(t, jobkey.CanonicalJSON(p.Config("csv")), jobkey.CanonicalJSON(j.Config("csv")))
	require.Equal(t, jobkey.CanonicalJSON(p.TransformPart()), jobkey.CanonicalJSON(j.TransformPart()))
	require.Equal(t, jobkey.CanonicalJSON(p.SchemaPart()), jobkey.CanonicalJSON(j.SchemaPart()))

	for _, c := range []struct{ name, tail, want string }{
		{"a number", "[columns]\nid = 3\n", "job.toml:14: columns.id: a column's description is a string"},
		{"empty", "[columns]\nid = \" \"\n", "job.toml:14: columns.id: a column's description is empty"},
		{"a table", "[columns.id]\ntext = \"x\"\n", "columns.id: a column's description is a string"},
		{"not a table", "", "job.toml:1: columns: is a table of column descriptions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := plain + c.tail
			if c.name == "not a table" {
				text = "columns = \"id\"\n" + plain
			}
			_, msg := loadJobText(t, text, nil)
			require.Contains(t, msg, c.want)
			require.NotContains(t, msg, "unknown key")
		})
	}
	_, err = job.ColumnDocs(filepath.Join("x", "job.toml"), []byte("[columns]\nid = 3\n"))
	require.ErrorContains(t, err, "x/job.toml:2: columns.id")
}

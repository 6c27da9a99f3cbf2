package diff

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/job"
)

// TestDiffChangedRows: with detail, a diff of two files lists its first
// changed rows in key order, each with the columns that differ (the value
// on each side, NULL as nil, and to minus from for numbers); rows beyond
// the limit are counted, not listed; a key of every column has none.
func TestDiffChangedRows(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	num := func(f float64) *float64 { return &f }
	a, b := 0.3, 0.30000000000000004 // float64 arithmetic, not exact constants
	for _, tc := range []struct {
		name     string
		from, to string
		key      []string
		limit    int
		changed  int64
		want     []RowDifference
	}{{
		name: "a number and a text",
		from: "id,amount,note\n1,10,a\n2,20,b\n",
		to:   "id,amount,note\n1,10,a\n2,20.5,c\n",
		key:  []string{"id"}, limit: 5, changed: 1,
		want: []RowDifference{{Key: "2", Columns: []ColumnDifference{
			{Column: "amount", From: str("20"), To: str("20.5"), Delta: num(0.5)},
			{Column: "note", From: str("b"), To: str("c")},
		}}},
	}, {
		name: "NULL on either side",
		from: "id,amount,note\n1,,a\n2,5,\n",
		to:   "id,amount,note\n1,3,a\n2,5,x\n",
		key:  []string{"id"}, limit: 5, changed: 2,
		want: []RowDifference{
			{Key: "1", Columns: []ColumnDifference{{Column: "amount", From: nil, To: str("3")}}},
			{Key: "2", Columns: []ColumnDifference{{Column: "note", From: nil, To: str("x")}}},
		},
	}, {
		name: "a composite key, in key order, up to the limit",
		from: "k1,k2,v\nb,1,x\na,2,x\na,1,x\nc,1,x\n",
		to:   "k1,k2,v\na,1,y\na,2,y\nb,1,y\nc,1,y\n",
		key:  []string{"k1", "k2"}, limit: 2, changed: 4,
		want: []RowDifference{
			{Key: "a|1", Columns: []ColumnDifference{{Column: "v", From: str("x"), To: str("y")}}},
			{Key: "a|2", Columns: []ColumnDifference{{Column: "v", From: str("x"), To: str("y")}}},
		},
	}, {
		name: "floating point noise",
		from: "id,x\n1,0.30000000000000004\n",
		to:   "id,x\n1,0.3\n",
		key:  []string{"id"}, limit: 5, changed: 1,
		want: []RowDifference{{Key: "1", Columns: []ColumnDifference{
			{Column: "x", From: str("0.30000000000000004"), To: str("0.3"), Delta: num(a - b)},
		}}},
	}, {
		name: "a key of every column: added and removed only",
		from: "id,v\n1,a\n",
		to:   "id,v\n1,b\n",
		key:  []string{"id", "v"}, limit: 5, changed: 0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			from, to := filepath.Join(dir, "from.csv"), filepath.Join(dir, "to.csv")
			require.NoError(t, os.WriteFile(from, []byte(tc.from), 0o644))
			require.NoError(t, os.WriteFile(to, []byte(tc.to), 0o644))
			res, err := DiffFilesDetail(context.Background(), from, to, job.FormatCSV, tc.key, tc.limit)
			require.NoError(t, err)
			require.Equal(t, tc.changed, res.Changed)
			require.Equal(t, tc.want, res.ChangedRows)
			plain, err := DiffFiles(context.Background(), from, to, job.FormatCSV, tc.key)
			require.NoError(t, err)
			require.Nil(t, plain.ChangedRows, "DiffFiles details no rows")
		})
	}
}

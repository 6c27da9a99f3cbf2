package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/idem-dev/idem/internal/diff"
)

// diff FILE1 FILE2 pairs rows by a key that must be unique in both files: a
// key that is not (the first column by default, or --key) is refused with
// exit 2 and a message naming the columns that would do. Files with
// different columns are refused with exit 2 too. A unique key never
// reports more changes than rows.
func TestDiffFilesKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		return p
	}
	// dep_time repeats; id is unique; carrier+flight is unique.
	flightsA := write("flights-a.csv",
		"dep_time,id,carrier,flight,delay",
		"900,1,AA,10,5",
		"900,2,AA,11,0",
		"930,3,BB,10,5",
		"930,4,BB,11,1")
	flightsB := write("flights-b.csv",
		"dep_time,id,carrier,flight,delay",
		"900,1,AA,10,6",
		"900,2,AA,11,0",
		"930,3,BB,10,6",
		"945,5,BB,12,2")
	// No single column is unique; carrier+flight is.
	pairsA := write("pairs-a.csv", "dep_time,carrier,flight", "900,AA,10", "900,AA,11", "930,BB,10", "900,BB,11")
	pairsB := write("pairs-b.csv", "dep_time,carrier,flight", "900,AA,10", "930,AA,11", "930,BB,10", "900,BB,11")
	// Nothing short of every column is unique.
	dupA := write("dup-a.csv", "a,b,c", "1,1,1", "1,1,2", "1,2,1", "2,1,1", "1,1,1")
	dupB := write("dup-b.csv", "a,b,c", "1,1,1", "1,1,2", "1,2,1", "2,1,1")
	// id unique in the first file only.
	onceA := write("once-a.csv", "id,v", "1,x", "2,y")
	onceB := write("once-b.csv", "id,v", "1,x", "1,z")
	other := write("other.csv", "dep_time,id,carrier,flight", "900,1,AA,10")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string // substrings of the message
		check  func(t *testing.T, d diff.Result)
	}{
		{"first column not unique", []string{flightsA, flightsB}, 2,
			[]string{"the first column, dep_time, is not unique in " + flightsA + " (4 rows, 2 distinct keys)", "columns unique in both files: id; pass one as --key"}, nil},
		{"given key not unique", []string{flightsA, flightsB, "--key", "carrier"}, 2,
			[]string{"--key carrier is not unique in " + flightsA, "columns unique in both files: id"}, nil},
		{"only pairs unique", []string{pairsA, pairsB}, 2,
			[]string{"no single column is unique in both files; pairs that are: carrier,flight; pass one as --key A,B"}, nil},
		{"nothing unique", []string{dupA, dupB, "--key", "a,b"}, 2,
			[]string{"--key a,b is not unique in " + dupA, "no single column or pair of columns is unique in both files"}, nil},
		{"unique in one file only", []string{onceA, onceB}, 2,
			[]string{"the first column, id, is not unique in " + onceB}, nil},
		{"different columns", []string{flightsA, other}, 2,
			[]string{"have different columns"}, nil},
		{"unique key", []string{flightsA, flightsB, "--key", "id"}, 0, nil, func(t *testing.T, d diff.Result) {
			require.Equal(t, []string{"id"}, d.Key)
			require.Equal(t, int64(1), d.Added)
			require.Equal(t, int64(1), d.Removed)
			require.Equal(t, []string{"1", "3"}, d.ChangedKeys)
		}},
		{"unique pair", []string{pairsA, pairsB, "--key", "carrier,flight"}, 0, nil, func(t *testing.T, d diff.Result) {
			require.Equal(t, []string{"AA|11"}, d.ChangedKeys)
			require.Equal(t, int64(0), d.Added+d.Removed)
		}},
		{"every column: rows as sets", []string{dupA, dupB, "--key", "a,b,c"}, 0, nil, func(t *testing.T, d diff.Result) {
			require.Equal(t, int64(1), d.Removed, "the repeated row")
			require.Equal(t, int64(0), d.Added+d.Changed)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := clitest.InProcess(t, append(append([]string{"diff"}, tc.args...), "--json")...)
			require.Equal(t, tc.code, code, "stdout: %s\nstderr: %s", stdout, stderr)
			for _, s := range tc.stderr {
				require.Contains(t, stderr, s)
			}
			if tc.code != 0 {
				return
			}
			var d diff.Result
			require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
			require.LessOrEqual(t, d.Changed+d.Removed, d.From.Rows, "never more changes than rows")
			require.LessOrEqual(t, d.Changed+d.Added, d.To.Rows, "never more changes than rows")
			tc.check(t, d)
		})
	}
}

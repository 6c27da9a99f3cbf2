package cli

import (
	"crypto/md5"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
	"github.com/stretchr/testify/require"
)

// runJSON runs `idem run --json` and decodes the result object.
func runJSON(t *testing.T, args ...string) (int, map[string]any) {
	t.Helper()
	code, out, errOut := clitest.InProcess(t, append([]string{"run", "--json"}, args...)...)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "stdout %q stderr %q", out, errOut)
	return code, res
}

func repoPath(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", rel))
	require.NoError(t, err)
	return p
}

type sampleRow struct {
	id, species int64
	year        *int64
	license     string
}

// readSample parses a sample CSV the way the rule reads it, independently
// of the SQL: rows that do not parse are not candidates.
func readSample(t *testing.T, path string) []sampleRow {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	var rows []sampleRow
	for _, r := range recs[1:] {
		id, err1 := strconv.ParseInt(r[0], 10, 64)
		sp, err2 := strconv.ParseInt(r[1], 10, 64)
		if err1 != nil || err2 != nil || strings.TrimSpace(r[3]) == "" {
			continue
		}
		row := sampleRow{id: id, species: sp, license: r[3]}
		if r[2] != "" {
			y, err := strconv.ParseInt(r[2], 10, 64)
			if err != nil {
				continue
			}
			row.year = &y
		}
		rows = append(rows, row)
	}
	return rows
}

// expectedSample computes the rule in plain Go: rows under the licenses
// (transform 2: with a year), per species the first cap by md5 of the id,
// then the id. It returns "id,species,year,license" lines in id order.
func expectedSample(rows []sampleRow, cap int, licenses []string, transform int) []string {
	bySpecies := map[int64][]sampleRow{}
	for _, r := range rows {
		if transform >= 2 && r.year == nil {
			continue
		}
		if !slices.Contains(licenses, r.license) {
			continue
		}
		bySpecies[r.species] = append(bySpecies[r.species], r)
	}
	md5hex := func(id int64) string {
		sum := md5.Sum([]byte(strconv.FormatInt(id, 10)))
		return hex.EncodeToString(sum[:])
	}
	var kept []sampleRow
	for _, rs := range bySpecies {
		sort.Slice(rs, func(i, j int) bool {
			a, b := md5hex(rs[i].id), md5hex(rs[j].id)
			if a != b {
				return a < b
			}
			return rs[i].id < rs[j].id
		})
		if len(rs) > cap {
			rs = rs[:cap]
		}
		kept = append(kept, rs...)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].id < kept[j].id })
	lines := make([]string, len(kept))
	for i, r := range kept {
		y := ""
		if r.year != nil {
			y = strconv.FormatInt(*r.year, 10)
		}
		lines[i] = fmt.Sprintf("%d,%d,%s,%s", r.id, r.species, y, r.license)
	}
	return lines
}

func writeSampleJob(t *testing.T, dir string, cap, transform, schema int) string {
	t.Helper()
	job := fmt.Sprintf(`name = "devil"
pipeline = "sample"
transform_version = %d
schema_version = %d
database = %q

[input]
path = %q

[target]
table = "devil_target"

[params]
cap = %d
licenses = ["CC0 1.0", "CC BY 4.0"]
`+clitest.DuckdbSection, transform, schema, filepath.Join(dir, "idem.duckdb"), repoPath(t, "fixtures/sample/occurrences-a.csv"), cap)
	path := filepath.Join(dir, "job.toml")
	require.NoError(t, os.WriteFile(path, []byte(job), 0o644))
	return path
}

// targetLines exports the target through `idem query --format csv` in key
// order, without the header.
func targetLines(t *testing.T, db string, extra ...string) []string {
	t.Helper()
	args := append([]string{"query", "--db", db, "--format", "csv"}, extra...)
	args = append(args, `SELECT id, species_id, year, license FROM devil_target ORDER BY id`)
	code, out, errOut := clitest.InProcess(t, args...)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "id,species_id,year,license", lines[0])
	return lines[1:]
}

// TestSampleSeedSequence replays the refresh sequence of the seed page
// through the CLI: A, A, B, A, cap 1000 -> 500, transform 1 -> 2,
// schema 1 -> 2, and the same again.
func TestSampleSeedSequence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := repoPath(t, "fixtures/sample/occurrences-a.csv")
	b := repoPath(t, "fixtures/sample/occurrences-b.csv")
	inputs := map[string][]sampleRow{"A": readSample(t, a), "B": readSample(t, b)}
	paths := map[string]string{"A": a, "B": b}
	licenses := []string{"CC0 1.0", "CC BY 4.0"}
	steps := []struct {
		input                string
		cap, transform, schm int
		decision             string
		changed              []string
		firstLoad            bool
	}{
		{"A", 1000, 1, 1, "loaded", []string{}, true},
		{"A", 1000, 1, 1, "skipped", []string{}, false},
		{"B", 1000, 1, 1, "loaded", []string{"input"}, false},
		{"A", 1000, 1, 1, "loaded", []string{"input"}, false},
		{"A", 500, 1, 1, "loaded", []string{"config"}, false},
		{"A", 500, 2, 1, "loaded", []string{"transform"}, false},
		{"A", 500, 2, 2, "loaded", []string{"schema"}, false},
		{"A", 500, 2, 2, "skipped", []string{}, false},
	}
	db := filepath.Join(dir, "idem.duckdb")
	for i, s := range steps {
		t.Run(fmt.Sprintf("run%d_%s_%s", i+1, s.input, s.decision), func(t *testing.T) {
			job := writeSampleJob(t, dir, s.cap, s.transform, s.schm)
			code, res := runJSON(t, job, "--input", paths[s.input])
			require.Equal(t, 0, code, res)
			require.Equal(t, s.decision, res["decision"])
			require.Equal(t, s.firstLoad, res["first_load"])
			changed := []string{}
			for _, c := range res["changed"].([]any) {
				changed = append(changed, c.(string))
			}
			require.Equal(t, s.changed, changed)
			want := expectedSample(inputs[s.input], s.cap, licenses, s.transform)
			got := targetLines(t, db)
			require.Equal(t, want, got, "the target must hold exactly input %s under these settings", s.input)
			require.EqualValues(t, len(want), res["rows_out"])
			if s.decision == "loaded" {
				require.EqualValues(t, 3000, res["rows_in"])
				var sum float64
				for _, n := range res["outcomes"].(map[string]any) {
					sum += n.(float64)
				}
				require.EqualValues(t, 3000, sum, "every input row gets exactly one outcome")
			}
		})
	}
}

// TestQueryCSVIsByteIdenticalAcrossThreads exports the target twice per
// thread count with ORDER BY the key and compares the bytes.
func TestQueryCSVIsByteIdenticalAcrossThreads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	job := writeSampleJob(t, dir, 1000, 1, 1)
	code, res := runJSON(t, job)
	require.Equal(t, 0, code, res)
	db := filepath.Join(dir, "idem.duckdb")
	var first []string
	for _, threads := range []string{"1", "2", "4", "1"} {
		got := targetLines(t, db, "--threads", threads)
		if first == nil {
			first = got
			require.NotEmpty(t, got)
			continue
		}
		require.Equal(t, first, got, "threads=%s", threads)
	}
}

func TestQueryJSONHasNulls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	job := writeSampleJob(t, dir, 1000, 1, 1)
	code, res := runJSON(t, job)
	require.Equal(t, 0, code, res)
	code, out, errOut := clitest.InProcess(t, "query", "--db", filepath.Join(dir, "idem.duckdb"), "--format", "json",
		"SELECT id, year FROM devil_target WHERE year IS NULL ORDER BY id LIMIT 2")
	require.Equal(t, 0, code, errOut)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 2)
	require.Contains(t, rows[0], "year")
	require.Nil(t, rows[0]["year"])
}

func TestQueryIsReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	job := writeSampleJob(t, dir, 1000, 1, 1)
	code, res := runJSON(t, job)
	require.Equal(t, 0, code, res)
	code, _, errOut := clitest.InProcess(t, "query", "--db", filepath.Join(dir, "idem.duckdb"), "DELETE FROM devil_target")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "read-only")
	require.Len(t, targetLines(t, filepath.Join(dir, "idem.duckdb")), int(res["rows_out"].(float64)))
}

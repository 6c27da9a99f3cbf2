package run

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/sqltext"
)

// statementPieces are the parts of SQL text whose quoting and comments a
// splitter must read as DuckDB's parser does: semicolons inside strings,
// dollar quotes (with and without a tag), E” escapes, quoted identifiers,
// nested comments, identifiers holding $, parameters.
var statementPieces = []string{
	"SELECT 1", "SELECT 'a;b'", "SELECT $$x;y$$", "SELECT $t$ ; $$ ; $t$", "SELECT E'\\';'", "SELECT e'\\\\'",
	`SELECT "a;b" FROM range(1) AS t("a;b")`, "SELECT 1 -- c;\n", "SELECT 1 /* a; /* b; */ c; */", "SELECT 1 AS a$$",
	"SELECT 'it''s;'", `SELECT "q""x;"`, "SELECT $$--$$", "SELECT $$/*$$", "SELECT '/*'", "SELECT '--'",
	"SELECT $_a$ $b$ ; $_a$", "SELECT x'AB'", "SELECT 2 AS \"$$\"", "SELECT 1 AS x$y", ";", " ", "\n", "-- only;\n",
	"/* ; */", "VALUES (';')", "SELECT E'\\\\';' AS z", "SELECT 'a' -- '\n", "SELECT $q$'$q$", "SELECT 1/*;*/+1",
}

// TestStatementsAgreeWithDuckDB: over random texts made of the pieces
// above, idem's split (sqltext.SplitStatements over MaskSQL) counts what
// DuckDB's parser counts whenever DuckDB parses the text, and
// sqltext.Statements accepts exactly those splits; every part it returns is
// one statement to DuckDB.
func TestStatementsAgreeWithDuckDB(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(43, 1))
	n := 3000
	for i := 0; i < n; i++ {
		var b strings.Builder
		for k := rng.IntN(6); k >= 0; k-- {
			b.WriteString(statementPieces[rng.IntN(len(statementPieces))])
			if rng.IntN(2) == 0 {
				b.WriteString(";")
			}
		}
		checkSplit(t, b.String(), true)
	}
}

// FuzzStatements: sqltext.Statements never accepts a split DuckDB reads
// otherwise (go test -fuzz FuzzStatements ./internal/run). It may refuse
// a text DuckDB reads as idem does not (DuckDB skips some letters outside
// ASCII as it skips spaces): a refusal, never a statement run unread.
func FuzzStatements(f *testing.F) {
	for _, p := range statementPieces {
		f.Add(p + ";" + p)
	}
	f.Add("SELECT $$--$$ AS a; UPDATE t SET x = 1; SELECT 1")
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 4096 {
			return
		}
		checkSplit(t, text, false)
	})
}

// checkSplit checks sqltext.Statements on text against DuckDB's parser: what
// it accepts is DuckDB's split; with exact, it also accepts every text
// DuckDB parses (idem counts what DuckDB counts).
func checkSplit(t *testing.T, text string, exact bool) {
	t.Helper()
	if strings.IndexByte(text, 0) >= 0 || !utf8.ValidString(text) {
		_, err := sqltext.Statements(text, CountStatements)
		var split *sqltext.SplitError
		require.ErrorAs(t, err, &split)
		require.True(t, split.NUL)
		return
	}
	whole, werr := CountStatements(text)
	idem := len(sqltext.SplitStatements(sqltext.MaskSQL(text)))
	spans, err := sqltext.Statements(text, CountStatements)
	if werr == nil && exact {
		require.Equal(t, whole, idem, "DuckDB and idem count the statements of %q differently", text)
	}
	if werr == nil && err == nil {
		require.Equal(t, whole, len(spans), "idem accepted a split of %q DuckDB does not share", text)
	}
	var split *sqltext.SplitError
	if err != nil {
		require.True(t, errors.As(err, &split), "%q: %v", text, err)
		return
	}
	for _, sp := range spans {
		if n, err := CountStatements(text[sp.Start:sp.End]); err == nil {
			require.Equal(t, 1, n, "part %q of %q", text[sp.Start:sp.End], text)
		}
	}
}

// TestStatementsRefusesDisagreement: a split DuckDB does not share is
// refused, whichever side reads more.
func TestStatementsRefusesDisagreement(t *testing.T) {
	t.Parallel()
	more := func(string) (int, error) { return 3, nil }
	_, err := sqltext.Statements("SELECT 1; SELECT 2", more)
	var split *sqltext.SplitError
	require.ErrorAs(t, err, &split)
	require.Equal(t, 2, split.Idem)
	require.Equal(t, 3, split.DuckDB)
	require.EqualError(t, sqltext.One("SELECT 1", more), "DuckDB's parser reads 3 statements where idem reads 1")
	require.ErrorIs(t, OneStatement("SELECT $$--$$; SELECT 2"), ErrSeveralStatements)
	require.NoError(t, OneStatement("SELECT $$;$$"))
	spans, err := sqltext.Statements("SELECT $$--$$ AS a; UPDATE t SET x = 1; SELECT 1", CountStatements)
	require.NoError(t, err)
	require.Len(t, spans, 3)
}

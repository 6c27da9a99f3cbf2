package run

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"
)

// logMessage keeps idem's context and leaves out every row value: an
// audit's rows, a model's bad keys, the engine's message (cut by
// TrimSQLError or not), in a wrapped or joined error.
func TestLogMessageKeepsNoRowValues(t *testing.T) {
	t.Parallel()
	audit := &AuditError{Job: "j", Results: []AuditResult{{Name: "nn", Kind: "not_null", Severity: "error", Violations: 1, Rows: []string{"email=SECRET"}}}}
	engine := &duckdb.Error{Type: duckdb.ErrorTypeConversion, Msg: "Conversion Error: Could not convert string 'SECRET' to INT64\n\nLINE 1: SELECT CAST('SECRET' AS BIGINT)"}
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("stage: %w", audit), "stage: job j: audit nn (not_null, error) found 1 violation(s); nothing committed"},
		{&KeyError{Job: "m", Key: []string{"email"}, Bad: []string{"(SECRET) 2 rows"}}, "model m: key (email) must be unique and not NULL: 1 key value(s) repeated or NULL; nothing committed"},
		{fmt.Errorf("job j: step 02_rank.sql: %w", engine), "job j: step 02_rank.sql: Conversion Error (withheld from the run log, which keeps no row values; printed when it happened)"},
		{fmt.Errorf("job j: %w; nothing committed", catalog.TrimSQLError(engine)), "job j: Conversion Error (withheld from the run log, which keeps no row values; printed when it happened); nothing committed"},
		{errors.Join(errors.New("a gap"), fmt.Errorf("x: %w", engine)), "a gap\nx: Conversion Error (withheld from the run log, which keeps no row values; printed when it happened)"},
		{errors.New("batch b1 was committed"), "batch b1 was committed"},
	} {
		got := logMessage(c.err)
		require.Equal(t, c.want, got)
		require.NotContains(t, got, "SECRET")
	}
}

package run

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idem-dev/idem/internal/report"

	"github.com/stretchr/testify/require"
)

// DuckDB's fatal errors cannot be provoked on purpose in a release build (a
// failed fsync, an internal error), so these are its messages verbatim.
func TestFatalErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		err   error
		fatal bool
	}{
		{"invalidated", fmt.Errorf("commit: %w", errors.New(`FATAL Error: Failed: database has been invalidated because of a previous fatal error. The database must be restarted prior to being used again.
Original error: "fsync failed"`)), true},
		{"fatal", errors.New(`step 04_commit.sql: FATAL Error: Failed to flush WAL`), true},
		{"ordinary", errors.New(`step 01_stage.sql: Binder Error: column "x" not found`), false},
		{"refused", report.Refuse("batch", "batch b was committed with another digest"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := report.Fatal(tc.err)
			require.Equal(t, tc.fatal, errors.Is(got, report.ErrFatal))
			require.ErrorIs(t, got, tc.err)
			if !tc.fatal {
				require.Equal(t, tc.err, got)
				return
			}
			require.Equal(t, report.ExitFailure, report.ExitCode(got))
			require.Contains(t, got.Error(), "the database was invalidated and this run committed nothing")
			require.Contains(t, got.Error(), "run the command again")
			require.Contains(t, got.Error(), tc.err.Error())
			require.Equal(t, got, report.Fatal(got), "wrapped once")
		})
	}
}

package run_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/job"
	"github.com/idem-dev/idem/internal/run"

	"github.com/stretchr/testify/require"
)

// The [duckdb] settings reach the DuckDB instance that holds the file, on
// every connection of the pool.
func TestOpenAppliesDuckDBSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	cases := []struct {
		name     string
		settings job.DuckDBSettings
		memory   string
		threads  string
		temp     string
	}{
		{"set", job.DuckDBSettings{MemoryLimit: "1GB", Threads: 1, TempDirectory: spill}, "953.6 MiB", "1", spill},
		{"temp directory defaults beside the file", job.DuckDBSettings{MemoryLimit: "512MB"}, "488.2 MiB", "", ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(dir, []string{"a", "b"}[i]+".duckdb")
			db, err := run.Open(ctx, path, run.OpenOptions{DuckDB: tc.settings})
			require.NoError(t, err)
			defer db.Close()
			// Two connections held at once: both must see the settings.
			c1, err := db.SQL().Conn(ctx)
			require.NoError(t, err)
			defer c1.Close()
			c2, err := db.SQL().Conn(ctx)
			require.NoError(t, err)
			defer c2.Close()
			for _, conn := range []func(string) (string, error){
				func(q string) (s string, err error) { err = c1.QueryRowContext(ctx, q).Scan(&s); return },
				func(q string) (s string, err error) { err = c2.QueryRowContext(ctx, q).Scan(&s); return },
			} {
				mem, err := conn("SELECT current_setting('memory_limit')")
				require.NoError(t, err)
				require.Equal(t, tc.memory, mem)
				if tc.threads != "" {
					threads, err := conn("SELECT current_setting('threads')::VARCHAR")
					require.NoError(t, err)
					require.Equal(t, tc.threads, threads)
				}
				bg, err := conn("SELECT current_setting('allocator_background_threads')::VARCHAR")
				require.NoError(t, err)
				require.Equal(t, "true", bg, "freed memory goes back to the system as a run goes")
				temp, err := conn("SELECT current_setting('temp_directory')")
				require.NoError(t, err)
				want := tc.temp
				if want == "" {
					want = path + ".tmp"
				}
				require.Equal(t, want, temp)
			}
		})
	}
}

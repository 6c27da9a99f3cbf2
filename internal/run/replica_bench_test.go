package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/job"
)

// BenchmarkPublishReplica is the time to publish the read replica of a
// database of a given size, by a copy of the file (the file system's
// fastest: a reflink, copy_file_range or a plain copy) and by a rewrite
// (COPY FROM DATABASE, once the database holds an erasure). Sizes in MB
// come from IDEM_REPLICA_BENCH_MB (default 16, so CI stays quick):
//
//	IDEM_REPLICA_BENCH_MB=100,1000 go test ./internal/run -run '^$' -bench PublishReplica -benchtime 3x
func BenchmarkPublishReplica(b *testing.B) {
	sizes := os.Getenv("IDEM_REPLICA_BENCH_MB")
	if sizes == "" {
		sizes = "16"
	}
	ctx := context.Background()
	for _, s := range strings.Split(sizes, ",") {
		mb, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || mb <= 0 {
			b.Fatalf("IDEM_REPLICA_BENCH_MB: %q", s)
		}
		path := filepath.Join(b.TempDir(), "bench.duckdb")
		db, err := Open(ctx, path, OpenOptions{DuckDB: job.DuckDBSettings{ReadReplica: true}})
		if err != nil {
			b.Fatal(err)
		}
		// About 35 bytes per row stored (DuckDB compresses the hex text).
		rows := int64(mb) << 20 / 35
		if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE filler AS
			SELECT i, md5(CAST(random() AS VARCHAR)) || md5(CAST(i AS VARCHAR)) AS s FROM range(%d) t(i)`, rows)); err != nil {
			b.Fatal(err)
		}
		for _, method := range []string{"copy", "rewrite"} {
			if method == "rewrite" {
				if _, err := db.sql.ExecContext(ctx, `INSERT INTO idem.erasures VALUES ('bench', 'k', 1, 1, current_timestamp)`); err != nil {
					b.Fatal(err)
				}
			}
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%dMB/%s", mb, method), func(b *testing.B) {
				var info *ReplicaInfo
				for b.Loop() {
					info = db.PublishReplica(ctx, nil)
					if info.Error != "" {
						b.Fatal(info.Error)
					}
				}
				b.ReportMetric(float64(st.Size())/(1<<20), "db_MB")
				b.ReportMetric(float64(info.Bytes)/(1<<20), "replica_MB")
				b.Logf("database %d bytes, replica %d bytes by %s", st.Size(), info.Bytes, info.Method)
			})
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

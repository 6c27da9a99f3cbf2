package runner_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idem-dev/idem/runner"
)

// ExampleWithStream follows a job reading server-sent events, as idem run
// --follow does: batches of at most max_records events, each committed
// with the id it read up to, each reported as it commits, until
// MaxBatches committed (or IdleExit passed without an event). The event that is not one JSON object is kept as an
// invalid_json outcome naming its id, and the batch commits past it.
func ExampleWithStream() {
	ctx := context.Background()
	var body strings.Builder
	for i := 1; i <= 6; i++ {
		data := fmt.Sprintf(`{"change_id":"c%d","entity_id":"e%d","source_version":%d,"operation":"upsert","value":"v%d"}`, i, i, i, i)
		if i == 5 {
			data = "[5]"
		}
		fmt.Fprintf(&body, "id: %d\ndata: %s\n\n", i, data)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body.String())
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a feed holds the connection open
	}))
	defer srv.Close()
	dir := tempDir()
	defer os.RemoveAll(dir)
	writeFiles(dir, map[string]string{"rides.toml": `name = "rides"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "rides.duckdb"

[input]
kind = "sse"
url = "` + srv.URL + `"
max_records = 4
max_wait = "200ms"

[target]
table = "rides"

[duckdb]
threads = 1
`})
	p, err := runner.Open(ctx, []string{filepath.Join(dir, "rides.toml")}, runner.WithStream(runner.StreamOptions{
		Follow: true, MaxBatches: 2, IdleExit: time.Minute,
		OnBatch: func(b *runner.StreamBatch) {
			fmt.Printf("%s %s: snapshot %d, %d records, %v\n", b.BatchID, b.Decision, b.Snapshot, b.Records, b.Run.Outcomes)
			if n := b.RejectNote(); n != "" {
				fmt.Println("  " + n)
			}
		},
	}))
	if err != nil {
		log.Fatal(err)
	}
	res, err := p.RunJob(ctx, "rides", runner.Batch{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s, %d batches, snapshot %d\n", res.Job, res.Decision, len(res.Runs), res.Snapshot)
	// Output:
	// rides::1-4 applied: snapshot 1, 4 records, map[accepted:4]
	// rides::5-6 applied: snapshot 2, 2 records, map[accepted:1 invalid_json:1]
	//   rejected 1 record(s): :5 invalid_json
	// rides: applied, 2 batches, snapshot 2
}

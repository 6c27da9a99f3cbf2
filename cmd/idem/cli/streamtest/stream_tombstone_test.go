package streamtest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// TestStreamTombstone: a Kafka tombstone is a delete when the pipeline
// declares one: its message key, one JSON object, with operation =
// "delete" added, judged by versioned_changes' own rules. Its version is
// the key's, never one idem gives it: a tombstone below the entity's
// version is stale (it never wipes a newer version), the old upsert
// replayed after it is stale (it never resurrects the record), a key
// without a version is invalid_version, and a key that is not one JSON
// object is invalid_tombstone saying why. The retained batch holds the
// delete rows: rerun reproduces each snapshot, and an erasure finds the
// subject in them and in a rejected key's prefix.
func TestStreamTombstone(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := k.JobFile(dir, "")
	db := filepath.Join(dir, "rides.duckdb")
	const subject = "rider-SECRET7"
	upsert := &kgo.Record{Topic: "rides", Value: []byte(`{"change_id":"c1","entity_id":"` + subject + `","source_version":1,"operation":"upsert","value":"picked up"}`)}
	tomb := func(key string) *kgo.Record { return &kgo.Record{Topic: "rides", Key: []byte(key)} }
	k.Produce(upsert,
		&kgo.Record{Topic: "rides", Value: []byte(`{"change_id":"c2","entity_id":"e2","source_version":3,"operation":"upsert","value":"v3"}`)},
		tomb(`{"entity_id":"`+subject+`","source_version":2,"change_id":"d1"}`),
		tomb(`{"change_id":"d3","entity_id":"e3"}`),
		tomb(`e3`),
		tomb(`{"entity_id":"`+subject+`","colour":"red"}`),
	)
	code, out, errOut := clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, out+errOut)
	b := clitest.BatchLines(t, out)
	require.Len(t, b, 1)
	require.Equal(t, 6, b[0].Records)
	outcomes := `SELECT concat_ws(' ', change_id, entity_id, source_version, operation, outcome) FROM rides_outcomes WHERE batch_id = ? ORDER BY ALL`
	require.Equal(t, []string{
		"c1 " + subject + " 1 upsert superseded_in_batch", "c2 e2 3 upsert accepted", "d1 " + subject + " 2 delete accepted",
		"d3 e3 delete invalid_version", "invalid_extra_field", "invalid_tombstone",
	}, clitest.QueryStrs(t, db, outcomes, b[0].BatchID))
	require.Equal(t, []string{"e2 3 active v3", subject + " 2 deleted <nil>"},
		clitest.QueryStrs(t, db, `SELECT concat_ws(' ', entity_id, source_version, status, coalesce(value, '<nil>')) FROM rides ORDER BY ALL`))
	require.Equal(t, []string{`rejected 2 record(s): 0:4 invalid_tombstone (its message key is not one JSON object), 0:5 invalid_extra_field (its message key)`},
		clitest.QueryStrs(t, db, `SELECT message FROM idem.runs WHERE job = 'rides' AND snapshot = 1`))

	// The old upsert replayed stays deleted; a tombstone below e2's
	// version leaves it.
	k.Produce(upsert, tomb(`{"change_id":"d2","entity_id":"e2","source_version":2}`))
	code, out, errOut = clitest.InProcess(t, "run", jobPath, "--json")
	require.Equal(t, 0, code, out+errOut)
	b = clitest.BatchLines(t, out)
	require.Equal(t, []string{"c1 " + subject + " 1 upsert stale", "d2 e2 2 delete stale"}, clitest.QueryStrs(t, db, outcomes, b[0].BatchID))
	require.Equal(t, []string{"e2 3 active v3", subject + " 2 deleted <nil>"},
		clitest.QueryStrs(t, db, `SELECT concat_ws(' ', entity_id, source_version, status, coalesce(value, '<nil>')) FROM rides ORDER BY ALL`))

	for _, s := range []string{"1", "2"} {
		code, out, errOut = clitest.InProcess(t, "rerun", jobPath, "--snapshot", s, "--json")
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %s", s)
	}

	// The delete rows are rows of the retained batch: an erasure finds the
	// subject in them, and in the prefix of the rejected key.
	code, out, errOut = clitest.InProcess(t, "erase", jobPath, "--key", subject)
	require.Equal(t, 0, code, out+errOut)
	clitest.RequireNoPayload(t, db+".inputs", subject, "")
	require.Equal(t, []string{`4 "e3"`, "5 "},
		clitest.QueryStrs(t, db, `SELECT r.position || ' ' || r.prefix FROM (SELECT unnest(CAST(json_extract(inputs, '$.rejects') AS STRUCT(row BIGINT, "partition" VARCHAR, position BIGINT, outcome VARCHAR, bytes BIGINT, prefix VARCHAR)[])) AS r FROM idem.snapshots WHERE job = 'rides' AND snapshot = 1) ORDER BY r.position`))
	require.Equal(t, []string{"0"}, clitest.QueryStrs(t, db, `SELECT count(*) FROM rides WHERE entity_id = '`+subject+`'`))
}

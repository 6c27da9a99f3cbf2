package streamtest

import (
	"fmt"
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

// TestStreamTombstoneOrders: on an orders stream job ([tombstone] kind =
// "delete") a Kafka tombstone is a delete at the position its key gives:
// the order leaves the target and keeps a tombstone, --json counts it
// under deletes, and a key without a position is the pipeline's
// invalid_position. Older upserts after it, the one it deleted replayed
// among them, stay stale (the order never comes back); another order's
// tombstone deletes it, and replayed is a duplicate. Rerun reproduces each
// snapshot.
func TestStreamTombstoneOrders(t *testing.T) {
	t.Parallel()
	k := clitest.StartKafka(t, 1)
	dir := t.TempDir()
	jobPath := filepath.Join(dir, "orders.toml")
	clitest.WriteFile(t, jobPath, fmt.Sprintf("name = \"orders\"\npipeline = \"orders\"\ntransform_version = 1\nschema_version = 1\ndatabase = \"orders.duckdb\"\n[input]\nkind = \"kafka\"\nbrokers = [%q]\ntopic = \"rides\"\nmax_wait = \"300ms\"\n[target]\ntable = \"orders\"\n"+clitest.DuckdbSection, k.Addr))
	db := filepath.Join(dir, "orders.duckdb")
	upsert := func(order string, position int) *kgo.Record {
		return &kgo.Record{Topic: "rides", Value: fmt.Appendf(nil, `{"order_id":%q,"position":%d,"kind":"upsert","amount_cents":%d,"event_day":47,"schema_version":3,"currency":"USD"}`, order, position, 100*position)}
	}
	tomb := func(key string) *kgo.Record { return &kgo.Record{Topic: "rides", Key: []byte(key)} }
	run := func(wantDeletes int, wantOutcomes, wantRows, wantTombstones []string) {
		t.Helper()
		code, out, errOut := clitest.InProcess(t, "run", jobPath, "--json")
		require.Equal(t, 0, code, out+errOut)
		b := clitest.BatchLines(t, out)
		require.Len(t, b, 1)
		require.Equal(t, wantDeletes, b[0].Deletes)
		require.Equal(t, wantOutcomes, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', order_id, position, kind, outcome) FROM orders_outcomes WHERE batch_id = ? ORDER BY line`, b[0].BatchID))
		require.Equal(t, wantRows, clitest.QueryStrs(t, db, `SELECT concat_ws(' ', order_id, position, amount_cents) FROM orders ORDER BY ALL`))
		require.Equal(t, wantTombstones, clitest.QueryStrs(t, db, `SELECT order_id || ' ' || position FROM orders_tombstones ORDER BY ALL`))
	}

	k.Produce(upsert("o1", 1), upsert("o2", 2),
		tomb(`{"order_id":"o1","position":5,"schema_version":3}`),
		tomb(`{"order_id":"o3","schema_version":3}`))
	run(2, []string{"o1 1 upsert superseded_in_batch", "o2 2 upsert accepted", "o1 5 delete accepted", "o3 delete invalid_position"},
		[]string{"o2 2 200"}, []string{"o1 5"})

	k.Produce(upsert("o1", 4), tomb(`{"order_id":"o2","position":3,"schema_version":2}`))
	run(1, []string{"o1 4 upsert stale", "o2 3 delete accepted"}, []string{}, []string{"o1 5", "o2 3"})

	k.Produce(upsert("o1", 1), tomb(`{"order_id":"o2","position":3,"schema_version":2}`))
	run(1, []string{"o1 1 upsert stale", "o2 3 delete duplicate"}, []string{}, []string{"o1 5", "o2 3"})

	for _, s := range []string{"1", "2", "3"} {
		code, out, errOut := clitest.InProcess(t, "rerun", jobPath, "--snapshot", s, "--json")
		require.Equal(t, 0, code, out+errOut)
		require.Contains(t, out, `"reproduced":true`, "snapshot %s", s)
	}
}

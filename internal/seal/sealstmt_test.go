package seal

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/sqltext"
	"github.com/stretchr/testify/require"
)

// TestClassifyStatement: a statement's kind and target from its leading
// keywords, comments, strings and quoted names included.
func TestClassifyStatement(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sql     string
		kind    StmtKind
		keyword string
		target  string
		temp    bool
	}{
		{"SELECT 1", StmtQuery, "SELECT", "", false},
		{"  -- a comment\n(SELECT 1)", StmtQuery, "", "", false},
		{"WITH a AS (SELECT 1), b(x) AS MATERIALIZED (SELECT 2) SELECT * FROM a", StmtQuery, "SELECT", "", false},
		{"WITH a AS (SELECT 1) INSERT INTO sec SELECT * FROM a", StmtInsert, "INSERT", "sec", false},
		{"INSERT OR REPLACE INTO idem_store.main.sec VALUES (1)", StmtInsert, "INSERT", "idem_store.main.sec", false},
		{`UPDATE "Sec ""x""" SET v = 'UPDATE t'`, StmtUpdate, "UPDATE", `Sec "x"`, false},
		{"DELETE FROM idem.erasures", StmtDelete, "DELETE", "idem.erasures", false},
		{"MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN DELETE", StmtMerge, "MERGE", "t", false},
		{"TRUNCATE TABLE sec", StmtTruncate, "TRUNCATE", "sec", false},
		{"CREATE OR REPLACE TEMP TABLE staged AS SELECT 1", StmtCreate, "CREATE TABLE", "staged", true},
		{"create temporary view if not exists v as select 1", StmtCreate, "CREATE VIEW", "v", true},
		{"CREATE TABLE IF NOT EXISTS main.t (k INT)", StmtCreate, "CREATE TABLE", "main.t", false},
		{"CREATE UNIQUE INDEX i ON sec (k)", StmtCreate, "CREATE INDEX", "i", false},
		{"CREATE SEQUENCE s", StmtCreate, "CREATE SEQUENCE", "s", false},
		{"DROP TABLE IF EXISTS sec", StmtDrop, "DROP TABLE", "sec", false},
		{"ALTER TABLE sec ADD COLUMN x INT", StmtAlter, "ALTER TABLE", "sec", false},
		{"SET VARIABLE idem_batch_id = 'x'", StmtVariable, "SET", "idem_batch_id", false},
		{"SET threads = 8", StmtOther, "SET", "", false},
		{"COPY (SELECT 1) TO '/tmp/x.csv'", StmtOther, "COPY", "", false},
		{"ATTACH ':memory:' AS x", StmtOther, "ATTACH", "", false},
	} {
		st := ClassifyStatement(tc.sql, sqltext.MaskSQL(tc.sql))
		require.Equal(t, tc.kind, st.Kind, tc.sql)
		require.Equal(t, tc.keyword, st.Keyword, tc.sql)
		require.Equal(t, tc.target, strings.Join(st.Target, "."), tc.sql)
		require.Equal(t, tc.temp, st.Temp, tc.sql)
	}
}

// TestCheckWrite: a step writes only the job's own tables and TEMP
// relations; every other statement is refused with its construct named.
func TestCheckWrite(t *testing.T) {
	t.Parallel()
	s := &Seal{Own: map[string]bool{"orders": true, "orders_outcomes": true}, Temp: map[string]bool{"staged": true}}
	for _, tc := range []struct {
		sql       string
		construct string // "" allowed
	}{
		{"CREATE OR REPLACE TABLE orders AS SELECT 1", ""},
		{"CREATE OR REPLACE TABLE idem_store.main.orders AS SELECT 1", ""},
		{"CREATE OR REPLACE TEMP TABLE anything AS SELECT 1", ""},
		{"CREATE TEMP MACRO m(x) AS x + 1", ""},
		{"INSERT INTO orders_outcomes SELECT 1", ""},
		{"INSERT INTO temp.main.x SELECT 1", ""},
		{"UPDATE staged SET a = 1", ""},
		{"SET VARIABLE mine = 1", ""},
		{"CREATE INDEX i ON orders (k)", ""},
		{"CREATE OR REPLACE TABLE sec AS SELECT 1", "CREATE TABLE sec"},
		{"CREATE MACRO m(x) AS x", "CREATE MACRO m"},
		{"CREATE TEMP TABLE idem.x AS SELECT 1", "CREATE TABLE idem.x"},
		{"INSERT INTO sec SELECT 1", "INSERT INTO sec"},
		{"INSERT INTO main.sec SELECT 1", "INSERT INTO main.sec"},
		{"UPDATE idem.state SET snapshot = 0", "UPDATE idem.state"},
		{"DELETE FROM idem.erasures", "DELETE FROM idem.erasures"},
		{"MERGE INTO sec USING s ON true WHEN MATCHED THEN DELETE", "MERGE INTO sec"},
		{"TRUNCATE sec", "TRUNCATE sec"},
		{"DROP TABLE sec", "DROP TABLE sec"},
		{"ALTER TABLE sec ADD COLUMN x INT", "ALTER TABLE sec"},
		{"CREATE INDEX i ON sec (k)", "CREATE INDEX ON sec"},
		{"CREATE SEQUENCE s", "CREATE SEQUENCE"},
		{"SET VARIABLE idem_batch_id = 'x'", "SET VARIABLE idem_batch_id"},
		{"COPY orders TO '/tmp/x.csv'", "COPY"},
		{"EXPLAIN ANALYZE UPDATE sec SET v = 'x'", "EXPLAIN"},
		{"SHOW TABLES", "SHOW"},
		{"DESCRIBE sec", "DESCRIBE"},
		{"SUMMARIZE sec", "SUMMARIZE"},
		{"TABLE sec", "TABLE"},
		{"PIVOT sec ON k USING count(*)", "PIVOT"},
		{"ATTACH ':memory:' AS x", "ATTACH"},
		{"SET threads = 8", "SET"},
		{"PRAGMA enable_profiling", "PRAGMA"},
		{"CHECKPOINT", "CHECKPOINT"},
		{"USE memory", "USE"},
		{"COMMIT", "COMMIT"},
	} {
		v, ok := s.checkWrite(ClassifyStatement(tc.sql, sqltext.MaskSQL(tc.sql)), s.Temp)
		if tc.construct == "" {
			require.True(t, ok, "%s: %s", tc.sql, v.Message)
			continue
		}
		require.False(t, ok, tc.sql)
		require.Equal(t, tc.construct, v.Construct, tc.sql)
		require.NotEmpty(t, v.Fix, tc.sql)
	}
}

// TestClassifyStatementPrefixes: every prefix of a statement, cut anywhere
// (inside a quote, a comment, a WITH clause), classifies without a panic,
// and a refusal always says why.
func TestClassifyStatementPrefixes(t *testing.T) {
	t.Parallel()
	s := &Seal{Own: map[string]bool{"t": true}, Temp: map[string]bool{}}
	for _, full := range []string{
		`WITH RECURSIVE a(x) AS NOT MATERIALIZED (SELECT '(' AS x), b AS ((SELECT 1)) INSERT OR IGNORE INTO "idem_store"."main"."t" SELECT 1 -- )`,
		`CREATE OR REPLACE TEMPORARY TABLE IF NOT EXISTS "x""y" AS SELECT /* ; */ 1`,
		`CREATE UNIQUE INDEX IF NOT EXISTS i ON main.t (k)`,
		`DROP MACRO IF EXISTS temp.main.m`,
		`SET VARIABLE v = (SELECT 1)`,
		`MERGE INTO t USING s ON t.k = s.k WHEN NOT MATCHED THEN INSERT VALUES (s.k)`,
	} {
		for i := range len(full) + 1 {
			text := full[:i]
			st := ClassifyStatement(text, sqltext.MaskSQL(text))
			v, ok := s.checkWrite(st, s.Temp)
			if !ok {
				require.NotEmpty(t, v.Message, text)
			}
		}
	}
}

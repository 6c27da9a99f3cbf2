#!/usr/bin/env bash
# Measure versioned_changes at scale: apply ROWS upserts to create ROWS
# entities, then one batch of ROWS changes against them (later versions,
# deletes, repeats, stale and equal-version rows, conflicts, invalid rows,
# new entities, deletes of unknown entities), each with the built binary
# under /usr/bin/time -v. Prints wall and CPU time, peak RSS and outcome
# counts (a CPU share well under 200% on 2 cores means the machine was busy).
#
#   scripts/bench-versioned-changes.sh [ROWS] [DIR]     (defaults: 1000000, a temp dir)
#
# Extra arguments for `idem run` (e.g. --db) can go in IDEM_RUN_ARGS;
# IDEM_MEMORY_LIMIT=1GB sets the job's DuckDB memory_limit (spilling to DIR/spill).
set -euo pipefail
rows=${1:-1000000}
dir=${2:-$(mktemp -d /tmp/idem-vc-bench.XXXXXX)}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${IDEM_BIN:-/tmp/idem}

cd "$root"
go build -o "$bin" ./cmd/idem
go test ./runner -count=1 -run '^TestVersionedChangesGenerateBenchmark$' -vc.gen="$dir" -vc.rows="$rows" >/dev/null
rm -rf "$dir/idem.duckdb" "$dir/idem.duckdb.wal" "$dir/idem.duckdb.inputs"
if [ -n "${IDEM_MEMORY_LIMIT:-}" ]; then
	printf '\n[duckdb]\nmemory_limit = "%s"\ntemp_directory = "%s"\n' "$IDEM_MEMORY_LIMIT" "$dir/spill" >>"$dir/job.toml"
fi
ls -l "$dir"/*.parquet

run() { # batch-id input
	local out="$dir/$1.json" tv="$dir/$1.time"
	/usr/bin/time -v "$bin" run "$dir/job.toml" --input "$2" --batch-id "$1" --json ${IDEM_RUN_ARGS:-} >"$out" 2>"$tv"
	printf '%-6s wall %s  user %ss  sys %ss  CPU %s  peak RSS %s kB\n' "$1" \
		"$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$tv")" \
		"$(sed -n 's/.*User time (seconds): //p' "$tv")" \
		"$(sed -n 's/.*System time (seconds): //p' "$tv")" \
		"$(sed -n 's/.*Percent of CPU this job got: //p' "$tv")" \
		"$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tv")"
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("       decision", r["decision"], "rows_in", r["rows_in"], "rows_out", r["rows_out"], "outcomes", json.dumps(r["outcomes"], sort_keys=True))' "$out"
}
run base "$dir/base.parquet"
run batch "$dir/batch.parquet"
du -sh "$dir/idem.duckdb"

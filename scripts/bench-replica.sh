#!/usr/bin/env bash
# The apply benchmark with and without [duckdb] read_replica: the
# versioned_changes base load of ROWS entities and one batch of ROWS changes
# (scripts/bench-versioned-changes.sh's data), each run twice in fresh
# databases, once as is and once with read_replica = true. Prints each
# run's wall time and, with the replica, its publication (seconds, bytes,
# method) from run --json. Publish time against database size alone:
#   IDEM_REPLICA_BENCH_MB=100,1000 go test ./internal/run -run '^$' -bench PublishReplica -benchtime 2x
#
#   scripts/bench-replica.sh [ROWS] [DIR]     (defaults: 1000000, a temp dir)
set -euo pipefail
rows=${1:-1000000}
dir=${2:-$(mktemp -d /tmp/idem-replica-bench.XXXXXX)}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${IDEM_BIN:-/tmp/idem}

cd "$root"
go build -o "$bin" ./cmd/idem
if [ ! -f "$dir/batch.parquet" ]; then
	go test ./internal/run -count=1 -run '^TestVersionedChangesGenerateBenchmark$' -vc.gen="$dir" -vc.rows="$rows" >/dev/null
fi
for variant in plain replica; do
	work="$dir/$variant"
	rm -rf "$work" && mkdir -p "$work"
	sed "s#^database = .*#database = \"$work/idem.duckdb\"#" "$dir/job.toml" >"$work/job.toml"
	grep -q '^database' "$work/job.toml" || sed -i "1i database = \"$work/idem.duckdb\"" "$work/job.toml"
	if [ "$variant" = replica ]; then
		printf '\n[duckdb]\nread_replica = true\n' >>"$work/job.toml"
	fi
	for b in base batch; do
		start=$(date +%s.%N)
		"$bin" run "$work/job.toml" --input "$dir/$b.parquet" --batch-id "$b" --json >"$work/$b.json"
		end=$(date +%s.%N)
		python3 - "$variant" "$b" "$start" "$end" "$work/$b.json" "$work/idem.duckdb" <<'PY'
import json, os, sys
variant, b, start, end, out, db = sys.argv[1:]
r = json.load(open(out))
rep = r.get("replica")
line = f"{variant:8} {b:6} wall {float(end) - float(start):6.2f}s  rows_in {r['rows_in']}  db {os.path.getsize(db) / 2**20:.0f} MB"
if rep:
    line += f"  replica {rep['seconds']:.2f}s {rep['bytes'] / 2**20:.0f} MB {rep['method']}{' ERROR ' + rep['error'] if rep.get('error') else ''}"
print(line)
PY
	done
done

#!/usr/bin/env bash
# Database + retained inputs after BATCHES batches of versioned changes,
# with and without [retention] keep_snapshots = KEEP and checkpoint_every
# = EVERY (0: none), side by side in one run, then the kept database's
# file after idem compact. A first batch creates ENTITIES entities; each later batch holds
# CHANGES changes (later versions of random entities, about 10% deletes).
# Prints, for both databases after every 10th batch and at the end, the
# bytes of the database file (+ WAL), of <db>.inputs/, and idem du's
# estimate of history, outcomes and target.
#
#   scripts/bench-expire.sh [BATCHES] [CHANGES] [ENTITIES] [KEEP] [DIR] [EVERY]
#   (defaults: 30 20000 100000 5, a temp dir, 5)
set -euo pipefail
batches=${1:-30}
changes=${2:-20000}
entities=${3:-100000}
keep=${4:-5}
dir=${5:-$(mktemp -d /tmp/idem-expire-bench.XXXXXX)}
every=${6:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${IDEM_BIN:-/tmp/idem-expire-bench}

cd "$root"
go build -o "$bin" ./cmd/idem
mkdir -p "$dir/in"
python3 - "$dir/in" "$batches" "$changes" "$entities" <<'PY'
import json, random, sys
out, batches, changes, entities = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(16)
version = [1] * entities
with open(f"{out}/b000.jsonl", "w") as f:
    for e in range(entities):
        f.write(json.dumps({"change_id": f"0-{e}", "entity_id": f"e{e:07d}", "source_version": 1, "operation": "upsert", "value": f"v0-{e}"}) + "\n")
for b in range(1, batches + 1):
    with open(f"{out}/b{b:03d}.jsonl", "w") as f:
        for i in range(changes):
            e = rng.randrange(entities)
            version[e] += 1
            op = "delete" if rng.random() < 0.1 else "upsert"
            f.write(json.dumps({"change_id": f"{b}-{i}", "entity_id": f"e{e:07d}", "source_version": version[e], "operation": op, "value": None if op == "delete" else f"v{b}-{i}"}) + "\n")
PY

job() { # name keep
	cat >"$dir/$1.toml" <<TOML
name = "trips"
pipeline = "versioned_changes"
transform_version = 1
schema_version = 1
database = "$1.duckdb"
[input]
path = "in/b000.jsonl"
[target]
table = "trips"
TOML
	if [ "$2" -gt 0 ]; then printf '[retention]\nkeep_snapshots = %d\n' "$2" >>"$dir/$1.toml"; fi
	if [ "$2" -gt 0 ] && [ "$every" -gt 0 ]; then printf 'checkpoint_every = %d\n' "$every" >>"$dir/$1.toml"; fi
}
job all 0
job kept "$keep"

bytes() { { du -sb "$@" 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}'; }
report() { # label
	for name in all kept; do
		local db="$dir/$name.duckdb"
		local file inputs
		file=$(bytes "$db" "$db.wal")
		inputs=$(bytes "$db.inputs")
		"$bin" du "$dir/$name.toml" --json >"$dir/$name.du.json"
		python3 - "$1" "$name" "$file" "$inputs" "$dir/$name.du.json" <<'PY'
import json, sys
label, name, file, inputs, du = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), json.load(open(sys.argv[5]))
b, mib = du["bytes"], 1 << 20
print(f"{label:>10} {name:>5}: file {file/mib:7.1f} MiB (used {du['used_bytes']/mib:6.1f}, free {du['free_bytes']/mib:6.1f})"
      f"  inputs {inputs/mib:6.1f} MiB  total {(file+inputs)/mib:7.1f} MiB"
      f" | du: target {b['target']/mib:5.1f} history {b['history']/mib:5.1f} outcomes {b['outcomes']/mib:5.1f} MiB"
      f", oldest kept {du['oldest_kept']}")
PY
	done
}

start=$(date +%s)
for b in $(seq 0 "$batches"); do
	in="$dir/in/b$(printf %03d "$b").jsonl"
	for name in all kept; do
		"$bin" run "$dir/$name.toml" --input "$in" --quiet >/dev/null
	done
	if [ $((b % 10)) -eq 0 ]; then report "batch $b"; fi
done
echo "inputs: $(bytes "$dir/in") bytes of JSONL in $((batches + 1)) files; $(($(date +%s) - start)) s"
"$bin" compact --db "$dir/kept.duckdb" >/dev/null
report "compacted"

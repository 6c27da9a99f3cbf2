#!/usr/bin/env bash
# Capture what the CLI prints for every example job, so that a change meant
# to keep behaviour (the layout issue) can be checked byte for byte:
#
#   scripts/cli-capture.sh OUT_DIR         # capture with the current tree
#   diff -r BEFORE_DIR AFTER_DIR           # compare two captures
#
# For each configs/*.toml, on a fresh database: plan, the runs its header
# comment lists (`#   idem run configs/...`, else one run), a second run,
# plan again, log, export of the latest snapshot (csv and jsonl), diff of
# snapshot 1 against the latest, rerun, each in human form and with --json,
# with its exit code; then the example project configs/trips/ (plan, run,
# --jobs 2, --select). Run times, temporary paths and build versions are
# replaced by fixed words; everything else is compared as printed. An
# example whose runs fail (rides needs a Kafka broker) is captured as it
# fails.
set -euo pipefail
out=${1:?usage: scripts/cli-capture.sh OUT_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/idem-capture.XXXXXX)
trap 'rm -rf "$work"' EXIT
bin="$work/idem"
(cd "$root" && go build -o "$bin" ./cmd/idem)

normalize() {
	sed -E -e "s#$work#WORK#g" -e "s#$root#ROOT#g" \
		-e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9:]+)?/TIME/g'
}

for cfg in "$root"/configs/*.toml; do
	name=$(basename "$cfg" .toml)
	db="$work/$name/idem.duckdb"
	mkdir -p "$work/$name"
	log="$out/$name.txt"
	: >"$log"
	idem() { # label args...
		local label=$1
		shift
		for form in human json; do
			local extra=()
			[ "$form" = json ] && extra=(--json)
			set +e
			(cd "$root" && "$bin" "$@" "${extra[@]}") >"$work/stdout" 2>"$work/stderr"
			local code=$?
			set -e
			{
				echo "## $label ($form) exit $code"
				normalize <"$work/stdout"
				echo "## stderr"
				normalize <"$work/stderr"
			} >>"$log"
			# A command that writes runs once, in its human form only.
			if [ "${writes:-}" = 1 ]; then break; fi
		done
	}
	rel="configs/$name.toml"
	writes=0 idem "plan" plan "$rel" --db "$db"
	mapfile -t steps < <(sed -n "s#^\#   idem run $rel##p" "$cfg" | sed -E 's/[[:space:]]+#.*//')
	if [ ${#steps[@]} -eq 0 ]; then steps=(""); fi
	i=0
	for s in "${steps[@]}"; do
		i=$((i + 1))
		# shellcheck disable=SC2086
		writes=1 idem "run $i$s" run "$rel" --db "$db" $s
	done
	writes=1 idem "run again" run "$rel" --db "$db" --json
	writes=0 idem "plan again" plan "$rel" --db "$db"
	writes=0 idem "log" log "$rel" --db "$db"
	for fmt in csv jsonl; do
		writes=0 idem "export $fmt" export "$rel" --db "$db" --out "$work/$name/export.$fmt"
		if [ -f "$work/$name/export.$fmt" ]; then
			sha256sum "$work/$name/export.$fmt" | sed "s#$work#WORK#" >>"$log"
		else
			echo "no export.$fmt" >>"$log"
		fi
	done
	latest=$(cd "$root" && "$bin" log "$rel" --db "$db" --json | grep -o '"snapshot":[0-9]*' | cut -d: -f2 | sort -n | tail -n 1)
	writes=0 idem "diff 1..latest" diff "$rel" --db "$db" --from 1 --to "${latest:-1}"
	writes=0 idem "rerun" rerun "$rel" --db "$db"
	echo "captured $name"
done

# The example project configs/trips/ (every job in one database under
# $work, by --db): plan, run, run again, plan again, and the same with
# --jobs 2 and --select, each in human form and with --json.
name=trips-project
db="$work/$name/chain.duckdb"
mkdir -p "$work/$name"
log="$out/$name.txt"
: >"$log"
writes=0 idem "plan" plan configs/trips/ --db "$db"
writes=1 idem "run" run configs/trips/ --db "$db"
writes=1 idem "run again" run configs/trips/ --db "$db" --json
writes=1 idem "run again, --jobs 2" run configs/trips/ --db "$db" --jobs 2
writes=0 idem "plan again" plan configs/trips/ --db "$db"
writes=0 idem "plan --select trips_clean+" plan configs/trips/ --db "$db" --select trips_clean+
writes=1 idem "run --select +trips_clean" run configs/trips/ --db "$db" --select +trips_clean --json
echo "captured $name"

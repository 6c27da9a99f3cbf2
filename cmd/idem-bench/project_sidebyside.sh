#!/bin/bash
# Side by side on the project case's generated project: several idem
# builds alternated in each repetition, with the floor beside them, every
# phase from the same state (docs/benchmarks.md, "Guard cache and parallel
# project runs"). Run `go run ./cmd/idem-bench -cases project` once first
# to generate the project, and build the floor:
#
#   go build -o /tmp/idem-bench ./cmd/idem-bench
#   git stash; go build -tags idembench -o /tmp/idem-old ./cmd/idem; git stash pop
#   go build -tags idembench -o /tmp/idem-new ./cmd/idem
#   BUILDS="old new new_t1" cmd/idem-bench/project_sidebyside.sh 3
#
# A build NAME runs /tmp/idem-NAME; NAME_t1 runs it with --threads 1,
# NAME_j1 with --jobs 1. Prints the median wall and CPU (user + system,
# from /usr/bin/time) of each phase and build.
REPS=${1:-3}
BUILDS=${BUILDS:-old new}
BIN=${BIN:-/tmp}
B=${PROJECT:-${TMPDIR:-/tmp}/idem-bench/project-60000}
W=$(mktemp -d)
cp -r $B/proj $W/proj; rm -rf $W/proj/data
P=$W/proj
drop13() { for f in customers orders items; do if [ "$1" = in ]; then cp $B/month13/raw/$f/*.csv $P/raw/$f/; else rm -f $P/raw/$f/$(basename $B/month13/raw/$f/*.csv); fi; done; }
cmd() { echo $BIN/idem-${1%%_*}; }
args() { case $1 in *_j1) echo --jobs 1;; *_t1) echo --threads 1;; esac; }
t() { local label=$1; shift; /usr/bin/time -o $W/time.txt -f "$label %e %U %S" "$@" >/dev/null 2>>$W/err.txt || echo "FAILED $label"; cat $W/time.txt >> $W/times.txt; }
floor() { t "$1 floor" $BIN/idem-bench child project --project $P --phase $2 --db $W/floor.duckdb; }
for r in $(seq $REPS); do
  drop13 out
  for b in $BUILDS; do rm -rf $P/data; t "full $b" $(cmd $b) run $P --quiet $(args $b); rm -rf $W/d12-$b; cp -r $P/data $W/d12-$b; done
  rm -f $W/floor.duckdb*; floor full full; cp $W/floor.duckdb $W/floor12.duckdb
  drop13 in
  for b in $BUILDS; do rm -rf $P/data; cp -r $W/d12-$b $P/data; t "nightly $b" $(cmd $b) run $P --quiet $(args $b); rm -rf $W/d13-$b; cp -r $P/data $W/d13-$b; done
  rm -f $W/floor.duckdb*; cp $W/floor12.duckdb $W/floor.duckdb; floor nightly nightly
  # Each build's no-op and plan on its own nightly's database: builds of
  # other catalog versions cannot read each other's.
  for b in $BUILDS; do rm -rf $P/data; cp -r $W/d13-$b $P/data; t "noop $b" $(cmd $b) run $P --quiet $(args $b); done
  floor noop noop
  for b in $BUILDS; do rm -rf $P/data; cp -r $W/d13-$b $P/data; t "plan $b" $(cmd $b) plan $P --quiet; done
  floor plan noop
done
for ph in full nightly noop plan; do for b in $BUILDS floor; do
  grep "^$ph $b " $W/times.txt | awk '{print $3, $4+$5}' > $W/x.txt
  n=$(wc -l < $W/x.txt); mid=$(( (n+1)/2 ))
  echo "$ph $b: wall median $(cut -d' ' -f1 $W/x.txt | sort -n | sed -n ${mid}p) s, CPU median $(cut -d' ' -f2 $W/x.txt | sort -n | sed -n ${mid}p) s, CPU per rep $(cut -d' ' -f2 $W/x.txt | tr '\n' ' ')"
done; done
rm -rf $W

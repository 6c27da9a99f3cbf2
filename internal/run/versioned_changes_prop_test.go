package run_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/catalog"
	"github.com/idem-dev/idem/internal/report"

	"github.com/stretchr/testify/require"
)

var (
	vcScenarios = flag.Int("vc.scenarios", 0, "random scenarios of TestVersionedChangesProperty (0: 6, or 2000 with IDEM_LONG=1)")
	vcWorkers   = flag.Int("vc.workers", 4, "scenarios of TestVersionedChangesProperty run side by side")
	vcSeed      = flag.Uint64("vc.seed", 0, "seed of the first scenario of TestVersionedChangesProperty (0: from the clock); scenario i uses seed+i")
)

// TestVersionedChangesProperty applies random scenarios with the real runner
// and checks, after every batch, the target and the _active view against an
// event-by-event fold and every row's outcome against the batch rules of the
// Go model; at the end, a pinned read of every snapshot against the fold as
// it stood then. A failure prints the scenario's seed, its batches and the
// command that replays it.
//
//	go test ./internal/run -run TestVersionedChangesProperty -vc.scenarios=5000
func TestVersionedChangesProperty(t *testing.T) {
	t.Parallel()
	scenarios := *vcScenarios
	if scenarios == 0 {
		// The default run is a short version (each scenario runs 2 to 6
		// batches, about a CPU second); the long run stays behind IDEM_LONG=1
		// (docs/reliability.md).
		scenarios = 6
		if os.Getenv("IDEM_LONG") == "1" {
			scenarios = 2000
		}
	}
	seen := vcRunScenarios(t, *vcSeed, scenarios, vcRunScenario)
	// The generator must keep reaching every outcome (erased is another
	// test's business), or the property says little.
	if *vcScenarios >= 100 {
		vcRequireEveryOutcome(t, seen)
	}
}

// vcStep is one run of a scenario.
type vcStep struct {
	batchID string
	path    string
	rows    []vcRow
	retry   bool // the same batch id and file again: already_committed
}

// vcRunScenario runs one scenario and returns the outcomes it saw.
func vcRunScenario(t *testing.T, seed uint64) map[string]int64 {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	e := newVCEnv(t)
	g := newVCGen(rng)
	var done []vcStep
	var log strings.Builder
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, batch %d: %s\nreplay: go test ./internal/run -run 'TestVersionedChangesProperty/seed=%d$' -vc.seed=%d -vc.scenarios=1 -v\nbatches so far:\n%s",
			seed, step, fmt.Sprintf(format, args...), seed, seed, log.String())
	}
	model := vcModel{}
	seen := map[string]int64{}
	pinned := map[int64][]vcStored{} // the model's state at every snapshot
	batches := 2 + rng.IntN(5)
	for step := range batches {
		var st vcStep
		switch k := rng.IntN(10); {
		case k == 0 && len(done) > 0:
			// The last batch again under its own id.
			st = done[len(done)-1]
			st.retry = true
		case k <= 2 && len(done) > 0:
			// An older batch replayed under a new id.
			old := done[rng.IntN(len(done))]
			st = vcStep{batchID: fmt.Sprintf("b%02d-replay-of-%s", step, old.batchID), path: old.path, rows: old.rows}
		default:
			st.rows = g.batch(step)
			st.batchID = fmt.Sprintf("b%02d", step)
			st.path = e.file("jsonl", vcJSONL(st.rows))
		}
		fmt.Fprintf(&log, "-- %s (retry %v)\n%s", st.batchID, st.retry, vcJSONL(st.rows))

		var outcomesBefore int64
		if st.retry {
			outcomesBefore = e.outcomeRowCount()
		}
		res, err := e.apply(st.path, st.batchID)
		if err != nil {
			fail(step, "apply: %v", err)
		}
		if st.retry {
			if res.Decision != report.DecisionAlreadyCommitted {
				fail(step, "retry of %s: decision %s, want %s", st.batchID, res.Decision, report.DecisionAlreadyCommitted)
			}
			if n := e.outcomeRowCount(); n != outcomesBefore {
				fail(step, "retry of %s wrote %d outcome rows", st.batchID, n-outcomesBefore)
			}
		} else {
			texts := vcRowTexts(st.rows)
			labels, batchState := model.batchOutcomes(texts)
			model = model.fold(texts)
			// The two halves of the model must agree before the pipeline
			// is judged against them.
			require.Equal(t, model.rows(), batchState.rows(), "seed %d: the model's batch rules and fold disagree", seed)

			if res.Decision != report.DecisionApplied {
				fail(step, "decision %s, want applied", res.Decision)
			}
			if res.RowsIn != int64(len(st.rows)) {
				fail(step, "rows_in %d, want %d", res.RowsIn, len(st.rows))
			}
			var sum int64
			for _, n := range res.Outcomes {
				sum += n
			}
			if sum != res.RowsIn {
				fail(step, "outcomes %v sum to %d, rows_in is %d", res.Outcomes, sum, res.RowsIn)
			}
			if want := vcCountOutcomes(labels); !vcEqualCounts(want, res.Outcomes) {
				fail(step, "outcome counts %v, want %v", res.Outcomes, want)
			}
			want := make([]vcOutcome, len(texts))
			for i := range texts {
				want[i] = vcOutcome{Row: texts[i], Outcome: labels[i]}
			}
			vcSortOutcomes(want)
			if got := e.outcomes(st.batchID); !vcEqualOutcomes(got, want) {
				fail(step, "outcomes differ (- want, + got):\n%s", vcDiffLines(vcStringsOf(want), vcStringsOf(got)))
			}
			for _, l := range labels {
				seen[l]++
			}
			done = append(done, st)
		}
		if got, want := e.state(), model.rows(); !vcEqualStored(got, want) {
			fail(step, "target differs from the fold (- want, + got):\n%s", vcDiffLines(vcStringsOf(want), vcStringsOf(got)))
		}
		if got, want := e.active(), model.activeRows(); !vcEqualStored(got, want) {
			fail(step, "active view differs (- want, + got):\n%s", vcDiffLines(vcStringsOf(want), vcStringsOf(got)))
		}
		pinned[res.Snapshot] = model.rows()
	}
	// Checkpoint by checkpoint: a pinned read of every snapshot still
	// equals the fold as it stood after that batch.
	for snap, want := range pinned {
		q, err := catalog.PinnedSelect(context.Background(), e.db.SQL(), e.j.Name, vcTargetColumns, snap)
		if err != nil {
			fail(batches, "pinned read of snapshot %d: %v", snap, err)
		}
		got := e.readStored(q + " ORDER BY entity_id")
		if !vcEqualStored(got, want) {
			fail(batches, "pinned read of snapshot %d differs from the fold (- want, + got):\n%s", snap, vcDiffLines(vcStringsOf(want), vcStringsOf(got)))
		}
	}
	return seen
}

var vcTargetColumns = []catalog.TargetColumn{
	{Name: "entity_id", Type: "VARCHAR"}, {Name: "source_version", Type: "BIGINT"},
	{Name: "status", Type: "VARCHAR"}, {Name: "value", Type: "VARCHAR"},
}

func vcEqualCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func vcEqualOutcomes(a, b []vcOutcome) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].String() != b[i].String() {
			return false
		}
	}
	return true
}

func vcEqualStored(a, b []vcStored) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].String() != b[i].String() {
			return false
		}
	}
	return true
}

func vcStringsOf[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

// vcDiffLines is a small line diff (longest common subsequence) for failure
// messages: "  " common, "- " only in want, "+ " only in got.
func vcDiffLines(want, got []string) string {
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var lines []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			lines = append(lines, "  "+want[i])
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
			lines = append(lines, "+ "+got[j])
			j++
		default:
			lines = append(lines, "- "+want[i])
			i++
		}
	}
	// Keep three lines of context around each change.
	const around = 3
	keep := make([]bool, len(lines))
	for k, l := range lines {
		if l[0] != ' ' {
			for c := max(0, k-around); c <= min(len(lines)-1, k+around); c++ {
				keep[c] = true
			}
		}
	}
	var b strings.Builder
	for k, l := range lines {
		switch {
		case keep[k]:
			b.WriteString(l + "\n")
		case k == 0 || keep[k-1]:
			b.WriteString("  ...\n")
		}
	}
	return b.String()
}

// vcGen makes random batches over a few entities and versions, so that
// repeats, equal-version conflicts, stale replays and deletes of unknown
// entities are frequent, and every kind of invalid field appears.
type vcGen struct {
	rng      *rand.Rand
	entities []string
	maxV     int64
}

func newVCGen(rng *rand.Rand) *vcGen {
	n := 1 + rng.IntN(5)
	entities := make([]string, n)
	for i := range entities {
		entities[i] = fmt.Sprintf("e%d", i+1)
	}
	// An entity id that is a JSON number reads as the same text as a
	// string, and one with inner spaces is not blank.
	if rng.IntN(3) == 0 {
		entities = append(entities, "7")
	}
	if rng.IntN(4) == 0 {
		entities = append(entities, " e1")
	}
	return &vcGen{rng: rng, entities: entities, maxV: int64(2 + rng.IntN(4))}
}

func (g *vcGen) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

func (g *vcGen) batch(step int) []vcRow {
	r := g.rng
	var n int
	switch k := r.IntN(12); {
	case k == 0:
		n = 0
	case k <= 2:
		n = 1
	default:
		n = 2 + r.IntN(11)
	}
	rows := make([]vcRow, 0, n)
	for i := range n {
		if len(rows) > 0 && r.IntN(5) == 0 {
			// An exact repeat of an earlier row of this batch, under its
			// own change id or the same one.
			rep := rows[r.IntN(len(rows))]
			if r.IntN(2) == 0 {
				rep[0] = vcJSONStr(fmt.Sprintf("c%d-%d", step, i))
			}
			rows = append(rows, rep)
			continue
		}
		rows = append(rows, g.row(step, i))
	}
	return rows
}

// row makes one row; each field is invalid with a small probability, so
// rows failing several rules test the order of the rules.
func (g *vcGen) row(step, i int) vcRow {
	r := g.rng
	var row vcRow
	if r.IntN(12) == 0 {
		row[0] = g.pick(`""`, `"  "`, `"\t\u000b"`, "null", "", `"\u00a0"`)
	} else {
		row[0] = g.pick(vcJSONStr(fmt.Sprintf("c%d-%d", step, i)), fmt.Sprint(step*100+i))
	}
	if r.IntN(12) == 0 {
		row[1] = g.pick(`""`, `"   "`, `"\n"`, `"\u000b"`, "null", "", `"\u00a0"`)
	} else {
		e := g.entities[r.IntN(len(g.entities))]
		if e == "7" && r.IntN(2) == 0 {
			row[1] = "7"
		} else {
			row[1] = vcJSONStr(e)
		}
	}
	if r.IntN(8) == 0 {
		row[2] = g.pick("0", "-1", "-3", "1.5", "null", "", `"1.5"`, `"0x10"`, `"seven"`, `""`, `" "`,
			`"9223372036854775808"`, `"1e2"`, `"7_000"`, `"+-1"`, `"- 1"`, `"0"`, `"+0"`, `"2 3"`, `"\u00a02"`, `"２"`,
			"9223372036854775808", "12345678901234567890")
	} else {
		v := 1 + r.Int64N(g.maxV)
		if r.IntN(200) == 0 {
			v = math.MaxInt64 // the highest version there is: nothing replaces it
		}
		switch r.IntN(10) {
		case 0:
			row[2] = vcJSONStr(fmt.Sprint(v))
		case 1:
			row[2] = vcJSONStr(g.pick(" ", "\t", "+", "00", " +", "\v") + fmt.Sprint(v) + g.pick("", " ", "\n", "\v"))
		default:
			row[2] = fmt.Sprint(v)
		}
	}
	op := "upsert"
	if r.IntN(3) == 0 {
		op = "delete"
	}
	if r.IntN(12) == 0 {
		row[3] = g.pick(`"merge"`, `"UPSERT"`, `" upsert"`, `"delete "`, `""`, "null", "", "1")
	} else {
		row[3] = vcJSONStr(op)
	}
	payloadBad := r.IntN(10) == 0
	switch {
	case (op == "delete") != payloadBad:
		// a delete, or an upsert without a value
		row[4] = g.pick("null", "")
	default:
		row[4] = g.pick(`"a"`, `"b"`, `"a"`, `"c"`, `""`, `" a"`, "5")
	}
	return row
}

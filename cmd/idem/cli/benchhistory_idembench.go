//go:build idembench

package cli

import "github.com/idem-dev/idem/runner"

// benchNoHistory is IDEM_BENCH_NO_HISTORY=1 in the binary cmd/idem-bench
// builds (-tags idembench): runs then write no history row, the floor the
// history case measures history against. Pinned reads of the snapshots such
// runs commit are wrong, so the idem that ships never reads the variable
// (benchhistory.go).
func (a *app) benchNoHistory() bool { return a.getenv("IDEM_BENCH_NO_HISTORY") == "1" }

// benchOptions are runner.WithoutHistory under IDEM_BENCH_NO_HISTORY=1.
func (a *app) benchOptions() []runner.Option {
	if a.benchNoHistory() {
		return []runner.Option{runner.WithoutHistory()}
	}
	return nil
}

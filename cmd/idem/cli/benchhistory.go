//go:build !idembench

package cli

import "github.com/idem-dev/idem/runner"

// benchNoHistory is false in the idem that ships: IDEM_BENCH_NO_HISTORY is
// read only by the binary cmd/idem-bench builds with -tags idembench (see
// benchhistory_idembench.go), since snapshots committed without history
// give wrong pinned exports and reruns afterwards.
func (a *app) benchNoHistory() bool { return false }

// benchOptions are no runner options: the idem that ships writes every
// history row.
func (a *app) benchOptions() []runner.Option { return nil }

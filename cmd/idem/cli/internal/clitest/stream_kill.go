package clitest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// KillFollow runs a stream job's follower under SIGKILLs: a first
// `idem run JOB --follow --max-batches 1` commits one batch unharmed, and
// how long it took (start, open, read, apply, commit) scales the random
// kill delays, so that on a slow machine the killed processes commit
// batches too; then trials followers are killed at the commit's fault
// points (the first four) and at random delays; once produced returns (the source holds
// every record), a last follower runs until idle. It returns how many
// trials ended in a SIGKILL, the first batch's time and the batches the
// last follower committed. flags are added to every run (--allow-gap).
func KillFollow(t *testing.T, work, jobPath string, trials int, produced func(), flags ...string) (killed int, one time.Duration, after int) {
	t.Helper()
	return KillFollowDuring(t, work, jobPath, trials, nil, produced, flags...)
}

// KillFollowDuring is KillFollow that also calls during(trial), when not
// nil, in a goroutine of its own while each trial's follower runs, and
// waits for it to return before the next trial starts: what it does to
// the source (records produced, broker faults) happens while a follower
// reads, and is paced by the trials.
func KillFollowDuring(t *testing.T, work, jobPath string, trials int, during func(trial int), produced func(), flags ...string) (killed int, one time.Duration, after int) {
	t.Helper()
	args := func(more ...string) []string {
		return append(append([]string{"run", jobPath, "--follow", "--json"}, flags...), more...)
	}
	start := time.Now()
	r := KillCLI(t, work, "", 0, args("--max-batches", "1")...)
	require.Equal(t, 0, r.Code, r.Stderr)
	one = time.Since(start)
	faults := []string{"before_commit", "after_commit", "checkpoint", "after_target"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 0; i < trials; i++ {
		fault := ""
		if i < len(faults) {
			fault = faults[i]
		}
		delay := one/4 + time.Duration(rng.Int64N(int64(2*one)))
		var ran chan struct{}
		if during != nil {
			ran = make(chan struct{})
			go func() {
				defer close(ran)
				during(i)
			}()
		}
		r := KillCLI(t, work, fault, delay, args()...)
		if ran != nil {
			<-ran
		}
		if r.Killed {
			killed++
		} else {
			require.Equal(t, 0, r.Code, "trial %d (fault %q): %s", i, fault, r.Stderr)
		}
	}
	produced()
	r = KillCLI(t, work, "", 0, args("--idle-exit", "1500ms")...)
	require.Equal(t, 0, r.Code, r.Stderr)
	return killed, one, len(BatchLines(t, r.Stdout))
}

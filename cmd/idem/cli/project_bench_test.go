package cli

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
)

// BenchmarkUnchangedProject is `idem run DIR` on the trips chain (four
// jobs, one database) when nothing changed: every job skipped. In-process,
// so it leaves out the process start (about 30 ms).
func BenchmarkUnchangedProject(b *testing.B) {
	t := b
	dir := chainProject(t)
	rng := rand.New(rand.NewPCG(1, 1))
	latest := map[int64]landingTrip{}
	writeLanding(t, dir, "2026-01-01.jsonl", rng, 1000, latest)
	writeLanding(t, dir, "2026-01-02.jsonl", rng, 1000, latest)
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"run", dir}, &out, &errOut); code != 0 {
		b.Fatalf("first run: exit %d: %s", code, errOut.String())
	}
	b.ResetTimer()
	for b.Loop() {
		out.Reset()
		if code := Main(context.Background(), []string{"run", dir}, &out, &errOut); code != 0 {
			b.Fatalf("exit %d: %s", code, errOut.String())
		}
	}
}

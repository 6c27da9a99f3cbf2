package runner

import "time"

// Progress receives progress events of long work. Its zero value is silent;
// the CLI fills it in when stderr is a terminal.
type Progress struct {
	// Step is called when a named step starts; the returned func is called
	// when it ends. Query progress arrives through Percent in between.
	Step func(name string) (done func(elapsed time.Duration))
	// Bytes reports bytes done of total for hashing, copying and exporting.
	Bytes func(label string, done, total int64)
}

func (p Progress) step(name string) func() {
	if p.Step == nil {
		return func() {}
	}
	start := time.Now()
	done := p.Step(name)
	return func() {
		if done != nil {
			done(time.Since(start))
		}
	}
}

func (p Progress) bytes(label string, done, total int64) {
	if p.Bytes != nil {
		p.Bytes(label, done, total)
	}
}

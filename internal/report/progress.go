package report

import "time"

// Progress receives progress events of long work. Its zero value is silent;
// the CLI fills it in when stderr is a terminal.
type Progress struct {
	// Step is called when a named step starts; the returned func is called
	// when it ends. Query progress arrives through Percent in between.
	Step func(name string) (done func(elapsed time.Duration))
	// Percent reports how far DuckDB is through the statement the running
	// step executes (0-100; a step of several statements starts again at 0
	// for each). It is called only between a Step and its done.
	Percent func(pct float64)
	// Bytes reports bytes done of total for hashing, copying and exporting.
	Bytes func(label string, done, total int64)
	// Timings asks for the run's phases as steps too, not only its
	// long steps (IDEM_TIMINGS).
	Timings bool

	// query reads the running statement's percentage, or -1 (see
	// WithQuery).
	query func() float64
}

// PercentPoll is how often a step's query progress is read.
const PercentPoll = 200 * time.Millisecond

// Start reports that the step name starts and returns the func that
// reports its end. Between the two, Percent polls the running statement
// when p has a query poll (WithQuery).
func (p Progress) Start(name string) func() {
	if p.Step == nil {
		return func() {}
	}
	start := time.Now()
	done := p.Step(name)
	stop, stopped := make(chan struct{}), make(chan struct{})
	if p.query != nil && p.Percent != nil {
		go p.pollPercent(stop, stopped)
	} else {
		close(stopped)
	}
	return func() {
		close(stop)
		<-stopped // no Percent after done
		if done != nil {
			done(time.Since(start))
		}
	}
}

// pollPercent reports the running statement's percentage when it changes.
func (p Progress) pollPercent(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(PercentPoll)
	defer t.Stop()
	last := -1.0
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if pct := p.query(); pct >= 0 && pct != last {
				last = pct
				p.Percent(min(pct, 100))
			}
		}
	}
}

// Count reports bytes done of total for label, when p has a Bytes hook.
func (p Progress) Count(label string, done, total int64) {
	if p.Bytes != nil {
		p.Bytes(label, done, total)
	}
}

// WithQuery returns p polling query, which reads the running statement's
// percentage (or -1), while a step runs.
func (p Progress) WithQuery(query func() float64) Progress {
	p.query = query
	return p
}

// Queries reports whether p polls a statement's percentage.
func (p Progress) Queries() bool { return p.query != nil }

// Command testsummary reads the output of `go test -json` on stdin and
// prints what a human reads from `go test` without -v: build errors, the
// output of every failed test, and each package's ok/FAIL line as it ends.
// At the end it prints the slowest top-level tests and exits 1 if a test,
// a package or a build failed. A test's time is its elapsed time, or, for a
// test with parallel subtests (whose elapsed time counts their waits for a
// free slot), the sum of its subtests' own. .ci/run uses it as
//
//	go test -json ./... | tee test.json | go run ./scripts/testsummary
//
// and it summarises a saved file the same way:
//
//	go run ./scripts/testsummary -slowest 20 < test.json
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json), build events included.
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

type testID struct{ pkg, name string }

type result struct {
	id      testID
	action  string
	elapsed float64
	work    float64 // the leaves' elapsed time, summed
}

func main() {
	slowest := flag.Int("slowest", 10, "how many of the slowest top-level tests to print")
	flag.Parse()
	failed, err := summarise(os.Stdin, os.Stdout, *slowest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarise copies the human part of the event stream in to w and then
// prints the n slowest top-level tests. It reports whether anything failed.
func summarise(in io.Reader, w io.Writer, n int) (bool, error) {
	var (
		failed  bool
		outputs = map[testID][]string{}
		results []result
		elapsed = map[testID]float64{}
		parent  = map[testID]bool{} // has subtests
		waits   = map[testID]bool{} // has parallel subtests
		tests   int
		skipped int
		fails   []testID
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go vet output, a panic of go test itself): pass it on.
			fmt.Fprintln(w, string(line))
			continue
		}
		id := testID{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			failed = true
		case "pause":
			if i := strings.LastIndex(e.Test, "/"); i >= 0 {
				waits[testID{e.Package, e.Test[:i]}] = true
			}
		case "output":
			if e.Test == "" {
				if skipPackageLine(e.Output) {
					continue
				}
				fmt.Fprint(w, e.Output)
				continue
			}
			outputs[id] = append(outputs[id], e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					failed = true
				}
				continue
			}
			tests++
			switch e.Action {
			case "fail":
				failed = true
				fails = append(fails, id)
				for _, o := range outputs[id] {
					fmt.Fprint(w, o)
				}
			case "skip":
				skipped++
			}
			delete(outputs, id)
			elapsed[id] = e.Elapsed
			if i := strings.LastIndex(e.Test, "/"); i >= 0 {
				parent[testID{e.Package, e.Test[:i]}] = true
			} else {
				results = append(results, result{id: id, action: e.Action, elapsed: e.Elapsed})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	// Tests still open when the stream ended: a package killed by its timeout
	// or a crash. Their output is what there is to read.
	for id, out := range outputs {
		failed = true
		fmt.Fprintf(w, "--- UNFINISHED %s %s\n", id.pkg, id.name)
		for _, o := range out {
			fmt.Fprint(w, o)
		}
	}

	fmt.Fprintf(w, "\n%d tests and subtests ran, %d skipped, %d failed\n", tests, skipped, len(fails))
	for _, id := range fails {
		fmt.Fprintf(w, "FAILED %s %s\n", id.pkg, id.name)
	}
	for i, r := range results {
		results[i].work = r.elapsed
		if parent[r.id] && hasWaits(waits, r.id) {
			results[i].work = 0
			for id, el := range elapsed {
				if id.pkg == r.id.pkg && strings.HasPrefix(id.name, r.id.name+"/") && !parent[id] {
					results[i].work += el
				}
			}
		}
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].work > results[j].work })
	if n > len(results) {
		n = len(results)
	}
	if n > 0 {
		fmt.Fprintf(w, "\nslowest %d top-level tests (time; elapsed as go test reports it, parallel subtests' waits included):\n", n)
		for _, r := range results[:n] {
			fmt.Fprintf(w, "%8.2fs %8.2fs  %-4s %s %s\n", r.work, r.elapsed, r.action, shortPkg(r.id.pkg), r.id.name)
		}
	}
	return failed, nil
}

// skipPackageLine drops the package-level lines that -json adds and plain
// `go test` does not print (PASS before ok, coverage-less noise).
func skipPackageLine(s string) bool {
	t := strings.TrimSpace(s)
	return t == "PASS" || t == "FAIL" || t == "testing: warning: no tests to run"
}

// hasWaits reports whether the test id or one of its subtests has
// parallel subtests.
func hasWaits(waits map[testID]bool, id testID) bool {
	for w := range waits {
		if w.pkg == id.pkg && (w.name == id.name || strings.HasPrefix(w.name, id.name+"/")) {
			return true
		}
	}
	return false
}

func shortPkg(p string) string {
	if i := strings.Index(p, "/idem/"); i >= 0 {
		return p[i+len("/idem/"):]
	}
	return p
}

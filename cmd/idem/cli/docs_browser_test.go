package cli

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/cmd/idem/cli/internal/clitest"
)

// chromium is Debian's Chromium, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// browseSite opens the page at path (from disk, file://) in headless
// Chromium and checks it as a reader uses it: the graph has a box for each
// of jobs (in run order) and an arrow per upstream link; the first job's
// panel shows at first; clicking trips_daily's box shows its panel alone,
// with its columns; the zones description shows as the text it is; and
// nothing reaches the console (no error, no exception, no refused script or
// load), nor opens a dialog. Without Chromium the test is skipped, unless
// CI is set: CI must run it. With -update it rewrites docs/img/docs-site.png.
func browseSite(t *testing.T, path string, jobs []string) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if why := os.Getenv("IDEM_NO_BROWSER"); why != "" {
			t.Skipf("%s is missing and cannot be installed here: %s", chromium, why)
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing and CI is set: CI must run the browser test (.ci/run installs Debian's chromium)", chromium)
		}
		t.Skipf("%s is missing: apt-get install chromium to run the browser test of idem docs", chromium)
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 1000),
	)
	defer cancel()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()

	var mu sync.Mutex
	var problems []string
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	// Listen starts the browser; the events come from the tab's loop, so the
	// func only notes them.
	require.NoError(t, chromedp.Listen(browser, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				note("console %s: %v", e.Type, e.Args)
			}
		case *runtime.EventExceptionThrown:
			note("exception: %s %v", e.ExceptionDetails.Text, e.ExceptionDetails.Exception)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				note("log %s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL)
			}
		case *page.EventJavascriptDialogOpening:
			note("dialog %s: %s", e.Type, e.Message)
		}
	}))
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	run := func(a chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, a))
	}
	strs := func(js string) []string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
		require.NoError(t, err, js)
		return v
	}
	visible := `Array.from(document.querySelectorAll('section.job')).filter(e => getComputedStyle(e).display !== 'none').map(e => e.id)`

	run(chromedp.Navigate("file://" + path))
	require.Equal(t, []string{"trips · idem docs", "trips"}, strs(`[document.title, document.querySelector('header h1').textContent]`),
		"the project's name (its folder's) is the page's title")
	var ids []string
	for _, j := range jobs {
		ids = append(ids, "job-"+j)
	}
	require.ElementsMatch(t, ids, strs(`Array.from(document.querySelectorAll('svg a.node')).map(a => a.getAttribute('data-job'))`), "a box per job")
	require.Len(t, strs(`Array.from(document.querySelectorAll('svg path.edge')).map(p => p.getAttribute('d'))`), 3, "an arrow per upstream link")
	require.Equal(t, ids[:1], strs(visible), "the first job's panel at first")

	run(chromedp.Click(chromedp.CSS(`svg a.node[data-job="job-trips_daily"]`)))
	run(chromedp.WaitVisible(chromedp.CSS(`#job-trips_daily table.columns`)))
	require.Equal(t, []string{"job-trips_daily"}, strs(visible), "one panel at a time")
	require.Equal(t, []string{"pickup_day", "zone", "trips", "fares"},
		strs(`Array.from(document.querySelectorAll('#job-trips_daily table.columns tbody td:first-child')).map(td => td.textContent)`), "its columns")
	require.Equal(t, []string{"#job-trips_daily", "node warn selected"},
		strs(`[location.hash, document.querySelector('svg a.node[data-job="job-trips_daily"]').getAttribute('class')]`))

	run(chromedp.Click(chromedp.CSS(`nav a[data-job="job-zones"]`)))
	run(chromedp.WaitVisible(chromedp.CSS(`#job-zones .desc`)))
	require.Equal(t, []string{docsDescription, "0"}, strs(`[document.querySelector('#job-zones .desc').textContent, String(document.querySelectorAll('img').length)]`),
		"the description is text, not markup")

	searchSite(t, ctx, run, strs, visible)

	run(chromedp.Click(chromedp.CSS(`svg a.node[data-job="job-trips_daily"]`)))
	run(chromedp.WaitVisible(chromedp.CSS(`#job-trips_daily table.columns`)))
	if *clitest.UpdateSnapshotGolden {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0); true`))
		require.NoError(t, err)
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(repoPath(t, "docs/img/docs-site.png"), png, 0o644))
	}

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, problems, "the page writes nothing to the console")
}

// searchSite types into the page's search box as a reader does and checks
// the results: jobs and columns found by name and by description (the job
// file's [columns] and a model's comments), jobs' names first, then
// columns' names, then descriptions; a click on a result shows that job's
// panel with the column's row marked; Escape clears the results.
func searchSite(t *testing.T, ctx context.Context, run func(chromedp.Action[chromedp.Void]), strs func(string) []string, visible string) {
	t.Helper()
	results := `Array.from(document.querySelectorAll('#search-results a.result')).map(a => a.firstChild.textContent + ' ' + a.getAttribute('data-result') + (a.querySelector('.text') ? ': ' + a.querySelector('.text').textContent : ''))`
	heads := `Array.from(document.querySelectorAll('#search-results a.result')).map(a => a.firstChild.textContent + ' ' + a.getAttribute('data-result'))`
	query := func(q string) []string {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('search').value = ''; true`))
		require.NoError(t, err)
		run(chromedp.SendKeys(chromedp.CSS(`#search`), q))
		return strs(results)
	}

	query("trips")
	require.Equal(t, []string{"trips job", "trips_clean job", "trips_daily job", "trips_daily.trips column"}, strs(heads),
		"jobs by name first, then columns by name")
	query("zone")
	require.Equal(t, []string{"zones job", "trips.zone_id column", "zones.zone_id column", "zones.zone column", "trips_clean.zone column", "trips_daily.zone column",
		"trips_clean job", "trips_daily job", "trips_daily.trips column"}, strs(heads),
		"jobs by name, columns by name, then by description, each in page order")
	require.Equal(t, []string{"trips_daily.fares column"}, func() []string { query("trips_daily.fa"); return strs(heads) }(), "job.column")
	require.Equal(t, []string{"zones.borough column: the New York borough", "trips_clean.borough column"}, query("borough"))
	require.Equal(t, []string{"trips_daily.fares column: the sum of their fares, in dollars"}, query("dollars"),
		"found by the job file's description")
	require.Equal(t, []string{"trips_daily.trips column: clean trips picked up that day in the zone"}, query("picked day"),
		"every word matches, in any order")
	require.Empty(t, query("no such thing"))
	require.Equal(t, []string{"nothing found"}, strs(`[document.getElementById('search-count').textContent]`))

	require.Equal(t, []string{"zones.borough column: the New York borough", "trips_clean.borough column"}, query("borough"))
	run(chromedp.Click(chromedp.CSS(`#search-results li:nth-child(2) a`)))
	run(chromedp.WaitVisible(chromedp.CSS(`#job-trips_clean table.columns`)))
	require.Equal(t, []string{"job-trips_clean"}, strs(visible), "the result's job panel, alone")
	require.Equal(t, []string{"borough"}, strs(`Array.from(document.querySelectorAll('#job-trips_clean tr.hit td:first-child')).map(td => td.textContent)`),
		"the column's row marked")
	require.Equal(t, []string{"#job-trips_clean"}, strs(`[location.hash]`))

	run(chromedp.KeyEvent("\x1b"))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('search').focus(); true`))
	require.NoError(t, err)
	run(chromedp.KeyEvent("\x1b"))
	require.Empty(t, strs(results), "Escape clears the search")
	require.Equal(t, []string{"true"}, strs(`[String(document.getElementById('search-results').hidden)]`))
}

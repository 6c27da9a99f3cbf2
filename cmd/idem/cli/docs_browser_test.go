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

package daemon

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// The summary's states as the page shows them, worst first (internal/web).
const (
	stateFailing   = "failing"
	stateFlapping  = "flapping"
	stateRegressed = "regressed"
	stateHealthy   = "healthy"
	statePending   = "pending"
)

var stateOrder = []string{stateFailing, stateFlapping, stateRegressed, stateHealthy, statePending}

// browser starts a headless chromium for the test and returns a chromedp
// context on its first tab. Without chromium the test is skipped, except in
// CI (CI=true), where that is a failure.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing in CI (CI=true): the real-browser test cannot run: %v", chromiumPath, err)
		}
		testtool.Skip(t, chromiumPath, "apt-get install chromium; make test installs it as root")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return ctx
}

// browserKey is every target's bearer token and browserHeader the secret
// value of an http_headers entry of each; no page may show either.
const (
	browserKey    = "sk-browser-test-5e1f0a9c7b"
	browserHeader = "hdr-browser-test-93d0c4e8"
)

// TestOnCallViewInBrowser runs the daemon against a healthy simulator, a
// closed port, a simulator that answers 500 to half its requests, one that
// stalls its streams and one at 4× its baseline's TTFT, and checks what
// chromium renders: failing and regressed pairs first, the flapping pair's
// failure ratio, "failing for", a failing row's stored record opened by a
// click without a new probe, and no secret in any encoding.
func TestOnCallViewInBrowser(t *testing.T) {
	ctx := browser(t)
	// Completions the simulators served: a page that ran a probe (as
	// /probe?debug=true does) would add one; vllm_probe_attempts_total counts
	// only the scheduler's probes.
	var completions atomic.Int64
	counted := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/completions") {
				completions.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}
	simWith := func(mutate func(*simulator.Config)) string {
		return startWrappedSim(t, func(c *simulator.Config) {
			c.APIKey = browserKey
			c.TTFT, c.ITL = 10*time.Millisecond, 2*time.Millisecond
			if mutate != nil {
				mutate(c)
			}
		}, counted).URL
	}
	healthy := simWith(nil)
	flapping := simWith(func(c *simulator.Config) {
		c.Fault, c.FaultRate, c.FaultStatus = simulator.FaultHTTPStatus, 0.5, 500
	})
	stalling := simWith(func(c *simulator.Config) { c.Fault, c.FaultRate, c.FaultAfter = simulator.FaultStall, 1, 2 })
	slow := simWith(func(c *simulator.Config) { c.TTFT = 40 * time.Millisecond })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()

	dir := t.TempDir()
	// The baseline is a benchmark of a simulator like the healthy one (TTFT
	// 10 ms); the slow target runs at 40 ms.
	baselineFile := benchBaseline(t, startPlainSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL = 10*time.Millisecond, 2*time.Millisecond
	}).URL, dir, "simbase")
	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	target := func(name, url, extra string) string {
		return fmt.Sprintf("  - {name: %s, url: %q, %s http_client_config: {bearer_token: %s, http_headers: {X-Probe-Token: {secrets: [%s]}}}}\n",
			name, url, extra, browserKey, browserHeader)
	}
	writeConfig(t, f.path, `
global: {probe_interval: 500ms, stall_timeout: 300ms, scrape_interval: 1s, scrape_timeout: 900ms, rate_window: 3s}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 8}
baselines: [{name: simbase, file: `+baselineFile+`}]
targets:
`+target("healthy", healthy, "labels: {pool: a},")+
		target("refused", refused, "labels: {pool: b},")+
		target("flapping", flapping, "labels: {pool: a},")+
		target("stalling", stalling, "labels: {pool: b},")+
		target("slow", slow, "baseline: simbase, labels: {pool: a},")+
		target("metrics", healthy, "probe: false, labels: {pool: a},"))
	// The regression means reach back a minute, not 3 s: once the daemon is
	// stopped below, the page must still compare the probes it ran.
	f.start(Options{ConfigFile: f.path, HistoryLimit: 20, ProbeWindow: time.Minute})

	// Wait until the summary, computed as the page computes it, shows every
	// pair in its state. The healthy pair is waited for as the page judges it
	// (healthy: its last probe succeeded and at most 10 % of its history
	// failed), not for a history without a failure: on a loaded machine one
	// probe may miss the 300 ms stall timeout, and the pair stays healthy.
	waitFor(t, 60*time.Second, "every pair in its state", func() bool {
		st := func(name string) (probes, successes int, reason string) {
			s, _ := f.d.probes.Stats(name, "short")
			return s.Probes, s.Successes, s.LastReason
		}
		if p, ok, _ := st("flapping"); p < 8 || ok == 0 || ok == p {
			return false
		}
		if p, _, r := st("refused"); p < 2 || r == "" {
			return false
		}
		if p, _, r := st("stalling"); p < 2 || r != "stalled" {
			return false
		}
		if p, _, _ := st("healthy"); p < 3 {
			return false
		}
		if _, ok := f.d.coll.LastScrape("metrics"); !ok {
			return false
		}
		_, page := f.get("/")
		return strings.Contains(page, `<td class="st">healthy<td><a href="target?name=healthy#`) &&
			strings.Contains(page, `<td class="st">regressed<td><a href="target?name=slow#`)
	})
	// The debug report of the regressed target compares with its baseline.
	_, debug := f.get("/probe?target=slow&module=short&debug=true")
	if !strings.Contains(debug, `Baseline "simbase" at load `) || !strings.Contains(debug, "  TTFT expected ") || !strings.Contains(debug, "(above the alert threshold 1.2)") {
		t.Errorf("the debug report of the regressed target lacks its baseline comparison:\n%s", debug)
	}
	// Stop probing: what follows must not start a probe of its own.
	f.stop()
	attempts := func() float64 {
		var sum float64
		for _, name := range []string{"healthy", "refused", "flapping", "stalling", "slow"} {
			v, _ := sample(t, f.d.Registry(), "vllm_probe_attempts_total", map[string]string{"target": name})
			sum += v
		}
		return sum
	}
	before, servedBefore := attempts(), completions.Load()

	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#summary"))); err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), "landing.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the landing page's first screen: %s", path)

	// The rows as rendered: state, target, ratio cells.
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll("#summary tbody tr")).map(tr => Array.from(tr.cells).map(td => td.innerText))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("summary has %d rows, want 5: %q", len(rows), rows)
	}
	var states []string
	byTarget := map[string][]string{}
	for _, r := range rows {
		states = append(states, r[0])
		byTarget[r[1]] = r
	}
	t.Logf("summary rows: %q", rows)
	order := func(s string) int { return slices.Index(stateOrder, s) }
	if !slices.IsSortedFunc(states, func(a, b string) int { return order(a) - order(b) }) {
		t.Errorf("rows are not worst first: %q", states)
	}
	if states[len(states)-1] != stateHealthy || byTarget["healthy"][0] != stateHealthy {
		t.Errorf("the healthy target is not the last row: %q", states)
	}
	for _, name := range []string{"refused", "stalling"} {
		if r := byTarget[name]; r[0] != stateFailing || !strings.HasPrefix(r[4], "failing for ") || !strings.HasSuffix(r[5], " ago") {
			t.Errorf("%s row = %q, want failing with \"failing for\" and its last failure's age", name, r)
		}
	}
	if r := byTarget["slow"]; r[0] != stateRegressed || !strings.HasSuffix(r[8], "×") {
		t.Errorf("slow row = %q, want regressed with its TTFT ratio", r)
	}
	if r := byTarget["flapping"]; r[0] == stateHealthy || !strings.Contains(r[7], "% failed (") {
		t.Errorf("flapping row = %q, want its failure ratio and not healthy", r)
	}
	// Every row shows its target's last scrape: up or down, when, how long
	// it took and why it failed; the scrape-only target has a row of its own.
	for name, r := range byTarget {
		cell := r[10]
		want := "up at "
		if name == "refused" {
			want = "down at "
		}
		if !strings.HasPrefix(cell, want) || !strings.Contains(cell, " ago), took ") || (name == "refused") != strings.Contains(cell, "refused") {
			t.Errorf("%s row's last scrape %q, want %q…, its duration and the error if any", name, cell, want)
		}
	}
	scrapeOnly, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll("#scrape-only tbody tr")).map(tr => Array.from(tr.cells).map(td => td.innerText))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(scrapeOnly) != 1 || scrapeOnly[0][0] != "metrics" || !strings.HasPrefix(scrapeOnly[0][1], "up at ") || !strings.Contains(scrapeOnly[0][1], "took ") {
		t.Errorf("scrape-only targets as rendered: %q, want the metrics target up with its scrape time and duration", scrapeOnly)
	}
	if got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#counts"))); err != nil || !strings.Contains(got, "2 failing") && !strings.Contains(got, "3 failing") {
		t.Errorf("counts line %q (%v)", got, err)
	}
	pages := []string{pageHTML(t, ctx), debug}

	// The first failing row's record: a click opens the stored record.
	first := rows[0][1]
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#summary tbody tr.failing a.rec")), chromedp.WaitVisible(chromedp.CSS("body pre"))); err != nil {
		t.Fatal(err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	record, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "/probe/record?") || !strings.Contains(record, "Stored record ") ||
		!strings.Contains(record, fmt.Sprintf("of target %q", first)) || !strings.Contains(record, "\nError: ") {
		t.Errorf("the record link of %s opened %s:\n%s", first, loc, record)
	}
	switch first {
	case "refused":
		if !strings.Contains(record, "Failed during model resolution: GET /v1/models") {
			t.Errorf("the refused target's record does not name the phase:\n%s", record)
		}
	case "stalling":
		checkStalledE2E(t, record)
	}
	if after := attempts(); after != before {
		t.Errorf("vllm_probe_attempts_total went from %v to %v while reading a stored record", before, after)
	}
	pages = append(pages, record)
	defer func() {
		// After every record and target page below, too.
		if served := completions.Load(); served != servedBefore {
			t.Errorf("the simulators served %d completions while the pages were read: a page ran a probe", served-servedBefore)
		}
	}()

	// The other failing pair's record, and every target's page.
	if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/target?name=metrics"), chromedp.WaitVisible(chromedp.CSS("#last-scrape"))); err != nil {
		t.Fatal(err)
	}
	if got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body"))); err != nil ||
		!strings.Contains(got, "/health\tnot checked: a scrape-only target") || !strings.Contains(got, "/metrics\tup at ") {
		t.Errorf("the scrape-only target's page (%v):\n%s", err, got)
	}
	for _, name := range []string{"refused", "stalling", "flapping", "healthy", "slow"} {
		s, _ := f.d.probes.Stats(name, "short")
		if s.LastFailureID != 0 {
			_, body := f.get(fmt.Sprintf("/probe/record?target=%s&module=short&id=%d", name, s.LastFailureID))
			pages = append(pages, body)
			if name == "stalling" {
				checkStalledE2E(t, body)
			}
			if name == "refused" && !strings.Contains(body, "Failed during model resolution: GET /v1/models") {
				t.Errorf("the refused target's record does not name the phase:\n%s", body)
			}
			for _, want := range []string{"Authorization: <secret>", "X-Probe-Token: <secret>"} {
				if !strings.Contains(body, want) {
					t.Errorf("the record of %s does not list %s:\n%s", name, want, body)
				}
			}
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+"/target?name="+name), chromedp.WaitVisible(chromedp.CSS("h2"))); err != nil {
			t.Fatal(err)
		}
		// The target's page opens with its row of the summary.
		if st, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#summary tbody tr td.st"))); err != nil || st != byTarget[name][0] {
			t.Errorf("the page of %s shows state %q (%v), want its summary row's %q", name, st, err, byTarget[name][0])
		}
		checkHistoryChart(t, ctx, f.d, name, name == "slow")
		pages = append(pages, pageHTML(t, ctx))
	}
	for _, p := range pages {
		for _, secret := range []string{browserKey, browserHeader} {
			for _, enc := range []string{secret, "Bearer " + secret, url.QueryEscape(secret),
				base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))} {
				if strings.Contains(p, enc) {
					t.Errorf("a page shows a secret (as %q)", enc)
				}
			}
		}
	}
}

// checkHistoryChart checks, on the open page of target name, the chart of its
// module "short" as chromium renders it: an SVG of a visible size, one probe
// mark per probe the prober keeps, the failed ones marked as such, and, when
// withBaseline, the baseline's expected TTFT drawn as a line.
func checkHistoryChart(t *testing.T, ctx context.Context, d *Daemon, name string, withBaseline bool) {
	t.Helper()
	ts, _ := d.probes.TargetStatus(name)
	var kept, failed int
	for _, ms := range ts.Modules {
		if ms.Module == "short" {
			kept = len(ms.History)
			for _, r := range ms.History {
				if !r.Success {
					failed++
				}
			}
		}
	}
	type chart struct {
		Width, Height      float64
		Probes, Fails      int
		Circles, Expected  int
		FailTitle, OKTitle string
		Strips             []string
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[chart](`(() => {
		const svg = document.querySelector("#module-short ~ div.chart svg.history");
		if (!svg) return {Width: 0};
		const r = svg.getBoundingClientRect();
		const fail = svg.querySelector("g.probe.fail title"), ok = svg.querySelector("g.probe:not(.fail) title");
		return {Width: r.width, Height: r.height,
			Probes: svg.querySelectorAll("g.probe").length, Fails: svg.querySelectorAll("g.probe.fail").length,
			Circles: svg.querySelectorAll("g.probe:not(.fail) circle").length,
			Expected: svg.querySelectorAll("g.strip[data-metric=TTFT] line.expected").length,
			FailTitle: fail ? fail.textContent : "", OKTitle: ok ? ok.textContent : "",
			Strips: Array.from(svg.querySelectorAll("g.strip")).map(g => g.dataset.metric)};
	})()`))
	if err != nil {
		t.Fatalf("the chart of %s: %v", name, err)
	}
	if got.Width < 100 || got.Height < 50 {
		t.Errorf("the chart of %s is not drawn (%gx%g px)", name, got.Width, got.Height)
		return
	}
	if kept == 0 || got.Probes != kept || got.Fails != failed {
		t.Errorf("the chart of %s marks %d probes, %d failed; the prober keeps %d, %d failed", name, got.Probes, got.Fails, kept, failed)
	}
	if fmt.Sprint(got.Strips) != "[TTFT TPOT E2E]" {
		t.Errorf("the chart of %s draws %v, want TTFT, TPOT and E2E", name, got.Strips)
	}
	if ok := kept - failed; ok > 0 && got.Circles < ok*2 { // TTFT and E2E at least, per success
		t.Errorf("the chart of %s draws %d points for %d successful probes", name, got.Circles, ok)
	}
	if failed > 0 && got.FailTitle == "" || kept > failed && !strings.Contains(got.OKTitle, " success: TTFT ") {
		t.Errorf("the chart of %s: tooltips %q (a failure) and %q (a success)", name, got.FailTitle, got.OKTitle)
	}
	if withBaseline != (got.Expected == 1) {
		t.Errorf("the chart of %s draws %d expected-TTFT lines, want one only with a baseline (%v)", name, got.Expected, withBaseline)
	}
	if name == "flapping" || name == "slow" {
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // PNG
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.ArtifactDir(), "target-"+name+".png")
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the page of %s: %s", name, path)
	}
}

func pageHTML(t *testing.T, ctx context.Context) string {
	t.Helper()
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	return html
}

// checkStalledE2E: a stalled probe's E2E is the time until the cut, at least
// the stall timeout (300ms), not the time of its last token.
func checkStalledE2E(t *testing.T, record string) {
	t.Helper()
	var ms float64
	i := strings.Index(record, "\nE2E: ")
	if i < 0 {
		t.Errorf("no E2E in the stalled record:\n%s", record)
		return
	}
	if _, err := fmt.Sscanf(record[i+len("\nE2E: "):], "%fms (until the failure)", &ms); err != nil || ms < 300 || math.IsNaN(ms) {
		t.Errorf("stalled probe's E2E = %v ms (%v), want at least the stall timeout 300ms:\n%s", ms, err, record)
	}
	if !strings.Contains(record, "Output tokens per second: -\n") {
		t.Errorf("stalled probe shows a tokens/s:\n%s", record)
	}
}

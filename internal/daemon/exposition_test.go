package daemon

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// The formats Prometheus asks for: its 2.x text default, 3.x's default
// (OpenMetrics first), a plain text scraper and curl.
var expositionAccepts = []string{
	"application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
	"application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=underscores;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
	"text/plain;version=0.0.4",
	"",
}

// volatile families change between two renders without any probe or
// scrape: the runtime's and the handler's own.
func volatile(line string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE "), "# UNIT ")
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_")
}

// render GETs h's /metrics with accept and Accept-Encoding gzip, and
// returns its content type and body, decompressed.
func render(t *testing.T, h http.Handler, accept string) (string, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics (Accept %q): %d %s", accept, rec.Code, rec.Body)
	}
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return rec.Header().Get("Content-Type"), body
}

// lines returns body's lines, volatile families left out, sorted: the
// series and comments regardless of their order.
func lines(body []byte) []string {
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if l == "" || volatile(l) {
			continue
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// parse checks body as Prometheus' scrape parser reads it: every family's
// samples together under one head, OpenMetrics ending in # EOF.
func parse(t *testing.T, contentType string, body []byte) int {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{})
	if err != nil {
		t.Fatalf("parser for %q: %v", contentType, err)
	}
	n := 0
	for {
		e, err := p.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("the %s answer does not parse: %v", contentType, err)
		}
		if e == textparse.EntrySeries || e == textparse.EntryHistogram {
			n++
		}
	}
}

// checkExpositionCached checks that the daemon's /metrics, rendered from the
// exposition cache, says what promhttp over the registry of every series
// says, in each format Prometheus asks for: while probes and scrapes run
// (three renders back to back, compared when the cache's first and last
// agree, i.e. nothing changed meanwhile), and once the daemon stopped. A
// component that changes a target's series without moving its version
// leaves a stale target in the cache and fails it. Where the cache
// encodes only what changed is internal/exposition's TestCacheEncodesChanges.
func checkExpositionCached(t *testing.T, f *fixture) {
	t.Helper()
	cached := f.d.Handler()
	full := promhttp.HandlerFor(f.d.Registry(), promhttp.HandlerOpts{EnableOpenMetrics: true})
	var changed []string // what moved between the cache's two renders, when they differed
	compare := func(accept string) (quiet bool) {
		ct, before := render(t, cached, accept)
		ct2, want := render(t, full, accept)
		_, after := render(t, cached, accept)
		if ct != ct2 {
			t.Errorf("Accept %q: content type %q, promhttp's %q", accept, ct, ct2)
		}
		if !slices.Equal(lines(before), lines(after)) {
			changed = multisetDiff(lines(after), lines(before))
			return false // a probe or scrape landed meanwhile
		}
		if n := parse(t, ct, before); n == 0 {
			t.Fatalf("Accept %q: no series", accept)
		}
		got, exp := lines(before), lines(want)
		if !slices.Equal(got, exp) {
			t.Errorf("Accept %q: the cached render differs from promhttp's\nonly cached:\n%s\nonly promhttp:\n%s",
				accept, strings.Join(multisetDiff(got, exp), "\n"), strings.Join(multisetDiff(exp, got), "\n"))
		}
		return true
	}
	compared := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && compared < 12 && !t.Failed(); {
		for _, a := range expositionAccepts {
			if compare(a) {
				compared++
			}
		}
	}
	// On a loaded machine the probes (every 200ms) may leave no quiet
	// moment: what the stopped daemon renders below is the check that
	// always runs. A target whose version did not move with its series
	// stays stale in the cache after the stop too.
	t.Logf("%d renders compared while the daemon ran", compared)
	// Stopped, only time moves the series (the gateways' joins over the
	// last minutes, a pair's window): compare again.
	f.stop()
	for _, a := range expositionAccepts {
		// Spaced retries: on a loaded machine the last probes' and
		// scrapes' effects (hooks, the OTLP push's last flush) may still
		// land just after the stop.
		quiet := false
		for range 50 {
			if quiet = compare(a); quiet {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !quiet {
			t.Errorf("Accept %q: the render kept changing with the daemon stopped; the last change:\n%s", a, strings.Join(changed, "\n"))
		}
	}
}

// multisetDiff returns the lines of a not in b, each as often as a has it
// more than b.
func multisetDiff(a, b []string) []string {
	n := map[string]int{}
	for _, l := range b {
		n[l]++
	}
	var out []string
	for _, l := range a {
		if n[l] > 0 {
			n[l]--
			continue
		}
		out = append(out, l)
	}
	return out
}

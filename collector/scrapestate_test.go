package collector

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// syncBuffer is a log sink safe for the scrape loop and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	b.b.Reset()
	return s
}

// TestLastScrapeAndFailureLogging checks that a target's first failed scrape
// is logged at info with its reason, repeats of the same failure are not,
// a new reason and the recovery are, and LastScrape tells the same story
// without the credentials of the target's URL.
func TestLastScrapeAndFailureLogging(t *testing.T) {
	srv := newFakeVLLM(t)
	srv.setFailure(http.StatusServiceUnavailable, false)
	var buf syncBuffer
	logger := level.NewFilter(log.NewLogfmtLogger(&buf), level.AllowInfo())
	m := NewManager(nil, logger, nil, nil)
	// The metrics URL carries a token in its query (the configuration
	// refuses user information): it must reach neither the log nor
	// LastScrape.
	url := srv.URL
	cfg := testConfig(t, fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s}
modules:
  short: {prober: completions, prompt: "hi"}
targets:
  - name: a
    url: %s
    metrics_path: /metrics?token=sekrit42
`, url))
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.LastScrape("a"); ok {
		t.Error("LastScrape reports a state before any scrape")
	}
	if _, ok := m.LastScrape("nope"); ok {
		t.Error("LastScrape reports an unknown target")
	}
	s := m.target("a")
	noSecret := func(where, text string) {
		t.Helper()
		for _, secret := range []string{"sekrit42"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a secret: %s", where, text)
			}
		}
	}

	s.scrapeOnce(context.Background())
	logs := buf.take()
	if !strings.Contains(logs, "level=info") || !strings.Contains(logs, "scrape of vLLM metrics failed") || !strings.Contains(logs, "503") {
		t.Errorf("first failure not logged at info with its reason:\n%s", logs)
	}
	noSecret("log", logs)
	st, ok := m.LastScrape("a")
	if !ok || st.Up || !strings.Contains(st.Err, "503") || st.At.IsZero() || st.Duration <= 0 {
		t.Errorf("LastScrape after a 503 = %+v, %v", st, ok)
	}
	noSecret("LastScrape", st.Err)

	s.scrapeOnce(context.Background())
	if logs := buf.take(); logs != "" {
		t.Errorf("the same failure logged again:\n%s", logs)
	}

	srv.setFailure(http.StatusInternalServerError, false)
	s.scrapeOnce(context.Background())
	if logs := buf.take(); !strings.Contains(logs, "level=info") || !strings.Contains(logs, "500") {
		t.Errorf("a new failure reason is not logged at info:\n%s", logs)
	}

	srv.setFailure(http.StatusOK, false)
	s.scrapeOnce(context.Background())
	if logs := buf.take(); !strings.Contains(logs, "succeeded again") {
		t.Errorf("recovery not logged:\n%s", logs)
	}
	if st, ok := m.LastScrape("a"); !ok || !st.Up || st.Err != "" {
		t.Errorf("LastScrape after recovery = %+v, %v", st, ok)
	}

	srv.Close()
	s.scrapeOnce(context.Background())
	logs = buf.take()
	if !strings.Contains(logs, "level=warn") {
		t.Errorf("a failure after success is not a warning:\n%s", logs)
	}
	noSecret("log", logs)
	st, _ = m.LastScrape("a")
	if st.Up || st.Err == "" || !strings.Contains(st.Err, "/metrics") {
		t.Errorf("LastScrape of a gone server = %+v", st)
	}
	noSecret("LastScrape", st.Err)
	s.client.CloseIdleConnections()
}

package probe

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
)

// A stalled probe's E2E is the time until the cut, not the time of its last
// token, and it has no tokens per second or TPOT.
func TestStalledProbeE2EIsElapsed(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, tok1+tok2)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer ts.Close()
	const stall = 300 * time.Millisecond
	res := Stream(context.Background(), ts.Client(), StreamRequest{BaseURL: ts.URL, Kind: config.ProberCompletions,
		Body: map[string]any{"model": "m", "prompt": "abc123 hi"}, StallTimeout: stall})
	if res.Reason != ReasonStalled {
		t.Fatalf("reason %s (%s), want stalled", res.Reason, res.Err)
	}
	if res.E2E < stall {
		t.Errorf("E2E %v, want at least the stall timeout %v (the time until the cut)", res.E2E, stall)
	}
	if res.E2E <= res.TTFT {
		t.Errorf("E2E %v not after TTFT %v", res.E2E, res.TTFT)
	}
	if v := res.OutputTokensPerSecond(); v != 0 {
		t.Errorf("tokens/s of a stalled probe = %v, want 0 (shown as -)", v)
	}
	if res.TPOT != 0 {
		t.Errorf("TPOT of a stalled probe = %v, want 0", res.TPOT)
	}
	if res.Phase != PhaseStream || res.Request != "POST /v1/completions" || !strings.Contains(res.RequestBody, "abc123 hi") {
		t.Errorf("phase %q request %q body %q", res.Phase, res.Request, res.RequestBody)
	}
	if res.Text != "Hello world" {
		t.Errorf("generated text %q", res.Text)
	}
}

func TestFailurePhasesAndExcerpts(t *testing.T) {
	ts := httptest.NewServer(errorHandler(500, `{"error":{"message":"EngineCore encountered an issue.","type":"InternalServerError","code":500}}`))
	defer ts.Close()
	res := Stream(context.Background(), ts.Client(), StreamRequest{BaseURL: ts.URL, Kind: config.ProberChat, Body: map[string]any{"model": "m"}})
	if res.Phase != PhaseResponse || res.Request != "POST /v1/chat/completions" {
		t.Errorf("phase %q request %q", res.Phase, res.Request)
	}
	if !strings.Contains(res.ErrorBody, "EngineCore encountered an issue.") {
		t.Errorf("error body excerpt %q", res.ErrorBody)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	res = Stream(context.Background(), http.DefaultClient, StreamRequest{BaseURL: closed, Kind: config.ProberCompletions, Body: map[string]any{"model": "m"}})
	if res.Phase != PhaseRequest || res.Reason != ReasonConnection {
		t.Errorf("refused: phase %q reason %s", res.Phase, res.Reason)
	}
}

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: not cut in half
		{"a\xffb", 5, "a\uFFFDb"},
	} {
		if got := excerpt(scrubberOr(nil), []byte(tc.in), tc.n); got != tc.want {
			t.Errorf("excerpt(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

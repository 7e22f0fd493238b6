package probe

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
)

var updateShed = flag.Bool("update", false, "rewrite testdata/shed/golden.txt")

// serveRaw answers every request with the raw HTTP response in file.
func serveRaw(t *testing.T, file string) *httptest.Server {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestShedShapes probes one real or documented refusal per fixture (README.md
// in testdata/shed names each one's source), as a declared gateway, and
// compares the reason and error text with golden.txt. The reasons are also
// asserted here, so that a change of classification cannot pass by
// rewriting the golden file alone. From an ordinary target, the same answers
// keep their plain reasons (plain): only a gateway sheds.
func TestShedShapes(t *testing.T) {
	want := map[string]Reason{
		"epp-sheddable-429":                   ReasonShed,
		"epp-queue-full-429":                  ReasonShed,
		"epp-queue-ttl-503":                   ReasonShed,
		"epp-no-endpoints-503":                ReasonHTTP5xx,
		"llmd-dropped-local-reply-429":        ReasonShed,
		"llmd-dropped-no-endpoints-503":       ReasonHTTP5xx,
		"haproxy-queue-429":                   ReasonShed,
		"haproxy-queue-timeout-503":           ReasonHTTP5xx,
		"production-stack-scaled-to-zero-503": ReasonShed,
		"quota-429":                           ReasonRateLimited,
		"engine-503":                          ReasonHTTP5xx,
		"vllm-queue-full-503":                 ReasonOverloaded,
		"vllm-max-pending-tokens-503":         ReasonOverloaded,
		"vllm-tier-pending-tokens-429":        ReasonOverloaded,
		"vllm-tier-rate-limit-429":            ReasonRateLimited,
		"ollama-max-queue-503":                ReasonOverloaded,
	}
	plain := map[Reason]Reason{ReasonShed: ReasonHTTP5xx}
	plainOf := func(name string) Reason {
		if w := want[name]; w != ReasonShed {
			return w
		}
		if strings.HasSuffix(name, "-429") {
			return ReasonRateLimited
		}
		return plain[ReasonShed]
	}
	files, err := filepath.Glob("testdata/shed/*.http")
	if err != nil || len(files) != len(want) {
		t.Fatalf("fixtures: %d files (%v), want %d", len(files), err, len(want))
	}
	var got strings.Builder
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".http")
		for _, kind := range []string{config.ProberCompletions, config.ProberEmbeddings} {
			srv := serveRaw(t, file)
			probe := func(gateway bool) Result {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return Stream(ctx, srv.Client(), StreamRequest{
					BaseURL: srv.URL, Kind: kind, Gateway: gateway,
					Body: map[string]any{"model": "m", "prompt": "p", "input": "p", "max_tokens": 2},
				})
			}
			if r := probe(false); r.Reason != plainOf(name) {
				t.Errorf("%s (%s) from an ordinary target: reason %q, want %q (%s)", name, kind, r.Reason, plainOf(name), r.Err)
			}
			res := probe(true)
			w, ok := want[name]
			if !ok {
				t.Errorf("%s: no expectation for this fixture", name)
			}
			if res.Reason != w {
				t.Errorf("%s (%s): reason %q, want %q (%s)", name, kind, res.Reason, w, res.Err)
			}
			if res.Reason == ReasonMalformed {
				t.Errorf("%s (%s): a gateway's error answer read as malformed", name, kind)
			}
			if kind == config.ProberCompletions {
				fmt.Fprintf(&got, "%s: %s | %s\n", name, res.Reason, res.Err)
			}
		}
	}
	golden := filepath.Join("testdata", "shed", "golden.txt")
	if *updateShed {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != got.String() {
		t.Errorf("golden.txt differs (-update rewrites it):\ngot:\n%s\nwant:\n%s", got.String(), b)
	}
}

// TestDroppedReasonOnlyOnRefusals: the llm-d header marks a flow-control
// refusal, which is a 429 or a 503; on any other status (a 500 "CUDA error",
// a 401, a 404 that a misconfigured or hostile backend sends with it) the
// answer keeps the reason its status gives.
func TestDroppedReasonOnlyOnRefusals(t *testing.T) {
	h := http.Header{}
	h.Set(headerDroppedReason, "rejected-saturated")
	for status, want := range map[int]Reason{
		http.StatusTooManyRequests:     ReasonShed,
		http.StatusServiceUnavailable:  ReasonShed,
		http.StatusInternalServerError: ReasonHTTP5xx,
		http.StatusUnauthorized:        ReasonUnauthorized,
		http.StatusNotFound:            ReasonHTTP4xx,
		http.StatusBadGateway:          ReasonHTTP5xx,
	} {
		body := []byte(`{"error":{"message":"CUDA error: an illegal memory access","type":"InternalServerError"}}`)
		if got, text := classifyHTTPError(status, h, body, true); got != want {
			t.Errorf("HTTP %d with %s: reason %q (%s), want %q", status, headerDroppedReason, got, text, want)
		}
	}
}

// TestShedOnlyFromGateways: the llm-d dropped-reason header makes a
// declared gateway's 429 or 503 shed, never its 500 (a CUDA error), 401 or
// 404; from an ordinary target no shape sheds: its 429 with Retry-After
// stays rate_limited, its 503 http_5xx.
func TestShedOnlyFromGateways(t *testing.T) {
	for _, c := range []struct {
		status  int
		gateway bool
		header  map[string]string
		body    string
		want    Reason
	}{
		{500, true, map[string]string{headerDroppedReason: "rejected-saturated"}, `{"error":{"message":"CUDA error: out of memory","type":"InternalServerError"}}`, ReasonHTTP5xx},
		{401, true, map[string]string{headerDroppedReason: "rejected-saturated"}, `{"error":"Unauthorized"}`, ReasonUnauthorized},
		{404, true, map[string]string{headerDroppedReason: "rejected-saturated"}, `{"error":{"message":"The model m does not exist.","type":"NotFoundError"}}`, ReasonModelNotFound},
		{429, true, map[string]string{headerDroppedReason: "rejected-saturated"}, `dropped`, ReasonShed},
		{503, true, map[string]string{headerDroppedReason: "rejected-ttl-expired"}, `dropped`, ReasonShed},
		{429, false, map[string]string{headerDroppedReason: "rejected-saturated"}, `dropped`, ReasonRateLimited},
		{429, false, map[string]string{"Retry-After": "1"}, `{"error":{"message":"per-key budget spent"}}`, ReasonRateLimited},
		{503, false, map[string]string{headerDroppedReason: "rejected-ttl-expired"}, `dropped`, ReasonHTTP5xx},
		{503, false, nil, "inference error: ServiceUnavailable - request timed out in queue", ReasonHTTP5xx},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for k, v := range c.header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(c.status)
			fmt.Fprint(w, c.body)
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res := Stream(ctx, srv.Client(), StreamRequest{BaseURL: srv.URL, Kind: config.ProberCompletions, Gateway: c.gateway,
			Body: map[string]any{"model": "m", "prompt": "p", "max_tokens": 2}})
		cancel()
		srv.Close()
		if res.Reason != c.want {
			t.Errorf("HTTP %d %v (gateway %v): reason %q, want %q (%s)", c.status, c.header, c.gateway, res.Reason, c.want, res.Err)
		}
	}
}

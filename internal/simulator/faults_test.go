package simulator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func admin(t testing.TB, base, body string) (int, string) {
	t.Helper()
	resp := post(t, base+"/admin/config", body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func setFault(t testing.TB, base, body string) {
	t.Helper()
	if code, b := admin(t, base, body); code != 200 {
		t.Fatalf("POST /admin/config %s: %d %s", body, code, b)
	}
}

const faultBody = `{"model":"m","prompt":"fault","max_tokens":6,"ignore_eos":true,"stream":true}`

func TestFaultHTTPStatus(t *testing.T) {
	_, ts := startSim(t, nil)
	setFault(t, ts.URL, `{"fault":"http_status","fault_status":429}`)
	resp := post(t, ts.URL+"/v1/completions", faultBody)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"error":{"message":"Simulated fault: HTTP 429","type":"RateLimitError","param":null,"code":429}}`
	if resp.StatusCode != 429 || string(b) != want {
		t.Errorf("got %d %s, want 429 %s", resp.StatusCode, b, want)
	}
	setFault(t, ts.URL, `{"fault":""}`)
	if res := streamCompletion(t, ts.URL, faultBody); len(res.events) != 6 || !res.done {
		t.Errorf("after clearing: %d events done=%v", len(res.events), res.done)
	}
}

func TestFaultRate(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.TTFT = 0; c.ITL = 0 })
	setFault(t, ts.URL, `{"fault":"http_status","fault_status":503,"fault_rate":0.5}`)
	counts := map[int]int{}
	for i := 0; i < 40; i++ {
		resp := post(t, ts.URL+"/v1/completions", `{"prompt":"r","max_tokens":1}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		counts[resp.StatusCode]++
	}
	if counts[503] == 0 || counts[200] == 0 || counts[503]+counts[200] != 40 {
		t.Errorf("fault_rate 0.5 gave %v", counts)
	}
	setFault(t, ts.URL, `{"fault_rate":0}`)
	resp := post(t, ts.URL+"/v1/completions", `{"prompt":"r","max_tokens":1}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("fault_rate 0: status %d", resp.StatusCode)
	}
}

func TestFaultHangBeforeHeaders(t *testing.T) {
	_, ts := startSim(t, nil)
	setFault(t, ts.URL, `{"fault":"hang_before_headers"}`)
	client := &http.Client{Timeout: 150 * time.Millisecond}
	start := time.Now()
	_, err := client.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(faultBody))
	if err == nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("want a client timeout, got err=%v after %s", err, time.Since(start))
	}
	if code, _ := get(t, ts.URL+"/health"); code != 200 {
		t.Errorf("/health = %d during hang", code)
	}
}

// readEvents reads n data events from an SSE body.
func readEvents(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestFaultStall(t *testing.T) {
	_, ts := startSim(t, nil)
	setFault(t, ts.URL, `{"fault":"stall","fault_after":2}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(faultBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readEvents(t, br, 2)
	got := make(chan string, 1)
	go func() {
		for {
			line, err := br.ReadString('\n')
			if err != nil || line != "\n" {
				got <- line
				return
			}
		}
	}()
	select {
	case line := <-got:
		t.Fatalf("stalled stream sent %q", line)
	case <-time.After(200 * time.Millisecond):
	}
	if code, _ := get(t, ts.URL+"/health"); code != 200 {
		t.Errorf("/health = %d during stall, want 200", code)
	}
	mfs, _ := scrape(t, ts.URL)
	if v := value(t, mfs, "vllm:num_requests_running", nil); v != 1 {
		t.Errorf("running = %v during stall", v)
	}
	cancel()
	<-got
	waitMetric(t, ts.URL, 2*time.Second, func(m map[string]*dto.MetricFamily) bool {
		return value(t, m, "vllm:request_success_total", map[string]string{"finished_reason": "abort"}) == 1
	})
	// A scrape is not a snapshot (nor is vLLM's): it reads the running gauge
	// before the counters, so the scrape that first shows the abort may have
	// read running just before the request left the engine. The request leaves
	// the engine (run.finish → engine.finish) before its abort is counted, so
	// every scrape started after the abort was seen must show it gone.
	mfs, _ = scrape(t, ts.URL)
	if v := value(t, mfs, "vllm:num_requests_running", nil); v != 0 {
		t.Errorf("running = %v after the client left", v)
	}
}

func TestCloseEndsStalledStream(t *testing.T) {
	sim, ts := startSim(t, nil)
	setFault(t, ts.URL, `{"fault":"stall","fault_after":0}`)
	resp := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	done := make(chan error, 1)
	go func() { done <- sim.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the stalled stream")
	}
	res := readSSE(t, resp.Body)
	if res.done || len(res.events) != 0 {
		t.Errorf("stalled-then-closed stream: %d events, done=%v", len(res.events), res.done)
	}
	if code, _ := get(t, ts.URL+"/health"); code != http.StatusServiceUnavailable {
		t.Errorf("/health after Close = %d, want 503", code)
	}
}

func TestStreamFaults(t *testing.T) {
	for _, tc := range []struct {
		fault  string
		check  func(t *testing.T, res sseResult)
		reason string
	}{
		{"cut_stream", func(t *testing.T, res sseResult) {
			if res.done || len(res.events) != 2 {
				t.Errorf("cut stream: %d events, done=%v; want 2 events and no [DONE]", len(res.events), res.done)
			}
		}, "abort"},
		{"malformed_chunk", func(t *testing.T, res sseResult) {
			if !res.done || len(res.events) != 6 {
				t.Fatalf("%d events, done=%v", len(res.events), res.done)
			}
			for i, ev := range res.events {
				valid := json.Valid([]byte(ev))
				if valid != (i != 2) {
					t.Errorf("event %d valid JSON = %v: %s", i, valid, ev)
				}
			}
		}, "length"},
		{"error_event", func(t *testing.T, res sseResult) {
			if !res.done || len(res.events) != 3 {
				t.Fatalf("%d events, done=%v", len(res.events), res.done)
			}
			want := `{"error":{"message":"Simulated fault: the engine failed while generating","type":"InternalServerError","param":null,"code":500}}`
			if res.events[2] != want {
				t.Errorf("error event = %s, want %s", res.events[2], want)
			}
		}, "error"},
		{"huge_line", func(t *testing.T, res sseResult) {
			if !res.done || len(res.events) != 6 {
				t.Fatalf("%d events, done=%v", len(res.events), res.done)
			}
			c := decodeChunk(t, res.events[2])
			if len(res.events[2]) < 200000 || len(*c.Choices[0].Text) != 200000 {
				t.Errorf("huge event is %d bytes", len(res.events[2]))
			}
		}, "length"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			_, ts := startSim(t, func(c *Config) { c.HugeLineBytes = 200000 })
			setFault(t, ts.URL, `{"fault":"`+tc.fault+`","fault_after":2}`)
			resp := post(t, ts.URL+"/v1/completions", faultBody)
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			tc.check(t, readSSE(t, resp.Body))
			waitMetric(t, ts.URL, 2*time.Second, func(m map[string]*dto.MetricFamily) bool {
				return value(t, m, "vllm:request_success_total", map[string]string{"finished_reason": tc.reason}) == 1
			})
		})
	}
}

func TestFaultEngineDead(t *testing.T) {
	_, ts := startSim(t, nil)
	setFault(t, ts.URL, `{"fault":"engine_dead"}`)
	for _, p := range []string{"/health", "/ping"} {
		if code, body := get(t, ts.URL+p); code != 503 || body != "" {
			t.Errorf("%s = %d %q, want 503 and an empty body", p, code, body)
		}
	}
	resp := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"error":{"message":"EngineCore encountered an issue. See stack trace (above) for the root cause.","type":"InternalServerError","param":null,"code":500}}`
	if resp.StatusCode != 500 || string(b) != want {
		t.Errorf("completion on a dead engine = %d %s", resp.StatusCode, b)
	}
	if code, _ := get(t, ts.URL+"/metrics"); code != 200 {
		t.Errorf("/metrics = %d on a dead engine", code)
	}
	setFault(t, ts.URL, `{"fault":""}`)
	if code, _ := get(t, ts.URL+"/health"); code != 200 {
		t.Errorf("/health after clearing = %d", code)
	}
}

func TestFaultSlowMetrics(t *testing.T) {
	_, ts := startSim(t, nil)
	setFault(t, ts.URL, `{"fault":"slow_metrics","fault_delay":"300ms"}`)
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := client.Get(ts.URL + "/metrics"); err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("want a scrape timeout, got %v", err)
	}
	start := time.Now()
	if code, _ := get(t, ts.URL+"/metrics"); code != 200 {
		t.Errorf("slow /metrics = %d", code)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("slow /metrics answered after %s, want >= 300ms", d)
	}
}

func TestFaultMetricsReset(t *testing.T) {
	_, ts := startSim(t, nil)
	streamCompletion(t, ts.URL, faultBody)
	before, _ := scrape(t, ts.URL)
	if v := value(t, before, "vllm:generation_tokens_total", nil); v != 6 {
		t.Fatalf("generation_tokens_total = %v", v)
	}
	time.Sleep(10 * time.Millisecond)
	setFault(t, ts.URL, `{"fault":"metrics_reset"}`)
	after, _ := scrape(t, ts.URL)
	for _, name := range []string{"vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:e2e_request_latency_seconds"} {
		if v := value(t, after, name, nil); v != 0 {
			t.Errorf("%s = %v after metrics_reset", name, v)
		}
	}
	if b, a := value(t, before, "vllm:generation_tokens_created", nil), value(t, after, "vllm:generation_tokens_created", nil); a <= b {
		t.Errorf("_created did not move forward: %v -> %v", b, a)
	}
	// Requests keep working and count from zero.
	streamCompletion(t, ts.URL, faultBody)
	mfs, _ := scrape(t, ts.URL)
	if v := value(t, mfs, "vllm:generation_tokens_total", nil); v != 6 {
		t.Errorf("generation_tokens_total = %v after reset and one request", v)
	}
}

package collector

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queueServer exposes n finished requests, each of which waited queue
// seconds and then took prefill seconds to its first token. Its TTFT counts
// from arrival (vLLM) or from scheduling (queue-blind).
type queueServer struct {
	*httptest.Server
	mu          sync.Mutex
	n           float64
	queue       float64
	prefill     float64
	blind       bool
	withPrefill bool
}

func (q *queueServer) body() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	ttft := q.prefill
	if !q.blind {
		ttft += q.queue
	}
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 4.0\n")
	b.WriteString("# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n")
	hist := func(name string, each float64) {
		fmt.Fprintf(&b, "# TYPE %s histogram\n", name)
		below := func(le float64) float64 {
			if each <= le {
				return q.n
			}
			return 0
		}
		for _, le := range []float64{0.25, 1, 5} {
			fmt.Fprintf(&b, "%s_bucket{engine=\"0\",le=\"%g\",model_name=\"m\"} %g\n", name, le, below(le))
		}
		fmt.Fprintf(&b, "%s_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} %g\n", name, q.n)
		fmt.Fprintf(&b, "%s_count{engine=\"0\",model_name=\"m\"} %g\n", name, q.n)
		fmt.Fprintf(&b, "%s_sum{engine=\"0\",model_name=\"m\"} %g\n", name, q.n*each)
	}
	hist("vllm:time_to_first_token_seconds", ttft)
	hist("vllm:request_queue_time_seconds", q.queue)
	if q.withPrefill {
		hist("vllm:request_prefill_time_seconds", q.prefill)
	}
	return b.String()
}

// TestTTFTGapQueueBlind: during a queue burst, the probes' TTFT is network +
// queue + prefill. A server whose TTFT excludes the queue time must still
// give a gap (compare.TTFTGap: probes − server TTFT − the queue when the
// server's TTFT excludes it) equal to the network delay, not to network +
// queue; so must a server that counts from arrival, as vLLM does. Both with
// and without the prefill histogram that tells the two apart. The collector
// tells which (View's TTFTIncludesQueue); the gap is compare's.
func TestTTFTGapQueueBlind(t *testing.T) {
	const network, queue, prefill = 0.03, 2.0, 0.1
	for _, tc := range []struct {
		blind, withPrefill bool
		wantLabel          string
	}{
		{blind: true, withPrefill: true, wantLabel: "false"},
		{blind: true, withPrefill: false, wantLabel: "false"},
		{blind: false, withPrefill: true, wantLabel: "true"},
		// Nothing proves it either way: vLLM's accounting is assumed.
		{blind: false, withPrefill: false, wantLabel: "true"},
	} {
		t.Run(fmt.Sprintf("blind=%v/prefill=%v", tc.blind, tc.withPrefill), func(t *testing.T) {
			qs := &queueServer{queue: queue, prefill: prefill, blind: tc.blind, withPrefill: tc.withPrefill}
			qs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
				fmt.Fprint(w, qs.body())
			}))
			t.Cleanup(qs.Close)
			reg := prometheus.NewPedanticRegistry()
			// Every probe waited in the same queue: network + queue + prefill.
			probeMean := network + queue + prefill
			m := NewManager(testOptions(reg, nil))
			if err := m.Apply(configFor(t, qs.URL, "10s", 4)); err != nil {
				t.Fatal(err)
			}
			s := m.target("a")
			s.now = fakeClock(time.Unix(1_700_000_000, 0), 2*time.Second)
			qs.n = 10
			s.scrapeOnce(context.Background())
			qs.mu.Lock()
			qs.n = 30
			qs.mu.Unlock()
			s.scrapeOnce(context.Background())
			s.client.CloseIdleConnections()

			v, ok := m.View("a")
			mv, okM := v.Model("m")
			if !ok || !okM || mv.Derived == nil {
				t.Fatal("no view of model m")
			}
			gap := probeMean - mv.Derived.Latencies["ttft"].Mean
			if !mv.TTFTIncludesQueue {
				gap -= mv.Derived.Latencies["queue"].Mean
			}
			if math.Abs(gap-network) > 1e-9 {
				t.Errorf("gap = %g, want the network delay %g (queue time is %g)", gap, network, queue)
			}
			if _, ok := gathered(t, reg, "vllm_server_info", map[string]string{"target": "a", "ttft_includes_queue": tc.wantLabel}); !ok {
				t.Errorf("no vllm_server_info with ttft_includes_queue=%q", tc.wantLabel)
			}
		})
	}
}

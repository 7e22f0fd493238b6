package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// hostileEngine serves a vLLM /metrics naming models models (one of them a
// 2 MiB name) and reasons finished_reason values, and a /v1/models listing
// as many ids.
func hostileEngine(t *testing.T, models, reasons int) *httptest.Server {
	t.Helper()
	long := strings.Repeat("m", 2<<20)
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	name := func(i int) string {
		if i == 0 {
			return long
		}
		return fmt.Sprintf("model-%05d", i)
	}
	for i := range models {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=%q} 1\n", name(i))
	}
	b.WriteString("# TYPE vllm:request_success_total counter\n")
	for r := range reasons {
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"r%05d\",model_name=\"model-00001\"} 1\n", r)
	}
	metrics := b.String()
	var ids []string
	for i := range models {
		ids = append(ids, fmt.Sprintf(`{"id":%q,"object":"model","max_model_len":4096}`, name(i)))
	}
	list := `{"object":"list","data":[` + strings.Join(ids, ",") + `]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprint(w, metrics)
		case "/v1/models":
			fmt.Fprint(w, list)
		case "/version":
			fmt.Fprint(w, `{"version":"0.11.0"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEngineValuesBounded: a target naming 20,000 models (one 2 MiB long)
// in /metrics and /v1/models, and 10,000 finished_reason values, exports at
// most MaxModels models, MaxServedModels served models and
// MaxFinishedReasons+1 reasons, no label value longer than
// MaxLabelValueBytes, and counts what it left out; a healthy target beside it
// keeps every series. Unbounded, the one target made 200,018 series and
// re-exported the 2 MiB name.
func TestEngineValuesBounded(t *testing.T) {
	bad, good := hostileEngine(t, 20000, 10000), newFakeVLLM(t)
	good.set(state{Running: 4, Waiting: 2, KV: 0.8, Prompt: 100, Gen: 1000, Stop: 10, TTFT01: 5, TTFT05: 10, TTFTInf: 10, TTFTSum: 1})
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(testOptions(reg, nil))
	cfg := configFor(t, bad.URL, "10s", 4)
	cfg.Targets[1].URL, cfg.Targets[1].ScrapeMetrics = good.URL, true
	if err := m.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, name := range []string{"a", "b"} {
			m.target(name).scrapeOnce(context.Background())
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	perTarget := map[string]int{}
	models, served, reasons := map[string]bool{}, 0, 0
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mt.GetLabel() {
				if len(lp.GetValue()) > MaxLabelValueBytes {
					t.Errorf("%s: label %s is %d bytes long, want at most %d", mf.GetName(), lp.GetName(), len(lp.GetValue()), MaxLabelValueBytes)
				}
				labels[lp.GetName()] = lp.GetValue()
			}
			target := labels["target"]
			if target == "a" && labels["model"] != "" {
				models[labels["model"]] = true
			}
			perTarget[target]++
			if target == "a" && mf.GetName() == "vllm_server_served_model_info" {
				served++
			}
			if target == "a" && mf.GetName() == "vllm_server_request_success_per_second" {
				reasons++
			}
		}
	}
	if len(models) > MaxModels {
		t.Errorf("target a exports %d models, want at most %d", len(models), MaxModels)
	}
	if served > MaxServedModels {
		t.Errorf("target a exports %d served models, want at most %d", served, MaxServedModels)
	}
	if reasons > MaxFinishedReasons+1 {
		t.Errorf("target a exports %d finished reasons, want at most %d", reasons, MaxFinishedReasons+1)
	}
	if n := perTarget["a"]; n > 1000 {
		t.Errorf("target a exports %d series", n)
	}
	t.Logf("series of the hostile target: %d, of the healthy one: %d", perTarget["a"], perTarget["b"])
	if n := perTarget["b"]; n < 15 {
		t.Errorf("the healthy target b exports %d series, want its all", n)
	}
	for kind, min := range map[string]float64{"model": 20000 - MaxModels, "served_model": 20000 - MaxServedModels, "finished_reason": 10000 - MaxFinishedReasons} {
		if v := testutil.ToFloat64(m.dropped.WithLabelValues(kind)); v < min {
			t.Errorf("vllm_prober_scrape_values_dropped_total{kind=%q} = %v, want at least %v", kind, v, min)
		}
	}
}

// TestCutLabelCopies: a label value cut to MaxLabelValueBytes is a copy, not
// a substring of the value the target sent: a substring of a 2 MiB model
// name kept the 2 MiB alive in every snapshot of the rate window (64 MiB in
// use beside a hostile target, perf/hostile).
func TestCutLabelCopies(t *testing.T) {
	long := strings.Repeat("m", 2<<20)
	cut := cutLabel(long)
	if len(cut) != MaxLabelValueBytes {
		t.Fatalf("cut to %d bytes, want %d", len(cut), MaxLabelValueBytes)
	}
	if unsafe.StringData(cut) == unsafe.StringData(long) {
		t.Error("the cut label value shares the 2 MiB value's memory")
	}
}

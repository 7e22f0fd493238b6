package genaiotel

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"go.uber.org/goleak"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/genaiotel/otlptest"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		}
	}
	return out
}

// TestShutdownFlushes records probes into an Exporter whose interval never
// comes (an hour) and shuts it down: Shutdown pushes them, under the GenAI
// names, with the conventions' attributes and the target's labels; a
// failed probe's duration carries error.type; the tokens are counted.
func TestShutdownFlushes(t *testing.T) {
	rc := &otlptest.Receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	reg := prometheus.NewRegistry()
	e, err := New(t.Context(), Options{Endpoint: srv.URL + "/v1/metrics", Interval: time.Hour, Version: "1.2.3", Vantage: "eu", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	tgt := &config.Target{Name: "sim", URL: "http://10.0.0.7:8000", Model: "m", Labels: map[string]string{"team": "infra"}}
	ok := &probe.Result{Success: true, Model: "m", TTFT: 150 * time.Millisecond, E2E: 400 * time.Millisecond,
		ITLs: []time.Duration{20 * time.Millisecond, 30 * time.Millisecond}, PromptTokens: 7, OutputTokens: 3, ReasoningTokens: 1}
	bad := &probe.Result{Reason: probe.ReasonHTTP5xx, Model: "m", E2E: 50 * time.Millisecond, Duration: 60 * time.Millisecond}
	for _, r := range []*probe.Result{ok, ok, bad} {
		e.Record(prober.Finished{Target: tgt, Module: "chat", Prober: config.ProberChat, Model: "m", Result: r})
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// With the receiver still up: no reader goroutine and no push
	// connection outlives Shutdown (the receiver's own goroutines aside).
	goleak.VerifyNone(t, goleak.IgnoreAnyFunction("net/http.(*conn).serve"), goleak.IgnoreAnyFunction("net/http/httptest.(*Server).goServe.func1"))
	ms := rc.Last()
	if ms == nil {
		t.Fatal("Shutdown pushed nothing")
	}
	for _, name := range []string{MetricDuration, MetricTimeToFirstChunk, MetricTimePerChunk, MetricInputTokens, MetricOutputTokens, MetricReasoningTokens} {
		if ms[name] == nil {
			t.Errorf("no %s in the push (got %d metrics)", name, len(ms))
		}
	}
	if t.Failed() {
		return
	}
	wantBase := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "vllm", "gen_ai.request.model": "m",
		"server.address": "10.0.0.7", "server.port": "8000", "vllm_prober.target": "sim", "vllm_prober.module": "chat",
		"vllm_prober.vantage": "eu", "team": "infra"}
	var okCount, badCount uint64
	var okSum float64
	for _, dp := range ms[MetricDuration].GetHistogram().DataPoints {
		a := attrs(dp.Attributes)
		for k, v := range wantBase {
			if a[k] != v {
				t.Errorf("%s: attribute %s = %q, want %q (all: %v)", MetricDuration, k, a[k], v, a)
			}
		}
		switch a["error.type"] {
		case "":
			okCount, okSum = dp.Count, dp.GetSum()
		case string(probe.ReasonHTTP5xx):
			badCount = dp.Count
		default:
			t.Errorf("error.type %q", a["error.type"])
		}
	}
	if okCount != 2 || badCount != 1 || math.Abs(okSum-0.8) > 1e-9 {
		t.Errorf("%s: %d successful (sum %v s) and %d failed; want 2 (0.8 s) and 1", MetricDuration, okCount, okSum, badCount)
	}
	if ms[MetricDuration].GetHistogram().AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
		t.Errorf("temporality %v, want cumulative (Prometheus' OTLP receiver refuses delta by default)", ms[MetricDuration].GetHistogram().AggregationTemporality)
	}
	if n := ms[MetricTimePerChunk].GetHistogram().DataPoints[0].Count; n != 4 {
		t.Errorf("%s: %d chunks, want 4", MetricTimePerChunk, n)
	}
	if n := ms[MetricTimeToFirstChunk].GetHistogram().DataPoints[0].Count; n != 2 {
		t.Errorf("%s: %d, want 2 (the successful probes)", MetricTimeToFirstChunk, n)
	}
	for name, want := range map[string]int64{MetricInputTokens: 14, MetricOutputTokens: 6, MetricReasoningTokens: 2} {
		sum := ms[name].GetSum()
		if !sum.IsMonotonic || sum.DataPoints[0].GetAsInt() != want || ms[name].Unit != "{token}" {
			t.Errorf("%s: %v (monotonic %v, unit %q), want %d {token}", name, sum.DataPoints[0].GetAsInt(), sum.IsMonotonic, ms[name].Unit, want)
		}
	}
	if got := exports(t, reg, "success"); got != 1 {
		t.Errorf("vllm_prober_otlp_exports_total{result=success} = %v, want 1", got)
	}
}

// exports returns vllm_prober_otlp_exports_total{result} of reg.
func exports(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if mf.GetName() == "vllm_prober_otlp_exports_total" && m.Label[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no vllm_prober_otlp_exports_total{result=%q}", result)
	return 0
}

// TestPushFailureIsCounted: a receiver that refuses the push is logged and
// counted, and Shutdown still returns (the SDK's global error handler is
// not involved).
func TestPushFailureIsCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	e, err := New(t.Context(), Options{Endpoint: srv.URL + "/v1/metrics", Interval: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	e.Record(prober.Finished{Target: &config.Target{Name: "a", URL: "http://a"}, Module: "m", Prober: config.ProberCompletions,
		Result: &probe.Result{Success: true, E2E: time.Second}})
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exports(t, reg, "failure"); got != 1 {
		t.Errorf("vllm_prober_otlp_exports_total{result=failure} = %v, want 1", got)
	}
}

func TestNewRefusesBadEndpoints(t *testing.T) {
	for _, u := range []string{"ftp://h/v1/metrics", "http:///v1/metrics", "http://user:secret@h/v1/metrics", ""} {
		if _, err := New(t.Context(), Options{Endpoint: u}); err == nil {
			t.Errorf("New accepted %q", u)
		}
	}
}

package prober

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// rendered is what one collection of a scheduled pair's series renders of
// the failures and skipped families, by reason.
func rendered(t *testing.T, s *series) (failures, skipped map[string]float64) {
	t.Helper()
	d := newDescs(nil)
	ch := make(chan prometheus.Metric, 256)
	snap := s.snapshot()
	s.exposed()
	snap.collect(ch, d, newLabelSet([]string{"target", "module", "model"}, []string{"t", "m", "model"}), allSeries)
	close(ch)
	failures, skipped = map[string]float64{}, map[string]float64{}
	for m := range ch {
		var out map[string]float64
		switch m.Desc() {
		case d.failures:
			out = failures
		case d.skipped:
			out = skipped
		default:
			continue
		}
		var dm dto.Metric
		if err := m.Write(&dm); err != nil {
			t.Fatal(err)
		}
		out[labelValue(&dm, "reason")] = dm.GetCounter().GetValue()
	}
	return failures, skipped
}

// TestReasonsAppearAtZeroFirst: a scheduled pair renders no failure or skip
// reason before it occurs; a reason that occurs renders 0 at the next
// collection and its count from the one after, so that Prometheus'
// increase() counts the first failure; a reason already shown counts at
// once. /probe's one-shot series render every reason.
func TestReasonsAppearAtZeroFirst(t *testing.T) {
	s := newSeries(histOpts{buckets: []float64{1}, tokenBuckets: []float64{1}}, true)
	if f, sk := rendered(t, s); len(f) != 0 || len(sk) != 0 {
		t.Fatalf("before any failure or skip: failures %v skipped %v, want none", f, sk)
	}
	fail := &probe.Result{Reason: probe.ReasonTimeout}
	s.observe(fail, 1, "")
	s.observe(fail, 2, "") // before any collection: still pending
	s.skip(SkipBudget, 2)
	if f, sk := rendered(t, s); len(f) != 1 || f["timeout"] != 0 || len(sk) != 1 || sk["budget"] != 0 {
		t.Fatalf("first collection after the first failures: failures %v skipped %v, want timeout and budget at 0", f, sk)
	}
	if f, sk := rendered(t, s); f["timeout"] != 2 || sk["budget"] != 1 {
		t.Fatalf("second collection: failures %v skipped %v, want timeout 2, budget 1", f, sk)
	}
	s.observe(fail, 3, "")
	if f, _ := rendered(t, s); f["timeout"] != 3 {
		t.Fatalf("a reason already shown: %v, want timeout 3 at once", f)
	}

	one := newSeries(histOpts{buckets: []float64{1}, tokenBuckets: []float64{1}}, false)
	one.observe(&probe.Result{Success: true}, 1, "")
	if f, _ := rendered(t, one); len(f) != len(probe.Reasons()) {
		t.Errorf("/probe's series render %d failure reasons, want all %d", len(f), len(probe.Reasons()))
	}
}

// seriesCollector renders one scheduled pair's series, as the Manager's
// collector does.
type seriesCollector struct{ s *series }

func (seriesCollector) Describe(chan<- *prometheus.Desc) {}
func (c seriesCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.snapshot()
	c.s.exposed()
	snap.collect(ch, newDescs(nil), newLabelSet([]string{"target", "module", "model"}, []string{"t", "m", "model"}), allSeries)
}

// TestReasonCountersCarryCreated: a failure or skip reason's counter carries
// its created timestamp, the time the reason first occurred, in the
// OpenMetrics exposition (_created) and in protobuf: a second Prometheus 3
// (created-timestamp-zero-ingestion) whose first sample is already the count
// still sees the first failure through increase().
func TestReasonCountersCarryCreated(t *testing.T) {
	s := newSeries(histOpts{buckets: []float64{1}, tokenBuckets: []float64{1}}, true)
	s.observe(&probe.Result{Reason: probe.ReasonTimeout}, 1700000000.5, "")
	s.observe(&probe.Result{Reason: probe.ReasonTimeout}, 1700000030, "")
	s.skip(SkipBudget, 1700000010)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(seriesCollector{s})
	for range 2 { // the pending zero, then the count
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeOpenMetrics), expfmt.WithCreatedLines())
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []string{
			`vllm_probe_failures_created{model="model",module="m",reason="timeout",target="t"} 1.7000000005e+09`,
			`vllm_probe_skipped_created{model="model",module="m",reason="budget",target="t"} 1.70000001e+09`,
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("the OpenMetrics exposition lacks %s:\n%s", want, b.String())
			}
		}
		if strings.Contains(b.String(), "vllm_probe_attempts_created") {
			t.Errorf("attempts, which exist from the pair's start, carry a created timestamp:\n%s", b.String())
		}
	}
}

package prober

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// The pairs of a gateway and of its members keep samples for the gateway
// joins, and only theirs; a gateway probe's sample names the member from the
// gateway's member header, cleaned, and a probe the gateway answered itself
// names none; the ring keeps the last GatewaySamples; a reload that drops
// the gateway drops the samples.
func TestGatewaySamples(t *testing.T) {
	const file = `
modules:
  m: {prober: completions, prompt: hi}
targets:
  - {name: a, url: "http://127.0.0.2:1", labels: {pool: p}}
  - {name: b, url: "http://127.0.0.3:1", labels: {pool: p}}
  - {name: other, url: "http://127.0.0.4:1"}
%s`
	const gw = `  - name: gw
    url: http://127.0.0.1:1
    labels: {pool: p}
    gateway: {member_label: pool, member_header: X-Served-By}
`
	load := func(extra string) *config.Config {
		cfg, err := config.Load(fmt.Appendf(nil, file, extra), "")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	m := NewManager(testOptions(nil, nil))
	if err := m.Apply(load(gw)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	served := func(v string) http.Header {
		h := http.Header{}
		if v != "" {
			h.Set("X-Served-By", v)
		}
		return h
	}
	m.RecordForTest("gw", "m", probe.Result{Start: start, Success: true, StatusCode: 200, TTFT: 30 * time.Millisecond, ResponseHeader: served("a\x00<script>")})
	m.RecordForTest("gw", "m", probe.Result{Start: start, StatusCode: 429, Reason: probe.ReasonShed, ResponseHeader: served("")})
	m.RecordForTest("a", "m", probe.Result{Start: start, Success: true, StatusCode: 200, TTFT: 20 * time.Millisecond, ResponseHeader: served("b")})
	m.RecordForTest("other", "m", probe.Result{Start: start, Success: true, StatusCode: 200})

	got := m.GatewaySamples("gw", "m", start)
	want := []GatewaySample{
		{Start: start, Success: true, Answered: true, TTFT: 30 * time.Millisecond, Member: "ascript"},
		{Start: start, Answered: true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gateway samples %v, want %v", got, want)
	}
	if got := m.GatewaySamples("a", "m", start); len(got) != 1 || got[0].Member != "" {
		t.Errorf("member samples %v: want one, naming no member (a member's headers are not read)", got)
	}
	if got := m.GatewaySamples("other", "m", start); got != nil {
		t.Errorf("a target outside every gateway keeps samples: %v", got)
	}
	if got := m.GatewaySamples("gw", "m", start.Add(time.Second)); len(got) != 0 {
		t.Errorf("samples before since: %v", got)
	}
	for i := range GatewaySamples + 5 {
		m.RecordForTest("b", "m", probe.Result{Start: start.Add(time.Duration(i) * time.Millisecond), Success: true, StatusCode: 200})
	}
	if got := m.GatewaySamples("b", "m", start); len(got) != GatewaySamples {
		t.Errorf("ring kept %d samples, want the last %d", len(got), GatewaySamples)
	}
	if got := m.GatewaySamples("b", "m", start.Add(5*time.Millisecond)); len(got) != GatewaySamples {
		t.Errorf("ring kept %d samples since the 6th, want all %d: the oldest went first", len(got), GatewaySamples)
	}
	if err := m.Apply(load("")); err != nil {
		t.Fatal(err)
	}
	if got := m.GatewaySamples("a", "m", start); got != nil {
		t.Errorf("after the gateway went, its member keeps samples: %v", got)
	}
}

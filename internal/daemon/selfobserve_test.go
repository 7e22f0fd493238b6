package daemon

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/schedule"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// selfObserveConfig probes a simulator every second with probes of about
// 400 ms (100 ms TTFT, 30 tokens of 10 ms) and scrapes it every second.
const selfObserveConfig = `
global:
  probe_interval: 1s
  scrape_interval: 1s
  scrape_timeout: 400ms
  rate_window: 3s
modules:
  m:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 30
    ignore_eos: true
targets:
  - {name: %s, url: %s, modules: [m]}
`

// TestIdleTargetReadsNoOwnProbeRunning: an engine with no traffic but the
// prober's own probes reads 0 requests running at every scrape. The scrape
// and the probe of a target have independent phases (hashes of their
// names); the target's name is picked so that the scrape falls 100-250 ms
// into the probe, where every scrape of an idle llama-server read one
// request running. The scrape waits for the target's probes in flight.
func TestIdleTargetReadsNoOwnProbeRunning(t *testing.T) {
	const interval = time.Second
	name := ""
	for i := range 1000 {
		n := fmt.Sprintf("idle-%d", i)
		into := (schedule.Phase(interval, n) + 1 - schedule.Phase(interval, n, "m", "") + interval) % interval
		if into >= 100*time.Millisecond && into <= 250*time.Millisecond {
			name = n
			break
		}
	}
	if name == "" {
		t.Fatal("no target name puts the scrape inside the probe")
	}
	sim := startCountingSim(t, func(c *simulator.Config) {
		c.TTFT, c.ITL, c.Jitter = 100*time.Millisecond, 10*time.Millisecond, 0
	})
	f := &fixture{t: t}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, fmt.Sprintf(selfObserveConfig, name, sim.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 20})

	seen := map[time.Time]float64{}
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) {
		if s := f.d.Collector().Latest(name); s != nil {
			seen[s.Time] = s.Running()
		}
		time.Sleep(20 * time.Millisecond)
	}
	busy := 0
	for _, r := range seen {
		if r != 0 {
			busy++
		}
	}
	if probes := sim.generations.Load(); probes < 4 {
		t.Fatalf("%d probes in 7s, want one a second", probes)
	}
	if len(seen) < 5 || busy > 0 {
		t.Errorf("%d of %d scrapes of an idle target read a request running: the prober's own probe", busy, len(seen))
	}
}

package compare

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/prober"
)

// startStack wires a prober, a collector and the regression series on one
// registry as the daemon does (the collector's recent load is the prober's
// load source), applies cfg and runs them until the test ends.
//
// The tests probe every few hundred milliseconds to sample often, and a probe
// that queues behind the load must still finish: probeTimeout, longer than
// the interval, is set past validation, which refuses it in a configuration
// file (Prometheus' convention); the prober's in-flight guard skips the ticks.
func startStack(t *testing.T, cfg *config.Config, probeTimeout, window time.Duration) (*prometheus.Registry, *prober.Manager) {
	t.Helper()
	for i := range cfg.Targets {
		cfg.Targets[i].ProbeTimeout = model.Duration(probeTimeout)
	}
	reg := prometheus.NewRegistry()
	red := redact.New()
	clients := httpclient.New(red)
	cm := collector.NewManager(collector.Options{Registerer: reg, Clients: clients, Redactor: red})
	pm := prober.NewManager(prober.Options{Registerer: reg, Clients: clients, Redactor: red, Load: cm.LoadDuring})
	rc := New(Options{Registerer: reg, Probes: FromProber(pm), Server: cm, Window: window})
	for _, apply := range []func(*config.Config) error{pm.Apply, cm.Apply, rc.Apply} {
		if err := apply(cfg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { pm.Run(ctx) })
	wg.Go(func() { cm.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return reg, pm
}

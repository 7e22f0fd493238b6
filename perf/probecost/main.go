// Command probecost prints figure P4 of docs/performance.md: what the default
// probe configuration costs a target, in tokens per hour, and that as a
// fraction of a baseline's saturation throughput.
//
// It runs a prober.Manager with one target and one module that sets only what
// a module must (prober and prompt: the README's prompt), so every other
// setting is the default (max_tokens, ignore_eos, nonce), against an
// in-process vllm_sim for -probes probes, and reads the tokens the probes spent
// from vllm_probe_tokens_total (the server's usage). Tokens per hour are that
// per probe times 3600 s / the default probe_interval.
//
//	go run ./perf/probecost [-saturation 573.8]
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
	"github.com/vllm-prober/vllm_prober/prober"
)

const prompt = "Let's explore some architecture patterns for microservices"

func main() {
	probes := flag.Int("probes", 10, "probes to measure")
	// The multi-GPU presets report: Llama-3.2-3B on one H100, 10 concurrent requests:
	// 573.8 generation tokens/s (docs/simulator.md, internal/baseline/testdata/reports/).
	saturation := flag.Float64("saturation", 573.8, "baseline saturation throughput, generation tokens/s")
	flag.Parse()
	if err := run(*probes, *saturation); err != nil {
		fmt.Fprintln(os.Stderr, "probecost:", err)
		os.Exit(1)
	}
}

func run(probes int, saturation float64) error {
	sim, err := simulator.New(simulator.DefaultConfig(), log.NewNopLogger())
	if err != nil {
		return fmt.Errorf("starting the simulator: %w", err)
	}
	defer sim.Close()
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()

	// Only the probe interval differs from the defaults, so that the probes are
	// measured in seconds; the cost per hour uses the default interval.
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global:
  probe_interval: 300ms
modules:
  default:
    prober: completions
    prompt: %q
targets:
  - name: t
    url: %s
    scrape_metrics: false
`, prompt, srv.URL)), ".")
	if err != nil {
		return fmt.Errorf("loading the configuration: %w", err)
	}
	reg := prometheus.NewRegistry()
	red := redact.New()
	m := prober.NewManager(prober.Options{Registerer: reg, Logger: log.NewNopLogger(), Clients: httpclient.New(red), Redactor: red})
	if err := m.Apply(cfg); err != nil {
		return fmt.Errorf("applying the configuration: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(probes+20)*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	for ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		if n, _, _ := read(reg); n >= float64(probes) {
			break
		}
	}
	cancel()
	<-done
	// Read again: a probe may have finished after the loop's last read.
	attempts, prompts, outputs := read(reg)
	if attempts < float64(probes) {
		return fmt.Errorf("only %v probes ran", attempts)
	}

	perHour := 3600 / time.Duration(config.DefaultGlobal.ProbeInterval).Seconds()
	in, out := prompts/attempts, outputs/attempts
	fmt.Print("P4 probe cost of the default probe configuration\n", perfutil.Machine())
	fmt.Printf("module: prober completions, prompt %q, max_tokens %d, ignore_eos %v, nonce %v; probe_interval %s\n",
		prompt, config.DefaultModule.MaxTokens, config.DefaultModule.IgnoreEOS, config.DefaultModule.Nonce,
		time.Duration(config.DefaultGlobal.ProbeInterval))
	fmt.Printf("measured over %v probes: %.1f prompt + %.1f output tokens per probe (server usage)\n", attempts, in, out)
	fmt.Printf("probes per hour per module: %.0f\n", perHour)
	fmt.Printf("tokens per hour per target: %.0f (%.0f prompt + %.0f output)\n", perHour*(in+out), perHour*in, perHour*out)
	fmt.Printf("baseline saturation: %.1f generation tokens/s = %.0f per hour\n", saturation, saturation*3600)
	fmt.Printf("output tokens / saturation: %.4f%%; all probe tokens / saturation: %.4f%%\n",
		100*perHour*out/(saturation*3600), 100*perHour*(in+out)/(saturation*3600))
	return nil
}

// read returns the successful probes finished and the prompt and output tokens they spent.
func read(reg *prometheus.Registry) (attempts, prompt, output float64) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, 0, 0
	}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			kind := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "kind" {
					kind = l.GetValue()
				}
			}
			switch {
			case mf.GetName() == "vllm_probe_e2e_latency_seconds":
				// Finished successful probes: attempts would count one in flight.
				attempts += float64(s.GetHistogram().GetSampleCount())
			case mf.GetName() == "vllm_probe_tokens_total" && kind == "prompt":
				prompt += s.GetCounter().GetValue()
			case mf.GetName() == "vllm_probe_tokens_total" && kind == "output":
				output += s.GetCounter().GetValue()
			}
		}
	}
	return attempts, prompt, output
}

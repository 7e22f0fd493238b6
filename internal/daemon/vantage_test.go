package daemon

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVantageLabelsEverySeries runs a daemon with a vantage: every series of
// its /metrics, probe results, server series and its own (build info, Go and
// process collectors, shard info) carries vantage="eu"; without one (the
// fixture of every other test) none does.
func TestVantageLabelsEverySeries(t *testing.T) {
	f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, configText(f.sim.URL, f.echo.URL, ""))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5, Vantage: "eu"})
	waitFor(t, 20*time.Second, "a probe of sim", func() bool { return f.historyLen("sim", "short_chat") >= 1 })

	_, body := f.get("/metrics")
	families := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, "{")
		name, _, _ = strings.Cut(name, " ")
		families[name] = true
		if !strings.Contains(l, `vantage="eu"`) {
			t.Errorf("series without vantage=\"eu\": %s", l)
		}
	}
	for _, want := range []string{"vllm_probe_success", "vllm_prober_build_info", "vllm_prober_shard_info", "go_goroutines", "vllm_server_up"} {
		if !families[want] {
			t.Errorf("/metrics has no %s", want)
		}
	}

	if _, err := New(Options{ConfigFile: f.path, Vantage: "eu west"}, nil); err == nil || !strings.Contains(err.Error(), `vantage "eu west" must be`) {
		t.Errorf("New with vantage %q: err = %v, want a vantage error", "eu west", err)
	}
}

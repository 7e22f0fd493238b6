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

// metricLines returns the sample lines of /metrics.
func (f *fixture) metricLines() []string {
	_, body := f.get("/metrics")
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestVantageFromConfig: global.vantage labels every series as --vantage
// does; a reload that changes it is refused with the old configuration kept,
// since the label is set at start; --vantage wins over global.vantage, and
// with it a reload may change the key.
func TestVantageFromConfig(t *testing.T) {
	withVantage := func(cfg, v string) string {
		return strings.Replace(cfg, "global:\n", "global:\n  vantage: "+v+"\n", 1)
	}
	f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	base := configText(f.sim.URL, f.echo.URL, "")
	writeConfig(t, f.path, withVantage(base, "eu"))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})
	waitFor(t, 20*time.Second, "a probe of sim", func() bool { return f.historyLen("sim", "short_chat") >= 1 })
	for _, l := range f.metricLines() {
		if !strings.Contains(l, `vantage="eu"`) {
			t.Errorf("series without vantage=\"eu\": %s", l)
		}
	}

	writeConfig(t, f.path, withVantage(base, "us"))
	err := f.d.Reload()
	if want := `global.vantage changed from "eu" to "us": the vantage label is set at start, restart vllm_prober to change it`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("reload changing global.vantage: err = %v, want %q", err, want)
	}
	if v := f.d.Config().Global.Vantage; v != "eu" {
		t.Errorf("after the refused reload global.vantage = %q, want the old eu", v)
	}
	found := false
	for _, l := range f.metricLines() {
		if strings.HasPrefix(l, "vllm_prober_config_last_reload_successful{") {
			found = true
			if !strings.HasSuffix(l, " 0") {
				t.Errorf("%s, want 0 after the refused reload", l)
			}
		}
	}
	if !found {
		t.Error("no vllm_prober_config_last_reload_successful")
	}
	f.stop()

	// --vantage wins: the file's vantage is ignored, and may change.
	g := &fixture{t: t, sim: f.sim, echo: f.echo, path: f.path}
	g.start(Options{ConfigFile: g.path, HistoryLimit: 5, Vantage: "flag"})
	writeConfig(t, g.path, withVantage(base, "elsewhere"))
	if err := g.d.Reload(); err != nil {
		t.Errorf("reload changing global.vantage under --vantage: %v", err)
	}
	for _, l := range g.metricLines() {
		if !strings.Contains(l, `vantage="flag"`) {
			t.Errorf("series without vantage=\"flag\": %s", l)
		}
	}
}

// TestProbeOnly: a probe-only replica (--probe-only or global.probe_only)
// probes and checks /health but scrapes no /metrics: no vllm_server_*
// series, none of the series that need the server's figures, and a
// scrape-only target is not run at all. A reload can turn it off.
func TestProbeOnly(t *testing.T) {
	scrapeOnly := "  - name: scraped\n    url: %s\n    probe: false\n"
	for _, tc := range []struct {
		name string
		opts Options
		key  bool
	}{{"flag", Options{ProbeOnly: true}, false}, {"config", Options{}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
			f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
			cfg := configText(f.sim.URL, f.echo.URL, strings.Replace(scrapeOnly, "%s", f.sim.URL, 1))
			on := cfg
			if tc.key {
				on = strings.Replace(cfg, "global:\n", "global:\n  probe_only: true\n", 1)
			}
			writeConfig(t, f.path, on)
			opts := tc.opts
			opts.ConfigFile, opts.HistoryLimit = f.path, 5
			f.start(opts)
			waitFor(t, 20*time.Second, "two probes of sim", func() bool { return f.historyLen("sim", "short_chat") >= 2 })
			for _, rt := range f.d.Running().Targets {
				if rt.ScrapeMetrics || rt.Name == "scraped" {
					t.Errorf("probe-only replica runs target %s with scrape_metrics %v", rt.Name, rt.ScrapeMetrics)
				}
			}
			// Two scrape intervals: a scraping replica has server series by now.
			time.Sleep(2 * time.Second)
			families := map[string]bool{}
			for _, l := range f.metricLines() {
				name, _, _ := strings.Cut(l, "{")
				name, _, _ = strings.Cut(name, " ")
				families[name] = true
				if strings.HasPrefix(name, "vllm_server_") || strings.HasPrefix(name, "vllm_cost_") {
					t.Errorf("probe-only replica exports %s", l)
				}
				if strings.Contains(l, `target="scraped"`) {
					t.Errorf("probe-only replica runs the scrape-only target: %s", l)
				}
			}
			for _, want := range []string{"vllm_probe_success", "vllm_probe_health_up", "vllm_probe_attempts_total"} {
				if !families[want] {
					t.Errorf("/metrics has no %s", want)
				}
			}
			if tc.key {
				// The key may change on reload: scraping resumes.
				writeConfig(t, f.path, cfg)
				if err := f.d.Reload(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 20*time.Second, "vllm_server_up after probe_only is turned off", func() bool {
					for _, l := range f.metricLines() {
						if strings.HasPrefix(l, `vllm_server_up{`) && strings.Contains(l, `target="scraped"`) {
							return true
						}
					}
					return false
				})
			}
		})
	}
}

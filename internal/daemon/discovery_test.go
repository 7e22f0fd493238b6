package daemon

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vllm-prober/vllm_prober/internal/shard"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// startPlainSim runs an in-process vllm_sim without an API key; mutate adjusts
// its configuration.
func startPlainSim(t testing.TB, mutate func(*simulator.Config)) *httptest.Server {
	t.Helper()
	return startWrappedSim(t, mutate, nil)
}

// startWrappedSim is startPlainSim with the simulator's handler passed
// through wrap (nil: none), e.g. to count the requests it serves.
func startWrappedSim(t testing.TB, mutate func(*simulator.Config), wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.TTFT = 5 * time.Millisecond
	cfg.ITL = time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	h := sim.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return srv
}

func hostPort(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// writeAtomic replaces path's content in one step, as config management does.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// targetGroups is a file_sd file: one group per name, each naming its target.
func targetGroups(addr string, names ...string) string {
	var groups []string
	for _, n := range names {
		groups = append(groups, fmt.Sprintf(`{"targets": [%q], "labels": {"__target_name__": %q, "fleet": "f1"}}`, addr, n))
	}
	return "[" + strings.Join(groups, ",\n") + "]\n"
}

// sample returns the value of the series of family name whose labels include
// want, from reg.
func sample(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metrics
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

func runningNames(d *Daemon) []string {
	var names []string
	for _, t := range d.Running().Targets {
		names = append(names, t.Name)
	}
	return names
}

// A change of a file_sd target file reaches the running daemon without a
// restart or reload: a new target is probed (Status, /metrics, /probe), a
// removed one stops. A reload keeps the discovered targets running.
func TestDiscoveredTargetFileChange(t *testing.T) {
	sim := startPlainSim(t, nil)
	addr := hostPort(t, sim)
	dir := t.TempDir()
	targetsFile := filepath.Join(dir, "targets", "fleet.json")
	if err := os.Mkdir(filepath.Dir(targetsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, targetsFile, targetGroups(addr, "disc-a"))
	configFor := func(labels string) string {
		return fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 1s, scrape_timeout: 500ms, rate_window: 3s}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 4}
targets:
  - {name: static, url: %q, labels: {preset: test}}
file_sd_configs:
  - files: [targets/*.json]
target_defaults:
  labels: %s
`, sim.URL, labels)
	}
	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	writeConfig(t, f.path, configFor("{team: infra}"))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})
	reg := f.d.Registry()

	waitFor(t, 15*time.Second, "the discovered target disc-a to be probed", func() bool {
		return f.historyLen("disc-a", "short") > 0
	})
	if v, ok := sample(t, reg, "vllm_prober_targets", map[string]string{"source": "discovered"}); !ok || v != 1 {
		t.Errorf("vllm_prober_targets{source=\"discovered\"} = %v (%v), want 1", v, ok)
	}
	if v, ok := sample(t, reg, "vllm_prober_targets", map[string]string{"source": "static"}); !ok || v != 1 {
		t.Errorf("vllm_prober_targets{source=\"static\"} = %v (%v), want 1", v, ok)
	}

	// Add a target: no reload, no restart, and no configuration work: the
	// one module was compiled once, when the file was loaded.
	if n := f.d.probes.Compilations(); n != 1 {
		t.Errorf("%d module compilations after the load, want 1", n)
	}
	writeAtomic(t, targetsFile, targetGroups(addr, "disc-a", "disc-b"))
	waitFor(t, 15*time.Second, "the new target disc-b to succeed on /metrics", func() bool {
		v, ok := sample(t, reg, "vllm_probe_success", map[string]string{"target": "disc-b", "module": "short", "fleet": "f1", "team": "infra"})
		return ok && v == 1
	})
	if n := f.d.probes.Compilations(); n != 1 {
		t.Errorf("%d module compilations after a discovery refresh, want still 1", n)
	}
	if v, _ := sample(t, reg, "vllm_prober_targets", map[string]string{"source": "discovered"}); v != 2 {
		t.Errorf("vllm_prober_targets{source=\"discovered\"} = %v, want 2", v)
	}
	if code, body := f.get("/probe?target=disc-b"); code != http.StatusOK || !strings.Contains(body, "\nvllm_probe_success 1\n") {
		t.Errorf("/probe of the discovered target = %d:\n%s", code, body)
	}
	if _, body := f.get("/"); !strings.Contains(body, `<a href="target?name=disc-b#module-short">disc-b</a>`) {
		t.Error("the landing page does not show the discovered target")
	}

	// A reload keeps the discoverer: the discovered targets run on, with
	// their history, under the new template at once.
	before := f.historyLen("disc-b", "short")
	writeConfig(t, f.path, configFor("{team: platform}"))
	if err := f.d.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got, want := runningNames(f.d), []string{"disc-a", "disc-b", "static"}; !slices.Equal(got, want) {
		t.Errorf("right after the reload the daemon runs %v, want %v", got, want)
	}
	if n := f.historyLen("disc-b", "short"); n < before {
		t.Errorf("the reload dropped disc-b's history: %d probes, had %d", n, before)
	}
	waitFor(t, 15*time.Second, "the new target_defaults labels", func() bool {
		v, ok := sample(t, reg, "vllm_probe_success", map[string]string{"target": "disc-b", "team": "platform"})
		return ok && v == 1
	})

	// Remove a target.
	writeAtomic(t, targetsFile, targetGroups(addr, "disc-b"))
	waitFor(t, 15*time.Second, "disc-a to go", func() bool {
		_, ok := sample(t, reg, "vllm_probe_success", map[string]string{"target": "disc-a"})
		return !ok && f.historyLen("disc-a", "short") == 0
	})
	if got, want := runningNames(f.d), []string{"disc-b", "static"}; !slices.Equal(got, want) {
		t.Errorf("after the removal the daemon runs %v, want %v", got, want)
	}
	f.stop()
}

// Static targets are sharded too, without any discovery: the shards of one
// configuration cover every target exactly once.
func TestShardedStaticTargets(t *testing.T) {
	var b strings.Builder
	b.WriteString("modules: {m: {prober: completions, prompt: hi}}\ntargets:\n")
	var all []string
	for i := range 20 {
		name := fmt.Sprintf("t%02d", i)
		all = append(all, name)
		fmt.Fprintf(&b, "  - {name: %s, url: \"http://127.0.0.1:%d\"}\n", name, 10000+i)
	}
	path := filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, path, b.String())

	const count = 3
	seen := map[string]int{}
	for index := range count {
		reg := prometheus.NewRegistry()
		d, err := New(Options{ConfigFile: path, ShardCount: count, ShardIndex: index, Registry: reg}, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := runningNames(d)
		var want []string
		for _, tg := range shard.Targets(d.Config().Targets, count, index) {
			want = append(want, tg.Name)
		}
		if !slices.Equal(names, want) || len(names) == 0 || len(names) == len(all) {
			t.Errorf("shard %d runs %v, want shard.Targets' %v (a proper share)", index, names, want)
		}
		for _, n := range names {
			seen[n]++
		}
		if v, ok := sample(t, reg, "vllm_prober_shard_info", map[string]string{"index": fmt.Sprint(index), "count": "3"}); !ok || v != 1 {
			t.Errorf("shard %d: vllm_prober_shard_info{index=%q,count=\"3\"} = %v (%v), want 1", index, fmt.Sprint(index), v, ok)
		}
		if v, ok := sample(t, reg, "vllm_prober_targets", map[string]string{"source": "static"}); !ok || int(v) != len(names) {
			t.Errorf("shard %d: vllm_prober_targets{source=\"static\"} = %v, want %d", index, v, len(names))
		}
		if v, ok := sample(t, reg, "vllm_prober_targets", map[string]string{"source": "discovered"}); !ok || v != 0 {
			t.Errorf("shard %d: vllm_prober_targets{source=\"discovered\"} = %v (%v), want 0", index, v, ok)
		}
		if code, _ := get(t, d, "/probe?target="+pickOther(all, names)+"&module=m"); code != http.StatusBadRequest {
			t.Errorf("shard %d: /probe of another shard's target = %d, want 400", index, code)
		}
	}
	for _, n := range all {
		if seen[n] != 1 {
			t.Errorf("target %s is run by %d shards, want exactly 1", n, seen[n])
		}
	}

	for _, o := range []struct {
		count, index int
		want         string
	}{
		{3, 3, "shard index 3 is out of range for shard count 3 (want 0 to 2)"},
		{-1, 0, "shard count must be at least 1, got -1"},
	} {
		_, err := New(Options{ConfigFile: path, ShardCount: o.count, ShardIndex: o.index}, nil)
		if err == nil || err.Error() != o.want {
			t.Errorf("New with shard %d of %d = %v, want %q", o.index, o.count, err, o.want)
		}
	}
}

// pickOther returns a name of all that is not in mine.
func pickOther(all, mine []string) string {
	for _, n := range all {
		if !slices.Contains(mine, n) {
			return n
		}
	}
	return ""
}

// get serves one request with d's Handler, without Run.
func get(t *testing.T, d *Daemon, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// Discovered targets' credentials come from target_defaults: a server echoing
// them back does not get them onto any page or into the log.
func TestDiscoveredTargetSecrets(t *testing.T) {
	echo := startEcho(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "targets"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(dir, "targets", "echo.json"), targetGroups(hostPort(t, echo), "echo-d"))
	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 1s, scrape_timeout: 500ms, rate_window: 3s}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 4}
file_sd_configs:
  - files: [targets/*.json]
target_defaults:
  http_client_config: {bearer_token: %s}
`, echoKey))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})
	waitFor(t, 15*time.Second, "a probe of the discovered echo target", func() bool { return f.historyLen("echo-d", "short") > 0 })

	code, body := f.get("/probe?target=echo-d&debug=true")
	if code != http.StatusOK || !strings.Contains(body, "Result: failure (reason unauthorized)") || !strings.Contains(body, "invalid api key <secret>") {
		t.Errorf("/probe debug of the discovered target = %d, want the 401 with the key scrubbed:\n%s", code, body)
	}
	secretFree(t, "the debug report", body)
	_, page := f.get("/")
	secretFree(t, "the landing page", page)
	_, cfg := f.get("/config")
	secretFree(t, "/config", cfg)
	_, metrics := f.get("/metrics")
	secretFree(t, "/metrics", metrics)
	f.stop()
	secretFree(t, "the debug log", f.logs.String())
}

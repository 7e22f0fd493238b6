package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	promdiscovery "github.com/prometheus/prometheus/discovery"

	"github.com/vllm-prober/vllm_prober/config"
)

// discoverers are the discoverers the daemon's discovery manager runs, with
// their configurations.
func discoverers(d *Daemon) (ds []promdiscovery.Discoverer, cfgs []any) {
	d.applyMu.Lock() // the manager's providers change only under it
	defer d.applyMu.Unlock()
	for _, p := range d.sd.Providers() {
		ds, cfgs = append(ds, p.Discoverer()), append(cfgs, p.Config())
	}
	return ds, cfgs
}

// summaryCount is the sample count of the summary name whose labels include
// want.
func summaryCount(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
					continue metric
				}
			}
			n += float64(m.GetSummary().GetSampleCount())
		}
	}
	return n
}

// TestDiscoveryReload runs file discovery through reloads of the daemon's
// one discovery manager: a reload that changes only relabel_configs keeps
// the discoverer and every unchanged target's series, a failed reload (a
// file that does not load, a step that fails) leaves the old discovery
// running, and a reload that changes the discoverer's configuration swaps
// it.
func TestDiscoveryReload(t *testing.T) {
	sim := startPlainSim(t, nil)
	addr := hostPort(t, sim)
	dir := t.TempDir()
	for _, sub := range []string{"fleet", "other"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeAtomic(t, filepath.Join(dir, "fleet", "a.json"), targetGroups(addr, "disc-a", "disc-b"))
	writeAtomic(t, filepath.Join(dir, "other", "x.json"), targetGroups(addr, "disc-x"))
	configFor := func(files, tier, extra string) string {
		return fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 1s, scrape_timeout: 500ms, rate_window: 3s}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 4}
file_sd_configs:
  - {files: [%s], refresh_interval: 1h}
relabel_configs:
  - {source_labels: [__target_name__], regex: disc-b, target_label: tier, replacement: %s}
%s`, files, tier, extra)
	}
	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	writeConfig(t, f.path, configFor("fleet/*.json", "gold", ""))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 50})
	reg := f.d.Registry()
	probed := func(target string, labels map[string]string) func() bool {
		return func() bool {
			want := map[string]string{"target": target, "module": "short"}
			for k, v := range labels {
				want[k] = v
			}
			v, ok := sample(t, reg, "vllm_probe_success", want)
			return ok && v == 1
		}
	}
	attempts := func(target string) float64 {
		v, _ := sample(t, reg, "vllm_probe_attempts_total", map[string]string{"target": target, "module": "short"})
		return v
	}
	scans := func() float64 { return summaryCount(t, reg, "prometheus_sd_file_scan_duration_seconds", nil) }
	waitFor(t, 15*time.Second, "disc-a to be probed", probed("disc-a", nil))
	waitFor(t, 15*time.Second, "disc-b to be probed with tier gold", probed("disc-b", map[string]string{"tier": "gold"}))
	if v, ok := sample(t, reg, "prometheus_sd_discovered_targets", map[string]string{"name": sdManagerName, "config": "file_sd_configs[0]"}); !ok || v != 2 {
		t.Errorf(`prometheus_sd_discovered_targets{config="file_sd_configs[0]"} = %v (%v), want 2`, v, ok)
	}
	first, firstCfgs := discoverers(f.d)
	if len(first) != 1 {
		t.Fatalf("the manager runs %d discoverers, want 1", len(first))
	}

	// (a) Only relabel_configs change: disc-b's label follows, the
	// discoverer stays (no new one, no new scan of its files) and disc-a's
	// series run on, never reset.
	scansBefore, attemptsBefore, historyBefore := scans(), attempts("disc-a"), f.historyLen("disc-a", "short")
	writeConfig(t, f.path, configFor("fleet/*.json", "silver", ""))
	if err := f.d.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got, want := runningNames(f.d), []string{"disc-a", "disc-b"}; !slices.Equal(got, want) {
		t.Errorf("right after the reload the daemon runs %v, want %v: the targets come from the groups discovery sent", got, want)
	}
	waitFor(t, 15*time.Second, "disc-b to be probed with tier silver", probed("disc-b", map[string]string{"tier": "silver"}))
	if _, ok := sample(t, reg, "vllm_probe_success", map[string]string{"target": "disc-b", "tier": "gold"}); ok {
		t.Error("disc-b's series with its old label remain")
	}
	if ds, _ := discoverers(f.d); !slices.Equal(ds, first) {
		t.Errorf("a reload that changes only relabel_configs replaced the discoverer: %v, was %v", ds, first)
	}
	if n := scans(); n != scansBefore {
		t.Errorf("%v file scans after a relabel-only reload, want still %v: a new discoverer read the files", n, scansBefore)
	}
	if n := attempts("disc-a"); n < attemptsBefore {
		t.Errorf("disc-a's vllm_probe_attempts_total went from %v to %v: its series restarted", attemptsBefore, n)
	}
	if n := f.historyLen("disc-a", "short"); n < historyBefore {
		t.Errorf("disc-a's history went from %d to %d probes: the reload restarted it", historyBefore, n)
	}

	// (c) Failed reloads leave the old discovery running and its targets
	// probed: a file that does not load, and one whose baselines step fails
	// (before the discovery step, which then never runs).
	for _, bad := range []struct{ what, config, err string }{
		{"an invalid file", "file_sd_configs: [{files: [other/*.json]}\n", "error parsing config file"},
		{"a failing step", configFor("other/*.json", "silver", "baselines: [{name: b, file: missing-baseline.yml}]\n"), ": baselines: "},
	} {
		writeConfig(t, f.path, bad.config)
		err := f.d.Reload()
		if err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Fatalf("Reload with %s = %v, want an error with %q", bad.what, err, bad.err)
		}
		if ds, _ := discoverers(f.d); !slices.Equal(ds, first) {
			t.Errorf("after a reload with %s the manager runs %v, want the old discoverer %v", bad.what, ds, first)
		}
		before := attempts("disc-a")
		waitFor(t, 15*time.Second, "disc-a to be probed on after "+bad.what, func() bool { return attempts("disc-a") > before })
	}
	// The old discoverer still follows its files.
	writeAtomic(t, filepath.Join(dir, "fleet", "a.json"), targetGroups(addr, "disc-a", "disc-b", "disc-c"))
	waitFor(t, 15*time.Second, "disc-c, added after the failed reloads, to be probed", probed("disc-c", nil))

	// A step after the discovery step that fails rolls the discovery back
	// to the configuration in force before.
	next, err := config.Load([]byte(configFor("other/*.json", "silver", "")), dir)
	if err != nil {
		t.Fatal(err)
	}
	failing := step{"later", func(*config.Config) error { return errors.New("refused") }, nil}
	f.d.applyMu.Lock()
	err = f.d.applySteps(next, f.d.targetsOf(next), append(f.d.reloadSteps(), failing))
	f.d.applyMu.Unlock()
	if err == nil || err.Error() != "later: refused" {
		t.Fatalf("applying with a failing last step = %v, want later: refused", err)
	}
	if _, cfgs := discoverers(f.d); !reflect.DeepEqual(cfgs, firstCfgs) {
		t.Errorf("after the rollback the manager runs %v, want the old configuration %v", cfgs, firstCfgs)
	}
	waitFor(t, 15*time.Second, "the old discovery's targets to be probed after the rollback", func() bool {
		return slices.Equal(runningNames(f.d), []string{"disc-a", "disc-b", "disc-c"}) && probed("disc-c", nil)()
	})

	// (b) The discoverer's configuration changes: a new discoverer replaces
	// it, and its targets replace the old ones.
	scansBefore = scans()
	writeConfig(t, f.path, configFor("other/*.json", "silver", ""))
	if err := f.d.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	waitFor(t, 15*time.Second, "the new discoverer's target disc-x to be probed, and the old ones to go", func() bool {
		return slices.Equal(runningNames(f.d), []string{"disc-x"}) && probed("disc-x", nil)()
	})
	ds, cfgs := discoverers(f.d)
	if len(ds) != 1 || ds[0] == first[0] || reflect.DeepEqual(cfgs, firstCfgs) {
		t.Errorf("after changing file_sd_configs the manager runs %v (%v), want one new discoverer replacing %v", ds, cfgs, first)
	}
	if n := scans(); n <= scansBefore {
		t.Errorf("%v file scans after the discoverer changed, want more than %v", n, scansBefore)
	}
	f.stop()
}

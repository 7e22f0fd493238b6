package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const (
	reloadGood = `
modules:
  m: {prober: completions, prompt: hi}
targets:
  - {name: a, url: "http://127.0.0.1:8000"}
`
	reloadGood2 = `
modules:
  m: {prober: completions, prompt: hi}
targets:
  - {name: a, url: "http://127.0.0.1:8000"}
  - {name: b, url: "http://127.0.0.1:8001"}
`
	reloadBad = `
modules:
  m: {prober: completions}
targets:
  - {name: a, url: "http://127.0.0.1:8000"}
`
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func targetNames(c *Config) string {
	var names []string
	for _, t := range c.Targets {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}

type reloadGauges struct {
	reg *prometheus.Registry
}

func (g reloadGauges) values(t *testing.T) (success, timestamp float64) {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "vllm_prober_config_last_reload_successful":
			success = mf.GetMetric()[0].GetGauge().GetValue()
			found++
		case "vllm_prober_config_last_reload_success_timestamp_seconds":
			timestamp = mf.GetMetric()[0].GetGauge().GetValue()
			found++
		}
	}
	if found != 2 {
		t.Fatalf("reload gauges not registered: found %d of 2", found)
	}
	return success, timestamp
}

func TestSafeConfigReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vllm_prober.yml")
	reg := prometheus.NewRegistry()
	var applied []string
	sc := NewSafeConfig(reg, func(c *Config) error {
		applied = append(applied, targetNames(c))
		return nil
	})
	clock := time.Unix(1700000000, 0)
	sc.now = func() time.Time { return clock }
	g := reloadGauges{reg}

	if sc.Config() != nil || sc.Checksum() != "" {
		t.Fatal("a new SafeConfig has a config")
	}

	// First load.
	writeFile(t, path, reloadGood)
	changed, err := sc.ReloadConfig(path)
	if err != nil || !changed {
		t.Fatalf("first ReloadConfig = %v, %v; want true, nil", changed, err)
	}
	if got := targetNames(sc.Config()); got != "a" {
		t.Fatalf("targets = %q, want a", got)
	}
	if s, ts := g.values(t); s != 1 || ts != 1700000000 {
		t.Errorf("gauges after good load = %v, %v; want 1, 1700000000", s, ts)
	}
	first := sc.Config()
	sum := sc.Checksum()

	// Unchanged file: skipped, apply not called, still successful.
	clock = clock.Add(time.Minute)
	changed, err = sc.ReloadConfig(path)
	if err != nil || changed {
		t.Fatalf("unchanged ReloadConfig = %v, %v; want false, nil", changed, err)
	}
	if sc.Config() != first || sc.Checksum() != sum || len(applied) != 1 {
		t.Errorf("unchanged file was reloaded (applied %v)", applied)
	}

	// Bad file: the old config keeps running, gauge 0, timestamp untouched.
	clock = clock.Add(time.Minute)
	writeFile(t, path, reloadBad)
	changed, err = sc.ReloadConfig(path)
	want := `error parsing config file "` + path + `": module "m": prober completions needs a prompt`
	if err == nil || err.Error() != want || changed {
		t.Fatalf("bad ReloadConfig = %v, %v; want false, %q", changed, err, want)
	}
	if sc.Config() != first || len(applied) != 1 {
		t.Error("a bad file replaced the running config")
	}
	if s, ts := g.values(t); s != 0 || ts != 1700000060 {
		t.Errorf("gauges after bad load = %v, %v; want 0 and the last success 1700000060", s, ts)
	}

	// Reverting to the running file is a success without an apply.
	clock = clock.Add(time.Minute)
	writeFile(t, path, reloadGood)
	if changed, err = sc.ReloadConfig(path); err != nil || changed {
		t.Fatalf("revert ReloadConfig = %v, %v; want false, nil", changed, err)
	}
	if s, ts := g.values(t); s != 1 || ts != 1700000180 {
		t.Errorf("gauges after revert = %v, %v; want 1, 1700000180", s, ts)
	}

	// A real change is applied and swapped in.
	writeFile(t, path, reloadGood2)
	if changed, err = sc.ReloadConfig(path); err != nil || !changed {
		t.Fatalf("changed ReloadConfig = %v, %v; want true, nil", changed, err)
	}
	if got := targetNames(sc.Config()); got != "a,b" {
		t.Errorf("targets = %q, want a,b", got)
	}
	if first.Targets[0].Name != "a" || len(first.Targets) != 1 {
		t.Error("a reload mutated the previous config")
	}
	if want := []string{"a", "a,b"}; strings.Join(applied, ";") != strings.Join(want, ";") {
		t.Errorf("applied = %q, want %q", applied, want)
	}

	// A missing file.
	if _, err = sc.ReloadConfig(filepath.Join(dir, "missing.yml")); err == nil || !strings.HasPrefix(err.Error(), "error reading config file: open ") {
		t.Errorf("missing file error = %v", err)
	}
	if s, _ := g.values(t); s != 0 {
		t.Errorf("success gauge after missing file = %v, want 0", s)
	}
}

func TestSafeConfigApplyError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yml")
	reg := prometheus.NewRegistry()
	fail := false
	sc := NewSafeConfig(reg, func(*Config) error {
		if fail {
			return errors.New("prober refused it")
		}
		return nil
	})
	writeFile(t, path, reloadGood)
	if _, err := sc.ReloadConfig(path); err != nil {
		t.Fatal(err)
	}
	old := sc.Config()
	fail = true
	writeFile(t, path, reloadGood2)
	_, err := sc.ReloadConfig(path)
	want := `error applying config file "` + path + `": prober refused it`
	if err == nil || err.Error() != want {
		t.Fatalf("ReloadConfig = %v, want %q", err, want)
	}
	if sc.Config() != old {
		t.Error("a config the apply func refused became current")
	}
	if got := testutil.ToFloat64(sc.reloadSuccess); got != 0 {
		t.Errorf("success gauge = %v, want 0", got)
	}
	// Once apply accepts it, the same file must load: a failed apply must not
	// have recorded its checksum.
	fail = false
	if changed, err := sc.ReloadConfig(path); err != nil || !changed {
		t.Fatalf("ReloadConfig after the apply recovered = %v, %v", changed, err)
	}
}

// A baseline file edited in place changes the checksum even though the main file
// did not change.
func TestSafeConfigChecksumCoversBaselines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yml")
	writeFile(t, path, reloadGood+"baselines:\n  - {name: h100, file: h100.json}\n")
	sc := NewSafeConfig(nil, nil)
	if changed, err := sc.ReloadConfig(path); err != nil || !changed {
		t.Fatalf("ReloadConfig = %v, %v", changed, err)
	}
	if changed, _ := sc.ReloadConfig(path); changed {
		t.Error("reload without any change reported a change")
	}
	writeFile(t, filepath.Join(dir, "h100.json"), `{"a":1}`)
	if changed, err := sc.ReloadConfig(path); err != nil || !changed {
		t.Errorf("baseline file appeared: ReloadConfig = %v, %v; want a change", changed, err)
	}
	writeFile(t, filepath.Join(dir, "h100.json"), `{"a":2}`)
	if changed, err := sc.ReloadConfig(path); err != nil || !changed {
		t.Errorf("baseline file edited: ReloadConfig = %v, %v; want a change", changed, err)
	}
}

// Readers and reloaders at once; run with -race.
func TestSafeConfigConcurrent(t *testing.T) {
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "1.yml"), filepath.Join(dir, "2.yml")}
	writeFile(t, paths[0], reloadGood)
	writeFile(t, paths[1], reloadGood2)
	sc := NewSafeConfig(prometheus.NewRegistry(), func(*Config) error { return nil })
	if _, err := sc.ReloadConfig(paths[0]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 50 {
				if _, err := sc.ReloadConfig(paths[(i+j)%2]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				if n := len(sc.Config().Targets); n != 1 && n != 2 {
					t.Errorf("a reader saw %d targets", n)
					return
				}
			}
		}()
	}
	wg.Wait()
}

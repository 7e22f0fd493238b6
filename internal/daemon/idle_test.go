package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestIdleTimeoutFollowsIntervals: the keep-alive timeout of the targets'
// clients is two of the longest interval a target is probed or scraped at,
// within 1 and 5 minutes.
func TestIdleTimeoutFollowsIntervals(t *testing.T) {
	for _, c := range []struct {
		name, targets string
		want          time.Duration
	}{
		{"defaults", "- {name: a, url: 'http://127.0.0.1:8000'}", time.Minute},
		{"a slow probe", "- {name: a, url: 'http://127.0.0.1:8000'}\n  - {name: b, url: 'http://127.0.0.1:8001', probe_interval: 2m}", 4 * time.Minute},
		{"a slower scrape", "- {name: a, url: 'http://127.0.0.1:8000', scrape_interval: 10m, probe_interval: 10m}", 5 * time.Minute},
	} {
		cfg, err := config.Load([]byte("modules:\n  m: {prober: completions, prompt: hi}\ntargets:\n  "+c.targets+"\n"), t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := idleTimeout(cfg); got != c.want {
			t.Errorf("%s: idle timeout %v, want %v", c.name, got, c.want)
		}
	}
}

// TestIdleTimeoutBeforeClients: a load sets the pool's idle timeout before
// the targets' clients are acquired, so that they are built with it.
func TestIdleTimeoutBeforeClients(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vllm_prober.yml")
	cfg := "modules:\n  m: {prober: completions, prompt: hi}\ntargets:\n  - {name: a, url: 'http://127.0.0.1:9', probe_interval: 2m}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{ConfigFile: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Clients().IdleTimeout(); got != 4*time.Minute {
		t.Errorf("the pool's idle timeout after the load is %v, want 4m", got)
	}
	for _, s := range d.targetSteps() {
		if s.name == "prober" {
			t.Fatal("the prober's targets (and their clients) come before the http clients step")
		}
		if s.name == "http clients" {
			break
		}
	}
}

package daemon

import (
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

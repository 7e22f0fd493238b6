package config

import (
	"testing"
	"time"
)

const timeoutModules = "modules: {m: {prober: completions, prompt: hi}}\n"

// TestScrapeTimeoutDefault: Prometheus' convention. An unset scrape_timeout is
// the default (10s) or, when shorter, the scrape interval, globally and per
// target; only an explicit timeout longer than its interval is an error.
func TestScrapeTimeoutDefault(t *testing.T) {
	cases := []struct {
		name, yaml  string
		global      time.Duration            // effective global scrape_timeout
		perTarget   map[string]time.Duration // effective per-target scrape timeout
		wantErr     string
		probeByName map[string]time.Duration // effective probe timeout, module m
	}{
		{
			name:        "interval shorter than the default timeout",
			yaml:        "global: {scrape_interval: 1s}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:      time.Second,
			perTarget:   map[string]time.Duration{"a": time.Second},
			probeByName: map[string]time.Duration{"a": 60 * time.Second},
		},
		{
			name:      "interval longer than the default timeout",
			yaml:      "global: {scrape_interval: 1m, rate_window: 5m}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:    10 * time.Second,
			perTarget: map[string]time.Duration{"a": 10 * time.Second},
		},
		{
			name:      "no global section",
			yaml:      "targets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:    10 * time.Second,
			perTarget: map[string]time.Duration{"a": 10 * time.Second},
		},
		{
			name: "per target: a shorter scrape_interval bounds the timeout",
			yaml: "targets: [{name: fast, url: 'http://127.0.0.1:1', scrape_interval: 2s}, " +
				"{name: slow, url: 'http://127.0.0.1:2', scrape_interval: 1m}]\n",
			global:    10 * time.Second,
			perTarget: map[string]time.Duration{"fast": 2 * time.Second, "slow": 10 * time.Second},
		},
		{
			name: "per target: an explicit global timeout is bounded too",
			yaml: "global: {scrape_interval: 20s, scrape_timeout: 15s}\n" +
				"targets: [{name: fast, url: 'http://127.0.0.1:1', scrape_interval: 5s}]\n",
			global:    15 * time.Second,
			perTarget: map[string]time.Duration{"fast": 5 * time.Second},
		},
		{
			name:    "explicit timeout longer than the interval",
			yaml:    "global: {scrape_interval: 1s, scrape_timeout: 2s}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			wantErr: "global: scrape_timeout 2s is greater than scrape_interval 1s",
		},
		{
			name:        "a probe may outlast probe_interval",
			yaml:        "global: {probe_interval: 1s}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:      10 * time.Second,
			perTarget:   map[string]time.Duration{"a": 10 * time.Second},
			probeByName: map[string]time.Duration{"a": 60 * time.Second},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load([]byte(timeoutModules+c.yaml), "")
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("Load = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := time.Duration(cfg.Global.ScrapeTimeout); got != c.global {
				t.Errorf("global scrape_timeout = %s, want %s", got, c.global)
			}
			for name, want := range c.perTarget {
				tg, ok := cfg.Target(name)
				if !ok {
					t.Fatalf("no target %q", name)
				}
				if got := cfg.ScrapeTimeout(tg); got != want {
					t.Errorf("ScrapeTimeout(%s) = %s, want %s", name, got, want)
				}
			}
			for name, want := range c.probeByName {
				tg, _ := cfg.Target(name)
				m := cfg.Modules["m"]
				if got := cfg.ProbeTimeout(tg, &m); got != want {
					t.Errorf("ProbeTimeout(%s) = %s, want %s", name, got, want)
				}
			}
			// The resolved file reads back to the same timeouts.
			again, err := Load([]byte(cfg.String()), "")
			if err != nil {
				t.Fatalf("reloading the resolved config: %v\n%s", err, cfg.String())
			}
			if again.Global.ScrapeTimeout != cfg.Global.ScrapeTimeout {
				t.Errorf("reloaded scrape_timeout %s, want %s", again.Global.ScrapeTimeout, cfg.Global.ScrapeTimeout)
			}
		})
	}
}

// TestEmptyConfig: an empty file is refused for what it lacks, not for a zero
// interval it never set.
func TestEmptyConfig(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"", "no modules defined"},
		{"# nothing yet\n", "no modules defined"},
		{"global: {}\n", "no modules defined"},
		{timeoutModules, "no targets defined"},
	} {
		if _, err := Load([]byte(c.yaml), ""); err == nil || err.Error() != c.want {
			t.Errorf("Load(%q) = %v, want %q", c.yaml, err, c.want)
		}
	}
}

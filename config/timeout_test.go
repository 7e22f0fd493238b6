package config

import (
	"testing"
	"time"
)

const timeoutModules = "modules: {m: {prober: completions, prompt: hi}}\n"

// TestTimeoutDefaults: Prometheus' convention, for scrape_timeout and
// probe_timeout alike. An unset timeout is the default (10s, 60s) or, when
// shorter, its interval, globally and per target; only an explicit timeout
// (global, target or module) longer than its interval is an error.
func TestTimeoutDefaults(t *testing.T) {
	cases := []struct {
		name, yaml  string
		modTimeout  string                   // module m's timeout, when set
		global      time.Duration            // effective global scrape_timeout
		perTarget   map[string]time.Duration // effective per-target scrape timeout
		wantErr     string
		globalProbe time.Duration            // effective global probe_timeout, when checked
		probeByName map[string]time.Duration // effective probe timeout, module m
	}{
		{
			name:        "interval shorter than the default timeout",
			yaml:        "global: {scrape_interval: 1s}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:      time.Second,
			perTarget:   map[string]time.Duration{"a": time.Second},
			probeByName: map[string]time.Duration{"a": 30 * time.Second},
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
			name:        "probe: an unset probe_timeout is bounded by probe_interval",
			yaml:        "global: {probe_interval: 1s}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:      10 * time.Second,
			perTarget:   map[string]time.Duration{"a": 10 * time.Second},
			globalProbe: time.Second,
			probeByName: map[string]time.Duration{"a": time.Second},
		},
		{
			name:        "probe: an interval longer than the default keeps 60s",
			yaml:        "global: {probe_interval: 5m}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:      10 * time.Second,
			globalProbe: time.Minute,
			probeByName: map[string]time.Duration{"a": time.Minute},
		},
		{
			name:        "probe: no global section, the default interval 30s bounds the default 60s",
			yaml:        "targets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			global:      10 * time.Second,
			globalProbe: 30 * time.Second,
			probeByName: map[string]time.Duration{"a": 30 * time.Second},
		},
		{
			name: "probe per target: a shorter probe_interval bounds the inherited timeout",
			yaml: "global: {probe_interval: 2m}\n" +
				"targets: [{name: fast, url: 'http://127.0.0.1:1', probe_interval: 5s}, " +
				"{name: slow, url: 'http://127.0.0.1:2', probe_interval: 10m}, " +
				"{name: own, url: 'http://127.0.0.1:3', probe_interval: 5s, probe_timeout: 4s}]\n",
			global:      10 * time.Second,
			globalProbe: time.Minute,
			probeByName: map[string]time.Duration{"fast": 5 * time.Second, "slow": time.Minute, "own": 4 * time.Second},
		},
		{
			name: "probe per target: an explicit global probe_timeout is bounded too",
			yaml: "global: {probe_interval: 1m, probe_timeout: 45s}\n" +
				"targets: [{name: fast, url: 'http://127.0.0.1:1', probe_interval: 10s}]\n",
			global:      10 * time.Second,
			globalProbe: 45 * time.Second,
			probeByName: map[string]time.Duration{"fast": 10 * time.Second},
		},
		{
			name:    "probe: explicit global probe_timeout longer than probe_interval",
			yaml:    "global: {probe_interval: 10s, probe_timeout: 11s}\ntargets: [{name: a, url: 'http://127.0.0.1:1'}]\n",
			wantErr: "global: probe_timeout 11s is greater than probe_interval 10s",
		},
		{
			name:    "probe per target: explicit probe_timeout longer than the target's probe_interval",
			yaml:    "targets: [{name: a, url: 'http://127.0.0.1:1', probe_interval: 5s, probe_timeout: 6s}]\n",
			wantErr: `target "a": probe_timeout 6s is greater than probe_interval 5s`,
		},
		{
			name:    "probe per target: explicit probe_timeout longer than the inherited probe_interval",
			yaml:    "global: {probe_interval: 20s}\ntargets: [{name: a, url: 'http://127.0.0.1:1', probe_timeout: 25s}]\n",
			wantErr: `target "a": probe_timeout 25s is greater than probe_interval 20s`,
		},
		{
			name: "probe per module: a module timeout is bounded by each target's probe_interval",
			yaml: "global: {probe_interval: 1m}\n" +
				"targets: [{name: a, url: 'http://127.0.0.1:1'}, {name: b, url: 'http://127.0.0.1:2', probe_interval: 10s}]\n",
			modTimeout: "20s",
			wantErr:    `target "b": module "m": timeout 20s is greater than probe_interval 10s`,
		},
		{
			name:        "probe per module: a module timeout within the interval overrides the target's",
			yaml:        "global: {probe_interval: 1m}\ntargets: [{name: a, url: 'http://127.0.0.1:1', probe_timeout: 5s}]\n",
			modTimeout:  "20s",
			global:      10 * time.Second,
			globalProbe: time.Minute,
			probeByName: map[string]time.Duration{"a": 20 * time.Second},
		},
		{
			name:    "probe: discovery's target_defaults follow the same rule",
			yaml:    "file_sd_configs: [{files: [sd.json]}]\ntarget_defaults: {probe_interval: 5s, probe_timeout: 10s}\n",
			wantErr: "target_defaults: probe_timeout 10s is greater than probe_interval 5s",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mods := timeoutModules
			if c.modTimeout != "" {
				mods = "modules: {m: {prober: completions, prompt: hi, timeout: " + c.modTimeout + "}}\n"
			}
			cfg, err := Load([]byte(mods+c.yaml), "")
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
			if got := time.Duration(cfg.Global.ProbeTimeout); c.globalProbe != 0 && got != c.globalProbe {
				t.Errorf("global probe_timeout = %s, want %s", got, c.globalProbe)
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
			if again.Global.ScrapeTimeout != cfg.Global.ScrapeTimeout || again.Global.ProbeTimeout != cfg.Global.ProbeTimeout {
				t.Errorf("reloaded timeouts scrape %s probe %s, want %s %s", again.Global.ScrapeTimeout, again.Global.ProbeTimeout,
					cfg.Global.ScrapeTimeout, cfg.Global.ProbeTimeout)
			}
		})
	}
}

// TestEmptyConfig: an empty file is refused for what it lacks, not for a zero
// interval it never set; modules are needed only when a target probes.
func TestEmptyConfig(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"", "no modules and no targets defined"},
		{"# nothing yet\n", "no modules and no targets defined"},
		{"global: {}\n", "no modules and no targets defined"},
		{timeoutModules, "no targets defined"},
		{"targets: [{name: a, url: 'http://127.0.0.1:1'}]\n", "no modules defined"},
		{"targets: [{name: a, url: 'http://127.0.0.1:1', modules: none}, {name: b, url: 'http://127.0.0.1:2'}]\n", "no modules defined"},
		{"file_sd_configs: [{files: [sd.json]}]\n", "no modules defined"},
	} {
		if _, err := Load([]byte(c.yaml), ""); err == nil || err.Error() != c.want {
			t.Errorf("Load(%q) = %v, want %q", c.yaml, err, c.want)
		}
	}
	// Scrape-only configurations need no modules.
	for _, y := range []string{
		"targets: [{name: a, url: 'http://127.0.0.1:1', modules: none}, {name: b, url: 'http://127.0.0.1:2', probe: false}]\n",
		"file_sd_configs: [{files: [sd.json]}]\ntarget_defaults: {modules: none}\n",
	} {
		c, err := Load([]byte(y), "")
		if err != nil {
			t.Errorf("Load(%q): %v", y, err)
			continue
		}
		for _, tg := range c.Targets {
			if len(tg.Modules) != 0 {
				t.Errorf("Load(%q): target %s probes with %v", y, tg.Name, tg.Modules)
			}
		}
	}
}

package config

import (
	"fmt"
	"net/url"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
)

// Burst limits the extra probes POST /burst asks for while a rollout's
// analysis runs. Burst probes draw on this budget only, never on a target's
// token_budget_per_hour: a burst cannot make a scheduled probe skip.
type Burst struct {
	// TokenBudgetPerHour caps the prompt plus output tokens of every burst
	// probe, all targets together, in any rolling hour. 0 (the default)
	// turns bursts off: POST /burst is refused.
	TokenBudgetPerHour int `yaml:"token_budget_per_hour"`
	// MaxProbes is the most probes one burst may ask for.
	MaxProbes int `yaml:"max_probes"`
	// MaxWithin is the longest duration a burst may spread its probes over.
	MaxWithin model.Duration `yaml:"max_within"`
}

// Gate sets the defaults of GET /gate.
type Gate struct {
	// Window is how far back /gate reads the recent probes by default.
	Window model.Duration `yaml:"window"`
	// Vantages are the replicas probing the same targets from other
	// vantages (--vantage): GET /gate asks each for its verdict and gives one
	// over all (docs/rollouts.md, "Vantages").
	Vantages []GateVantage `yaml:"vantages,omitempty"`
}

// GateVantage is another vantage's replica: its name (its --vantage) and the
// base URL of its web endpoints, with the client configuration to reach it.
type GateVantage struct {
	Name             string                     `yaml:"name"`
	URL              string                     `yaml:"url"`
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config,omitempty"`
}

// Defaults of Burst and Gate.
var (
	DefaultBurst = Burst{MaxProbes: 60, MaxWithin: model.Duration(30 * time.Minute)}
	DefaultGate  = Gate{Window: model.Duration(5 * time.Minute)}
)

func (b *Burst) validate() error {
	switch {
	case b.TokenBudgetPerHour < 0:
		return fmt.Errorf("token_budget_per_hour %d is negative", b.TokenBudgetPerHour)
	case b.MaxProbes < 1:
		return fmt.Errorf("max_probes %d is below 1", b.MaxProbes)
	case b.MaxWithin <= 0:
		return fmt.Errorf("max_within %s is not positive", b.MaxWithin)
	}
	return nil
}

func (g *Gate) validate() error {
	if g.Window <= 0 {
		return fmt.Errorf("window %s is not positive", g.Window)
	}
	seen := map[string]bool{}
	for i, v := range g.Vantages {
		switch {
		case v.Name == "":
			return fmt.Errorf("vantages[%d]: name is empty", i)
		case seen[v.Name]:
			return fmt.Errorf("vantages[%d]: vantage %q is listed twice", i, v.Name)
		}
		seen[v.Name] = true
		u, err := url.Parse(v.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("vantages[%d] (%s): url is not an http(s) URL with a host", i, v.Name)
		}
		if u.User != nil {
			return fmt.Errorf("vantages[%d] (%s): url must not carry credentials: use http_client_config", i, v.Name)
		}
		if err := v.HTTPClientConfig.Validate(); err != nil {
			return fmt.Errorf("vantages[%d] (%s): http_client_config: %w", i, v.Name, err)
		}
	}
	return nil
}

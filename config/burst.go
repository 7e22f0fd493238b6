package config

import (
	"fmt"
	"time"

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
	return nil
}

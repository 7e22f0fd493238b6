package config

import (
	"fmt"
	"regexp"
)

// Vantage is where a replica probes from (docs/vantages.md): global.vantage,
// or --vantage, which wins. It becomes a vantage label on every series of
// the replica, set once at start: a reload cannot change it.

// validVantage is what a vantage name may be: short, and safe in a label
// value, a file name and a PromQL string without quoting.
var validVantage = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ValidateVantage checks a vantage name ("" is no vantage).
func ValidateVantage(v string) error {
	if v != "" && !validVantage.MatchString(v) {
		return fmt.Errorf("vantage %q must be 1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit", v)
	}
	return nil
}

// Vantages holds the global keys of vantages, inlined into Global.
type Vantages struct {
	// Vantage names where this replica probes from; --vantage overrides it.
	Vantage string `yaml:"vantage,omitempty"`
	// ProbeOnly leaves every target's /metrics to another, scraping vantage:
	// this replica probes and checks /health, and scrapes nothing (no
	// vllm_server_* series, no series that need the server's figures).
	// --probe-only sets it too.
	ProbeOnly bool `yaml:"probe_only,omitempty"`
}

func (v *Vantages) validate() error {
	return ValidateVantage(v.Vantage)
}

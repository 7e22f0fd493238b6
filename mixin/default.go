package mixin

import _ "embed" // slo.yml

// defaultSLO is mixin/slo.yml, from which alerts/ and the dashboards'
// thresholds are generated.
//
//go:embed slo.yml
var defaultSLO []byte

// DefaultSpec is the repository's SLO file, mixin/slo.yml, as built into
// the binary: the one place the alert thresholds are written, so that the
// landing page judges a pair as the alerts do.
func DefaultSpec() (*Spec, error) { return ParseSpec(defaultSLO) }

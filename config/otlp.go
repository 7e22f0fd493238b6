package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/common/model"
)

// DefaultOTLPInterval is how often the OTLP push sends the probes' metrics
// when global.otlp.interval and --otlp.interval are unset: the OpenTelemetry
// SDK's own default export interval.
const DefaultOTLPInterval = time.Minute

// OTLP is global.otlp: an opt-in push of the probes' client metrics under
// the OpenTelemetry GenAI names (docs/metrics.md, "OpenTelemetry"), besides
// the vllm_probe_* series, never instead. Read once at start, as the
// vantage: --otlp.endpoint and --otlp.interval win, and a reload cannot
// change it.
type OTLP struct {
	// Endpoint is the full OTLP/HTTP metrics URL, e.g. Prometheus 3's
	// http://HOST:9090/api/v1/otlp/v1/metrics; empty: no push.
	Endpoint string `yaml:"endpoint,omitempty"`
	// Interval is how often the metrics are pushed (default
	// DefaultOTLPInterval).
	Interval model.Duration `yaml:"interval,omitempty"`
}

// ValidateOTLPEndpoint checks an OTLP/HTTP metrics URL ("" is no push): an
// http or https URL with a host, and no credentials in it, which would
// reach logs and errors.
func ValidateOTLPEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("otlp endpoint is not a URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("otlp endpoint %q must be an http or https URL", u.Redacted())
	}
	if u.Host == "" {
		return fmt.Errorf("otlp endpoint %q has no host", u.Redacted())
	}
	if u.User != nil {
		return fmt.Errorf("otlp endpoint %q must not carry credentials", u.Redacted())
	}
	return nil
}

func (o *OTLP) validate() error {
	if err := ValidateOTLPEndpoint(o.Endpoint); err != nil {
		return err
	}
	if o.Interval < 0 {
		return fmt.Errorf("otlp interval %s must not be negative", o.Interval)
	}
	return nil
}

package prober

import (
	"net/http"

	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// ClientPool lends the HTTP client of an http_client_config: targets of
// equal configurations share one client, and the last Release of a client
// closes its idle connections. vllm_prober's pool, shared with the
// collector, is one.
type ClientPool interface {
	Acquire(cfg commoncfg.HTTPClientConfig) (*http.Client, error)
	Release(client *http.Client)
}

// Redactor is what the prober scrubs with (a probe.Scrubber), told the
// secrets of its targets' clients (Set, under a source name that replaces
// the previous list of that source).
type Redactor interface {
	probe.Scrubber
	Set(source string, secrets []string)
}

// Package collector scrapes the Prometheus /metrics endpoint of vLLM servers,
// normalises the three naming eras of vLLM's metrics (current V1, the 0.9/0.10
// transition and legacy V0) into one model, derives rates and server-side
// latency statistics from successive scrapes kept in the daemon, and re-exports
// a small set of stable, version-independent series per target.
package collector

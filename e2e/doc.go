// Package e2e holds the end-to-end proof of the monitoring mixin: a real
// Prometheus on 127.0.0.1 scrapes vllm_prober, which probes vllm_sim, and
// evaluates the rules of alerts/ (generated with a small --for-scale) while the
// test drives the simulator into the conditions the alerts are for. The
// package has no API; see README.md for how to run it and what it proves.
package e2e

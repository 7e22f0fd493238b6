// Package prober runs the probes of every configured (target, module) pair
// continuously: the schedules, the token budget (budget.go), model
// resolution, the /health and /v1/models checks, the history and the
// metrics. One probe is the probe package's: a module is compiled once into
// a probe.Spec when a configuration is applied (compile.go), and each tick
// runs it.
//
// # Scheduling
//
// Manager runs every pair on its own ticker, offset within the interval by a
// hash of target and module so that pairs do not fire together, and never
// queues: a tick is skipped and counted (vllm_probe_skipped_total{reason}) when
// the pair's previous probe is still running (in_flight), when
// max_concurrent_probes probes are running (concurrency), or when the probe's
// worst-case cost would exceed the target's token_budget_per_hour over the last
// hour (budget). The worst-case cost is the prompt estimate plus max_tokens; the
// prompt estimate is the last usage.prompt_tokens of the pair plus 8 (the nonce
// varies), or before any usage was seen a pessimistic len(prompt bytes)/3 + 9
// (+24 per chat message). Probes in flight count at their worst case; finished
// ones at what the server reported. /probe (ProbeNow) never touches that
// budget: on-demand probes draw on a pool of their own (budget.go), a tenth of
// token_budget_per_hour (at least one probe), so that callers of /probe cannot
// make a scheduled probe skip.
//
// Each probe puts a random nonce at the front of the prompt (chat: of the first
// user message) unless the module sets nonce: false, and sends
// X-Request-Id: vllm-prober-<target>-<module>-<nonce>. a target is checked once
// per interval: up when its /metrics scrape answered and its probes succeed,
// else by GET /health; /v1/models once per models_refresh_interval while it
// lists the model (and at the next check after a probe's model was refused);
// a target without a configured model probes the first id /v1/models lists.
//
// Credentials come only from each target's http_client_config; they are
// scrubbed from every error text and header copy the package keeps.
package prober

// Package prober sends real streaming completions to vLLM endpoints and measures
// them exactly like vLLM's benchmark client does (benchmarks/backend_request_func.py,
// vllm/benchmarks/lib/endpoint_request_func.py), and runs those probes continuously
// for every configured (target, module) pair.
//
// # Measurement
//
// Stream sends one request with stream=true and stream_options.include_usage=true
// and reads the Server-Sent Events with a size-bounded reader (1 MiB per line and
// per event). t0 is taken just before the request is sent, so TTFT includes
// connecting. TTFT ends at the first event carrying generated text (chat's
// role-only first event does not count), the ITL samples are the gaps between
// consecutive content events, E2E ends at the last content event, output tokens
// come from the usage event (else the content events are counted and
// Result.OutputTokensFromUsage is false) and TPOT = (E2E − TTFT)/(out − 1).
//
// # Failure reasons
//
// A failed probe has exactly one Reason (see Reasons): connection, dns, tls,
// timeout (the probe deadline, including a hang before the response headers),
// stalled (no byte for the stall timeout while the stream is open; comment
// pings count as bytes), unauthorized (401/403), rate_limited (429),
// context_length (400 whose message contains "maximum context length"),
// model_not_found (404 NotFoundError or "does not exist"; also /v1/models
// listing no model when the target names none), http_4xx (other non-2xx below
// 500), http_5xx, stream_error (a mid-stream {"error":...} event or
// finish_reason "error"), truncated (the stream ended without data: [DONE]),
// malformed (bad JSON, an oversize line or event, a 2xx that is not
// text/event-stream) and empty_output ([DONE] without generated text).
//
// # Output checks
//
// Modules may check what comes back (expect.go, structured.go): the stream's
// text and tool calls are then kept (StreamRequest.Capture; tool calls are
// assembled per index from vLLM's deltas) and, on a stream that succeeded,
// checked for the structured output asked for (response_format, tools), which
// fails as invalid_structured_output, then against the answer's expect (or the
// next rotating question's), which fails as wrong_answer. Result.Text keeps the
// start of the output and Result.Check what was expected; Result.Answer is the
// verdict behind vllm_probe_answer_correct and vllm_probe_answer_checks_total.
// Embed probes /v1/embeddings (prober: embeddings) and fails as
// invalid_embedding. A target with models: all (models.go) has one pair per
// listed model.
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
// X-Request-Id: vllm-prober-<target>-<module>-<nonce>. /health and /v1/models
// are checked once per interval per target; a target without a configured model
// probes the first id /v1/models lists.
//
// Credentials come only from each target's http_client_config; they are
// scrubbed from every error text and header copy the package keeps.
package prober

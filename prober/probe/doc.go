// Package probe sends one probe of a vLLM endpoint and measures it exactly
// like vLLM's benchmark client does (vllm/benchmarks/lib/endpoint_request_func.py).
// A module is compiled once into a Spec (Compile); a Spec's Run sends one
// request of the module's kind and returns its Result, the output checks
// applied. The kinds (completions, chat, embeddings, responses) are
// registered in one table (kinds.go). The package knows nothing of
// schedules, budgets or history: the prober's Manager runs the specs.
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
// shed (a gateway's load shedding in one of the shapes of shed.go: the
// inference-extension Endpoint Picker's ResourceExhausted/ServiceUnavailable,
// llm-d's x-llm-d-request-dropped-reason, a 429 with Retry-After and no
// per-key quota, production-stack's 503 "temporarily unavailable"),
// context_length (400 whose message says the request exceeds the context:
// vLLM's and SGLang's wordings, llama-server's exceed_context_size_error),
// model_not_found (404 NotFoundError or "does not exist"; also /v1/models
// listing no model when the target names none), http_4xx (other non-2xx below
// 500), http_5xx, stream_error (a mid-stream {"error":...} event or
// finish_reason "error"; responses: an error or response.failed event),
// truncated (the stream ended without data: [DONE]; responses: without
// response.completed), malformed (bad JSON, an oversize line or event, a 2xx
// that is not text/event-stream), empty_output (the stream completed
// without generated text) and no_answer (a module with require_answer got
// reasoning only within max_tokens).
//
// # Output checks
//
// Modules may check what comes back (checks.go, structured.go): the stream's
// text and tool calls are then kept (StreamRequest.Capture; tool calls are
// assembled per index from vLLM's deltas) and, on a stream that succeeded,
// checked for the structured output asked for (response_format, tools), which
// fails as invalid_structured_output, then against the answer's expect (or the
// question the probe asked), which fails as wrong_answer. Result.Text keeps the
// start of the output and Result.Check what was expected; Result.Answer is the
// verdict behind vllm_probe_answer_correct and vllm_probe_answer_checks_total.
// The embeddings kind probes /v1/embeddings and fails as invalid_embedding;
// the responses kind probes /v1/responses (responses.go).
package probe

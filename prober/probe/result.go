package probe

import (
	"net/http"
	"slices"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/percentile"
)

// Reason is why a probe failed. The set is bounded: it is a label value.
type Reason string

// Failure reasons. Every failed probe has exactly one.
const (
	ReasonConnection    Reason = "connection"      // refused, reset or unreachable before a response
	ReasonDNS           Reason = "dns"             // the host name did not resolve
	ReasonTLS           Reason = "tls"             // handshake or certificate verification failed
	ReasonTimeout       Reason = "timeout"         // the probe deadline passed (incl. a hang before headers)
	ReasonStalled       Reason = "stalled"         // no new byte for the stall timeout while the stream was open
	ReasonUnauthorized  Reason = "unauthorized"    // HTTP 401 or 403
	ReasonRateLimited   Reason = "rate_limited"    // HTTP 429 (a quota; not shedding)
	ReasonShed          Reason = "shed"            // a gateway's load shedding (shed.go): refused by design, not failed
	ReasonOverloaded    Reason = "overloaded"      // the engine's own admission refusal (shed.go): its queue limit, not a crash
	ReasonContextLength Reason = "context_length"  // HTTP 400 "maximum context length"
	ReasonModelNotFound Reason = "model_not_found" // HTTP 404 NotFoundError / "does not exist"
	ReasonHTTP4xx       Reason = "http_4xx"        // any other 4xx (and other unexpected statuses)
	ReasonHTTP5xx       Reason = "http_5xx"        // any 5xx
	ReasonRedirect      Reason = "redirect"        // a redirect not followed (follow_redirects, credentials' origin, url_probes.allowed_urls)
	ReasonStreamError   Reason = "stream_error"    // vLLM's mid-stream error event or finish_reason "error"
	ReasonTruncated     Reason = "truncated"       // the stream ended without data: [DONE]
	ReasonMalformed     Reason = "malformed"       // bad JSON, an oversize line or event, wrong content type
	ReasonEmptyOutput   Reason = "empty_output"    // [DONE] arrived but no event carried generated text
	// ReasonSleeping is a failure while the target's engine reported sleep
	// (vLLM's sleep mode): the prober sets it over the reason the failure
	// itself had (a 503, a timeout), which the error text still gives.
	ReasonSleeping Reason = "sleeping"
)

// Reasons lists every failure reason, in documentation order.
func Reasons() []Reason {
	return []Reason{
		ReasonConnection, ReasonDNS, ReasonTLS, ReasonTimeout, ReasonStalled,
		ReasonUnauthorized, ReasonRateLimited, ReasonShed, ReasonOverloaded, ReasonContextLength, ReasonModelNotFound,
		ReasonHTTP4xx, ReasonHTTP5xx, ReasonRedirect, ReasonStreamError, ReasonTruncated, ReasonMalformed,
		ReasonEmptyOutput, ReasonWrongAnswer, ReasonInvalidStructured, ReasonInvalidEmbedding,
		ReasonSleeping,
	}
}

// StreamRequest is one streaming completion to send.
type StreamRequest struct {
	BaseURL      string         // target root, e.g. http://127.0.0.1:8000
	Kind         string         // a module's prober: completions, chat, embeddings or responses
	Body         map[string]any // full JSON body; Stream forces stream=true and stream_options.include_usage=true
	Header       http.Header    // extra headers (X-Request-Id etc.)
	StallTimeout time.Duration  // 0 disables stall detection
	// Capture keeps the generated text and tool calls for the output checks
	// (up to 64 KiB) and for Result.GeneratedText.
	Capture bool
	// FullText lifts Capture's bound: the whole generated text is kept, as
	// vLLM's benchmark client keeps generated_text (bench --save-detailed).
	FullText bool
	// Output, when not nil, receives the generated text Stream kept (it
	// implies Capture). Unlike Result.Text it is neither cut nor scrubbed:
	// the caller owns what it writes.
	Output *string
	// Redact scrubs every text the server sends before the Result keeps a
	// part of it (errors, error body, generated text): scrubbing comes
	// before every cut, so that no part of a secret straddling a cut
	// survives. nil scrubs nothing.
	Redact Scrubber
	// Gate, when set, is called once the request is built, just before it
	// is sent and before t0: a caller that sends a wave of requests at once
	// (bench's first wave) blocks in it, so that the wave leaves with only
	// the send itself left to do. A request cancelled while it waits fails
	// as a timeout, or as a connection failure when the cause is not a
	// deadline, as any request does whose context ended.
	Gate func()
}

// Event is one entry of a probe's timeline.
type Event struct {
	Offset time.Duration // since the request was sent (t0)
	Bytes  int32         // payload size, where it applies (SSE events are at most 1 MiB)
	Kind   EventKind
}

// Phases of a probe, for reports: where a failed probe failed.
const (
	PhaseModels   = "model resolution"       // GET /v1/models, when the model is not configured
	PhaseRequest  = "the completion request" // sending the request, until the response headers
	PhaseResponse = "the response status"    // a non-2xx status or a wrong content type
	PhaseStream   = "streaming"              // reading the SSE stream
)

// Result is the outcome of one probe.
type Result struct {
	Start      time.Time // t0: just before the request was sent
	Model      string    // the model the request named; "" when none was resolved (set by the Manager)
	Success    bool
	Reason     Reason // "" on success
	Err        string // for humans; redacted, never carries credentials
	StatusCode int
	// Phase is where a failed probe failed (Phase*), "" on success.
	Phase string
	// Request is the request line of the probe's last request ("POST
	// /v1/completions", or "GET /v1/models" when model resolution failed) and
	// RequestBody its JSON body, at most maxRequestBody bytes.
	Request, RequestBody string
	// ErrorBody is the start of an error response's body (maxErrorExcerpt
	// bytes), Text the start of the generated text (maxTextExcerpt bytes).
	ErrorBody, Text string

	// TTFT is t0 → first event carrying generated text; E2E is t0 → last such event;
	// TPOT is (E2E − TTFT)/(OutputTokens − 1), 0 unless OutputTokens > 1.
	// For a failed probe E2E is t0 → the failure (a stalled or timed-out probe:
	// the cut) and TPOT is 0: a failure has no per-token latency.
	TTFT, E2E, TPOT time.Duration
	// Duration is the whole probe, model resolution included, failures too
	// (vllm_probe_duration_seconds, as blackbox_exporter's probe_duration_seconds).
	Duration time.Duration
	// ITLs are the gaps between consecutive content events.
	ITLs []time.Duration

	PromptTokens int
	OutputTokens int
	// Load is running + waiting + 1 (the probe) of the target over the
	// probe's lifetime: the mean over the scrape it started into and the
	// scrapes during it, from the Manager's load source (Options.Load); NaN
	// when unknown. Stream alone leaves it 0.
	Load float64
	// OutputTokensFromUsage is false when the server sent no usage (or a zero
	// completion_tokens) and OutputTokens counts content events instead.
	OutputTokensFromUsage bool
	// OutputTokensFromTimings is true when no usage came and OutputTokens is
	// llama.cpp's timings.predicted_n, which the server counted.
	OutputTokensFromTimings bool

	Events         []Event     // bounded timeline
	RequestHeader  http.Header // redacted copy of the headers Stream set
	ResponseHeader http.Header // redacted copy

	// Check says what the answer check expected and Answer is its verdict
	// (expect.go). Probes that check their output keep in Text the start of the
	// whole generated text, tool calls as name(arguments) (maxResultText bytes).
	Check  string
	Answer AnswerVerdict
	// Dimension is the vector length of an embeddings probe, 0 otherwise.
	Dimension int
}

// OutputTokensEstimated reports whether OutputTokens was counted from the
// content events, the server having reported no count (one event per token
// is the usual case, not a rule: an estimate).
func (r *Result) OutputTokensEstimated() bool {
	return r.OutputTokens > 0 && !r.OutputTokensFromUsage && !r.OutputTokensFromTimings
}

// OutputTokensPerSecond is OutputTokens / E2E, 0 when undefined: for failed
// probes too, whose E2E ends at the failure, not at the last token.
func (r *Result) OutputTokensPerSecond() float64 {
	if !r.Success || r.E2E <= 0 || r.OutputTokens <= 0 {
		return 0
	}
	return float64(r.OutputTokens) / r.E2E.Seconds()
}

// TPOT is vLLM's time per output token of one request: (E2E − TTFT)/(out − 1),
// defined only when out > 1 (vLLM's benchmarks/benchmark_serving.py
// calculate_metrics: `if output_len > 1: tpots.append((latency - ttft) /
// (output_len - 1))`). The prober, the regression series and bench all use it.
func TPOT(ttft, e2e time.Duration, outputTokens int) (time.Duration, bool) {
	if outputTokens <= 1 || e2e <= 0 {
		return 0, false
	}
	return (e2e - ttft) / time.Duration(outputTokens-1), true
}

// Latencies are what the probe measured, for judging it against goodput
// objectives (config.Objectives): TTFT, TPOT (0 with one output token, as
// vLLM's bench counts it), the 99th percentile of its ITLs (numpy's linear
// method, 0 with none) and E2E.
func (r *Result) Latencies() config.Latencies {
	l := config.Latencies{TTFT: r.TTFT, TPOT: r.TPOT, E2E: r.E2E}
	if len(r.ITLs) > 0 {
		s := make([]float64, len(r.ITLs))
		for i, d := range r.ITLs {
			s[i] = d.Seconds()
		}
		slices.Sort(s)
		l.ITLP99 = time.Duration(percentile.Linear(s, 99) * float64(time.Second))
	}
	return l
}

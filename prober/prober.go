// Package prober sends real streaming completions to vLLM endpoints and measures
// them exactly like vLLM's benchmark client does.
package prober

import (
	"context"
	"net/http"
	"time"
)

// Reason is why a probe failed. The set is bounded: it is a label value.
type Reason string

// Failure reasons.
const (
	ReasonConnection    Reason = "connection"
	ReasonDNS           Reason = "dns"
	ReasonTLS           Reason = "tls"
	ReasonTimeout       Reason = "timeout"
	ReasonStalled       Reason = "stalled"
	ReasonUnauthorized  Reason = "unauthorized"
	ReasonRateLimited   Reason = "rate_limited"
	ReasonContextLength Reason = "context_length"
	ReasonModelNotFound Reason = "model_not_found"
	ReasonHTTP4xx       Reason = "http_4xx"
	ReasonHTTP5xx       Reason = "http_5xx"
	ReasonStreamError   Reason = "stream_error"
	ReasonTruncated     Reason = "truncated"
	ReasonMalformed     Reason = "malformed"
	ReasonEmptyOutput   Reason = "empty_output"
)

// Reasons lists every failure reason, in documentation order.
func Reasons() []Reason {
	return []Reason{
		ReasonConnection, ReasonDNS, ReasonTLS, ReasonTimeout, ReasonStalled,
		ReasonUnauthorized, ReasonRateLimited, ReasonContextLength, ReasonModelNotFound,
		ReasonHTTP4xx, ReasonHTTP5xx, ReasonStreamError, ReasonTruncated, ReasonMalformed,
		ReasonEmptyOutput,
	}
}

// StreamRequest is one streaming completion to send.
type StreamRequest struct {
	BaseURL      string         // target root, e.g. http://127.0.0.1:8000
	Kind         string         // config.ProberCompletions | config.ProberChat
	Body         map[string]any // full JSON body; Stream forces stream=true and stream_options.include_usage=true
	Header       http.Header    // extra headers (X-Request-Id etc.)
	StallTimeout time.Duration
}

// Event is one entry of a probe's timeline.
type Event struct {
	Offset time.Duration // since the request was sent
	Kind   string
	Bytes  int
}

// Result is the outcome of one probe.
type Result struct {
	Start                 time.Time
	Success               bool
	Reason                Reason
	Err                   string // redacted, for humans
	StatusCode            int
	TTFT, E2E, TPOT       time.Duration
	ITLs                  []time.Duration
	PromptTokens          int
	OutputTokens          int
	OutputTokensFromUsage bool
	Events                []Event     // bounded timeline
	RequestHeader         http.Header // redacted copy
	ResponseHeader        http.Header // redacted copy
}

// Stream sends one streaming completion and measures it.
func Stream(ctx context.Context, client *http.Client, req StreamRequest) Result {
	return Result{Start: time.Now()}
}

package probe

import (
	"bytes"
	"net/http"
	"strings"
)

// Load shedding: a gateway (or router) refusing work because the pool behind it
// is saturated, by design, says so in one of a few documented shapes. Such a
// refusal is ReasonShed, not rate_limited (a per-key quota) nor http_5xx (a
// failure). Only a target declared a gateway (config gateway:) sheds: the
// same shapes from an ordinary target (an engine, a proxy that copies an
// upstream's headers) keep their plain reasons, so that a real failure never
// hides as shedding. The shapes, each with a fixture in testdata/shed/:
//
//   - The Gateway API Inference Extension's Endpoint Picker (v1.5.0, and the
//     llm-d router that continues it) answers with an Envoy ImmediateResponse,
//     text/plain "inference error: <Code> - <message>": ResourceExhausted (429:
//     a sheddable request dropped while the pool is saturated, or the flow
//     control queue at capacity) and ServiceUnavailable (503: the request timed
//     out in the flow control queue). The ServiceUnavailable answer "failed to
//     find endpoint candidates" is not shedding: the pool has no Ready
//     endpoint at all, an outage that stays http_5xx.
//   - The llm-d router's x-llm-d-request-dropped-reason header, on its flow
//     control outcomes (rejected-saturated, rejected-ttl-expired, ...), except
//     rejected-no-endpoints, the same outage as above; only on a 429 or a 503,
//     the statuses of a refusal: on any other (a 500, a 401, a 404) the
//     status's own reason stands.
//   - A 429 with Retry-After and no sign of a per-key quota (no RateLimit-* or
//     X-RateLimit-* header, no quota error code in the body): a gateway's queue
//     is full (HAProxy's `http-request return status 429 ... hdr retry-after`).
//   - vLLM production-stack's router, 503 {"error": "Model '<m>' is temporarily
//     unavailable. Please try again later."}: the model is scaled to zero.
//
// Everything here reads untrusted text; it only ever compares it.

// eppErrorPrefix starts every error body of the Endpoint Picker
// (pkg/epp/handlers: "inference error: " + code + " - " + message).
const eppErrorPrefix = "inference error: "

// headerDroppedReason is the llm-d router's flow-control header.
const headerDroppedReason = "X-Llm-D-Request-Dropped-Reason"

// droppedNoEndpoints is the dropped reason of a pool with no endpoint left.
const droppedNoEndpoints = "rejected-no-endpoints"

// classifyShed says whether a non-2xx answer is load shedding, and why (a short
// phrase that names the shape, for the probe's error text).
func classifyShed(status int, h http.Header, body []byte, msg string) (string, bool) {
	refusal := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	if v := strings.ToLower(strings.TrimSpace(h.Get(headerDroppedReason))); v != "" && refusal {
		if v == droppedNoEndpoints {
			return "", false
		}
		return "gateway dropped the request (" + sanitizeToken(v) + ")", true
	}
	if code, rest, ok := eppError(body); ok {
		switch {
		case code == "ResourceExhausted" && status == http.StatusTooManyRequests:
			return "gateway shed the request (ResourceExhausted)", true
		case code == "ServiceUnavailable" && status == http.StatusServiceUnavailable &&
			!strings.Contains(rest, "failed to find endpoint candidates"):
			return "gateway shed the request (ServiceUnavailable)", true
		}
		return "", false
	}
	if status == http.StatusServiceUnavailable && strings.HasPrefix(msg, "Model '") &&
		strings.Contains(msg, "' is temporarily unavailable") {
		return "router has no endpoint for the model now (scaled to zero)", true
	}
	if status == http.StatusTooManyRequests && h.Get("Retry-After") != "" && !perKeyQuota(h, body) {
		return "gateway refused with Retry-After and no per-key quota", true
	}
	return "", false
}

// eppError splits an Endpoint Picker error body into its code and message.
func eppError(body []byte) (code, msg string, ok bool) {
	b := bytes.TrimSpace(body)
	if !bytes.HasPrefix(b, []byte(eppErrorPrefix)) {
		return "", "", false
	}
	code, msg, ok = strings.Cut(string(b[len(eppErrorPrefix):]), " - ")
	return code, msg, ok
}

// perKeyQuota reports whether a 429 carries the signs of a per-key (or
// per-user) quota rather than of a full queue: the rate-limit headers of
// OpenAI-style APIs (x-ratelimit-limit-requests, ...) and of the IETF draft
// (RateLimit, RateLimit-Policy, RateLimit-Limit, ...), or a quota error code.
func perKeyQuota(h http.Header, body []byte) bool {
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-ratelimit") || strings.HasPrefix(lk, "ratelimit") {
			return true
		}
	}
	lb := bytes.ToLower(body)
	return bytes.Contains(lb, []byte("quota")) || bytes.Contains(lb, []byte("rate_limit_exceeded"))
}

// sanitizeToken keeps a header value to a short run of safe characters: it is
// shown in the probe's error text.
func sanitizeToken(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 40 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Admission refusals: an engine that protects its own latency refuses work
// at admission, before it queues it. Such a refusal is ReasonOverloaded: the
// engine is up and did what it was configured to do, so it is neither
// http_5xx (a failure) nor shed (which names a gateway's shedding). The
// shapes, from vLLM's vllm/v1/engine/exceptions.py (GracefulHTTPError
// subclasses raised by AsyncLLM's admission check on --max-num-queued-reqs
// and --max-num-queued-tokens, vllm-project/vllm#49445), each with a
// fixture in testdata/shed/:
//
//   - QueueOverflowError, 503 "Request queue full." (--max-num-queued-reqs);
//   - MaxPendingTokensError, 503 "Request queue reached max pending tokens
//     limit." (--max-num-queued-tokens);
//   - MaxTierPendingTokensError, 429 "Request queue reached max pending
//     tokens for tier." (a tier's share of the same queue).
//
// The same file's TooManyRequestsError (429 "Rate limit reached for given
// tier.") is a per-tier quota: rate_limited, as any other quota.
//
// Ollama's refusal when its pending-request queue is full (server/sched.go
// ErrMaxQueue, OLLAMA_MAX_QUEUE; v0.17.4, observed) is the same kind: 503
// "server busy, please try again.  maximum pending requests exceeded" (two
// spaces, as sent), in the OpenAI error shape on its /v1 endpoints.
var admissionRefusals = map[string]int{
	"Request queue full.":                                               503,
	"Request queue reached max pending tokens limit.":                   503,
	"Request queue reached max pending tokens for tier.":                429,
	"server busy, please try again.  maximum pending requests exceeded": 503,
}

// classifyOverload says whether a non-2xx answer is an engine's admission
// refusal, and why (a short phrase for the probe's error text). msg is the
// error body's message: only an exact message with its own status matches.
func classifyOverload(status int, msg string) (string, bool) {
	if want, ok := admissionRefusals[strings.TrimSpace(msg)]; ok && want == status {
		return "engine refused at admission (queue limit)", true
	}
	return "", false
}

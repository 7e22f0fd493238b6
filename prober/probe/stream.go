package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// EventKind names a step of a Result's timeline. It is a byte, not a string,
// because the history keeps tens of thousands of timeline events at 1,000
// targets; String gives its name.
type EventKind uint8

// Event kinds of a Result's timeline.
const (
	EventDNSDone     EventKind = iota + 1
	EventConnected             // TCP connected
	EventTLSDone               // TLS handshake done
	EventRequestSent           // request written
	EventHeaders               // response headers read
	EventRole                  // chat's role-only first event
	EventContent               // an event carrying generated text
	EventEmpty                 // a choices event without generated text
	EventUsage                 // the usage-only event
	EventError                 // a mid-stream error event
	EventDone                  // data: [DONE]
	EventFailed                // the probe failed here
	EventsTruncated            // the timeline hit its bound; later content events are not listed
)

var eventKindNames = [...]string{
	EventDNSDone: "dns_done", EventConnected: "connected", EventTLSDone: "tls_done",
	EventRequestSent: "request_sent", EventHeaders: "headers", EventRole: "role",
	EventContent: "content", EventEmpty: "empty", EventUsage: "usage", EventError: "error",
	EventDone: "done", EventFailed: "failed", EventsTruncated: "events_truncated",
}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

const (
	maxTimelineEvents = 128
	maxErrorBody      = 64 << 10
	maxErrLen         = 300
	// Excerpts a Result keeps for reports (bytes).
	maxRequestBody  = 1 << 10
	maxErrorExcerpt = 512
	maxTextExcerpt  = 256
	drainTimeout    = 100 * time.Millisecond
	// MaxITLs bounds the gaps a Result keeps (Result.ITLs): a server
	// streaming far more content events than any max_tokens (a hostile one
	// sending millions of tiny events) would otherwise grow one probe's
	// result without limit. The gaps past it are not observed.
	MaxITLs = 1 << 16
)

// errStalled is the cancellation cause set by the stall detector.
var errStalled = errors.New("stalled")

// Stream sends one streaming completion and measures it exactly like vLLM's
// benchmark client (vLLM's vllm/benchmarks/lib/endpoint_request_func.py):
//
//   - t0 is taken from the monotonic clock just before the request is sent;
//   - TTFT is t0 → the first event carrying generated text;
//   - the ITL samples are the gaps between consecutive content events;
//   - E2E is t0 → the last content event (the trailing usage event and [DONE] are
//     not content);
//   - output tokens come from the usage event (stream_options.include_usage is
//     forced on), else the content events are counted and OutputTokensFromUsage is
//     false;
//   - TPOT = (E2E − TTFT)/(out − 1) when out > 1.
//
// A content event is one whose choices carry non-empty text: completions
// choices[].text, chat delta.content, delta.reasoning_content / delta.reasoning or
// delta.tool_calls. Chat's first event is role-only ({"role":"assistant",
// "content":""}, vLLM's serving_chat.py) and is emitted as soon as the engine produces
// its first output; it is deliberately NOT counted as the first token: a probe
// must measure when the user sees text. The newest vLLM bench client counts any
// choices event, so our chat TTFT can be later than its by one event at most.
//
// The response is read by a size-bounded SSE reader, and a stall detector cancels
// the request as "stalled" when no byte arrives for req.StallTimeout while the
// stream is open. ctx bounds the whole probe (its deadline fails as "timeout").
// Stream never panics on server input and the Result's Err never carries
// credentials or request headers.
func Stream(ctx context.Context, client *http.Client, req StreamRequest) Result {
	res, gen := send(ctx, client, req, nil)
	if req.Output != nil && gen != nil {
		*req.Output = gen.text.String()
	}
	return res
}

// send sends req as its kind does, and returns the result and, when req
// asked for it (Capture), the generated output. mod is the module probed,
// nil outside a Spec.
func send(ctx context.Context, client *http.Client, req StreamRequest, mod *config.Module) (Result, *generated) {
	req.Redact = scrubberOr(req.Redact)
	k, ok := kinds[req.Kind]
	if !ok {
		return Result{Start: time.Now(), Reason: ReasonMalformed, Err: sanitize(req.Redact, fmt.Sprintf("unknown probe kind %q", req.Kind))}, nil
	}
	if k.events == nil {
		if mod == nil {
			mod = &config.Module{}
		}
		return k.send(ctx, client, req, mod), nil
	}
	s := &streamer{dec: k.events(), red: req.Redact}
	if req.Capture || req.Output != nil {
		s.gen = &generated{unbounded: req.FullText}
	}
	s.run(ctx, client, req, k)
	return s.res, s.gen
}

type streamer struct {
	red   Scrubber // scrubs what the server sent, before any cut
	res   Result
	t0    time.Time
	phase string // what the probe is doing, for a failure's Phase

	gen *generated   // the output, when the request asks for it
	dec eventDecoder // the kind's reading of its events

	mu       sync.Mutex // guards events: httptrace hooks may run on other goroutines
	events   []Event
	overflow bool
}

func (s *streamer) event(kind EventKind, n int) { s.eventAt(time.Since(s.t0), kind, n) }

// eventAt records an event that happened at off (since t0): stream events
// carry the moment their bytes were read, not the later moment they were
// parsed, so that the timeline and the latencies agree.
func (s *streamer) eventAt(off time.Duration, kind EventKind, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.events) < maxTimelineEvents-2:
	case kind == EventContent || kind == EventEmpty:
		// Keep room for the terminal events; drop intermediate ones.
		if !s.overflow {
			s.overflow = true
			s.events = append(s.events, Event{Offset: off, Kind: EventsTruncated})
		}
		return
	case len(s.events) >= maxTimelineEvents:
		return
	}
	s.events = append(s.events, Event{Offset: off, Kind: kind, Bytes: int32(n)})
}

func (s *streamer) fail(reason Reason, format string, args ...any) {
	s.res.Success = false
	s.res.Reason = reason
	s.res.Err = sanitize(s.red, fmt.Sprintf(format, args...))
	s.res.Phase = s.phase
	if !s.t0.IsZero() {
		// A failed probe's E2E ends at the failure (for a stall or a
		// timeout: the cut), not at its last token.
		s.res.E2E = time.Since(s.t0)
	}
	s.event(EventFailed, 0)
}

func (s *streamer) run(ctx context.Context, client *http.Client, req StreamRequest, k *kind) {
	path := k.path
	defer func() {
		s.mu.Lock()
		// An exact-size copy: appending left up to twice the capacity
		// needed, and each pair's history keeps --history.limit results.
		s.res.Events = slices.Clone(s.events)
		s.mu.Unlock()
	}()
	if client == nil {
		client = http.DefaultClient
	}
	s.phase = PhaseRequest
	s.res.Request = http.MethodPost + " " + path
	endpoint, err := url.Parse(strings.TrimRight(req.BaseURL, "/") + path)
	if err != nil {
		s.res.Start = time.Now()
		s.fail(ReasonConnection, "invalid target URL: %v", redactErr(err))
		return
	}
	body, err := json.Marshal(k.streamBody(req.Body))
	if err != nil {
		s.res.Start = time.Now()
		s.fail(ReasonMalformed, "encoding request body: %v", err)
		return
	}
	s.res.RequestBody = excerpt(s.red, body, maxRequestBody)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	trace := &httptrace.ClientTrace{
		DNSDone:          func(httptrace.DNSDoneInfo) { s.event(EventDNSDone, 0) },
		ConnectDone:      func(_, _ string, err error) { s.eventIfOK(EventConnected, err) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) { s.eventIfOK(EventTLSDone, err) },
		WroteRequest:     func(i httptrace.WroteRequestInfo) { s.eventIfOK(EventRequestSent, i.Err) },
	}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, endpoint.String(), bytes.NewReader(body))
	if err != nil {
		s.res.Start = time.Now()
		s.fail(ReasonConnection, "building request: %v", redactErr(err))
		return
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	s.res.RequestHeader = redactHeader(hreq.Header)
	replayOnStaleConn(hreq)

	if req.Gate != nil {
		req.Gate()
	}
	s.t0 = time.Now() // monotonic; everything is measured from here
	s.res.Start = s.t0
	resp, err := client.Do(hreq)
	if err != nil {
		reason, msg := classifyTransportError(ctx, err)
		s.fail(reason, "%s", msg)
		return
	}
	defer resp.Body.Close()
	s.event(EventHeaders, 0)
	s.res.StatusCode = resp.StatusCode
	s.res.ResponseHeader = redactHeader(resp.Header)
	s.phase = PhaseResponse

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if err != nil || len(b) == maxErrorBody {
			// Cut short (the probe's deadline, a reset, the bound): the body
			// may end inside an echoed secret, which no exact match finds.
			b = []byte(s.red.ScrubTail(string(b)))
		}
		s.res.ErrorBody = excerpt(s.red, b, maxErrorExcerpt)
		reason, msg := classifyHTTPError(resp.StatusCode, resp.Header, b, req.Gateway)
		s.fail(reason, "%s", msg)
		return
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		s.fail(ReasonMalformed, "HTTP %d with Content-Type %q, want text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		return
	}

	// The stall detector: every read that returns bytes re-arms the timer.
	var rd io.Reader = resp.Body
	if req.StallTimeout > 0 {
		timer := time.AfterFunc(req.StallTimeout, func() { cancel(errStalled) })
		defer timer.Stop()
		rd = &stallReader{r: resp.Body, timer: timer, d: req.StallTimeout}
	}
	s.phase = PhaseStream
	s.readStream(ctx, newSSEReader(rd), req.StallTimeout)
	if s.res.Success {
		// The measurement is over. vLLM ends the response right after [DONE];
		// reading that end lets the transport reuse the connection, as the
		// benchmark client does. A server that keeps the stream open is cut
		// after drainTimeout.
		t := time.AfterFunc(drainTimeout, func() { cancel(nil) })
		_, _ = io.Copy(io.Discard, io.LimitReader(rd, 4<<10))
		t.Stop()
	}
}

func (s *streamer) eventIfOK(kind EventKind, err error) {
	if err == nil {
		s.event(kind, 0)
	}
}

// stallReader re-arms the stall timer whenever bytes arrive.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (r *stallReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.d)
	}
	return n, err
}

func (s *streamer) readStream(ctx context.Context, sse *sseReader, stall time.Duration) {
	var (
		last          time.Duration
		contentEvents int
		usageOut      int
		haveUsage     bool
		answered      bool            // an event carried answer text (TTFA)
		predictedN    int             // llama.cpp's timings.predicted_n
		text          strings.Builder // the start of the generated text, as sent
		textDone      bool            // text holds enough to cut (textEnough)
	)
	finish := func() {
		s.res.OutputTokens = contentEvents
		switch {
		case haveUsage && usageOut > 0:
			s.res.OutputTokens = usageOut
			s.res.OutputTokensFromUsage = true
		case predictedN > 0:
			s.res.OutputTokens = predictedN
			s.res.OutputTokensFromTimings = true
		}
		// The text may end where the stream broke or where reading stopped
		// (textDone), in the middle of a secret: its tail is scrubbed, and
		// when reading stopped the cut leaves the longest secret's length
		// of the scrubbed text after it, however much the redactor learned
		// meanwhile.
		t := s.red.ScrubTail(text.String())
		n := maxTextExcerpt
		if textDone {
			n = max(0, min(n, len(t)-s.red.MaxLen()))
		}
		s.res.Text = excerpt(s.red, []byte(t), n)
		if !s.res.Success {
			return // fail set E2E to the failure; there is no TPOT
		}
		s.res.E2E = last
		if contentEvents > 0 {
			s.res.TPOT, _ = TPOT(s.res.TTFT, s.res.E2E, s.res.OutputTokens)
		}
	}
	defer finish()
	for {
		data, err := sse.next()
		now := time.Since(s.t0)
		if err != nil {
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errStalled):
				s.fail(ReasonStalled, "stream stalled: no data for %s after %d content events", stall, contentEvents)
			case ctx.Err() != nil:
				s.fail(ReasonTimeout, "probe timed out after %s while streaming (%d content events)", now.Round(time.Millisecond), contentEvents)
			case errors.Is(err, errLineTooLong), errors.Is(err, errEventTooLong):
				s.fail(ReasonMalformed, "reading stream: %v", err)
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				s.fail(ReasonTruncated, "stream ended without %s after %d content events", s.dec.end(), contentEvents)
			default:
				s.fail(ReasonTruncated, "stream broken after %d content events: %v", contentEvents, redactErr(err))
			}
			return
		}
		ev, err := s.dec.decode(data)
		if err != nil {
			s.fail(ReasonMalformed, "invalid JSON in SSE event %d: %v", contentEvents+1, err)
			return
		}
		if ev.usage {
			haveUsage = true
			usageOut = ev.completion
			s.res.ReasoningTokens = ev.reasoning
			s.res.PromptTokens = ev.promptTokens
		}
		if ev.predicted > 0 {
			predictedN = ev.predicted
		}
		switch ev.kind {
		case EventDone:
			s.eventAt(now, EventDone, len(data))
			if contentEvents == 0 {
				s.fail(ReasonEmptyOutput, "stream completed without generated text")
				return
			}
			s.res.Success = true
			return
		case EventError:
			s.eventAt(now, EventError, len(data))
			s.fail(ReasonStreamError, "error event in stream after %d content events: %s", contentEvents, ev.err)
			return
		case EventContent:
			if s.gen != nil {
				s.dec.capture(s.gen, data)
			}
			s.eventAt(now, EventContent, len(data))
			if !textDone {
				s.dec.text(&text, data)
				textDone = s.textEnough(&text)
			}
			if ev.answer && !answered {
				s.res.TTFA, answered = now, true
			}
			if contentEvents == 0 {
				s.res.TTFT = now
			} else if len(s.res.ITLs) < MaxITLs {
				s.res.ITLs = append(s.res.ITLs, now-last)
			}
			last = now
			contentEvents++
		case 0:
		default:
			s.eventAt(now, ev.kind, len(data))
		}
		if ev.finishErr {
			s.fail(ReasonStreamError, `finish_reason "error" after %d content events`, contentEvents)
			return
		}
	}
}

// textEnough reports whether the generated text b holds is enough for the
// excerpt: scrubbed, it reaches maxTextExcerpt plus the longest secret, so
// that a secret the server split over several events and that straddles the
// cut is whole in b when it is scrubbed, before the cut.
func (s *streamer) textEnough(b *strings.Builder) bool {
	if b.Len() < maxTextExcerpt {
		return false
	}
	return len(s.red.String(b.String())) >= maxTextExcerpt+s.red.MaxLen()
}

// excerpt returns at most n bytes of b, scrubbed by red first (redact.Cut:
// no secret straddling the cut survives in part), as valid UTF-8, with "…"
// when cut.
func excerpt(red Scrubber, b []byte, n int) string {
	return strings.ToValidUTF8(red.Cut(string(b), n), "\uFFFD")
}

func hasJSON(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}

// streamBody copies body and forces streaming with usage.
func streamBody(body map[string]any) map[string]any {
	out := make(map[string]any, len(body)+2)
	maps.Copy(out, body)
	out["stream"] = true
	opts := map[string]any{}
	if so, ok := body["stream_options"].(map[string]any); ok {
		maps.Copy(opts, so)
	}
	opts["include_usage"] = true
	out["stream_options"] = opts
	return out
}

// classifyTransportError maps an error of client.Do (no response) to a reason.
func classifyTransportError(ctx context.Context, err error) (Reason, string) {
	inner := redactErr(err)
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errStalled) {
			return ReasonStalled, "stalled before response headers"
		}
		return ReasonTimeout, "probe timed out before response headers"
	}
	var (
		dnsErr   *net.DNSError
		unkAuth  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		certErr  x509.CertificateInvalidError
		verErr   *tls.CertificateVerificationError
		recErr   tls.RecordHeaderError
		alertErr tls.AlertError
		netErr   net.Error
		redirErr *httpclient.RedirectError
	)
	switch {
	case errors.As(err, &redirErr):
		// The redirect policy refused the location: nothing was sent there.
		return ReasonRedirect, "redirect not followed: " + inner.Error()
	case errors.As(err, &dnsErr):
		return ReasonDNS, fmt.Sprintf("DNS lookup of %q failed: %s", dnsErr.Name, dnsErr.Err)
	case errors.As(err, &verErr), errors.As(err, &unkAuth), errors.As(err, &hostErr),
		errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alertErr),
		strings.Contains(err.Error(), "tls: "):
		return ReasonTLS, "TLS: " + inner.Error()
	case errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout, "timeout: " + inner.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonConnection, "connection refused: " + inner.Error()
	}
	return ReasonConnection, "connection failed: " + inner.Error()
}

// classifyHTTPError maps a non-2xx response to a reason and a message. h may
// be nil (no headers to read). gateway says the target is a declared
// gateway: only then is a refusal read as load shedding (classifyShed).
func classifyHTTPError(status int, h http.Header, body []byte, gateway bool) (Reason, string) {
	typ, msg := parseErrorBody(body)
	text := fmt.Sprintf("HTTP %d", status)
	if typ != "" {
		text += " " + typ
	}
	if msg != "" {
		text += ": " + msg
	}
	if why, ok := classifyOverload(status, msg); ok {
		return ReasonOverloaded, why + ": " + text
	}
	if why, ok := classifyShed(status, h, body, msg); ok && gateway {
		return ReasonShed, why + ": " + text
	}
	lower := strings.ToLower(msg)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ReasonUnauthorized, text
	case status == http.StatusTooManyRequests:
		return ReasonRateLimited, text
	case status == http.StatusBadRequest && isContextLength(typ, lower):
		return ReasonContextLength, text
	case status == http.StatusNotFound && (typ == "NotFoundError" || strings.Contains(lower, "does not exist")):
		return ReasonModelNotFound, text
	case status >= 500:
		return ReasonHTTP5xx, text
	case isRedirect(status):
		// A redirect the client did not follow (follow_redirects: false).
		return ReasonRedirect, text + " (a redirect, not followed: follow_redirects is false)"
	}
	return ReasonHTTP4xx, text
}

// isContextLength reports whether a 400's error type and lower-cased
// message say the request does not fit the model's context: vLLM's and
// SGLang's "maximum context length", SGLang's "is longer than the model's
// context length" (its prompt check), llama-server's
// exceed_context_size_error ("exceeds the available context size").
func isContextLength(typ, lowerMsg string) bool {
	return typ == "exceed_context_size_error" ||
		strings.Contains(lowerMsg, "maximum context length") ||
		strings.Contains(lowerMsg, "longer than the model's context length") ||
		strings.Contains(lowerMsg, "exceeds the available context size")
}

// isRedirect reports whether net/http's client follows status when a
// configuration lets it.
func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// parseErrorBody reads vLLM's error bodies in both shapes: nested
// {"error":{"message","type","param","code"}} (≥ v0.10.1), flat
// {"object":"error","message","type","code"} (older), and {"error":"text"} (the
// API-key middleware). code may be an int or a string; it is not needed. Anything
// else yields the start of the body as the message.
func parseErrorBody(body []byte) (typ, msg string) {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Type    string          `json:"type"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(body, &v); err == nil {
		if hasJSON(v.Error) {
			var inner struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			}
			var str string
			switch {
			case json.Unmarshal(v.Error, &inner) == nil:
				return inner.Type, inner.Message
			case json.Unmarshal(v.Error, &str) == nil:
				return "", str
			}
		}
		if v.Message != "" || v.Type != "" {
			return v.Type, v.Message
		}
		if hasJSON(v.Detail) {
			var str string
			if json.Unmarshal(v.Detail, &str) == nil {
				return "", str
			}
			return "", string(v.Detail)
		}
	}
	return "", string(bytes.TrimSpace(body))
}

// sanitize makes a server- or error-supplied string safe to show: scrubbed
// by red first (before the cut, so that no part of a secret straddling it
// survives), printable, one line, bounded.
func sanitize(red Scrubber, s string) string {
	s = red.String(s)
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= maxErrLen {
			b.WriteString("…")
			break
		}
		switch {
		case r == utf8.RuneError:
			b.WriteRune('?')
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsPrint(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redactErr drops the URL from *url.Error (it could carry userinfo) and keeps the cause.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, redactURL(ue.URL), ue.Err)
	}
	return err
}

// redactURL removes userinfo and the query from a URL string.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid URL>"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}

// redactHeader copies h with the values of credential-carrying headers replaced.
// replayOnStaleConn lets net/http send hreq again, once per pooled
// connection, when it failed on a reused keep-alive connection before any
// byte of a response: the server had closed that connection (llama.cpp's
// llama-server closes it after every streamed response while it answers
// `Keep-Alive: timeout=5, max=100`), so the request never reached a
// handler. net/http replays a POST only when its body can be rewound
// (GetBody, which http.NewRequestWithContext sets for a bytes.Reader) and
// its Header holds an Idempotency-Key entry; a nil one marks it without
// sending the header (net/http.Transport's documentation). A request on a
// new connection, or one whose response had begun, is never sent again. A
// key the configured headers already set is kept as it is.
func replayOnStaleConn(hreq *http.Request) {
	if _, ok := hreq.Header["Idempotency-Key"]; ok {
		return
	}
	if _, ok := hreq.Header["X-Idempotency-Key"]; ok {
		return
	}
	hreq.Header["Idempotency-Key"] = nil
}

func redactHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if redact.SensitiveHeader(k) {
			out[k] = []string{redact.Placeholder}
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}

package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
)

// Spec is one module compiled for probing: its kind, request template and
// output checks. A configuration's modules are compiled once, when it is
// applied; a Spec then runs every probe of the module. It is safe for
// concurrent use.
type Spec struct {
	module string
	mod    config.Module
	kind   *kind
	checks *checks
}

// Compile compiles the module named name. The configuration was validated,
// so an error means a module the configuration check let through.
func Compile(name string, mod config.Module) (*Spec, error) {
	k, ok := kinds[mod.Prober]
	if !ok {
		return nil, fmt.Errorf("module %q: unknown prober %q", name, mod.Prober)
	}
	c, err := compileChecks(&mod)
	if err != nil {
		return nil, fmt.Errorf("module %q: %w", name, err)
	}
	return &Spec{module: name, mod: mod, kind: k, checks: c}, nil
}

// Module is the module the spec was compiled from (read-only).
func (s *Spec) Module() *config.Module { return &s.mod }

// ChecksAnswers reports whether the spec's probes check their answer
// (vllm_probe_answer_correct, vllm_probe_answer_checks_total).
func (s *Spec) ChecksAnswers() bool { return s.checks.answers() }

// PromptEstimate is a deliberately pessimistic token count for the module's
// prompt before the server told the real one: a third of its bytes (English
// BPE averages about four bytes per token), plus the nonce and chat-template
// overhead.
func (s *Spec) PromptEstimate() int {
	n := len(s.mod.Prompt)
	for _, msg := range s.mod.Messages {
		n += len(msg.Content) + 3*8 // role markers and separators
	}
	longest := 0 // a rotating question replaces the prompt
	for _, q := range s.mod.Questions {
		longest = max(longest, len(q.Prompt))
	}
	n += longest
	return n/3 + 1 + PromptSlack + s.mod.PrefillTokens
}

// PromptSlack covers the variation of the nonce's tokenisation between probes.
const PromptSlack = 8

// Call is what one run of a Spec needs besides the module.
type Call struct {
	BaseURL string // the target's root, e.g. http://127.0.0.1:8000
	Target  string // names the target in X-Request-Id
	Model   string
	// StallTimeout fails a stream that sends no byte for this long (0: off).
	StallTimeout time.Duration
	// Header is sent with the request (bench's); RequestID, when set,
	// replaces the X-Request-Id vllm-prober-<target>-<module>-<nonce>.
	Header    http.Header
	RequestID string
	// Prompt, when set, is asked instead of the module's (bench's random
	// prompts); the nonce still goes in front when the module sets nonce.
	Prompt string
	// Seq numbers the probes of one (target, module): a module with
	// questions asks question Seq modulo their number, so that each target
	// asks them in turn.
	Seq uint64
	// Output, when not nil, receives the whole generated text, as vLLM's
	// benchmark client keeps generated_text (bench --save-detailed).
	Output *string
	// Redact scrubs what the target sends before any part of it is cut
	// (StreamRequest.Redact); the caller still scrubs the Result it keeps.
	Redact Scrubber
	// Gate is StreamRequest.Gate.
	Gate func()
	// Gateway is StreamRequest.Gateway.
	Gateway bool
}

// Run sends one probe of the spec and returns its measurement, the output
// checks applied. The texts it keeps are not scrubbed yet: the caller
// scrubs them (Result.Scrub) with the secrets it knows.
func (s *Spec) Run(ctx context.Context, client *http.Client, c Call) Result {
	c.Redact = scrubberOr(c.Redact)
	nonce := newNonce()
	mod, check := s.checks.pick(s.mod, c.Seq)
	if c.Prompt != "" {
		mod = withPrompt(mod, c.Prompt)
	}
	prompt := promptOf(&mod)
	if mod.PrefillTokens > 0 {
		prompt = freshWords(mod.PrefillTokens) + " " + prompt
	}
	if mod.Nonce {
		prompt = nonce + " " + prompt
	}
	header := http.Header{}
	for k, v := range mod.Headers {
		header.Set(k, v)
	}
	for k, vs := range c.Header {
		header[k] = append([]string(nil), vs...)
	}
	id := c.RequestID
	if id == "" {
		id = "vllm-prober-" + c.Target + "-" + s.module + "-" + nonce
	}
	header.Set("X-Request-Id", id)
	req := StreamRequest{
		BaseURL:      c.BaseURL,
		Kind:         mod.Prober,
		Body:         s.kind.body(&mod, c.Model, prompt),
		Header:       header,
		StallTimeout: c.StallTimeout,
		Capture:      s.checks.capture() || c.Output != nil,
		FullText:     c.Output != nil,
		Redact:       c.Redact,
		Gate:         c.Gate,
		Gateway:      c.Gateway,
	}
	res, gen := send(ctx, client, req, &mod)
	if c.Output != nil && gen != nil {
		*c.Output = gen.text.String()
	}
	s.checks.apply(&res, gen, check, c.Redact)
	if mod.RequireAnswer && res.Success && res.TTFA == 0 {
		res.Success, res.Reason = false, ReasonNoAnswer
		res.Err = fmt.Sprintf("no answer within max_tokens %d: the output was reasoning only (%d reasoning tokens of %d)", mod.MaxTokens, res.ReasoningTokens, res.OutputTokens)
	}
	res.Model = c.Model
	return res
}

func newNonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Scrub removes red's secrets (the credentials of the configuration, and the
// tokens its clients obtained) from the result's texts and headers, and then
// bounds the text it keeps and quotes it in a failed check's error. Stream
// never puts a secret there itself, but a server may echo a key or a request
// header in its error body. Whoever keeps or returns a result scrubs it.
func (r *Result) Scrub(red Scrubber) {
	red = scrubberOr(red)
	for _, s := range []*string{&r.Err, &r.RequestBody, &r.ErrorBody} {
		*s = red.String(*s)
	}
	// The generated text may end where the stream broke or a timeout cut
	// it, in the middle of an echoed secret.
	r.Text = red.ScrubTail(r.Text)
	red.Header(r.RequestHeader)
	red.Header(r.ResponseHeader)
	r.Text = truncateText(red, r.Text) // scrubs first: no secret cut in half survives
	quoteOutput(r, red)
}

// ListModels lists the model ids a target serves (GET /v1/models). On
// failure it returns a failed Result whose reason says why. Every text of
// the answer is scrubbed by red before it is kept or cut; an id that holds a
// secret becomes redact.Placeholder (redact.Label: the caller warns when
// the list holds it).
func ListModels(ctx context.Context, client *http.Client, base string, red Scrubber) ([]string, *Result) {
	red = scrubberOr(red)
	res := &Result{Start: time.Now()}
	models, err := vllmapi.Models(ctx, client, base, nil)
	if err != nil {
		var status *vllmapi.StatusError
		var decode *vllmapi.DecodeError
		switch {
		case errors.As(err, &status):
			res.StatusCode = status.Code
			reason, msg := classifyHTTPError(status.Code, nil, status.Body, false)
			res.Reason, res.Err = reason, sanitize(red, "/v1/models: "+msg)
			res.ErrorBody = excerpt(red, status.Body, maxErrorExcerpt)
		case errors.As(err, &decode):
			res.StatusCode = http.StatusOK
			res.Reason, res.Err = ReasonMalformed, sanitize(red, "/v1/models: invalid JSON: "+decode.Err.Error())
		default:
			reason, msg := classifyTransportError(ctx, err)
			res.Reason, res.Err = reason, sanitize(red, msg)
		}
		return nil, res
	}
	ids := make([]string, 0, len(models))
	for _, d := range models {
		if d.ID != "" {
			id, _ := red.Label(d.ID)
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// RedactURL removes userinfo and the query from a URL string.
func RedactURL(raw string) string { return redactURL(raw) }

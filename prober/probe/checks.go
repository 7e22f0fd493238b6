package probe

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/answer"
)

// Failure reasons of the output checks.
const (
	ReasonWrongAnswer       Reason = "wrong_answer"              // the text failed the module's expect
	ReasonInvalidStructured Reason = "invalid_structured_output" // not the JSON or tool call asked for
	ReasonInvalidEmbedding  Reason = "invalid_embedding"         // wrong dimension, a zero or non-finite vector
	maxResultText                  = 512                         // bytes of generated text a Result keeps
	maxErrText                     = 80                          // bytes of it a failed check's Err quotes
)

// AnswerVerdict is the outcome of a probe's answer check.
type AnswerVerdict uint8

// Answer verdicts.
const (
	AnswerNotChecked AnswerVerdict = iota // no check, or the probe failed before it
	AnswerCorrect
	AnswerWrong
)

// checks are the compiled output checks of one pair's module. They are
// compiled when a configuration is applied, once per pair.
type checks struct {
	expect    *answer.Checker // module-wide expect
	questions []question      // or rotating questions
	structure *structure      // response_format / tools
}

type question struct {
	prompt string
	check  *answer.Checker
}

// expectSpec converts e for package answer.
func expectSpec(e *config.Expect) answer.Spec {
	return answer.Spec{Regex: e.Regex, Equals: e.Equals, JSONSchema: e.JSONSchema, OneOf: e.OneOf}
}

// compileChecks compiles mod's checks; nil when it has none. The
// configuration was validated, so an error means a bug, not bad input.
func compileChecks(mod *config.Module) (*checks, error) {
	if !mod.ChecksAnswers() && !mod.ChecksStructure() && mod.Prober != config.ProberEmbeddings {
		return nil, nil
	}
	c := &checks{}
	var err error
	if mod.Expect != nil {
		if c.expect, err = answer.Compile(expectSpec(mod.Expect)); err != nil {
			return nil, fmt.Errorf("expect: %w", err)
		}
	}
	for i, q := range mod.Questions {
		ck, err := answer.Compile(expectSpec(&q.Expect))
		if err != nil {
			return nil, fmt.Errorf("questions[%d].expect: %w", i, err)
		}
		c.questions = append(c.questions, question{prompt: q.Prompt, check: ck})
	}
	if c.structure, err = compileStructure(mod); err != nil {
		return nil, err
	}
	return c, nil
}

// answers reports whether the checks include an answer check.
func (c *checks) answers() bool { return c != nil && (c.expect != nil || len(c.questions) > 0) }

// capture reports whether probes must keep the generated output.
func (c *checks) capture() bool { return c != nil && (c.answers() || c.structure != nil) }

// pick returns the module to send, with the prompt of question seq (modulo
// the questions) in place, and the answer checker of that probe (nil when
// none).
func (c *checks) pick(mod config.Module, seq uint64) (config.Module, *answer.Checker) {
	if c == nil {
		return mod, nil
	}
	if len(c.questions) == 0 {
		return mod, c.expect
	}
	q := c.questions[seq%uint64(len(c.questions))]
	return withPrompt(mod, q.prompt), q.check
}

// apply checks a finished stream's output: structure first, then the
// answer. A probe that already failed is left as it is.
func (c *checks) apply(res *Result, gen *generated, check *answer.Checker, red Scrubber) {
	if c == nil || gen == nil {
		return
	}
	res.Text = gen.summary() // the caller scrubs, then truncates it
	if check != nil {
		res.Check = check.String()
	}
	if !res.Success {
		return
	}
	checked := gen.text.String()
	if c.structure != nil {
		var why string
		if why, checked = c.structure.check(gen); why != "" {
			res.Success, res.Reason, res.Err = false, ReasonInvalidStructured, sanitize(red, why)
			return
		}
	}
	if check == nil {
		return
	}
	if ok, why := check.Check(checked); !ok {
		res.Answer = AnswerWrong
		res.Success, res.Reason, res.Err = false, ReasonWrongAnswer, sanitize(red, why)
		return
	}
	res.Answer = AnswerCorrect
}

// quoteOutput appends to a failed output check's Err the start of the output
// it judged, so that every place that shows the error (the landing page's
// summary and target page, the debug report, the logs) shows the answer too.
// The text is scrubbed by red before it is cut (redact.Cut): a cut cannot
// leave part of a secret.
func quoteOutput(res *Result, red Scrubber) {
	if res.Text == "" || (res.Reason != ReasonWrongAnswer && res.Reason != ReasonInvalidStructured) {
		return
	}
	t, cut := red.String(res.Text), ""
	if len(t) > maxErrText {
		t, cut = strings.TrimSuffix(red.Cut(t, maxErrText), "…"), "…"
	}
	res.Err += "; got " + strconv.Quote(t) + cut
}

// truncateText keeps the first maxResultText bytes of s, scrubbed by red
// before the cut, cut at a rune.
func truncateText(red Scrubber, s string) string {
	return red.Cut(s, maxResultText)
}

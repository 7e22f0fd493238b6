package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1Semantics decodes chunks with encoding/json's semantics (names matched
// case-insensitively, the last of duplicate names wins, invalid UTF-8
// replaced) through the json v2 prototype's decoder, which unmarshals a
// chunk with no allocation where encoding/json made 7: a probe decodes one
// chunk per token. It is never changed.
var v1Semantics = jsonv1.DefaultOptionsV1()

// chunkDecoder reads the SSE events of /v1/completions and
// /v1/chat/completions: OpenAI's chunks, ended by data: [DONE] (vLLM's
// serving_completion.py and serving_chat.py).
type chunkDecoder struct {
	c    chunk  // reused from event to event
	last []byte // the data c was decoded from: capture and text read c when given the same
	buf  []byte // text's, reused from event to event
}

func newChunkDecoder() eventDecoder { return &chunkDecoder{} }

func (d *chunkDecoder) end() string { return "data: [DONE]" }

func (d *chunkDecoder) decode(data []byte) (streamEvent, error) {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return streamEvent{kind: EventDone}, nil
	}
	// c and its choices are reused from event to event; encoding/json
	// decodes into the old elements of a slice, so they are zeroed first.
	clear(d.c.Choices[:cap(d.c.Choices)])
	d.c = chunk{Choices: d.c.Choices[:0]}
	d.last = nil
	c := &d.c
	if err := jsonv2.Unmarshal(data, c, v1Semantics); err != nil {
		return streamEvent{}, err
	}
	d.last = data
	if hasJSON(c.Error) || bool(c.Object) {
		_, msg := parseErrorBody(data)
		return streamEvent{kind: EventError, err: msg}, nil
	}
	var ev streamEvent
	content, role := false, false
	for _, ch := range c.Choices {
		d := ch.Delta
		switch {
		case ch.Text.set || d.Content.set || d.ToolCalls.set:
			content, ev.answer = true, true
		case d.ReasoningContent.set || d.Reasoning.set:
			content = true
		case d.Role.set:
			role = true
		}
		if ch.FinishReason != nil && *ch.FinishReason == "error" {
			ev.finishErr = true
		}
	}
	switch {
	case content:
		ev.kind = EventContent
	case role:
		ev.kind = EventRole
	case len(c.Choices) > 0:
		ev.kind = EventEmpty
	case c.Usage != nil:
		ev.kind = EventUsage
	}
	if c.Usage != nil {
		ev.usage, ev.promptTokens, ev.completion = true, c.Usage.PromptTokens, c.Usage.CompletionTokens
		if c.Usage.CompletionTokensDetails != nil {
			ev.reasoning = c.Usage.CompletionTokensDetails.ReasoningTokens
		}
	}
	if c.Timings != nil {
		ev.predicted = c.Timings.PredictedN
	}
	return ev, nil
}

// capture adds the text and tool-call fragments of the event decode just
// read from data, without decoding data again: a probe that keeps its output
// (bench --save-detailed, output checks) does this for every token. Given
// other data, it decodes it.
func (d *chunkDecoder) capture(g *generated, data []byte) {
	if !d.decoded(data) {
		g.add(data)
		return
	}
	for _, ch := range d.c.Choices {
		g.write(&g.text, ch.Text.String())
		g.write(&g.text, ch.Delta.Content.String())
		if ch.Delta.ToolCalls.set {
			var deltas []toolCallDelta
			if json.Unmarshal(ch.Delta.ToolCalls.raw, &deltas) == nil {
				g.addToolCalls(deltas)
			}
		}
	}
}

// decoded reports whether data is what decode last read successfully (the
// same bytes in the same place, which the reader keeps until its next event).
func (d *chunkDecoder) decoded(data []byte) bool {
	return len(data) > 0 && len(d.last) == len(data) && &d.last[0] == &data[0]
}

// chunk is the union of the SSE payloads vLLM sends on both endpoints. The
// reader only asks whether a chunk carries generated text, so the text fields
// are not copied out ([text], [toolCalls], [objectError]): they keep where
// their JSON is in the event's data, which the capture and the excerpt
// decode when they need it. A probe decodes one chunk per token.
type chunk struct {
	Choices []struct {
		Text  text `json:"text"`
		Delta struct {
			Role             text      `json:"role"`
			Content          text      `json:"content"`
			ReasoningContent text      `json:"reasoning_content"`
			Reasoning        text      `json:"reasoning"`
			ToolCalls        toolCalls `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		// OpenAI's completion_tokens_details, which vLLM fills for a
		// reasoning model: the reasoning share of completion_tokens.
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	// llama-server's timings object, in the last chunk: predicted_n is the
	// number of tokens it generated.
	Timings *struct {
		PredictedN int `json:"predicted_n"`
	} `json:"timings"`
	// Mid-stream errors: {"error":{...}} (≥ v0.10.1) or flat {"object":"error",...}.
	Error  json.RawMessage `json:"error"`
	Object objectError     `json:"object"`
}

// text is a JSON string field: set when it is a non-empty string (null is
// empty; any other kind of value is an error, as it is for a string field),
// and raw, its JSON (quotes included) inside the event's data, valid until
// the reader's next event.
type text struct {
	set bool
	raw []byte
}

func (t *text) UnmarshalJSON(b []byte) error {
	// b is one valid JSON value without surrounding space, inside the
	// event's data: the decoder reads the data in place and hands a slice
	// of it. A later syntax error in the data fails the whole decode.
	switch b[0] {
	case '"':
		t.set, t.raw = len(b) > 2, b
	case 'n':
		t.set, t.raw = false, nil
	default:
		// The value is not quoted: it is the server's text, and a cut
		// quote could hold part of a secret.
		return fmt.Errorf("want a string, got a JSON %s", jsonKind(b[0]))
	}
	return nil
}

// String is the string t holds, "" when it is empty or null.
func (t text) String() string {
	if !t.set {
		return ""
	}
	return string(t.appendTo(nil))
}

// appendTo appends the string t holds to dst, unquoted as encoding/json
// reads it (invalid UTF-8 and lone surrogates replaced), without a string
// of its own: the first events of every probe add their text to its
// excerpt.
func (t text) appendTo(dst []byte) []byte {
	if !t.set {
		return dst
	}
	dst, _ = jsontext.AppendUnquote(dst, t.raw) // checked as JSON when the event was decoded
	return dst
}

// jsonKind names the kind of JSON value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// objectError is whether a JSON string is "error".
type objectError bool

func (o *objectError) UnmarshalJSON(b []byte) error {
	var t text
	if err := t.UnmarshalJSON(b); err != nil {
		return err
	}
	*o = string(b) == `"error"`
	return nil
}

// toolCalls is a delta's tool_calls: set when it holds anything (not null
// and not []), and raw, its JSON inside the event's data (as for [text]).
type toolCalls struct {
	set bool
	raw []byte
}

func (c *toolCalls) UnmarshalJSON(b []byte) error {
	c.set = string(b) != "null" && string(b) != "[]"
	c.raw = b
	return nil
}

// text adds the generated text of a content event to b (the reader cuts it
// at maxTextExcerpt bytes). Only the first events of a probe pay for decoding the
// strings, and only the strings when data is the event decode just read.
func (d *chunkDecoder) text(b *strings.Builder, data []byte) {
	if d.decoded(data) {
		for _, ch := range d.c.Choices {
			for _, t := range [...]text{ch.Delta.ReasoningContent, ch.Delta.Reasoning, ch.Text, ch.Delta.Content} {
				d.buf = t.appendTo(d.buf[:0])
				b.Write(d.buf)
			}
		}
		return
	}
	var c struct {
		Choices []struct {
			Text  string `json:"text"`
			Delta struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				Reasoning        string `json:"reasoning"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &c) != nil {
		return
	}
	for _, ch := range c.Choices {
		for _, t := range []string{ch.Delta.ReasoningContent, ch.Delta.Reasoning, ch.Text, ch.Delta.Content} {
			b.WriteString(t)
		}
	}
}

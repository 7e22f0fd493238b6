package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// chunkDecoder reads the SSE events of /v1/completions and
// /v1/chat/completions: OpenAI's chunks, ended by data: [DONE] (vLLM's
// serving_completion.py and serving_chat.py).
type chunkDecoder struct {
	c chunk // reused from event to event
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
	c := &d.c
	if err := json.Unmarshal(data, c); err != nil {
		return streamEvent{}, err
	}
	if hasJSON(c.Error) || bool(c.Object) {
		_, msg := parseErrorBody(data)
		return streamEvent{kind: EventError, err: msg}, nil
	}
	var ev streamEvent
	content, role := false, false
	for _, ch := range c.Choices {
		d := ch.Delta
		switch {
		case bool(ch.Text || d.Content || d.ReasoningContent || d.Reasoning) || bool(d.ToolCalls):
			content = true
		case bool(d.Role):
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
	}
	return ev, nil
}

func (d *chunkDecoder) capture(g *generated, data []byte) { g.add(data) }

// chunk is the union of the SSE payloads vLLM sends on both endpoints. The
// reader only asks whether a chunk carries generated text, so the text fields
// are decoded into booleans ([text], [toolCalls], [objectError]) rather than
// copied: a probe decodes one chunk per token.
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
	} `json:"usage"`
	// Mid-stream errors: {"error":{...}} (≥ v0.10.1) or flat {"object":"error",...}.
	Error  json.RawMessage `json:"error"`
	Object objectError     `json:"object"`
}

// text is whether a JSON string is non-empty. null is empty; any other kind
// of value is an error, as it is for a string field.
type text bool

func (t *text) UnmarshalJSON(b []byte) error {
	// b is one valid JSON value without surrounding space: encoding/json
	// checks the whole input before it decodes.
	switch b[0] {
	case '"':
		*t = len(b) > 2
	case 'n':
		*t = false
	default:
		// The value is not quoted: it is the server's text, and a cut
		// quote could hold part of a secret.
		return fmt.Errorf("want a string, got a JSON %s", jsonKind(b[0]))
	}
	return nil
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

// toolCalls is whether a delta's tool_calls holds anything: not null and not [].
type toolCalls bool

func (c *toolCalls) UnmarshalJSON(b []byte) error {
	*c = string(b) != "null" && string(b) != "[]"
	return nil
}

// text adds the generated text of a content event to b (the reader cuts it
// at maxTextExcerpt bytes). Only the first events of a probe pay for decoding the
// strings.
func (d *chunkDecoder) text(b *strings.Builder, data []byte) {
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

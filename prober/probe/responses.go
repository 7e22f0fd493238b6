package probe

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/answer"
)

// The responses kind probes vLLM's OpenAI-compatible POST /v1/responses with
// stream: true (vLLM's entrypoints/openai/serving_responses.py,
// responses_stream_generator; its request and event types in
// entrypoints/openai/protocol.py and the openai package's
// types/responses). The module's prompt is sent as input and max_tokens as
// max_output_tokens. The answer is a stream of named events, each sent as
// "event: <type>" and "data: <JSON with the same type>" (api_router.py,
// _convert_stream_to_sse_events), and no data: [DONE]:
//
//	response.created, response.in_progress        the response, no output yet
//	response.output_item.added,
//	response.content_part.added                   an output item opens
//	response.reasoning_text.delta  {"delta"}      reasoning text
//	response.output_text.delta     {"delta"}      answer text
//	response.output_text.done, ...part.done,
//	response.output_item.done                     the item closes
//	response.completed  {"response":{"usage":{"input_tokens","output_tokens"}}}
//
// A generation error is one event whose data is vLLM's error object
// ({"error":{...}} or type "error"); the OpenAI API also names
// response.failed. TTFT ends at the first delta carrying text, reasoning
// included as for chat's reasoning_content; response.completed (or
// response.incomplete, which ends a response cut by max_output_tokens) ends
// the stream and carries the usage.

// responsesBody is /v1/responses': the prompt as input, max_tokens as
// max_output_tokens.
func responsesBody(mod *config.Module, model, prompt string) map[string]any {
	body := map[string]any{"model": model, "input": prompt, "max_output_tokens": mod.MaxTokens,
		"temperature": mod.Temperature}
	if mod.IgnoreEOS {
		body["ignore_eos"] = true
	}
	if mod.Seed != nil {
		body["seed"] = *mod.Seed
	}
	for k, v := range mod.ExtraBody {
		body[k] = answer.JSONable(v)
	}
	return body
}

// responsesStreamBody copies body with stream: true. The usage comes with
// response.completed: the Responses API has no stream_options.
func responsesStreamBody(body map[string]any) map[string]any {
	out := maps.Clone(body)
	if out == nil {
		out = map[string]any{}
	}
	out["stream"] = true
	return out
}

// responsesDecoder reads /v1/responses' events.
type responsesDecoder struct{}

func newResponsesDecoder() eventDecoder { return responsesDecoder{} }

func (responsesDecoder) end() string { return "response.completed" }

// responseEvent is the part of a Responses API event the reader needs.
type responseEvent struct {
	Type  string          `json:"type"`
	Delta *string         `json:"delta"`
	Error json.RawMessage `json:"error"`
	// Message is set on type "error".
	Message  string `json:"message"`
	Response *struct {
		Usage *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
		Error json.RawMessage `json:"error"`
	} `json:"response"`
}

func (responsesDecoder) decode(data []byte) (streamEvent, error) {
	var e responseEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return streamEvent{}, err
	}
	var ev streamEvent
	switch {
	case hasJSON(e.Error) || e.Type == "error":
		_, msg := parseErrorBody(data)
		if msg == "" {
			msg = e.Message
		}
		return streamEvent{kind: EventError, err: msg}, nil
	case e.Type == "response.failed":
		msg := "response.failed"
		if e.Response != nil && hasJSON(e.Response.Error) {
			_, msg = parseErrorBody(e.Response.Error)
		}
		return streamEvent{kind: EventError, err: msg}, nil
	case e.Type == "response.output_text.delta", e.Type == "response.reasoning_text.delta":
		if e.Delta != nil && *e.Delta != "" {
			ev.kind = EventContent
			ev.answer = e.Type == "response.output_text.delta"
		} else {
			ev.kind = EventEmpty
		}
	case e.Type == "response.completed", e.Type == "response.incomplete":
		ev.kind = EventDone
	case e.Type == "":
		// Not an event of the Responses API.
		return streamEvent{}, errNoType
	default:
		ev.kind = EventEmpty
	}
	if e.Response != nil && e.Response.Usage != nil {
		ev.usage, ev.promptTokens, ev.completion = true, e.Response.Usage.InputTokens, e.Response.Usage.OutputTokens
	}
	return ev, nil
}

// errNoType fails an event without a type as malformed.
var errNoType = errors.New("event has no type")

// deltaOf is a delta event's text and whether it is answer text (not
// reasoning).
func deltaOf(data []byte) (text string, answer bool) {
	var e responseEvent
	if json.Unmarshal(data, &e) != nil || e.Delta == nil {
		return "", false
	}
	return *e.Delta, e.Type == "response.output_text.delta"
}

func (responsesDecoder) text(b *strings.Builder, data []byte) {
	t, _ := deltaOf(data)
	b.WriteString(t)
}

// capture keeps the answer text; reasoning is not the answer, as chat's
// reasoning_content is not.
func (responsesDecoder) capture(g *generated, data []byte) {
	if t, answer := deltaOf(data); answer {
		g.write(&g.text, t)
	}
}

package probe

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/answer"
)

// kind is one way of probing a vLLM endpoint: the path a probe posts to, the
// JSON body a module makes, and how the answer is read. Every kind a module
// may name (its prober key) has one entry in kinds, as blackbox_exporter's
// probers have one entry in its Probers map.
type kind struct {
	path string
	// body is the JSON body of a probe of mod: model and prompt are the
	// ones to send (the prompt with the nonce in front, a rotating
	// question's or bench's prompt in place of the module's).
	body func(mod *config.Module, model, prompt string) map[string]any
	// events decodes a streamed answer's SSE events, and streamBody makes a
	// body ask for them. Kinds answered in one JSON body have neither and
	// set send instead.
	events     func() eventDecoder
	streamBody func(body map[string]any) map[string]any
	// send sends one request of a kind answered in one JSON body.
	send func(ctx context.Context, client *http.Client, req StreamRequest, mod *config.Module) Result
}

// kinds are the probe kinds, by a module's prober key.
var kinds = map[string]*kind{
	config.ProberCompletions: {path: "/v1/completions", body: completionsBody, events: newChunkDecoder, streamBody: streamBody},
	config.ProberChat:        {path: "/v1/chat/completions", body: chatBody, events: newChunkDecoder, streamBody: streamBody},
	config.ProberEmbeddings:  {path: "/v1/embeddings", body: embeddingsBody, send: embed},
	config.ProberResponses:   {path: "/v1/responses", body: responsesBody, events: newResponsesDecoder, streamBody: responsesStreamBody},
}

// Kinds lists the probe kinds a module may name, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// StreamedKinds lists, sorted, the kinds whose answer is streamed: those
// bench can load a server with.
func StreamedKinds() []string {
	var out []string
	for _, k := range Kinds() {
		if kinds[k].events != nil {
			out = append(out, k)
		}
	}
	return out
}

// Path is the endpoint a probe of kind posts to, "" for an unknown kind.
func Path(kindName string) string {
	if k, ok := kinds[kindName]; ok {
		return k.path
	}
	return ""
}

// samplingFields sets what every generating kind sends alike: temperature,
// ignore_eos, the structured-output fields and the module's extra_body.
func samplingFields(body map[string]any, mod *config.Module) map[string]any {
	body["temperature"] = mod.Temperature
	if mod.IgnoreEOS {
		body["ignore_eos"] = true
	}
	addStructureFields(body, mod)
	for k, v := range mod.ExtraBody {
		body[k] = answer.JSONable(v)
	}
	return body
}

// completionsBody is /v1/completions': the prompt and max_tokens.
func completionsBody(mod *config.Module, model, prompt string) map[string]any {
	return samplingFields(map[string]any{"model": model, "prompt": prompt, "max_tokens": mod.MaxTokens}, mod)
}

// chatBody is /v1/chat/completions': the messages, with prompt as the
// content of the first user message, and max_completion_tokens (and
// max_tokens, for servers older than max_completion_tokens).
func chatBody(mod *config.Module, model, prompt string) map[string]any {
	msgs := make([]map[string]any, len(mod.Messages))
	first := slices.IndexFunc(mod.Messages, func(m config.Message) bool { return m.Role == "user" })
	if first < 0 {
		first = 0
	}
	for i, msg := range mod.Messages {
		content := msg.Content
		if i == first {
			content = prompt
		}
		msgs[i] = map[string]any{"role": msg.Role, "content": content}
	}
	return samplingFields(map[string]any{"model": model, "messages": msgs,
		"max_completion_tokens": mod.MaxTokens, "max_tokens": mod.MaxTokens}, mod)
}

// promptOf is the text a probe of mod sends as its prompt: the chat's first
// user message, else the prompt.
func promptOf(mod *config.Module) string {
	if mod.Prober == config.ProberChat {
		if i := slices.IndexFunc(mod.Messages, func(m config.Message) bool { return m.Role == "user" }); i >= 0 {
			return mod.Messages[i].Content
		}
		if len(mod.Messages) > 0 {
			return mod.Messages[0].Content
		}
		return ""
	}
	return mod.Prompt
}

// withPrompt returns mod asking prompt instead of its own: a chat's last
// user message (one is added when none), every other kind's prompt.
func withPrompt(mod config.Module, prompt string) config.Module {
	if mod.Prober != config.ProberChat {
		mod.Prompt = prompt
		return mod
	}
	msgs := slices.Clone(mod.Messages)
	last := -1
	for i, m := range msgs {
		if m.Role == "user" {
			last = i
		}
	}
	if last < 0 {
		msgs = append(msgs, config.Message{Role: "user"})
		last = len(msgs) - 1
	}
	msgs[last].Content = prompt
	mod.Messages = msgs
	return mod
}

// eventDecoder reads the SSE events of one streamed answer.
type eventDecoder interface {
	// decode classifies one event's data.
	decode(data []byte) (streamEvent, error)
	// text appends the generated text of a content event to b.
	text(b *strings.Builder, data []byte)
	// capture adds the text and tool-call fragments of a content event to g.
	capture(g *generated, data []byte)
	// end names the event that completes a stream, for the error of one
	// that ended without it.
	end() string
}

// streamEvent is what one SSE event means to the measurement.
type streamEvent struct {
	// kind is EventContent (it carries generated text), EventRole,
	// EventEmpty, EventUsage, EventError (err says what the server
	// reported) or EventDone (the answer is complete); 0 for an event the
	// timeline does not list.
	kind EventKind
	// usage is set when the event reports token counts.
	usage                    bool
	promptTokens, completion int
	// predicted is llama.cpp's timings.predicted_n (0: none).
	predicted int
	// answer is set on an EventContent that carries answer text or a tool
	// call, not only reasoning (reasoning_content, reasoning, the Responses
	// API's reasoning_text).
	answer bool
	// reasoning is usage's reasoning tokens
	// (completion_tokens_details.reasoning_tokens, output_tokens_details).
	reasoning int
	// finishErr is vLLM's finish_reason "error".
	finishErr bool
	err       string
}

package simulator

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// streamSink writes vLLM's SSE events, flushing after each one and taking
// the trace timestamp right after the flush.
type streamSink struct {
	s      *Simulator
	w      http.ResponseWriter
	fl     http.Flusher
	g      *genRequest
	prefix []byte // `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
	quoted []byte // JSON string of the request id, for the trace
	buf    []byte
	event  int
}

func (s *Simulator) newStreamSink(w http.ResponseWriter, g *genRequest) *streamSink {
	fl, _ := w.(http.Flusher)
	object := "text_completion"
	if g.chat {
		object = "chat.completion.chunk"
	}
	p := []byte(`data: {"id":`)
	p = append(p, quoteJSON(g.id)...)
	p = append(p, `,"object":"`+object+`","created":`...)
	p = strconv.AppendInt(p, g.created, 10)
	p = append(p, `,"model":`...)
	p = append(p, quoteJSON(g.model)...)
	p = append(p, `,"choices":[`...)
	return &streamSink{s: s, w: w, fl: fl, g: g, prefix: p, quoted: quoteJSON(g.requestID), buf: make([]byte, 0, 512)}
}

func (o *streamSink) start() error {
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	o.w.WriteHeader(http.StatusOK)
	return o.flush()
}

func (o *streamSink) flush() error {
	if o.fl == nil {
		return nil
	}
	return http.NewResponseController(o.w).Flush()
}

// send writes one event, flushes it and records it in the trace.
func (o *streamSink) send(b []byte, kind string, token int) error {
	if _, err := o.w.Write(b); err != nil {
		return err
	}
	if o.fl != nil {
		o.fl.Flush()
	}
	if t := o.s.tracer; t != nil {
		t.record(o.quoted, o.event, kind, token, time.Now().UnixNano())
	}
	o.event++
	return nil
}

func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = appendInt(b, prompt)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, prompt+completion)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, completion)
	return append(b, '}')
}

func (o *streamSink) closeEvent(b []byte, completion int) []byte {
	b = append(b, ']')
	if o.g.continuousUsage {
		b = append(b, ',')
		b = appendUsage(b, o.g.promptTokens, completion)
	}
	return append(b, "}\n\n"...)
}

func (o *streamSink) first() error {
	b := append(o.buf[:0], o.prefix...)
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
	b = o.closeEvent(b, 0)
	o.buf = b
	return o.send(b, "role", 0)
}

func (o *streamSink) token(k int, finish string, text []byte) error {
	b := append(o.buf[:0], o.prefix...)
	if o.g.chat {
		if k <= o.s.cfg.ReasoningTokens {
			// vLLM's reasoning parsers put the thinking in its own field.
			b = append(b, `{"index":0,"delta":{"reasoning_content":`...)
		} else {
			b = append(b, `{"index":0,"delta":{"content":`...)
		}
		b = append(b, text...)
		b = append(b, `},"logprobs":null,"finish_reason":`...)
		if finish == "" {
			b = append(b, `null}`...)
		} else {
			b = append(b, `"`+finish+`","stop_reason":null}`...)
		}
	} else {
		b = append(b, `{"index":0,"text":`...)
		b = append(b, text...)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		if finish == "" {
			b = append(b, `null`...)
		} else {
			b = append(b, `"`+finish+`"`...)
		}
		b = append(b, `,"stop_reason":null}`...)
	}
	if finish != "" && o.g.llamaTimings {
		b = o.closeWithTimings(b, k)
	} else {
		b = o.closeEvent(b, k)
	}
	o.buf = b
	return o.send(b, "token", k)
}

// closeWithTimings ends llama-server's last chunk: usage and the timings
// object (tools/server, server_task_result_cmpl_final) after the choices.
func (o *streamSink) closeWithTimings(b []byte, completion int) []byte {
	b = append(b, "],"...)
	b = appendUsage(b, o.g.promptTokens, completion)
	elapsed := time.Since(o.g.arrival).Seconds() * 1e3
	b = append(b, `,"timings":{"prompt_n":`...)
	b = appendInt(b, o.g.promptTokens)
	b = append(b, `,"predicted_n":`...)
	b = appendInt(b, completion)
	b = append(b, `,"predicted_ms":`...)
	b = strconv.AppendFloat(b, elapsed, 'f', 3, 64)
	return append(b, "}}\n\n"...)
}

// toolCall sends token k of a tool call as vLLM streams it: the first delta
// carries the call's index, id, type and function name with the first
// arguments fragment; the next ones the index and further fragments
// (serving_chat.py, chat_completion_stream_generator).
func (o *streamSink) toolCall(k int, finish string, sc *script) error {
	b := append(o.buf[:0], o.prefix...)
	b = append(b, `{"index":0,"delta":{"tool_calls":[{`...)
	if k == 1 {
		b = append(b, `"id":`...)
		b = append(b, quoteJSON(sc.callID)...)
		b = append(b, `,"type":"function","index":0,"function":{"name":`...)
		b = append(b, quoteJSON(sc.tool.Function.Name)...)
		b = append(b, `,"arguments":`...)
	} else {
		b = append(b, `"index":0,"function":{"arguments":`...)
	}
	b = append(b, sc.pieces[k-1]...)
	b = append(b, `}}]},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, `null}`...)
	} else {
		b = append(b, `"`+finish+`","stop_reason":null}`...)
	}
	b = o.closeEvent(b, k)
	o.buf = b
	return o.send(b, "token", k)
}

func (o *streamSink) malformed(k int) error {
	b := append(o.buf[:0], o.prefix...)
	b = append(b, `{"index":0,"text":" trunc`...) // cut mid-string: not valid JSON
	b = append(b, "\n\n"...)
	o.buf = b
	return o.send(b, "malformed", k)
}

func (o *streamSink) errorEvent(msg string) error {
	b := append(o.buf[:0], "data: "...)
	b = append(b, errorBody(o.s.errorShape(), http.StatusInternalServerError, msg, nil)...)
	b = append(b, "\n\n"...)
	if err := o.send(b, "error", 0); err != nil {
		return err
	}
	return o.done()
}

func (o *streamSink) end(prompt, completion int) error {
	if o.g.includeUsage {
		b := append(o.buf[:0], o.prefix...)
		b = append(b, "],"...)
		b = appendUsage(b, prompt, completion)
		if r := min(o.s.cfg.ReasoningTokens, completion); o.g.chat && r > 0 {
			// OpenAI's usage.completion_tokens_details, as vLLM fills it.
			b = append(b[:len(b)-1], `,"completion_tokens_details":{"reasoning_tokens":`...)
			b = appendInt(b, r)
			b = append(b, "}}"...)
		}
		b = append(b, "}\n\n"...)
		o.buf = b
		if err := o.send(b, "usage", completion); err != nil {
			return err
		}
	}
	return o.done()
}

// done makes the trace durable, then sends the terminating event.
func (o *streamSink) done() error {
	if t := o.s.tracer; t != nil {
		t.flush()
	}
	if _, err := o.w.Write([]byte("data: [DONE]\n\n")); err != nil {
		return err
	}
	if o.fl != nil {
		o.fl.Flush()
	}
	return nil
}

// jsonSink collects the text for a non-streaming response.
type jsonSink struct {
	s    *Simulator
	w    http.ResponseWriter
	g    *genRequest
	text []byte
	fin  string
	bad  bool
	call *script // the tool call whose arguments text holds
}

func (j *jsonSink) start() error { return nil }
func (j *jsonSink) first() error { return nil }

func (j *jsonSink) token(k int, finish string, quoted []byte) error {
	var t string
	_ = json.Unmarshal(quoted, &t)
	j.text = append(j.text, t...)
	j.fin = finish
	return nil
}

func (j *jsonSink) toolCall(k int, finish string, sc *script) error {
	j.call = sc
	return j.token(k, finish, sc.pieces[k-1])
}

func (j *jsonSink) malformed(int) error { j.bad = true; return nil }

func (j *jsonSink) errorEvent(msg string) error {
	j.s.writeError(j.w, http.StatusInternalServerError, msg, nil)
	return nil
}

type usageInfo struct {
	PromptTokens        int  `json:"prompt_tokens"`
	TotalTokens         int  `json:"total_tokens"`
	CompletionTokens    int  `json:"completion_tokens"`
	PromptTokensDetails *any `json:"prompt_tokens_details"`
}

type completionChoice struct {
	Index          int     `json:"index"`
	Text           string  `json:"text"`
	Logprobs       *any    `json:"logprobs"`
	FinishReason   string  `json:"finish_reason"`
	StopReason     *string `json:"stop_reason"`
	PromptLogprobs *any    `json:"prompt_logprobs"`
}

type chatMessageOut struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	ToolCalls []any  `json:"tool_calls"`
}

// message is the chat answer: text, or one tool call.
func (j *jsonSink) message() chatMessageOut {
	if j.call == nil {
		return chatMessageOut{Role: "assistant", Content: string(j.text), ToolCalls: []any{}}
	}
	call := map[string]any{"id": j.call.callID, "type": "function",
		"function": map[string]string{"name": j.call.tool.Function.Name, "arguments": string(j.text)}}
	return chatMessageOut{Role: "assistant", ToolCalls: []any{call}}
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *any           `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
	StopReason   *string        `json:"stop_reason"`
}

func (j *jsonSink) end(prompt, completion int) error {
	usage := usageInfo{PromptTokens: prompt, TotalTokens: prompt + completion, CompletionTokens: completion}
	if j.bad {
		// malformed_chunk on a non-streaming request: a truncated body.
		j.w.Header().Set("Content-Type", "application/json")
		j.w.WriteHeader(http.StatusOK)
		_, err := j.w.Write([]byte(`{"id":"` + j.g.id + `","object":"text_completion","choices":[{"index":0,"text":" trunc`))
		return err
	}
	var body any
	if j.g.chat {
		body = struct {
			ID             string            `json:"id"`
			Object         string            `json:"object"`
			Created        int64             `json:"created"`
			Model          string            `json:"model"`
			Choices        []chatChoice      `json:"choices"`
			Usage          usageInfo         `json:"usage"`
			PromptLogprobs *any              `json:"prompt_logprobs"`
			KVTransfer     *kvTransferParams `json:"kv_transfer_params,omitempty"`
		}{j.g.id, "chat.completion", j.g.created, j.g.model,
			[]chatChoice{{Message: j.message(), FinishReason: j.fin}},
			usage, nil, j.g.kvProduced}
	} else {
		body = struct {
			ID         string             `json:"id"`
			Object     string             `json:"object"`
			Created    int64              `json:"created"`
			Model      string             `json:"model"`
			Choices    []completionChoice `json:"choices"`
			Usage      usageInfo          `json:"usage"`
			KVTransfer *kvTransferParams  `json:"kv_transfer_params,omitempty"`
		}{j.g.id, "text_completion", j.g.created, j.g.model,
			[]completionChoice{{Text: string(j.text), FinishReason: j.fin}}, usage, j.g.kvProduced}
	}
	writeJSON(j.w, http.StatusOK, body)
	return nil
}

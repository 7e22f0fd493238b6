package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

type streamOptions struct {
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats *bool `json:"continuous_usage_stats"`
}

// samplingFields are the request fields that completions and chat share.
type samplingFields struct {
	Model         string         `json:"model"`
	MaxTokens     *int           `json:"max_tokens"`
	MinTokens     int            `json:"min_tokens"`
	IgnoreEOS     bool           `json:"ignore_eos"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	N             *int           `json:"n"`

	ResponseFormat *responseFormat `json:"response_format"`
	GuidedJSON     json.RawMessage `json:"guided_json"`

	KVTransferParams *kvTransferParams `json:"kv_transfer_params"`
}

type completionRequest struct {
	samplingFields
	Prompt json.RawMessage `json:"prompt"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type chatRequest struct {
	samplingFields
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Tools               []toolSpec      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
}

// genRequest is a validated completion or chat request.
type genRequest struct {
	model           string // answered in "model": the base model or the adapter asked for
	chat            bool
	responses       bool   // /v1/responses (responses.go)
	seq             uint64 // arrival order, seeds jitter
	requestID       string // X-Request-Id when given, else generated
	id              string // "cmpl-…" or "chatcmpl-…"
	created         int64
	arrival         time.Time
	promptTokens    int
	promptHash      uint64
	maxTokens       int
	target          int    // tokens that will be generated
	finish          string // finish_reason once target is reached
	stream          bool
	includeUsage    bool
	continuousUsage bool
	llamaTimings    bool              // llama-server's usage and timings in the last chunk
	out             outputSpec        // what the output must be (answers.go)
	kvTransfer      *kvTransferParams // the request's kv_transfer_params (kvtransfer.go)
	kvProduced      *kvTransferParams // a prefill's answer: where its KV blocks are
	script          *script           // scripted output, nil for the word stream
}

// apiError is a request rejected before generation, rendered as vLLM's
// ErrorResponse.
type apiError struct {
	status int
	msg    string
	param  *string
}

func (e *apiError) Error() string { return e.msg }

const maxBodyBytes = 32 << 20

// generation serves one generation endpoint: it decodes the JSON body into a
// T, lets build turn it into a generation request, and streams or answers it.
// Any error of decode or build is the endpoint's OpenAI-style error.
func generation[T any](s *Simulator, build func(req *T, r *http.Request, arrival time.Time) (*genRequest, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		arrival := time.Now()
		var req T
		var g *genRequest
		err := decodeBody(r, &req)
		if err == nil {
			g, err = build(&req, r, arrival)
		}
		if err != nil {
			s.writeAPIError(w, err)
			return
		}
		s.serveGeneration(w, r, g)
	}
}

func (s *Simulator) completionGen(req *completionRequest, r *http.Request, arrival time.Time) (*genRequest, error) {
	g, err := s.newGenRequest(r, arrival, false, req.Model, req.N, req.Stream, req.StreamOptions)
	if err != nil {
		return nil, err
	}
	text, tokens, err := parsePrompt(req.Prompt)
	if err != nil {
		return nil, err
	}
	if err := s.finishGenRequest(g, text, tokens, req.MaxTokens, req.MinTokens, req.IgnoreEOS); err != nil {
		return nil, err
	}
	g.out.prompt = text
	g.kvTransfer = req.KVTransferParams
	return g, g.out.parse(req.ResponseFormat, req.GuidedJSON, nil, nil)
}

func (s *Simulator) chatGen(req *chatRequest, r *http.Request, arrival time.Time) (*genRequest, error) {
	g, err := s.newGenRequest(r, arrival, true, req.Model, req.N, req.Stream, req.StreamOptions)
	if err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, &apiError{http.StatusBadRequest, "messages must contain at least one message", strPtr("messages")}
	}
	var sb strings.Builder
	for _, m := range req.Messages {
		c, err := messageText(m.Content)
		if err != nil {
			return nil, err
		}
		sb.WriteString(c)
		if m.Role == "user" {
			g.out.prompt = c
		}
	}
	if err := g.out.parse(req.ResponseFormat, req.GuidedJSON, req.Tools, req.ToolChoice); err != nil {
		return nil, err
	}
	g.kvTransfer = req.KVTransferParams
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	return g, s.finishGenRequest(g, sb.String(), 0, maxTokens, req.MinTokens, req.IgnoreEOS)
}

func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return &apiError{http.StatusBadRequest, fmt.Sprintf("reading request body: %v", err), nil}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &apiError{http.StatusBadRequest, fmt.Sprintf("invalid JSON request body: %v", err), nil}
	}
	return nil
}

func (s *Simulator) writeAPIError(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		s.writeError(w, ae.status, ae.msg, ae.param)
		return
	}
	s.writeError(w, http.StatusInternalServerError, err.Error(), nil)
}

func (s *Simulator) newGenRequest(r *http.Request, arrival time.Time, chat bool, model string, n *int, stream bool, so *streamOptions) (*genRequest, error) {
	served, ok := s.servedModel(model)
	if !ok || s.adapterGone(served) {
		return nil, &apiError{http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", model), strPtr("model")}
	}
	if n != nil && *n != 1 {
		return nil, &apiError{http.StatusBadRequest, fmt.Sprintf("vllm_sim supports only n=1, got n=%d", *n), strPtr("n")}
	}
	seq := s.reqSeq.Add(1)
	rid := r.Header.Get("X-Request-Id")
	if rid == "" {
		rid = fmt.Sprintf("%016x%08x", uint64(s.start.UnixNano()), seq)
	}
	g := &genRequest{model: served, chat: chat, seq: seq, requestID: rid, created: arrival.Unix(), arrival: arrival, stream: stream}
	if chat {
		g.id = "chatcmpl-" + rid
	} else {
		g.id = "cmpl-" + rid
	}
	// stream_options.include_usage defaults to true once stream_options is sent.
	if stream && so != nil {
		g.includeUsage = so.IncludeUsage == nil || *so.IncludeUsage
		g.continuousUsage = g.includeUsage && so.ContinuousUsageStats != nil && *so.ContinuousUsageStats
	}
	switch d := s.dialect(); {
	case d.noUsage:
		g.includeUsage, g.continuousUsage = false, false
	case d.timings && stream:
		// llama-server puts usage and timings into the last chunk, never a
		// usage-only chunk.
		g.includeUsage, g.continuousUsage, g.llamaTimings = false, false, true
	}
	return g, nil
}

// engineContextCheck is the context-length check of engines whose server
// words it differently from vLLM's: SGLang's tokenizer manager
// (python/sglang/srt/managers/tokenizer_manager.py, _validate_one_request)
// and llama-server's exceed_context_size_error (tools/server), which
// refuses a prompt that does not fit and stops generating at the end of
// the context. Nil for the others, which vLLM's checks then apply to.
func (s *Simulator) engineContextCheck(P, L int, maxTokens *int) error {
	switch s.cfg.Engine {
	case EngineSGLang:
		if P >= L {
			return &apiError{http.StatusBadRequest, fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", P, L), nil}
		}
		if maxTokens != nil && *maxTokens >= 1 && P+*maxTokens >= L {
			M := *maxTokens
			return &apiError{http.StatusBadRequest, fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. "+
				"You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. "+
				"Please reduce the number of tokens in the input messages or the completion to fit within the limit.", L, P+M, P, M), nil}
		}
	case EngineLlamaCpp:
		if P >= L {
			return &apiError{http.StatusBadRequest, fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", P, L), nil}
		}
	}
	return nil
}

// finishGenRequest counts the prompt, applies vLLM's context-length checks
// and decides how many tokens will be generated.
func (s *Simulator) finishGenRequest(g *genRequest, text string, tokenIDs int, maxTokens *int, minTokens int, ignoreEOS bool) error {
	if tokenIDs > 0 {
		g.promptTokens = tokenIDs
	} else {
		g.promptTokens = countTextTokens(len(text))
	}
	g.promptHash = hashString(text) ^ uint64(tokenIDs)
	L, P := s.cfg.MaxModelLen, g.promptTokens
	if err := s.engineContextCheck(P, L, maxTokens); err != nil {
		return err
	}
	legacy := s.cfg.MetricsNames == MetricsLegacy
	if P >= L {
		if legacy {
			return &apiError{http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", L, P, P, 0), nil}
		}
		return &apiError{http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", L, P), strPtr("input_tokens")}
	}
	M := L - P
	if maxTokens != nil {
		M = *maxTokens
		if M < 1 {
			return &apiError{http.StatusBadRequest, fmt.Sprintf("max_tokens must be at least 1, got %d.", M), strPtr("max_tokens")}
		}
		if P+M > L && s.cfg.Engine == EngineLlamaCpp {
			// llama-server stops generating where the context ends.
			M = L - P
		}
		if P+M > L {
			if legacy {
				return &apiError{http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", L, P+M, P, M), nil}
			}
			return &apiError{http.StatusBadRequest, fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).", M, L, P, M, L, P), nil}
		}
	}
	if minTokens < 0 || minTokens > M {
		return &apiError{http.StatusBadRequest, fmt.Sprintf("min_tokens must be in [0, max_tokens=%d], got %d.", M, minTokens), strPtr("min_tokens")}
	}
	g.maxTokens = M
	g.target, g.finish = M, "length"
	if !ignoreEOS {
		if n := max(naturalLength(g.promptHash), minTokens); n < M {
			g.target, g.finish = n, "stop"
		}
	}
	return nil
}

// parsePrompt accepts a string, a one-element list of strings, a list of
// token ids, or a one-element list of token-id lists.
func parsePrompt(raw json.RawMessage) (text string, tokenIDs int, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", 0, &apiError{http.StatusBadRequest, "prompt is required", strPtr("prompt")}
	}
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, 0, nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil && len(ids) > 0 {
		return "", len(ids), nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil && len(texts) == 1 {
		return texts[0], 0, nil
	}
	var idLists [][]int
	if err := json.Unmarshal(raw, &idLists); err == nil && len(idLists) == 1 && len(idLists[0]) > 0 {
		return "", len(idLists[0]), nil
	}
	return "", 0, &apiError{http.StatusBadRequest, "prompt must be a string, a list of token ids, or a one-element list of either (vllm_sim serves one prompt per request)", strPtr("prompt")}
}

// messageText returns the text of a chat message content: a string or a
// list of {"type": "text", "text": ...} parts.
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", &apiError{http.StatusBadRequest, "message content must be a string or a list of content parts", strPtr("messages")}
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

func quoteJSON(s string) []byte { return marshalNoEscape(s) }

package simulator

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// handleEmbeddings serves vLLM's /v1/embeddings for one input: a
// deterministic unit vector of EmbeddingDimension values (or the requested
// dimensions, matryoshka-style) derived from the input, after the TTFT and
// prefill delay. It does not go through the generation engines.
func (s *Simulator) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	var req embeddingRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeAPIError(w, err)
		return
	}
	model, ok := s.servedModel(req.Model)
	if !ok || s.adapterGone(model) {
		s.writeAPIError(w, &apiError{http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model), strPtr("model")})
		return
	}
	text, ids, err := parsePrompt(req.Input)
	if err != nil {
		s.writeAPIError(w, &apiError{http.StatusBadRequest, "input must be a string, a list of token ids, or a one-element list of either", strPtr("input")})
		return
	}
	switch req.EncodingFormat {
	case "", "float":
	default:
		s.writeAPIError(w, &apiError{http.StatusBadRequest, fmt.Sprintf("vllm_sim supports encoding_format float only, got %q", req.EncodingFormat), strPtr("encoding_format")})
		return
	}
	dim := s.cfg.EmbeddingDimension
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > dim {
			s.writeAPIError(w, &apiError{http.StatusBadRequest, fmt.Sprintf("dimensions must be in [1, %d], got %d", dim, *req.Dimensions), strPtr("dimensions")})
			return
		}
		dim = *req.Dimensions
	}
	k := s.currentKnobs()
	if k.Fault == FaultEngineDead {
		s.writeError(w, http.StatusInternalServerError, "EngineCore encountered an issue. See stack trace (above) for the root cause.", nil)
		return
	}
	fault := ""
	if (k.Fault == FaultHTTPStatus || k.Fault == FaultZeroEmbedding) && s.drawFault(k) {
		fault = k.Fault
	}
	if fault == FaultHTTPStatus {
		s.writeError(w, k.FaultStatus, "Simulated fault: HTTP "+strconv.Itoa(k.FaultStatus), nil)
		return
	}
	tokens := ids
	if tokens == 0 {
		tokens = countTextTokens(len(text))
	}
	if tokens > s.cfg.MaxModelLen {
		s.writeAPIError(w, &apiError{http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", s.cfg.MaxModelLen, tokens), strPtr("input_tokens")})
		return
	}
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	t := time.NewTimer(time.Until(arrival.Add(k.TTFT + k.PrefillPerToken*time.Duration(tokens))))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	case <-s.done:
		return
	}
	vec := make([]float64, dim)
	if fault != FaultZeroEmbedding {
		seed := hashString(text) ^ uint64(ids)
		var sum float64
		for i := range vec {
			seed = seed*6364136223846793005 + 1442695040888963407 // PCG's LCG step
			vec[i] = float64(int64(seed>>11)) / (1 << 52)
			sum += vec[i] * vec[i]
		}
		norm := math.Sqrt(sum)
		for i := range vec {
			vec[i] /= norm // vLLM normalises embeddings by default
		}
	}
	type datum struct {
		Index     int       `json:"index"`
		Object    string    `json:"object"`
		Embedding []float64 `json:"embedding"`
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string    `json:"id"`
		Object  string    `json:"object"`
		Created int64     `json:"created"`
		Model   string    `json:"model"`
		Data    []datum   `json:"data"`
		Usage   usageInfo `json:"usage"`
	}{"embd-" + strconv.FormatUint(s.reqSeq.Add(1), 16), "list", arrival.Unix(), model,
		[]datum{{0, "embedding", vec}}, usageInfo{PromptTokens: tokens, TotalTokens: tokens}})
}

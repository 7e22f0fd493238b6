package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/answer"
)

// maxEmbeddingBody bounds an embeddings response: 64k float dimensions in
// JSON text fit with room to spare.
const maxEmbeddingBody = 8 << 20

// embeddingsBody builds the /v1/embeddings body of a module: its prompt (with
// the nonce in front) as the one input, floats as the encoding.
func embeddingsBody(mod *config.Module, model, prompt string) map[string]any {
	body := map[string]any{"model": model, "input": prompt, "encoding_format": "float"}
	for k, v := range mod.ExtraBody {
		body[k] = answer.JSONable(v)
	}
	return body
}

// embed sends one /v1/embeddings request (vLLM's pooling API) and checks its
// answer: one vector, of mod.ExpectedDimension values when that is set,
// finite and with a non-zero norm. E2E is t0 → the whole response read; the
// probe has no tokens to time, so TTFT, ITL and TPOT stay 0.
func embed(ctx context.Context, client *http.Client, req StreamRequest, mod *config.Module) Result {
	wantDim := mod.ExpectedDimension
	var res Result
	if client == nil {
		client = http.DefaultClient
	}
	body, err := json.Marshal(req.Body)
	if err != nil {
		res.Start = time.Now()
		res.Reason, res.Err = ReasonMalformed, sanitize(req.Redact, "encoding request body: "+err.Error())
		return res
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(req.BaseURL, "/")+"/v1/embeddings", bytes.NewReader(body))
	if err != nil {
		res.Start = time.Now()
		res.Reason, res.Err = ReasonConnection, sanitize(req.Redact, "building request: "+redactErr(err).Error())
		return res
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	hreq.Header.Set("Content-Type", "application/json")
	res.RequestHeader = redactHeader(hreq.Header)
	replayOnStaleConn(hreq)
	if req.Gate != nil {
		req.Gate()
	}
	t0 := time.Now()
	res.Start = t0
	event := func(k EventKind, n int) {
		res.Events = append(res.Events, Event{Offset: time.Since(t0), Kind: k, Bytes: int32(min(n, math.MaxInt32))})
	}
	fail := func(reason Reason, msg string) Result {
		res.Reason, res.Err = reason, sanitize(req.Redact, msg)
		event(EventFailed, 0)
		return res
	}
	resp, err := client.Do(hreq)
	if err != nil {
		reason, msg := classifyTransportError(ctx, err)
		return fail(reason, msg)
	}
	defer resp.Body.Close()
	event(EventHeaders, 0)
	res.StatusCode = resp.StatusCode
	res.ResponseHeader = redactHeader(resp.Header)
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxEmbeddingBody+1))
	if err != nil {
		reason, msg := classifyTransportError(ctx, err)
		return fail(reason, "reading embeddings: "+msg)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		reason, msg := classifyHTTPError(resp.StatusCode, resp.Header, b, req.Gateway)
		return fail(reason, msg)
	}
	if len(b) > maxEmbeddingBody {
		return fail(ReasonMalformed, "embeddings response larger than 8 MiB")
	}
	res.E2E = time.Since(t0)
	event(EventDone, len(b))
	var out struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fail(ReasonMalformed, "invalid embeddings JSON: "+err.Error())
	}
	if out.Usage != nil {
		res.PromptTokens = out.Usage.PromptTokens
	}
	if len(out.Data) != 1 {
		return fail(ReasonInvalidEmbedding, "want one embedding in data, got "+strconv.Itoa(len(out.Data)))
	}
	vec := out.Data[0].Embedding
	res.Dimension = len(vec)
	if len(vec) == 0 {
		return fail(ReasonInvalidEmbedding, "the embedding is empty")
	}
	if wantDim > 0 && len(vec) != wantDim {
		return fail(ReasonInvalidEmbedding, "embedding dimension "+strconv.Itoa(len(vec))+", want "+strconv.Itoa(wantDim))
	}
	var sum float64
	for _, x := range vec {
		sum += x * x
	}
	switch {
	case math.IsNaN(sum) || math.IsInf(sum, 0):
		return fail(ReasonInvalidEmbedding, "the embedding has non-finite values")
	case sum == 0:
		return fail(ReasonInvalidEmbedding, "the embedding has norm 0")
	}
	res.Success = true
	return res
}

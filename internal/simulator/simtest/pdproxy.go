package simtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// PD is a prefill/decode proxy in front of two simulators started with a
// NixlConnector (simulator.KVTransferConfig), for tests of disaggregated
// serving. It routes as llm-d does (llm-d/llm-d-router docs/disaggregation.md):
// a request whose prompt is longer than Threshold tokens is disaggregated:
// sent first to the prefill instance with kv_transfer_params
// {"do_remote_decode": true}, max_tokens 1 and stream false, then with the
// prefill's kv_transfer_params to the decode instance, whose answer is
// streamed back, as vLLM's toy_proxy_server.py does
// (tests/v1/kv_connector/nixl_integration in vllm-project/vllm); a shorter
// one runs on the decode instance alone. Its /metrics counts the decisions
// as llm-d's router does, in llm_d_epp_disagg_decision_total{decision_type}
// ("decode-only", "prefill-decode"), and each answer names the decode
// instance that served it in X-Gateway-Destination-Endpoint (host:port), as
// the Endpoint Picker names its pick.
type PD struct {
	URL       string
	Threshold int

	prefill, decode string
	decodeOnly      atomic.Int64
	disaggregated   atomic.Int64
}

// StartPD starts a PD proxy on 127.0.0.1 in front of the prefill and decode
// base URLs; it is closed when the test ends.
func StartPD(t testing.TB, prefillURL, decodeURL string, threshold int) *PD {
	t.Helper()
	p := &PD{Threshold: threshold, prefill: prefillURL, decode: decodeURL}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", p.serve)
	mux.HandleFunc("POST /v1/chat/completions", p.serve)
	mux.HandleFunc("GET /metrics", p.metrics)
	mux.HandleFunc("/", p.forward) // /v1/models, /health, ...: the decode instance's
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	p.URL = ts.URL
	return p
}

// Decisions returns how many requests ran decode-only and disaggregated.
func (p *PD) Decisions() (decodeOnly, disaggregated int64) {
	return p.decodeOnly.Load(), p.disaggregated.Load()
}

func (p *PD) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	const name = "llm_d_epp_disagg_decision_total"
	fmt.Fprintf(w, "# HELP %s Total number of disaggregation routing decisions made\n# TYPE %s counter\n", name, name)
	for _, d := range []struct {
		kind string
		n    int64
	}{{"decode-only", p.decodeOnly.Load()}, {"prefill-decode", p.disaggregated.Load()}} {
		fmt.Fprintf(w, "%s{decision_type=%q,model_name=\"sim-model\",plugin_name=\"disagg-profile-handler\",plugin_type=\"disagg-profile-handler\"} %d\n", name, d.kind, d.n)
	}
}

// forward passes any other request to the decode instance.
func (p *PD) forward(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.decode+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	p.relay(w, req)
}

// DestinationHeader names the decode instance that served a request.
const DestinationHeader = "X-Gateway-Destination-Endpoint"

func (p *PD) relay(w http.ResponseWriter, req *http.Request) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	if req.URL.Path == "/v1/completions" || req.URL.Path == "/v1/chat/completions" {
		w.Header().Set(DestinationHeader, req.URL.Host)
	}
	w.WriteHeader(resp.StatusCode)
	f, _ := w.(http.Flusher)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *PD) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	decodeBody := raw
	if simulator.TextTokens(promptText(body)) > p.Threshold {
		p.disaggregated.Add(1)
		kv, status, err := p.prefillFor(r, body)
		if err != nil {
			http.Error(w, "prefill: "+err.Error(), status)
			return
		}
		body["kv_transfer_params"] = kv
		if decodeBody, err = json.Marshal(body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	} else {
		p.decodeOnly.Add(1)
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.decode+r.URL.Path, bytes.NewReader(decodeBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	req.ContentLength = int64(len(decodeBody))
	p.relay(w, req)
}

// prefillFor sends body to the prefill instance as a prefill for a remote
// decode and returns the kv_transfer_params of its answer.
func (p *PD) prefillFor(r *http.Request, body map[string]any) (any, int, error) {
	pre := make(map[string]any, len(body)+1)
	for k, v := range body {
		pre[k] = v
	}
	pre["kv_transfer_params"] = map[string]any{"do_remote_decode": true, "do_remote_prefill": false,
		"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil}
	pre["stream"] = false
	pre["max_tokens"] = 1
	if _, ok := pre["max_completion_tokens"]; ok {
		pre["max_completion_tokens"] = 1
	}
	delete(pre, "stream_options")
	delete(pre, "min_tokens")
	b, err := json.Marshal(pre)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.prefill+r.URL.Path, bytes.NewReader(b))
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	req.Header = r.Header.Clone()
	req.ContentLength = int64(len(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	defer resp.Body.Close()
	var answer struct {
		KVTransferParams any `json:"kv_transfer_params"`
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, http.StatusBadGateway, err
	}
	if answer.KVTransferParams == nil {
		return nil, http.StatusBadGateway, fmt.Errorf("the prefill instance answered without kv_transfer_params: is its --kv-transfer-config set?")
	}
	return answer.KVTransferParams, http.StatusOK, nil
}

// promptText is a completion's prompt or a chat's message contents.
func promptText(body map[string]any) string {
	if s, ok := body["prompt"].(string); ok {
		return s
	}
	var sb strings.Builder
	if msgs, ok := body["messages"].([]any); ok {
		for _, m := range msgs {
			if mm, ok := m.(map[string]any); ok {
				if c, ok := mm["content"].(string); ok {
					sb.WriteString(c)
				}
			}
		}
	}
	return sb.String()
}

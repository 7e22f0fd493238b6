package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
)

// responses events in vLLM's shapes (serving_responses.py), each "event:"
// then "data:".
const (
	respCreated   = "event: response.created\ndata: {\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null},\"sequence_number\":0,\"type\":\"response.created\"}\n\n"
	respReasoning = "event: response.reasoning_text.delta\ndata: {\"content_index\":0,\"delta\":\"hmm\",\"item_id\":\"m\",\"output_index\":0,\"sequence_number\":1,\"type\":\"response.reasoning_text.delta\"}\n\n"
	respDelta     = "event: response.output_text.delta\ndata: {\"content_index\":0,\"delta\":\" Paris\",\"item_id\":\"m\",\"logprobs\":[],\"output_index\":0,\"sequence_number\":2,\"type\":\"response.output_text.delta\"}\n\n"
	respDone      = "event: response.output_text.done\ndata: {\"content_index\":0,\"item_id\":\"m\",\"output_index\":0,\"sequence_number\":3,\"text\":\" Paris\",\"type\":\"response.output_text.done\"}\n\n"
	respCompleted = "event: response.completed\ndata: {\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":7,\"output_tokens\":3,\"total_tokens\":10}},\"sequence_number\":4,\"type\":\"response.completed\"}\n\n"
)

// TestResponsesStream: a responses probe is measured as chat is (TTFT at the
// first delta carrying text, reasoning included; tokens from the usage of
// response.completed) and fails for the reasons the other kinds fail for.
func TestResponsesStream(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       Reason
	}{
		{name: "success", body: respCreated + respReasoning + respDelta + respDelta + respDone + respCompleted},
		{name: "empty_output", body: respCreated + respDone + respCompleted, want: ReasonEmptyOutput},
		{name: "truncated", body: respCreated + respDelta, want: ReasonTruncated},
		{name: "error event", body: respCreated + respDelta + "event: error\ndata: {\"code\":\"InternalServerError\",\"message\":\"engine failed\",\"param\":null,\"sequence_number\":3,\"type\":\"error\"}\n\n", want: ReasonStreamError},
		{name: "nested error", body: respCreated + "data: {\"error\":{\"message\":\"boom\",\"type\":\"InternalServerError\",\"code\":500}}\n\n", want: ReasonStreamError},
		{name: "response.failed", body: respCreated + "event: response.failed\ndata: {\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"oops\"}},\"type\":\"response.failed\"}\n\n", want: ReasonStreamError},
		{name: "no type", body: respCreated + "data: {\"delta\":\"x\"}\n\n", want: ReasonMalformed},
		{name: "bad JSON", body: respCreated + "data: {\"delta\":\" trunc\n\n", want: ReasonMalformed},
		{name: "not SSE", body: "{}", status: -1, want: ReasonMalformed},
		{name: "rate limited", body: `{"error":{"message":"slow down","type":"RateLimitError","code":429}}`, status: 429, want: ReasonRateLimited},
		{name: "unknown model", body: `{"error":{"message":"The model x does not exist.","type":"NotFoundError","code":404}}`, status: 404, want: ReasonModelNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/responses" {
					http.NotFound(w, r)
					return
				}
				switch tc.status {
				case 0:
					sseHandler(tc.body)(w, r)
				case -1:
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(tc.body))
				default:
					errorHandler(tc.status, tc.body)(w, r)
				}
			}))
			defer ts.Close()
			res := runResponses(t, ts.URL, ts.Client())
			if tc.want == "" {
				if !res.Success || res.OutputTokens != 3 || !res.OutputTokensFromUsage || res.PromptTokens != 7 || res.TTFT <= 0 ||
					len(res.ITLs) != 2 || res.Text != "hmm Paris Paris" || res.Request != "POST /v1/responses" {
					t.Errorf("success %v (%s %s), tokens %d from usage %v, prompt %d, TTFT %v, %d ITLs, text %q, request %q",
						res.Success, res.Reason, res.Err, res.OutputTokens, res.OutputTokensFromUsage, res.PromptTokens, res.TTFT, len(res.ITLs), res.Text, res.Request)
				}
				return
			}
			if res.Success || res.Reason != tc.want {
				t.Errorf("success %v reason %q (%s), want %q", res.Success, res.Reason, res.Err, tc.want)
			}
		})
	}
	t.Run("connection", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if res := runResponses(t, "http://"+addr, http.DefaultClient); res.Reason != ReasonConnection {
			t.Errorf("reason %q (%s), want connection", res.Reason, res.Err)
		}
	})
}

func runResponses(t *testing.T, url string, client *http.Client) Result {
	t.Helper()
	spec, err := Compile("r", config.Module{Prober: config.ProberResponses, Prompt: "capital of France?", MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return spec.Run(ctx, client, Call{BaseURL: url, Model: "m", StallTimeout: time.Second})
}

package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStreamShapes(t *testing.T) {
	_, ts := startSim(t, nil)
	const maxTokens = 5
	for _, tc := range []struct {
		name       string
		path       string
		chat       bool
		opts       string
		usage      bool // final usage chunk expected
		continuous bool
	}{
		{"completions", "/v1/completions", false, ``, false, false},
		{"completions usage", "/v1/completions", false, `,"stream_options":{"include_usage":true}`, true, false},
		{"completions default include_usage", "/v1/completions", false, `,"stream_options":{}`, true, false},
		{"completions usage off", "/v1/completions", false, `,"stream_options":{"include_usage":false,"continuous_usage_stats":true}`, false, false},
		{"completions continuous", "/v1/completions", false, `,"stream_options":{"include_usage":true,"continuous_usage_stats":true}`, true, true},
		{"chat", "/v1/chat/completions", true, ``, false, false},
		{"chat usage", "/v1/chat/completions", true, `,"stream_options":{"include_usage":true}`, true, false},
		{"chat continuous", "/v1/chat/completions", true, `,"stream_options":{"include_usage":true,"continuous_usage_stats":true}`, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prompt := `"prompt":"Hello, simulator! 12345"` // 24 bytes -> 6 tokens
			if tc.chat {
				prompt = `"messages":[{"role":"system","content":"Hello, "},{"role":"user","content":"simulator! 12345"}]`
			}
			body := fmt.Sprintf(`{"model":"m",%s,"max_tokens":%d,"ignore_eos":true,"stream":true%s}`, prompt, maxTokens, tc.opts)
			resp := post(t, ts.URL+tc.path, body, "X-Request-Id", "req-1")
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := resp.Header.Get("X-Request-Id"); got != "req-1" {
				t.Errorf("X-Request-Id = %q, want req-1", got)
			}
			res := readSSE(t, resp.Body)
			if !res.done {
				t.Fatal("stream did not end with [DONE]")
			}
			wantEvents := maxTokens
			if tc.chat {
				wantEvents++ // role event
			}
			if tc.usage {
				wantEvents++
			}
			if len(res.events) != wantEvents {
				t.Fatalf("got %d events, want %d: %v", len(res.events), wantEvents, res.events)
			}
			wantObject, wantID := "text_completion", "cmpl-req-1"
			if tc.chat {
				wantObject, wantID = "chat.completion.chunk", "chatcmpl-req-1"
			}
			tokens := 0
			for i, ev := range res.events {
				c := decodeChunk(t, ev)
				if c.Object != wantObject || c.ID != wantID || c.Model != "m" || c.Created == 0 {
					t.Errorf("event %d: object=%q id=%q model=%q created=%d", i, c.Object, c.ID, c.Model, c.Created)
				}
				last := i == len(res.events)-1
				if tc.usage && last {
					if len(c.Choices) != 0 || !strings.Contains(ev, `"choices":[]`) {
						t.Errorf("usage event must have empty choices: %s", ev)
					}
					if c.Usage == nil || c.Usage.PromptTokens != 6 || c.Usage.CompletionTokens != maxTokens || c.Usage.TotalTokens != 6+maxTokens {
						t.Errorf("usage event: %s", ev)
					}
					continue
				}
				if len(c.Choices) != 1 {
					t.Fatalf("event %d: %d choices", i, len(c.Choices))
				}
				ch := c.Choices[0]
				if tc.chat && i == 0 {
					if ch.Delta == nil || ch.Delta.Role == nil || *ch.Delta.Role != "assistant" || ch.Delta.Content == nil || *ch.Delta.Content != "" || ch.FinishReason != nil {
						t.Errorf("first chat event must be the role event: %s", ev)
					}
				} else {
					tokens++
					var text *string
					if tc.chat {
						if ch.Delta == nil || ch.Delta.Role != nil {
							t.Fatalf("content event %d: %s", i, ev)
						}
						text = ch.Delta.Content
					} else {
						text = ch.Text
					}
					if text == nil || *text == "" {
						t.Errorf("event %d has no text: %s", i, ev)
					}
					if tokens == maxTokens {
						if ch.FinishReason == nil || *ch.FinishReason != "length" {
							t.Errorf("last token event must carry finish_reason length: %s", ev)
						}
					} else if ch.FinishReason != nil {
						t.Errorf("event %d finish_reason = %q before the end", i, *ch.FinishReason)
					}
				}
				if tc.continuous {
					if c.Usage == nil || c.Usage.CompletionTokens != tokens || c.Usage.PromptTokens != 6 {
						t.Errorf("continuous usage on event %d (tokens %d): %s", i, tokens, ev)
					}
				} else if c.Usage != nil {
					t.Errorf("unexpected usage on event %d: %s", i, ev)
				}
			}
			if tokens != maxTokens {
				t.Errorf("streamed %d tokens, want %d", tokens, maxTokens)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	_, ts := startSim(t, nil)
	for _, tc := range []struct {
		path, body, object string
	}{
		{"/v1/completions", `{"model":"m","prompt":[1,2,3,4,5,6,7],"max_tokens":4,"ignore_eos":true}`, "text_completion"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"abcdefghijklmnopqrstuvwxyz0"}]}],"max_completion_tokens":4,"max_tokens":99,"ignore_eos":true}`, "chat.completion"},
	} {
		t.Run(tc.object, func(t *testing.T) {
			resp := post(t, ts.URL+tc.path, tc.body)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var v struct {
				Object  string `json:"object"`
				Choices []struct {
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
					Message      struct {
						Role    string `json:"role"`
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
				Usage struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
					TotalTokens      int `json:"total_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if v.Object != tc.object || len(v.Choices) != 1 || v.Choices[0].FinishReason != "length" {
				t.Fatalf("unexpected body %s", b)
			}
			text := v.Choices[0].Text + v.Choices[0].Message.Content
			if n := len(strings.Fields(text)); n != 4 {
				t.Errorf("text %q has %d words, want 4", text, n)
			}
			// 7 token ids; 27 bytes of chat text -> ceil(27/4) = 7 tokens.
			if v.Usage.PromptTokens != 7 || v.Usage.CompletionTokens != 4 || v.Usage.TotalTokens != 11 {
				t.Errorf("usage = %+v", v.Usage)
			}
		})
	}
}

func TestStopsEarlyWithoutIgnoreEOS(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.ITL = 0; c.TTFT = 0 })
	body := `{"model":"m","prompt":"tell me a story","max_tokens":1000,"stream":true,"stream_options":{"include_usage":true}}`
	var lengths []int
	for i := 0; i < 2; i++ {
		res := streamCompletion(t, ts.URL, body)
		last := decodeChunk(t, res.events[len(res.events)-2])
		if fr := last.Choices[0].FinishReason; fr == nil || *fr != "stop" {
			t.Fatalf("finish_reason = %v, want stop", fr)
		}
		u := decodeChunk(t, res.events[len(res.events)-1]).Usage
		if u.CompletionTokens != len(res.events)-1 || u.CompletionTokens >= 1000 || u.CompletionTokens < 16 {
			t.Fatalf("completion_tokens = %d over %d token events", u.CompletionTokens, len(res.events)-1)
		}
		lengths = append(lengths, u.CompletionTokens)
	}
	if lengths[0] != lengths[1] {
		t.Errorf("early stop is not deterministic: %v", lengths)
	}
	// min_tokens beyond the natural length forces max_tokens.
	res := streamCompletion(t, ts.URL, `{"model":"m","prompt":"tell me a story","max_tokens":300,"min_tokens":300,"stream":true}`)
	if len(res.events) != 300 {
		t.Errorf("min_tokens=max_tokens=300 streamed %d tokens", len(res.events))
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		path   string
		body   string
		status int
		want   string
	}{
		{"unknown model", nil, "/v1/completions", `{"model":"gpt-4","prompt":"hi","max_tokens":1}`, 404,
			`{"error":{"message":"The model ` + "`gpt-4`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`},
		{"unknown model chat", nil, "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, 404,
			`{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`},
		{"max tokens over context", nil, "/v1/completions", `{"model":"m","prompt":"12345678","max_tokens":1023}`, 400,
			`{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 1023. This model's maximum context length is 1024 tokens and your request has 2 input tokens (1023 > 1024 - 2).","type":"BadRequestError","param":null,"code":400}}`},
		{"prompt over context", nil, "/v1/completions", `{"model":"m","prompt":"` + strings.Repeat("a", 4096) + `"}`, 400,
			`{"error":{"message":"This model's maximum context length is 1024 tokens. However, your request has 1024 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":"input_tokens","code":400}}`},
		{"legacy wording", func(c *Config) { c.MetricsNames = MetricsLegacy }, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"12345678"}],"max_tokens":1023}`, 400,
			`{"error":{"message":"This model's maximum context length is 1024 tokens. However, you requested 1025 tokens (2 in the messages, 1023 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`},
		{"flat shape", func(c *Config) { c.ErrorShape = ErrorShapeFlat }, "/v1/completions", `{"model":"nope","prompt":"hi"}`, 404,
			`{"object":"error","message":"The model ` + "`nope`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}`},
		{"invalid json", nil, "/v1/completions", `{"model":`, 400,
			`{"error":{"message":"invalid JSON request body: unexpected end of JSON input","type":"BadRequestError","param":null,"code":400}}`},
		{"max_tokens zero", nil, "/v1/completions", `{"model":"m","prompt":"hi","max_tokens":0}`, 400,
			`{"error":{"message":"max_tokens must be at least 1, got 0.","type":"BadRequestError","param":"max_tokens","code":400}}`},
		{"n > 1", nil, "/v1/completions", `{"model":"m","prompt":"hi","n":2}`, 400,
			`{"error":{"message":"vllm_sim supports only n=1, got n=2","type":"BadRequestError","param":"n","code":400}}`},
		{"no messages", nil, "/v1/chat/completions", `{"model":"m","messages":[]}`, 400,
			`{"error":{"message":"messages must contain at least one message","type":"BadRequestError","param":"messages","code":400}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := startSim(t, tc.mutate)
			resp := post(t, ts.URL+tc.path, tc.body)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if string(b) != tc.want {
				t.Errorf("body\n got: %s\nwant: %s", b, tc.want)
			}
		})
	}
}

func TestInfoEndpoints(t *testing.T) {
	_, ts := startSim(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/health", 200, ""},
		{"GET", "/ping", 200, ""},
		{"POST", "/ping", 200, ""},
		{"GET", "/version", 200, `{"version":"0.32.0"}`},
		{"GET", "/load", 200, `{"server_load":0}`},
		{"GET", "/nope", 404, `{"detail":"Not Found"}`},
		{"GET", "/v1/completions", 405, `{"detail":"Method Not Allowed"}`},
		{"DELETE", "/metrics", 405, `{"detail":"Method Not Allowed"}`},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || string(b) != tc.want {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, b, tc.status, tc.want)
		}
	}
	code, body := get(t, ts.URL+"/v1/models")
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			OwnedBy     string `json:"owned_by"`
			Root        string `json:"root"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &models); err != nil || code != 200 {
		t.Fatalf("/v1/models: %d %s %v", code, body, err)
	}
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "m" || models.Data[0].MaxModelLen != 1024 ||
		models.Data[0].Object != "model" || models.Data[0].OwnedBy != "vllm" || models.Data[0].Root != "m" {
		t.Errorf("/v1/models = %s", body)
	}
}

func TestAPIKey(t *testing.T) {
	const key = "s3cret-key"
	_, ts := startSim(t, func(c *Config) { c.APIKey = key })
	body := `{"model":"m","prompt":"hi","max_tokens":1}`
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"missing", "", 401},
		{"wrong", "Bearer nope", 401},
		{"no bearer prefix", key, 401},
		{"right", "Bearer " + key, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.auth != "" {
				hdr = []string{"Authorization", tc.auth}
			}
			resp := post(t, ts.URL+"/v1/completions", body, hdr...)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 401 && string(b) != `{"error":"Unauthorized"}` {
				t.Errorf("401 body = %s", b)
			}
			if strings.Contains(string(b), key) {
				t.Error("response leaks the API key")
			}
		})
	}
	if code, _ := get(t, ts.URL+"/v1/models"); code != 401 {
		t.Errorf("/v1/models without key = %d, want 401", code)
	}
	for _, p := range []string{"/health", "/metrics", "/version", "/admin/config"} {
		code, b := get(t, ts.URL+p)
		if code != 200 {
			t.Errorf("%s without key = %d, want 200", p, code)
		}
		if strings.Contains(b, key) {
			t.Errorf("%s leaks the API key", p)
		}
	}
}

package simulator

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/answer"
)

// toolChunk is a chat event as far as the output tests read it.
type toolChunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    *int    `json:"index"`
				ID       *string `json:"id"`
				Type     *string `json:"type"`
				Function struct {
					Name      *string `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// streamOutput posts a streaming request and returns the concatenated text,
// the chunks and the last finish_reason.
func streamOutput(t *testing.T, url, body string) (string, []toolChunk, string) {
	t.Helper()
	resp := post(t, url, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	res := readSSE(t, resp.Body)
	if !res.done {
		t.Fatal("stream did not end with [DONE]")
	}
	var text strings.Builder
	var chunks []toolChunk
	finish := ""
	for _, e := range res.events {
		var c toolChunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		chunks = append(chunks, c)
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return text.String(), chunks, finish
}

func TestAnswersFileEchoAndWrongAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(path, []byte(`{"What is 2+2?": "4", "2+2": "too short a key to win"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ts := startSim(t, func(c *Config) { c.AnswersFile = path; c.Echo = true })
	body := `{"model":"m","prompt":"a1b2c3 What is 2+2? Answer with a number.","max_tokens":64,"ignore_eos":true,"stream":true}`
	text, _, finish := streamOutput(t, ts.URL+"/v1/completions", body)
	if text != "4" || finish != "stop" {
		t.Errorf("scripted answer = %q (finish %q), want \"4\" (stop) even with ignore_eos", text, finish)
	}
	chat := `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say the longest sentence you know"}],"max_tokens":64,"stream":true}`
	if text, _, _ := streamOutput(t, ts.URL+"/v1/chat/completions", chat); text != "Say the longest sentence you know" {
		t.Errorf("echo = %q, want the last user message", text)
	}
	short := `{"model":"m","prompt":"one two three four five","max_tokens":3,"stream":true}`
	if text, _, finish := streamOutput(t, ts.URL+"/v1/completions", short); text != "one two three" || finish != "length" {
		t.Errorf("echo cut at max_tokens = %q (%q), want \"one two three\" (length)", text, finish)
	}
	setFault(t, ts.URL, `{"fault":"`+FaultWrongAnswer+`"}`)
	if text, _, _ := streamOutput(t, ts.URL+"/v1/completions", body); text != wrongAnswer {
		t.Errorf("wrong_answer fault: %q, want %q", text, wrongAnswer)
	}
}

func TestAnswersFileErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(path, []byte(`["not", "an", "object"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.AnswersFile = path
	if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "want a JSON object") {
		t.Errorf("New with a bad answers file: %v", err)
	}
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string","minLength":2},"days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","days","unit"],"additionalProperties":false}`

func TestResponseFormatJSONSchema(t *testing.T) {
	_, ts := startSim(t, nil)
	schema, err := answer.CompileSchema(mustJSON(t, weatherSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"weather?"}],"max_tokens":64,"stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":` + weatherSchema + `}}}`},
		{"/v1/completions", `{"model":"m","prompt":"weather?","max_tokens":64,"stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":` + weatherSchema + `}}}`},
		{"/v1/completions", `{"model":"m","prompt":"weather?","max_tokens":64,"stream":true,"guided_json":` + weatherSchema + `}`},
	} {
		text, _, _ := streamOutput(t, ts.URL+ep.path, ep.body)
		if err := answer.ValidateJSON(schema, text); err != nil {
			t.Errorf("%s: output %q: %v", ep.path, text, err)
		}
	}
	setFault(t, ts.URL, `{"fault":"`+FaultBrokenJSON+`"}`)
	text, _, _ := streamOutput(t, ts.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":64,"stream":true,"response_format":{"type":"json_object"}}`)
	var v any
	if json.Unmarshal([]byte(text), &v) == nil {
		t.Errorf("broken_json fault: output %q is still valid JSON", text)
	}
	resp := post(t, ts.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("json_schema without a schema: %d, want 400", resp.StatusCode)
	}
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestToolCallsStreamLikeVLLM(t *testing.T) {
	_, ts := startSim(t, nil)
	schema, err := answer.CompileSchema(mustJSON(t, weatherSchema))
	if err != nil {
		t.Fatal(err)
	}
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}},{"type":"function","function":{"name":"get_weather","parameters":` + weatherSchema + `}}]`
	for _, tc := range []struct {
		choice, name, finish string
	}{
		{`{"type":"function","function":{"name":"get_weather"}}`, "get_weather", "stop"},
		{`"required"`, "lookup", "tool_calls"},
		{`"auto"`, "lookup", "tool_calls"},
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"weather in Paris?"}],"max_tokens":64,"stream":true,` + tools + `,"tool_choice":` + tc.choice + `}`
		text, chunks, finish := streamOutput(t, ts.URL+"/v1/chat/completions", body)
		if text != "" || finish != tc.finish {
			t.Errorf("tool_choice %s: text %q finish %q, want no text and %q", tc.choice, text, finish, tc.finish)
		}
		var args strings.Builder
		deltas := 0
		for _, c := range chunks {
			for _, ch := range c.Choices {
				for _, d := range ch.Delta.ToolCalls {
					if d.Index == nil || *d.Index != 0 {
						t.Fatalf("tool call delta without index 0: %+v", d)
					}
					first := deltas == 0
					if first != (d.ID != nil) || first != (d.Function.Name != nil) || first != (d.Type != nil) {
						t.Errorf("delta %d: id, type and name must come in the first delta only: %+v", deltas, d)
					}
					if first && (*d.Function.Name != tc.name || !strings.HasPrefix(*d.ID, "chatcmpl-tool-")) {
						t.Errorf("first delta: name %q id %q, want %q", *d.Function.Name, *d.ID, tc.name)
					}
					if d.Function.Arguments != nil {
						args.WriteString(*d.Function.Arguments)
					}
					deltas++
				}
			}
		}
		if deltas < 2 {
			t.Errorf("tool_choice %s: %d tool call deltas, want the arguments in fragments", tc.choice, deltas)
		}
		if tc.name == "get_weather" {
			if err := answer.ValidateJSON(schema, args.String()); err != nil {
				t.Errorf("arguments %q: %v", args.String(), err)
			}
		}
	}
	setFault(t, ts.URL, `{"fault":"`+FaultNoToolCall+`"}`)
	text, chunks, _ := streamOutput(t, ts.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":64,"stream":true,`+tools+`,"tool_choice":"required"}`)
	for _, c := range chunks {
		for _, ch := range c.Choices {
			if len(ch.Delta.ToolCalls) > 0 {
				t.Fatal("no_tool_call fault: a tool call was streamed")
			}
		}
	}
	if text == "" {
		t.Error("no_tool_call fault: no text either")
	}
	resp := post(t, ts.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],`+tools+`,"tool_choice":{"type":"function","function":{"name":"nope"}}}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("tool_choice naming an unknown tool: %d, want 400", resp.StatusCode)
	}
}

func TestEmbeddings(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.EmbeddingDimension = 384 })
	embed := func(body string) (int, []float64, map[string]any) {
		t.Helper()
		resp := post(t, ts.URL+"/v1/embeddings", body)
		defer resp.Body.Close()
		var out struct {
			Object string `json:"object"`
			Model  string `json:"model"`
			Data   []struct {
				Index     int       `json:"index"`
				Object    string    `json:"object"`
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
			Usage map[string]any `json:"usage"`
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil, nil
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if out.Object != "list" || out.Model != "m" || len(out.Data) != 1 || out.Data[0].Object != "embedding" {
			t.Fatalf("response shape: %s", b)
		}
		return resp.StatusCode, out.Data[0].Embedding, out.Usage
	}
	_, v, usage := embed(`{"model":"m","input":"hello world, embed me"}`)
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	if len(v) != 384 || math.Abs(sum-1) > 1e-9 {
		t.Errorf("dimension %d, norm² %g: want 384 and a unit vector", len(v), sum)
	}
	if usage["prompt_tokens"].(float64) != 6 || usage["completion_tokens"].(float64) != 0 {
		t.Errorf("usage %v", usage)
	}
	_, again, _ := embed(`{"model":"m","input":"hello world, embed me"}`)
	if again[7] != v[7] {
		t.Error("the same input gave another vector")
	}
	if _, v, _ := embed(`{"model":"m","input":"x","dimensions":64}`); len(v) != 64 {
		t.Errorf("dimensions 64 gave %d", len(v))
	}
	if code, _, _ := embed(`{"model":"other","input":"x"}`); code != http.StatusNotFound {
		t.Errorf("unknown model: %d, want 404", code)
	}
	setFault(t, ts.URL, `{"fault":"`+FaultZeroEmbedding+`"}`)
	_, v, _ = embed(`{"model":"m","input":"x"}`)
	for _, x := range v {
		if x != 0 {
			t.Fatal("zero_embedding fault: non-zero value")
		}
	}
}

func TestFaultAdapterNotFound(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.LoRAModules = []LoRAModule{{Name: "sql-lora"}} })
	setFault(t, ts.URL, `{"fault":"`+FaultAdapterGone+`"}`)
	code, models := get(t, ts.URL+"/v1/models")
	if code != http.StatusOK || !strings.Contains(models, `"id":"sql-lora"`) {
		t.Fatalf("/v1/models = %d %s, want the adapter still listed", code, models)
	}
	for model, want := range map[string]int{"sql-lora": http.StatusNotFound, "m": http.StatusOK} {
		resp := post(t, ts.URL+"/v1/completions", `{"model":"`+model+`","prompt":"x","max_tokens":2}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", model, resp.StatusCode, b, want)
		}
	}
}

func TestToolCallNonStreaming(t *testing.T) {
	_, ts := startSim(t, nil)
	resp := post(t, ts.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":64,"tools":[{"type":"function","function":{"name":"get_weather","parameters":`+weatherSchema+`}}],"tool_choice":"auto"}`)
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	schema, err := answer.CompileSchema(mustJSON(t, weatherSchema))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Choices) != 1 || len(out.Choices[0].Message.ToolCalls) != 1 || out.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("answer %+v", out)
	}
	c := out.Choices[0].Message.ToolCalls[0]
	if c.Type != "function" || c.Function.Name != "get_weather" || answer.ValidateJSON(schema, c.Function.Arguments) != nil {
		t.Errorf("tool call %+v", c)
	}
}

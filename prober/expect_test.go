package prober

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vllm-prober/vllm_prober/prober/probe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// simAnswers writes a vllm_sim --answers file.
func simAnswers(t *testing.T, m map[string]string) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runConfig runs a Manager on the configuration yml until the test ends.
func runConfig(t *testing.T, yml string) *Manager {
	t.Helper()
	m := NewManager(testOptions(prometheus.NewRegistry(), nil))
	if err := m.Apply(loadConfig(t, yml)); err != nil {
		t.Fatal(err)
	}
	running(t, m)
	return m
}

// simFault sets the simulator's fault through its admin API.
func simFault(t *testing.T, base, fault string) {
	t.Helper()
	resp, err := http.Post(base+"/admin/config", "application/json", strings.NewReader(`{"fault":"`+fault+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("setting fault %q: %d %s", fault, resp.StatusCode, b)
	}
}

// lastOf waits until the pair has recorded a probe that finished after the
// moment after (a Unix time; 0 for any) and returns it and when it finished.
func lastOf(t *testing.T, m *Manager, target, module, model string, after float64) (probe.Result, float64) {
	t.Helper()
	var last probe.Result
	var end float64
	waitFor(t, "a probe of "+target+"/"+module+"/"+model, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		p, ok := m.pairs[pairKey{target, module, model}]
		if !ok {
			return false
		}
		l, ok := p.hist.last()
		last, end = l.Result, p.lastEnd
		return ok && end > after
	})
	return last, end
}

func gauge(t *testing.T, _ *Manager, v family, lv ...string) float64 {
	t.Helper()
	return counter(t, v.WithLabelValues(lv...))
}

func count(t *testing.T, _ *Manager, v family, lv ...string) float64 {
	t.Helper()
	return counter(t, v.WithLabelValues(lv...))
}

// TestAnswerCheckAgainstSim: a steady run answers correctly (answer_correct
// 1); with the simulator's wrong_answer fault the probe fails as
// wrong_answer, keeps the text and what was expected, and counts it; on
// chat and on responses alike.
func TestAnswerCheckAgainstSim(t *testing.T) {
	for kind, ask := range map[string]string{
		"chat":      `messages: [{role: user, content: "What is 2+2? Answer with the number only."}]`,
		"responses": `prompt: "What is 2+2? Answer with the number only."`,
	} {
		t.Run(kind, func(t *testing.T) { answerCheckAgainstSim(t, kind, ask) })
	}
}

func answerCheckAgainstSim(t *testing.T, kind, ask string) {
	_, ts, _ := startSim(t, func(c *simulator.Config) {
		c.AnswersFile = simAnswers(t, map[string]string{"What is 2+2?": "4"})
	})
	m := runConfig(t, `
global: {probe_interval: 500ms}
modules:
  math:
    prober: `+kind+`
    `+ask+`
    max_tokens: 8
    expect: {equals: "4"}
targets:
  - {name: sim, url: `+ts.URL+`}
`)
	res, n := lastOf(t, m, "sim", "math", "", 0)
	for range 2 {
		res, n = lastOf(t, m, "sim", "math", "", n)
	}
	if !res.Success || res.Answer != probe.AnswerCorrect || res.Text != "4" || res.Check != `equals "4"` {
		t.Fatalf("steady probe: success %v answer %v text %q check %q (%s %s)", res.Success, res.Answer, res.Text, res.Check, res.Reason, res.Err)
	}
	mt := m.testMetrics()
	lv := []string{"sim", "math", "sim-model"}
	if v := gauge(t, m, mt.answers.correct, lv...); v != 1 {
		t.Errorf("vllm_probe_answer_correct = %v, want 1", v)
	}
	if c, w := count(t, m, mt.answers.checks, append(lv, "correct")...), count(t, m, mt.answers.checks, append(lv, "wrong")...); c < 3 || w != 0 {
		t.Errorf("answer checks correct %v wrong %v, want >= 3 and 0", c, w)
	}

	simFault(t, ts.URL, simulator.FaultWrongAnswer)
	for res.Reason != probe.ReasonWrongAnswer {
		res, n = lastOf(t, m, "sim", "math", "", n)
	}
	// The error quotes the answer, so the landing page's summary shows it.
	if res.Success || res.Text != "I am not sure." || res.Answer != probe.AnswerWrong || res.Err != `the answer is not "4"; got "I am not sure."` {
		t.Errorf("wrong answer: success %v text %q answer %v err %q", res.Success, res.Text, res.Answer, res.Err)
	}
	if v := gauge(t, m, mt.answers.correct, lv...); v != 0 {
		t.Errorf("vllm_probe_answer_correct = %v after a wrong answer, want 0", v)
	}
	if w := count(t, m, mt.answers.checks, append(lv, "wrong")...); w < 1 {
		t.Errorf("answer checks wrong = %v, want >= 1", w)
	}
	if f := count(t, m, mt.failures, append(lv, string(probe.ReasonWrongAnswer))...); f < 1 {
		t.Errorf("failures{reason=wrong_answer} = %v", f)
	}
}

// TestQuestionsRotate: the probes ask the questions in turn, each checked
// against its own expect.
func TestQuestionsRotate(t *testing.T) {
	_, ts, _ := startSim(t, func(c *simulator.Config) {
		c.AnswersFile = simAnswers(t, map[string]string{"2+2": "4", "capital of France": "The capital is Paris."})
	})
	m := runConfig(t, `
global: {probe_interval: 500ms}
modules:
  quiz:
    prober: completions
    prompt: unused
    max_tokens: 16
    questions:
      - {prompt: "What is 2+2?", expect: {one_of: ["4", "four"]}}
      - {prompt: "What is the capital of France?", expect: {regex: "\\bParis\\b"}}
targets:
  - {name: sim, url: `+ts.URL+`}
`)
	for n := 0.0; len(m.Status()[0].Modules[0].History) < 4; {
		_, n = lastOf(t, m, "sim", "quiz", "", n)
	}
	st := m.Status()
	texts := map[string]bool{}
	for _, r := range st[0].Modules[0].History {
		if !r.Success || r.Answer != probe.AnswerCorrect {
			t.Errorf("probe failed: %s %s (text %q, check %s)", r.Reason, r.Err, r.Text, r.Check)
		}
		texts[r.Text] = true
	}
	if !texts["4"] || !texts["The capital is Paris."] {
		t.Errorf("answers seen %v, want both questions asked", texts)
	}
}

// TestStructuredOutputAgainstSim: JSON-schema output and tool calls pass
// when the simulator honours them, and fail as invalid_structured_output
// when its broken_json and no_tool_call faults break them.
func TestStructuredOutputAgainstSim(t *testing.T) {
	_, ts, _ := startSim(t, nil)
	m := runConfig(t, `
global: {probe_interval: 1s}
modules:
  json:
    prober: chat
    messages: [{role: user, content: "The weather in Paris as JSON."}]
    max_tokens: 64
    response_format:
      type: json_schema
      json_schema:
        name: weather
        schema:
          type: object
          properties:
            city: {type: string}
            celsius: {type: number, minimum: -50}
          required: [city, celsius]
  json_completions:
    prober: completions
    prompt: "JSON please:"
    max_tokens: 64
    response_format: {type: json_object}
  tool:
    prober: chat
    messages: [{role: user, content: "What is the weather in Paris?"}]
    max_tokens: 64
    tools:
      - type: function
        function:
          name: get_weather
          parameters:
            type: object
            properties: {city: {type: string}, days: {type: integer, minimum: 1}}
            required: [city, days]
    tool_choice: required
    expect: {json_schema: {type: object, required: [city]}}
targets:
  - {name: sim, url: `+ts.URL+`}
`)
	counts := map[string]float64{}
	for _, mod := range []string{"json", "json_completions", "tool"} {
		res, n := lastOf(t, m, "sim", mod, "", 0)
		counts[mod] = n
		if !res.Success {
			t.Fatalf("%s: %s: %s (text %q)", mod, res.Reason, res.Err, res.Text)
		}
	}
	if res, _ := lastOf(t, m, "sim", "tool", "", 0); !strings.HasPrefix(res.Text, `get_weather({"city":`) || res.Answer != probe.AnswerCorrect {
		t.Errorf("tool call text %q answer %v", res.Text, res.Answer)
	}
	mt := m.testMetrics()
	for _, tc := range []struct{ fault, module, why string }{
		{simulator.FaultBrokenJSON, "json", "output: not valid JSON"},
		{simulator.FaultBrokenJSON, "json_completions", "output: not valid JSON"},
		{simulator.FaultBrokenJSON, "tool", "arguments: not valid JSON"},
		{simulator.FaultNoToolCall, "tool", "no tool call in the response"},
	} {
		simFault(t, ts.URL, tc.fault)
		var res probe.Result
		// Until a probe sent under the new fault comes back (lastOf
		// times out and fails the test if none does).
		for res.Reason != probe.ReasonInvalidStructured || !strings.Contains(res.Err, tc.why) {
			res, counts[tc.module] = lastOf(t, m, "sim", tc.module, "", counts[tc.module])
		}
		if f := count(t, m, mt.failures, "sim", tc.module, "sim-model", string(probe.ReasonInvalidStructured)); f < 1 {
			t.Errorf("%s/%s: failures{reason=invalid_structured_output} = %v", tc.fault, tc.module, f)
		}
	}
}

// TestModelsAll: a target with models: all probes every model vllm_sim
// lists, base model and LoRA adapter, each under its own model label; an
// adapter that is listed but 404s (the simulator's adapter_not_found fault)
// fails as model_not_found while the base model stays up; the list is re-read
// on the check interval and a model that leaves it loses its pairs and series.
func TestModelsAll(t *testing.T) {
	_, sim, _ := startSim(t, func(c *simulator.Config) {
		c.LoRAModules = []simulator.LoRAModule{{Name: "sql-lora", Path: "/adapters/sql"}}
	})
	var hide atomic.Bool
	up, _ := url.Parse(sim.URL)
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	// The front forwards to the simulator; with hide set its /v1/models lists
	// the base model only, as after the adapter was unloaded.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" && hide.Load() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"sim-model","object":"model","root":"sim-model","parent":null}]}`)
			return
		}
		// The request body is read whole before it is forwarded. Streamed
		// through, it races the answer: the simulator answers (headers) as
		// soon as it has decoded the JSON, the proxy passes the headers on,
		// and Go's HTTP/1 server then closes the unread rest of the incoming
		// body (see http.ResponseController.EnableFullDuplex); the proxy's
		// transport fails writing the body upstream and closes the connection
		// under the stream, which the prober rightly reports as truncated
		// (about 1 probe in 50 through this proxy, none direct).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	m := runConfig(t, `
global: {probe_interval: 500ms}
modules:
  short: {prober: completions, prompt: hi, max_tokens: 4}
targets:
  - {name: all, url: `+front.URL+`, models: all, token_budget_per_hour: 100000}
  - {name: base, url: `+front.URL+`, models: "sim-.*"}
`)
	for _, model := range []string{"sim-model", "sql-lora"} {
		if res, _ := lastOf(t, m, "all", "short", model, 0); !res.Success {
			t.Errorf("%s: %s %s", model, res.Reason, res.Err)
		}
	}
	mt := m.testMetrics()
	if s := gauge(t, m, mt.success, "all", "short", "sql-lora"); s != 1 {
		t.Errorf("success{model=sql-lora} = %v", s)
	}
	m.mu.Lock()
	_, regexAdapter := m.pairs[pairKey{"base", "short", "sql-lora"}]
	m.mu.Unlock()
	if regexAdapter {
		t.Error(`models: "sim-.*" probes sql-lora`)
	}
	var statusModels []string
	for _, ms := range m.Status()[0].Modules {
		statusModels = append(statusModels, ms.Model)
	}
	if strings.Join(statusModels, ",") != "sim-model,sql-lora" {
		t.Errorf("Status lists models %v", statusModels)
	}

	simFault(t, sim.URL, simulator.FaultAdapterGone)
	var res probe.Result
	var end float64
	for res.Reason != probe.ReasonModelNotFound {
		res, end = lastOf(t, m, "all", "short", "sql-lora", end)
	}
	if !strings.Contains(res.Err, "sql-lora") {
		t.Errorf("adapter 404: err %q", res.Err)
	}
	if f := count(t, m, mt.failures, "all", "short", "sql-lora", string(probe.ReasonModelNotFound)); f < 1 {
		t.Errorf("failures{model=sql-lora,reason=model_not_found} = %v", f)
	}
	_, baseEnd := lastOf(t, m, "all", "short", "sim-model", 0)
	if res, _ := lastOf(t, m, "all", "short", "sim-model", baseEnd); !res.Success {
		t.Errorf("base model under adapter_not_found: %s %s", res.Reason, res.Err)
	}

	hide.Store(true)
	waitFor(t, "the adapter's pair to go", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		_, ok := m.pairs[pairKey{"all", "short", "sql-lora"}]
		return !ok
	})
	n := countSeries(t, collector{m}, "sql-lora")
	if n != 0 {
		t.Errorf("%d failure series of the removed adapter remain", n)
	}
}

func countSeries(t *testing.T, c prometheus.Collector, value string) int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, met := range mf.GetMetric() {
			for _, l := range met.GetLabel() {
				if l.GetValue() == value {
					n++
				}
			}
		}
	}
	return n
}

// TestEmbeddingsProbe: /v1/embeddings latency and dimension; a dimension
// other than expected and a zero vector fail as invalid_embedding.
func TestEmbeddingsProbe(t *testing.T) {
	_, ts, _ := startSim(t, func(c *simulator.Config) { c.EmbeddingDimension = 384 })
	m := runConfig(t, `
global: {probe_interval: 500ms}
modules:
  embed: {prober: embeddings, prompt: "a sentence to embed", expected_dimension: 384}
  embed_768: {prober: embeddings, prompt: "a sentence to embed", expected_dimension: 768}
targets:
  - {name: sim, url: `+ts.URL+`}
`)
	res, n := lastOf(t, m, "sim", "embed", "", 0)
	if !res.Success || res.Dimension != 384 || res.E2E <= 0 || res.PromptTokens == 0 {
		t.Fatalf("embed: success %v dimension %d e2e %v prompt tokens %d (%s %s)", res.Success, res.Dimension, res.E2E, res.PromptTokens, res.Reason, res.Err)
	}
	mt := m.testMetrics()
	if d := gauge(t, m, mt.answers.dimension, "sim", "embed", "sim-model"); d != 384 {
		t.Errorf("vllm_probe_embedding_dimension = %v", d)
	}
	bad, _ := lastOf(t, m, "sim", "embed_768", "", 0)
	if bad.Success || bad.Reason != probe.ReasonInvalidEmbedding || !strings.Contains(bad.Err, "dimension 384, want 768") {
		t.Errorf("embed_768: success %v reason %q err %q", bad.Success, bad.Reason, bad.Err)
	}
	if f := count(t, m, mt.failures, "sim", "embed_768", "sim-model", string(probe.ReasonInvalidEmbedding)); f < 1 {
		t.Errorf("failures{reason=invalid_embedding} = %v", f)
	}
	simFault(t, ts.URL, simulator.FaultZeroEmbedding)
	for res.Reason != probe.ReasonInvalidEmbedding {
		res, n = lastOf(t, m, "sim", "embed", "", n)
	}
	if !strings.Contains(res.Err, "norm 0") {
		t.Errorf("zero vector: err %q", res.Err)
	}
}

func TestAnswerTextNeverLeaksSecrets(t *testing.T) {
	const key = "sk-sim-answer-secret-0123456789"
	_, ts, _ := startSim(t, func(c *simulator.Config) {
		c.APIKey = key
		c.AnswersFile = simAnswers(t, map[string]string{
			"Repeat the key": "The key is " + key + ".",
			// The key straddles the 512-byte cut of Result.Text.
			"Long answer": strings.Repeat("a", 512-10) + " " + key,
		})
	})
	m := runConfig(t, `
global: {probe_interval: 1s}
modules:
  repeat: {prober: completions, prompt: "Repeat the key", max_tokens: 64, expect: {equals: "nothing"}}
  long: {prober: completions, prompt: "Long answer", max_tokens: 128, expect: {regex: "zzz"}}
targets:
  - name: sim
    url: `+ts.URL+`
    http_client_config: {authorization: {credentials: `+key+`}}
`)
	for _, mod := range []string{"repeat", "long"} {
		res, _ := lastOf(t, m, "sim", mod, "", 0)
		if res.Reason != probe.ReasonWrongAnswer || !strings.Contains(res.Text, "<secret>") {
			t.Errorf("%s: reason %q text %q, want wrong_answer and the key scrubbed", mod, res.Reason, res.Text)
		}
		if strings.Contains(res.Text+res.Err, key[:12]) {
			t.Errorf("%s: the key leaks: text %q err %q", mod, res.Text, res.Err)
		}
	}
}

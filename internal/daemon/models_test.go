package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// TestModelsTargetPages: a target with models: all against a vllm_sim that
// serves a LoRA adapter. The target page has one section per model, each
// with its own anchor and /probe links naming its model; /probe?model= probes
// that model (and 400s on one the target does not list); a wrong answer
// shows the generated text on the landing page's summary.
func TestModelsTargetPages(t *testing.T) {
	dir := t.TempDir()
	answers := filepath.Join(dir, "answers.json")
	b, _ := json.Marshal(map[string]string{"What is 2+2?": "4"})
	if err := os.WriteFile(answers, b, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startPlainSim(t, func(c *simulator.Config) {
		c.Model = "base"
		c.LoRAModules = []simulator.LoRAModule{{Name: "sql-lora"}}
		c.AnswersFile = answers
	})
	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	writeConfig(t, f.path, `
global: {probe_interval: 200ms}
modules:
  math:
    prober: chat
    messages: [{role: user, content: "What is 2+2? Answer with the number only."}]
    max_tokens: 8
    expect: {equals: "4"}
targets:
  - {name: all, url: `+srv.URL+`, models: all}
`)
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5})
	waitFor(t, 10*time.Second, "a probe of each model", func() bool {
		return f.historyLen("all", "math") > 0 && strings.Count(f.page("/target?name=all"), `<h3 id="module-math--`) == 2
	})

	page := f.page("/target?name=all")
	for _, want := range []string{
		`models: all (one section per listed model)`,
		`<h3 id="module-math--base">math (model base)</h3>`,
		`<h3 id="module-math--sql-lora">math (model sql-lora)</h3>`,
		`<a href="probe?debug=true&amp;model=sql-lora&amp;module=math&amp;target=all">debug report</a>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/target?name=all lacks %s", want)
		}
	}

	code, report := f.get("/probe?target=all&module=math&model=sql-lora&debug=true")
	if code != http.StatusOK || !strings.Contains(report, "\nModel: sql-lora\n") || !strings.Contains(report, "Result: success") {
		t.Errorf("/probe?model=sql-lora: %d\n%s", code, report)
	}
	if code, body := f.get("/probe?target=all&module=math&model=nope"); code != http.StatusBadRequest || !strings.Contains(body, "lists base, sql-lora") {
		t.Errorf("/probe?model=nope: %d %q, want 400 naming the listed models", code, body)
	}

	// A client of its own, closed: goleak (TestMain) counts an idle
	// keep-alive connection of http.DefaultClient as a leak.
	admin := &http.Client{Transport: &http.Transport{}}
	defer admin.CloseIdleConnections()
	resp, err := admin.Post(srv.URL+"/admin/config", "application/json", strings.NewReader(`{"fault":"wrong_answer"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /admin/config: %s", resp.Status)
	}
	want := `wrong_answer (HTTP 200): the answer is not &#34;4&#34;; got &#34;I am not sure.&#34;`
	waitFor(t, 10*time.Second, "the wrong answer on the landing page", func() bool {
		// One row per model; the two share one reason cell when it is the same.
		page := f.page("/")
		return strings.Count(page, want) == 2 || strings.Contains(page, `<td rowspan="2">`+want)
	})
	if landing := f.page("/"); !strings.Contains(landing, `<a href="target?name=all#module-math--sql-lora">all</a><td>math (sql-lora)<td`) {
		t.Errorf("the summary does not link sql-lora's section:\n%s", landing)
	}
}

// page GETs path and fails the test unless it answers 200.
func (f *fixture) page(path string) string {
	f.t.Helper()
	code, body := f.get(path)
	if code != http.StatusOK {
		f.t.Fatalf("%s = %d", path, code)
	}
	return body
}

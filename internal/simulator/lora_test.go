package simulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestParseLoRAModules(t *testing.T) {
	got, err := ParseLoRAModules([]string{"a=/p/a, b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := []LoRAModule{{"a", "/p/a"}, {"b", ""}, {"c", ""}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range [][]string{{""}, {"a,,b"}, {"=/path"}} {
		if _, err := ParseLoRAModules(bad); err == nil {
			t.Errorf("ParseLoRAModules(%q) accepted", bad)
		}
	}
	for _, mods := range [][]LoRAModule{{{Name: "m"}}, {{Name: "x"}, {Name: "x"}}} {
		cfg := testConfig()
		cfg.LoRAModules = mods
		if _, err := New(cfg, nil); err == nil {
			t.Errorf("New accepted adapters %+v on base model %q", mods, cfg.Model)
		}
	}
}

// TestLoRAModules checks vLLM's LoRA surface: adapters listed in /v1/models
// with parent = base model, requests to an adapter answered under the
// adapter's name, and their traffic counted under the base model_name.
func TestLoRAModules(t *testing.T) {
	_, ts := startSim(t, func(c *Config) {
		c.LoRAModules = []LoRAModule{{Name: "sql-lora", Path: "/adapters/sql"}, {Name: "chat-lora"}}
	})
	code, body := get(t, ts.URL+"/v1/models")
	if code != http.StatusOK {
		t.Fatalf("/v1/models: %d %s", code, body)
	}
	var list struct {
		Data []struct {
			ID          string  `json:"id"`
			Root        string  `json:"root"`
			Parent      *string `json:"parent"`
			MaxModelLen *int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	type card struct{ id, root, parent string }
	var got []card
	for _, d := range list.Data {
		c := card{id: d.ID, root: d.Root}
		if d.Parent != nil {
			c.parent = *d.Parent
		}
		if (d.MaxModelLen != nil) != (d.Parent == nil) {
			t.Errorf("%s: max_model_len %v; vLLM sets it on base cards only", d.ID, d.MaxModelLen)
		}
		got = append(got, c)
	}
	want := []card{{"m", "m", ""}, {"sql-lora", "/adapters/sql", "m"}, {"chat-lora", "m", "m"}}
	if len(got) != len(want) {
		t.Fatalf("cards %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("card %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	res := streamCompletion(t, ts.URL, `{"model":"sql-lora","prompt":"hi","max_tokens":3,"stream":true}`)
	if len(res.events) == 0 || !res.done {
		t.Fatalf("stream to adapter: %d events, done=%v", len(res.events), res.done)
	}
	for _, ev := range res.events {
		if !strings.Contains(ev, `"model":"sql-lora"`) {
			t.Errorf("chunk does not name the adapter: %s", ev)
		}
	}
	resp := post(t, ts.URL+"/v1/chat/completions", `{"model":"chat-lora","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	var chat struct {
		Model string `json:"model"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&chat); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || chat.Model != "chat-lora" {
		t.Errorf("chat to adapter: %d model=%q", resp.StatusCode, chat.Model)
	}
	resp = post(t, ts.URL+"/v1/completions", `{"model":"other-lora","prompt":"hi","max_tokens":2}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown adapter: %d, want 404", resp.StatusCode)
	}

	mfs := waitMetric(t, ts.URL, 5*time.Second, func(m map[string]*dto.MetricFamily) bool {
		return m["vllm:request_success_total"] != nil && sumCounter(m["vllm:request_success_total"]) == 2
	})
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "model_name" && lp.GetValue() != "m" {
					t.Errorf("%s has model_name=%q; adapter traffic belongs to the base model", name, lp.GetValue())
				}
			}
		}
	}
}

func sumCounter(mf *dto.MetricFamily) float64 {
	var s float64
	for _, m := range mf.GetMetric() {
		s += m.GetCounter().GetValue()
	}
	return s
}

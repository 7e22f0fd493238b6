package config

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestParseGoodput reads vLLM bench's --goodput syntax, as one string or as
// separate arguments, and refuses what vLLM refuses.
func TestParseGoodput(t *testing.T) {
	o, err := ParseGoodput("ttft:200 tpot:50", "e2el:2000")
	if err != nil {
		t.Fatal(err)
	}
	want := Objectives{TTFT: model.Duration(200 * time.Millisecond), TPOT: model.Duration(50 * time.Millisecond), E2E: model.Duration(2 * time.Second)}
	if o != want {
		t.Errorf("got %+v, want %+v", o, want)
	}
	if s := o.String(); s != "ttft:200 tpot:50 e2el:2000" {
		t.Errorf("String() = %q", s)
	}
	for in, msg := range map[string]string{
		"":               "no objective given",
		"ttft":           "want KEY:MS",
		"ttft:x":         "not a non-negative number",
		"ttft:-1":        "not a non-negative number",
		"itl:5":          `unknown key "itl"`,
		"ttft:1 ttft:2":  "given twice",
		"ttft:0 e2el:0":  "no objective set",
		"tpot:0.5 foo:1": `unknown key "foo"`,
	} {
		if _, err := ParseGoodput(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseGoodput(%q) = %v, want an error with %q", in, err, msg)
		}
	}
}

// TestSLOsInherit: a module without slos takes the top-level ones, a module
// with its own keeps them, and an empty objective set is refused.
func TestSLOsInherit(t *testing.T) {
	cfg, err := Load([]byte(`
slos: {ttft: 2s, tpot: 100ms}
modules:
  a: {prober: completions, prompt: hi, max_tokens: 3}
  b: {prober: completions, prompt: hi, max_tokens: 3, slos: {e2e: 2s}}
targets:
  - {name: t, url: "http://127.0.0.1:1"}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Modules["a"].SLOs; a == nil || a.String() != "ttft:2000 tpot:100" {
		t.Errorf("module a inherits %v, want ttft:2000 tpot:100", a)
	}
	if b := cfg.Modules["b"].SLOs; b == nil || b.String() != "e2el:2000" {
		t.Errorf("module b has %v, want its own e2el:2000", b)
	}
	_, err = Load([]byte(`
slos: {}
modules:
  a: {prober: completions, prompt: hi, max_tokens: 3}
targets:
  - {name: t, url: "http://127.0.0.1:1"}
`), "")
	if err == nil || !strings.Contains(err.Error(), "slos: no objective set") {
		t.Errorf("empty slos: %v", err)
	}
}

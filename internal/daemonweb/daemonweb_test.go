package daemonweb

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/daemon"
)

// TestWebOptionsComplete: every field of web.Options is set from the daemon
// (DisableReload is false unless asked), so that a field added to the
// pages' options is not left nil here.
func TestWebOptionsComplete(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(path, []byte("modules:\n  m: {prober: completions, prompt: hi}\ntargets:\n  - {name: a, url: 'http://127.0.0.1:1'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{ConfigFile: path, DisableReload: true, Vantage: "eu"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := WebOptions(d)
	v := reflect.ValueOf(o)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("web.Options.%s is not set", v.Type().Field(i).Name)
		}
	}
	if o.RegressionThreshold <= 1 {
		t.Errorf("RegressionThreshold = %g, want mixin/slo.yml's latency_regression threshold (above 1)", o.RegressionThreshold)
	}
}

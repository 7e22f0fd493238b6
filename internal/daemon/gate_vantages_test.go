package daemon

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// gateVantageConfig is a canary and its stable reference, probed every
// 300ms; %s is the canary's URL, %s the stable's, %s the gate's other
// vantages.
const gateVantageConfig = `
global:
  probe_interval: 300ms
  gate: {window: 3s%s}
modules:
  m: {prober: completions, prompt: "Say hello.", max_tokens: 8}
targets:
  - {name: canary, url: %q, scrape_metrics: false}
  - {name: stable, url: %q, scrape_metrics: false}
`

// TestGateAcrossVantages: two replicas probe a canary and its stable
// reference, vantage a directly and vantage b with its path to the canary
// cut (connection refused). b's /gate, which asks a, passes, saying that b
// could not judge it, where b alone answers 503; a's /gate?local=true passes
// on its own. With b's path restored and the canary slow from everywhere
// (its ITL tripled), b's /gate fails, from every vantage. Without the
// vantages' verdict b's /gate failed the canary for its own path.
func TestGateAcrossVantages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two daemons for about 20 s")
	}
	canary, stable := startCountingSim(t, nil), startCountingSim(t, nil)
	a := &fixture{t: t, path: filepath.Join(t.TempDir(), "a.yml")}
	writeConfig(t, a.path, fmt.Sprintf(gateVantageConfig, "", canary.URL, stable.URL))
	a.start(Options{ConfigFile: a.path, HistoryLimit: 50, Vantage: "a"})
	b := &fixture{t: t, path: filepath.Join(t.TempDir(), "b.yml")}
	writeConfig(t, b.path, fmt.Sprintf(gateVantageConfig, ", vantages: [{name: a, url: \""+a.srv.URL+"\"}]", "http://127.0.0.1:1", stable.URL))
	b.start(Options{ConfigFile: b.path, HistoryLimit: 50, Vantage: "b"})
	// Each fixture's stop checks that no goroutine of ours is left: stop
	// both before either checks (cleanups run last in, first out).
	t.Cleanup(func() {
		for _, f := range []*fixture{b, a} {
			f.cancel()
			f.cancel = nil
			if err := <-f.done; err != nil {
				t.Errorf("Run returned %v", err)
			}
		}
		checkNoGoroutines(t)
	})

	const q = "target=canary&reference=stable&latency_ratio=1.5"
	wait := func(f *fixture, query string, want int, reason ...string) gateAnswer {
		t.Helper()
		return f.waitGate(query, want, reason...)
	}
	wait(a, q+"&local=true", http.StatusOK)
	// b alone cannot judge the canary (no probe succeeds from it) or fails it.
	if own := wait(b, q+"&local=true", http.StatusServiceUnavailable); own.Verdict == "pass" {
		t.Fatalf("b's own verdict %+v", own)
	}
	ans := wait(b, q, http.StatusOK)
	if !strings.Contains(ans.Reason, "not judged from b") && !strings.Contains(ans.Reason, "fails from b only") {
		t.Errorf("b's verdict over both vantages does not say b's view differs: %q", ans.Reason)
	}

	// b's path restored (a reload), then the canary slow from everywhere.
	writeConfig(t, b.path, fmt.Sprintf(gateVantageConfig, ", vantages: [{name: a, url: \""+a.srv.URL+"\"}]", canary.URL, stable.URL))
	if code, body := b.post("/-/reload", "", nil); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	canary.admin(t, `{"itl":"30ms"}`)
	wait(a, q+"&local=true", http.StatusServiceUnavailable, "itl ratio")
	wait(b, q, http.StatusServiceUnavailable, "fails from every vantage (b, a)")
}

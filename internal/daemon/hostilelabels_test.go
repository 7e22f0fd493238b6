package daemon

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
)

// TestHostileDiscoveredLabelSets is a property test over discovered label
// sets: rounds of file_sd groups whose labels are drawn at random from the
// reserved names, valid names of their own and invalid names, with random
// values (empty, long, any Unicode), feed a daemon with a vantage beside a
// healthy static target. After every round /metrics answers 200, never
// panics, and still holds the static target's probe and server series and a
// series of each discovered target. Before reserved labels were dropped from
// discovered targets, a group label engine crashed the daemon at the next
// /metrics and vantage made every probe and server family fail to gather.
func TestHostileDiscoveredLabelSets(t *testing.T) {
	sim := startPlainSim(t, nil)
	addr := hostPort(t, sim)
	dir := t.TempDir()
	targetsFile := filepath.Join(dir, "targets", "fleet.json")
	if err := os.Mkdir(filepath.Dir(targetsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(41, 7))
	own := []string{"team", "zone", "pool_x", "a", "Z9_"}
	invalid := []string{"0bad", "bad-name", "é", "a.b", ""}
	value := func() string {
		switch rng.IntN(4) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("v", 1+rng.IntN(300))
		case 2:
			var b strings.Builder
			for range 1 + rng.IntN(20) {
				b.WriteRune(rune(1 + rng.IntN(0x2FFFF)))
			}
			return b.String()
		default:
			return "vllm"
		}
	}
	round := func(i int) (string, []string) {
		var groups []map[string]any
		var names []string
		for g := range 3 {
			name := fmt.Sprintf("disc-%d-%d", i, g)
			names = append(names, name)
			labels := map[string]string{"__target_name__": name}
			for range 1 + rng.IntN(6) {
				var n string
				switch rng.IntN(3) {
				case 0:
					n = config.ReservedLabels[rng.IntN(len(config.ReservedLabels))]
				case 1:
					n = own[rng.IntN(len(own))]
				default:
					n = invalid[rng.IntN(len(invalid))]
				}
				if n != "" {
					labels[n] = value()
				}
			}
			groups = append(groups, map[string]any{"targets": []string{addr}, "labels": labels})
		}
		b, err := json.Marshal(groups)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), names
	}
	body, names := round(0)
	writeAtomic(t, targetsFile, body)
	f := &fixture{t: t, path: filepath.Join(dir, "vllm_prober.yml")}
	writeConfig(t, f.path, fmt.Sprintf(`
global: {probe_interval: 200ms, scrape_interval: 300ms, scrape_timeout: 250ms, rate_window: 3s}
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 4}
targets:
  - {name: static, url: %q, labels: {preset: test}}
file_sd_configs:
  - files: [targets/*.json]
    refresh_interval: 1s
`, sim.URL))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 5, Vantage: "eu"})
	for i := range 6 {
		if i > 0 {
			body, names = round(i)
			writeAtomic(t, targetsFile, body)
		}
		want := []string{`vllm_probe_success{`, `vllm_server_up{`}
		waitFor(t, 20*time.Second, fmt.Sprintf("round %d: every discovered target's probe and the static target's series on /metrics", i), func() bool {
			code, body := f.get("/metrics")
			if code != http.StatusOK {
				t.Fatalf("round %d: /metrics = %d", i, code)
			}
			for _, l := range strings.Split(body, "\n") {
				for j, w := range want {
					if w != "" && strings.HasPrefix(l, w) && strings.Contains(l, `target="static"`) && strings.Contains(l, `vantage="eu"`) {
						want[j] = ""
					}
				}
			}
			for _, n := range names {
				if !strings.Contains(body, `vllm_probe_attempts_total{`) || !strings.Contains(body, `target="`+n+`"`) {
					return false
				}
			}
			return strings.Join(want, "") == ""
		})
	}
}

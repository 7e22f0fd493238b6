package daemon

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/genaiotel"
	"github.com/vllm-prober/vllm_prober/internal/genaiotel/otlptest"
)

// TestOTLPPushOwnedByTheDaemon: with global.otlp set, the daemon pushes
// nothing before the interval (an hour here) and, when Run returns, its last
// push carries every probe it recorded: as many durations of (sim,
// short_chat) as its history holds. The package's goleak check fails if the
// push outlives Run. A reload that changes global.otlp is refused, as one
// that changes the vantage.
func TestOTLPPushOwnedByTheDaemon(t *testing.T) {
	rc := &otlptest.Receiver{}
	recv := httptest.NewServer(rc)
	defer recv.Close()
	withOTLP := func(cfg, endpoint string) string {
		return strings.Replace(cfg, "global:\n", "global:\n  otlp:\n    endpoint: "+endpoint+"\n    interval: 1h\n", 1)
	}
	f := &fixture{t: t, sim: startSim(t, simKey), echo: startEcho(t)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	base := configText(f.sim.URL, f.echo.URL, "")
	writeConfig(t, f.path, withOTLP(base, recv.URL+"/v1/metrics"))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 50})
	waitFor(t, 20*time.Second, "three probes of sim", func() bool { return f.historyLen("sim", "short_chat") >= 3 })

	writeConfig(t, f.path, withOTLP(base, recv.URL+"/elsewhere"))
	if err := f.d.Reload(); err == nil || !strings.Contains(err.Error(), "global.otlp changed") {
		t.Errorf("reload changing global.otlp: err = %v, want it refused", err)
	}
	if n := rc.Pushes(); n != 0 {
		t.Errorf("%d pushes before the interval and the shutdown", n)
	}
	f.stop()
	probes := f.historyLen("sim", "short_chat")
	ms := rc.Last()
	if ms == nil {
		t.Fatal("the daemon's shutdown pushed nothing")
	}
	var count uint64
	for _, dp := range ms[genaiotel.MetricDuration].GetHistogram().GetDataPoints() {
		target, module := "", ""
		for _, kv := range dp.Attributes {
			switch kv.Key {
			case "vllm_prober.target":
				target = kv.Value.GetStringValue()
			case "vllm_prober.module":
				module = kv.Value.GetStringValue()
			}
		}
		if target == "sim" && module == "short_chat" {
			count += dp.Count
		}
	}
	if count != uint64(probes) {
		t.Errorf("%s of sim/short_chat: %d probes pushed, the daemon recorded %d", genaiotel.MetricDuration, count, probes)
	}
	if n := rc.Pushes(); n != 1 {
		t.Errorf("%d pushes, want the one at shutdown", n)
	}
}

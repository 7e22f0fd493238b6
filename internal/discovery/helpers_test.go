package discovery

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	slogkit "github.com/tjhop/slog-gokit"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/testutil"
)

// waitTimeout is generous: the machine running the tests is shared and noisy.
const waitTimeout = 15 * time.Second

// logBuffer is a go-kit logger whose output tests can read while it is written.
type logBuffer struct{ testutil.LogBuffer }

func (b *logBuffer) logger() log.Logger { return log.NewLogfmtLogger(b) }

// waitLog waits until the log holds every one of parts on one line.
func (b *logBuffer) waitLog(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(b.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no log line with %q; log:\n%s", parts, b.String())
	return ""
}

// loadConfig decodes a discovery section the way config.Config embeds it.
func loadConfig(t *testing.T, s string) config.Discovery {
	t.Helper()
	var f struct {
		Discovery config.Discovery `yaml:",inline"`
	}
	if err := yaml.UnmarshalStrict([]byte(s), &f); err != nil {
		t.Fatalf("decoding config: %v", err)
	}
	if err := f.Discovery.Validate(); err != nil {
		t.Fatalf("validating config: %v", err)
	}
	return f.Discovery
}

// runner runs Prometheus' discovery manager on a configuration, as the
// daemon does, and turns each list of groups it sends into targets
// (Targets).
type runner struct {
	updates chan []config.Target
	stop    func() // stops the discovery and waits for it

	mu      sync.Mutex
	current []config.Target
}

// run starts the discovery of cfg, with static targets, until the test ends,
// and checks that every goroutine it started returned. Its discoverers log
// to logger, as they log in the daemon.
func run(t *testing.T, cfg config.Discovery, static []config.Target, logger log.Logger) *runner {
	t.Helper()
	if logger == nil {
		logger = log.NewNopLogger()
	}
	reg := prometheus.NewRegistry()
	sdMetrics, err := promdiscovery.CreateAndRegisterSDMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	slogger := slog.New(slogkit.NewGoKitHandler(logger, nil))
	m := promdiscovery.NewManager(ctx, slogger, reg, sdMetrics, promdiscovery.Updatert(PublishDelay))
	r := &runner{updates: make(chan []config.Target, 1), current: Targets(nil, static, cfg, logger)}
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run() }()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for groups := range m.SyncCh() {
			ts := Targets(groups, static, cfg, logger)
			r.mu.Lock()
			r.current = ts
			r.mu.Unlock()
			select { // only the newest list
			case <-r.updates:
			default:
			}
			r.updates <- ts
		}
	}()
	if err := m.ApplyConfig(Sets(cfg)); err != nil {
		t.Fatal(err)
	}
	r.stop = sync.OnceFunc(func() {
		_ = m.ApplyConfig(nil) // stops the discoverers, waits for their providers
		cancel()
		for _, c := range []chan struct{}{done, readerDone} {
			select {
			case <-c:
			case <-time.After(waitTimeout):
				t.Error("discovery did not stop after cancel")
			}
		}
	})
	t.Cleanup(r.stop)
	return r
}

// targets is the latest target list.
func (r *runner) targets() []config.Target {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// waitTargets receives updates until want reports true for one, and returns it.
func waitTargets(t *testing.T, r *runner, what string, want func([]config.Target) bool) []config.Target {
	t.Helper()
	timeout := time.After(waitTimeout)
	var last []config.Target
	for {
		select {
		case ts := <-r.updates:
			last = ts
			if want(ts) {
				return ts
			}
		case <-timeout:
			t.Fatalf("waiting for %s: timed out; last update: %v", what, names(last))
		}
	}
}

func names(ts []config.Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func hasNames(want ...string) func([]config.Target) bool {
	return func(ts []config.Target) bool {
		got := names(ts)
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}
}

// writeAtomic replaces path's content in one step, as config management does.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func dir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

package discovery

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/internal/config"
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

// started runs m until the test ends and checks that Run returns and closes Updates.
func started(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Fatal("Run did not return after cancel")
		}
		for range m.Updates() { // drains, and ends only if Run closed it
		}
	})
}

// waitTargets receives updates until want reports true for one, and returns it.
func waitTargets(t *testing.T, m *Manager, what string, want func([]config.Target) bool) []config.Target {
	t.Helper()
	timeout := time.After(waitTimeout)
	var last []config.Target
	for {
		select {
		case ts, ok := <-m.Updates():
			if !ok {
				t.Fatalf("waiting for %s: Updates closed", what)
			}
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

// bySource indexes each discoverer's groups by source, as Run keeps them.
func bySource(providers [][]*targetgroup.Group) []map[string]*targetgroup.Group {
	out := make([]map[string]*targetgroup.Group, len(providers))
	for i, gs := range providers {
		out[i] = map[string]*targetgroup.Group{}
		for _, g := range gs {
			out[i][g.Source] = g
		}
	}
	return out
}

// testOptions are the Options of a test's Manager: its logger, and metrics
// that no registry holds.
func testOptions(logger log.Logger) Options { return Options{Logger: logger} }

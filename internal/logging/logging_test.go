package logging

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// layout is the one line layout of both binaries.
var layout = regexp.MustCompile(`^ts=\d{4}-\d\d-\d\dT\S+Z level=(info|warn) caller=logging_test\.go:\d+ (target=a )?msg=`)

// TestOneLayout: ts, level, caller, msg, however the logger is wrapped on
// the way: directly (the commands, vllm_sim), behind the redacting logger
// (the daemon), with context added by log.With.
func TestOneLayout(t *testing.T) {
	var buf bytes.Buffer
	base := New(&buf, "info", "logfmt")
	direct := log.With(base, "caller", log.DefaultCaller)
	red := redact.New()
	red.Learn("s3cret")
	wrapped := log.With(redact.Logger(base, red), "caller", log.DefaultCaller)
	level.Info(direct).Log("msg", "direct")
	level.Warn(log.With(direct, "target", "a")).Log("msg", "with context")
	level.Info(wrapped).Log("msg", "redacted", "key", "s3cret")
	level.Debug(direct).Log("msg", "dropped")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if !layout.MatchString(l) {
			t.Errorf("line %q is not in the layout ts= level= caller= msg=", l)
		}
	}
	if strings.Contains(buf.String(), "s3cret") {
		t.Errorf("secret logged:\n%s", buf.String())
	}
}

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/mixin"
)

func parseRules(t *testing.T, args ...string) (string, func(context.Context, log.Logger) int) {
	t.Helper()
	return parseRulesTo(t, os.Stderr, args...)
}

// parseRulesTo is parseRules with the command's errors written to stderr.
func parseRulesTo(t *testing.T, stderr io.Writer, args ...string) (string, func(context.Context, log.Logger) int) {
	t.Helper()
	app := kingpin.New("vllm_prober", "test")
	app.Terminate(nil)
	cmd, run := registerRulesCommandsTo(app, stderr)
	got, err := app.Parse(args)
	if err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	if got != cmd.FullCommand() {
		t.Fatalf("selected command %q, want %q", got, cmd.FullCommand())
	}
	return got, run
}

// TestRulesGenerateReproducesCommittedFiles runs the command as the README tells
// users to (from the repository root) and compares with alerts/.
func TestRulesGenerateReproducesCommittedFiles(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	out := t.TempDir()
	cmd, run := parseRules(t, "rules", "generate", "--out", out)
	if cmd != "rules generate" {
		t.Fatalf("command %q", cmd)
	}
	var logs bytes.Buffer
	if code := run(context.Background(), log.NewLogfmtLogger(&logs)); code != 0 {
		t.Fatalf("exit code %d, log:\n%s", code, logs.String())
	}
	for _, name := range []string{mixin.RulesFile, mixin.AlertsFile} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("alerts", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from alerts/%s", name, name)
		}
		if !strings.Contains(logs.String(), filepath.Join(out, name)) {
			t.Errorf("log does not name %s:\n%s", name, logs.String())
		}
	}
}

func TestRulesGenerateForScale(t *testing.T) {
	out := t.TempDir()
	_, run := parseRules(t, "rules", "generate", "--slo.file", "../../mixin/slo.yml", "--out", out, "--for-scale", "0.1")
	if code := run(context.Background(), log.NewNopLogger()); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	b, err := os.ReadFile(filepath.Join(out, mixin.AlertsFile))
	if err != nil {
		t.Fatal(err)
	}
	// VLLMLatencyRegression: for 30m × 0.1 = 3m.
	if !bytes.Contains(b, []byte("      - alert: VLLMLatencyRegression\n")) || !bytes.Contains(b, []byte("--for-scale 0.1")) || !bytes.Contains(b, []byte("        for: 3m\n")) {
		t.Errorf("scaled output lacks the scaled durations:\n%.600s", b)
	}
}

func TestRulesGenerateErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--slo.file", filepath.Join(t.TempDir(), "missing.yml")}, "reading SLO file"},
		{[]string{"--slo.file", "../../mixin/slo.yml", "--for-scale=-1"}, "scale factor must be a positive number, got -1"},
	} {
		var logs bytes.Buffer
		_, run := parseRulesTo(t, &logs, append([]string{"rules", "generate", "--out", t.TempDir()}, tc.args...)...)
		if code := run(context.Background(), log.NewNopLogger()); code != 1 {
			t.Errorf("%v: exit code %d, want 1", tc.args, code)
		}
		if !strings.Contains(logs.String(), tc.want) {
			t.Errorf("%v: log %q does not contain %q", tc.args, logs.String(), tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, run := parseRulesTo(t, io.Discard, "rules", "generate", "--slo.file", "../../mixin/slo.yml", "--out", t.TempDir())
	if code := run(ctx, log.NewNopLogger()); code != 1 {
		t.Errorf("cancelled context: exit code %d, want 1", code)
	}
}

package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/cli-errors/*.golden from the commands' output")

// TestCLIErrorTexts runs the commands on bad input, as a user does, and
// compares what they print on stderr with testdata/cli-errors/<name>.golden
// (go test ./cmd/vllm_prober -run TestCLIErrorTexts -update rewrites them):
// plain sentences naming the file, the place, what is wrong and what to do,
// a list for several problems, no logfmt.
func TestCLIErrorTexts(t *testing.T) {
	const td = "testdata/cli-errors/"
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"baseline-import-strict", []string{"baseline", "import", "--strict", "--out", "-", "../../internal/baseline/testdata/reports/multi-gpu-presets-report.md"}, 1},
		{"baseline-import-all-failed", []string{"baseline", "import", "--out", "-", "--name", "dead", "../../internal/baseline/testdata/vllm_bench_serve_allfailed_v0251.json"}, 1},
		{"baseline-import-unknown-format", []string{"baseline", "import", "--out", "-", td + "not-a-result.txt"}, 1},
		{"baseline-import-bad-ratio", []string{"baseline", "import", "--out", "-", "--min-success-ratio", "2", td + "not-a-result.txt"}, 1},
		{"bench-bad-concurrency", []string{"bench", "--url", "http://127.0.0.1:1", "--out", td + "unused", "--concurrency", "1,x"}, 1},
		{"bench-bad-options", []string{"bench", "--url", "http://127.0.0.1:1", "--out", td + "unused", "--prompt", "hi", "--random-input-len", "5", "--max-tokens=-1"}, 1},
		{"rules-generate-missing-slo", []string{"rules", "generate", "--slo.file", td + "missing-slo.yml", "--out", td + "unused"}, 1},
		{"config-check-yaml-bool", []string{"--config.check", "--config.file", td + "yaml-bool.yml"}, 1},
		{"config-check-unknown-keys", []string{"--config.check", "--config.file", td + "unknown-keys.yml"}, 1},
		{"config-check-missing-file", []string{"--config.check", "--config.file", td + "missing.yml"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb syncBuffer
			code := runArgs(context.Background(), c.args, &out, &errb)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			got := errb.String()
			golden := filepath.Join(td, c.name+".golden")
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("stderr differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
	if _, err := os.Stat(td + "unused"); !os.IsNotExist(err) {
		t.Errorf("a failing command created its output directory (stat: %v)", err)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/clierr"
)

func runBaselineCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	app := kingpin.New("vllm_prober", "test")
	app.Terminate(nil)
	var out, errb bytes.Buffer
	app.UsageWriter(&errb)
	app.ErrorWriter(&errb)
	cmd, run := registerBaselineCommandsTo(app, &out, &errb)
	selected, err := app.Parse(args)
	if err != nil {
		return -1, out.String(), err.Error()
	}
	if selected != cmd.FullCommand() {
		t.Fatalf("selected %q, want %q", selected, cmd.FullCommand())
	}
	code = run(context.Background(), log.NewLogfmtLogger(&errb))
	return code, out.String(), errb.String()
}

func TestBaselineImportWritesFile(t *testing.T) {
	dir := t.TempDir()
	outPath := filepath.Join(dir, "b.yaml")
	in := "../../internal/baseline/testdata/vllm_serve_new.json"
	code, _, stderr := runBaselineCLI(t, "baseline", "import", "--out", outPath, "--name", "llama", in)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{in + ": vllm-serve-json, 1 points\n", `baseline "llama": 1 points`, "wrote " + outPath} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	f, err := baseline.ReadFile(context.Background(), outPath)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := f.Lookup("llama")
	if !ok {
		t.Fatalf("no baseline llama in %+v", f.Baselines)
	}
	if got := *b.Points[0].OutputThroughput; got != 254.22 {
		t.Errorf("output_throughput = %v, want 254.22", got)
	}
}

func TestBaselineImportStdout(t *testing.T) {
	for _, outFlag := range [][]string{{"--out", "-"}, {"--out=-"}} {
		// The llmperf sample has 2 of 160 requests failed (0.9875): accepted at 0.98.
		args := append(append([]string{"baseline", "import", "--min-success-ratio=0.98"}, outFlag...), "../../internal/baseline/testdata/llmperf_summary.json")
		testImportStdout(t, args)
	}
}

func testImportStdout(t *testing.T, args []string) {
	t.Helper()
	code, stdout, stderr := runBaselineCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	f, err := baseline.Parse([]byte(stdout))
	if err != nil {
		t.Fatalf("stdout is not a baseline file: %v\n%s", err, stdout)
	}
	if f.Baselines[0].Name != "llmperf_summary" {
		t.Errorf("default name = %q, want the input's file stem", f.Baselines[0].Name)
	}
}

func TestBaselineImportBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(bad, []byte("just some notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, "b.yaml")
	code, _, stderr := runBaselineCLI(t, "baseline", "import", "--out", outPath, bad)
	if code == 0 {
		t.Fatal("exit 0 for an unrecognized input")
	}
	if !strings.Contains(stderr, bad+": unrecognized format") {
		t.Errorf("stderr does not name the file and the problem:\n%s", stderr)
	}
	if _, err := os.Stat(outPath); !os.IsNotExist(err) {
		t.Errorf("output written despite the error (stat: %v)", err)
	}
}

func TestBaselineImportMissingArgs(t *testing.T) {
	if code, _, stderr := runBaselineCLI(t, "baseline", "import", "--out", "x.yaml"); code != -1 || !strings.Contains(stderr, "required argument 'input' not provided") {
		t.Errorf("code %d, stderr %q: want a parse error about the missing input", code, stderr)
	}
}

func TestRegisterBaselineCommands(t *testing.T) {
	app := kingpin.New("vllm_prober", "test")
	cmd, run := registerBaselineCommands(app)
	if cmd.FullCommand() != "baseline import" || run == nil {
		t.Fatalf("command %q", cmd.FullCommand())
	}
	if _, err := app.Parse([]string{"baseline", "import", "--out", "x.yaml", "../../internal/baseline/testdata/vllm_serve_new.json"}); err != nil {
		t.Fatal(err)
	}
}

func TestBaselineImportAllFailedRefused(t *testing.T) {
	dir := t.TempDir()
	outPath := filepath.Join(dir, "dead.yaml")
	in := "../../internal/baseline/testdata/vllm_bench_serve_allfailed_v0251.json"
	code, _, stderr := runBaselineCLI(t, "baseline", "import", "--out", outPath, "--name", "dead", in)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{`every request failed (8 failed)`, "no usable point in its only baseline: every request failed", "--force writes it marked unusable"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(outPath); !os.IsNotExist(err) {
		t.Errorf("a refused baseline was written (stat: %v)", err)
	}
}

func TestBaselineImportPartialRunWarns(t *testing.T) {
	outPath := filepath.Join(t.TempDir(), "p.yaml")
	in := "../../internal/baseline/testdata/vllm_bench_serve_partial_v081.json"
	code, _, stderr := runBaselineCLI(t, "baseline", "import", "--out", outPath, "--keep-failed-points", in)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"warning: ", "derived failed = num_prompts - completed = 50 - 31 = 19", "19 of 50 requests failed (success ratio 0.62)", "kept (--keep-failed-points)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr = runBaselineCLI(t, "baseline", "import", "--out", outPath, "--min-success-ratio=1.5", in); code != 1 || !strings.Contains(stderr, "--min-success-ratio: 1.5 is not between 0 and 1") {
		t.Errorf("bad ratio: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestDaemonRefusesUnusableBaseline forces an all-failed run into a baseline file and starts the
// daemon on a configuration using it: the daemon refuses to load, naming the file and the
// baseline, instead of exporting silently empty series. --config.check on the same file
// (daemon.CheckConfig, the daemon's load) exits with the same code and the same message.
func TestDaemonRefusesUnusableBaseline(t *testing.T) {
	dir := t.TempDir()
	basePath := filepath.Join(dir, "dead.yaml")
	code, _, stderr := runBaselineCLI(t, "baseline", "import", "--force", "--out", basePath, "--name", "dead",
		"../../internal/baseline/testdata/vllm_bench_serve_allfailed_v0251.json")
	if code != 0 || !strings.Contains(stderr, "marked unusable: the daemon refuses it") {
		t.Fatalf("forced import: exit %d, stderr:\n%s", code, stderr)
	}
	data, err := os.ReadFile(basePath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "unusable: every request of its run failed (completed 0); imported with --force") {
		t.Errorf("forced file not marked unusable:\n%s", data)
	}

	cfgPath := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(cfgPath, []byte(`
modules:
  short: {prober: completions, prompt: hi, max_tokens: 4}
baselines: [{name: deadbase, file: dead.yaml}]
targets:
  - {name: sim, url: "http://127.0.0.1:1", baseline: deadbase}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code = runArgs(ctx, []string{"--config.file=" + cfgPath, "--web.listen-address=127.0.0.1:0"}, &out, &errb)
	want := basePath + `: baseline \"dead\" has no usable point (1 of 1 points had no successful request, 0 are excluded; marked unusable: every request of its run failed (completed 0); imported with --force)`
	if code != 1 || !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), `baseline \"deadbase\"`) {
		t.Errorf("daemon start = %d, want 1 and an error naming the configured baseline and %s; stderr:\n%s", code, want, errb.String())
	}

	checkCode, _, checkErr := runCLI(t, "--config.check", "--config.file="+cfgPath)
	if checkCode != code {
		t.Errorf("--config.check = %d, the daemon = %d; stderr:\n%s", checkCode, code, checkErr)
	}
	runMsg := errLine.FindStringSubmatch(errb.String())
	if runMsg == nil {
		t.Fatalf("no \"Error loading config\" line from the daemon:\n%s", errb.String())
	}
	daemonErr, err := strconv.Unquote(runMsg[1])
	if err != nil {
		t.Fatal(err)
	}
	// --config.check says the daemon's error, as a sentence.
	if wantCheck := clierr.Format("--config.check", configCheckError(cfgPath, errors.New(daemonErr))); checkErr != wantCheck {
		t.Errorf("--config.check says:\n%s\nwant the daemon's error:\n%s", checkErr, wantCheck)
	}
	if plain := strings.ReplaceAll(want, `\"`, `"`); !strings.Contains(checkErr, plain) {
		t.Errorf("--config.check message lacks %s:\n%s", plain, checkErr)
	}
	if strings.Contains(checkErr, "Config file is ok") {
		t.Errorf("--config.check called the file ok:\n%s", checkErr)
	}
}

// TestUnplaceableBaselineWarns: a baseline from the Lambda A100/H100 report (a throughput and an
// ITL at an unlimited rate, no concurrency, no E2E) can give no expected values. import warns,
// and the daemon's load, --config.check included, logs it naming the baseline and the file
// instead of exporting no expected values without a word.
func TestUnplaceableBaselineWarns(t *testing.T) {
	dir := t.TempDir()
	basePath := filepath.Join(dir, "lambda.yaml")
	code, _, stderr := runBaselineCLI(t, "baseline", "import", "--out", basePath, "--name", "lambda",
		"../../internal/baseline/testdata/reports/lambda-a100-h100-report.md")
	if code != 0 || !strings.Contains(stderr, "warning: 48 baselines (") || !strings.Contains(stderr, "give no expected values") {
		t.Fatalf("import: exit %d, stderr:\n%s", code, stderr)
	}
	cfgPath := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(cfgPath, []byte(`
modules:
  short: {prober: completions, prompt: hi, max_tokens: 4}
baselines: [{name: lambda/1xA100-80GB-SXM/Meta-Llama-3.1-8B-FP8, file: lambda.yaml}]
targets:
  - {name: sim, url: "http://127.0.0.1:1", baseline: lambda/1xA100-80GB-SXM/Meta-Llama-3.1-8B-FP8}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "--config.check", "--config.file="+cfgPath)
	want := `msg="baseline gives no expected values" baseline=lambda/1xA100-80GB-SXM/Meta-Llama-3.1-8B-FP8 file=` + basePath
	if code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "none of its 1 usable points can be placed") {
		t.Errorf("--config.check: exit %d, want 0 and %q in stderr:\n%s", code, want, stderr)
	}
}

// TestBaselineImportMultiGPUPresetsReport imports the multi-GPU presets report
// with the command, as a user does: 14 of its 86 baselines have only a point
// whose success ratio is below 0.99. The command writes the 72 others, says
// which were left out and why, one line each, and a summary, and exits 0;
// --strict exits 1 and writes nothing.
func TestBaselineImportMultiGPUPresetsReport(t *testing.T) {
	in := "../../internal/baseline/testdata/reports/multi-gpu-presets-report.md"
	outPath := filepath.Join(t.TempDir(), "presets.yml")
	code, _, stderr := runBaselineCLI(t, "baseline", "import", "--out", outPath, in)
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	f, err := baseline.ReadFile(context.Background(), outPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Baselines) != 72 {
		t.Errorf("%d baselines written, want 72", len(f.Baselines))
	}
	for _, b := range f.Baselines {
		if b.UsablePoints() == 0 {
			t.Errorf("baseline %q written without a usable point", b.Name)
		}
	}
	left := regexp.MustCompile(`(?m)^left out: baseline "[^"]+": its only point has a success ratio of [0-9.]+, below --min-success-ratio 0\.99$`).FindAllString(stderr, -1)
	if len(left) != 14 {
		t.Errorf("%d left-out lines, want 14:\n%s", len(left), stderr)
	}
	if !strings.Contains(stderr, "\n72 baselines written, 14 left out: every point below --min-success-ratio 0.99\n") {
		t.Errorf("no summary line:\n%s", stderr)
	}
	for _, l := range strings.Split(stderr, "\n") {
		if len(l) > 300 {
			t.Errorf("a line of %d characters: %.120s...", len(l), l)
		}
	}

	strictOut := filepath.Join(t.TempDir(), "strict.yml")
	code, _, stderr = runBaselineCLI(t, "baseline", "import", "--strict", "--out", strictOut, in)
	if code != 1 || !strings.Contains(stderr, "14 of 86 baselines were left out, and --strict refuses that; nothing written") {
		t.Errorf("--strict: exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(strictOut); !os.IsNotExist(err) {
		t.Errorf("--strict wrote the file (stat: %v)", err)
	}
}

// baseline import --goodput states the objectives vllm bench serve's
// --save-result does not keep: the written file carries the attainment
// (7 good of 8, vllm_bench_serve_goodput_v0251.json) and the objectives in
// seconds; without the flag a note says the goodput is not compared.
func TestBaselineImportGoodput(t *testing.T) {
	in := "../../internal/baseline/testdata/vllm_bench_serve_goodput_v0251.json"
	code, stdout, stderr := runBaselineCLI(t, "baseline", "import", "--out", "-", "--goodput", "ttft:200 tpot:50", in)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"slo_attainment: 0.875", "goodput_objectives:", "ttft_seconds: 0.2", "tpot_seconds: 0.05"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stderr, "objectives unknown") {
		t.Errorf("objectives stated, yet noted unknown:\n%s", stderr)
	}
	code, stdout, stderr = runBaselineCLI(t, "baseline", "import", "--out", "-", in)
	if code != 0 || !strings.Contains(stderr, "note: goodput objectives unknown") || strings.Contains(stdout, "goodput_objectives") {
		t.Errorf("without --goodput: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runBaselineCLI(t, "baseline", "import", "--out", "-", "--goodput", "ttft=200", in)
	if code != 1 || !strings.Contains(stderr, "--goodput") || !strings.Contains(stderr, "KEY:MS") {
		t.Errorf("bad --goodput: exit %d, stderr:\n%s", code, stderr)
	}
}

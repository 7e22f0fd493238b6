package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/baseline"
	"github.com/vllm-prober/vllm_prober/simulator"
)

func runBenchCLI(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	app := kingpin.New("vllm_prober", "test")
	app.Terminate(nil)
	var out, errb bytes.Buffer
	app.UsageWriter(&errb)
	app.ErrorWriter(&errb)
	cmd, run := registerBenchCommandsTo(app, &out, &errb)
	selected, err := app.Parse(args)
	if err != nil {
		return -1, out.String(), err.Error()
	}
	if selected != cmd.FullCommand() {
		t.Fatalf("selected %q, want %q", selected, cmd.FullCommand())
	}
	code = run(ctx, log.NewLogfmtLogger(&errb))
	return code, out.String(), errb.String()
}

func startBenchSim(t *testing.T) string {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Model = "sim/model"
	cfg.TTFT = 5 * time.Millisecond
	cfg.ITL = 2 * time.Millisecond
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		_ = sim.Close()
		srv.Close()
	})
	return srv.URL
}

func TestBenchCommandWritesResults(t *testing.T) {
	url := startBenchSim(t)
	dir := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runBenchCLI(t, context.Background(), "bench", "--url", url, "--out", dir, "--requests", "3",
		"--concurrency", "1, 2", "--request-rate", "inf", "--max-tokens", "5", "--ignore-eos", "--name", "run1",
		"--metric-percentiles", "50,99")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if n := strings.Count(stdout, "============ Serving Benchmark Result ============\n"); n != 3 {
		t.Errorf("%d summary blocks on stdout, want 3:\n%s", n, stdout)
	}
	for _, want := range []string{"Maximum request concurrency:             2         \n", "P50 TTFT (ms):", "Successful requests:                     3         \n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("a progress bar was drawn on a stderr that is not a terminal:\n%q", stderr)
	}
	for _, name := range []string{"run1.csv", "run1-c1.json", "run1-c2.json", "run1-qpsinf.json", "run1-c1-server.csv",
		"run1.baseline.yaml", "run1-gen-tps.svg", "run1-throughput-latency.svg"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("missing output: %v", err)
		}
		if !strings.Contains(stderr, filepath.Join(dir, name)) {
			t.Errorf("stderr does not list %s", name)
		}
	}
	f, err := baseline.ReadFile(context.Background(), filepath.Join(dir, "run1.baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, ok := f.Lookup("run1")
	if !ok || len(b.Points) != 3 || b.Model != "sim/model" {
		t.Fatalf("baseline: %+v", f.Baselines)
	}
	// The baseline import command reads bench's JSON.
	code, _, stderr = runBaselineCLI(t, "baseline", "import", "--out", filepath.Join(dir, "again.yaml"), "--name", "again",
		filepath.Join(dir, "run1-c1.json"), filepath.Join(dir, "run1-c2.json"))
	if code != 0 {
		t.Fatalf("baseline import of bench JSON: exit %d:\n%s", code, stderr)
	}
}

func TestBenchCommandBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "1,x"}, `msg="invalid --concurrency" err="\"x\" is not a positive integer"`},
		{[]string{"--request-rate", "0"}, `msg="invalid --request-rate" err="\"0\" is neither a positive number nor \"inf\""`},
		{[]string{"--metric-percentiles", "100"}, `msg="invalid --metric-percentiles" err="\"100\" is not a percentile in (0, 100)"`},
		{[]string{"--prompt", "hi", "--random-input-len", "5"}, `invalid benchmark options: give either a prompt or a random input length, not both`},
	} {
		args := append([]string{"bench", "--url", "http://127.0.0.1:1", "--out", t.TempDir()}, c.args...)
		code, _, stderr := runBenchCLI(t, context.Background(), args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 1 and %q", c.args, code, stderr, c.want)
		}
	}
}

func TestBenchCommandInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, stderr := runBenchCLI(t, ctx, "bench", "--url", "http://127.0.0.1:1", "--out", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "waiting for /v1/models: context canceled") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

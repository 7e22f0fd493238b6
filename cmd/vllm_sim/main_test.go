package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

func TestFlagDefaultsMatchDefaultConfig(t *testing.T) {
	app := kingpin.New("t", "")
	cfg := simulator.DefaultConfig()
	addFlags(app, &cfg)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, simulator.DefaultConfig()) {
		t.Errorf("flag defaults differ from DefaultConfig:\n%+v\n%+v", cfg, simulator.DefaultConfig())
	}
}

func TestFlagsSetConfig(t *testing.T) {
	app := kingpin.New("t", "")
	cfg := simulator.DefaultConfig()
	lora, _ := addFlags(app, &cfg)
	_, err := app.Parse([]string{
		"--lora-modules=sql-lora=/adapters/sql,chat-lora", "--lora-modules=third",
		"--web.listen-address=127.0.0.1:9", "--model=x/y", "--max-model-len=2048", "--max-num-seqs=4",
		"--kv-cache-tokens=8192", "--block-size=32", "--data-parallel-size=2", "--ttft=150ms", "--itl=20ms",
		"--batch-slowdown=0.1", "--prefill-per-token=1us", "--jitter=0.2", "--metrics.names=legacy",
		"--error-shape=flat", "--vllm-version=0.9.2", "--trace.file=/tmp/t", "--api-key=k", "--fault=stall",
		"--fault-rate=0.5", "--fault-status=503", "--fault-after=3", "--fault-delay=2s", "--seed=7",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := simulator.DefaultConfig()
	want.ListenAddress, want.Model, want.MaxModelLen, want.MaxNumSeqs = "127.0.0.1:9", "x/y", 2048, 4
	want.KVCacheTokens, want.BlockSize, want.DataParallelSize = 8192, 32, 2
	want.TTFT, want.ITL, want.BatchSlowdown, want.PrefillPerToken, want.Jitter = 150*time.Millisecond, 20*time.Millisecond, 0.1, time.Microsecond, 0.2
	want.MetricsNames, want.ErrorShape, want.Version, want.TraceFile, want.APIKey = "legacy", "flat", "0.9.2", "/tmp/t", "k"
	want.Fault, want.FaultRate, want.FaultStatus, want.FaultAfter, want.FaultDelay, want.Seed = "stall", 0.5, 503, 3, 2*time.Second, 7
	if cfg.LoRAModules, err = simulator.ParseLoRAModules(*lora); err != nil {
		t.Fatal(err)
	}
	want.LoRAModules = []simulator.LoRAModule{{Name: "sql-lora", Path: "/adapters/sql"}, {Name: "chat-lora"}, {Name: "third"}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("parsed config\n got %+v\nwant %+v", cfg, want)
	}
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	if code := run([]string{"--block-size=0", "--log.level=error"}); code != 1 {
		t.Errorf("run with --block-size=0 = %d, want 1", code)
	}
	if code := run([]string{"--lora-modules=a,,b"}); code != 2 {
		t.Errorf("run with an empty --lora-modules item = %d, want 2", code)
	}
	if code := run([]string{"--model=m", "--lora-modules=m", "--log.level=error"}); code != 1 {
		t.Errorf("run with an adapter named like the base model = %d, want 1", code)
	}
	if code := run([]string{"--metrics.names=v2"}); code != 2 {
		t.Errorf("run with a bad enum = %d, want 2", code)
	}
}

func TestServeAndShutdown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sim, err := simulator.New(simulator.DefaultConfig(), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, addr, sim, log.NewNopLogger()) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("/health = %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never came up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after cancel")
	}
}

// TestLogLayout: vllm_sim logs in vllm_prober's layout (internal/logging):
// ts, level, caller, msg.
func TestLogLayout(t *testing.T) {
	var buf bytes.Buffer
	level.Info(newLogger(&buf, "info", "logfmt")).Log("msg", "Listening")
	if !regexp.MustCompile(`^ts=\S+Z level=info caller=main_test\.go:\d+ msg=Listening\n$`).MatchString(buf.String()) {
		t.Errorf("log line %q is not ts= level= caller= msg=", buf.String())
	}
}

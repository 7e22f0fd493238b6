// Command vllm_sim is a GPU-free vLLM simulator: an OpenAI-compatible HTTP
// server with vLLM's SSE, error and /metrics shapes and a continuous-batching
// load model. See docs/simulator.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"

	"github.com/vllm-prober/vllm_prober/internal/logging"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	app := kingpin.New("vllm_sim", "A GPU-free vLLM simulator speaking vLLM's HTTP, SSE and /metrics surface.")
	cfg := simulator.DefaultConfig()
	loraModules, kvTransfer := addFlags(app, &cfg)
	logLevel := app.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").
		Default("info").Enum("debug", "info", "warn", "error")
	logFormat := app.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").
		Default("logfmt").Enum("logfmt", "json")
	app.Version(version.Print("vllm_sim"))
	app.HelpFlag.Short('h')
	if _, err := app.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "vllm_sim: %v\n", err)
		return 2
	}
	mods, err := simulator.ParseLoRAModules(*loraModules)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vllm_sim: --lora-modules: %v\n", err)
		return 2
	}
	cfg.LoRAModules = mods
	if cfg.KVTransfer, err = simulator.ParseKVTransferConfig(*kvTransfer); err != nil {
		fmt.Fprintf(os.Stderr, "vllm_sim: --kv-transfer-config: %v\n", err)
		return 2
	}
	logger := newLogger(os.Stderr, *logLevel, *logFormat)
	level.Info(logger).Log("msg", "Starting vllm_sim", "version", version.Info())

	sim, err := simulator.New(cfg, logger)
	if err != nil {
		level.Error(logger).Log("msg", "Invalid configuration", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg.ListenAddress, sim, logger); err != nil {
		level.Error(logger).Log("msg", "Server failed", "err", err)
		return 1
	}
	return 0
}

// addFlags binds every flag to c and returns the raw --lora-modules values
// and --kv-transfer-config, which run parses into c.LoRAModules and
// c.KVTransfer.
func addFlags(app *kingpin.Application, c *simulator.Config) (lora *[]string, kvTransfer *string) {
	app.Flag("web.listen-address", "Address to listen on.").Default(c.ListenAddress).StringVar(&c.ListenAddress)
	app.Flag("model", "Served model name.").Default(c.Model).StringVar(&c.Model)
	lora = app.Flag("lora-modules", "LoRA adapters served on top of --model, as name[=path][,name[=path]...]; repeatable. Listed in /v1/models with parent = the base model; their traffic is counted under the base model_name.").Strings()
	app.Flag("max-model-len", "Maximum prompt plus generated tokens per request.").Default(fmt.Sprint(c.MaxModelLen)).IntVar(&c.MaxModelLen)
	app.Flag("reasoning-tokens", "A reasoning model: the first N tokens of a streamed chat completion are reasoning_content deltas, counted in usage.completion_tokens_details.reasoning_tokens; 0 for none.").Default(fmt.Sprint(c.ReasoningTokens)).IntVar(&c.ReasoningTokens)
	app.Flag("max-num-seqs", "Maximum running requests per engine; the rest wait.").Default(fmt.Sprint(c.MaxNumSeqs)).IntVar(&c.MaxNumSeqs)
	app.Flag("max-num-queued-reqs", "Maximum requests in flight (waiting or running, all engines), as vLLM's flag of that name: one more is refused with vLLM's 503 \"Request queue full.\". 0: no limit.").Default(fmt.Sprint(c.MaxNumQueuedReqs)).IntVar(&c.MaxNumQueuedReqs)
	app.Flag("kv-cache-tokens", "KV cache capacity per engine, in tokens.").Default(fmt.Sprint(c.KVCacheTokens)).IntVar(&c.KVCacheTokens)
	app.Flag("block-size", "KV cache block size in tokens.").Default(fmt.Sprint(c.BlockSize)).IntVar(&c.BlockSize)
	app.Flag("data-parallel-size", "Number of data-parallel engines.").Default(fmt.Sprint(c.DataParallelSize)).IntVar(&c.DataParallelSize)
	app.Flag("ttft", "Time to first token once scheduled, before the per-token prefill cost.").Default(c.TTFT.String()).DurationVar(&c.TTFT)
	app.Flag("itl", "Inter-token latency with a batch of one.").Default(c.ITL.String()).DurationVar(&c.ITL)
	app.Flag("batch-slowdown", "ITL grows by this fraction per additional running request.").Default(fmt.Sprint(c.BatchSlowdown)).Float64Var(&c.BatchSlowdown)
	app.Flag("prefill-per-token", "Extra time to first token per prompt token.").Default(c.PrefillPerToken.String()).DurationVar(&c.PrefillPerToken)
	app.Flag("jitter", "Scale each delay by a uniform factor in [1-jitter, 1+jitter].").Default(fmt.Sprint(c.Jitter)).Float64Var(&c.Jitter)
	app.Flag("engine", "Engine whose surface is served: /metrics names, labels and units, streaming quirks, error bodies, health and models answers; vllm also serves sleep mode (POST /sleep, POST /wake_up, GET /is_sleeping).").Default(c.Engine).EnumVar(&c.Engine, simulator.EngineNames()...)
	app.Flag("spec-decode-tokens", "Speculative tokens drafted per step (0: no speculative decoding); exports the engine's spec_decode counters.").Default(fmt.Sprint(c.SpecDecodeTokens)).IntVar(&c.SpecDecodeTokens)
	app.Flag("spec-accept-rate", "Share of the draft tokens the target model accepts, 0..1.").Default(fmt.Sprint(c.SpecAcceptRate)).Float64Var(&c.SpecAcceptRate)
	app.Flag("metrics.names", "Metric surface: v1 (current), v0.10 (transitional), legacy (pre-0.9).").Default(c.MetricsNames).EnumVar(&c.MetricsNames, simulator.MetricsV1, simulator.MetricsV010, simulator.MetricsLegacy)
	app.Flag("error-shape", "Error body shape: nested (vLLM >= 0.10.1) or flat (older).").Default(c.ErrorShape).EnumVar(&c.ErrorShape, simulator.ErrorShapeNested, simulator.ErrorShapeFlat)
	app.Flag("vllm-version", "Version reported by /version (default matches --metrics.names).").Default(c.Version).StringVar(&c.Version)
	app.Flag("trace.file", "Write one JSON line per streamed event to this file.").Default(c.TraceFile).StringVar(&c.TraceFile)
	app.Flag("api-key", "When set, /v1/* requires 'Authorization: Bearer <key>'.").Envar("VLLM_API_KEY").Default(c.APIKey).StringVar(&c.APIKey)
	app.Flag("fault", "Fault active at start (see docs/simulator.md).").Default(c.Fault).StringVar(&c.Fault)
	app.Flag("fault-rate", "Probability that a request gets the fault, 0..1.").Default(fmt.Sprint(c.FaultRate)).Float64Var(&c.FaultRate)
	app.Flag("fault-status", "HTTP status of the http_status fault.").Default(fmt.Sprint(c.FaultStatus)).IntVar(&c.FaultStatus)
	app.Flag("fault-after", "Tokens streamed before a stream fault strikes.").Default(fmt.Sprint(c.FaultAfter)).IntVar(&c.FaultAfter)
	app.Flag("fault-delay", "Delay added to /metrics by the slow_metrics fault.").Default(c.FaultDelay.String()).DurationVar(&c.FaultDelay)
	app.Flag("seed", "Seed for jitter and fault-rate draws.").Default(fmt.Sprint(c.Seed)).Uint64Var(&c.Seed)
	app.Flag("answers", "JSON file of prompt substrings to scripted answers (see docs/simulator.md).").Default(c.AnswersFile).StringVar(&c.AnswersFile)
	app.Flag("echo", "Answer with the prompt (chat: the last user message) when no scripted answer matches.").BoolVar(&c.Echo)
	app.Flag("embedding-dimension", "Length of the vectors /v1/embeddings returns.").Default(fmt.Sprint(c.EmbeddingDimension)).IntVar(&c.EmbeddingDimension)
	kvTransfer = app.Flag("kv-transfer-config", `vLLM's KV transfer config, as JSON: {"kv_connector":"NixlConnector","kv_role":"kv_both"} (or kv_producer, kv_consumer) serves prefill/decode disaggregation's kv_transfer_params and exports vLLM's NIXL metrics (see docs/simulator.md). Empty: no connector.`).Default("").String()
	app.Flag("kv-transfer-delay", "With --kv-transfer-config, how long a decode instance takes to pull a remote prefill's KV blocks (also /admin/config kv_transfer_delay).").Default(c.KVTransferDelay.String()).DurationVar(&c.KVTransferDelay)
	return lora, kvTransfer
}

// newLogger is vllm_prober's logger (internal/logging), with the caller:
// one layout for both binaries.
func newLogger(w io.Writer, lvl, format string) log.Logger {
	return log.With(logging.New(w, lvl, format), "caller", log.DefaultCaller)
}

// serve runs the HTTP server until ctx is cancelled, then closes the
// simulator (ending open streams) and shuts the server down.
func serve(ctx context.Context, addr string, sim *simulator.Simulator, logger log.Logger) error {
	srv := &http.Server{Addr: addr, Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	level.Info(logger).Log("msg", "Listening", "address", addr)
	select {
	case err := <-errc:
		_ = sim.Close()
		return fmt.Errorf("listening on %s: %w", addr, err)
	case <-ctx.Done():
	}
	level.Info(logger).Log("msg", "Shutting down")
	closeErr := sim.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return closeErr
}

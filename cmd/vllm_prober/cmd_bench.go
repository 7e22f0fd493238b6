package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"golang.org/x/term"

	"github.com/vllm-prober/vllm_prober/bench"
	"github.com/vllm-prober/vllm_prober/config"
)

// registerBenchCommands adds `bench` to app and returns its clause and the
// function that runs it.
func registerBenchCommands(app *kingpin.Application) (*kingpin.CmdClause, func(ctx context.Context, logger log.Logger) int) {
	return registerBenchCommandsTo(app, os.Stdout, os.Stderr)
}

// registerBenchCommandsTo is registerBenchCommands with injectable output
// streams. The progress bar goes to stderr only when stderr is a terminal.
func registerBenchCommandsTo(app *kingpin.Application, stdout, stderr io.Writer) (*kingpin.CmdClause, func(context.Context, log.Logger) int) {
	cmd := app.Command("bench", "Benchmark a vLLM server: N streaming requests at each fixed concurrency or Poisson request rate; "+
		"writes a CSV, one `vllm bench serve` JSON per level, a baseline file and SVG charts, and prints vLLM's summary block per level.")
	url := cmd.Flag("url", "Server root URL, e.g. http://127.0.0.1:8000.").Required().String()
	model := cmd.Flag("model", "Model to request (default: the first id of /v1/models).").String()
	out := cmd.Flag("out", "Directory for the results (created if missing).").Required().String()
	requests := cmd.Flag("requests", "Requests per load level.").Default(strconv.Itoa(bench.DefaultRequests)).Int()
	concurrency := cmd.Flag("concurrency", "Comma-separated fixed concurrencies (default 1,4,16 when no --request-rate is given).").String()
	rates := cmd.Flag("request-rate", "Comma-separated Poisson request rates in requests/s; \"inf\" sends every request at once.").String()
	seed := cmd.Flag("seed", "Seed of the Poisson arrivals and random prompts.").Default("0").Uint64()
	maxTokens := cmd.Flag("max-tokens", "max_tokens (max_completion_tokens for chat, max_output_tokens for responses) of every request.").Default(strconv.Itoa(bench.DefaultMaxTokens)).Int()
	prompt := cmd.Flag("prompt", "Fixed prompt of every request (default: the multi-GPU presets report's \""+bench.DefaultPrompt+"\").").String()
	inputLen := cmd.Flag("random-input-len", "Send random prompts of about this many tokens instead of a fixed prompt.").Default("0").Int()
	temperature := cmd.Flag("temperature", "Sampling temperature.").Default(strconv.FormatFloat(bench.DefaultTemperature, 'f', -1, 64)).Float64()
	ignoreEOS := cmd.Flag("ignore-eos", "Set ignore_eos so that every request generates max tokens.").Bool()
	endpoint := cmd.Flag("endpoint", "API to call: completions (/v1/completions), chat (/v1/chat/completions) or responses (/v1/responses).").
		Default(config.ProberCompletions).Enum(config.ProberCompletions, config.ProberChat, config.ProberResponses)
	metricsPath := cmd.Flag("metrics-path", "Path of the server's Prometheus metrics, polled every second.").Default("/metrics").String()
	name := cmd.Flag("name", "Run name: the baseline name and the prefix of every output file.").Default(bench.DefaultName).String()
	percentiles := cmd.Flag("metric-percentiles", "Comma-separated percentiles reported besides mean and median.").Default("90,99").String()
	apiKeyFile := cmd.Flag("api-key-file", "File holding the API key sent as a bearer token (never logged or written).").String()
	readyTimeout := cmd.Flag("ready-timeout", "How long to wait for /v1/models to answer.").Default(bench.DefaultReadyTimeout.String()).Duration()
	requestTimeout := cmd.Flag("request-timeout", "Timeout of each request.").Default(bench.DefaultRequestTimeout.String()).Duration()
	stallTimeout := cmd.Flag("stall-timeout", "Fail a stream that sends nothing for this long (0: never).").Default("0s").Duration()
	minSuccess := cmd.Flag("min-success-ratio", "A level whose completed/sent ratio is below this fails the command (exit 1) and withholds the baseline file.").
		Default(strconv.FormatFloat(bench.DefaultMinSuccessRatio, 'f', -1, 64)).Float64()
	force := cmd.Flag("force", "Write the baseline file even when a level is below --min-success-ratio; such points are marked excluded (a baseline without a usable point unusable), as baseline import --force marks them.").Bool()
	saveDetailed := cmd.Flag("save-detailed", "Add the per-request arrays of `vllm bench serve --save-detailed` (input_lens, output_lens, ttfts, itls, start_times, generated_texts with each whole generated text, errors) to each level's JSON.").Bool()

	run := func(ctx context.Context, logger log.Logger) int {
		opts := bench.Options{
			URL: *url, Model: *model, Endpoint: *endpoint, Requests: *requests, Seed: *seed,
			MaxTokens: *maxTokens, Temperature: *temperature, IgnoreEOS: *ignoreEOS, Prompt: *prompt,
			RandomInputLen: *inputLen, MetricsPath: *metricsPath, Name: *name,
			ReadyTimeout: *readyTimeout, RequestTimeout: *requestTimeout, StallTimeout: *stallTimeout,
			Summary: stdout, Logger: logger, MinSuccessRatio: *minSuccess, ForceBaseline: *force, SaveDetailed: *saveDetailed,
			Progress: stderr, ProgressBar: isTerminal(stderr),
		}
		if !(*minSuccess > 0 && *minSuccess <= 1) {
			level.Error(logger).Log("msg", "invalid --min-success-ratio", "err", fmt.Sprintf("%v is not in (0, 1]", *minSuccess))
			return 1
		}
		var err error
		if opts.Concurrencies, err = parseConcurrencies(*concurrency); err != nil {
			level.Error(logger).Log("msg", "invalid --concurrency", "err", err)
			return 1
		}
		if opts.RequestRates, err = parseRates(*rates); err != nil {
			level.Error(logger).Log("msg", "invalid --request-rate", "err", err)
			return 1
		}
		if len(opts.Concurrencies) == 0 && len(opts.RequestRates) == 0 {
			opts.Concurrencies = []int{1, 4, 16}
		}
		if opts.Percentiles, err = parseFloats(*percentiles); err != nil {
			level.Error(logger).Log("msg", "invalid --metric-percentiles", "err", err)
			return 1
		}
		if *apiKeyFile != "" {
			key, err := os.ReadFile(*apiKeyFile)
			if err != nil {
				level.Error(logger).Log("msg", "cannot read the API key file", "err", err)
				return 1
			}
			opts.Header = http.Header{"Authorization": {"Bearer " + strings.TrimSpace(string(key))}}
		}
		rep, runErr := bench.Run(ctx, opts)
		if rep == nil {
			level.Error(logger).Log("msg", "benchmark failed", "err", runErr)
			return 1
		}
		var files *bench.Files
		if len(rep.Levels) > 0 {
			var err error
			files, err = bench.WriteAll(*out, rep)
			if err != nil {
				level.Error(logger).Log("msg", "cannot write the results", "err", err)
				return 1
			}
			fmt.Fprintf(stderr, "wrote %s\n", strings.Join(files.Paths(*out), ", "))
		}
		failing := rep.FailingLevels()
		for _, lr := range failing {
			m := &lr.Metrics
			level.Error(logger).Log("msg", "too many failed requests: the level does not measure the server", "level", lr.Level,
				"failed", m.Failed, "sent", m.Completed+m.Failed, "success_ratio", strconv.FormatFloat(m.SuccessRatio(), 'f', 3, 64),
				"min_success_ratio", rep.MinSuccessRatio, "reasons", failureSummary(m.Failures))
		}
		if len(failing) > 0 {
			if files.Baseline != "" {
				level.Warn(logger).Log("msg", "--force: baseline written with the failing levels marked excluded",
					"file", filepath.Join(*out, files.Baseline))
			} else {
				level.Error(logger).Log("msg", "no baseline file written: a level is below --min-success-ratio (--force writes one)")
			}
		}
		if runErr != nil {
			if errors.Is(runErr, context.Canceled) {
				level.Warn(logger).Log("msg", "benchmark interrupted; the finished levels were written", "levels", len(rep.Levels), "err", runErr)
			} else {
				level.Error(logger).Log("msg", "benchmark failed; the finished levels were written", "levels", len(rep.Levels), "err", runErr)
			}
			return 1
		}
		if len(failing) > 0 {
			return 1
		}
		return 0
	}
	return cmd, run
}

// failureSummary is a level's failure breakdown on one line:
// "http_5xx (HTTP 500)=11, timeout=2".
func failureSummary(fs []bench.Failure) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Class() + "=" + strconv.Itoa(f.Count)
	}
	return strings.Join(parts, ", ")
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	// A character device is not enough: /dev/null is one too. x/term asks the
	// terminal driver (TCGETS), as schollz/progressbar itself does.
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseConcurrencies(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", p)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, p := range splitList(s) {
		if strings.EqualFold(p, "inf") {
			out = append(out, math.Inf(1))
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%q is neither a positive number nor \"inf\"", p)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	out := []float64{}
	for _, p := range splitList(s) {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0 && v < 100) {
			return nil, fmt.Errorf("%q is not a percentile in (0, 100)", p)
		}
		out = append(out, v)
	}
	return out, nil
}

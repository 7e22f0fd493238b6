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
	"golang.org/x/term"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/bench"
	"github.com/vllm-prober/vllm_prober/internal/clierr"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// registerBenchCommandsTo adds `bench` to app and returns its clause and the
// function that runs it, which writes to stdout and stderr. The progress bar goes to stderr only when stderr is a terminal.
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
		Default(config.ProberCompletions).Enum(probe.StreamedKinds()...)
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
	warmup := cmd.Flag("warmup", "Before each level's timed window, send one untimed request (max_tokens 1) per concurrency slot, all at once, so that the first wave "+
		"leaves on open connections from a warm process; the warm-up requests are not counted. --no-warmup sends the first wave cold.").Default("true").Bool()
	goodput := cmd.Flag("goodput", "Goodput objectives in vLLM bench serve's syntax, KEY:MILLISECONDS pairs (keys ttft, tpot, e2el, and itl_p99: the 99th percentile of a request's gaps), "+
		"e.g. --goodput 'ttft:200 tpot:50'; repeatable. A request is good when it succeeded and met every one: each level reports request_goodput and its attainment.").Strings()
	goodputTarget := cmd.Flag("goodput-target", "With --goodput, instead of --concurrency/--request-rate levels, search the highest concurrency whose attainment (good / all requests, failed ones included) "+
		"is at least this ratio, e.g. 0.99: doubling from 1, then bisecting to within 10 %, as GuideLLM's goodput profile does.").Float64()
	goodputMax := cmd.Flag("goodput-max-concurrency", "Highest concurrency the --goodput-target search tries.").Default(strconv.Itoa(bench.DefaultGoodputMaxConcurrency)).Int()
	gcLimit := cmd.Flag("gc-memory-limit", "During each level's timed window, turn Go's garbage collector off (GOGC=off) with this soft memory limit as its only trigger, "+
		"so that no collection pauses a measured stream; 0 keeps Go's default collector.").Default("1GiB").Bytes()

	run := func(ctx context.Context, logger log.Logger) int {
		opts := bench.Options{
			SkipWarmup: !*warmup, GCMemoryLimit: int64(*gcLimit),
			URL: *url, Model: *model, Endpoint: *endpoint, Requests: *requests, Seed: *seed,
			MaxTokens: *maxTokens, Temperature: *temperature, IgnoreEOS: *ignoreEOS, Prompt: *prompt,
			RandomInputLen: *inputLen, MetricsPath: *metricsPath, Name: *name,
			ReadyTimeout: *readyTimeout, RequestTimeout: *requestTimeout, StallTimeout: *stallTimeout,
			Summary: stdout, Logger: logger, MinSuccessRatio: *minSuccess, ForceBaseline: *force, SaveDetailed: *saveDetailed,
			Progress: stderr, ProgressBar: isTerminal(stderr),
		}
		fail := func(e clierr.Error) int {
			clierr.Print(stderr, "bench", e)
			return 1
		}
		if !(*minSuccess > 0 && *minSuccess <= 1) {
			return fail(clierr.Error{Place: "--min-success-ratio", Err: fmt.Errorf("%v is not in (0, 1]", *minSuccess),
				Fix: "give a ratio above 0 and at most 1, such as 0.99 (the default)."})
		}
		var err error
		if len(*goodput) > 0 {
			o, err := config.ParseGoodput(*goodput...)
			if err != nil {
				return fail(clierr.Error{Place: "--goodput", Err: err, Fix: "give KEY:MS pairs as vLLM's bench serve takes them, e.g. --goodput 'ttft:200 tpot:50 e2el:2000'."})
			}
			opts.Goodput = &o
		}
		if *goodputTarget != 0 {
			switch {
			case opts.Goodput == nil:
				return fail(clierr.Error{Place: "--goodput-target", Err: errors.New("no --goodput objectives to meet"), Fix: "give the objectives too, e.g. --goodput 'ttft:200 tpot:50' --goodput-target 0.99."})
			case !(*goodputTarget > 0 && *goodputTarget <= 1):
				return fail(clierr.Error{Place: "--goodput-target", Err: fmt.Errorf("%v is not in (0, 1]", *goodputTarget), Fix: "give an attainment ratio such as 0.99."})
			case *concurrency != "" || *rates != "":
				return fail(clierr.Error{Place: "--goodput-target", Err: errors.New("the search chooses the concurrencies itself"), Fix: "leave out --concurrency and --request-rate."})
			}
			opts.GoodputTarget, opts.GoodputMaxConcurrency = *goodputTarget, *goodputMax
		}
		if opts.Concurrencies, err = parseConcurrencies(*concurrency); err != nil {
			return fail(clierr.Error{Place: "--concurrency", Err: err, Fix: "give positive integers separated by commas, e.g. --concurrency 1,4,16."})
		}
		if opts.RequestRates, err = parseRates(*rates); err != nil {
			return fail(clierr.Error{Place: "--request-rate", Err: err, Fix: "give positive numbers or inf separated by commas, e.g. --request-rate 1,4,inf."})
		}
		if len(opts.Concurrencies) == 0 && len(opts.RequestRates) == 0 && opts.GoodputTarget == 0 {
			opts.Concurrencies = []int{1, 4, 16}
		}
		if opts.Percentiles, err = parseFloats(*percentiles); err != nil {
			return fail(clierr.Error{Place: "--metric-percentiles", Err: err, Fix: "give percentiles between 0 and 100 separated by commas, e.g. --metric-percentiles 50,90,99."})
		}
		if *apiKeyFile != "" {
			key, err := os.ReadFile(*apiKeyFile)
			if err != nil {
				return fail(clierr.Error{Place: "--api-key-file", Err: fmt.Errorf("cannot read the API key: %w", err), Fix: "give a readable file holding the key alone."})
			}
			opts.Header = http.Header{"Authorization": {"Bearer " + strings.TrimSpace(string(key))}}
		}
		rep, runErr := bench.Run(ctx, opts)
		if rep == nil {
			return fail(clierr.Error{Err: runErr, Fix: "check the flags above and that --url is the root of a vLLM server that answers /v1/models."})
		}
		var files *bench.Files
		if len(rep.Levels) > 0 {
			var err error
			files, err = bench.WriteAll(*out, rep)
			if err != nil {
				return fail(clierr.Error{File: *out, Err: fmt.Errorf("cannot write the results: %w", err), Fix: "check that --out names a writable directory."})
			}
			fmt.Fprintf(stderr, "wrote %s\n", strings.Join(files.Paths(*out), ", "))
		}
		if s := rep.GoodputSearch; s != nil {
			capped := ""
			if s.Capped {
				capped = " (the search's cap, --goodput-max-concurrency: the server may do more)"
			}
			fmt.Fprintf(stdout, "Highest concurrency meeting %s attainment of %s: %d%s\n",
				strconv.FormatFloat(s.Target, 'g', -1, 64), rep.Goodput, s.Highest, capped)
		}
		failing := rep.FailingLevels()
		if len(failing) > 0 {
			var lines []string
			for _, lr := range failing {
				m := &lr.Metrics
				lines = append(lines, fmt.Sprintf("%s: %d of %d requests failed (success ratio %s): %s", lr.Level, m.Failed, m.Completed+m.Failed,
					strconv.FormatFloat(m.SuccessRatio(), 'f', 3, 64), failureSummary(m.Failures)))
			}
			e := clierr.Error{Err: errors.New("too many failed requests: these levels do not measure the server, below --min-success-ratio " +
				strconv.FormatFloat(rep.MinSuccessRatio, 'g', -1, 64) + ":\n" + strings.Join(lines, "\n"))}
			if files.Baseline != "" {
				e.Fix = "the baseline file " + filepath.Join(*out, files.Baseline) + " was written anyway (--force), with these levels marked excluded."
			} else {
				e.Fix = "no baseline file was written; find why the requests failed (the reasons above, the server's log), or --force writes one with these levels marked excluded."
			}
			clierr.Print(stderr, "bench", e)
		}
		if runErr != nil {
			fix := fmt.Sprintf("the %d finished levels were written.", len(rep.Levels))
			if errors.Is(runErr, context.Canceled) {
				fmt.Fprintf(stderr, "vllm_prober bench: interrupted; %s\n", fix)
				return 1
			}
			return fail(clierr.Error{Err: runErr, Fix: fix})
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

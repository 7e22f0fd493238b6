package main

import (
	"context"
	"fmt"
	"io"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/clierr"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// registerRulesCommandsTo adds `rules generate [--slo.file mixin/slo.yml] [--out DIR] [--format F] [--for-scale F]` and returns
// the clause and its run function, which writes its errors to stderr.
//
// `rules generate` renders the recording rules and alerts of the monitoring mixin from the SLO file. With the
// defaults, run from the repository root, it reproduces alerts/vllm_prober.rules.yml and
// alerts/vllm_prober.alerts.yml byte for byte. --for-scale multiplies every `for` duration and evaluation
// window (for end-to-end tests on a real Prometheus; docs/runbook.md "Testing the rules end to end").
func registerRulesCommandsTo(app *kingpin.Application, stderr io.Writer) (generateCmd *kingpin.CmdClause, runGenerate func(ctx context.Context, logger log.Logger) int) {
	rules := app.Command("rules", "Prometheus rules of the vLLM monitoring mixin.")
	generateCmd = rules.Command("generate", "Render recording rules and alerts from the SLO file.")
	opts := mixin.Options{}
	generateCmd.Flag("slo.file", "SLO file with the objectives and thresholds.").Default("mixin/slo.yml").StringVar(&opts.SLOFile)
	generateCmd.Flag("out", "Directory to write the files to ("+mixin.RulesFile+" and "+mixin.AlertsFile+" for the prometheus format).").Default("alerts").StringVar(&opts.OutDir)
	generateCmd.Flag("for-scale", "Multiply every `for` duration and evaluation window by this factor (testing only; prometheus format).").Default("1").Float64Var(&opts.ForScale)
	generateCmd.Flag("format", "Output format: prometheus (recording rules and alerts), pyrra (ServiceLevelObjective CRs), sloth (prometheus/v1 spec) or openslo (v1).").
		Default(mixin.FormatPrometheus).EnumVar(&opts.Format, mixin.Formats...)
	generateCmd.Flag("pyrra.native-histograms", "Pyrra format: latency SLOs read the native probe histograms (latencyNative) instead of the classic buckets.").BoolVar(&opts.NativeHistograms)

	runGenerate = func(ctx context.Context, logger log.Logger) int {
		if err := ctx.Err(); err != nil {
			clierr.Print(stderr, "rules generate", clierr.Error{Err: fmt.Errorf("not generating rules: %w", err)})
			return 1
		}
		written, err := mixin.Generate(opts)
		if err != nil {
			clierr.Print(stderr, "rules generate", clierr.Error{File: opts.SLOFile, Err: err,
				Fix: "fix the SLO file (docs/runbook.md describes it), or give another with --slo.file; --out must be a writable directory."})
			return 1
		}
		for _, p := range written {
			level.Info(logger).Log("msg", "Wrote file", "format", opts.Format, "path", p)
		}
		return 0
	}
	return generateCmd, runGenerate
}

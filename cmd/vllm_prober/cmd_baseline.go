package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/baseline"
	"github.com/vllm-prober/vllm_prober/internal/atomicfile"
)

// registerBaselineCommands adds `baseline import --out FILE [--name N] INPUT...` to app and returns the
// command clause plus a run function executed when that command is selected.
func registerBaselineCommands(app *kingpin.Application) (importCmd *kingpin.CmdClause, runImport func(ctx context.Context, logger log.Logger) int) {
	return registerBaselineCommandsTo(app, os.Stdout, os.Stderr)
}

// registerBaselineCommandsTo is registerBaselineCommands with the output streams injectable for tests.
func registerBaselineCommandsTo(app *kingpin.Application, stdout, stderr io.Writer) (*kingpin.CmdClause, func(context.Context, log.Logger) int) {
	cmd := app.Command("baseline", "Work with benchmark baseline files (docs/baselines.md).")
	importCmd := cmd.Command("import", "Import benchmark results (vllm bench serve JSON or printed output, vLLM CI results, vllm bench sweep, guidellm, aiperf, genai-perf, llmperf, report tables) into a baseline file.")
	out := importCmd.Flag("out", "Baseline file to write; \"-\" writes to stdout.").Required().String()
	name := importCmd.Flag("name", "Baseline name (default: the first input's file name without extension). Several baselines from the inputs get name/<what differs>.").String()
	minRatio := importCmd.Flag("min-success-ratio", "A point whose success ratio (completed / (completed + failed)) is below this is kept in the file, marked excluded, and left out of expected values and the saturation figure.").
		Default(strconv.FormatFloat(baseline.DefaultMinSuccessRatio, 'g', -1, 64)).Float64()
	keepFailed := importCmd.Flag("keep-failed-points", "Use points below --min-success-ratio for expected values and the saturation figure anyway.").Bool()
	force := importCmd.Flag("force", "Write a baseline that has no usable point (every request failed) instead of refusing it; it is marked unusable and the daemon refuses to load it.").Bool()
	inputs := importCmd.Arg("input", "Benchmark result files; the format is detected from the content.").Required().ExistingFiles()

	run := func(ctx context.Context, logger log.Logger) int {
		var imports []*baseline.Import
		for _, in := range *inputs {
			im, err := baseline.ImportFile(ctx, in)
			if err != nil {
				level.Error(logger).Log("msg", "cannot import benchmark results", "err", err)
				return 1
			}
			fmt.Fprintf(stderr, "%s: %s, %d points\n", in, im.Format, im.NumPoints())
			for _, n := range im.Notes {
				fmt.Fprintf(stderr, "%s: note: %s\n", in, n)
			}
			imports = append(imports, im)
		}
		f, notes, err := baseline.Build(*name, imports)
		for _, n := range notes {
			fmt.Fprintf(stderr, "note: %s\n", n)
		}
		if err != nil {
			level.Error(logger).Log("msg", "cannot build the baseline file", "err", err)
			return 1
		}
		if !(*minRatio >= 0 && *minRatio <= 1) {
			level.Error(logger).Log("msg", "invalid flag", "err", fmt.Sprintf("--min-success-ratio %v is not between 0 and 1", *minRatio))
			return 1
		}
		notes, err = baseline.Assess(f, baseline.AssessOptions{MinSuccessRatio: *minRatio, KeepFailedPoints: *keepFailed, Force: *force})
		for _, n := range notes {
			fmt.Fprintf(stderr, "warning: %s\n", n)
		}
		if err != nil {
			level.Error(logger).Log("msg", "refusing to write a baseline without a usable point", "err", err)
			return 1
		}
		data, err := f.Marshal()
		if err != nil {
			level.Error(logger).Log("msg", "cannot encode the baseline file", "err", err)
			return 1
		}
		for _, b := range f.Baselines {
			sat := "no output throughput" // a table of latencies only (vLLM CI's older serving table)
			if v := b.SaturationOutputThroughput(); v > 0 {
				sat = fmt.Sprintf("saturation output throughput %.2f tok/s", v)
			}
			fmt.Fprintf(stderr, "baseline %q: %d points (%d usable), %s\n", b.Name, len(b.Points), b.UsablePoints(), sat)
		}
		// kingpin v2 hands a lone "-" to a flag as the empty string, so both mean stdout.
		if *out == "-" || *out == "" {
			if _, err := stdout.Write(data); err != nil {
				level.Error(logger).Log("msg", "cannot write the baseline file", "err", err)
				return 1
			}
			return 0
		}
		if err := atomicfile.Write(*out, data); err != nil {
			level.Error(logger).Log("msg", "cannot write the baseline file", "err", err)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %s\n", *out)
		return 0
	}
	return importCmd, run
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/atomicfile"
	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/clierr"
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

	goodput := importCmd.Flag("goodput", "The goodput objectives the inputs' goodput figures were measured against, in vLLM bench serve's --goodput syntax (KEY:MILLISECONDS, keys ttft, tpot, e2el, itl_p99), e.g. --goodput 'ttft:200 tpot:50'; "+
		"for files that do not keep them (vllm bench serve --save-result, inference-perf's lifecycle reports). Without it such goodput is imported but not compared with the live goodput.").Strings()
	strict := importCmd.Flag("strict", "Exit 1 and write nothing when a baseline of the inputs is left out for want of a usable point (for CI).").Bool()

	run := func(ctx context.Context, _ log.Logger) int {
		fail := func(file string, err error, fix string) int {
			clierr.Print(stderr, "baseline import", clierr.Error{File: file, Err: err, Fix: fix})
			return 1
		}
		if !(*minRatio >= 0 && *minRatio <= 1) {
			clierr.Print(stderr, "baseline import", clierr.Error{Place: "--min-success-ratio",
				Err: fmt.Errorf("%v is not between 0 and 1", *minRatio), Fix: "give a ratio such as 0.99 (the default) or 0.9."})
			return 1
		}
		var opts []baseline.ImportOption
		if len(*goodput) > 0 {
			o, err := config.ParseGoodput(*goodput...)
			if err != nil {
				clierr.Print(stderr, "baseline import", clierr.Error{Place: "--goodput", Err: err,
					Fix: "give KEY:MS pairs as vLLM's bench serve takes them, e.g. --goodput 'ttft:200 tpot:50 e2el:2000'."})
				return 1
			}
			opts = append(opts, baseline.WithGoodput(o))
		}
		var imports []*baseline.Import
		for _, in := range *inputs {
			im, err := baseline.ImportFile(ctx, in, opts...)
			if err != nil {
				return fail("", err, "check that the file is a result file of a tool docs/baselines.md lists (its format is detected from the content).")
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
			return fail("", err, "import the inputs one at a time, or give --name to name what they share.")
		}
		total := len(f.Baselines)
		notes, left, err := baseline.AssessAndLeaveOut(f, baseline.AssessOptions{MinSuccessRatio: *minRatio, KeepFailedPoints: *keepFailed, Force: *force})
		for _, n := range notes {
			fmt.Fprintf(stderr, "warning: %s\n", n)
		}
		if len(f.Baselines) > 0 || len(left) > 1 { // else the error says it
			for _, e := range left {
				fmt.Fprintf(stderr, "left out: baseline %q: %s\n", e.Name, e.Reason)
			}
		}
		if err != nil {
			return fail(strings.Join(*inputs, ", "), err, noUsableFix(left))
		}
		if len(left) > 0 {
			fmt.Fprintf(stderr, "%d %s written, %d left out: %s\n", len(f.Baselines), plural(len(f.Baselines), "baseline", "baselines"), len(left), leftOutSummary(left, *minRatio))
		}
		if *strict && len(left) > 0 {
			return fail("", fmt.Errorf("%d of %d baselines were left out, and --strict refuses that; nothing written", len(left), total),
				fmt.Sprintf("without --strict the %d usable ones are written; ", len(f.Baselines))+noUsableFix(left))
		}
		data, err := f.Marshal()
		if err != nil {
			return fail("", fmt.Errorf("encoding the baseline file: %w", err), "")
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
				return fail("-", fmt.Errorf("writing the baseline file: %w", err), "")
			}
			return 0
		}
		if err := atomicfile.Write(*out, data); err != nil {
			return fail(*out, fmt.Errorf("writing the baseline file: %w", err), "check that its directory exists and is writable.")
		}
		fmt.Fprintf(stderr, "wrote %s\n", *out)
		return 0
	}
	return importCmd, run
}

// leftOutSummary says in a few words why the baselines were left out:
// "every point below --min-success-ratio 0.99".
func leftOutSummary(left []baseline.Exclusion, minRatio float64) string {
	failed := 0
	for _, e := range left {
		if e.AllFailed {
			failed++
		}
	}
	below := fmt.Sprintf("every point below --min-success-ratio %g", minRatio)
	switch failed {
	case 0:
		return below
	case len(left):
		return "every request failed"
	}
	return fmt.Sprintf("%d with every point below --min-success-ratio %g, %d where every request failed", len(left)-failed, minRatio, failed)
}

// noUsableFix is what to do about baselines without a usable point.
func noUsableFix(left []baseline.Exclusion) string {
	for _, e := range left {
		if !e.AllFailed {
			return "--keep-failed-points or a lower --min-success-ratio uses points with failed requests; --force writes such baselines marked unusable."
		}
	}
	return "a run where every request failed measures nothing: run the benchmark again (--force writes it marked unusable, and the daemon refuses it)."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
)

// WriteSummary prints lr in the exact layout of `vllm bench serve`'s
// "Serving Benchmark Result" block (vllm/benchmarks/serve.py):
// "{:<40} {:<10}" / "{:<40} {:<10.2f}" lines, the header and section rules
// centred in 50 columns. E2EL is always included (as with
// --percentile-metrics ttft,tpot,itl,e2el); there is no goodput line. When
// requests failed, a "Failed requests by reason" block follows (writeFailures).
func WriteSummary(w io.Writer, lr *LevelResult, percentiles []float64) error {
	bw := bufio.NewWriter(w)
	m := &lr.Metrics
	intLine := func(label string, v int) { fmt.Fprintf(bw, "%-40s %-10d\n", label, v) }
	fLine := func(label string, v float64) { fmt.Fprintf(bw, "%-40s %-10.2f\n", label, v) }

	bw.WriteString(center(" Serving Benchmark Result ", 50, '=') + "\n")
	intLine("Successful requests:", m.Completed)
	intLine("Failed requests:", m.Failed)
	if lr.Level.Type == LoadConcurrency {
		intLine("Maximum request concurrency:", int(lr.Level.Value))
	} else if !math.IsInf(lr.Level.Value, 1) {
		fLine("Request rate configured (RPS):", lr.Level.Value)
	}
	fLine("Benchmark duration (s):", m.Duration.Seconds())
	intLine("Total input tokens:", m.TotalInput)
	intLine("Total generated tokens:", m.TotalOutput)
	fLine("Request throughput (req/s):", m.RequestThroughput)
	if lr.Goodput != nil { // as vLLM prints it with --goodput
		fLine("Request goodput (req/s):", lr.Goodput.RequestGoodput)
	}
	fLine("Output token throughput (tok/s):", m.OutputThroughput)
	fLine("Peak output token throughput (tok/s):", m.MaxOutputTokensPerS)
	fLine("Peak concurrent requests:", float64(m.MaxConcurrentRequests))
	fLine("Total token throughput (tok/s):", m.TotalTokenThroughput)
	for _, sec := range []struct {
		header, name string
		d            *Dist
	}{
		{"Time to First Token", "TTFT", &m.TTFT},
		{"Time per Output Token (excl. 1st token)", "TPOT", &m.TPOT},
		{"Inter-token Latency", "ITL", &m.ITL},
		{"End-to-end Latency", "E2EL", &m.E2E},
	} {
		bw.WriteString(center(sec.header, 50, '-') + "\n")
		fLine(fmt.Sprintf("Mean %s (ms):", sec.name), sec.d.Mean*1000)
		fLine(fmt.Sprintf("Median %s (ms):", sec.name), sec.d.Median*1000)
		for i, p := range percentiles {
			fLine(fmt.Sprintf("P%s %s (ms):", PercentileLabel(p), sec.name), sec.d.Percentiles[i]*1000)
		}
	}
	bw.WriteString(strings.Repeat("=", 50) + "\n")
	writeFailures(bw, m.Failures)
	return bw.Flush()
}

// maxExample bounds the error message printed under each failure class.
const maxExample = 160

// writeFailures prints the failure breakdown of a level below its result
// block, in the block's layout, when a request failed: one line per class
// (the prober's failure reason, with the HTTP status of an error answer) and
// the first error message of the class. vLLM prints up to ten raw errors
// there instead ("Failed requests during benchmark run detected").
func writeFailures(bw *bufio.Writer, failures []Failure) {
	if len(failures) == 0 {
		return
	}
	bw.WriteString(center("Failed requests by reason", 50, '-') + "\n")
	for _, f := range failures {
		fmt.Fprintf(bw, "%-40s %-10d\n", f.Class()+":", f.Count)
		if f.Example != "" {
			ex := f.Example
			if len(ex) > maxExample {
				ex = strings.ToValidUTF8(ex[:maxExample], "") + "..."
			}
			fmt.Fprintf(bw, "  first error: %s\n", ex)
		}
	}
	bw.WriteString(strings.Repeat("=", 50) + "\n")
}

// center is Python's "{s:{c}^{n}}".format(...): s centred in n columns, the
// extra fill character (odd padding) on the right.
func center(s string, n int, fill byte) string {
	pad := n - len(s)
	if pad <= 0 {
		return s
	}
	left := pad / 2
	return strings.Repeat(string(fill), left) + s + strings.Repeat(string(fill), pad-left)
}

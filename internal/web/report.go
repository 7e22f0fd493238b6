package web

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/expfmt"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// debugReport is /probe?debug=true (reg: the metrics the probe would have
// returned) and /probe/record (reg nil: a stored record): what was sent, what
// came back and when, where it failed, and how it compares with the
// baseline. Everything goes through the scrubber.
func (h *handler) debugReport(cfg *config.Config, t *config.Target, module string, res *probe.Result, id uint64, reg *prometheus.Registry) string {
	s := h.scrubber
	var b strings.Builder
	if reg == nil {
		fmt.Fprintf(&b, "Stored record %d of target %q module %q (no new probe was run)\n", id, t.Name, module)
	} else {
		fmt.Fprintf(&b, "Probe of target %q module %q\n", t.Name, module)
	}
	fmt.Fprintf(&b, "URL: %s\n", t.URL)
	if m := cmp.Or(res.Model, h.probes.Model(t.Name)); m != "" {
		fmt.Fprintf(&b, "Model: %s\n", m)
	}
	fmt.Fprintf(&b, "Started: %s\n", res.Start.UTC().Format(time.RFC3339Nano))
	if res.Success {
		b.WriteString("Result: success\n")
	} else {
		fmt.Fprintf(&b, "Result: failure (reason %s)\n", res.Reason)
		if res.Phase != "" {
			fmt.Fprintf(&b, "Failed during %s: %s\n", res.Phase, res.Request)
		}
	}
	if res.Err != "" {
		fmt.Fprintf(&b, "Error: %s\n", res.Err)
	}
	if res.StatusCode != 0 {
		fmt.Fprintf(&b, "HTTP status: %d\n", res.StatusCode)
	}
	if res.Duration > 0 {
		fmt.Fprintf(&b, "Duration: %s\n", fmtDur(res.Duration))
	}
	e2e := fmtDur(res.E2E)
	if !res.Success && res.E2E > 0 {
		e2e += " (until the failure)"
	}
	fmt.Fprintf(&b, "TTFT: %s\nTPOT: %s\nE2E: %s\n", fmtDur(res.TTFT), fmtDur(res.TPOT), e2e)
	src := "counted"
	switch {
	case res.OutputTokensFromUsage:
		src = "from usage"
	case res.OutputTokensFromTimings:
		src = "from llama.cpp timings"
	case res.OutputTokensEstimated():
		src = "counted from content events: estimated"
	}
	fmt.Fprintf(&b, "Prompt tokens: %d\nOutput tokens: %d (%s)\n", res.PromptTokens, res.OutputTokens, src)
	if tps := res.OutputTokensPerSecond(); tps > 0 {
		fmt.Fprintf(&b, "Output tokens per second: %.2f\n", tps)
	} else {
		b.WriteString("Output tokens per second: -\n")
	}
	if n := len(res.ITLs); n > 0 {
		lo, hi, sum := res.ITLs[0], res.ITLs[0], time.Duration(0)
		for _, v := range res.ITLs {
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		fmt.Fprintf(&b, "Inter-token latencies: %d, min %s, mean %s, max %s\n", n, fmtDur(lo), fmtDur(sum/time.Duration(n)), fmtDur(hi))
	}
	h.writeBaseline(&b, t, module)

	b.WriteString("\nRequest:\n")
	if res.Request == "" {
		b.WriteString("  (none sent)\n")
	} else {
		fmt.Fprintf(&b, "  %s\n", res.Request)
		if res.RequestBody != "" {
			fmt.Fprintf(&b, "  %s\n", res.RequestBody)
		}
	}

	b.WriteString("\nTimeline:\n")
	if len(res.Events) == 0 {
		b.WriteString("  (empty: the probe failed before its completion request was sent)\n")
	}
	for _, ev := range res.Events {
		fmt.Fprintf(&b, "  %10.6fs  %s", ev.Offset.Seconds(), ev.Kind)
		if ev.Bytes > 0 {
			fmt.Fprintf(&b, "  %d bytes", ev.Bytes)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nRequest headers:\n")
	for _, l := range clientHeaderLines(&t.HTTPClientConfig, res.RequestHeader) {
		fmt.Fprintf(&b, "  %s  (added by the HTTP client from http_client_config)\n", l)
	}
	lines := s.headerLines(res.RequestHeader)
	if len(lines) == 0 && res.Phase == probe.PhaseModels {
		b.WriteString("  (the completion request was not sent)\n")
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("\nResponse headers:\n")
	lines = s.headerLines(res.ResponseHeader)
	if len(lines) == 0 {
		if res.StatusCode != 0 {
			b.WriteString("  (not kept: the failure was in model resolution)\n")
		} else {
			b.WriteString("  (none: no response was received)\n")
		}
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	if res.ErrorBody != "" {
		fmt.Fprintf(&b, "\nError response body (excerpt):\n  %s\n", res.ErrorBody)
	}
	if res.Text != "" {
		fmt.Fprintf(&b, "\nGenerated text (start):\n  %s\n", strings.ReplaceAll(res.Text, "\n", "\n  "))
	}

	if reg != nil {
		b.WriteString("\nMetrics that would have been returned:\n")
		mfs, err := reg.Gather()
		if err != nil {
			fmt.Fprintf(&b, "# error gathering metrics: %s\n", err)
		}
		var mb bytes.Buffer
		enc := expfmt.NewEncoder(&mb, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				fmt.Fprintf(&b, "# error encoding %s: %s\n", mf.GetName(), err)
			}
		}
		b.Write(mb.Bytes())
	}

	b.WriteString("\nModule configuration:\n")
	if out, err := yaml.Marshal(cfg.Modules[module]); err == nil {
		b.Write(out)
	}
	return s.scrub(b.String())
}

// writeBaseline adds the baseline's expectation at the target's current load
// and the live means' ratios to it, when the target has a baseline.
func (h *handler) writeBaseline(b *strings.Builder, t *config.Target, module string) {
	if t.Baseline == "" {
		return
	}
	c, ok := h.cmp.Compare(t.Name, module)
	if !ok {
		fmt.Fprintf(b, "Baseline %q: no expectation yet (the target's load is not known)\n", t.Baseline)
		return
	}
	fmt.Fprintf(b, "Baseline %q at load %.1f (running + waiting + 1), over %d successful probes of the window:\n", c.Baseline, c.Load, c.Live.N)
	b.WriteString("  (ratio is vllm_probe_regression_ratio: the median of live / expected over the window's time slices,\n" +
		"   so one slow probe moves the live mean but not the ratio)\n")
	for _, m := range []struct {
		name           string
		expected, live float64
		ratio          float64
	}{{"TTFT", c.Expected.TTFTMean, c.Live.TTFT, c.TTFT}, {"TPOT", c.Expected.TPOTMean, c.Live.TPOT, c.TPOT}} {
		fmt.Fprintf(b, "  %s expected %s, live mean %s, ratio %s", m.name, fmtSecondsMs(m.expected), fmtSecondsMs(m.live), fmtRatio(m.ratio))
		if m.ratio > h.threshold {
			fmt.Fprintf(b, " (above the alert threshold %.1f)", h.threshold)
		}
		b.WriteString("\n")
	}
	if math.IsNaN(c.Goodput) {
		fmt.Fprintf(b, "  goodput: no expected attainment (vllm_probe_expected_goodput_ratio not exported): %s\n", c.GoodputWhy)
	} else {
		fmt.Fprintf(b, "  goodput: expected attainment %.1f %% (vllm_probe_expected_goodput_ratio)\n", 100*c.Goodput)
	}
}

// clientHeaderLines lists the headers the HTTP client adds to every request
// from http_client_config, which the request headers a result keeps (those
// the prober set) do not show: "Authorization: <secret>" when credentials are
// configured, and each http_headers entry, its secrets and files as
// "<secret>" and its plain values as written.
func clientHeaderLines(c *commoncfg.HTTPClientConfig, sent http.Header) []string {
	var lines []string
	if (c.BearerToken != "" || c.BearerTokenFile != "" || c.Authorization != nil || c.BasicAuth != nil || c.OAuth2 != nil) &&
		sent.Get("Authorization") == "" {
		lines = append(lines, "Authorization: "+redact.Placeholder)
	}
	if c.HTTPHeaders == nil {
		return lines
	}
	names := slices.Sorted(maps.Keys(c.HTTPHeaders.Headers))
	for _, name := range names {
		h := c.HTTPHeaders.Headers[name]
		for _, v := range h.Values {
			lines = append(lines, http.CanonicalHeaderKey(name)+": "+v)
		}
		for range len(h.Secrets) + len(h.Files) {
			lines = append(lines, http.CanonicalHeaderKey(name)+": "+redact.Placeholder)
		}
	}
	return lines
}

package web

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/expfmt"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/internal/config"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// scrapeTimeoutOffset is subtracted from Prometheus' scrape timeout for /probe,
// as blackbox_exporter's --timeout-offset does, so that the probe answers before
// the scrape gives up.
const scrapeTimeoutOffset = 500 * time.Millisecond

// routes serves every page and endpoint of the daemon.
func (h *handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", h.landingPage)
	mux.Handle(h.opts.TelemetryPath, promhttp.InstrumentMetricHandler(h.opts.Registerer,
		promhttp.HandlerFor(h.opts.Gatherer, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      promLogger{h},
			// Several Prometheis may scrape at once; more would be a misconfiguration.
			MaxRequestsInFlight: 10,
			// OpenMetrics carries the exemplars (record_id) of the probe
			// histograms' classic buckets; protobuf is always offered.
			EnableOpenMetrics: true,
		})))
	mux.Handle("/probe", sameSiteOnly("/probe sends requests to targets", http.HandlerFunc(h.probeHandler)))
	mux.HandleFunc("/probe/record", h.recordHandler)
	mux.HandleFunc("/target", h.targetHandler)
	mux.HandleFunc("/config", h.configHandler)
	mux.HandleFunc("/gate", h.gateHandler)          // gate.go
	mux.Handle("/burst", adminPOST(h.burstHandler)) // burst.go
	mux.Handle("/-/reload", adminPOST(h.reloadHandler))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		textResponse(w, http.StatusOK, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !h.opts.Ready() {
			textResponse(w, http.StatusServiceUnavailable, "Not ready")
			return
		}
		textResponse(w, http.StatusOK, "Ready")
	})
	return mux
}

// promLogger sends promhttp's errors to our logger.
type promLogger struct{ h *handler }

func (l promLogger) Println(v ...any) {
	level.Error(l.h.logger).Log("msg", "Error serving metrics", "err", l.h.scrub(fmt.Sprint(v...)))
}

func textResponse(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, format, args...)
	fmt.Fprintln(w)
}

// reloadHandler is POST /-/reload (stateChanging guards it). It is on
// unless --no-web.enable-reload (Options.DisableReload).
func (h *handler) reloadHandler(w http.ResponseWriter, _ *http.Request) {
	if h.opts.DisableReload {
		textResponse(w, http.StatusForbidden, "Reloading over HTTP is not enabled (--no-web.enable-reload); send SIGHUP.")
		return
	}
	if err := h.opts.Reload(); err != nil {
		textResponse(w, http.StatusInternalServerError, "failed to reload config: %s", err)
		return
	}
	textResponse(w, http.StatusOK, "Config reloaded")
}

func (h *handler) configHandler(w http.ResponseWriter, _ *http.Request) {
	// Secrets are config.Secret values and marshal as <secret>; the scrubber is a
	// second line of defence (e.g. a key pasted into a prompt by mistake).
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(h.scrub(h.opts.Config().String())))
}

// probeHandler runs one probe now: /probe?target=NAME&module=M[&model=X][&debug=true];
// a target that is a URL is a URL probe (urlProbeHandler).
// model names one of the models of a target with models (default: the first
// listed). Without debug it answers the probe's metrics, as blackbox_exporter's /probe
// does; with debug a text report of the probe.
func (h *handler) probeHandler(w http.ResponseWriter, r *http.Request) {
	cfg := h.opts.Running() // this shard's static and discovered targets
	q := r.URL.Query()
	targetName := q.Get("target")
	if targetName == "" {
		textResponse(w, http.StatusBadRequest, "target parameter is missing; targets: %s", strings.Join(targetNames(cfg), ", "))
		return
	}
	if isProbeURL(targetName) {
		h.urlProbeHandler(w, r, cfg, targetName)
		return
	}
	t, ok := cfg.Target(targetName)
	if !ok {
		textResponse(w, http.StatusBadRequest, "unknown target %q; targets: %s", targetName, strings.Join(targetNames(cfg), ", "))
		return
	}
	module := q.Get("module")
	switch {
	case module == "" && len(t.Modules) == 1:
		module = t.Modules[0]
	case module == "":
		textResponse(w, http.StatusBadRequest, "module parameter is missing; modules of target %q: %s", t.Name, strings.Join(t.Modules, ", "))
		return
	case !slices.Contains(t.Modules, module):
		textResponse(w, http.StatusBadRequest, "module %q is not configured for target %q; modules: %s", module, t.Name, strings.Join(t.Modules, ", "))
		return
	}
	debug, _ := strconv.ParseBool(q.Get("debug"))

	ctx, cancel, err := scrapeTimeoutContext(r)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	defer cancel()

	model := q.Get("model")
	level.Debug(h.logger).Log("msg", "Probe requested", "target", t.Name, "module", module, "model", model, "debug", debug)
	res, reg, err := h.probes.ProbeModelNow(ctx, t.Name, module, model)
	switch {
	case errors.Is(err, prober.ErrUnknownModel):
		textResponse(w, http.StatusBadRequest, "%s", h.scrub(err.Error()))
		return
	case errors.Is(err, prober.ErrBudgetExceeded):
		textResponse(w, http.StatusTooManyRequests, "probe of target %q module %q not run: %s", t.Name, module, err)
		return
	case err != nil:
		msg := h.scrub(err.Error())
		level.Error(h.logger).Log("msg", "Probe failed to run", "target", t.Name, "module", module, "err", msg)
		textResponse(w, http.StatusInternalServerError, "probe of target %q module %q failed to run: %s", t.Name, module, msg)
		return
	case res == nil || reg == nil:
		textResponse(w, http.StatusInternalServerError, "probe of target %q module %q returned no result", t.Name, module)
		return
	}
	level.Debug(h.logger).Log("msg", "Probe finished", "target", t.Name, "module", module,
		"success", res.Success, "reason", res.Reason, "err", h.scrub(res.Err))
	if debug {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(h.debugReport(cfg, t, module, res, 0, reg)))
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

func targetNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Targets))
	for i, t := range cfg.Targets {
		names[i] = t.Name
	}
	return names
}

// recordHandler is /probe/record?target=T&module=M&id=N[&model=X]: the report of a
// probe the scheduler ran, from what the history kept. It runs no probe.
func (h *handler) recordHandler(w http.ResponseWriter, r *http.Request) {
	cfg := h.opts.Running()
	q := r.URL.Query()
	if id := q.Get("id"); strings.Contains(id, "-") {
		h.recordByIDHandler(w, cfg, id)
		return
	}
	t, ok := cfg.Target(q.Get("target"))
	if !ok {
		textResponse(w, http.StatusNotFound, "unknown target %q; targets: %s", q.Get("target"), strings.Join(targetNames(cfg), ", "))
		return
	}
	module := q.Get("module")
	id, err := strconv.ParseUint(q.Get("id"), 10, 64)
	if err != nil || id == 0 {
		textResponse(w, http.StatusBadRequest, "id %q is not a record id (a positive integer)", q.Get("id"))
		return
	}
	res, ok := h.probes.Record(t.Name, module, q.Get("model"), id)
	if !ok {
		textResponse(w, http.StatusNotFound, "record %d of target %q module %q is not kept: the history keeps the last %d probes and as many failures (--history.limit)",
			id, t.Name, module, h.opts.HistoryLimit)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(h.debugReport(cfg, t, module, &res.Result, res.ID, nil)))
}

// recordByIDHandler is /probe/record?id=<record id>, the link of a probe
// histogram's exemplar: the record of whichever pair of this replica made it.
func (h *handler) recordByIDHandler(w http.ResponseWriter, cfg *config.Config, rid string) {
	res, target, module, err := h.probes.RecordByID(rid)
	switch {
	case errors.Is(err, prober.ErrRecordGone) && target != "":
		textResponse(w, http.StatusNotFound, "Record %s of target %q module %q has aged out: the history keeps the last %d probes and as many failures of each target and module (--history.limit). Its observation still counts in the histograms.",
			rid, target, module, h.opts.HistoryLimit)
		return
	case errors.Is(err, prober.ErrRecordGone):
		textResponse(w, http.StatusNotFound, "Record %s is not kept: its target and module are no longer probed by this replica, or it has aged out of the history (--history.limit %d).",
			rid, h.opts.HistoryLimit)
		return
	case errors.Is(err, prober.ErrRecordElsewhere):
		textResponse(w, http.StatusNotFound, "Record %s is not on this replica (%s): a record lives on the replica that made it; open it on the replica its prefix names.", rid, err)
		return
	case err != nil:
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	t, ok := cfg.Target(target)
	if !ok {
		textResponse(w, http.StatusNotFound, "Record %s belongs to target %q, which is no longer configured.", rid, target)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(h.debugReport(cfg, t, module, &res.Result, res.ID, nil)))
}

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
}

func fmtSecondsMs(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmtDur(time.Duration(v * float64(time.Second)))
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
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

// fmtDur renders a duration in milliseconds with microsecond resolution, "-" for 0.
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
)

// scrapeTimeoutOffset is subtracted from Prometheus' scrape timeout for /probe,
// as blackbox_exporter's --timeout-offset does, so that the probe answers before
// the scrape gives up.
const scrapeTimeoutOffset = 500 * time.Millisecond

func (d *Daemon) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", d.landingPage)
	mux.Handle(d.opts.TelemetryPath, promhttp.InstrumentMetricHandler(d.reg,
		promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      promLogger{d},
			// Several Prometheis may scrape at once; more would be a misconfiguration.
			MaxRequestsInFlight: 10,
		})))
	mux.HandleFunc("/probe", d.probeHandler)
	mux.HandleFunc("/config", d.configHandler)
	mux.HandleFunc("/-/reload", d.reloadHandler)
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		textResponse(w, http.StatusOK, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !d.ready.Load() {
			textResponse(w, http.StatusServiceUnavailable, "Not ready")
			return
		}
		textResponse(w, http.StatusOK, "Ready")
	})
	return mux
}

// promLogger sends promhttp's errors to our logger.
type promLogger struct{ d *Daemon }

func (l promLogger) Println(v ...any) {
	level.Error(l.d.logger).Log("msg", "Error serving metrics", "err", l.d.scrub(fmt.Sprint(v...)))
}

func textResponse(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, format, args...)
	fmt.Fprintln(w)
}

func (d *Daemon) reloadHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		textResponse(w, http.StatusMethodNotAllowed, "This endpoint requires a POST request.")
		return
	}
	if err := d.Reload(); err != nil {
		textResponse(w, http.StatusInternalServerError, "failed to reload config: %s", err)
		return
	}
	textResponse(w, http.StatusOK, "Config reloaded")
}

func (d *Daemon) configHandler(w http.ResponseWriter, _ *http.Request) {
	// Secrets are config.Secret values and marshal as <secret>; the scrubber is a
	// second line of defence (e.g. a key pasted into a prompt by mistake).
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(d.scrub(d.sc.Config().String())))
}

// probeHandler runs one probe now: /probe?target=NAME&module=M[&debug=true].
// Without debug it answers the probe's metrics, as blackbox_exporter's /probe
// does; with debug a text report of the probe.
func (d *Daemon) probeHandler(w http.ResponseWriter, r *http.Request) {
	cfg := d.Running() // this shard's static and discovered targets
	q := r.URL.Query()
	targetName := q.Get("target")
	if targetName == "" {
		textResponse(w, http.StatusBadRequest, "target parameter is missing; targets: %s", strings.Join(targetNames(cfg), ", "))
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

	ctx := r.Context()
	if v := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs <= 0 {
			textResponse(w, http.StatusBadRequest, "X-Prometheus-Scrape-Timeout-Seconds %q is not a positive number", v)
			return
		}
		timeout := time.Duration(secs*float64(time.Second)) - scrapeTimeoutOffset
		if timeout <= 0 {
			timeout = time.Duration(secs * float64(time.Second))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}

	level.Debug(d.logger).Log("msg", "Probe requested", "target", t.Name, "module", module, "debug", debug)
	res, reg, err := d.probes.ProbeNow(ctx, t.Name, module)
	switch {
	case errors.Is(err, prober.ErrBudgetExceeded):
		textResponse(w, http.StatusTooManyRequests, "probe of target %q module %q not run: %s", t.Name, module, err)
		return
	case err != nil:
		msg := d.scrub(err.Error())
		level.Error(d.logger).Log("msg", "Probe failed to run", "target", t.Name, "module", module, "err", msg)
		textResponse(w, http.StatusInternalServerError, "probe of target %q module %q failed to run: %s", t.Name, module, msg)
		return
	case res == nil || reg == nil:
		textResponse(w, http.StatusInternalServerError, "probe of target %q module %q returned no result", t.Name, module)
		return
	}
	level.Debug(d.logger).Log("msg", "Probe finished", "target", t.Name, "module", module,
		"success", res.Success, "reason", res.Reason, "err", d.scrub(res.Err))
	if debug {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(d.debugReport(cfg, t, module, res, reg)))
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

// debugReport is /probe?debug=true: what was sent, what came back and when, and
// the metrics the probe would have returned. Everything goes through the scrubber.
func (d *Daemon) debugReport(cfg *config.Config, t *config.Target, module string, res *prober.Result, reg *prometheus.Registry) string {
	s := d.scrubber.Load()
	var b strings.Builder
	fmt.Fprintf(&b, "Probe of target %q module %q\n", t.Name, module)
	fmt.Fprintf(&b, "URL: %s\n", t.URL)
	if m := d.probes.Model(t.Name); m != "" {
		fmt.Fprintf(&b, "Model: %s\n", m)
	}
	fmt.Fprintf(&b, "Started: %s\n", res.Start.UTC().Format(time.RFC3339Nano))
	if res.Success {
		b.WriteString("Result: success\n")
	} else {
		fmt.Fprintf(&b, "Result: failure (reason %s)\n", res.Reason)
	}
	if res.Err != "" {
		fmt.Fprintf(&b, "Error: %s\n", res.Err)
	}
	if res.StatusCode != 0 {
		fmt.Fprintf(&b, "HTTP status: %d\n", res.StatusCode)
	}
	fmt.Fprintf(&b, "TTFT: %s\nTPOT: %s\nE2E: %s\n", fmtDur(res.TTFT), fmtDur(res.TPOT), fmtDur(res.E2E))
	src := "counted"
	if res.OutputTokensFromUsage {
		src = "from usage"
	}
	fmt.Fprintf(&b, "Prompt tokens: %d\nOutput tokens: %d (%s)\n", res.PromptTokens, res.OutputTokens, src)
	if tps := res.OutputTokensPerSecond(); tps > 0 {
		fmt.Fprintf(&b, "Output tokens per second: %.2f\n", tps)
	}
	if n := len(res.ITLs); n > 0 {
		lo, hi, sum := res.ITLs[0], res.ITLs[0], time.Duration(0)
		for _, v := range res.ITLs {
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		fmt.Fprintf(&b, "Inter-token latencies: %d, min %s, mean %s, max %s\n", n, fmtDur(lo), fmtDur(sum/time.Duration(n)), fmtDur(hi))
	}

	b.WriteString("\nTimeline:\n")
	for _, ev := range res.Events {
		fmt.Fprintf(&b, "  %10.6fs  %s", ev.Offset.Seconds(), ev.Kind)
		if ev.Bytes > 0 {
			fmt.Fprintf(&b, "  %d bytes", ev.Bytes)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nRequest headers:\n")
	for _, l := range s.headerLines(res.RequestHeader) {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("\nResponse headers:\n")
	for _, l := range s.headerLines(res.ResponseHeader) {
		fmt.Fprintf(&b, "  %s\n", l)
	}

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

	b.WriteString("\nModule configuration:\n")
	if out, err := yaml.Marshal(cfg.Modules[module]); err == nil {
		b.Write(out)
	}
	return s.scrub(b.String())
}

// fmtDur renders a duration in milliseconds with microsecond resolution, "-" for 0.
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

package web

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/exposition"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/prober"
)

// scrapeTimeoutOffset is subtracted from Prometheus' scrape timeout for /probe,
// as blackbox_exporter's --timeout-offset does, so that the probe answers before
// the scrape gives up.
const scrapeTimeoutOffset = 500 * time.Millisecond

// routes serves every page and endpoint of the daemon.
func (h *handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", h.landingPage)
	// Several Prometheis may scrape at once; more would be a misconfiguration.
	const maxRenders = 10
	var metrics http.Handler = promhttp.HandlerFor(h.opts.Gatherer, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            promLogger{h},
		MaxRequestsInFlight: maxRenders,
		// OpenMetrics carries the exemplars (record_id) of the probe
		// histograms' classic buckets; protobuf is always offered.
		EnableOpenMetrics: true,
	})
	if h.opts.Exposition != nil {
		// The same negotiation and formats, the targets' series encoded
		// once per change (internal/exposition).
		metrics = h.opts.Exposition.Handler(exposition.HandlerOpts{
			Rest: h.opts.Own, Full: h.opts.Gatherer, ErrorLog: promLogger{h}, MaxRequestsInFlight: maxRenders,
			// 12 MB of text at 1,000 targets: gzip's default level took
			// 118 ms of it, its fastest 30 ms, for a body about 23 % larger (0.51 → 0.63 MB).
			GzipLevel: gzip.BestSpeed,
		})
	}
	mux.Handle(h.opts.TelemetryPath, promhttp.InstrumentMetricHandler(h.opts.Registerer, metrics))
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

// isProbeURL tells a URL probe's target (a URL) from a target name, which
// cannot hold "/".
func isProbeURL(target string) bool { return strings.Contains(target, "://") }

// urlProbeHandler is /probe?target=<URL>&module=M[&model=X][&debug=true]: a
// probe of a URL that is no configured target, as a Prometheus Operator Probe
// (or a VictoriaMetrics VMProbe) asks, following blackbox_exporter's
// parameters and its X-Prometheus-Scrape-Timeout-Seconds header. Only URLs
// that url_probes.allowed_urls matches are probed (403 otherwise, and nothing
// is sent), with url_probes' own client and token budget; a redirect is
// followed only to a location the list allows too (reason "redirect"
// otherwise, and nothing is sent there).
func (h *handler) urlProbeHandler(w http.ResponseWriter, r *http.Request, cfg *config.Config, target string) {
	up := cfg.URLProbes
	if up == nil {
		textResponse(w, http.StatusForbidden, "URL probes are off: target %q is not a configured target, and url_probes.allowed_urls is not set", target)
		return
	}
	if _, err := config.ParseProbeURL(target); err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	if !up.Allowed(target) {
		textResponse(w, http.StatusForbidden, "target URL %q is not allowed: no regex of url_probes.allowed_urls matches it", target)
		return
	}
	q := r.URL.Query()
	module := q.Get("module")
	var modules []string
	for name := range cfg.Modules {
		if up.ModuleAllowed(name) {
			modules = append(modules, name)
		}
	}
	sort.Strings(modules)
	switch {
	case module == "" && len(modules) == 1:
		module = modules[0]
	case module == "":
		textResponse(w, http.StatusBadRequest, "module parameter is missing; modules of url_probes: %s", strings.Join(modules, ", "))
		return
	case !up.ModuleAllowed(module) || cfg.Modules[module].Prober == "":
		textResponse(w, http.StatusBadRequest, "module %q is not a module of url_probes; modules: %s", module, strings.Join(modules, ", "))
		return
	}
	ctx, cancel, err := scrapeTimeoutContext(r)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	defer cancel()
	client, err := h.clients.Acquire(up.HTTPClientConfig)
	if err != nil {
		textResponse(w, http.StatusInternalServerError, "url_probes.http_client_config: %s", h.scrub(err.Error()))
		return
	}
	defer h.clients.Release(client)
	// Every hop of a redirect must be allowed too: the probe ends at the
	// first one outside the list, and nothing is sent there.
	probeClient := httpclient.RestrictRedirects(client, up.AllowedHop, "url_probes.allowed_urls does not match its location")

	debug, _ := strconv.ParseBool(q.Get("debug"))
	level.Debug(h.logger).Log("msg", "URL probe requested", "url", target, "module", module, "debug", debug)
	res, reg, err := h.probes.ProbeURLNow(ctx, prober.URLProbe{
		URL: target, Module: module, Model: q.Get("model"), Client: probeClient, TokenBudgetPerHour: up.TokenBudgetPerHour,
	})
	switch {
	case errors.Is(err, prober.ErrBudgetExceeded):
		textResponse(w, http.StatusTooManyRequests, "URL probe of %q module %q not run: %s (url_probes.token_budget_per_hour)", target, module, err)
		return
	case err != nil:
		msg := h.scrub(err.Error())
		level.Error(h.logger).Log("msg", "URL probe failed to run", "url", target, "module", module, "err", msg)
		textResponse(w, http.StatusInternalServerError, "URL probe of %q module %q failed to run: %s", target, module, msg)
		return
	}
	level.Debug(h.logger).Log("msg", "URL probe finished", "url", target, "module", module,
		"success", res.Success, "reason", res.Reason, "err", h.scrub(res.Err))
	if debug {
		t := config.DefaultTarget
		t.Name, t.URL = target, target
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(h.debugReport(cfg, &t, module, res, 0, reg)))
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// maxScrapeTimeout is the longest scrape timeout /probe takes: the longest
// time.Duration, in whole seconds.
const maxScrapeTimeout = time.Duration(math.MaxInt64) / time.Second * time.Second

// scrapeTimeoutContext bounds a /probe request by Prometheus' scrape timeout
// (X-Prometheus-Scrape-Timeout-Seconds) less scrapeTimeoutOffset, as
// blackbox_exporter does, so that the probe answers before the scrape gives up.
func scrapeTimeoutContext(r *http.Request) (context.Context, context.CancelFunc, error) {
	v := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds")
	if v == "" {
		return r.Context(), func() {}, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	switch {
	case (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(secs) || secs <= 0:
		return nil, nil, errors.New("X-Prometheus-Scrape-Timeout-Seconds " + strconv.Quote(v) + " is not a positive number")
	case secs > maxScrapeTimeout.Seconds(): // Inf and 1e308 too
		return nil, nil, errors.New("X-Prometheus-Scrape-Timeout-Seconds " + strconv.Quote(v) + " is out of range: at most " + strconv.FormatFloat(maxScrapeTimeout.Seconds(), 'f', -1, 64) + " seconds")
	}
	timeout := time.Duration(secs*float64(time.Second)) - scrapeTimeoutOffset
	if timeout <= 0 {
		timeout = time.Duration(secs * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	return ctx, cancel, nil
}

// gateHandler is GET (or, for Flagger's webhooks, POST)
// /gate?target=T[&module=M][&reference=R][&window=D]: the verdict of T's
// probes of the last window (global.gate.window by default) against its
// baseline, or against reference target R's probes of the same window. 200
// when T passes, 503 when it fails or cannot be judged (too few successful
// probes, no baseline value), with the verdict as JSON (always_200=true: 200
// whatever the verdict, for Argo Rollouts' web provider). It runs no probe:
// it reads what the scheduled (and burst) probes recorded, so it spends no
// tokens.
func (h *handler) gateHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		textResponse(w, http.StatusMethodNotAllowed, "This endpoint answers GET (and POST, for webhooks).")
		return
	}
	cfg := h.opts.Running()
	q, t, module, err := webhookPair(cfg, r)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	th, err := gateThresholds(q)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	window := time.Duration(cfg.Global.Gate.Window)
	if v := q.Get("window"); v != "" {
		var err error
		if window, err = parseDuration(v); err != nil || window <= 0 {
			textResponse(w, http.StatusBadRequest, "window %q is not a positive duration (e.g. 5m)", v)
			return
		}
	}
	v, err := h.gateVerdict(cfg, t, module, q.Get("reference"), window, th)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	if t.Gateway != nil && h.cmp != nil {
		// A gateway target: its slowest member against the others, from
		// their direct probes over the gateway's join window.
		ratio := compare.DefaultMemberRatio
		if s := q.Get("member_ratio"); s != "" {
			if ratio, err = strconv.ParseFloat(s, 64); err != nil || !(ratio > 1) {
				textResponse(w, http.StatusBadRequest, "member_ratio %q is not a number above 1", s)
				return
			}
		}
		for _, j := range h.cmp.GatewayJoins(t.Name) {
			if j.Module == module {
				compare.JudgeMembers(&v, j.GatewayJoin, ratio)
			}
		}
	}
	// local=true: this vantage's verdict alone (what another vantage's
	// /gate asks for, so that vantages never ask each other in a loop).
	if local, _ := strconv.ParseBool(q.Get("local")); !local && len(cfg.Global.Gate.Vantages) > 0 {
		own := h.opts.Vantage
		if own == "" {
			own = "this replica"
		}
		compare.JudgeVantages(&v, own, h.askVantages(r.Context(), cfg.Global.Gate.Vantages, q))
	}
	b, err := v.MarshalJSON()
	if err != nil {
		textResponse(w, http.StatusInternalServerError, "encoding the verdict: %s", err)
		return
	}
	code := http.StatusOK
	// always_200=true: the verdict is in the body only, for clients that
	// treat any other status as an error of their own (Argo Rollouts' web
	// provider: an Error, where a failed or inconclusive verdict is meant).
	if always, _ := strconv.ParseBool(q.Get("always_200")); v.Result != compare.Pass && !always {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// errNoComparison: a gate needs a baseline or a reference.
var errNoComparison = errors.New("has no baseline: name a reference target (reference=NAME) to compare with")

// gateVerdict judges t's probes of module in the last window.
func (h *handler) gateVerdict(cfg *config.Config, t *config.Target, module, reference string, window time.Duration, th compare.Thresholds) (compare.Verdict, error) {
	since := time.Now().Add(-window)
	sample := func(target string) compare.Sample {
		st, _ := h.probes.Stats(target, module)
		probes, successes := st.ProbesSince(since)
		return compare.Sample{Probes: probes, Successes: successes, Means: st.Means(since)}
	}
	s := sample(t.Name)
	var v compare.Verdict
	if reference != "" {
		ref, ok := cfg.Target(reference)
		if !ok {
			return v, fmt.Errorf("unknown reference target %q; targets: %s", reference, strings.Join(targetNames(cfg), ", "))
		}
		if !slices.Contains(ref.Modules, module) {
			return v, fmt.Errorf("module %q is not configured for reference target %q", module, ref.Name)
		}
		rs := sample(ref.Name)
		v = compare.Judge(s, rs.Means, &rs, nil, th, "reference "+ref.Name)
	} else {
		cmp, has, ok := h.cmp.CompareWindow(t.Name, module, window)
		switch {
		case !has:
			return v, fmt.Errorf("target %q %w", t.Name, errNoComparison)
		case ok:
			s.Means = cmp.Live
		}
		v = compare.Judge(s, cmp.Expected, nil, cmp.Ratios, th, "baseline "+cmp.Baseline)
		if !ok && v.Result == compare.Pass {
			v.Result, v.Reason = compare.Inconclusive, "no probe of the window has an expectation in baseline "+cmp.Baseline
		}
	}
	v.Target, v.Module, v.Window = t.Name, module, window
	return v, nil
}

// gateThresholds reads latency_ratio, success_ratio and min_successes,
// each defaulting to compare.DefaultThresholds.
func gateThresholds(q url.Values) (compare.Thresholds, error) {
	th := compare.DefaultThresholds
	for _, f := range []struct {
		key string
		set func(string) error
	}{
		{"latency_ratio", func(s string) (err error) { th.LatencyRatio, err = strconv.ParseFloat(s, 64); return }},
		{"success_ratio", func(s string) (err error) { th.SuccessRatio, err = strconv.ParseFloat(s, 64); return }},
		{"min_successes", func(s string) (err error) { th.MinSuccesses, err = strconv.Atoi(s); return }},
	} {
		if v := q.Get(f.key); v != "" {
			if err := f.set(v); err != nil {
				return th, fmt.Errorf("%s %q is not a number", f.key, v)
			}
		}
	}
	return th, th.Validate()
}

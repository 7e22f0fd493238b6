package web

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vllm-prober/vllm_prober/internal/config"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/prober"
)

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

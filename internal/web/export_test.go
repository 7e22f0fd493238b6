package web

import (
	"io"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// The external tests (package web_test) build the pages over a real daemon
// (internal/daemonweb, which imports this package) and reach the pages' parts
// through these.

// Pages is the handler behind New.
type Pages struct{ h *handler }

func NewPages(o Options) Pages { return Pages{newHandler(o)} }

func (p Pages) DebugReport(cfg *config.Config, t *config.Target, module string, res *probe.Result, id uint64, reg *prometheus.Registry) string {
	return p.h.debugReport(cfg, t, module, res, id, reg)
}

func (p Pages) LandingData(q url.Values, stats []prober.PairStats, now time.Time) landingData {
	return p.h.landingData(q, stats, now)
}

func (p Pages) TargetPage(t *config.Target, ts prober.TargetStatus, stats []prober.PairStats, now time.Time) targetPage {
	return p.h.targetPage(t, ts, stats, now)
}

func (p Pages) ScrapeText(target string, now time.Time, errLen int) (string, bool) {
	return p.h.scrapeText(target, now, errLen)
}

func ExecLanding(w io.Writer, data landingData) error { return landingTemplate.Execute(w, data) }

func ExecTarget(w io.Writer, page targetPage) error { return targetTemplate.Execute(w, page) }

func ExecGatewayTable(w io.Writer, t *config.Target, members []string, joins []compare.GatewayModuleJoin) error {
	return targetTemplate.ExecuteTemplate(w, "gateway", newGatewayTable(t, members, joins))
}

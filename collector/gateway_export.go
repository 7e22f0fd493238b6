package collector

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stable names of a gateway's own view (GatewayView), whatever the gateway.
var (
	gwUpDesc = prometheus.NewDesc("vllm_gateway_up",
		"1 if the gateway's /metrics was scraped and recognised (EPP, llm-d, production-stack router, HAProxy), else 0.", []string{"target"}, nil)
	gwInfoDesc = prometheus.NewDesc("vllm_gateway_info",
		"The gateway profile its /metrics was read with.", []string{"target", "gateway"}, nil)
	gwReadyDesc = prometheus.NewDesc("vllm_gateway_ready_endpoints",
		"Endpoints the gateway may send requests to.", []string{"target"}, nil)
	gwQueueDesc = prometheus.NewDesc("vllm_gateway_queue_requests",
		"Requests waiting in the gateway's own queue.", []string{"target"}, nil)
	gwAdmittedDesc = prometheus.NewDesc("vllm_gateway_admitted_requests_total",
		"Requests the gateway passed to a backend.", []string{"target"}, nil)
	gwRejectedDesc = prometheus.NewDesc("vllm_gateway_rejected_requests_total",
		"Requests the gateway answered itself, by reason: capacity, queue_timeout, no_endpoints, invalid, other.", []string{"target", "reason"}, nil)
	gwTotalDesc = prometheus.NewDesc("vllm_gateway_requests_total",
		"Requests that reached the gateway: admitted + rejected (the EPP's own request counter counts admitted ones only).", []string{"target"}, nil)
	gwBackendDesc = prometheus.NewDesc("vllm_gateway_backend_requests_total",
		"Requests the gateway sent to each backend, as the gateway names it.", []string{"target", "backend"}, nil)
)

// maxGatewayBackends bounds the backend label: a gateway naming more
// backends than this exports the first ones by name only.
const maxGatewayBackends = 256

// GatewayCollector scrapes a gateway's /metrics at every collection and
// exports its view under the vllm_gateway_* names.
type GatewayCollector struct {
	Target  string // the gateway target's name
	URL     string // its metrics URL
	Client  *http.Client
	Timeout time.Duration
}

// Describe sends the descriptors of what Collect sends.
func (c *GatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

// Collect scrapes the gateway once and sends its view.
func (c *GatewayCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	v, err := ScrapeGateway(ctx, c.Client, c.URL)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(gwUpDesc, prometheus.GaugeValue, 0, c.Target)
		return
	}
	ch <- prometheus.MustNewConstMetric(gwUpDesc, prometheus.GaugeValue, 1, c.Target)
	v.collect(c.Target, ch)
}

func (v *GatewayView) collect(target string, ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(gwInfoDesc, prometheus.GaugeValue, 1, target, v.Gateway)
	if v.HasReadyEndpoints {
		ch <- prometheus.MustNewConstMetric(gwReadyDesc, prometheus.GaugeValue, v.ReadyEndpoints, target)
	}
	if v.HasQueue {
		ch <- prometheus.MustNewConstMetric(gwQueueDesc, prometheus.GaugeValue, v.Queue, target)
	}
	if v.HasAdmitted {
		ch <- prometheus.MustNewConstMetric(gwAdmittedDesc, prometheus.CounterValue, v.Admitted, target)
		for _, r := range RejectReasons() {
			ch <- prometheus.MustNewConstMetric(gwRejectedDesc, prometheus.CounterValue, v.Rejected[r], target, r)
		}
		ch <- prometheus.MustNewConstMetric(gwTotalDesc, prometheus.CounterValue, v.Total(), target)
	}
	n := 0
	for name, x := range v.Backends {
		if n >= maxGatewayBackends {
			break
		}
		n++
		ch <- prometheus.MustNewConstMetric(gwBackendDesc, prometheus.CounterValue, x, target, name)
	}
}

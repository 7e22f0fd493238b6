package collector

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/internal/safemetric"
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
	gwDecisionDesc = prometheus.NewDesc("vllm_gateway_disagg_decisions_total",
		"A disaggregating gateway's routing decisions by decision: decode-only, prefill-decode, encode-decode, encode-prefill-decode, other.", []string{"target", "decision"}, nil)
)

// maxGatewayBackends bounds the backend label: a gateway naming more
// backends than this exports the first ones in name order only.
const maxGatewayBackends = 256

func (v *GatewayView) collect(target string, ch chan<- prometheus.Metric, errs safemetric.Sender) {
	errs.Send(ch, target, gwInfoDesc, prometheus.GaugeValue, 1, target, v.Gateway)
	if v.HasReadyEndpoints {
		errs.Send(ch, target, gwReadyDesc, prometheus.GaugeValue, v.ReadyEndpoints, target)
	}
	if v.HasQueue {
		errs.Send(ch, target, gwQueueDesc, prometheus.GaugeValue, v.Queue, target)
	}
	if v.HasAdmitted {
		errs.Send(ch, target, gwAdmittedDesc, prometheus.CounterValue, v.Admitted, target)
		for _, r := range RejectReasons() {
			errs.Send(ch, target, gwRejectedDesc, prometheus.CounterValue, v.Rejected[r], target, r)
		}
		errs.Send(ch, target, gwTotalDesc, prometheus.CounterValue, v.Total(), target)
	}
	if v.Decisions != nil {
		for _, d := range DisaggDecisions() {
			errs.Send(ch, target, gwDecisionDesc, prometheus.CounterValue, v.Decisions[d], target, d)
		}
	}
	for i, name := range slices.Sorted(maps.Keys(v.Backends)) {
		if i >= maxGatewayBackends {
			break
		}
		errs.Send(ch, target, gwBackendDesc, prometheus.CounterValue, v.Backends[name], target, name)
	}
}

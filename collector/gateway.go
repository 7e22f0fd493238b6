package collector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Gateway metrics profiles: the /metrics of an LLM gateway (the Gateway API
// Inference Extension's Endpoint Picker, llm-d's router, vLLM production-stack's
// router, HAProxy) read into one GatewayView, whatever the gateway, as the
// engine profiles read engines. Each profile is a table of rules: the first
// source of a rule present in the payload is read, so that a router emitting
// llm-d's llm_d_epp_* names with the older inference_* names as twins (same
// values) is counted once.

// Rejection reasons of a GatewayView, a bounded label value set.
const (
	RejectCapacity     = "capacity"      // queue full or pool saturated: load shedding (EPP ResourceExhausted, HAProxy's own 4xx)
	RejectQueueTimeout = "queue_timeout" // waited too long in the gateway's queue (EPP ServiceUnavailable/EvictedTTL, HAProxy timeout queue)
	RejectNoEndpoints  = "no_endpoints"  // no endpoint could serve it
	RejectInvalid      = "invalid"       // refused as a bad request (EPP BadRequest, NotFound, Unauthorized, Forbidden)
	RejectOther        = "other"
)

// RejectReasons lists the rejection reasons, in documentation order.
func RejectReasons() []string {
	return []string{RejectCapacity, RejectQueueTimeout, RejectNoEndpoints, RejectInvalid, RejectOther}
}

// GatewayView is a gateway's own view of its traffic, normalised. A field is
// NaN-free: Has* says whether the gateway exports it at all.
type GatewayView struct {
	Gateway string // epp, llm-d, production-stack, haproxy

	ReadyEndpoints    float64 // endpoints the gateway may send to
	HasReadyEndpoints bool
	Queue             float64 // requests waiting in the gateway's own queue
	HasQueue          bool
	// Admitted counts the requests the gateway passed to a backend;
	// Rejected the ones it answered itself, by reason (RejectReasons).
	Admitted    float64
	HasAdmitted bool
	Rejected    map[string]float64
	// Backends counts the requests sent to each backend (endpoint, pod or
	// server name as the gateway names it).
	Backends map[string]float64
	// Decisions counts a disaggregating router's routing decisions by
	// DisaggDecisions value; nil when the gateway exports none.
	Decisions map[string]float64
}

// The routing decisions of a disaggregating gateway (llm-d's
// disagg-profile-handler, llm-d/llm-d-router docs/metrics.md: the
// decision_type of llm_d_epp_disagg_decision_total), a bounded label value
// set: any other value counts under DecisionOther.
const (
	DecisionDecodeOnly          = "decode-only"           // served by a decode pod alone: no remote prefill
	DecisionPrefillDecode       = "prefill-decode"        // a prefill pod's KV cache sent to the decode pod
	DecisionEncodeDecode        = "encode-decode"         // a multimodal encoder, then decode
	DecisionEncodePrefillDecode = "encode-prefill-decode" // encoder, prefill and decode pods
	DecisionOther               = "other"
)

// DisaggDecisions lists the decisions, in documentation order.
func DisaggDecisions() []string {
	return []string{DecisionDecodeOnly, DecisionPrefillDecode, DecisionEncodeDecode, DecisionEncodePrefillDecode, DecisionOther}
}

// Total is the true request count, admitted + rejected. The Endpoint Picker's
// inference_objective_request_total counts only admitted requests, so its
// error/total ratio can exceed 1 under overload; this is the denominator.
func (v *GatewayView) Total() float64 {
	t := v.Admitted
	for _, r := range v.Rejected {
		t += r
	}
	return t
}

// gwSource is one family and the label values a series must carry.
type gwSource struct {
	family string
	match  map[string]string
}

// gatewayProfile is one gateway's table.
type gatewayProfile struct {
	name string
	// detect: the payload is this gateway's when one of these families is there.
	detect []string
	// ready, queue, admitted: each the first present source, summed over its series.
	ready, queue, admitted []gwSource
	// rejected: the first present family, its series mapped to a reason by
	// the value of reasonLabel (reasonMap; unmapped values are not rejections).
	rejected    []gwRejected
	backends    []gwBackends
	decisions   []gwBackends                      // the first present family, by its label
	custom      func(fs families, v *GatewayView) // what a table cannot say (HAProxy)
	notAnEngine bool                              // its vllm:* names are not an engine's
}

type gwRejected struct {
	family, reasonLabel string
	match               map[string]string
	reasonMap           map[string]string
}

type gwBackends struct {
	family, label string
	match         map[string]string
}

// eppErrorCodes maps the Endpoint Picker's error_code to a rejection reason.
// ModelServerError is a backend's error on an admitted request, not a
// rejection; Internal and Unknown are the picker's own failures.
var eppErrorCodes = map[string]string{
	"ResourceExhausted":  RejectCapacity,
	"ServiceUnavailable": RejectQueueTimeout,
	"BadRequest":         RejectInvalid,
	"NotFound":           RejectInvalid,
	"Unauthorized":       RejectInvalid,
	"Forbidden":          RejectInvalid,
	"PreconditionFailed": RejectInvalid,
	"Internal":           RejectOther,
	"Unknown":            RejectOther,
}

// eppProfile: sigs.k8s.io/gateway-api-inference-extension v1.5.0 cmd/epp
// (pkg/epp/metrics), and llm-d-router, which emits llm_d_epp_* with these
// names as twins: the llm_d_epp_ source comes first in every rule.
func eppProfile(name string, detect []string) *gatewayProfile {
	return &gatewayProfile{
		name:   name,
		detect: detect,
		ready: []gwSource{
			{family: "llm_d_epp_ready_endpoints"}, {family: "inference_pool_ready_endpoints"}, {family: "inference_pool_ready_pods"},
		},
		queue: []gwSource{
			{family: "llm_d_epp_flow_control_queue_size"}, {family: "inference_extension_flow_control_queue_size"},
		},
		admitted: []gwSource{{family: "llm_d_epp_request_total"}, {family: "inference_objective_request_total"}},
		// The request error counter holds every rejection, flow control's
		// included, by error code.
		rejected: []gwRejected{
			{family: "llm_d_epp_request_error_total", reasonLabel: "error_code", reasonMap: eppErrorCodes},
			{family: "inference_objective_request_error_total", reasonLabel: "error_code", reasonMap: eppErrorCodes},
		},
		backends: []gwBackends{
			{family: "llm_d_epp_scheduler_attempts_total", label: "endpoint_name", match: map[string]string{"status": "success"}},
			{family: "inference_extension_scheduler_attempts_total", label: "endpoint_name", match: map[string]string{"status": "success"}},
			{family: "inference_extension_scheduler_attempts_total", label: "pod_name", match: map[string]string{"status": "success"}},
		},
		// llm-d's disaggregation decisions, and their deprecated twin.
		decisions: []gwBackends{
			{family: "llm_d_epp_disagg_decision_total", label: "decision_type"},
			{family: "llm_d_inference_scheduler_disagg_decision_total", label: "decision_type"},
		},
	}
}

var gatewayProfiles = []*gatewayProfile{
	eppProfile("llm-d", []string{"llm_d_epp_request_total", "llm_d_epp_ready_endpoints", "llm_d_epp_flow_control_queue_size", "llm_d_epp_disagg_decision_total"}),
	eppProfile("epp", []string{"inference_objective_request_total", "inference_pool_ready_pods", "inference_extension_scheduler_attempts_total"}),
	// vLLM production-stack's router (src/vllm_router/services/metrics_service):
	// every name under vllm:, labelled by the backend URL (server). It has no
	// queue of its own and counts no rejection.
	{
		name:        "production-stack",
		detect:      []string{"vllm:healthy_pods_total", "vllm:num_incoming_requests_total", "vllm:current_qps"},
		ready:       []gwSource{{family: "vllm:healthy_pods_total"}},
		admitted:    []gwSource{{family: "vllm:num_incoming_requests_total"}},
		backends:    []gwBackends{{family: "vllm:request_latency_seconds", label: "server"}},
		notAnEngine: true,
	},
	// HAProxy's built-in exporter (2.x).
	{
		name:   "haproxy",
		detect: []string{"haproxy_backend_http_requests_total", "haproxy_server_http_responses_total"},
		queue:  []gwSource{{family: "haproxy_backend_current_queue"}},
		ready:  []gwSource{{family: "haproxy_server_status", match: map[string]string{"state": "UP"}}},
		backends: []gwBackends{
			{family: "haproxy_server_http_responses_total", label: "server"},
		},
		custom: haproxyCounts,
	},
}

// haproxyCounts: a request HAProxy passed to a server has a server response
// (Σ haproxy_server_http_responses_total); the backend's responses beyond the
// servers' were HAProxy's own (a 503 after `timeout queue`, or with no server
// up), and the frontends' 4xx beyond the backends' were refused before any
// backend (`http-request return status 429` on a full queue, `deny`).
func haproxyCounts(fs families, v *GatewayView) {
	sum := func(family string, match map[string]string) (float64, bool) {
		return gwSum(fs, gwSource{family, match})
	}
	admitted, ok := sum("haproxy_server_http_responses_total", nil)
	if !ok {
		return
	}
	v.Admitted, v.HasAdmitted = admitted, true
	be5, _ := sum("haproxy_backend_http_responses_total", map[string]string{"code": "5xx"})
	sv5, _ := sum("haproxy_server_http_responses_total", map[string]string{"code": "5xx"})
	fe4, _ := sum("haproxy_frontend_http_responses_total", map[string]string{"code": "4xx"})
	be4, _ := sum("haproxy_backend_http_responses_total", map[string]string{"code": "4xx"})
	v.Rejected[RejectQueueTimeout] += max(be5-sv5, 0)
	v.Rejected[RejectCapacity] += max(fe4-be4, 0)
}

// detectGateway returns the profile whose families fs carries, or nil.
func detectGateway(fs families) *gatewayProfile {
	for _, p := range gatewayProfiles {
		for _, f := range p.detect {
			if _, ok := fs[f]; ok {
				return p
			}
		}
	}
	return nil
}

// errRouterPayload refuses a production-stack router's /metrics scraped as an engine's.
var errRouterPayload = errors.New("the /metrics is a vLLM production-stack router's (vllm:* labelled by server), not an engine's: declare the target a gateway")

// routerPayload reports whether fs is a production-stack router's /metrics:
// its vllm:* gauges carry a server label (the backend URL) and never an
// engine's model_name, so they must not be read as an engine's own.
func routerPayload(fs families) bool {
	f, ok := fs["vllm:num_requests_running"]
	if !ok || len(f.GetMetric()) == 0 {
		return false
	}
	for _, m := range f.GetMetric() {
		var server bool
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "server":
				server = true
			case "model_name", "engine":
				return false
			}
		}
		if !server {
			return false
		}
	}
	return true
}

// NormaliseGateway reads a gateway's families; ok is false when fs is no
// gateway's the profiles know.
func normaliseGateway(fs families) (*GatewayView, bool) {
	p := detectGateway(fs)
	if p == nil {
		return nil, false
	}
	v := &GatewayView{Gateway: p.name, Rejected: map[string]float64{}, Backends: map[string]float64{}}
	v.ReadyEndpoints, v.HasReadyEndpoints = gwFirst(fs, p.ready)
	v.Queue, v.HasQueue = gwFirst(fs, p.queue)
	v.Admitted, v.HasAdmitted = gwFirst(fs, p.admitted)
	for _, r := range p.rejected {
		f, ok := fs[r.family]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			if !gwMatches(m, r.match) {
				continue
			}
			if reason, ok := r.reasonMap[gwLabel(m, r.reasonLabel)]; ok {
				v.Rejected[reason] += gwValue(m)
			}
		}
		break
	}
	for _, b := range p.backends {
		f, ok := fs[b.family]
		if !ok {
			continue
		}
		found := false
		for _, m := range f.GetMetric() {
			name := gwLabel(m, b.label)
			if name == "" || !gwMatches(m, b.match) {
				continue
			}
			found = true
			v.Backends[name] += gwValue(m)
		}
		if found {
			break
		}
	}
	for _, d := range p.decisions {
		f, ok := fs[d.family]
		if !ok {
			continue
		}
		v.Decisions = map[string]float64{}
		for _, m := range f.GetMetric() {
			kind := gwLabel(m, d.label)
			if !slices.Contains(DisaggDecisions(), kind) {
				kind = DecisionOther
			}
			v.Decisions[kind] += gwValue(m)
		}
		break
	}
	if p.custom != nil {
		p.custom(fs, v)
	}
	return v, true
}

func gwFirst(fs families, srcs []gwSource) (float64, bool) {
	for _, s := range srcs {
		if v, ok := gwSum(fs, s); ok {
			return v, true
		}
	}
	return 0, false
}

// gwSum sums the series of s's family that match; ok when one did.
func gwSum(fs families, s gwSource) (float64, bool) {
	f, ok := fs[s.family]
	if !ok {
		return 0, false
	}
	var sum float64
	var any bool
	for _, m := range f.GetMetric() {
		if gwMatches(m, s.match) {
			sum += gwValue(m)
			any = true
		}
	}
	return sum, any
}

func gwMatches(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if gwLabel(m, k) != v {
			return false
		}
	}
	return true
}

func gwLabel(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// gwValue is a series' value: a counter's, a gauge's, an untyped one's, or a
// histogram's count (requests observed).
func gwValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// ScrapeGateway fetches a gateway's /metrics at url and normalises it. A
// payload no gateway profile knows is an error.
func ScrapeGateway(ctx context.Context, client *http.Client, url string) (*GatewayView, error) {
	return scrapeGateway(ctx, client, url, nil)
}

// scrapeGateway is ScrapeGateway reading and keeping the labels of the
// series it decodes in cache (nil: none).
func scrapeGateway(ctx context.Context, client *http.Client, url string, cache *labelCache) (*GatewayView, error) {
	fs, _, _, err := fetchFamilies(ctx, client, url, false, cache)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	v, ok := normaliseGateway(fs)
	if !ok {
		return nil, fmt.Errorf("gateway metrics at %s: no known gateway's families (inference-extension EPP, llm-d, production-stack router, HAProxy)", url)
	}
	return v, nil
}

// String renders v one fact a line, sorted: the golden-file form.
func (v *GatewayView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gateway %s\n", v.Gateway)
	opt := func(name string, x float64, ok bool) {
		if ok {
			fmt.Fprintf(&b, "%s %g\n", name, x)
		} else {
			fmt.Fprintf(&b, "%s absent\n", name)
		}
	}
	opt("ready_endpoints", v.ReadyEndpoints, v.HasReadyEndpoints)
	opt("queue", v.Queue, v.HasQueue)
	opt("admitted", v.Admitted, v.HasAdmitted)
	for _, r := range RejectReasons() {
		fmt.Fprintf(&b, "rejected{reason=%q} %g\n", r, v.Rejected[r])
	}
	fmt.Fprintf(&b, "total %g\n", v.Total())
	for _, k := range slices.Sorted(maps.Keys(v.Backends)) {
		fmt.Fprintf(&b, "backend{name=%q} %g\n", k, v.Backends[k])
	}
	if v.Decisions != nil {
		for _, d := range DisaggDecisions() {
			fmt.Fprintf(&b, "decision{type=%q} %g\n", d, v.Decisions[d])
		}
	}
	return b.String()
}

package mixin

import (
	"fmt"
	"slices"
)

// Where did it break: every alert carries a `layer` label naming the layer at
// fault (docs/runbook.md, "Where did it break"), so that Alertmanager can route
// and inhibit by it (examples/alertmanager/inhibit.yml):
//
//   - path: what one vantage sees and the others do not (its network, DNS,
//     proxy, or the prober replica itself): not the endpoint's fault;
//   - gateway: the gateway's own overhead or shedding while its members are
//     healthy;
//   - pool: the members behind a gateway show the fault too;
//   - endpoint: one member or a lone target.
const (
	LayerLabel    = "layer"
	LayerPath     = "path"
	LayerGateway  = "gateway"
	LayerPool     = "pool"
	LayerEndpoint = "endpoint"
)

// Layers lists the values of the layer label.
func Layers() []string { return []string{LayerPath, LayerGateway, LayerPool, LayerEndpoint} }

// fixedLayer is the layer of an alert whose layer does not depend on its
// series. The burn-rate alerts set theirs in their expression (layeredBurn);
// an alert not named here is about one target: endpoint.
func fixedLayer(alert string) string {
	switch alert {
	case "VLLMEndpointUnreachableFromVantage",
		// The prober itself is the observer's side of the path.
		"VLLMProberAbsent", "VLLMProberConfigReloadFailed", "VLLMProbeBudgetExhausted":
		return LayerPath
	case "VLLMGatewayShedding", "VLLMGatewaySheddingOutage", "VLLMGatewayOverheadHigh":
		return LayerGateway
	case "VLLMKVTransferSlow", "VLLMKVTransferFailing":
		// The transfer between the prefill and the decode pool: a pool's
		// fault, not one endpoint's, whichever pod reports it.
		return LayerPool
	default:
		return LayerEndpoint
	}
}

// withLayers adds the fixed layer label to every alert of groups that does not
// set one in its expression (exprLayered).
func withLayers(groups []Group, exprLayered []string) []Group {
	for gi := range groups {
		for ri := range groups[gi].Rules {
			r := &groups[gi].Rules[ri]
			if r.Alert == "" || slices.Contains(exprLayered, r.Alert) {
				continue
			}
			if slices.ContainsFunc(r.Labels, func(l Label) bool { return l.Name == LayerLabel }) {
				continue
			}
			r.Labels = append(r.Labels, Label{LayerLabel, fixedLayer(r.Alert)})
		}
	}
	return groups
}

// gatewayMembers selects the membership series of every gateway target: one
// per (gateway, module, member), the share of the gateway's probes the member
// served (vllm_gateway_member_share_ratio without its _gateway and _other keys).
func (s *Spec) gatewayMembers() string {
	return fmt.Sprintf(`vllm_gateway_member_share_ratio{%s,member!~"_gateway|_other"}`, s.jobSel())
}

// withLayer sets the layer label of every series of expr.
func withLayer(expr, layer string) string {
	return lines("label_replace(", indent(expr, "  "), fmt.Sprintf(`  , %q, %q, "", ""`, LayerLabel, layer), ")")
}

// layeredBurn gives a burn-rate alert's expression burn its layer: endpoint for
// a target that is no gateway; for a gateway target, pool when a member of the
// gateway burns the same SLI over the long window on its own direct probes
// (the fault is behind the gateway; VLLMGatewayMemberSlow or
// VLLMGatewayMemberFailing name the member when it is one), gateway when none
// does (the members are healthy: the gateway adds the fault).
func (s *Spec) layeredBurn(x sli, br BurnRate, budget, burn string) string {
	gw := fmt.Sprintf("group by (job, target) (%s)", s.gatewayMembers())
	degraded := lines(
		"count by (job, target, module) (",
		"  "+s.gatewayMembers(),
		"  and on (job, module, member)",
		fmt.Sprintf(`  label_replace((1 - %s%s) / %s > %s, "member", "$1", "target", "(.+)")`, x.ratio, br.LongWindow, budget, formatFloat(br.Factor)),
		")",
	)
	b := lines("(", indent(burn, "  "), ")")
	return lines(
		withLayer(lines(b, "unless on (job, target)", gw), LayerEndpoint),
		"or",
		withLayer(lines(b, "and on (job, target, module)", degraded), LayerPool),
		"or",
		withLayer(lines(b, "and on (job, target)", gw, "unless on (job, target, module)", degraded), LayerGateway),
	)
}

// withModel joins the model label of the target's probes onto expr, a series
// per (job, target, module) of the gateway joins, which carry no model.
func (s *Spec) withModel(expr string) string {
	return lines(
		"(",
		indent(expr, "  "),
		")",
		"* on (job, target, module) group_left (model)",
		fmt.Sprintf("group by (job, target, module, model) (vllm_probe_attempts_total{%s})", s.jobSel()),
	)
}

// failureRatio is the share of (job, target, module)'s probes that failed
// over window w for a reason other than shedding and sleep (which have their
// own alerts), 0 without failures; with vantages the lowest vantage's: a probe
// fails only where every vantage saw it fail.
func (s *Spec) failureRatio(w string) string {
	job := s.jobSel()
	attempts := fmt.Sprintf("sum without (instance, pod) (increase(vllm_probe_attempts_total{%s}[%s]))", job, w)
	return acrossVantages("min", lines(
		"(",
		fmt.Sprintf(`  sum without (instance, pod, reason) (increase(vllm_probe_failures_total{%s,reason!~"shed|sleeping"}[%s]))`, job, w),
		"  or",
		"  0 * "+attempts,
		")",
		"/ ("+attempts+" > 0)",
	))
}

// layerAlerts are the alerts that tell a gateway's layers apart: a member
// slower than the others, a member failing behind a gateway that still
// answers (both endpoint, naming the member), and the gateway's own overhead
// (gateway).
func (s *Spec) layerAlerts() []Rule {
	job := s.jobSel()
	a := s.Alerts
	th := func(x AlertSpec) string { return formatFloat(*x.Threshold) }
	spread := fmt.Sprintf("max without (instance, pod) (vllm_gateway_member_spread_ratio{%s})", job)
	w := a.GatewayMemberFailing.Window.String()
	return []Rule{
		optionalSeries("vllm_gateway_member_spread_ratio", "Only gateway targets with members export the spread: legitimately absent without gateways.", s.alert("VLLMGatewayMemberSlow", a.GatewayMemberSlow,
			s.withModel(lines(
				acrossVantages("min", spread)+" > "+th(a.GatewayMemberSlow),
				// Every vantage that reports the spread names this member
				// as the slowest: a member slow from one vantage only is
				// that vantage's path to it.
				"and on (job, target, module, member)",
				"(",
				"  count without ("+VantageLabel+") ("+spread+")",
				"  == on (job, target, module) group_left ()",
				"  count without ("+VantageLabel+", member, role) ("+spread+")",
				")",
			)),
			"A member behind a gateway is markedly slower than the others.",
			`{{ $labels.member }}, a member of gateway `+whoM+`, answers its direct probes with a median time to first token `+value+` times the median of the gateway's members (threshold `+th(a.GatewayMemberSlow)+`) for `+a.GatewayMemberSlow.For.String()+`, from every vantage: that one member is slow, not the gateway or the pool. Probes through the gateway that it serves are slow too.`)),
		optionalSeries("vllm_gateway_member_share_ratio", "Only gateway targets export their members' shares: legitimately absent without gateways.", s.alert("VLLMGatewayMemberFailing", a.GatewayMemberFailing,
			lines(
				"(",
				"  (",
				"    0 * max without (instance, pod, "+VantageLabel+") ("+s.gatewayMembers()+")",
				"    + on (job, module, member) group_left (model)",
				`    label_replace(`,
				indent(s.failureRatio(w), "      "),
				`    , "member", "$1", "target", "(.+)")`,
				"  ) > "+th(a.GatewayMemberFailing),
				")",
				// The gateway fails less than half the member's share: it
				// answers from its other members.
				"> on (job, target, module) group_left ()",
				"(",
				indent("2 * "+s.failureRatio(w), "  "),
				")",
			),
			"A member behind a gateway fails while the gateway still answers.",
			`{{ $labels.member }}, a member of gateway `+whoM+`, failed `+value+` of its direct probes over the last `+w+` (threshold `+th(a.GatewayMemberFailing)+`) while the gateway failed less than half that share of its own: the gateway routes around one broken member. Fix or replace that member; the pool is not at fault.`)),
		optionalSeries("vllm_gateway_overhead_seconds", "Only gateway targets export their overhead: legitimately absent without gateways.", s.alert("VLLMGatewayOverheadHigh", a.GatewayOverheadHigh,
			s.withModel(acrossVantages("min", fmt.Sprintf(`max without (instance, pod) (vllm_gateway_overhead_seconds{%s,stat="median"})`, job))+" > "+th(a.GatewayOverheadHigh)),
			"A gateway adds too much time to first token.",
			`Gateway `+whoM+` adds `+value+`s to the median time to first token of its members' direct probes (threshold `+th(a.GatewayOverheadHigh)+`s) for `+a.GatewayOverheadHigh.For.String()+`, from every vantage: the gateway's own queue, endpoint picker or data plane is slow while its members answer in time. Call the gateway's owner, not the members'.`)),
	}
}

package compare

import (
	"math"
	"slices"

	"github.com/vllm-prober/vllm_prober/internal/percentile"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// GatewayJoin sets the probes through a gateway (the user's path) beside the
// probes of each member behind it (the engine's), over one window and module.
type GatewayJoin struct {
	// OverheadMedian and OverheadP90 are the gateway's TTFT minus the
	// members' (all members' successful probes pooled), at the median and
	// the 90th percentile, in seconds: the time the gateway adds.
	OverheadMedian, OverheadP90 float64
	// Slowest is the member whose median TTFT is highest, and Spread its
	// median over the median of the members' medians (1: no outlier).
	Slowest string
	Spread  float64
	// Share is, per member, the share of the gateway's answered probes that
	// member served; GatewayAnswered the share the gateway answered itself
	// (no member named: a queue timeout, a shed request).
	Share           map[string]float64
	GatewayAnswered float64
	// MemberTTFT is each member's median TTFT (seconds), from its direct probes.
	MemberTTFT map[string]float64
}

// JoinGateway joins a window's probes of a gateway with its members' direct
// probes. memberHeader names the response header the gateway names the
// answering member in (probe.Member); memberOf maps that header's value to
// the member's target name (nil: the value is the name). ok is false when
// the gateway or the members had no successful probe.
func JoinGateway(gateway []probe.Result, memberHeader string, memberOf map[string]string, members map[string][]probe.Result) (GatewayJoin, bool) {
	j := GatewayJoin{Share: map[string]float64{}, MemberTTFT: map[string]float64{}}
	var gw []float64
	for i := range gateway {
		r := &gateway[i]
		if r.Success {
			gw = append(gw, r.TTFT.Seconds())
		}
		if r.StatusCode == 0 {
			continue // no answer at all
		}
		m := probe.Member(r, memberHeader)
		if name, ok := memberOf[m]; ok {
			m = name
		}
		if m == "" {
			j.GatewayAnswered++
		} else {
			j.Share[m]++
		}
	}
	answered := j.GatewayAnswered
	for _, n := range j.Share {
		answered += n
	}
	if answered > 0 {
		j.GatewayAnswered /= answered
		for m := range j.Share {
			j.Share[m] /= answered
		}
	}
	var pooled, medians []float64
	for name, rs := range members {
		var ttft []float64
		for _, r := range rs {
			if r.Success {
				ttft = append(ttft, r.TTFT.Seconds())
			}
		}
		if len(ttft) == 0 {
			continue
		}
		slices.Sort(ttft)
		m := percentile.Linear(ttft, 50)
		j.MemberTTFT[name] = m
		medians = append(medians, m)
		pooled = append(pooled, ttft...)
		if j.Slowest == "" || m > j.MemberTTFT[j.Slowest] || m == j.MemberTTFT[j.Slowest] && name < j.Slowest {
			j.Slowest = name
		}
	}
	if len(gw) == 0 || len(pooled) == 0 {
		return j, false
	}
	slices.Sort(gw)
	slices.Sort(pooled)
	slices.Sort(medians)
	j.OverheadMedian = percentile.Linear(gw, 50) - percentile.Linear(pooled, 50)
	j.OverheadP90 = percentile.Linear(gw, 90) - percentile.Linear(pooled, 90)
	if mid := percentile.Linear(medians, 50); mid > 0 {
		j.Spread = j.MemberTTFT[j.Slowest] / mid
	} else {
		j.Spread = math.NaN()
	}
	return j, true
}

package compare

import (
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/vllm-prober/vllm_prober/internal/percentile"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Share keys of a gateway's probes that no member served: they can never be
// target names, which start with a letter or digit.
const (
	// ShareGateway is the share the gateway answered itself: no member
	// header (a shed request, a queue timeout).
	ShareGateway = "_gateway"
	// ShareOther is the share whose member header names no member of the
	// gateway (a backend outside the configured set, or a value made only of
	// characters the prober drops, such as "***").
	ShareOther = "_other"
)

// GatewayJoin sets the probes through a gateway (the user's path) beside the
// probes of each member behind it (the engine's), over one window and module.
type GatewayJoin struct {
	// Probes is how many gateway probes were answered (the shares'
	// denominator).
	Probes int
	// OverheadMedian and OverheadP90 are the gateway's TTFT minus the
	// members' (all members' successful probes pooled), at the median and
	// the 90th percentile, in seconds: the time the gateway adds. NaN
	// without successful probes of both.
	OverheadMedian, OverheadP90 float64
	// Slowest is the member whose median TTFT is highest, and Spread its
	// median over the median of the members' medians (1: no outlier).
	Slowest string
	Spread  float64
	// Share is, per member, the share of the gateway's answered probes that
	// member served; ShareGateway the share the gateway answered itself,
	// ShareOther the share a backend outside the members served. Present
	// keys only; they sum to 1 when Probes > 0.
	Share map[string]float64
	// MemberTTFT is each member's median TTFT (seconds), from its direct probes.
	MemberTTFT map[string]float64
}

// JoinGateway joins a window's samples of a gateway with its members'
// direct samples, keyed by member target name. memberOf maps a member
// header value to the member's name (Config.MemberOf); a value that is a
// member's name needs no entry. ok is false when neither overhead nor
// spread nor any share is known.
func JoinGateway(gateway []prober.GatewaySample, memberOf map[string]string, members map[string][]prober.GatewaySample) (GatewayJoin, bool) {
	j := GatewayJoin{Share: map[string]float64{}, MemberTTFT: map[string]float64{},
		OverheadMedian: math.NaN(), OverheadP90: math.NaN(), Spread: math.NaN()}
	var gw []float64
	for _, s := range gateway {
		if s.Success {
			gw = append(gw, s.TTFT.Seconds())
		}
		if !s.Answered {
			continue // no answer at all: no one served it
		}
		j.Probes++
		j.Share[memberName(s.Member, memberOf, members)]++
	}
	for k := range j.Share {
		j.Share[k] /= float64(j.Probes)
	}
	var pooled, medians []float64
	for _, name := range slices.Sorted(maps.Keys(members)) {
		var ttft []float64
		for _, s := range members[name] {
			if s.Success {
				ttft = append(ttft, s.TTFT.Seconds())
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
		if j.Slowest == "" || m > j.MemberTTFT[j.Slowest] {
			j.Slowest = name
		}
	}
	if len(medians) > 0 {
		slices.Sort(medians)
		if mid := percentile.Linear(medians, 50); mid > 0 {
			j.Spread = j.MemberTTFT[j.Slowest] / mid
		}
	}
	if len(gw) > 0 && len(pooled) > 0 {
		slices.Sort(gw)
		slices.Sort(pooled)
		j.OverheadMedian = percentile.Linear(gw, 50) - percentile.Linear(pooled, 50)
		j.OverheadP90 = percentile.Linear(gw, 90) - percentile.Linear(pooled, 90)
	}
	return j, j.Probes > 0 || len(medians) > 0
}

// memberName is the share key of a member header value v.
func memberName(v string, memberOf map[string]string, members map[string][]prober.GatewaySample) string {
	switch v {
	case "":
		return ShareGateway
	case probe.MemberUnreadable:
		return ShareOther
	}
	if _, ok := members[v]; ok {
		return v
	}
	for _, k := range []string{v, strings.ToLower(v)} {
		if name, ok := memberOf[k]; ok {
			return name
		}
	}
	return ShareOther
}

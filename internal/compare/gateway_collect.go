package compare

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
)

// GatewaySource is what the gateway joins need from the prober;
// *prober.Manager implements it.
type GatewaySource interface {
	// GatewaySamples returns the kept samples of (target, module) that
	// started at or after since.
	GatewaySamples(target, module string, since time.Time) []prober.GatewaySample
}

var _ GatewaySource = (*prober.Manager)(nil)

// Gateway join metric names (docs/metrics.md, "Gateway joins").
const (
	mGWOverhead = "vllm_gateway_overhead_seconds"
	mGWSpread   = "vllm_gateway_member_spread_ratio"
	mGWShare    = "vllm_gateway_member_share_ratio"
	labelMember = "member"
	// labelRole is the role (config.Roles, "" for none) of the target a
	// gateway series names: the member's on the member series, the
	// gateway's own on the overhead. Bounded: three values and none.
	labelRole = "role"
)

// gatewayTarget is a gateway of the configuration and its members.
type gatewayTarget struct {
	name     string
	modules  []string
	static   []string
	members  []string          // sorted target names
	memberOf map[string]string // member header value -> member name
	role     string            // the gateway's role
	roles    map[string]string // member name -> its role
	window   time.Duration
}

// GatewayWindowProbes is how many of a gateway's probe intervals its joins
// reach back, unless the daemon fixes the window (--probe.window): shares
// and percentiles of fewer probes say little.
const GatewayWindowProbes = 10

// gatewayTargets lists cfg's gateways.
func gatewayTargets(cfg *config.Config, static []string) []gatewayTarget {
	var out []gatewayTarget
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if t.Gateway == nil {
			continue
		}
		roles := map[string]string{}
		for _, m := range cfg.GatewayMembers(t) {
			if mt, ok := cfg.Target(m); ok {
				roles[m] = mt.Role
			}
		}
		out = append(out, gatewayTarget{name: t.Name, modules: slices.Clone(t.Modules), static: t.StaticLabelValues(static),
			members: cfg.GatewayMembers(t), memberOf: cfg.MemberOf(t), role: t.Role, roles: roles,
			window: max(time.Duration(cfg.Global.RateWindow), GatewayWindowProbes*cfg.ProbeInterval(t))})
	}
	return out
}

func gatewayDescs(static []string, d map[string]*prometheus.Desc) {
	base := append([]string{labelTarget, labelModule}, static...)
	d[mGWOverhead] = prometheus.NewDesc(mGWOverhead,
		"TTFT of the probes through the gateway minus TTFT of the direct probes of its members (pooled), at stat median and p90, over the join window.",
		append(slices.Clone(base), labelStat, labelRole), nil)
	d[mGWSpread] = prometheus.NewDesc(mGWSpread,
		"Median TTFT of the gateway's slowest member (named by member) over the median of its members' median TTFTs, from their direct probes over the join window; 1 is no outlier.",
		append(slices.Clone(base), labelMember, labelRole), nil)
	d[mGWShare] = prometheus.NewDesc(mGWShare,
		"Share of the gateway's answered probes over the join window that each member served, by its member header; member _gateway: answered by the gateway itself, _other: by a backend outside its members.",
		append(slices.Clone(base), labelMember, labelRole), nil)
}

// GatewayModuleJoin is one module's join of a gateway.
type GatewayModuleJoin struct {
	Module  string
	Members []string // the gateway's members, sorted
	Window  time.Duration
	GatewayJoin
}

// GatewayJoins returns the joins of gateway target name, one per module,
// as Collect computes them now; nil when it is no gateway.
func (c *Collector) GatewayJoins(name string) []GatewayModuleJoin {
	c.mu.RLock()
	st := c.state
	c.mu.RUnlock()
	if c.gateways == nil {
		return nil
	}
	now := c.now()
	for _, g := range st.gateways {
		if g.name == name {
			return c.joinGateway(g, now)
		}
	}
	return nil
}

// joinGateway joins g's probes of each module with its members' at now.
func (c *Collector) joinGateway(g gatewayTarget, now time.Time) []GatewayModuleJoin {
	window := g.window
	if c.window > 0 {
		window = c.window
	}
	since := now.Add(-window)
	out := make([]GatewayModuleJoin, 0, len(g.modules))
	for _, mod := range g.modules {
		members := make(map[string][]prober.GatewaySample, len(g.members))
		for _, m := range g.members {
			members[m] = c.gateways.GatewaySamples(m, mod, since)
		}
		j, ok := JoinGateway(c.gateways.GatewaySamples(g.name, mod, since), g.memberOf, members)
		if ok {
			out = append(out, GatewayModuleJoin{Module: mod, Members: g.members, Window: window, GatewayJoin: j})
		}
	}
	return out
}

// collectGateways sends the join series of every gateway.
func (c *Collector) collectGateways(ch chan<- prometheus.Metric, st *state, now time.Time) {
	gauge := func(desc *prometheus.Desc, v float64, lv ...string) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			c.errs.Send(ch, lv[0], desc, prometheus.GaugeValue, v, lv...)
		}
	}
	for _, g := range st.gateways {
		for _, j := range c.joinGateway(g, now) {
			base := append([]string{g.name, j.Module}, g.static...)
			with := func(v, role string) []string { return append(base[:len(base):len(base)], v, role) }
			gauge(st.descs[mGWOverhead], j.OverheadMedian, with("median", g.role)...)
			gauge(st.descs[mGWOverhead], j.OverheadP90, with("p90", g.role)...)
			if j.Slowest != "" {
				gauge(st.descs[mGWSpread], j.Spread, with(j.Slowest, g.roles[j.Slowest])...)
			}
			if j.Probes == 0 {
				continue
			}
			// Every member and both other keys, zero when they served none:
			// a member the gateway stopped sending probes to reads 0, not
			// absent.
			for _, m := range append(slices.Clone(j.Members), ShareGateway, ShareOther) {
				gauge(st.descs[mGWShare], j.Share[m], with(m, g.roles[m])...)
			}
		}
	}
}

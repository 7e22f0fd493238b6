package prober

import (
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// GatewaySamples is how many recent probes each pair of a gateway, or of a
// gateway's member, keeps for the gateway joins (compare.JoinGateway): a
// window of the default 30 s interval reaches back an hour.
const GatewaySamples = 128

// GatewaySample is one scheduled probe as a gateway join reads it.
type GatewaySample struct {
	Start    time.Time
	Success  bool
	Answered bool          // an HTTP status came back (the gateway or a member answered)
	TTFT     time.Duration // of a successful probe
	// Member is, for a probe of a gateway, the value of its member header
	// (probe.Member: bounded, cleaned): who answered; "" when the gateway
	// answered itself.
	Member string
}

// sampleRing keeps the last GatewaySamples samples of a pair.
type sampleRing struct {
	s    []GatewaySample
	next int
}

func (r *sampleRing) add(s GatewaySample) {
	if len(r.s) < GatewaySamples {
		r.s = append(r.s, s)
		return
	}
	r.s[r.next] = s
	r.next = (r.next + 1) % GatewaySamples
}

// since appends the samples that started at or after since to out.
func (r *sampleRing) since(out []GatewaySample, since time.Time) []GatewaySample {
	for _, s := range r.s {
		if !s.Start.Before(since) {
			out = append(out, s)
		}
	}
	return out
}

// gatewayRoles returns the targets of cfg a gateway join reads: every
// gateway and every member, each with its member header ("" for a member
// that is no gateway).
func gatewayRoles(cfg *config.Config) map[string]string {
	roles := map[string]string{}
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if t.Gateway == nil {
			continue
		}
		roles[t.Name] = t.Gateway.MemberHeader
		for _, m := range cfg.GatewayMembers(t) {
			if _, ok := roles[m]; !ok {
				roles[m] = ""
			}
		}
	}
	return roles
}

// keepSample books res in p's samples, when p keeps them. m.mu must be held.
func (p *pair) keepSample(res *probe.Result) {
	if p.samples != nil {
		p.samples.add(SampleOf(res, p.memberHeader))
	}
}

// SampleOf is res as a gateway join reads it; memberHeader is the gateway's
// member header ("" for a member's own probe: nothing to read).
func SampleOf(res *probe.Result, memberHeader string) GatewaySample {
	s := GatewaySample{Start: res.Start, Success: res.Success, Answered: res.StatusCode != 0}
	if res.Success {
		s.TTFT = res.TTFT
	}
	if memberHeader != "" {
		s.Member = probe.Member(res, memberHeader)
	}
	return s
}

// GatewaySamples returns the kept samples of (target, module), all models
// of the target pooled, that started at or after since; nil when the
// target is neither a gateway nor a member of one.
func (m *Manager) GatewaySamples(target, module string, since time.Time) []GatewaySample {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.targets[target]
	if !ok {
		return nil
	}
	var out []GatewaySample
	for _, p := range t.pairs {
		if p.key.module == module && p.samples != nil {
			out = p.samples.since(out, since)
		}
	}
	return out
}

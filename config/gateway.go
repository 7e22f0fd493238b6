package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// DefaultMemberHeader is the response header a gateway names the member
// that answered in, unless the gateway's member_header says otherwise: the
// Gateway API Inference Extension's Endpoint Picker sets it to the endpoint
// it chose (a data plane passes it back on the response).
const DefaultMemberHeader = "X-Gateway-Destination-Endpoint"

// Gateway declares a target to be a gateway (an Endpoint Picker, a router,
// a load balancer) in front of other targets, its members. Probes through
// the gateway are joined with the members' direct probes (overhead, spread,
// share of each member), and the gateway's /metrics is read by the gateway
// profiles instead of the engine profiles.
type Gateway struct {
	// Members are the names of the static targets behind the gateway.
	Members []string `yaml:"members,omitempty"`
	// MemberLabel names a label of the gateway target: its members are the
	// other targets, static or discovered, with the same value of it.
	MemberLabel string `yaml:"member_label,omitempty"`
	// MemberHeader is the response header that names the member that
	// answered: its value is a member's target name or its URL's host:port.
	MemberHeader string `yaml:"member_header,omitempty"`
}

// validateGateway checks t's gateway declaration against the other targets
// of c (static ones; discovery may add members by label later).
func (c *Config) validateGateway(t *Target) error {
	g := t.Gateway
	switch {
	case len(g.Members) > 0 && g.MemberLabel != "":
		return errors.New("set members or member_label, not both")
	case len(g.Members) == 0 && g.MemberLabel == "":
		return errors.New("members (target names) or member_label (a label the members share with the gateway) is required")
	}
	if g.MemberHeader == "" {
		g.MemberHeader = DefaultMemberHeader
	}
	if !headerNameRE.MatchString(g.MemberHeader) {
		return fmt.Errorf("member_header %q is not a valid header name", g.MemberHeader)
	}
	if t.Engine != "" {
		return errors.New("engine does not apply: a gateway's /metrics is read by the gateway profiles (EPP, llm-d, production-stack router, HAProxy)")
	}
	seen := map[string]bool{}
	for _, name := range g.Members {
		if name == t.Name {
			return errors.New("the gateway lists itself as a member")
		}
		if seen[name] {
			return fmt.Errorf("member %q listed twice", name)
		}
		seen[name] = true
		m, ok := c.Target(name)
		if !ok {
			return fmt.Errorf("unknown member %q: members are names of static targets (use member_label for discovered ones)", name)
		}
		if m.Gateway != nil {
			return fmt.Errorf("member %q is itself a gateway", name)
		}
	}
	if g.MemberLabel == "" {
		return nil
	}
	v, ok := t.Labels[g.MemberLabel]
	if !ok || v == "" {
		return fmt.Errorf("member_label %q is not a label of this target: its members are the targets with its value", g.MemberLabel)
	}
	if !c.Discovery.Enabled() && len(c.GatewayMembers(t)) == 0 {
		return fmt.Errorf("member_label %s=%q matches no other target", g.MemberLabel, v)
	}
	return nil
}

// GatewayMembers returns the names of gw's members among c's targets,
// sorted: those it lists, or every other non-gateway target whose
// member_label value is the gateway's. Nil when gw is no gateway.
func (c *Config) GatewayMembers(gw *Target) []string {
	g := gw.Gateway
	if g == nil {
		return nil
	}
	var out []string
	if g.MemberLabel == "" {
		for _, name := range g.Members {
			if _, ok := c.Target(name); ok {
				out = append(out, name)
			}
		}
	} else {
		want := gw.Labels[g.MemberLabel]
		for i := range c.Targets {
			m := &c.Targets[i]
			if m.Name != gw.Name && m.Gateway == nil && want != "" && m.Labels[g.MemberLabel] == want {
				out = append(out, m.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// MemberOf maps the values gw's member header may take to member target
// names: each member's name and its URL's host:port (the Endpoint Picker
// names the endpoint it chose by address).
func (c *Config) MemberOf(gw *Target) map[string]string {
	out := map[string]string{}
	for _, name := range c.GatewayMembers(gw) {
		out[name] = name
		m, _ := c.Target(name)
		if u, err := url.Parse(m.URL); err == nil && u.Host != "" {
			if host := strings.ToLower(u.Host); out[host] == "" {
				out[host] = name
			}
		}
	}
	return out
}

package web_test

import (
	"math"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/web"
)

// The gateway table of a gateway target's page: per module, the overhead,
// the slowest member and its spread, and who served the gateway's probes;
// a module without a join yet says so.
func TestGatewayTableGolden(t *testing.T) {
	cfg, err := config.Load([]byte(`
modules:
  short: {prober: completions, prompt: hi}
  chat: {prober: chat, messages: [{role: user, content: hi}]}
targets:
  - {name: s1, url: "http://127.0.0.2:8000", labels: {pool: p}}
  - {name: s2, url: "http://127.0.0.3:8000", labels: {pool: p}}
  - name: gw
    url: http://127.0.0.1:8080
    labels: {pool: p}
    gateway: {member_label: pool}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := cfg.Target("gw")
	members := cfg.GatewayMembers(gw)
	joins := []compare.GatewayModuleJoin{{Module: "short", Members: members, Window: 5 * time.Minute, GatewayJoin: compare.GatewayJoin{
		Probes: 20, OverheadMedian: 0.0042, OverheadP90: 0.0117, Slowest: "s2", Spread: 1.94,
		Share:      map[string]float64{"s1": 0.5, "s2": 0.45, compare.ShareGateway: 0.05},
		MemberTTFT: map[string]float64{"s1": 0.041, "s2": 0.0795},
	}}, {Module: "chat", Members: members, Window: 5 * time.Minute, GatewayJoin: compare.GatewayJoin{
		Probes: 3, OverheadMedian: math.NaN(), OverheadP90: math.NaN(), Spread: math.NaN(),
		Share: map[string]float64{compare.ShareOther: 1}, MemberTTFT: map[string]float64{},
	}}}
	var b testWriter
	if err := web.ExecGatewayTable(&b, gw, members, joins); err != nil {
		t.Fatal(err)
	}
	var none testWriter
	if err := web.ExecGatewayTable(&none, gw, members, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "target-gateway.golden.html", b.String()+none.String())
}

package web

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
)

// gatewayPart is the "gateway" template of a gateway target's page: its
// members and, per module, the joins of vllm_gateway_overhead_seconds,
// vllm_gateway_member_spread_ratio and vllm_gateway_member_share_ratio.
const gatewayPart = `{{define "gateway"}}
<h3 id="gateway">Gateway</h3>
<p>Members ({{.Selection}}): {{if .Members}}{{join .Members ", "}}{{else}}<span class="unknown">none yet</span>{{end}}. Member header: {{.Header}}.</p>
{{- if .Rows}}
<table id="gateway-joins">
<tr><th>Module</th><th>Window</th><th>Gateway probes</th><th>Overhead median</th><th>Overhead p90</th><th>Slowest member</th><th>Spread</th></tr>
{{- range .Rows}}
<tr><td>{{.Module}}</td><td>{{.Window}}</td><td>{{.Probes}}</td><td>{{.OverheadMedian}}</td><td>{{.OverheadP90}}</td><td>{{or .Slowest "-"}}</td><td>{{.Spread}}</td></tr>
{{- end}}
</table>
<table id="gateway-members">
<tr><th>Module</th><th>Served by</th><th>Median TTFT (direct probes)</th><th>Share of gateway probes</th></tr>
{{- range .Rows}}{{$m := .Module}}
{{- range .Members}}
<tr><td>{{$m}}</td><td>{{.Name}}</td><td>{{.TTFT}}</td><td>{{.Share}}</td></tr>
{{- end}}
{{- end}}
</table>
{{- else}}
<p class="unknown">No join yet: the gateway and its members have no probes in the window.</p>
{{- end}}
{{end}}`

// gatewayTable is what the "gateway" template shows.
type gatewayTable struct {
	Selection string // how the members are chosen
	Header    string
	Members   []string
	Rows      []gatewayRow
}

type gatewayRow struct {
	Module, Window, OverheadMedian, OverheadP90, Slowest, Spread string
	Probes                                                       int
	Members                                                      []gatewayMemberRow
}

type gatewayMemberRow struct{ Name, TTFT, Share string }

// newGatewayTable renders the joins of gateway t, whose members are members.
func newGatewayTable(t *config.Target, members []string, joins []compare.GatewayModuleJoin) *gatewayTable {
	g := t.Gateway
	tab := &gatewayTable{Selection: "listed", Header: g.MemberHeader, Members: members}
	if g.MemberLabel != "" {
		tab.Selection = fmt.Sprintf("label %s=%q", g.MemberLabel, t.Labels[g.MemberLabel])
	}
	secs := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return strconv.FormatFloat(v*1e3, 'f', 1, 64) + "ms"
	}
	for _, j := range joins {
		r := gatewayRow{Module: j.Module, Window: j.Window.Round(time.Second).String(), Probes: j.Probes,
			OverheadMedian: secs(j.OverheadMedian), OverheadP90: secs(j.OverheadP90), Slowest: j.Slowest, Spread: "-"}
		if !math.IsNaN(j.Spread) {
			r.Spread = fmtFloat(j.Spread)
		}
		share := func(k string) string {
			if j.Probes == 0 {
				return "-"
			}
			return strconv.FormatFloat(j.Share[k]*100, 'f', 0, 64) + "%"
		}
		for _, m := range j.Members {
			ttft := "-"
			if v, ok := j.MemberTTFT[m]; ok {
				ttft = secs(v)
			}
			r.Members = append(r.Members, gatewayMemberRow{Name: m, TTFT: ttft, Share: share(m)})
		}
		r.Members = append(r.Members,
			gatewayMemberRow{Name: "the gateway itself (" + compare.ShareGateway + ")", TTFT: "-", Share: share(compare.ShareGateway)},
			gatewayMemberRow{Name: "another backend (" + compare.ShareOther + ")", TTFT: "-", Share: share(compare.ShareOther)})
		tab.Rows = append(tab.Rows, r)
	}
	return tab
}

// gatewayTableOf is the gateway table of t on the running configuration;
// nil when t is no gateway.
func (h *handler) gatewayTableOf(t *config.Target) *gatewayTable {
	if t.Gateway == nil {
		return nil
	}
	return newGatewayTable(t, h.opts.Running().GatewayMembers(t), h.cmp.GatewayJoins(t.Name))
}

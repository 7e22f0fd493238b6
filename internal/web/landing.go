package web

import (
	"bytes"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

var pageFuncs = template.FuncMap{
	"dur": fmtDur,
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"secs": fmtSecs,
	"join": strings.Join,
	"tps": func(r probe.Result) string {
		if v := r.OutputTokensPerSecond(); v > 0 {
			return fmtFloat(v)
		}
		return "-"
	},
	"record": recordURL,
}

// pageStyle is shared by / and /target.
const pageStyle = `<style>
body { font-family: sans-serif; margin: 1em 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; font-size: 90%; vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; }
.ok { color: #18794e; font-weight: bold; }
.fail { color: #c62828; font-weight: bold; }
.unknown { color: #777; }
.hot { color: #c62828; font-weight: bold; }
tr.failing td.st { background: #c62828; color: #fff; font-weight: bold; }
tr.flapping td.st { background: #ef6c00; color: #fff; font-weight: bold; }
tr.regressed td.st { background: #f9a825; font-weight: bold; }
tr.healthy td.st { background: #2e7d32; color: #fff; }
tr.pending td.st { background: #9e9e9e; color: #fff; }
#summary td, #summary th { font-size: 85%; }
#summary td:nth-child(n+6):nth-child(-n+10) { white-space: nowrap; }
#summary td:nth-child(4) { max-width: 24em; }
#summary td:nth-child(5) { max-width: 11em; }
#summary td:nth-child(11) { max-width: 16em; }
.counts { font-size: 120%; }
.counts .failing { color: #c62828; font-weight: bold; }
.counts .flapping { color: #ef6c00; font-weight: bold; }
.counts .regressed { color: #b08000; font-weight: bold; }
.counts .healthy { color: #2e7d32; }
.warn { color: #8a5300; }
form { margin: 0.5em 0; }
details { margin: 0.2em 0; }
pre { margin: 0.2em 0 0.5em 1em; font-size: 85%; }
h2 { margin-top: 1.5em; border-bottom: 1px solid #ddd; }
</style>`

// summaryOpen opens the summary table, on / and /target: the rows follow,
// then </tbody></table>.
const summaryOpen = `<table id="summary">
<thead><tr><th>State</th><th>Target</th><th>Module</th><th>Reason</th><th>Since</th><th title="links to the stored record of the last failed probe">Last failure</th><th>Last hour</th><th>History</th><th>TTFT / baseline</th><th>TPOT / baseline</th><th>Last scrape</th><th>Labels</th></tr></thead>
<tbody>`

// landingTemplate is /: a header with counts and filters, and one summary row
// per (target, module), worst first. Histories and timelines are on the
// targets' own pages (/target), so that the page stays small at a thousand
// targets.
var landingTemplate = template.Must(template.New("landing").Funcs(pageFuncs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
{{- if .Refresh}}
<meta http-equiv="refresh" content="{{.Refresh}}">
{{- end}}
<title>vLLM Prober</title>
` + pageStyle + `
</head>
<body>
<h1>vLLM Prober</h1>
<p class="counts" id="counts">{{range .Counts}}<span class="{{.State}}">{{.N}} {{.State}}</span> · {{end}}{{.Total}} (target, module) pairs</p>
<p><a href="{{.MetricsPath}}">Metrics</a> · <a href="config">Configuration</a> · Version {{.Version}} · As of {{ts .Now}}</p>
<form method="get" id="filters">
States:{{range .States}} <label><input type="checkbox" name="state" value="{{.Name}}"{{if .On}} checked{{end}}> {{.Name}}</label>{{end}}
· Label: <select name="label"><option value="">any</option>{{range .LabelValues}}<option{{if eq . $.Label}} selected{{end}}>{{.}}</option>{{end}}</select>
· Auto-refresh: <select name="refresh">{{range .RefreshOptions}}<option value="{{.}}"{{if eq . $.Refresh}} selected{{end}}>{{if .}}{{.}}s{{else}}off{{end}}</option>{{end}}</select>
<noscript><button>Apply</button></noscript>
</form>
` + summaryOpen + `
{{- range .Rows}}
{{.HTML}}
{{- else}}
<tr><td colspan="12" class="unknown">{{if .Total}}No pair matches the filters.{{else}}No targets configured.{{end}}</td></tr>
{{- end}}
</tbody>
</table>
{{- if .ScrapeOnly}}
<h2>Scrape-only targets</h2>
<table id="scrape-only">
<thead><tr><th>Target</th><th>Last scrape</th><th>Labels</th></tr></thead>
<tbody>
{{- range .ScrapeOnly}}
<tr><td><a href="{{.Section}}">{{.Target}}</a></td><td{{if .Bad}} class="hot"{{end}}>{{or .Scrape "not scraped yet"}}</td><td>{{or .Labels "-"}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
<p class="unknown">Showing {{len .Rows}} of {{.Total}} pairs. "Last hour" and "History" are success ratios over the last hour and the last --history.limit probes; a baseline ratio above {{.Threshold}} is coloured, as the alert fires. Each target's page has its recent probes, their timelines and stored records.</p>
<script>
document.getElementById("filters").addEventListener("change", function (e) { e.currentTarget.submit(); });
</script>
</body>
</html>
`))

type landingData struct {
	Version, MetricsPath string
	Now                  time.Time
	Counts               []stateCount
	Total                int
	Rows                 []pairRow
	States               []stateFilter
	LabelValues          []string
	Label                string
	Refresh              int
	RefreshOptions       []int
	Threshold            float64
	// ScrapeOnly are the targets without pairs (probe: false), with their
	// last scrape; the label filter applies to them too.
	ScrapeOnly []scrapeOnlyRow
}

type scrapeOnlyRow struct {
	Target, Section, Scrape, Labels string
	Bad                             bool
}

type stateCount struct {
	State string
	N     int
}

type stateFilter struct {
	Name string
	On   bool
}

func (h *handler) landingPage(w http.ResponseWriter, r *http.Request) {
	h.renderPage(w, func(b io.Writer) error {
		return landingTemplate.Execute(b, h.landingData(r.URL.Query(), h.probes.AllStats(), time.Now()))
	})
}

// landingData builds /'s data from the prober's pair statistics and the filters
// of the query (state, repeatable; label "k=v"; refresh seconds).
func (h *handler) landingData(q url.Values, stats []prober.PairStats, now time.Time) landingData {
	cfg := h.opts.Running()
	rows := h.summaryRows(cfg, stats, now)
	data := landingData{
		Version:        version.Info(),
		MetricsPath:    h.metricsLink(),
		Now:            now,
		Total:          len(rows),
		Label:          q.Get("label"),
		RefreshOptions: []int{0, 10, 30, 60},
		Threshold:      h.threshold,
	}
	if v, err := strconv.Atoi(q.Get("refresh")); err == nil && slices.Contains(data.RefreshOptions, v) {
		data.Refresh = v
	}
	counts := map[string]int{}
	labels := map[string]bool{}
	for i := range rows {
		counts[rows[i].State]++
		for kv := range strings.FieldsSeq(rows[i].Labels) {
			labels[kv] = true
		}
	}
	want := q["state"]
	for _, s := range stateOrder {
		if counts[s] > 0 || s != statePending {
			data.Counts = append(data.Counts, stateCount{s, counts[s]})
		}
		data.States = append(data.States, stateFilter{s, len(want) == 0 || slices.Contains(want, s)})
	}
	for kv := range labels {
		data.LabelValues = append(data.LabelValues, kv)
	}
	slices.Sort(data.LabelValues)
	data.Rows = rows[:0:0]
	for _, row := range rows {
		if len(want) > 0 && !slices.Contains(want, row.State) {
			continue
		}
		if data.Label != "" && !slices.Contains(strings.Fields(row.Labels), data.Label) {
			continue
		}
		data.Rows = append(data.Rows, row)
	}
	spanTargets(data.Rows)
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if t.Probe {
			continue
		}
		r := scrapeOnlyRow{Target: t.Name, Labels: labelText(t.Labels),
			Section: "target?" + url.Values{"name": {t.Name}}.Encode()}
		if data.Label != "" && !slices.Contains(strings.Fields(r.Labels), data.Label) {
			continue
		}
		r.Scrape, r.Bad = h.scrapeText(t.Name, now, summaryErrLen)
		data.ScrapeOnly = append(data.ScrapeOnly, r)
	}
	return data
}

// metricsLink is the telemetry path relative to /, so that it works behind a
// path prefix.
func (h *handler) metricsLink() string {
	if p := h.opts.TelemetryPath[1:]; p != "" {
		return p
	}
	return "."
}

// renderPage renders into a buffer first, so that a template error is a 500,
// not half a page.
func (h *handler) renderPage(w http.ResponseWriter, render func(io.Writer) error) {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		level.Error(h.logger).Log("msg", "Error rendering a page", "err", err)
		http.Error(w, "error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// targetTemplate is /target?name=T: one target's section, with every module's
// last probe and recent probes, each linking to its stored record.
var targetTemplate = template.Must(template.New("target").Funcs(pageFuncs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Name}} - vLLM Prober</title>
` + pageStyle + `
</head>
<body>
<p><a href="./">← all targets</a></p>
<h2 id="target-{{.Name}}">{{.Name}}</h2>
<table>
<tr><th>URL</th><td>{{.URL}}</td></tr>
<tr><th>Model</th><td>{{if .Model}}{{.Model}}{{else if .ScrapeOnly}}<span class="unknown">none: not probed</span>{{else}}<span class="unknown">not resolved yet</span>{{end}}</td></tr>
<tr><th>Labels</th><td>{{or .Labels "-"}}</td></tr>
<tr><th>/health</th><td>{{template "up" .}}{{if .Checked}}{{if .HealthUp}}<span class="ok">up</span>{{else}}<span class="fail">down</span>{{end}}{{end}}</td></tr>
<tr><th>/v1/models</th><td>{{template "up" .}}{{if .Checked}}{{if .ModelsUp}}<span class="ok">up</span>{{else}}<span class="fail">down</span>{{end}}{{end}}</td></tr>
<tr><th>/metrics</th><td id="last-scrape">{{if not .Scraped}}<span class="unknown">not scraped (scrape_metrics: false)</span>{{else if .Scrape}}<span class="{{if .ScrapeBad}}fail{{else}}ok{{end}}">{{.Scrape}}</span>{{else}}<span class="unknown">not scraped yet</span>{{end}}</td></tr>
</table>
{{- with .Gateway}}{{template "gateway" .}}{{end}}
{{- if .Summary}}
` + summaryOpen + `
{{- range .Summary}}
{{.HTML}}
{{- end}}
</tbody>
</table>
{{- end}}
{{- if .Modules}}
<table>
<tr><th>Module</th><th>Last probe</th><th>Result</th><th>TTFT</th><th>TPOT</th><th>E2E</th><th>Output tokens</th><th>Tokens/s</th><th>Error</th><th>Record</th></tr>
{{- range .Modules}}
<tr><td>{{.Module}}{{if .Model}} ({{.Model}}){{end}}</td>{{with .Last}}{{template "row" .}}{{else}}<td colspan="9" class="unknown">no probe yet</td>{{end}}</tr>
{{- end}}
</table>
{{- end}}
{{- range .Modules}}{{$m := .}}
<h3 id="{{.Section}}">{{.Module}}{{if .Model}} (model {{.Model}}){{end}}</h3>
<p>Probe now: <a href="{{.ProbeURL}}">metrics</a>, <a href="{{.DebugURL}}">debug report</a> <span class="warn">(runs a new probe: it spends tokens and can block up to the probe timeout)</span></p>
{{- if .Chart}}
<div class="chart">{{.Chart}}</div>
{{- end}}
{{- if .History}}
<table>
<tr><th>Started</th><th>Result</th><th>TTFT</th><th>TPOT</th><th>E2E</th><th>Output tokens</th><th>Tokens/s</th><th>Error</th><th>Record</th></tr>
{{- range .History}}
<tr>{{template "row" .}}</tr>
<tr><td colspan="9"><details><summary>timeline ({{len .Events}} events)</summary><pre>
{{- range .Events}}
+{{secs .Offset}}  {{.Kind}}{{if .Bytes}}  {{.Bytes}} bytes{{end}}
{{- end}}
</pre></details></td></tr>
{{- end}}
</table>
{{- end}}
{{- end}}
</body>
</html>
` + gatewayPart + `{{define "up"}}{{if .ScrapeOnly}}<span class="unknown">not checked: a scrape-only target (probe: false)</span>{{else if not .Checked}}<span class="unknown">not checked yet</span>{{end}}{{end}}
{{define "row"}}<td>{{ts .Start}}</td><td>{{if .Success}}<span class="ok">success</span>{{else}}<span class="fail">{{.Reason}}</span>{{end}}{{if .StatusCode}} (HTTP {{.StatusCode}}){{end}}</td><td>{{dur .TTFT}}</td><td>{{dur .TPOT}}</td><td>{{dur .E2E}}{{if not .Success}} (until the failure){{end}}</td><td>{{.OutputTokens}}</td><td>{{tps .Result}}</td><td>{{.Err}}</td><td>{{if .ID}}<a href="{{.RecordURL}}">record</a>{{else}}-{{end}}</td>{{end}}
`))

type targetPage struct {
	prober.TargetStatus
	Labels  string
	Summary []pairRow // the target's rows of /'s summary
	Modules []pageModule
	// Scraped: the collector scrapes the target (scrape_metrics); Scrape is
	// its last scrape ("" before the first), ScrapeBad when it failed.
	Scraped   bool
	Scrape    string
	ScrapeBad bool
	// Gateway is a gateway target's table (gatewaypage.go), else nil.
	Gateway *gatewayTable
}

type pageModule struct {
	prober.ModuleStatus
	Last               *pageResult
	History            []pageResult
	ProbeURL, DebugURL string
	Section            string // the id of its section (sectionID)
	// Chart draws History (historyChart); empty without history.
	Chart template.HTML
}

// sectionID is the id of the section of (module, model) on the page of target
// t: module-M, or module-M--X on a target with models, which has one section
// per model.
func sectionID(t *config.Target, module, model string) string {
	if t.Models == "" || model == "" {
		return "module-" + module
	}
	return "module-" + module + "--" + model
}

// pageResult is a result with its record link.
type pageResult struct {
	probe.Result
	ID        uint64 // the record id, 0 for none
	RecordURL string
}

func (h *handler) targetHandler(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	t, ok := h.opts.Running().Target(name)
	if !ok {
		textResponse(w, http.StatusNotFound, "unknown target %q", name)
		return
	}
	ts, ok := h.probes.TargetStatus(name)
	if !ok {
		ts = prober.TargetStatus{Name: t.Name, URL: t.URL, Model: t.Model}
	}
	page := h.targetPage(t, ts, h.probes.AllStats(), time.Now())
	h.renderPage(w, func(b io.Writer) error { return targetTemplate.Execute(b, page) })
}

// targetPage merges the configuration (which decides which modules are
// listed, in order) with what the prober knows, and scrubs every text that
// came from a server. Its summary is the target's rows of / (from stats, the
// statistics of every pair).
func (h *handler) targetPage(t *config.Target, ts prober.TargetStatus, stats []prober.PairStats, now time.Time) targetPage {
	s := h.scrubber
	var own []prober.PairStats
	for _, ps := range stats {
		if ps.Target == t.Name {
			own = append(own, ps)
		}
	}
	mods := map[string][]prober.ModuleStatus{} // a `models:` target has one per model
	for _, ms := range ts.Modules {
		mods[ms.Module] = append(mods[ms.Module], ms)
	}
	page := targetPage{TargetStatus: ts, Labels: labelText(t.Labels), Scraped: t.ScrapeMetrics, Summary: spanTargets(h.summaryRows(h.opts.Running(), own, now))}
	page.ScrapeOnly = !t.Probe
	page.Gateway = h.gatewayTableOf(t)
	if t.ScrapeMetrics {
		page.Scrape, page.ScrapeBad = h.scrapeText(t.Name, now, 300)
		if page.Gateway != nil && page.Scrape != "" {
			page.Scrape += "; read by the gateway profiles (vllm_gateway_*)"
		}
	}
	page.URL = s.scrub(ts.URL)
	page.TargetStatus.Modules = nil
	if t.Models != "" { // no one model: a section per listed model below
		page.Model = "models: " + t.Models + " (one section per listed model)"
	}
	var list []prober.ModuleStatus
	for _, name := range t.Modules {
		if ms, ok := mods[name]; ok {
			list = append(list, ms...)
		} else {
			list = append(list, prober.ModuleStatus{Module: name})
		}
	}
	for _, ms := range list {
		name := ms.Module
		pm := pageModule{ModuleStatus: ms}
		link := func(r prober.Record) pageResult {
			r.Err = s.scrub(r.Err) // a copy: the prober's results are shared and read-only
			pr := pageResult{Result: r.Result, ID: r.ID}
			if r.ID != 0 {
				pr.RecordURL = recordURL(t.Name, name, ms.Model, r.ID)
			}
			return pr
		}
		for _, r := range ms.History {
			pm.History = append(pm.History, link(r))
		}
		if ms.Last != nil {
			l := link(*ms.Last)
			pm.Last = &l
		}
		q := url.Values{"target": {t.Name}, "module": {name}}
		if ms.Model != "" {
			q.Set("model", ms.Model) // ModuleStatus.Model is set on targets with models only
		}
		pm.Chart = historyChart(name, pm.History, h.moduleExpectation(t, name))
		pm.Section = sectionID(t, name, ms.Model)
		pm.ProbeURL = "probe?" + q.Encode()
		q.Set("debug", "true")
		pm.DebugURL = "probe?" + q.Encode()
		page.Modules = append(page.Modules, pm)
	}
	return page
}

package daemon

import (
	"bytes"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
)

// landingTemplate is the / page: every target with its health, the last probe of
// each module and a bounded history of recent probes, each with its timeline.
var landingTemplate = template.Must(template.New("landing").Funcs(template.FuncMap{
	"dur": fmtDur,
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"secs": fmtSecs,
	"tps": func(r *prober.Result) string {
		if v := r.OutputTokensPerSecond(); v > 0 {
			return fmtFloat(v)
		}
		return "-"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>vLLM Prober</title>
<style>
body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; font-size: 90%; }
th { background: #f3f3f3; }
.ok { color: #18794e; font-weight: bold; }
.fail { color: #c62828; font-weight: bold; }
.unknown { color: #777; }
details { margin: 0.2em 0; }
pre { margin: 0.2em 0 0.5em 1em; font-size: 85%; }
h2 { margin-top: 1.5em; border-bottom: 1px solid #ddd; }
</style>
</head>
<body>
<h1>vLLM Prober</h1>
<p>Continuous streaming probes of vLLM endpoints. Version {{.Version}}.</p>
<ul>
<li><a href="{{.MetricsPath}}">Metrics</a></li>
<li><a href="config">Configuration</a></li>
{{- range .Targets}}{{$t := .}}{{range .Modules}}
<li>Probe {{$t.Name}} / {{.Module}} now: <a href="{{.ProbeURL}}">metrics</a>, <a href="{{.DebugURL}}">debug</a></li>
{{- end}}{{end}}
</ul>
{{range .Targets}}
<h2 id="target-{{.Name}}">{{.Name}}</h2>
<table>
<tr><th>URL</th><td>{{.URL}}</td></tr>
<tr><th>Model</th><td>{{if .Model}}{{.Model}}{{else}}<span class="unknown">not resolved yet</span>{{end}}</td></tr>
<tr><th>/health</th><td>{{template "up" .}}{{if .Checked}}{{if .HealthUp}}<span class="ok">up</span>{{else}}<span class="fail">down</span>{{end}}{{end}}</td></tr>
<tr><th>/v1/models</th><td>{{template "up" .}}{{if .Checked}}{{if .ModelsUp}}<span class="ok">up</span>{{else}}<span class="fail">down</span>{{end}}{{end}}</td></tr>
</table>
<table>
<tr><th>Module</th><th>Last probe</th><th>Result</th><th>TTFT</th><th>TPOT</th><th>E2E</th><th>Output tokens</th><th>Tokens/s</th><th>Error</th></tr>
{{- range .Modules}}
<tr><td>{{.Module}}</td>{{with .Last}}{{template "row" .}}{{else}}<td colspan="8" class="unknown">no probe yet</td>{{end}}</tr>
{{- end}}
</table>
{{- range .Modules}}{{if .History}}
<details>
<summary>Recent probes of {{.Module}} ({{len .History}}, newest first)</summary>
<table>
<tr><th>Started</th><th>Result</th><th>TTFT</th><th>TPOT</th><th>E2E</th><th>Output tokens</th><th>Tokens/s</th><th>Error</th></tr>
{{- range .History}}
<tr>{{template "row" .}}</tr>
<tr><td colspan="8"><details><summary>timeline ({{len .Events}} events)</summary><pre>
{{- range .Events}}
+{{secs .Offset}}  {{.Kind}}{{if .Bytes}}  {{.Bytes}} bytes{{end}}
{{- end}}
</pre></details></td></tr>
{{- end}}
</table>
</details>
{{- end}}{{end}}
{{else}}
<p>No targets configured.</p>
{{end}}
</body>
</html>
{{define "up"}}{{if not .Checked}}<span class="unknown">not checked yet</span>{{end}}{{end}}
{{define "row"}}<td>{{ts .Start}}</td><td>{{if .Success}}<span class="ok">success</span>{{else}}<span class="fail">{{.Reason}}</span>{{end}}{{if .StatusCode}} (HTTP {{.StatusCode}}){{end}}</td><td>{{dur .TTFT}}</td><td>{{dur .TPOT}}</td><td>{{dur .E2E}}</td><td>{{.OutputTokens}}</td><td>{{tps .}}</td><td>{{.Err}}</td>{{end}}
`))

type landingData struct {
	Version     string
	MetricsPath string
	Targets     []landingTarget
}

type landingTarget struct {
	prober.TargetStatus
	Modules []landingModule
}

type landingModule struct {
	prober.ModuleStatus
	ProbeURL, DebugURL string
}

func (d *Daemon) landingPage(w http.ResponseWriter, _ *http.Request) {
	data := landingData{
		Version:     version.Info(),
		MetricsPath: d.opts.TelemetryPath[1:], // relative: works behind a path prefix
		Targets:     d.pageTargets(d.Running(), d.probes.Status()),
	}
	if data.MetricsPath == "" {
		data.MetricsPath = "."
	}
	var buf bytes.Buffer
	if err := landingTemplate.Execute(&buf, data); err != nil {
		level.Error(d.logger).Log("msg", "Error rendering the landing page", "err", err)
		http.Error(w, "error rendering the landing page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// pageTargets merges the configuration (which decides what is listed, in order)
// with what the prober knows, and scrubs every text that came from a server.
func (d *Daemon) pageTargets(cfg *config.Config, statuses []prober.TargetStatus) []landingTarget {
	s := d.scrubber.Load()
	byName := map[string]prober.TargetStatus{}
	for _, ts := range statuses {
		byName[ts.Name] = ts
	}
	var out []landingTarget
	for _, t := range cfg.Targets {
		ts, ok := byName[t.Name]
		if !ok {
			ts = prober.TargetStatus{Name: t.Name, URL: t.URL, Model: t.Model}
		}
		mods := map[string]prober.ModuleStatus{}
		for _, ms := range ts.Modules {
			mods[ms.Module] = ms
		}
		lt := landingTarget{TargetStatus: ts}
		lt.URL = s.scrub(ts.URL)
		for _, name := range t.Modules {
			ms, ok := mods[name]
			if !ok {
				ms = prober.ModuleStatus{Module: name}
			}
			// The prober bounds the history (HistoryLimit recent probes plus as
			// many recent failures), so that failures stay visible longer.
			// Copy before scrubbing: the prober's results are shared and read-only.
			hist := make([]prober.Result, len(ms.History))
			for i, r := range ms.History {
				r.Err = s.scrub(r.Err)
				hist[i] = r
			}
			ms.History = hist
			if ms.Last != nil {
				last := *ms.Last
				last.Err = s.scrub(last.Err)
				ms.Last = &last
			}
			q := url.Values{"target": {t.Name}, "module": {name}}
			lm := landingModule{ModuleStatus: ms, ProbeURL: "probe?" + q.Encode()}
			q.Set("debug", "true")
			lm.DebugURL = "probe?" + q.Encode()
			lt.Modules = append(lt.Modules, lm)
		}
		out = append(out, lt)
	}
	return out
}

func fmtSecs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + "s"
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

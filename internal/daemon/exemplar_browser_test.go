package daemon

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.yaml.in/yaml/v3"
)

// omExemplar matches a TTFT bucket sample of the OpenMetrics exposition that
// carries an exemplar, and captures its record_id and value.
var omExemplar = regexp.MustCompile(`(?m)^vllm_probe_time_to_first_token_seconds_bucket\{[^}]*\} \d+ # \{record_id="([^"]+)"\} ([0-9.e+-]+)`)

// TestExemplarLinkInBrowser follows a probe's exemplar the way Grafana does:
// it reads the record_id of a TTFT exemplar from the daemon's OpenMetrics
// exposition, builds the link from deploy/compose's provisioned datasource
// (exemplarTraceIdDestinations, as Grafana expands it), shows it in a page
// shaped like Grafana's exemplar tooltip, clicks it in chromium, and checks
// that the page it lands on is that probe's record. The screenshot of the
// record page is written to $EXEMPLAR_SCREENSHOT when set.
func TestExemplarLinkInBrowser(t *testing.T) {
	ctx := browser(t)
	f := &fixture{t: t, sim: startSim(t, simKey)}
	f.path = filepath.Join(t.TempDir(), "vllm_prober.yml")
	writeConfig(t, f.path, fmt.Sprintf(`
global:
  probe_interval: 300ms
modules:
  short:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
    max_tokens: 8
targets:
  - name: sim
    url: %s
    http_client_config:
      authorization:
        credentials: %s
`, f.sim.URL, simKey))
	f.start(Options{ConfigFile: f.path, HistoryLimit: 20})

	var rid, value string
	waitFor(t, 20*time.Second, "a TTFT exemplar in the OpenMetrics exposition", func() bool {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if m := omExemplar.FindSubmatch(body); m != nil {
			rid, value = string(m[1]), string(m[2])
			return true
		}
		return false
	})

	// The link as Grafana builds it from the provisioned datasource: $$ is a
	// literal $ in a provisioning file, ${__value.raw} the exemplar's value.
	prov, err := os.ReadFile("../../deploy/compose/grafana/provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Datasources []struct {
			JSONData struct {
				Dest []struct {
					Name string `yaml:"name"`
					URL  string `yaml:"url"`
				} `yaml:"exemplarTraceIdDestinations"`
			} `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(prov, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || len(ds.Datasources[0].JSONData.Dest) != 1 || ds.Datasources[0].JSONData.Dest[0].Name != "record_id" {
		t.Fatalf("the compose datasource has no exemplarTraceIdDestinations for record_id: %+v", ds)
	}
	tmpl := strings.ReplaceAll(ds.Datasources[0].JSONData.Dest[0].URL, "$$", "$")
	link := strings.ReplaceAll(tmpl, "${__value.raw}", url.QueryEscape(rid))
	// The compose stack publishes the prober on 127.0.0.1:10040; here it is
	// the test's server.
	link = strings.Replace(link, "http://127.0.0.1:10040", f.srv.URL, 1)
	if !strings.HasPrefix(link, f.srv.URL+"/probe/record?id=") {
		t.Fatalf("the provisioned link %q does not open /probe/record on the prober", tmpl)
	}

	tooltip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Exemplar</title><h3>Exemplar</h3><table>
<tr><th>Value</th><td>%s</td></tr><tr><th>target</th><td>sim</td></tr><tr><th>module</th><td>short</td></tr>
<tr><th>record_id</th><td>%s <a id="link" href="%s">Probe record</a></td></tr></table>`,
			html.EscapeString(value), html.EscapeString(rid), html.EscapeString(link))
	}))
	t.Cleanup(tooltip.Close)

	if err := chromedp.Do(ctx, chromedp.Navigate(tooltip.URL), chromedp.WaitVisible(chromedp.CSS("#link")),
		chromedp.Click(chromedp.CSS("#link")), chromedp.WaitVisible(chromedp.CSS("body pre"))); err != nil {
		t.Fatalf("clicking the exemplar link: %v", err)
	}
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // PNG
	if err != nil {
		t.Fatal(err)
	}
	if location != link {
		t.Errorf("the click landed on %s, want %s", location, link)
	}
	n := rid[strings.LastIndexByte(rid, '-')+1:]
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		t.Fatalf("exemplar value %q: %v", value, err)
	}
	// The record is the exemplar's probe: its number and its TTFT.
	for _, want := range []string{`Stored record ` + n + ` of target "sim" module "short"`, "Result: success", fmt.Sprintf("TTFT: %.3fms", v*1e3)} {
		if !strings.Contains(page, want) {
			t.Errorf("the page behind exemplar %s lacks %q:\n%s", rid, want, page)
		}
	}
	secretFree(t, "the record page", page)
	if p := os.Getenv("EXEMPLAR_SCREENSHOT"); p != "" {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of %s written to %s", location, p)
	}
}

package mixin

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

const inhibitExample = "examples/alertmanager/inhibit.yml"

// amBinary finds Alertmanager's amtool and server (Debian's
// prometheus-alertmanager package installs them as amtool and
// prometheus-alertmanager). Without them the test skips, unless
// VLLM_PROBER_REQUIRE_ALERTMANAGER is set (CI sets it after installing them).
func amBinaries(t *testing.T) (amtool, server string) {
	t.Helper()
	var err error
	if amtool, err = exec.LookPath("amtool"); err == nil {
		for _, name := range []string{"alertmanager", "prometheus-alertmanager"} {
			if server, err = exec.LookPath(name); err == nil {
				return amtool, server
			}
		}
	}
	if os.Getenv("VLLM_PROBER_REQUIRE_ALERTMANAGER") != "" {
		t.Fatalf("amtool and alertmanager are required (VLLM_PROBER_REQUIRE_ALERTMANAGER): %v", err)
	}
	testtool.Skip(t, "amtool and alertmanager", "Debian: apt-get install prometheus-alertmanager")
	return "", ""
}

// inhibitRules decodes the inhibit_rules list of an Alertmanager configuration snippet.
func inhibitRules(t *testing.T, where string, b []byte) any {
	t.Helper()
	var doc struct {
		InhibitRules any `yaml:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if doc.InhibitRules == nil {
		t.Fatalf("%s has no inhibit_rules", where)
	}
	return doc.InhibitRules
}

// TestInhibitExampleIsDocumented checks that docs/runbook.md and the chart's
// values.yaml show the very inhibit rule of the example configuration.
func TestInhibitExampleIsDocumented(t *testing.T) {
	ex, err := os.ReadFile(root(inhibitExample))
	if err != nil {
		t.Fatal(err)
	}
	want := inhibitRules(t, inhibitExample, ex)

	doc, err := os.ReadFile(root("docs/runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(inhibit_rules:.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/runbook.md has no ```yaml block starting with inhibit_rules:")
	}
	if got := inhibitRules(t, "docs/runbook.md", m[1]); !reflect.DeepEqual(got, want) {
		t.Errorf("docs/runbook.md's inhibit rule %v differs from %s's %v", got, inhibitExample, want)
	}

	values, err := os.ReadFile(root("deploy/helm/vllm-prober/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The values show it as a comment block: "  # inhibit_rules:" and the lines below it.
	var block []string
	in := false
	for _, l := range strings.Split(string(values), "\n") {
		switch {
		case strings.HasPrefix(l, "  # inhibit_rules:"):
			in = true
		case in && !strings.HasPrefix(l, "  #   "):
			in = false
		}
		if in {
			block = append(block, strings.TrimPrefix(l, "  # "))
		}
	}
	if len(block) == 0 {
		t.Fatal("values.yaml shows no inhibit_rules example")
	}
	if got := inhibitRules(t, "values.yaml", []byte(strings.Join(block, "\n"))); !reflect.DeepEqual(got, want) {
		t.Errorf("values.yaml's inhibit rule %v differs from %s's %v", got, inhibitExample, want)
	}
}

// TestInhibitExampleOnAlertmanager runs the example configuration on a real
// Alertmanager: amtool check-config accepts it; with VLLMEndpointDown firing for
// target a, a's VLLMAvailabilityBudgetBurn alerts (two modules) and its
// VLLMEndpointUnreachableFromVantage ticket are inhibited while b's are not, and
// VLLMEndpointDown itself still notifies: one page per outage.
func TestInhibitExampleOnAlertmanager(t *testing.T) {
	amtool, server := amBinaries(t)
	cfg, err := filepath.Abs(root(inhibitExample))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(amtool, "check-config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config %s: %v\n%s", inhibitExample, err, out)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	am := exec.CommandContext(ctx, server, "--config.file="+cfg, "--storage.path="+t.TempDir(),
		"--web.listen-address="+addr, "--cluster.listen-address=")
	var logs strings.Builder
	am.Stdout, am.Stderr = &logs, &logs
	if err := am.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = am.Wait()
	}()
	url := "--alertmanager.url=http://" + addr

	add := func(labels ...string) {
		t.Helper()
		var err error
		var out []byte
		for range 50 { // until Alertmanager listens
			args := append([]string{"alert", "add", url}, labels...)
			if out, err = exec.CommandContext(ctx, amtool, args...).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("amtool alert add %v: %v\n%s\nalertmanager:\n%s", labels, err, out, logs.String())
	}
	add("alertname=VLLMEndpointDown", "job=vllm_prober", "instance=10.0.0.1:10040", "target=a", "model=llama-8b", "severity=critical")
	add("alertname=VLLMAvailabilityBudgetBurn", "job=vllm_prober", "target=a", "module=chat", "model=llama-8b", "severity=critical", "slo=availability", "long_window=1h", "short_window=5m")
	add("alertname=VLLMAvailabilityBudgetBurn", "job=vllm_prober", "target=a", "module=long", "model=llama-8b", "severity=critical", "slo=availability", "long_window=1h", "short_window=5m")
	add("alertname=VLLMAvailabilityBudgetBurn", "job=vllm_prober", "target=b", "module=chat", "model=llama-8b", "severity=critical", "slo=availability", "long_window=1h", "short_window=5m")
	// With vantages: a's ticket from the vantage that lost it first is muted
	// by the page, b's (a path fault, b is up) is not.
	add("alertname=VLLMEndpointUnreachableFromVantage", "job=vllm_prober", "instance=10.0.0.2:10040", "vantage=eu", "target=a", "model=llama-8b", "severity=warning")
	add("alertname=VLLMEndpointUnreachableFromVantage", "job=vllm_prober", "instance=10.0.0.2:10040", "vantage=eu", "target=b", "model=llama-8b", "severity=warning")

	// Where did it break: gw pages at layer pool (its members degrade), gw2
	// at layer gateway (its own overhead). Their endpoint-layer pages are
	// muted; the member page naming m2 is not, nor m1's own page, nor the
	// endpoint page of target c, which no gateway explains.
	layer := func(alert, target, layer string, extra ...string) {
		t.Helper()
		add(append([]string{"alertname=" + alert, "job=vllm_prober", "target=" + target, "module=chat", "model=llama-8b", "severity=warning", "layer=" + layer}, extra...)...)
	}
	layer("VLLMAvailabilityBudgetBurn", "gw", "pool", "slo=availability", "long_window=1h", "short_window=5m")
	layer("VLLMProbesFailing", "gw", "endpoint", "reason=http_5xx", "instance=10.0.0.1:10040")
	layer("VLLMGatewayMemberSlow", "gw", "endpoint", "member=m2")
	layer("VLLMProbesFailing", "m1", "endpoint", "reason=http_5xx", "instance=10.0.0.1:10040")
	layer("VLLMGatewayOverheadHigh", "gw2", "gateway", "stat=median")
	layer("VLLMLatencyRegression", "gw2", "endpoint", "metric=ttft", "baseline=h100", "instance=10.0.0.1:10040")
	layer("VLLMLatencyRegression", "c", "endpoint", "metric=ttft", "baseline=h100", "instance=10.0.0.1:10040")

	want := map[string]bool{ // alertname/target/module -> inhibited
		"VLLMAvailabilityBudgetBurn/gw/chat":    false,
		"VLLMProbesFailing/gw/chat":             true,
		"VLLMGatewayMemberSlow/gw/chat":         false,
		"VLLMProbesFailing/m1/chat":             false,
		"VLLMGatewayOverheadHigh/gw2/chat":      false,
		"VLLMLatencyRegression/gw2/chat":        true,
		"VLLMLatencyRegression/c/chat":          false,
		"VLLMEndpointDown/a/":                   false,
		"VLLMAvailabilityBudgetBurn/a/chat":     true,
		"VLLMAvailabilityBudgetBurn/a/long":     true,
		"VLLMAvailabilityBudgetBurn/b/chat":     false,
		"VLLMEndpointUnreachableFromVantage/a/": true,
		"VLLMEndpointUnreachableFromVantage/b/": false,
	}
	var got map[string]bool
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := exec.CommandContext(ctx, amtool, "alert", "query", "--active", "--inhibited", "-o", "json", url).Output()
		if err != nil {
			t.Fatalf("amtool alert query: %v\n%s", err, out)
		}
		var alerts []struct {
			Labels map[string]string `json:"labels"`
			Status struct {
				InhibitedBy []string `json:"inhibitedBy"`
			} `json:"status"`
		}
		if err := json.Unmarshal(out, &alerts); err != nil {
			t.Fatalf("amtool alert query -o json: %v\n%s", err, out)
		}
		got = map[string]bool{}
		for _, a := range alerts {
			got[a.Labels["alertname"]+"/"+a.Labels["target"]+"/"+a.Labels["module"]] = len(a.Status.InhibitedBy) > 0
		}
		if reflect.DeepEqual(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inhibited = %v, want %v", got, want)
	}
}

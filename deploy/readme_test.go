package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// TestDefaultPortEverywhere: the daemon's default port is the one the README,
// the Dockerfile, the chart and the compose stack use.
func TestDefaultPortEverywhere(t *testing.T) {
	port := strings.TrimPrefix(daemon.DefaultListenAddress, ":")
	if port != "10040" {
		t.Errorf("daemon.DefaultListenAddress = %q; the packaging uses 10040", daemon.DefaultListenAddress)
	}
	readme := readFile(t, filepath.Join(repoRoot, "README.md"))
	if !strings.Contains(readme, "| `--web.listen-address` | `"+daemon.DefaultListenAddress+"` |") {
		t.Errorf("README flags table does not give --web.listen-address default %s", daemon.DefaultListenAddress)
	}
	for file, want := range map[string]string{
		filepath.Join(repoRoot, "Dockerfile"):                                                     "EXPOSE " + port,
		filepath.Join(chartDir, "values.yaml"):                                                    "port: " + port,
		filepath.Join(composeDir, "docker-compose.yml"):                                           "127.0.0.1:" + port + ":" + port,
		filepath.Join(composeDir, "prometheus.yml"):                                               "vllm_prober:" + port,
		filepath.Join(repoRoot, "scripts", "demo.sh"):                                             "127.0.0.1:" + port,
		filepath.Join(repoRoot, "scripts", "test_image.sh"):                                       ":" + port,
		filepath.Join(repoRoot, "README.md"):                                                      "127.0.0.1:" + port,
		filepath.Join(repoRoot, "examples", "demo.yml"):                                           "", // only has to exist
		filepath.Join(repoRoot, "deploy", "helm", "vllm-prober", "templates", "statefulset.yaml"): ".Values.port",
	} {
		if got := readFile(t, file); !strings.Contains(got, want) {
			t.Errorf("%s does not contain %q", file, want)
		}
	}
}

// TestREADMEScrapeConfigs: the README's scrape_configs examples form a valid
// Prometheus configuration and scrape the default port.
func TestREADMEScrapeConfigs(t *testing.T) {
	readme := readFile(t, filepath.Join(repoRoot, "README.md"))
	blocks := regexp.MustCompile("(?s)```yaml\n(scrape_configs:\n.*?)```").FindAllStringSubmatch(readme, -1)
	if len(blocks) < 2 {
		t.Fatalf("README has %d scrape_configs examples, want the /metrics and the /probe one", len(blocks))
	}
	cfg := "scrape_configs:\n"
	for _, b := range blocks {
		cfg += strings.TrimPrefix(b[1], "scrape_configs:\n")
		if !strings.Contains(b[1], "127.0.0.1:10040") {
			t.Errorf("example does not reach vllm_prober on 127.0.0.1:10040:\n%s", b[1])
		}
	}
	if !strings.Contains(cfg, "job_name: "+proberJob(t)+"\n") {
		t.Errorf("no example scrapes vllm_prober under the job name the rules select (%s)", proberJob(t))
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testtool.Skip(t, "promtool", "apt-get install prometheus; the README's examples are not validated")
	}
	f := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check config on the README examples: %v\n%s\n%s", err, out, cfg)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

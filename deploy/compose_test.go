package deploy

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"
)

const composeDir = "compose"

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Build       any               `yaml:"build"`
	Image       string            `yaml:"image"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   []string          `yaml:"depends_on"`
	Restart     string            `yaml:"restart"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composeDir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// mounts maps each container path of a service's bind mounts to its host path
// relative to the compose directory.
func mounts(t *testing.T, s composeService) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
			t.Errorf("volume %q is not a relative bind mount", v)
			continue
		}
		m[parts[1]] = parts[0]
	}
	return m
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func TestComposeStack(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"vllm_sim", "vllm_prober", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("service %s missing; have %v", name, c.Services)
		}
	}
	for name, s := range c.Services {
		for ctr, host := range mounts(t, s) {
			p := filepath.Join(composeDir, host)
			if _, err := os.Stat(p); err != nil {
				if strings.HasSuffix(p, "dashboards") {
					t.Logf("%s: %s does not exist yet (no dashboards): Grafana starts without them", name, p)
					continue
				}
				t.Errorf("%s mounts %s at %s: %v", name, p, ctr, err)
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %s on every interface; the demo binds 127.0.0.1", name, p)
			}
		}
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("%s depends on unknown service %s", name, d)
			}
		}
	}

	// The simulator and the prober run the image of our Dockerfile.
	sim, prober := c.Services["vllm_sim"], c.Services["vllm_prober"]
	if sim.Build == nil || sim.Image == "" || prober.Image != sim.Image {
		t.Errorf("vllm_sim must build our image and vllm_prober use it: %+v / %+v", sim, prober)
	}
	if got := strings.Join(sim.Entrypoint, " "); got != "/bin/vllm_sim" {
		t.Errorf("vllm_sim entrypoint %q", got)
	}
	_, simPort, err := net.SplitHostPort(flagValue(sim.Command, "web.listen-address"))
	if err != nil {
		t.Fatalf("vllm_sim --web.listen-address: %v", err)
	}

	// vllm_prober's config loads and points at the simulator service.
	cfgPath := flagValue(prober.Command, "config.file")
	host, ok := mounts(t, prober)[cfgPath]
	if !ok {
		t.Fatalf("vllm_prober --config.file=%s is not a mounted file", cfgPath)
	}
	b, err := os.ReadFile(filepath.Join(composeDir, host))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(b, "/etc/vllm_prober")
	if err != nil {
		t.Fatalf("%s does not load: %v", host, err)
	}
	for _, tg := range cfg.Targets {
		u, err := url.Parse(tg.URL)
		if err != nil {
			t.Fatal(err)
		}
		if u.Host != "vllm_sim:"+simPort {
			t.Errorf("target %s probes %s, want the simulator service vllm_sim:%s", tg.Name, u.Host, simPort)
		}
	}

	// Prometheus scrapes vllm_prober under the job name the rules select and
	// loads the rule files from the mounted chart copy of alerts/.
	prom := c.Services["prometheus"]
	promCfgPath := flagValue(prom.Command, "config.file")
	pm := mounts(t, prom)
	var pc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	pb, err := os.ReadFile(filepath.Join(composeDir, pm[promCfgPath]))
	if err != nil {
		t.Fatalf("prometheus --config.file=%s: %v", promCfgPath, err)
	}
	if err := yaml.Unmarshal(pb, &pc); err != nil {
		t.Fatal(err)
	}
	job := proberJob(t)
	found := false
	for _, sc := range pc.ScrapeConfigs {
		if sc.JobName == job {
			found = true
			if len(sc.StaticConfigs) != 1 || strings.Join(sc.StaticConfigs[0].Targets, ",") != "vllm_prober:10040" {
				t.Errorf("job %s scrapes %v, want vllm_prober:10040", job, sc.StaticConfigs)
			}
		}
	}
	if !found {
		t.Errorf("prometheus.yml has no job %q, which the rules select", job)
	}
	if len(pc.RuleFiles) != 1 {
		t.Fatalf("rule_files = %v", pc.RuleFiles)
	}
	ruleDir, ok := pm[path.Dir(pc.RuleFiles[0])]
	if !ok {
		t.Fatalf("rule_files %s is not in a mounted directory", pc.RuleFiles[0])
	}
	hostRuleDir := filepath.Join(composeDir, ruleDir)
	if got, want := listDir(t, hostRuleDir, path.Base(pc.RuleFiles[0])), ruleFiles(t); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Prometheus would load %v, want the rule files %v", got, want)
	}

	// promtool checks the config with the rule glob pointed at the host copy.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Logf("promtool is not installed: prometheus.yml checked by parsing only")
	} else {
		abs, err := filepath.Abs(hostRuleDir)
		if err != nil {
			t.Fatal(err)
		}
		local := strings.Replace(string(pb), pc.RuleFiles[0], filepath.Join(abs, path.Base(pc.RuleFiles[0])), 1)
		f := filepath.Join(t.TempDir(), "prometheus.yml")
		if err := os.WriteFile(f, []byte(local), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", "config", f).CombinedOutput(); err != nil {
			t.Errorf("promtool check config: %v\n%s", err, out)
		}
	}

	// Grafana: the datasource is the Prometheus service and the dashboard
	// provider reads the directory dashboards/ is mounted at.
	gm := mounts(t, c.Services["grafana"])
	prov := filepath.Join(composeDir, gm["/etc/grafana/provisioning"])
	var ds struct {
		Datasources []struct {
			Type, URL string
		} `yaml:"datasources"`
	}
	readInto(t, filepath.Join(prov, "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("datasources = %+v", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Options struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	readInto(t, filepath.Join(prov, "dashboards", "vllm_prober.yml"), &dp)
	if len(dp.Providers) != 1 || gm[dp.Providers[0].Options.Path] != "../../dashboards" {
		t.Errorf("dashboard provider reads %+v; dashboards/ is mounted at another path (%v)", dp.Providers, gm)
	}
}

func readInto(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

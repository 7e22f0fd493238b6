package sdconfig_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/discovery/sdconfig"
)

// file mimics how config.Config embeds the discovery section.
type file struct {
	Targets   []config.Target                `yaml:"targets"`
	Discovery sdconfig.Config[config.Target] `yaml:",inline"`
}

func load(t *testing.T, s string) (*file, error) {
	t.Helper()
	f := &file{}
	if err := yaml.UnmarshalStrict([]byte(s), f); err != nil {
		return nil, err
	}
	return f, f.Discovery.Validate()
}

func TestDefaultsAndInline(t *testing.T) {
	f, err := load(t, `
file_sd_configs:
  - files: [targets/*.json, /abs/x.yml]
http_sd_configs:
  - url: http://127.0.0.1:9/sd
    authorization: {credentials: s3cr3t}
relabel_configs:
  - source_labels: [__address__]
    target_label: __target_name__
target_defaults:
  modules: [short]
  max_num_seqs: 256
`)
	if err != nil {
		t.Fatal(err)
	}
	d := f.Discovery
	if !d.Enabled() {
		t.Error("Enabled() = false")
	}
	if got := d.FileSDConfigs[0].RefreshInterval; got != model.Duration(5*time.Minute) {
		t.Errorf("file refresh_interval = %s, want 5m", got)
	}
	h := d.HTTPSDConfigs[0]
	if h.RefreshInterval != model.Duration(time.Minute) {
		t.Errorf("http refresh_interval = %s, want 1m", h.RefreshInterval)
	}
	if !h.HTTPClientConfig.FollowRedirects || !h.HTTPClientConfig.EnableHTTP2 {
		t.Errorf("http client defaults not applied: %+v", h.HTTPClientConfig)
	}
	if h.HTTPClientConfig.Authorization == nil || string(h.HTTPClientConfig.Authorization.Credentials) != "s3cr3t" {
		t.Errorf("inline authorization not decoded: %+v", h.HTTPClientConfig.Authorization)
	}
	if rc := d.RelabelConfigs[0]; rc.Action != "replace" || rc.Replacement != "$1" {
		t.Errorf("relabel defaults not applied: %+v", rc)
	}
	td := d.TargetDefaults
	if td == nil || td.MaxNumSeqs != 256 || td.MetricsPath != "/metrics" || !td.ScrapeMetrics {
		t.Errorf("target_defaults = %+v, want config.DefaultTarget with max_num_seqs 256", td)
	}

	d.SetDirectory("/etc/vllm_prober")
	if got, want := d.FileSDConfigs[0].Files, []string{filepath.FromSlash("/etc/vllm_prober/targets/*.json"), "/abs/x.yml"}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("SetDirectory: files = %q, want %q", got, want)
	}
}

func TestNoDiscovery(t *testing.T) {
	f, err := load(t, `targets: []`)
	if err != nil {
		t.Fatal(err)
	}
	if f.Discovery.Enabled() || f.Discovery.TargetDefaults != nil {
		t.Errorf("empty discovery = %+v", f.Discovery)
	}
}

func TestInvalid(t *testing.T) {
	for _, tc := range []struct{ name, in, err string }{
		{"unknown key", "file_sd_configs: [{files: [a.json], bogus: 1}]", "yaml: unmarshal errors:\n  line 1: field bogus not found in type sdconfig.plain"},
		{"unknown template key", "file_sd_configs: [{files: [a.json]}]\ntarget_defaults: {nme: x}", "yaml: unmarshal errors:\n  line 2: field nme not found in type config.plain"},
		{"no files", "file_sd_configs: [{refresh_interval: 1m}]", "file_sd_configs[0]: files must not be empty"},
		{"bad extension", "file_sd_configs: [{files: [targets.txt]}]", `file_sd_configs[0]: path "targets.txt" is not valid for file discovery: a wildcard only in the last path element and a .json, .yml or .yaml extension`},
		{"wildcard in dir", "file_sd_configs: [{files: [\"*/t.json\"]}]", `file_sd_configs[0]: path "*/t.json" is not valid for file discovery: a wildcard only in the last path element and a .json, .yml or .yaml extension`},
		{"bad glob", "file_sd_configs: [{files: [\"t[.json\"]}]", `file_sd_configs[0]: path "t[.json": syntax error in pattern`},
		{"zero file refresh", "file_sd_configs: [{files: [a.json], refresh_interval: 0s}]", "file_sd_configs[0]: refresh_interval must be greater than 0"},
		{"no url", "http_sd_configs: [{refresh_interval: 1m}]", "http_sd_configs[0]: url is required"},
		{"bad scheme", "http_sd_configs: [{url: ftp://x/sd}]", `http_sd_configs[0]: url scheme "ftp" is not http or https`},
		{"no host", "http_sd_configs: [{url: 'http:///sd'}]", "http_sd_configs[0]: url has no host"},
		{"credentials in url", "http_sd_configs: [{url: 'http://u:hunter2@x/sd'}]", "http_sd_configs[0]: url must not carry credentials: use basic_auth or authorization"},
		{"bad url", "http_sd_configs: [{url: 'http://x/%zz'}]", `http_sd_configs[0]: url is not valid: invalid URL escape "%zz"`},
		{"zero http refresh", "http_sd_configs: [{url: 'http://x/sd', refresh_interval: 0s}]", "http_sd_configs[0]: refresh_interval must be greater than 0"},
		{"two auths", "http_sd_configs: [{url: 'http://x/sd', bearer_token: a, basic_auth: {username: u, password: p}}]", "http_sd_configs[0]: http client config: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured"},
		{"bad relabel", "file_sd_configs: [{files: [a.json]}]\nrelabel_configs: [{action: hashmod, target_label: x}]", "relabel_configs[0]: relabel configuration for hashmod requires non-zero modulus"},
		{"bad relabel target", "file_sd_configs: [{files: [a.json]}]\nrelabel_configs: [{source_labels: [a], target_label: 'a-b'}]", `relabel_configs[0]: "a-b" is invalid 'target_label' for replace action`},
		{"null relabel", "file_sd_configs: [{files: [a.json]}]\nrelabel_configs: [~]", "relabel_configs[0]: empty rule"},
		{"relabel without sd", "relabel_configs: [{action: drop, source_labels: [a]}]", "relabel_configs and target_defaults need file_sd_configs or http_sd_configs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.in)
			if err == nil {
				t.Fatalf("no error, want %q", tc.err)
			}
			if err.Error() != tc.err {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.err)
			}
		})
	}
}

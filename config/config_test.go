package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v2"
)

// Every rule of the configuration file has one invalid file and the exact error it
// must produce, in the manner of blackbox_exporter's config tests.
func TestLoadFileInvalid(t *testing.T) {
	tests := []struct {
		file string
		want string // after `error parsing config file "<path>": `
	}{
		{"invalid-bad-duration.yml", "global: not a valid duration string: \"30\""},
		{"invalid-baseline-no-file.yml", "baseline \"h100\": file is required"},
		{"invalid-baseline-no-name.yml", "baselines[0]: name is required"},
		{"invalid-buckets-empty.yml", "global: buckets must not be empty"},
		{"invalid-buckets-order.yml", "global: buckets must be positive and strictly increasing"},
		{"invalid-chat-empty-content.yml", "module \"short_chat\": messages[0]: content is required"},
		{"invalid-chat-no-messages.yml", "module \"short_chat\": prober chat needs messages"},
		{"invalid-chat-prompt.yml", "module \"short_chat\": prober chat takes messages, not a prompt"},
		{"invalid-chat-role.yml", "module \"short_chat\": messages[1]: role \"robot\" is not one of system, user, assistant, developer"},
		{"invalid-completions-messages.yml", "module \"short_completion\": prober completions takes a prompt, not messages"},
		{"invalid-completions-no-prompt.yml", "module \"short_completion\": prober completions needs a prompt"},
		{"invalid-duplicate-baseline.yml", "baselines: duplicate name \"h100\""},
		{"invalid-duplicate-module.yml", "yaml: unmarshal errors:\n  line 6: key \"short_completion\" already set in map"},
		{"invalid-duplicate-target.yml", "duplicate target name \"sim\""},
		{"invalid-extra-body-max-tokens.yml", "module \"short_completion\": extra_body may not set \"max_tokens\": use the module key max_tokens"},
		{"invalid-extra-body-max-completion-tokens.yml", "module \"short_chat\": extra_body may not set \"max_completion_tokens\": use the module key max_tokens"},
		{"invalid-extra-body-n.yml", "module \"short_completion\": extra_body may not set \"n\": a probe measures exactly one completion"},
		{"invalid-extra-body-stream.yml", "module \"short_completion\": extra_body may not set \"stream\""},
		{"invalid-header-name.yml", "module \"short_completion\": header name \"X Probe\" is not valid"},
		{"invalid-header-secret.yml", "module \"short_completion\": header \"Authorization\" carries a secret: set it in the target's http_client_config"},
		{"invalid-http-client-basic-and-auth.yml", "target \"sim\": at most one of basic_auth, oauth2 & authorization must be configured"},
		{"invalid-http-client-two-auth.yml", "target \"sim\": authorization is not compatible with bearer_token & bearer_token_file"},
		{"invalid-label-name.yml", "target \"sim\": label name \"gpu-type\" is not valid"},
		{"invalid-label-reserved.yml", "target \"sim\": label name \"model\" is reserved"},
		{"invalid-label-reserved-index.yml", "target \"sim\": label name \"index\" is reserved"},
		{"invalid-max-concurrent.yml", "global: max_concurrent_probes must be at least 1, got 0"},
		{"invalid-max-num-seqs.yml", "target \"sim\": max_num_seqs must not be negative, got -1"},
		{"invalid-engine.yml", "target \"sim\": unknown engine \"tgi\" (one of vllm, ray, sglang, trtllm, triton, llamacpp, dynamo, nim)"},
		{"invalid-max-tokens.yml", "module \"short_completion\": max_tokens must be at least 1, got 0"},
		{"invalid-metrics-path.yml", "target \"sim\": metrics_path \"metrics\" must start with /"},
		{"invalid-health-path.yml", "target \"sim\": health_path \"health\" must start with /"},
		{"invalid-module-timeout.yml", "module \"short_completion\": not a valid duration string: \"-1s\""},
		{"invalid-module-twice.yml", "target \"sim\": module \"short_completion\" listed twice"},
		{"invalid-native-factor.yml", "global: native_histogram_bucket_factor must be greater than 1, got 1"},
		{"invalid-no-modules.yml", "no modules defined"},
		{"invalid-no-targets.yml", "no targets defined"},
		{"invalid-prober-missing.yml", "module \"nameless\": prober is required (completions, chat, embeddings or responses)"},
		{"invalid-prober.yml", "module \"grpc_probe\": prober \"grpc\" is not valid (completions, chat, embeddings or responses)"},
		{"invalid-rate-window.yml", "global: rate_window 1m must be at least twice scrape_interval 40s"},
		{"invalid-gate-vantage-twice.yml", "global: gate: vantages[1]: vantage \"eu\" is listed twice"},
		{"invalid-gate-vantage-credentials.yml", "global: gate: vantages[0] (eu): url must not carry credentials: use http_client_config"},
		{"invalid-peak-flops.yml", "target \"sim\": peak_flops_per_gpu must be a GPU's peak in FLOP/s, between 1e+09 and 1e+18 (989e12 for an H100's dense BF16), got 989"},
		{"invalid-gateway-both.yml", "target \"gw\": gateway: set members or member_label, not both"},
		{"invalid-gateway-neither.yml", "target \"gw\": gateway: members (target names) or member_label (a label the members share with the gateway) is required"},
		{"invalid-gateway-unknown-member.yml", "target \"gw\": gateway: unknown member \"pod-c\": members are names of static targets (use member_label for discovered ones)"},
		{"invalid-gateway-itself.yml", "target \"gw\": gateway: the gateway lists itself as a member"},
		{"invalid-gateway-member-twice.yml", "target \"gw\": gateway: member \"pod-a\" listed twice"},
		{"invalid-gateway-member-gateway.yml", "target \"gw\": gateway: member \"gw2\" is itself a gateway"},
		{"invalid-gateway-header.yml", "target \"gw\": gateway: member_header \"X Served By\" is not a valid header name"},
		{"invalid-gateway-engine.yml", "target \"gw\": gateway: engine does not apply: a gateway's /metrics is read by the gateway profiles (EPP, llm-d, production-stack router, HAProxy)"},
		{"invalid-gateway-label-not-own.yml", "target \"gw\": gateway: member_label \"zone\" is not a label of this target: its members are the targets with its value"},
		{"invalid-gateway-label-no-match.yml", "target \"gw\": gateway: member_label pool=\"llama\" matches no other target"},
		{"invalid-gateway-unknown-key.yml", "target \"gw\": yaml: unmarshal errors:\n  line 15: field member not found in target \"gw\""},
		{"invalid-sd-defaults-gateway.yml", "target_defaults: gateway must be empty: a gateway is a static target (its members may be discovered: gateway.member_label)"},
		{"invalid-sd-defaults-name.yml", "target_defaults: name must be empty: discovery names each target (__target_name__)"},
		{"invalid-sd-defaults-reserved-label.yml", "target_defaults: label name \"source\" is reserved"},
		{"invalid-sd-defaults-unknown-baseline.yml", "target_defaults: unknown baseline \"h100\""},
		{"invalid-sd-defaults-unknown-field.yml", "target_defaults: yaml: unmarshal errors:\n  line 8: field modul not found in target_defaults"},
		{"invalid-sd-defaults-unknown-module.yml", "target_defaults: unknown module \"short_chat\""},
		{"invalid-sd-defaults-url.yml", "target_defaults: url must be empty: discovery provides each target's address"},
		{"invalid-sd-file-pattern.yml", "file_sd_configs[0]: path name \"targets/*/fleet.json\" is not valid for file discovery"},
		{"invalid-sd-http-credentials.yml", "http_sd_configs[0]: url must not carry credentials: use basic_auth or authorization"},
		{"invalid-sd-http-scheme.yml", "http_sd_configs[0]: URL scheme must be 'http' or 'https'"},
		{"invalid-sd-http-two-auth.yml", "http_sd_configs[0]: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured"},
		{"invalid-sd-no-files.yml", "file_sd_configs[0]: file service discovery config must contain at least one path name"},
		{"invalid-sd-refresh-interval.yml", "file_sd_configs[0]: refresh_interval must be greater than 0"},
		{"invalid-sd-relabel-action.yml", "unknown relabel action \"explode\""},
		{"invalid-sd-relabel-without-discovery.yml", "relabel_configs and target_defaults need a discovery mechanism (file_sd_configs, http_sd_configs, kubernetes_sd_configs or dns_sd_configs)"},
		{"invalid-scrape-timeout.yml", "global: scrape_timeout 10s is greater than scrape_interval 5s"},
		{"invalid-target-interval.yml", "target \"sim\": not a valid duration string: \"-5s\""},
		{"invalid-target-name.yml", "target \"llama 8b\": name must match ^[A-Za-z0-9][A-Za-z0-9_.:-]*$"},
		{"invalid-target-no-name.yml", "targets[0]: name is required"},
		{"invalid-temperature.yml", "module \"short_completion\": temperature must not be negative, got -0.5"},
		{"invalid-token-budget-negative.yml", "target \"sim\": token_budget_per_hour must not be negative, got -1"},
		{"invalid-token-budget.yml", "target \"sim\": token_budget_per_hour 10 is smaller than max_tokens 64 of module \"short_completion\": every probe would be skipped"},
		{"invalid-unknown-baseline.yml", "target \"sim\": unknown baseline \"h100-sharegpt\""},
		{"invalid-unknown-field.yml", "global: yaml: unmarshal errors:\n  line 2: field probe_intervall not found in global"},
		{"invalid-unknown-module.yml", "target \"sim\": unknown module \"short_chat\""},
		{"invalid-unknown-target-field.yml", "target \"sim\": yaml: unmarshal errors:\n  line 8: field modul not found in target \"sim\""},
		{"invalid-unknown-top-level.yml", "yaml: unmarshal errors:\n  line 5: field target not found"},
		{"invalid-url-credentials.yml", "target \"sim\": url must not carry credentials: use http_client_config"},
		{"invalid-url-missing.yml", "target \"sim\": url is required"},
		{"invalid-url-no-host.yml", "target \"sim\": url has no host"},
		{"invalid-url-query.yml", "target \"sim\": url must not have a query or fragment"},
		{"invalid-url-scheme.yml", "target \"sim\": url scheme \"ftp\" is not http or https"},
		{"invalid-url-v1.yml", "target \"sim\": url must be the server root, without /v1"},
		{"invalid-yaml-syntax.yml", "yaml: line 2: did not find expected ',' or ']'"},
		{"invalid-second-document.yml", "line 8: a second YAML document: the configuration file must be one document"},
		{"invalid-second-document-bad-yaml.yml", "line 9: a second YAML document: the configuration file must be one document (and it does not parse: yaml: line 9: did not find expected ',' or '}')"},
		{"invalid-yaml11-bool.yml", "line 10: targets[1].probe: off is read as the boolean false: YAML 1.1 reads an unquoted n, no, off and false (in any case) as false; write false"},
		{"invalid-zero-interval.yml", "global: probe_interval must be greater than 0"}, {"invalid-expect-regex.yml", "modules.math.expect.regex: error parsing regexp: missing closing ): `4(`"},
		{"invalid-expect-schema.yml", "modules.json.expect.json_schema: invalid schema: the schema is not valid against metaschema: jsonschema validation failed with 'https://json-schema.org/draft/2020-12/schema#' - at '': 'allOf' failed - at '/properties/count': 'allOf' failed - at '/properties/count/minimum': got string, want number"},
		{"invalid-question-expect.yml", "modules.quiz.questions[1].expect: set exactly one of regex, equals, json_schema, one_of (2 set)"},
		{"invalid-response-format-schema.yml", "modules.json.response_format.json_schema.schema: invalid schema: the schema is not valid against metaschema: jsonschema validation failed with 'https://json-schema.org/draft/2020-12/schema#' - at '': 'allOf' failed - at '/type': 'anyOf' failed - at '/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string' - at '/type': got string, want array"},
		{"invalid-tool-choice.yml", "modules.tool.tool_choice.function.name: \"get_time\" is not one of the module's tools"},
		{"invalid-models-regex.yml", "target \"sim\": models: \"llama-(8b\" is neither \"all\" nor a valid regular expression: error parsing regexp: missing closing ): `llama-(8b`"},
		{"invalid-models-and-model.yml", "target \"sim\": set model or models, not both"},
		{"invalid-embeddings-expect.yml", "modules.embed: expect and questions do not apply to prober embeddings"},
	}
	files, err := filepath.Glob("testdata/invalid-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("%d testdata/invalid-*.yml files but %d test cases: every file needs its expected error", len(files), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			cfg, err := LoadFile(path)
			if err == nil {
				t.Fatalf("LoadFile(%s) succeeded, want error %q", path, tc.want)
			}
			if cfg != nil {
				t.Errorf("LoadFile(%s) returned a config with its error", path)
			}
			want := `error parsing config file "` + path + `": ` + tc.want
			if err.Error() != want {
				t.Errorf("LoadFile(%s) error:\n got: %s\nwant: %s", path, err, want)
			}
		})
	}
}

// Secrets written in a wrong place must not be echoed back by the error that
// rejects them.
func TestLoadFileInvalidDoesNotLeakSecrets(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"sk-header-secret-1234", "sk-url-secret-5678", "sk-bearer-secret-9999", "sk-auth-secret-0000", "sk-basic-secret-4321"}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, lerr := LoadFile(f)
		for _, s := range secrets {
			if strings.Contains(string(data), s) {
				seen[s] = true
				if lerr != nil && strings.Contains(lerr.Error(), s) {
					t.Errorf("%s: error %q leaks the secret %q", f, lerr, s)
				}
			}
		}
	}
	for _, s := range secrets {
		if !seen[s] {
			t.Errorf("no invalid testdata file carries %q: the test checks nothing for it", s)
		}
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, err := LoadFile("testdata/does-not-exist.yml")
	want := "error reading config file: open testdata/does-not-exist.yml: no such file or directory"
	if err == nil || err.Error() != want {
		t.Errorf("LoadFile(missing) = %v, want %q", err, want)
	}
}

func TestLoadFileDefaults(t *testing.T) {
	cfg, err := LoadFile("testdata/minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	// probe_timeout unset: min(60s, probe_interval 30s), Prometheus' rule.
	want := DefaultGlobal
	want.ProbeTimeout = model.Duration(30 * time.Second)
	if !reflect.DeepEqual(cfg.Global, want) {
		t.Errorf("global = %+v, want the defaults %+v", cfg.Global, want)
	}
	m := cfg.Modules["short_chat"]
	if m.MaxTokens != 64 || m.Temperature != 0 || !m.IgnoreEOS || !m.Nonce || m.Timeout != 0 || m.StallTimeout != 0 {
		t.Errorf("module defaults not applied: %+v", m)
	}
	tg := cfg.Targets[0]
	if tg.MetricsPath != "/metrics" || !tg.ScrapeMetrics || tg.Model != "" || tg.TokenBudgetPerHour != 0 {
		t.Errorf("target defaults not applied: %+v", tg)
	}
	if !tg.HTTPClientConfig.FollowRedirects || !tg.HTTPClientConfig.EnableHTTP2 {
		t.Errorf("http_client_config defaults not applied: %+v", tg.HTTPClientConfig)
	}
	if want := []string{"short_chat"}; !reflect.DeepEqual(tg.Modules, want) {
		t.Errorf("target modules = %v, want every module %v", tg.Modules, want)
	}
	if got := cfg.ProbeInterval(&tg); got != 30*time.Second {
		t.Errorf("ProbeInterval = %s, want 30s", got)
	}
	if got := cfg.ProbeTimeout(&tg, &m); got != 30*time.Second {
		t.Errorf("ProbeTimeout = %s, want 30s (the default 60s bounded by probe_interval)", got)
	}
	if got := cfg.StallTimeout(&m); got != 15*time.Second {
		t.Errorf("StallTimeout = %s, want 15s", got)
	}
	if got := cfg.ScrapeInterval(&tg); got != 15*time.Second {
		t.Errorf("ScrapeInterval = %s, want 15s", got)
	}
	if got := cfg.StaticLabelNames(); len(got) != 0 {
		t.Errorf("StaticLabelNames = %v, want none", got)
	}
	// Defaults are package variables: loading must not have changed them.
	if DefaultGlobal.Buckets[0] != 0.025 || len(DefaultGlobal.Buckets) != 10 || DefaultTarget.Modules != nil {
		t.Errorf("loading mutated the defaults: %+v %+v", DefaultGlobal, DefaultTarget)
	}
}

func TestLoadFileGood(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Global
	if g.ProbeInterval != model.Duration(time.Minute) || g.MaxConcurrentProbes != 4 ||
		!reflect.DeepEqual(g.Buckets, []float64{0.01, 0.1, 1, 10}) || g.NativeHistogramBucketFactor != 1.1 {
		t.Errorf("global = %+v", g)
	}
	sc := cfg.Modules["short_completion"]
	if sc.MaxTokens != 32 || sc.Temperature != 0.5 || sc.IgnoreEOS || sc.Nonce ||
		sc.ExtraBody["seed"] != 42 || sc.Headers["X-Probe-Source"] != "vllm_prober" {
		t.Errorf("short_completion = %+v", sc)
	}
	if got := cfg.Modules["short_chat"].Messages; len(got) != 2 || got[1] != (Message{Role: "user", Content: "Name three prime numbers."}) {
		t.Errorf("short_chat messages = %+v", got)
	}
	if want := filepath.Join(dir, "baselines/h100.json"); cfg.Baselines[0].File != want {
		t.Errorf("baseline file = %q, want it resolved against the config directory: %q", cfg.Baselines[0].File, want)
	}

	llama, ok := cfg.Target("llama8b-h100")
	if !ok {
		t.Fatal(`Target("llama8b-h100") not found`)
	}
	if llama.URL != "http://127.0.0.1:8000" {
		t.Errorf("url = %q, want the trailing slash trimmed", llama.URL)
	}
	if llama.HTTPClientConfig.Authorization == nil || llama.HTTPClientConfig.Authorization.Credentials != "sk-good-secret-abcdef" {
		t.Errorf("authorization = %+v", llama.HTTPClientConfig.Authorization)
	}
	m := cfg.Modules["short_completion"]
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"ProbeInterval", cfg.ProbeInterval(llama), 40 * time.Second},
		{"ProbeTimeout with a module timeout", cfg.ProbeTimeout(llama, &m), 30 * time.Second},
		{"ProbeTimeout without one", cfg.ProbeTimeout(llama, &Module{}), 20 * time.Second},
		{"StallTimeout", cfg.StallTimeout(&m), 5 * time.Second},
		{"StallTimeout global", cfg.StallTimeout(&Module{}), 10 * time.Second},
		{"ScrapeInterval", cfg.ScrapeInterval(llama), 5 * time.Second},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}

	qwen, _ := cfg.Target("qwen-a100")
	if want := []string{"short_chat", "short_completion"}; !reflect.DeepEqual(qwen.Modules, want) {
		t.Errorf("qwen modules = %v, want all modules sorted %v", qwen.Modules, want)
	}
	if want := filepath.Join(dir, "secrets/qwen.key"); qwen.HTTPClientConfig.Authorization.CredentialsFile != want {
		t.Errorf("credentials_file = %q, want %q", qwen.HTTPClientConfig.Authorization.CredentialsFile, want)
	}
	if qwen.ScrapeMetrics {
		t.Error("scrape_metrics: false was not honoured")
	}
	if got, want := cfg.StaticLabelNames(), []string{"preset", "region"}; !reflect.DeepEqual(got, want) {
		t.Errorf("StaticLabelNames = %v, want %v", got, want)
	}
	if got, want := qwen.StaticLabelValues(cfg.StaticLabelNames()), []string{"", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("qwen StaticLabelValues = %q, want %q", got, want)
	}
	if got, want := llama.StaticLabelValues([]string{"region", "preset"}), []string{"eu", "H100X1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("llama StaticLabelValues = %q, want %q", got, want)
	}
	lg, _ := cfg.Target("llama-gateway")
	if got := cfg.GatewayMembers(lg); !reflect.DeepEqual(got, []string{"llama8b-h100"}) || lg.Gateway.MemberHeader != "X-Served-By" {
		t.Errorf("llama-gateway members %v, header %q", got, lg.Gateway.MemberHeader)
	}
	qr, _ := cfg.Target("qwen-router")
	if got := cfg.GatewayMembers(qr); !reflect.DeepEqual(got, []string{"qwen-a100"}) || qr.Gateway.MemberHeader != DefaultMemberHeader {
		t.Errorf("qwen-router members %v, header %q", got, qr.Gateway.MemberHeader)
	}
	if _, ok := cfg.Target("nope"); ok {
		t.Error(`Target("nope") found`)
	}
}

// What /config shows must load back to the same configuration (secrets aside,
// which render as <secret>), and rendering is a fixed point.
func TestRoundTrip(t *testing.T) {
	for _, f := range []string{"testdata/good.yml", "testdata/minimal.yml", "testdata/good-discovery.yml", "../examples/demo.yml"} {
		t.Run(f, func(t *testing.T) {
			cfg, err := LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out := cfg.String()
			again, err := Load([]byte(out), filepath.Dir(f))
			if err != nil {
				t.Fatalf("rendered config does not load: %v\n%s", err, out)
			}
			for i := range cfg.Targets {
				if a := cfg.Targets[i].HTTPClientConfig.Authorization; a != nil && a.Credentials != "" {
					if got := again.Targets[i].HTTPClientConfig.Authorization.Credentials; got != "<secret>" {
						t.Errorf("credentials rendered as %q, want <secret>", got)
					}
					again.Targets[i].HTTPClientConfig.Authorization.Credentials = a.Credentials
				}
			}
			if !reflect.DeepEqual(cfg, again) {
				t.Errorf("round trip changed the config:\nbefore: %+v\nafter:  %+v", cfg, again)
			}
			if out2 := again.String(); out2 != out {
				t.Errorf("rendering is not a fixed point:\n%s\n---\n%s", out, out2)
			}
		})
	}
}

// Every kind of secret prometheus/common knows renders as <secret> on /config.
func TestStringRedactsSecrets(t *testing.T) {
	const secretConfig = `
modules:
  m: {prober: completions, prompt: hi}
targets:
  - name: bearer
    url: http://127.0.0.1:8000
    http_client_config:
      bearer_token: sk-bearer-AAAA
      proxy_url: http://proxyuser:sk-proxy-BBBB@127.0.0.1:3128
  - name: authorization
    url: http://127.0.0.1:8001
    http_client_config:
      authorization: {type: Bearer, credentials: sk-auth-CCCC}
      http_headers:
        X-Api-Token: {secrets: [sk-header-DDDD]}
  - name: basic
    url: http://127.0.0.1:8002
    http_client_config:
      basic_auth: {username: probe, password: sk-basic-EEEE}
      tls_config: {key: sk-tls-key-FFFF, cert: not-secret-cert}
  - name: oauth
    url: http://127.0.0.1:8003
    http_client_config:
      oauth2: {client_id: probe, client_secret: sk-oauth-GGGG, token_url: http://127.0.0.1:9/token}
`
	cfg, err := Load([]byte(secretConfig), "")
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.String()
	for _, s := range []string{"sk-bearer-AAAA", "sk-proxy-BBBB", "sk-auth-CCCC", "sk-header-DDDD", "sk-basic-EEEE", "sk-tls-key-FFFF", "sk-oauth-GGGG"} {
		if strings.Contains(out, s) {
			t.Errorf("String() leaks %q:\n%s", s, out)
		}
	}
	if n := strings.Count(out, "<secret>"); n != 6 {
		t.Errorf("String() has %d <secret> placeholders, want 6:\n%s", n, out)
	}
	if !strings.Contains(out, "not-secret-cert") || !strings.Contains(out, "username: probe") {
		t.Errorf("String() dropped non-secret values:\n%s", out)
	}
	if commoncfg.MarshalSecretValue {
		t.Error("commoncfg.MarshalSecretValue is set: secrets would be marshaled in clear")
	}
	// The in-memory values are intact: only rendering redacts them.
	// (prometheus/common turns bearer_token into authorization credentials.)
	if a := cfg.Targets[0].HTTPClientConfig.Authorization; a == nil || a.Credentials != "sk-bearer-AAAA" {
		t.Error("loading lost the bearer token")
	}
	var back Config
	if err := yaml.Unmarshal([]byte(out), &back); err != nil {
		t.Errorf("rendered config is not YAML: %v", err)
	}
}

// Discovery alone is enough, relative paths resolve against the configuration's
// directory, and target_defaults is validated and completed like a target.
func TestLoadFileDiscovery(t *testing.T) {
	cfg, err := LoadFile("testdata/good-discovery.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Discovery
	if !d.Enabled() || len(cfg.Targets) != 0 {
		t.Fatalf("discovery enabled = %v with %d static targets, want true and 0", d.Enabled(), len(cfg.Targets))
	}
	if got, want := d.FileSDConfigs[0].Files, []string{filepath.Join(dir, "targets/*.json"), "/etc/vllm_prober/targets/*.yml"}; !reflect.DeepEqual(got, want) {
		t.Errorf("file_sd files = %q, want %q", got, want)
	}
	if got := d.FileSDConfigs[0].RefreshInterval; got != model.Duration(5*time.Minute) {
		t.Errorf("file_sd refresh_interval = %s, want the default 5m", got)
	}
	if got, want := d.HTTPSDConfigs[0].HTTPClientConfig.Authorization.CredentialsFile, filepath.Join(dir, "secrets/inventory"); got != want {
		t.Errorf("http_sd credentials_file = %q, want %q", got, want)
	}
	if len(d.RelabelConfigs) != 1 || d.RelabelConfigs[0].TargetLabel != "__target_name__" {
		t.Errorf("relabel_configs = %+v", d.RelabelConfigs)
	}
	td := d.TargetDefaults
	if td == nil {
		t.Fatal("target_defaults is nil")
	}
	if want := []string{"short_chat", "short_completion"}; !reflect.DeepEqual(td.Modules, want) {
		t.Errorf("target_defaults modules = %v, want every module %v", td.Modules, want)
	}
	if td.MetricsPath != "/metrics" || !td.ScrapeMetrics || td.Baseline != "h100" || td.Labels["team"] != "inference" {
		t.Errorf("target_defaults = %+v, want the target defaults plus the file's keys", td)
	}
	if got, want := td.HTTPClientConfig.Authorization.CredentialsFile, filepath.Join(dir, "secrets/vllm"); got != want {
		t.Errorf("target_defaults credentials_file = %q, want %q", got, want)
	}

	// Without target_defaults, discovered targets start from DefaultTarget with every module.
	cfg, err = Load([]byte("modules: {m: {prober: completions, prompt: hi}}\nfile_sd_configs: [{files: [t.json]}]\n"), "/etc/vllm_prober")
	if err != nil {
		t.Fatal(err)
	}
	if td := cfg.Discovery.TargetDefaults; td == nil || !reflect.DeepEqual(td.Modules, []string{"m"}) || td.MetricsPath != "/metrics" {
		t.Errorf("target_defaults = %+v, want DefaultTarget with modules [m]", td)
	}
	if got := cfg.Discovery.FileSDConfigs[0].Files[0]; got != "/etc/vllm_prober/t.json" {
		t.Errorf("file_sd file = %q, want /etc/vllm_prober/t.json", got)
	}
}

// TestHistogramsAndMetrics: global.histograms defaults to classic, takes
// native and both (with the default native factor), turns classic into both
// when native_histogram_bucket_factor is set, and refuses anything else;
// global.metrics.disable takes only families that can be turned off.
func TestHistogramsAndMetrics(t *testing.T) {
	const rest = "\nmodules:\n  m: {prober: completions, prompt: hi}\ntargets:\n  - {name: a, url: http://127.0.0.1:1}\n"
	for _, tc := range []struct {
		global, want string
		factor       float64
		classic      bool
	}{
		{"", HistogramsClassic, 0, true},
		{"histograms: native", HistogramsNative, DefaultNativeHistogramBucketFactor, false},
		{"histograms: both", HistogramsBoth, DefaultNativeHistogramBucketFactor, true},
		{"native_histogram_bucket_factor: 1.2", HistogramsBoth, 1.2, true},
		{"histograms: native\n  native_histogram_bucket_factor: 1.05", HistogramsNative, 1.05, false},
	} {
		cfg, err := Load([]byte("global:\n  "+tc.global+rest), "")
		if err != nil {
			t.Fatalf("%q: %v", tc.global, err)
		}
		g := &cfg.Global
		if g.Histograms != tc.want || g.NativeFactor() != tc.factor || g.ClassicBuckets() != tc.classic {
			t.Errorf("%q: histograms %q factor %v classic %v, want %q %v %v", tc.global, g.Histograms, g.NativeFactor(), g.ClassicBuckets(), tc.want, tc.factor, tc.classic)
		}
	}
	for _, tc := range []struct{ global, want string }{
		{"histograms: sparse", `global: histograms must be classic, native or both, got "sparse"`},
		{"metrics: {disable: [vllm_probe_success]}", `global: metrics: disable: "vllm_probe_success" is not a family that can be turned off`},
	} {
		if _, err := Load([]byte("global:\n  "+tc.global+rest), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.global, err, tc.want)
		}
	}
	cfg, err := Load([]byte("global:\n  metrics: {disable: [vllm_probe_inter_token_latency_seconds]}"+rest), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Global.Metrics.Disable; len(got) != 1 {
		t.Errorf("metrics.disable = %v", got)
	}
}

// TestEveryReservedLabelRefused: a static target label or a target_defaults
// label named as one of the prober's own series' labels (engine, vantage,
// reason, le, ...) is refused at load, by --config.check and at reload, with
// a sentence naming it. Accepted, engine crashed /metrics with a vantage set,
// and vantage made every probe and server family fail to gather.
func TestEveryReservedLabelRefused(t *testing.T) {
	for _, name := range ReservedLabels {
		for _, tc := range []struct{ where, text, want string }{
			{"target", "targets:\n  - {name: sim, url: \"http://127.0.0.1:8000\", labels: {" + name + ": x}}\n",
				`target "sim": label name "` + name + `" is reserved`},
			{"target_defaults", "file_sd_configs: [{files: [x.json]}]\ntarget_defaults: {labels: {" + name + ": x}}\n",
				`target_defaults: label name "` + name + `" is reserved`},
		} {
			_, err := Load([]byte("modules: {short: {prober: completions, prompt: hi}}\n"+tc.text), t.TempDir())
			if err == nil || err.Error() != tc.want {
				t.Errorf("%s label %q: err = %v, want %q", tc.where, name, err, tc.want)
			}
		}
	}
}

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/clierr"
)

// errLine is the err value of the "Error loading config" log line, "" when there is none.
var errLine = regexp.MustCompile(`msg="Error loading config" err=("(?:[^"\\]|\\.)*"|\S+)`)

// TestConfigCheckIsTheDaemonsLoad: --config.check and the daemon load a file the same
// way, so the same file gets the same verdict, exit code and message from both.
func TestConfigCheckIsTheDaemonsLoad(t *testing.T) {
	baselineFile, err := filepath.Abs("../../examples/baselines/vllm-sim-default.yml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		files   map[string]string // relative to the configuration's directory
		config  string
		wantErr string // "" when the file is good
	}{
		{
			name:   "good file",
			files:  map[string]string{"sd/targets.yml": "- targets: [127.0.0.1:8001]\n"},
			config: "baselines: [{name: b, file: " + baselineFile + "}]\nfile_sd_configs: [{files: [sd/*.yml]}]\n",
		},
		{
			name:    "missing baseline",
			config:  "baselines: [{name: b, file: no-such-baseline.yml}]\n",
			wantErr: `baselines: baseline \"b\": `,
		},
		{
			name:    "garbage baseline",
			files:   map[string]string{"garbage.yml": "this is not: [a baseline\n"},
			config:  "baselines: [{name: b, file: garbage.yml}]\n",
			wantErr: `baselines: baseline \"b\": `,
		},
		{
			name:    "bad SD file",
			files:   map[string]string{"sd/bad.yml": "- targets: [127.0.0.1:8001]\n  bogus: true\n"},
			config:  "file_sd_configs: [{files: [sd/*.yml]}]\n",
			wantErr: `discovery: file_sd_configs[0]: `,
		},
		{
			name:    "kubeconfig_file that does not load",
			files:   map[string]string{"kube/config": "this is not: [a kubeconfig\n"},
			config:  "kubernetes_sd_configs: [{role: pod, kubeconfig_file: kube/config}]\n",
			wantErr: `discovery: kubernetes_sd_configs[0]: `,
		},
		{
			name:    "kubernetes_sd_config Prometheus refuses",
			config:  "kubernetes_sd_configs: [{role: pod, api_server: 'https://127.0.0.1:6443', kubeconfig_file: kube/config}]\n",
			wantErr: `kubernetes_sd_configs[0]: cannot use 'kubeconfig_file' and 'api_server' simultaneously`,
		},
		{
			// In-cluster discovery cannot be built outside a cluster: both
			// accept the file, and the daemon logs it when it starts.
			name:   "in-cluster kubernetes_sd_config",
			config: "kubernetes_sd_configs: [{role: pod, namespaces: {names: [ml]}}]\n",
		},
	}
	const common = "modules: {m: {prober: completions, prompt: hi}}\n" +
		"targets: [{name: t, url: \"http://127.0.0.1:8000\", model: x, baseline: b}]\n"
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range c.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := c.config + common
			if !strings.Contains(cfg, "baselines:") {
				cfg = strings.Replace(cfg, ", baseline: b}", "}", 1)
			}
			file := filepath.Join(dir, "vllm_prober.yml")
			if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}

			checkCode, _, checkErr := runCLI(t, "--config.check", "--config.file="+file)
			// The daemon's path: a cancelled context makes Run return as soon as
			// the daemon has loaded the file and started.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out, errb syncBuffer
			runCode := runArgs(ctx, []string{"--config.file=" + file, "--web.listen-address=127.0.0.1:0"}, &out, &errb)
			runErr := errb.String()

			runMsg := errLine.FindStringSubmatch(runErr)
			if c.wantErr == "" {
				if checkCode != 0 || runCode != 0 || strings.Contains(checkErr, "vllm_prober --config.check:") || runMsg != nil {
					t.Fatalf("good file: --config.check = %d, daemon = %d\ncheck:\n%s\ndaemon:\n%s", checkCode, runCode, checkErr, runErr)
				}
				if !strings.Contains(checkErr, `msg="Config file is ok, exiting"`) {
					t.Errorf("--config.check did not say the file is ok:\n%s", checkErr)
				}
				return
			}
			if checkCode != 1 || runCode != 1 {
				t.Errorf("--config.check = %d, daemon = %d; want 1 and 1", checkCode, runCode)
			}
			if runMsg == nil {
				t.Fatalf("no \"Error loading config\" line from the daemon:\n%s", runErr)
			}
			daemonErr := runMsg[1]
			if unq, err := strconv.Unquote(daemonErr); err == nil {
				daemonErr = unq
			}
			// --config.check says the daemon's error as a sentence (internal/clierr).
			want := clierr.Format("--config.check", configCheckError(file, errors.New(daemonErr)))
			t.Logf("both: %s", daemonErr)
			if checkErr != want {
				t.Errorf("messages differ:\ncheck:\n%s\nwant (from the daemon's):\n%s", checkErr, want)
			}
			if !strings.Contains(runMsg[1], c.wantErr) {
				t.Errorf("message %s lacks %s", runMsg[1], c.wantErr)
			}
		})
	}
}

// TestSubcommandHelp: a subcommand's --help lists its own flags and the common
// logging ones, not the daemon's; the application's --help still lists the
// daemon's (run is the default command).
func TestSubcommandHelp(t *testing.T) {
	daemonFlags := []string{"config.file", "config.check", "web.listen-address", "web.telemetry-path", "history.limit", "shard.count"}
	lists := func(help, flag string) bool {
		return regexp.MustCompile(`--(\[no-\])?` + regexp.QuoteMeta(flag) + `\b`).MatchString(help)
	}
	for _, args := range [][]string{{"bench", "--help"}, {"baseline", "import", "--help"}, {"rules", "generate", "--help"}, {"help", "bench"}} {
		code, stdout, _ := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%v = %d", args, code)
		}
		if !strings.Contains(stdout, "--log.level") {
			t.Errorf("%v lacks --log.level:\n%s", args, stdout)
		}
		for _, f := range daemonFlags {
			if lists(stdout, f) {
				t.Errorf("%v lists the daemon flag %s:\n%s", args, f, stdout)
			}
		}
	}
	for _, args := range [][]string{{"--help"}, {"run", "--help"}} {
		_, stdout, _ := runCLI(t, args...)
		for _, f := range daemonFlags {
			if !lists(stdout, f) {
				t.Errorf("%v lacks the daemon flag %s:\n%s", args, f, stdout)
			}
		}
	}
	// Daemon flags still work without naming the default command.
	if code, _, stderr := runCLI(t, "--config.check", "--config.file=../../examples/demo.yml"); code != 0 {
		t.Errorf("--config.check without run = %d:\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "run", "--config.check", "--config.file=../../examples/demo.yml"); code != 0 {
		t.Errorf("run --config.check = %d:\n%s", code, stderr)
	}
}

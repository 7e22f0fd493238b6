// Command vllm_prober continuously probes vLLM endpoints with real streaming
// completions, scrapes their /metrics and exports what users feel to Prometheus.
// See CONFIGURATION.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	slogkit "github.com/tjhop/slog-gokit"
	"k8s.io/klog/v2"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/clierr"
	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/daemonweb"
	"github.com/vllm-prober/vllm_prober/internal/logging"
)

func main() {
	os.Exit(run())
}

func run() int {
	setBuildVersion()
	daemon.SetGCDefault(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runArgs(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// runArgs is the whole program behind main: flags → logger → command. Exit codes:
// 0 success, 1 failure (bad configuration, server error), 2 bad command line.
func runArgs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := kingpin.New("vllm_prober", "Probes vLLM endpoints with real streaming completions and exports the results to Prometheus.")
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	app.Version(version.Print("vllm_prober"))
	app.HelpFlag.Short('h')
	app.UsageTemplate(usageTemplate)
	terminated, exitCode := false, 0
	app.Terminate(func(code int) { terminated, exitCode = true, code })

	logLevel := app.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").
		Default("info").Enum("debug", "info", "warn", "error")
	logFormat := app.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").
		Default("logfmt").Enum("logfmt", "json")

	// The daemon's flags belong to the run command, the default one, so that
	// `vllm_prober --config.file=...` works as with every exporter while
	// `vllm_prober bench --help` lists only what bench takes.
	runCmd := app.Command("run", "Run the prober daemon (the default command).").Default()
	configFile := runCmd.Flag("config.file", "vllm_prober configuration file.").Default("vllm_prober.yml").String()
	configCheck := runCmd.Flag("config.check", "If true, load the configuration file as the daemon does (its baseline files and the files its file_sd_configs match too) and --web.config.file, if set, then exit.").Default("false").Bool()
	enableReload := runCmd.Flag("web.enable-reload", "Enable POST /-/reload, which re-reads the configuration file (SIGHUP always does). Cross-site requests are refused; without --web.config.file it is open to anyone who reaches the port.").Default("true").Bool()
	telemetryPath := runCmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default(daemon.DefaultTelemetryPath).String()
	historyLimit := runCmd.Flag("history.limit", "Recent probes per target and module kept for the landing page (plus up to as many older failures).").
		Default(fmt.Sprint(daemon.DefaultHistoryLimit)).Int()
	toolkitFlags := kingpinflag.AddFlags(runCmd, daemon.DefaultListenAddress)
	shardFlags := addShardFlags(runCmd)
	vantage := runCmd.Flag("vantage", "Where this replica probes from (a region, cluster or site): added as a vantage=\"NAME\" label to every series it exports. Several replicas with different vantages probing the same targets tell a dead endpoint (every vantage fails) from a bad path (some fail); see docs/vantages.md. Default: none, one vantage.").
		PlaceHolder("NAME").String()
	probeOnly := runCmd.Flag("probe-only", "Probe only: scrape no target's /metrics, leaving it to one scraping vantage, so that the vllm_server_* series (and the series that need the server's figures: regression ratios, headroom, cost) are not duplicated per vantage; see docs/vantages.md. global.probe_only sets it too.").Default("false").Bool()
	otlpEndpoint := runCmd.Flag("otlp.endpoint", "Push the probes' client metrics under the OpenTelemetry GenAI names (semantic-conventions-genai v0.1.0; docs/metrics.md) to this OTLP/HTTP metrics URL, e.g. Prometheus 3's http://HOST:9090/api/v1/otlp/v1/metrics, besides the vllm_probe_* series. Default: global.otlp.endpoint; none, no push.").
		PlaceHolder("URL").String()
	otlpInterval := runCmd.Flag("otlp.interval", "How often the OTLP push sends. Default: global.otlp.interval, else 1m.").Default("0s").Duration()

	type subcommand struct {
		clause *kingpin.CmdClause
		run    func(ctx context.Context, logger log.Logger) int
	}
	var subs []subcommand
	for _, register := range []func(*kingpin.Application) (*kingpin.CmdClause, func(context.Context, log.Logger) int){
		func(app *kingpin.Application) (*kingpin.CmdClause, func(context.Context, log.Logger) int) {
			return registerBaselineCommandsTo(app, stdout, stderr)
		},
		func(app *kingpin.Application) (*kingpin.CmdClause, func(context.Context, log.Logger) int) {
			return registerRulesCommandsTo(app, stderr)
		},
		func(app *kingpin.Application) (*kingpin.CmdClause, func(context.Context, log.Logger) int) {
			return registerBenchCommandsTo(app, stdout, stderr)
		},
		func(app *kingpin.Application) (*kingpin.CmdClause, func(context.Context, log.Logger) int) {
			return registerCheckCommandTo(app, stdout, stderr)
		},
	} {
		clause, fn := register(app)
		subs = append(subs, subcommand{clause, fn})
	}

	cmd, err := app.Parse(args)
	if terminated { // --help, --version
		return exitCode
	}
	if err != nil {
		fmt.Fprintf(stderr, "vllm_prober: error: %s, try --help\n", err)
		if isCheckCommand(args) {
			return checkUsage // check's usage errors have their own exit code
		}
		return 2
	}
	base := newLogger(stderr, *logLevel, *logFormat)
	logger := log.With(base, "caller", log.DefaultCaller)

	for _, s := range subs {
		if cmd == s.clause.FullCommand() {
			return s.run(ctx, logger)
		}
	}
	if cmd != runCmd.FullCommand() {
		fmt.Fprintf(stderr, "vllm_prober: error: command %q has no implementation\n", cmd)
		return 2
	}

	if *configCheck {
		if err := daemon.CheckConfig(daemon.Options{ConfigFile: *configFile, TelemetryPath: *telemetryPath}, base); err != nil {
			clierr.Print(stderr, "--config.check", configCheckError(*configFile, err))
			return 1
		}
		if f := *toolkitFlags.WebConfigFile; f != "" {
			if err := web.Validate(f); err != nil {
				clierr.Print(stderr, "--config.check", clierr.Error{File: f, Err: err,
					Fix: "fix the web configuration file (the exporter-toolkit's format: tls_server_config, http_server_config, basic_auth_users)."})
				return 1
			}
		}
		level.Info(logger).Log("msg", "Config file is ok, exiting", "file", *configFile)
		return 0
	}

	// A bad shard flag is a command-line error; SHARD_INDEX and the hostname
	// (a StatefulSet ordinal) give the index its default.
	hostname, _ := os.Hostname()
	shardCount, shardIndex, err := shardFlags.Resolve(hostname, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "vllm_prober: error: %s, try --help\n", err)
		return 2
	}

	if err := daemon.ValidateVantage(*vantage); err != nil {
		fmt.Fprintf(stderr, "vllm_prober: error: --vantage: %s, try --help\n", err)
		return 2
	}

	if err := config.ValidateOTLPEndpoint(*otlpEndpoint); err != nil {
		fmt.Fprintf(stderr, "vllm_prober: error: --otlp.endpoint: %s, try --help\n", err)
		return 2
	}

	level.Info(logger).Log("msg", "Starting vllm_prober", "version", version.Info())
	level.Info(logger).Log("msg", "Build context", "build_context", version.BuildContext())
	// Kubernetes discovery's client (client-go) logs through klog: into our
	// log, as Prometheus does, at klog's default verbosity 0 (no klog flag
	// raises it; client-go logs bearer tokens only above 6).
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelDebug) // the go-kit logger filters
	klog.SetSlogLogger(slog.New(slogkit.NewGoKitHandler(log.With(base, "component", "k8s_client_runtime"), lvl)))
	d, err := daemon.New(daemon.Options{
		ConfigFile:    *configFile,
		WebFlags:      toolkitFlags,
		TelemetryPath: *telemetryPath,
		HistoryLimit:  *historyLimit,
		WebLogger:     daemon.NewWebLogger(base),
		ShardCount:    shardCount,
		ShardIndex:    shardIndex,
		DisableReload: !*enableReload,
		Vantage:       *vantage,
		ProbeOnly:     *probeOnly,
		OTLPEndpoint:  *otlpEndpoint,
		OTLPInterval:  *otlpInterval,
	}, base) // New adds its redaction, then the caller
	if err != nil {
		level.Error(logger).Log("msg", "Error loading config", "err", err)
		return 1
	}
	if err := d.Run(ctx, daemonweb.Handler(d)); err != nil {
		level.Error(logger).Log("msg", "vllm_prober stopped", "err", err)
		return 1
	}
	return 0
}

// configFilePrefix is how the configuration's loader starts its errors; the
// command-line message names the file itself.
var configFilePrefix = regexp.MustCompile(`^error (?:parsing|applying|reading) config file(?: "[^"]*")?: `)

// configCheckError is what --config.check says about err, the daemon's error
// loading file.
func configCheckError(file string, err error) clierr.Error {
	msg := configFilePrefix.ReplaceAllString(err.Error(), "")
	return clierr.Error{File: file, Err: errors.New(msg),
		Fix: "fix the file (CONFIGURATION.md describes every key) and run vllm_prober --config.check again."}
}

// usageTemplate is kingpin's default with, in the application's help, the
// flags of the default command (run): `vllm_prober --help` lists the daemon's
// flags as every exporter's does, and a subcommand's help lists only its own.
var usageTemplate = strings.Replace(kingpin.DefaultUsageTemplate, "{{if .Context.Args -}}", `{{if not .Context.SelectedCommand -}}
{{range .App.Commands}}{{if .Default -}}
Flags of {{.FullCommand}}, the default command:
{{.Flags|FlagsToTwoColumns|FormatTwoColumns}}
{{end}}{{end -}}
{{end -}}
{{if .Context.Args -}}`, 1)

// newLogger returns the logger of both binaries (internal/logging): ts,
// level, then the rest, in format ("logfmt" or "json"), dropping messages
// below lvl. It adds no caller: callers add log.DefaultCaller, the slog
// bridge its own.
func newLogger(w io.Writer, lvl, format string) log.Logger {
	return logging.New(w, lvl, format)
}

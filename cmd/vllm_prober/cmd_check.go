package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/internal/clierr"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/gatevantage"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// Exit codes of `vllm_prober check`.
const (
	checkPass         = 0
	checkFail         = 1
	checkInconclusive = 2
	checkUsage        = 3
)

// checkDefaultPrompt is the prompt of the module check builds from its flags.
const checkDefaultPrompt = "Let's explore some architecture patterns for microservices"

// Names of the target, reference and module check builds from its flags.
const (
	checkTargetName    = "check"
	checkReferenceName = "reference"
	checkModuleName    = "check"
)

type checkOptions struct {
	url, model, reference     string
	baselineFile, baselineSel string
	concurrency               string
	configFile, target        string
	module                    string
	probes                    int
	duration                  time.Duration
	format                    string
	th                        compare.Thresholds
	memberRatio               float64
	// vantage names where check probes from; gateVantages are the other
	// vantages' replicas (NAME=URL) whose /gate verdicts join its own.
	vantage      string
	gateVantages map[string]string
}

// isCheckCommand reports whether args select the check command, so that a
// command-line error of check exits with its usage code (3), not 2.
func isCheckCommand(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a == "check"
		}
	}
	return false
}

// registerCheckCommandTo adds `check`, the one-shot gate: it probes one
// endpoint with the daemon's prober, compares the results with a baseline or
// a reference endpoint, prints the verdict to stdout and exits 0 (pass), 1
// (fail), 2 (inconclusive) or 3 (usage or configuration error).
func registerCheckCommandTo(app *kingpin.Application, stdout, stderr io.Writer) (*kingpin.CmdClause, func(context.Context, log.Logger) int) {
	o := &checkOptions{gateVantages: map[string]string{}}
	cmd := app.Command("check", "Probe one endpoint now and judge it against a baseline or a reference endpoint. Exit codes: 0 pass, 1 fail, 2 inconclusive (too few successful probes), 3 usage or configuration error.")
	cmd.Flag("url", "Base URL of the endpoint to check (without --config.file).").PlaceHolder("URL").StringVar(&o.url)
	cmd.Flag("model", "Model to request (default: the first /v1/models lists).").StringVar(&o.model)
	cmd.Flag("baseline", "Baseline file to compare with (docs/baselines.md).").PlaceHolder("FILE").StringVar(&o.baselineFile)
	cmd.Flag("baseline.name", "Baseline of --baseline to compare with, when the file holds several.").StringVar(&o.baselineSel)
	cmd.Flag("baseline.concurrency", "Concurrency at which the baseline is read: auto (the load each probe met, running + waiting + 1 from the endpoint's /metrics, as the daemon compares; 1 when it exposes none), or a number.").Default("auto").StringVar(&o.concurrency)
	cmd.Flag("reference", "Reference endpoint (the stable version) to compare with instead of a baseline: a base URL, or with --config.file the name of one of its targets.").PlaceHolder("URL").StringVar(&o.reference)
	cmd.Flag("config.file", "vllm_prober configuration file to take the target, its module and baseline from.").StringVar(&o.configFile)
	cmd.Flag("target", "Target of --config.file to check.").StringVar(&o.target)
	cmd.Flag("module", "Module of --config.file to probe with (default: the target's only module).").StringVar(&o.module)
	cmd.Flag("probes", "Number of probes (of the endpoint, and as many of the reference).").Default("10").IntVar(&o.probes)
	cmd.Flag("duration", "Spread the probes over this duration (default: one after the other).").Default("0s").DurationVar(&o.duration)
	cmd.Flag("format", "Output format. One of: [text, json]").Default("text").EnumVar(&o.format, "text", "json")
	cmd.Flag("threshold.latency-ratio", "A latency (TTFT, TPOT, ITL, E2E) above this ratio to the expected value fails, as the latency-regression alert.").
		Default(fmt.Sprint(compare.DefaultThresholds.LatencyRatio)).Float64Var(&o.th.LatencyRatio)
	cmd.Flag("threshold.success-ratio", "A share of successful probes below this fails.").
		Default(fmt.Sprint(compare.DefaultThresholds.SuccessRatio)).Float64Var(&o.th.SuccessRatio)
	cmd.Flag("threshold.min-successes", "Fewer successful probes than this (of the endpoint or the reference) are inconclusive.").
		Default(fmt.Sprint(compare.DefaultThresholds.MinSuccesses)).IntVar(&o.th.MinSuccesses)
	cmd.Flag("threshold.member-ratio", "With a gateway target of --config.file: its members are probed too, and a member whose median TTFT is above this ratio to the median of the members' medians fails the check, named, even when the gateway's average passes (docs/rollouts.md, \"Gateways\").").
		Default("1.5").Float64Var(&o.memberRatio)
	cmd.Flag("vantage", "Where check probes from, the name its verdict carries beside --gate.vantage's.").Default("check").StringVar(&o.vantage)
	cmd.Flag("gate.vantage", "Another vantage's vllm_prober replica, as NAME=URL (repeatable): its GET /gate verdict on the same --target of --config.file joins check's, for one verdict over every vantage: a failure seen from some vantages while another passes is their path's, not the target's (docs/rollouts.md, \"Vantages\").").
		PlaceHolder("NAME=URL").StringMapVar(&o.gateVantages)

	return cmd, func(ctx context.Context, logger log.Logger) int {
		plan, err := o.plan(ctx)
		if err != nil {
			e := clierr.Error{Err: err, Fix: "`vllm_prober check --help` lists the flags; docs/rollouts.md has examples."}
			if fe := (*checkFileError)(nil); errors.As(err, &fe) {
				e = clierr.Error{File: fe.file, Err: fe.err, Fix: "fix the file; `vllm_prober --config.check --config.file " + fe.file + "` checks it as the daemon does."}
			}
			clierr.Print(stderr, "check", e)
			return checkUsage
		}
		v, err := plan.run(ctx, logger)
		if err != nil {
			clierr.Print(stderr, "check", clierr.Error{Err: err})
			return checkUsage
		}
		if len(o.gateVantages) > 0 {
			compare.JudgeVantages(&v, o.vantage, askGateVantages(ctx, o.gateVantages, plan))
		}
		if o.format == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				clierr.Print(stderr, "check", clierr.Error{Err: fmt.Errorf("writing the verdict: %w", err)})
				return checkUsage
			}
		} else {
			writeVerdict(stdout, plan.title, v)
		}
		switch v.Result {
		case compare.Pass:
			return checkPass
		case compare.Fail:
			return checkFail
		}
		return checkInconclusive
	}
}

// checkPlan is a validated check: the configuration the prober runs and
// what to compare with.
type checkPlan struct {
	cfg            *config.Config
	target, module string
	reference      string // target name of the reference, "" with a baseline
	curve          *baseline.Curve
	baselineName   string
	concurrency    float64 // the baseline's concurrency; 0: auto, the load the probes met
	probes         int
	every          time.Duration
	th             compare.Thresholds
	title          string
	// members are the static members of a gateway target, probed beside
	// it; memberOf maps its member header values to them, memberRatio is
	// the spread above which the slowest fails the check.
	members     []string
	memberOf    map[string]string
	memberHdr   string
	memberRatio float64
}

// plan validates the flags and builds the configuration. Every error is a
// usage or configuration error.
func (o *checkOptions) plan(ctx context.Context) (*checkPlan, error) {
	if err := o.th.Validate(); err != nil {
		return nil, err
	}
	if o.probes < 1 {
		return nil, fmt.Errorf("--probes %d is below 1", o.probes)
	}
	if o.duration < 0 {
		return nil, fmt.Errorf("--duration %s is negative", o.duration)
	}
	if o.probes < o.th.MinSuccesses {
		return nil, fmt.Errorf("--probes %d can never reach --threshold.min-successes %d", o.probes, o.th.MinSuccesses)
	}
	if len(o.gateVantages) > 0 && o.target == "" {
		return nil, errors.New("--gate.vantage asks other replicas about a target of --config.file: name it with --target")
	}
	for name, u := range o.gateVantages {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
			return nil, fmt.Errorf("--gate.vantage %s=%s: not an http(s) URL with a host and without credentials", name, u)
		}
	}
	if !(o.memberRatio > 1) {
		return nil, fmt.Errorf("--threshold.member-ratio %v must be above 1", o.memberRatio)
	}
	p := &checkPlan{probes: o.probes, th: o.th, memberRatio: o.memberRatio}
	if o.concurrency != "auto" {
		c, err := strconv.ParseFloat(o.concurrency, 64)
		if err != nil || !(c > 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("--baseline.concurrency %q is neither auto nor a positive number", o.concurrency)
		}
		p.concurrency = c
	}
	if o.probes > 1 {
		p.every = o.duration / time.Duration(o.probes)
	}
	var err error
	if o.configFile != "" {
		err = o.planFromFile(ctx, p)
	} else {
		err = o.planFromFlags(p)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case p.reference == "" && o.baselineFile == "" && p.curve == nil:
		return nil, errors.New("nothing to compare with: give --baseline FILE or --reference URL (or a target with a baseline in --config.file)")
	case p.reference != "" && o.baselineFile != "":
		return nil, errors.New("--baseline and --reference exclude each other")
	}
	if o.baselineFile != "" {
		f, err := baseline.ReadFile(ctx, o.baselineFile)
		if err != nil {
			return nil, fmt.Errorf("--baseline: %w", err)
		}
		b, err := pickBaseline(f, o.baselineSel)
		if err != nil {
			return nil, fmt.Errorf("--baseline %s: %w", o.baselineFile, err)
		}
		p.curve, p.baselineName = b.Curve(), b.Name
	}
	if p.curve != nil {
		if _, ok := p.curve.Expected(max(p.concurrency, 1)); !ok {
			return nil, fmt.Errorf("baseline %q has no point placed on the concurrency axis", p.baselineName)
		}
	}
	return p, nil
}

func pickBaseline(f *baseline.File, name string) (*baseline.Baseline, error) {
	if name != "" {
		b, ok := f.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("no baseline named %q; it has %s", name, baselineNames(f))
		}
		return b, nil
	}
	if len(f.Baselines) != 1 {
		return nil, fmt.Errorf("it holds %d baselines (%s): choose one with --baseline.name", len(f.Baselines), baselineNames(f))
	}
	return f.Baselines[0], nil
}

func baselineNames(f *baseline.File) string {
	names := make([]string, len(f.Baselines))
	for i, b := range f.Baselines {
		names[i] = fmt.Sprintf("%q", b.Name)
	}
	return strings.Join(names, ", ")
}

// planFromFlags builds the configuration of the common case: one target at
// --url, and the reference at --reference, probed with one default module.
func (o *checkOptions) planFromFlags(p *checkPlan) error {
	switch {
	case o.url == "":
		return errors.New("give --url URL (or --config.file with --target)")
	case o.target != "" || o.module != "":
		return errors.New("--target and --module name entries of --config.file")
	case o.baselineSel != "" && o.baselineFile == "":
		return errors.New("--baseline.name needs --baseline")
	}
	mod := config.DefaultModule
	mod.Prober, mod.Prompt = config.ProberCompletions, checkDefaultPrompt
	type target struct {
		Name          string   `yaml:"name"`
		URL           string   `yaml:"url"`
		Model         string   `yaml:"model,omitempty"`
		Modules       []string `yaml:"modules"`
		ScrapeMetrics bool     `yaml:"scrape_metrics"`
	}
	doc := struct {
		Modules map[string]config.Module `yaml:"modules"`
		Targets []target                 `yaml:"targets"`
	}{
		Modules: map[string]config.Module{checkModuleName: mod},
		Targets: []target{{Name: checkTargetName, URL: o.url, Model: o.model, Modules: []string{checkModuleName}}},
	}
	if o.reference != "" {
		doc.Targets = append(doc.Targets, target{Name: checkReferenceName, URL: o.reference, Model: o.model, Modules: []string{checkModuleName}})
		p.reference = checkReferenceName
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("building the configuration: %w", err)
	}
	cfg, err := config.Load(b, ".")
	if err != nil {
		return fmt.Errorf("--url/--reference: %w", err)
	}
	p.cfg, p.target, p.module = cfg, checkTargetName, checkModuleName
	p.title = "check of " + o.url
	return nil
}

// planFromFile takes the target, module and baseline from a configuration
// file. --reference names another of its targets, or a URL probed with the
// target's HTTP client settings.
func (o *checkOptions) planFromFile(ctx context.Context, p *checkPlan) error {
	if o.url != "" {
		return errors.New("--url and --config.file exclude each other: name the endpoint with --target")
	}
	if o.target == "" {
		return errors.New("--config.file needs --target")
	}
	cfg, err := config.LoadFile(o.configFile)
	if err != nil {
		return &checkFileError{file: o.configFile, err: err}
	}
	t, ok := cfg.Target(o.target)
	if !ok {
		names := make([]string, len(cfg.Targets))
		for i := range cfg.Targets {
			names[i] = cfg.Targets[i].Name
		}
		return fmt.Errorf("--target %q is not a target of %s; it has %s", o.target, o.configFile, strings.Join(names, ", "))
	}
	switch {
	case o.module != "" && !contains(t.Modules, o.module):
		return fmt.Errorf("module %q is not configured for target %q; modules: %s", o.module, t.Name, strings.Join(t.Modules, ", "))
	case o.module == "" && len(t.Modules) != 1:
		return fmt.Errorf("target %q has modules %s: choose one with --module", t.Name, strings.Join(t.Modules, ", "))
	}
	p.module = o.module
	if p.module == "" {
		p.module = t.Modules[0]
	}
	p.target = t.Name
	// Only the checked target (and the reference) are probed; discovery does
	// not run in a one-shot check.
	run := *cfg
	run.Discovery.FileSDConfigs, run.Discovery.HTTPSDConfigs = nil, nil
	run.Targets = []config.Target{*t}
	if o.reference != "" {
		ref, ok := cfg.Target(o.reference)
		if ok {
			r := *ref
			r.Modules = []string{p.module}
			run.Targets = append(run.Targets, r)
			p.reference = r.Name
		} else {
			if !strings.Contains(o.reference, "://") {
				return fmt.Errorf("--reference %q is neither a target of %s nor a URL", o.reference, o.configFile)
			}
			r := *t
			r.Name, r.URL, r.Modules, r.Baseline = checkReferenceName, o.reference, []string{p.module}, ""
			run.Targets = append(run.Targets, r)
			p.reference = checkReferenceName
		}
	}
	if t.Gateway != nil {
		// A gateway's members are probed beside it, with its module: a
		// member slower than the others fails the check by name.
		for _, name := range cfg.GatewayMembers(t) {
			m, _ := cfg.Target(name)
			r := *m
			r.Modules = []string{p.module}
			run.Targets = append(run.Targets, r)
			p.members = append(p.members, name)
		}
		p.memberOf, p.memberHdr = cfg.MemberOf(t), t.Gateway.MemberHeader
	}
	if o.baselineFile == "" && p.reference == "" && t.Baseline != "" {
		for _, ref := range cfg.Baselines {
			if ref.Name != t.Baseline {
				continue
			}
			file := ref.File
			if !filepath.IsAbs(file) {
				file = filepath.Join(filepath.Dir(o.configFile), file)
			}
			f, err := baseline.ReadFile(ctx, file)
			if err != nil {
				return fmt.Errorf("baseline %q: %w", ref.Name, err)
			}
			b, err := pickBaseline(f, o.baselineSel)
			if err != nil {
				return fmt.Errorf("baseline %q: %w", ref.Name, err)
			}
			p.curve, p.baselineName = b.Curve(), b.Name
		}
	}
	p.cfg = &run
	p.title = "check of target " + t.Name
	return nil
}

// checkFileError is a configuration file check cannot use.
type checkFileError struct {
	file string
	err  error
}

func (e *checkFileError) Error() string { return e.file + ": " + e.err.Error() }
func (e *checkFileError) Unwrap() error { return e.err }

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// run probes the target (and the reference, alternately) with the daemon's
// prober, one probe at a time, and judges the results.
func (p *checkPlan) run(ctx context.Context, logger log.Logger) (compare.Verdict, error) {
	red := redact.New()
	clients := httpclient.New(red)
	opts := prober.Options{Logger: logger, Clients: clients, Redactor: red}
	var loadErr error
	if p.curve != nil && p.concurrency == 0 {
		// The load a probe met: running + waiting + 1 from the target's
		// /metrics as the probe ends, as the daemon's collector reads it.
		t, _ := p.cfg.Target(p.target)
		client, err := clients.Acquire(t.HTTPClientConfig)
		if err != nil {
			return compare.Verdict{}, fmt.Errorf("target %q: %w", t.Name, err)
		}
		defer clients.Release(client)
		metricsURL := strings.TrimSuffix(t.URL, "/") + t.MetricsPath
		opts.Load = func(target string, _, _ time.Time) (float64, bool) {
			if target != p.target {
				return 0, false
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			snap, err := collector.Scrape(sctx, client, metricsURL)
			if err != nil {
				loadErr = err
				return 0, false
			}
			load := snap.Running() + snap.Waiting() + 1
			if math.IsNaN(load) {
				loadErr = errors.New("it exposes no running and waiting requests")
				return 0, false
			}
			return load, true
		}
	}
	m := prober.NewManager(opts)
	if err := m.Apply(p.cfg); err != nil {
		return compare.Verdict{}, fmt.Errorf("configuration: %w", err)
	}
	var own, ref []*probe.Result
	members := map[string][]*probe.Result{}
	probe := func(target string) (*probe.Result, error) {
		res, _, err := m.ProbeNow(ctx, target, p.module)
		if err != nil {
			return nil, fmt.Errorf("probe of %q: %w", target, err)
		}
		return res, nil
	}
	for i := 0; i < p.probes; i++ {
		if i > 0 && p.every > 0 {
			t := time.NewTimer(p.every)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if err := ctx.Err(); err != nil {
			return compare.Verdict{}, fmt.Errorf("interrupted after %d probes: %w", i, err)
		}
		r, err := probe(p.target)
		if err != nil {
			return compare.Verdict{}, err
		}
		own = append(own, r)
		if p.reference != "" {
			if r, err = probe(p.reference); err != nil {
				return compare.Verdict{}, err
			}
			ref = append(ref, r)
		}
		for _, name := range p.members {
			r, err := probe(name)
			if err != nil {
				return compare.Verdict{}, err
			}
			members[name] = append(members[name], r)
		}
	}
	v := p.judge(loadErr, red, own, ref)
	p.judgeMembers(&v, own, members)
	return v, nil
}

// judge compares the target's probes with the reference's or the baseline's.
func (p *checkPlan) judge(loadErr error, red *redact.Redactor, own, ref []*probe.Result) compare.Verdict {
	s := sampleOf(own)
	if p.reference != "" {
		rs := sampleOf(ref)
		return compare.Judge(s, rs.Means, &rs, nil, p.th, "reference "+p.reference)
	}
	conc, how := p.concurrency, ""
	if conc == 0 {
		switch {
		case s.Means.NLoad > 0:
			conc, how = s.Means.Load, " (running + waiting + 1 from its /metrics)"
		case loadErr != nil:
			conc, how = 1, fmt.Sprintf(" (no load from its /metrics: %s)", red.String(loadErr.Error()))
		default:
			conc = 1
		}
	}
	e, _ := p.curve.Expected(conc) // plan checked the curve
	exp := compare.ExpectedFromBaseline(e, s.Means.OutputTokens)
	return compare.Judge(s, exp, nil, nil, p.th, fmt.Sprintf("baseline %s at concurrency %.3g%s", p.baselineName, conc, how))
}

// judgeMembers joins the gateway target's probes with its members' and
// fails v when one member is slower than the others (compare.JudgeMembers).
func (p *checkPlan) judgeMembers(v *compare.Verdict, gw []*probe.Result, members map[string][]*probe.Result) {
	if len(p.members) < 2 {
		return
	}
	samples := func(rs []*probe.Result) []prober.GatewaySample {
		out := make([]prober.GatewaySample, len(rs))
		for i, r := range rs {
			out[i] = prober.SampleOf(r, p.memberHdr)
		}
		return out
	}
	ms := make(map[string][]prober.GatewaySample, len(members))
	for name, rs := range members {
		ms[name] = samples(rs)
	}
	if j, ok := compare.JoinGateway(samples(gw), p.memberOf, ms); ok {
		compare.JudgeMembers(v, j, p.memberRatio)
	}
}

func sampleOf(rs []*probe.Result) compare.Sample {
	m := prober.MeansOf(rs)
	return compare.Sample{Probes: len(rs), Successes: m.N, Means: m}
}

// writeVerdict prints the verdict table.
func writeVerdict(w io.Writer, title string, v compare.Verdict) {
	fmt.Fprintf(w, "%s against %s: %s\n", title, v.Against, strings.ToUpper(v.Result))
	fmt.Fprintf(w, "%s\n\n", v.Reason)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tEXPECTED\tMEASURED\tRATIO\tTHRESHOLD\tRESULT")
	for _, r := range v.Rows {
		res := r.Result
		if res == "" {
			res = "not judged"
		}
		if r.Metric == compare.MetricSuccessRatio {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t>= %g\t%s\n", "success ratio", ratioCell(r.Expected), ratioCell(r.Measured), "-", v.Thresholds.SuccessRatio, res)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t<= %g\t%s\n", strings.ToUpper(r.Metric), secondsCell(r.Expected), secondsCell(r.Measured), ratioCell(r.Ratio), v.Thresholds.LatencyRatio, res)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d probes, %d successful (at least %d needed to judge)\n", v.Probes, v.Successes, v.Thresholds.MinSuccesses)
}

func secondsCell(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "-"
	}
	return fmt.Sprintf("%.4gs", s)
}

func ratioCell(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	return fmt.Sprintf("%.3f", f)
}

// askGateVantages asks each other vantage's /gate (--gate.vantage) for its
// own verdict on plan's target, module, reference and thresholds, in name
// order; one that cannot be asked is Inconclusive.
func askGateVantages(ctx context.Context, vantages map[string]string, plan *checkPlan) []compare.VantageVerdict {
	q := url.Values{"target": {plan.target}, "module": {plan.module},
		"latency_ratio": {fmt.Sprint(plan.th.LatencyRatio)}, "success_ratio": {fmt.Sprint(plan.th.SuccessRatio)},
		"min_successes": {fmt.Sprint(plan.th.MinSuccesses)}, "member_ratio": {fmt.Sprint(plan.memberRatio)}}
	if plan.reference != "" {
		q.Set("reference", plan.reference)
	}
	client := &http.Client{Timeout: gatevantage.Timeout}
	var out []compare.VantageVerdict
	for _, name := range slices.Sorted(maps.Keys(vantages)) {
		res, reason, err := gatevantage.Ask(ctx, client, vantages[name], q)
		if err != nil {
			out = append(out, gatevantage.Unreachable(name, err))
			continue
		}
		out = append(out, compare.VantageVerdict{Vantage: name, Result: res, Reason: reason})
	}
	return out
}

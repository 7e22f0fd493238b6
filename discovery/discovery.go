// Package discovery turns Prometheus-style service discovery (file_sd_configs,
// http_sd_configs) into vllm_prober targets, and splits targets over replicas
// (Shard).
//
// Why not Prometheus' own discovery/file and discovery/http: they resolve at
// the pinned v0.310.0, and we use their targetgroup and relabel packages, but
// swapping the providers is not a drop-in change: they take slog loggers and
// a DiscovererMetrics set each (prometheus_sd_* series this exporter would
// have to register and document), they publish through discovery.Manager's
// throttled channel of per-provider updates instead of the "first complete
// list, then every change" contract the daemon's reload and carry-over rely
// on, and their HTTP client is not the daemon's shared one
// (internal/httpclient). Our providers follow the same specifications (the
// file_sd and http_sd formats, refresh and failure semantics).
//
// A Manager runs one provider per configured mechanism. Every provider reports
// its complete current list of target groups; the Manager relabels each
// discovered target into a config.Target built from target_defaults, merges them
// with the statically configured targets and publishes the full, sorted,
// de-duplicated list on Updates whenever it changes.
//
// Relabelling starts from the labels of the group and the target, plus:
//
//	__address__       host:port of the vLLM server (from "targets")
//	__scheme__        http
//	__metrics_path__  target_defaults.metrics_path (/metrics)
//	__model__         target_defaults.model, when set
//	__meta_filepath   the file a file_sd target came from
//	__meta_url        the URL an http_sd target came from
//
// and afterwards reads the target from:
//
//	__target_name__   the target name (default: __address__, made a valid name)
//	__scheme__ and __address__  the target URL, scheme://address
//	__metrics_path__  where vLLM's /metrics is scraped
//	__model__         the served model name ("" means: ask /v1/models)
//
// Every remaining label whose name does not start with "__" becomes a static
// label of the target, on top of target_defaults.labels. A drop (or a failed
// keep) removes the target.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/discovery/sdconfig"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
)

// Config is the discovery configuration with config.Target as the template of
// discovered targets. config.Config embeds it inline.
type Config = sdconfig.Config[config.Target]

// Meta labels read after relabelling, in addition to Prometheus' __address__,
// __scheme__ and __metrics_path__.
const (
	TargetNameLabel = "__target_name__"
	ModelLabel      = "__model__"
	FilePathLabel   = model.MetaLabelPrefix + "filepath"
	URLLabel        = model.MetaLabelPrefix + "url"
)

// targetNameRE and labelNameRE mirror the config package's rules for static targets.
var (
	targetNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	labelNameRE   = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	nameInvalidRE = regexp.MustCompile(`[^A-Za-z0-9_.:-]+`)
)

// provider is one discovery mechanism. run reports the provider's complete list
// of target groups through send, at least once (even after a failed first
// refresh, so that startup does not wait forever), and returns when ctx is done.
type provider interface {
	run(ctx context.Context, send func([]*targetgroup.Group))
}

type update struct {
	provider int
	groups   []*targetgroup.Group
}

// Manager runs discovery and publishes the resulting targets.
type Manager struct {
	logger    log.Logger
	base      []config.Target
	template  config.Target
	relabel   []*relabel.Config
	providers []provider
	names     []string // provider names for logs, e.g. file_sd_configs[0]

	updates chan []config.Target

	mu      sync.Mutex
	current []config.Target
	started bool
}

// Options configure a Manager.
type Options struct {
	Logger log.Logger
	// Clients is the pool http_sd takes its HTTP clients from, the daemon's
	// one pool shared with the prober and the collector. Required.
	Clients *httpclient.Pool
}

// New returns a Manager for cfg, which must have been validated. base are the
// statically configured targets: they are part of every published list and win
// over a discovered target of the same name. cfg.TargetDefaults nil means
// config.DefaultTarget; its Modules should already be resolved (the config
// package fills an empty list with every module, as for static targets).
func New(cfg Config, base []config.Target, o Options) (*Manager, error) {
	if o.Clients == nil {
		return nil, errors.New("discovery: Options.Clients is required")
	}
	logger := o.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	m := &Manager{
		logger:   logger,
		base:     append([]config.Target(nil), base...),
		template: config.DefaultTarget,
		relabel:  cfg.RelabelConfigs,
		updates:  make(chan []config.Target, 1),
	}
	if cfg.TargetDefaults != nil {
		m.template = *cfg.TargetDefaults
	}
	for i, fc := range cfg.FileSDConfigs {
		name := fmt.Sprintf("file_sd_configs[%d]", i)
		m.providers = append(m.providers, newFileProvider(fc, log.With(logger, "discovery", name)))
		m.names = append(m.names, name)
	}
	for i, hc := range cfg.HTTPSDConfigs {
		name := fmt.Sprintf("http_sd_configs[%d]", i)
		p, err := newHTTPProvider(hc, o.Clients, log.With(logger, "discovery", name))
		if err != nil {
			m.Close() // the clients of the providers built so far
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m.providers = append(m.providers, p)
		m.names = append(m.names, name)
	}
	m.current = m.compute(make([][]*targetgroup.Group, len(m.providers)))
	return m, nil
}

// Close releases what New acquired (http_sd's HTTP clients) for a Manager
// that will not run, or has run; it is safe to call more than once and after
// Run (whose end releases them too).
func (m *Manager) Close() {
	for _, p := range m.providers {
		if c, ok := p.(interface{ close() }); ok {
			c.close()
		}
	}
}

// Updates delivers the full target list each time it changes. Only the newest
// list is kept: a slow reader skips intermediate lists, never a final state.
// The first list arrives once every provider has reported once. The channel is
// closed when Run returns. Lists are fresh copies the receiver may keep.
func (m *Manager) Updates() <-chan []config.Target {
	return m.updates
}

// Targets returns the latest target list: the static targets until discovery
// reported.
func (m *Manager) Targets() []config.Target {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneTargets(m.current)
}

// Run runs every provider until ctx is done and returns once all of them have
// exited. It must be called once.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		panic("discovery: Manager.Run called twice")
	}
	m.started = true
	m.mu.Unlock()
	defer close(m.updates)

	up := make(chan update)
	var wg sync.WaitGroup
	for i, p := range m.providers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(ctx, func(groups []*targetgroup.Group) {
				select {
				case up <- update{provider: i, groups: groups}:
				case <-ctx.Done():
				}
			})
		}()
	}

	groups := make([][]*targetgroup.Group, len(m.providers))
	reported := make([]bool, len(m.providers))
	pending := len(m.providers)
	var last []config.Target
	published := false
	publish := func() {
		targets := m.compute(groups)
		if published && reflect.DeepEqual(targets, last) {
			return
		}
		published, last = true, targets
		m.mu.Lock()
		m.current = targets
		m.mu.Unlock()
		// Run is the only sender: after draining a stale list there is room.
		select {
		case <-m.updates:
		default:
		}
		m.updates <- cloneTargets(targets)
	}
	if pending == 0 {
		publish()
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case u := <-up:
			groups[u.provider] = u.groups
			if !reported[u.provider] {
				reported[u.provider] = true
				pending--
			}
			if pending == 0 {
				publish()
			}
		}
	}
	wg.Wait()
}

// compute builds the target list from the static targets and the groups of
// every provider.
func (m *Manager) compute(groups [][]*targetgroup.Group) []config.Target {
	out := cloneTargets(m.base)
	index := make(map[string]int, len(out))
	for i, t := range out {
		index[t.Name] = i
	}
	for p, gs := range groups {
		for _, g := range gs {
			for ti, tl := range g.Targets {
				t, err := m.build(g.Labels, tl)
				if err != nil {
					level.Error(m.logger).Log("msg", "Discovered target is not valid, ignoring it", "discovery", m.names[p], "source", g.Source, "index", ti, "err", err)
					continue
				}
				if t == nil {
					continue // dropped by relabelling
				}
				if i, ok := index[t.Name]; ok {
					if !reflect.DeepEqual(out[i], *t) {
						level.Warn(m.logger).Log("msg", "Two targets have the same name, keeping the first", "discovery", m.names[p], "source", g.Source, "target", t.Name)
					}
					continue
				}
				index[t.Name] = len(out)
				out = append(out, *t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// build relabels one discovered target into a config.Target. It returns nil, nil
// when relabelling drops the target.
func (m *Manager) build(groupLabels, targetLabels model.LabelSet) (*config.Target, error) {
	lb := labels.NewBuilder(labels.EmptyLabels())
	lb.Set(model.SchemeLabel, "http")
	lb.Set(model.MetricsPathLabel, m.template.MetricsPath)
	if m.template.Model != "" {
		lb.Set(ModelLabel, m.template.Model)
	}
	for n, v := range groupLabels {
		lb.Set(string(n), string(v))
	}
	for n, v := range targetLabels {
		lb.Set(string(n), string(v))
	}
	if !relabel.ProcessBuilder(lb, m.relabel...) {
		return nil, nil
	}

	addr := lb.Get(model.AddressLabel)
	switch {
	case addr == "":
		return nil, errors.New("no __address__ label")
	case strings.Contains(addr, "@"):
		// Never echo it: it may hold credentials.
		return nil, errors.New("__address__ must not carry credentials: use target_defaults.http_client_config")
	case strings.Contains(addr, "/"):
		return nil, fmt.Errorf("__address__ %q must be host:port, without scheme or path", addr)
	}
	scheme := lb.Get(model.SchemeLabel)
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("__scheme__ %q is not http or https", scheme)
	}
	u, err := url.Parse(scheme + "://" + addr)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("__address__ %q is not a valid host:port", addr)
	}
	metricsPath := lb.Get(model.MetricsPathLabel)
	if !strings.HasPrefix(metricsPath, "/") {
		return nil, fmt.Errorf("__metrics_path__ %q must start with /", metricsPath)
	}
	name := lb.Get(TargetNameLabel)
	if name == "" {
		name = nameFromAddress(addr)
	}
	if !targetNameRE.MatchString(name) {
		return nil, fmt.Errorf("target name %q must match %s", name, targetNameRE)
	}

	t := cloneTarget(m.template)
	t.Name = name
	t.URL = u.String()
	t.Model = lb.Get(ModelLabel)
	t.MetricsPath = metricsPath
	var lerr error
	lb.Range(func(l labels.Label) {
		if lerr != nil || strings.HasPrefix(l.Name, "__") {
			return
		}
		if err := checkLabelName(l.Name); err != nil {
			lerr = err
			return
		}
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[l.Name] = l.Value
	})
	if lerr != nil {
		return nil, lerr
	}
	return &t, nil
}

func checkLabelName(n string) error {
	if !labelNameRE.MatchString(n) {
		return fmt.Errorf("label name %q is not valid", n)
	}
	for _, r := range config.ReservedLabels {
		if n == r {
			return fmt.Errorf("label name %q is reserved: rename or drop it with relabel_configs", n)
		}
	}
	return nil
}

// nameFromAddress makes a target name out of host:port: characters a name may
// not hold become "_", and it starts with a letter or digit.
func nameFromAddress(addr string) string {
	name := nameInvalidRE.ReplaceAllString(addr, "_")
	return strings.TrimLeft(name, "_.:-")
}

func cloneTarget(t config.Target) config.Target {
	if t.Labels != nil {
		l := make(map[string]string, len(t.Labels))
		for k, v := range t.Labels {
			l[k] = v
		}
		t.Labels = l
	}
	t.Modules = append([]string(nil), t.Modules...)
	return t
}

func cloneTargets(ts []config.Target) []config.Target {
	if ts == nil {
		return nil
	}
	out := make([]config.Target, len(ts))
	for i, t := range ts {
		out[i] = cloneTarget(t)
	}
	return out
}

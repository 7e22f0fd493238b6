// Package discovery turns the targets Prometheus' own service discovery finds
// (file_sd_configs, http_sd_configs, kubernetes_sd_configs, dns_sd_configs)
// into vllm_prober targets.
//
// Each configured mechanism runs as Prometheus' discoverer of that name
// (github.com/prometheus/prometheus/discovery/...), with its configuration
// type, its __meta_* labels, its prometheus_sd_* metrics and its behaviour: a
// file that no longer parses keeps its last good targets (and is logged), an
// http_sd endpoint that fails keeps the last list, a Kubernetes watch follows
// pods, endpointslices and services as they change.
//
// A Manager runs the discoverers of one configuration file. It keeps the
// current target groups of each (by source, as Prometheus' discovery manager
// does), relabels each discovered target into a config.Target built from
// target_defaults, merges them with the statically configured targets and
// publishes the full, sorted, de-duplicated list on Updates whenever it
// changes, coalescing bursts of updates (a Kubernetes list of many pods)
// within PublishDelay.
//
// Relabelling starts from the labels of the group and the target, plus:
//
//	__address__       host:port of the vLLM server (from the discoverer)
//	__scheme__        http
//	__metrics_path__  target_defaults.metrics_path (/metrics)
//	__model__         target_defaults.model, when set
//	__engine__        target_defaults.engine, when set
//	__price_per_hour__  target_defaults.price_per_hour, when set
//	__meta_*          the discoverer's labels (__meta_filepath, __meta_url,
//	                  __meta_kubernetes_pod_label_<name>, ...)
//
// and afterwards reads the target from:
//
//	__target_name__   the target name (default: __address__, made a valid name)
//	__scheme__ and __address__  the target URL, scheme://address
//	__metrics_path__  where vLLM's /metrics is scraped
//	__model__         the served model name ("" means: ask /v1/models)
//	__engine__        the engine profile of its /metrics ("" means: detect it)
//	__price_per_hour__  the price of an hour of its hardware ("" means: none);
//	                  a value that is not a positive number is dropped with a
//	                  warning and counted, and the target kept without a price
//
// Every remaining label whose name does not start with "__" becomes a static
// label of the target, on top of target_defaults.labels. A drop (or a failed
// keep) removes the target.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	slogkit "github.com/tjhop/slog-gokit"

	"github.com/vllm-prober/vllm_prober/internal/config"
)

// Meta labels read after relabelling, in addition to Prometheus' __address__,
// __scheme__ and __metrics_path__.
const (
	TargetNameLabel = "__target_name__"
	ModelLabel      = "__model__"
	// EngineLabel forces the engine profile the target's /metrics is read
	// with (the target's engine key); "" detects it.
	EngineLabel = "__engine__"
	// PriceLabel sets the target's price_per_hour, e.g. from a pod
	// annotation or a node's GPU product mapped to a price by relabelling.
	PriceLabel = "__price_per_hour__"
)

// PublishDelay is how long a Manager gathers the updates that follow a first
// one before it publishes a new list: a Kubernetes discoverer reports a list
// of pods one group at a time.
const PublishDelay = 100 * time.Millisecond

// targetNameRE and labelNameRE mirror the config package's rules for static targets.
var (
	targetNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	labelNameRE   = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	nameInvalidRE = regexp.MustCompile(`[^A-Za-z0-9_.:-]+`)
)

// Metrics are the prometheus_sd_* metrics of every discovery mechanism
// (prometheus_sd_file_read_errors_total, prometheus_sd_http_failures_total,
// prometheus_sd_kubernetes_events_total, prometheus_sd_dns_lookups_total,
// prometheus_sd_refresh_duration_seconds, ...), as Prometheus exports them. They
// are registered once per process and shared by the Managers of successive
// configurations.
type Metrics struct {
	sd map[string]promdiscovery.DiscovererMetrics
	// invalidPrice counts discovered targets whose __price_per_hour__ was
	// not a price: they are kept without one.
	invalidPrice prometheus.Counter
}

func newInvalidPrice() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vllm_prober_discovery_invalid_prices_total",
		Help: "Discovered targets whose " + PriceLabel + " label was not a positive number after relabelling, counted at each discovery update that relabels them; each is kept without a price (no cost series).",
	})
}

// NewMetrics registers the metrics of every discovery mechanism on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	sd, err := promdiscovery.CreateAndRegisterSDMetrics(reg)
	if err != nil {
		return nil, err
	}
	invalid := newInvalidPrice()
	if err := reg.Register(invalid); err != nil {
		return nil, fmt.Errorf("registering %s: %w", "vllm_prober_discovery_invalid_prices_total", err)
	}
	return &Metrics{sd: sd, invalidPrice: invalid}, nil
}

// unregisteredMetrics are metrics for discoverers that are built only to be
// checked (New without WithMetrics).
func unregisteredMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	sd, err := promdiscovery.RegisterSDMetrics(reg, promdiscovery.NewRefreshMetrics(reg))
	if err != nil {
		// A fresh registry has no collisions: only a broken mechanism gets here.
		panic(fmt.Sprintf("discovery: registering metrics on a fresh registry: %v", err))
	}
	return &Metrics{sd: sd, invalidPrice: newInvalidPrice()}
}

type update struct {
	provider int
	groups   []*targetgroup.Group
}

// Manager runs the discovery of one configuration file and publishes the
// resulting targets.
type Manager struct {
	logger   log.Logger
	base     []config.Target
	template config.Target
	relabel  []*relabel.Config
	sds      []config.NamedSDConfig
	files    []fileSet // the file_sd_configs, for CheckFiles
	metrics  *Metrics

	updates chan []config.Target

	mu      sync.Mutex
	current []config.Target
	started bool
}

// Options configure a Manager.
type Options struct {
	Logger log.Logger
	// Metrics are the process' registered prometheus_sd_* metrics the
	// discoverers count into (NewMetrics); nil counts into unregistered ones.
	// HTTP clients are Prometheus' own: http_sd and kubernetes_sd build theirs
	// from their configuration, as in Prometheus.
	Metrics *Metrics
}

// New returns a Manager for cfg, which must have been validated. base are the
// statically configured targets: they are part of every published list and win
// over a discovered target of the same name. cfg.TargetDefaults nil means
// config.DefaultTarget; its Modules should already be resolved (the config
// package fills an empty list with every module, as for static targets).
//
// New builds every discoverer once, as Run will, so that what Prometheus
// refuses only when it starts one (a kubeconfig_file that does not load, an
// HTTP client that cannot be built) fails the configuration here, in the
// daemon's load and in --config.check alike.
func New(cfg config.Discovery, base []config.Target, o Options) (*Manager, error) {
	logger := o.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	m := &Manager{
		logger:   logger,
		base:     append([]config.Target(nil), base...),
		template: config.DefaultTarget,
		relabel:  cfg.RelabelConfigs,
		sds:      cfg.Configs(),
		updates:  make(chan []config.Target, 1),
	}
	m.metrics = o.Metrics
	if cfg.TargetDefaults != nil {
		m.template = *cfg.TargetDefaults
	}
	check := unregisteredMetrics()
	for _, sd := range m.sds {
		if inCluster(sd.Config) {
			// Its client comes from the pod's service account: outside a
			// cluster (--config.check in CI) it cannot be built, and inside
			// one a failure is logged at Run, as Prometheus does.
			continue
		}
		if _, err := m.discoverer(sd, check); err != nil {
			return nil, fmt.Errorf("%s: %w", sd.Name, err)
		}
	}
	for i, fc := range cfg.FileSDConfigs {
		m.files = append(m.files, fileSet{name: fmt.Sprintf("file_sd_configs[%d]", i), patterns: fc.Files})
	}
	if m.metrics == nil {
		m.metrics = check
	}
	m.current = m.compute(nil)
	return m, nil
}

// inCluster reports whether c is a kubernetes_sd_configs entry without
// api_server and kubeconfig_file: one that talks to the API server of the
// cluster it runs in.
func inCluster(c promdiscovery.Config) bool {
	k, ok := c.(*kubernetes.SDConfig)
	return ok && k.APIServer.URL == nil && k.KubeConfig == ""
}

// discoverer builds the Prometheus discoverer of sd, counting into metrics.
func (m *Manager) discoverer(sd config.NamedSDConfig, metrics *Metrics) (promdiscovery.Discoverer, error) {
	dm, ok := metrics.sd[sd.Config.Name()]
	if !ok {
		return nil, fmt.Errorf("no metrics for discovery mechanism %q", sd.Config.Name())
	}
	return sd.Config.NewDiscoverer(promdiscovery.DiscovererOptions{
		Logger:  slogLogger(log.With(m.logger, "discovery", sd.Name)),
		Metrics: dm,
		SetName: "vllm_prober",
	})
}

// slogLogger hands Prometheus' discoverers, which log through log/slog, the
// daemon's go-kit logger (and so its level filter and secret scrubbing).
func slogLogger(logger log.Logger) *slog.Logger {
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelDebug) // the go-kit logger filters
	return slog.New(slogkit.NewGoKitHandler(logger, lvl))
}

// Updates delivers the full target list each time it changes. Only the newest
// list is kept: a slow reader skips intermediate lists, never a final state.
// The channel is closed when Run returns. Lists are fresh copies the receiver
// may keep.
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

// Run runs every discoverer until ctx is done and returns once all of them
// have exited. It must be called once.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		panic("discovery: Manager.Run called twice")
	}
	m.started = true
	m.mu.Unlock()
	defer close(m.updates)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up := make(chan update)
	var wg sync.WaitGroup
	for i, sd := range m.sds {
		d, err := m.discoverer(sd, m.metrics)
		if err != nil {
			// In-cluster Kubernetes discovery outside a cluster, or a
			// kubeconfig_file changed since New: as in Prometheus, the rest runs.
			level.Error(m.logger).Log("msg", "Cannot create service discovery", "discovery", sd.Name, "err", err)
			continue
		}
		ch := make(chan []*targetgroup.Group)
		wg.Add(2)
		go func() {
			defer wg.Done()
			d.Run(ctx, ch)
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case groups := <-ch:
					select {
					case up <- update{provider: i, groups: groups}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	defer wg.Wait()

	// The current groups of each discoverer, by source, as in Prometheus'
	// discovery manager: a discoverer sends only the groups that changed.
	groups := make([]map[string]*targetgroup.Group, len(m.sds))
	for i := range groups {
		groups[i] = map[string]*targetgroup.Group{}
	}
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
	if len(m.sds) == 0 {
		publish()
	}
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-up:
			for _, g := range u.groups {
				if g == nil {
					continue
				}
				if len(g.Targets) == 0 {
					delete(groups[u.provider], g.Source)
				} else {
					groups[u.provider][g.Source] = g
				}
			}
			if timer == nil {
				timer = time.After(PublishDelay)
			}
		case <-timer:
			timer = nil
			publish()
		}
	}
}

// compute builds the target list from the static targets and the groups of
// every provider.
func (m *Manager) compute(groups []map[string]*targetgroup.Group) []config.Target {
	out := cloneTargets(m.base)
	index := make(map[string]int, len(out))
	for i, t := range out {
		index[t.Name] = i
	}
	for p, gs := range groups {
		sources := make([]string, 0, len(gs))
		for src := range gs {
			sources = append(sources, src)
		}
		sort.Strings(sources)
		for _, src := range sources {
			g := gs[src]
			for ti, tl := range g.Targets {
				t, err := m.build(g.Labels, tl)
				if err != nil {
					level.Error(m.logger).Log("msg", "Discovered target is not valid, ignoring it", "discovery", m.sds[p].Name, "source", g.Source, "index", ti, "err", err)
					continue
				}
				if t == nil {
					continue // dropped by relabelling
				}
				if i, ok := index[t.Name]; ok {
					if !reflect.DeepEqual(out[i], *t) {
						level.Warn(m.logger).Log("msg", "Two targets have the same name, keeping the first", "discovery", m.sds[p].Name, "source", g.Source, "target", t.Name)
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
	if m.template.Engine != "" {
		lb.Set(EngineLabel, m.template.Engine)
	}
	if m.template.PricePerHour != nil {
		lb.Set(PriceLabel, config.FormatPrice(*m.template.PricePerHour))
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
	if t.Engine = lb.Get(EngineLabel); t.Engine != "" && !slices.Contains(config.Engines, t.Engine) {
		return nil, fmt.Errorf("__engine__ %q is not one of %s", t.Engine, strings.Join(config.Engines, ", "))
	}
	t.PricePerHour = m.price(name, lb.Get(PriceLabel))
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

// price reads a discovered target's __price_per_hour__. A bad value costs
// the target its price, not its probes: it is logged, counted and dropped.
func (m *Manager) price(target, v string) *float64 {
	if v == "" {
		return nil
	}
	p, err := config.ParsePrice(v)
	if err != nil {
		m.metrics.invalidPrice.Inc()
		level.Warn(m.logger).Log("msg", "Discovered target has an invalid price, exporting no cost series for it", "target", target, "label", PriceLabel, "err", err)
		return nil
	}
	return &p
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

// Package discovery turns the target groups Prometheus' own service
// discovery finds (file_sd_configs, http_sd_configs, kubernetes_sd_configs,
// dns_sd_configs) into vllm_prober targets.
//
// The discoverers run in the daemon, under one long-lived Prometheus
// discovery manager (github.com/prometheus/prometheus/discovery) whose
// ApplyConfig keeps the discoverers of an unchanged configuration running
// across reloads, with their __meta_* labels, their prometheus_sd_* metrics
// and their behaviour: a file that no longer parses keeps its last good
// targets (and is logged), an http_sd endpoint that fails keeps the last
// list, a Kubernetes watch follows pods, endpointslices and services as they
// change. This package holds what is vllm_prober's own: Targets, a pure
// function from the groups the manager sends, the static targets,
// target_defaults and relabel_configs to the target list, and Check, the
// load-time check of the discovery sections (--config.check).
//
// Relabelling starts from the labels of the group and the target, plus:
//
//	__address__       host:port of the vLLM server (from the discoverer)
//	__scheme__        http
//	__metrics_path__  target_defaults.metrics_path (/metrics)
//	__model__         target_defaults.model, when set
//	__engine__        target_defaults.engine, when set
//	__role__          target_defaults.role, when set
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
//	__role__          its role in a prefill/decode fleet: prefill, decode or
//	                  both (llm-d's llm-d.ai/role value prefill-decode is both;
//	                  "" means none)
//	__price_per_hour__  the price of an hour of its hardware ("" means: none);
//	                  a value that is not a positive number is dropped with a
//	                  warning and counted, and the target kept without a price
//
// Every remaining label whose name does not start with "__" becomes a static
// label of the target, on top of target_defaults.labels. A drop (or a failed
// keep) removes the target.
package discovery

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/vllm-prober/vllm_prober/config"
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
	// RoleLabel sets the target's role (config.Roles), e.g. from llm-d's pod
	// label llm-d.ai/role.
	RoleLabel = "__role__"
)

// PublishDelay is how long the daemon's discovery manager gathers the
// updates that follow a first one before it hands over the groups
// (Prometheus' Updatert): a Kubernetes discoverer reports a list of pods one
// group at a time.
const PublishDelay = 100 * time.Millisecond

// targetNameRE and labelNameRE mirror the config package's rules for static targets.
var (
	targetNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	labelNameRE   = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	nameInvalidRE = regexp.MustCompile(`[^A-Za-z0-9_.:-]+`)
)

// Sets are the target sets of cfg as Prometheus' discovery manager takes
// them (ApplyConfig): one set per configured mechanism, named by its place in
// the file ("kubernetes_sd_configs[0]"). A set's name is the config label of
// prometheus_sd_discovered_targets and the key of its groups in Targets.
func Sets(cfg config.Discovery) map[string]promdiscovery.Configs {
	sets := map[string]promdiscovery.Configs{}
	for _, sd := range cfg.Configs() {
		sets[sd.Name] = promdiscovery.Configs{sd.Config}
	}
	return sets
}

// Targets turns what discovery found into the target list: static (the
// configured targets) and every target of groups, by set name as Prometheus'
// discovery manager sends them (SyncCh), relabelled under cfg's
// relabel_configs into a target built from cfg's target_defaults. Groups of
// sets cfg does not configure are ignored. The list is sorted by name; a
// static target wins over a discovered one of its name, and a discovered
// target that is not valid is logged and left out. Targets keeps no state:
// a reload recomputes the list from the groups last sent. A nil logger logs
// nothing.
func Targets(groups map[string][]*targetgroup.Group, static []config.Target, cfg config.Discovery, logger log.Logger) []config.Target {
	return TargetsCounting(groups, static, cfg, logger, Counters{})
}

// NewInvalidPrices returns the counter TargetsCounting counts discovered
// targets with an invalid __price_per_hour__ in, for the caller to register.
func NewInvalidPrices() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vllm_prober_discovery_invalid_prices_total",
		Help: "Discovered targets whose " + PriceLabel + " label was not a positive number after relabelling, counted at each discovery update that relabels them; each is kept without a price (no cost series).",
	})
}

// NewDroppedLabels returns the counter TargetsCounting counts the labels it
// dropped from discovered targets in, for the caller to register.
func NewDroppedLabels() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vllm_prober_discovery_dropped_labels_total",
		Help: "Labels dropped from discovered targets after relabelling because their name is reserved (a label of the prober's own series, such as engine or vantage) or not a valid label name, counted at each discovery update that relabels them; the target is kept without them.",
	})
}

// Counters are what TargetsCounting counts; a nil counter counts nothing.
type Counters struct {
	// InvalidPrices counts discovered targets whose __price_per_hour__ is
	// not a price: each is kept without one.
	InvalidPrices prometheus.Counter
	// DroppedLabels counts the labels dropped from discovered targets: a
	// reserved or invalid name is never passed on to the series.
	DroppedLabels prometheus.Counter
}

// TargetsCounting is Targets, counting in c what it drops: the price of a
// discovered target whose __price_per_hour__ is not a price, and the labels
// whose names are reserved or invalid. Each is logged; the target is kept.
func TargetsCounting(groups map[string][]*targetgroup.Group, static []config.Target, cfg config.Discovery, logger log.Logger, c Counters) []config.Target {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	template := config.DefaultTarget
	if cfg.TargetDefaults != nil {
		template = *cfg.TargetDefaults
	}
	out := cloneTargets(static)
	index := make(map[string]int, len(out))
	for i, t := range out {
		index[t.Name] = i
	}
	for _, sd := range cfg.Configs() {
		gs := slices.Clone(groups[sd.Name])
		slices.SortFunc(gs, func(a, b *targetgroup.Group) int { return strings.Compare(a.Source, b.Source) })
		for _, g := range gs {
			for ti, tl := range g.Targets {
				t, priceErr, dropped, err := build(template, cfg.RelabelConfigs, g.Labels, tl)
				if err != nil {
					level.Error(logger).Log("msg", "Discovered target is not valid, ignoring it", "discovery", sd.Name, "source", g.Source, "index", ti, "err", err)
					continue
				}
				if priceErr != nil {
					// A bad price costs the target its price, not its probes.
					if c.InvalidPrices != nil {
						c.InvalidPrices.Inc()
					}
					level.Warn(logger).Log("msg", "Discovered target has an invalid price, exporting no cost series for it", "target", t.Name, "label", PriceLabel, "err", priceErr)
				}
				for _, derr := range dropped {
					if c.DroppedLabels != nil {
						c.DroppedLabels.Inc()
					}
					level.Warn(logger).Log("msg", "Dropped a label of a discovered target", "target", t.Name, "err", derr)
				}
				if t == nil {
					continue // dropped by relabelling
				}
				if i, ok := index[t.Name]; ok {
					if !reflect.DeepEqual(out[i], *t) {
						level.Warn(logger).Log("msg", "Two targets have the same name, keeping the first", "discovery", sd.Name, "source", g.Source, "target", t.Name)
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
// when relabelling drops the target. dropped says why each label it left out
// (a reserved or invalid name) was.
func build(template config.Target, rules []*relabel.Config, groupLabels, targetLabels model.LabelSet) (out *config.Target, priceErr error, dropped []error, err error) {
	lb := labels.NewBuilder(labels.EmptyLabels())
	lb.Set(model.SchemeLabel, "http")
	lb.Set(model.MetricsPathLabel, template.MetricsPath)
	if template.Model != "" {
		lb.Set(ModelLabel, template.Model)
	}
	if template.Engine != "" {
		lb.Set(EngineLabel, template.Engine)
	}
	if template.Role != "" {
		lb.Set(RoleLabel, template.Role)
	}
	if template.PricePerHour != nil {
		lb.Set(PriceLabel, config.FormatPrice(*template.PricePerHour))
	}
	for n, v := range groupLabels {
		lb.Set(string(n), string(v))
	}
	for n, v := range targetLabels {
		lb.Set(string(n), string(v))
	}
	if !relabel.ProcessBuilder(lb, rules...) {
		return nil, nil, nil, nil
	}

	u, err := targetURL(lb.Get(model.SchemeLabel), lb.Get(model.AddressLabel))
	if err != nil {
		return nil, nil, nil, err
	}
	metricsPath := lb.Get(model.MetricsPathLabel)
	if !strings.HasPrefix(metricsPath, "/") {
		return nil, nil, nil, fmt.Errorf("__metrics_path__ %q must start with /", metricsPath)
	}
	name := lb.Get(TargetNameLabel)
	if name == "" {
		name = nameFromAddress(lb.Get(model.AddressLabel))
	}
	if !targetNameRE.MatchString(name) {
		return nil, nil, nil, fmt.Errorf("target name %q must match %s", name, targetNameRE)
	}

	t := cloneTarget(template)
	t.Name = name
	t.URL = u.String()
	t.Model = lb.Get(ModelLabel)
	t.MetricsPath = metricsPath
	if t.Engine = lb.Get(EngineLabel); t.Engine != "" && !slices.Contains(config.Engines, t.Engine) {
		return nil, nil, nil, fmt.Errorf("__engine__ %q is not one of %s", t.Engine, strings.Join(config.Engines, ", "))
	}
	t.Role = lb.Get(RoleLabel)
	if t.Role == "prefill-decode" { // llm-d's value for a pod that does both
		t.Role = config.RoleBoth
	}
	if t.Role != "" && !slices.Contains(config.Roles, t.Role) {
		return nil, nil, nil, fmt.Errorf("__role__ %q is not one of %s", t.Role, strings.Join(config.Roles, ", "))
	}
	t.PricePerHour = nil
	if v := lb.Get(PriceLabel); v != "" {
		if p, perr := config.ParsePrice(v); perr != nil {
			priceErr = perr
		} else {
			t.PricePerHour = &p
		}
	}
	lb.Range(func(l labels.Label) {
		if strings.HasPrefix(l.Name, "__") {
			return
		}
		if err := checkLabelName(l.Name); err != nil {
			dropped = append(dropped, err)
			return
		}
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[l.Name] = l.Value
	})
	return &t, priceErr, dropped, nil
}

// targetURL is a target's URL from the __scheme__ and __address__ labels
// left after relabelling.
func targetURL(scheme, addr string) (*url.URL, error) {
	switch {
	case addr == "":
		return nil, errors.New("no __address__ label")
	case strings.Contains(addr, "@"):
		// Never echo it: it may hold credentials.
		return nil, errors.New("__address__ must not carry credentials: use target_defaults.http_client_config")
	case strings.Contains(addr, "/"):
		return nil, fmt.Errorf("__address__ %q must be host:port, without scheme or path", addr)
	}
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("__scheme__ %q is not http or https", scheme)
	}
	u, err := url.Parse(scheme + "://" + addr)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("__address__ %q is not a valid host:port", addr)
	}
	return u, nil
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

// cloneTarget copies t's labels and modules, so that no built target shares
// them with the template or a static target.
func cloneTarget(t config.Target) config.Target {
	t.Labels = maps.Clone(t.Labels)
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

package collector

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-prober/vllm_prober/config"
)

// GatewaySet exports the vllm_gateway_* series of the configuration's
// gateway targets (config.Gateway) that scrape their /metrics: one
// GatewayCollector each, scraped at every collection. It is an unchecked
// prometheus.Collector: its targets follow SetTargets.
type GatewaySet struct {
	clients ClientPool

	gws atomic.Pointer[[]*GatewayCollector]
}

// NewGatewaySet returns an empty GatewaySet taking its HTTP clients from
// clients, registered with reg when reg is not nil.
func NewGatewaySet(reg prometheus.Registerer, clients ClientPool) (*GatewaySet, error) {
	s := &GatewaySet{clients: clients}
	if reg != nil {
		if err := reg.Register(s); err != nil {
			return nil, fmt.Errorf("registering the gateway collector: %w", err)
		}
	}
	return s, nil
}

// SetTargets scrapes the gateways of cfg from now on. On error nothing
// changes.
func (s *GatewaySet) SetTargets(cfg *config.Config) error {
	var gws []*GatewayCollector
	release := func(gws []*GatewayCollector) {
		for _, g := range gws {
			s.clients.Release(g.Client)
		}
	}
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		if t.Gateway == nil || !t.ScrapeMetrics {
			continue
		}
		client, err := s.clients.Acquire(t.HTTPClientConfig)
		if err != nil {
			release(gws)
			return fmt.Errorf("gateway %q: %w", t.Name, err)
		}
		gws = append(gws, &GatewayCollector{Target: t.Name, URL: joinURL(t.URL, t.MetricsPath), Client: client, Timeout: cfg.ScrapeTimeout(t)})
	}
	if old := s.gws.Swap(&gws); old != nil {
		release(*old)
	}
	return nil
}

// Describe sends nothing: the set is unchecked.
func (s *GatewaySet) Describe(chan<- *prometheus.Desc) {}

// Collect scrapes every gateway at once and sends their series.
func (s *GatewaySet) Collect(ch chan<- prometheus.Metric) {
	gws := s.gws.Load()
	if gws == nil {
		return
	}
	var wg sync.WaitGroup
	for _, g := range *gws {
		wg.Go(func() { g.Collect(ch) })
	}
	wg.Wait()
}

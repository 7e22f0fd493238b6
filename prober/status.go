package prober

import (
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// ModuleStatus is the state of one (target, module) pair for the landing page.
type ModuleStatus struct {
	Module  string
	Model   string   // with the target's models key: the model probed; else ""
	Last    *Record  // nil before the first probe finished
	History []Record // newest first, bounded; treat as read-only
}

// TargetStatus is the state of one target for the landing page.
type TargetStatus struct {
	Name     string
	URL      string // without credentials
	Model    string // resolved model, "" if unknown yet
	HealthUp bool
	ModelsUp bool
	Checked  bool // false until /health and /v1/models were checked once
	// ScrapeOnly: probe: false (modules: none); the prober never checks or
	// probes it, so Checked stays false.
	ScrapeOnly bool
	Modules    []ModuleStatus
}

// Status returns the state of every target, in configuration order.
func (m *Manager) Status() []TargetStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg == nil {
		return nil
	}
	out := make([]TargetStatus, 0, len(m.cfg.Targets))
	for i := range m.cfg.Targets {
		out = append(out, m.targetStatus(&m.cfg.Targets[i]))
	}
	return out
}

// targetStatus is the state of a configured target. m.mu must be held.
func (m *Manager) targetStatus(tc *config.Target) TargetStatus {
	t := m.targets[tc.Name]
	ts := TargetStatus{Name: tc.Name, URL: probe.RedactURL(tc.URL), Model: t.model,
		HealthUp: t.healthUp, ModelsUp: t.modelsUp, Checked: t.checked, ScrapeOnly: !tc.Probe}
	for _, mod := range tc.Modules {
		for _, model := range pairModels(t) {
			p := m.pairs[pairKey{tc.Name, mod, model}]
			ms := ModuleStatus{Module: mod, Model: model, History: p.hist.list()}
			if l, ok := p.hist.last(); ok {
				ms.Last = &l
			}
			ts.Modules = append(ts.Modules, ms)
		}
	}
	return ts
}

// Model returns the resolved model of target, "" if unknown.
func (m *Manager) Model(targetName string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.targets[targetName]; ok {
		return t.model
	}
	return ""
}

// MeanTTFT returns the mean TTFT in seconds of the successful scheduled probes of
// target (all modules) that started at or after since, and how many there were.
// O(modules of the target); it copies no history.
func (m *Manager) MeanTTFT(targetName string, since time.Time) (seconds float64, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.targets[targetName]
	if !ok {
		return 0, 0
	}
	var sum float64
	for _, p := range t.pairs {
		s := p.state.window.since(since.UnixNano())
		sum += s.ttft
		n += s.n
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

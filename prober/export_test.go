package prober

import "github.com/vllm-prober/vllm_prober/prober/probe"

// RecordForTest books res as a finished scheduled probe of (target, module),
// as the schedule would, so that external tests can fill histories without
// running probes.
func (m *Manager) RecordForTest(target, module string, res probe.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(m.pairs[pairKey{target, module, ""}], &res)
}

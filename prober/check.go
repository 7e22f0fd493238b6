package prober

import (
	"context"
	"slices"

	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/schedule"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// checkLoop checks t's /health and /v1/models now and then every interval.
// After the first check it moves to a stable phase of its own in the
// interval (the second check comes at most an interval after the first), so
// that the checks of many targets started together do not all fire at once:
// in phase, 1,000 targets opened up to 1,000 connections every interval.
func (m *Manager) checkLoop(ctx context.Context, t *target) {
	m.mu.Lock()
	interval := t.interval
	offset := m.offset(pairKey{target: t.cfg.Name}, interval)
	m.mu.Unlock()
	if offset <= 0 {
		offset = interval
	}
	schedule.Run(ctx, interval, offset, true, func(ctx context.Context) { m.check(ctx, t) })
}

// check runs one /health and /v1/models check of t and records it.
func (m *Manager) check(ctx context.Context, t *target) {
	m.mu.Lock()
	client, base, timeout, name, red := t.client, t.cfg.URL, t.timeout, t.cfg.Name, m.red
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	healthUp := vllmapi.Health(ctx, client, base) == nil
	ids, fail := probe.ListModels(ctx, client, base, red)
	m.warnHeldModels(name, ids)
	if fail != nil {
		fail.Scrub(red)
	}
	if ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
		return // shutting down or reconfigured
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.targets[name] != t || !t.cfg.Probe {
		return // removed, or made scrape-only meanwhile
	}
	modelsUp := false
	if fail == nil {
		if t.cfg.Models != "" {
			modelsUp = m.syncModels(t, ids)
		} else if t.cfg.Model != "" {
			modelsUp = slices.Contains(ids, t.cfg.Model)
		} else if len(ids) > 0 {
			modelsUp = true
			t.resolved(ids[0])
		}
	} else {
		level.Debug(m.logger).Log("msg", "Listing models failed", "target", name, "reason", fail.Reason, "err", fail.Err)
	}
	t.checked, t.healthUp, t.modelsUp = true, healthUp, modelsUp
}

// warnHeldModels warns when a model id target lists held a secret: ListModels
// made it redact.Placeholder, and the warning names the target and the
// field, never the value.
func (m *Manager) warnHeldModels(target string, ids []string) {
	if slices.Contains(ids, redact.Placeholder) {
		level.Warn(m.logger).Log("msg", "A model id the target lists holds a configured secret: it is shown as "+redact.Placeholder,
			"target", target, "field", "/v1/models id")
	}
}

package prober

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/schedule"
	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
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
	ids, fail := m.fetchModels(ctx, client, base, name)
	if fail != nil {
		fail.Scrub(red)
	}
	if ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
		return // shutting down or reconfigured
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.targets[name] != t || m.metrics == nil || !t.cfg.Probe {
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
			m.setModel(t, ids[0])
		}
	} else {
		level.Debug(m.logger).Log("msg", "Listing models failed", "target", name, "reason", fail.Reason, "err", fail.Err)
	}
	t.checked, t.healthUp, t.modelsUp = true, healthUp, modelsUp
	m.relabelTarget(t)
	m.metrics.healthUp.WithLabelValues(t.labels...).Set(b2f(healthUp))
	m.metrics.modelsUp.WithLabelValues(t.labels...).Set(b2f(modelsUp))
}

// fetchModels lists the served model ids of target name. On failure it
// returns a failed Result whose reason says why. Every text of the answer is
// scrubbed before it is kept or cut; an id that holds a secret becomes
// redact.Placeholder (redact.Label), with a warning.
func (m *Manager) fetchModels(ctx context.Context, client *http.Client, base, name string) ([]string, *Result) {
	red := m.red
	res := &Result{Start: time.Now()}
	models, err := vllmapi.Models(ctx, client, base, nil)
	if err != nil {
		var status *vllmapi.StatusError
		var decode *vllmapi.DecodeError
		switch {
		case errors.As(err, &status):
			res.StatusCode = status.Code
			reason, msg := classifyHTTPError(status.Code, status.Body)
			res.Reason, res.Err = reason, sanitize(red, "/v1/models: "+msg)
			res.ErrorBody = excerpt(red, status.Body, maxErrorExcerpt)
		case errors.As(err, &decode):
			res.StatusCode = http.StatusOK
			res.Reason, res.Err = ReasonMalformed, sanitize(red, "/v1/models: invalid JSON: "+decode.Err.Error())
		default:
			reason, msg := classifyTransportError(ctx, err)
			res.Reason, res.Err = reason, sanitize(red, msg)
		}
		return nil, res
	}
	ids := make([]string, 0, len(models))
	for _, d := range models {
		if d.ID == "" {
			continue
		}
		id, held := red.Label(d.ID)
		if held {
			level.Warn(m.logger).Log("msg", "A model id the target lists holds a configured secret: it is shown as "+redact.Placeholder,
				"target", name, "field", "/v1/models id")
		}
		ids = append(ids, id)
	}
	return ids, nil
}

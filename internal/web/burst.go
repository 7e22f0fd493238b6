package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/prober"
)

// burstHandler is POST /burst?target=T&probes=N&within=D[&module=M] (or a
// Flagger webhook whose metadata carries those keys): N extra probes of T
// spread over D, within global.burst's limits and token budget. 202 with
// the accepted plan as JSON; 400 over the limits, 429 over the budget, 403
// when bursts are off, each with what the limit is.
func (h *handler) burstHandler(w http.ResponseWriter, r *http.Request) {
	q, t, module, err := webhookPair(h.opts.Running(), r)
	if err != nil {
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	probes, err := strconv.Atoi(q.Get("probes"))
	if err != nil {
		textResponse(w, http.StatusBadRequest, "probes %q is not a whole number of probes", q.Get("probes"))
		return
	}
	within := time.Duration(0)
	if v := q.Get("within"); v != "" {
		var err error
		if within, err = parseDuration(v); err != nil {
			textResponse(w, http.StatusBadRequest, "within %q is not a duration (e.g. 1m)", v)
			return
		}
	}
	plan, err := h.bursts.Start(t.Name, module, probes, within)
	switch {
	case errors.Is(err, prober.ErrBurstOff):
		textResponse(w, http.StatusForbidden, "%s", err)
		return
	case errors.Is(err, prober.ErrBurstBudget):
		textResponse(w, http.StatusTooManyRequests, "%s", err)
		return
	case err != nil:
		textResponse(w, http.StatusBadRequest, "%s", err)
		return
	}
	level.Info(h.logger).Log("msg", "Burst accepted", "target", plan.Target, "module", plan.Module,
		"probes", plan.Probes, "within", plan.Within, "reserved_tokens", plan.Reserved)
	b, _ := json.Marshal(struct {
		Target   string  `json:"target"`
		Module   string  `json:"module"`
		Probes   int     `json:"probes"`
		Within   float64 `json:"within_seconds"`
		Reserved int     `json:"reserved_tokens"`
	}{plan.Target, plan.Module, plan.Probes, plan.Within.Seconds(), plan.Reserved})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(append(b, '\n'))
}

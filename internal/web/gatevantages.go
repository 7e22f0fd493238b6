package web

import (
	"context"
	"net/url"
	"sync"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/compare"
	"github.com/vllm-prober/vllm_prober/internal/gatevantage"
)

// askVantages asks every other vantage's /gate (global.gate.vantages), with
// the query q, for its own verdict, in parallel. A vantage that cannot be
// asked is Inconclusive, its reason saying why; every reason is scrubbed of
// the configured secrets.
func (h *handler) askVantages(ctx context.Context, vantages []config.GateVantage, q url.Values) []compare.VantageVerdict {
	out := make([]compare.VantageVerdict, len(vantages))
	var wg sync.WaitGroup
	for i, gv := range vantages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client, err := h.clients.Acquire(gv.HTTPClientConfig)
			if err != nil {
				out[i] = gatevantage.Unreachable(gv.Name, err)
			} else {
				defer h.clients.Release(client)
				res, reason, err := gatevantage.Ask(ctx, client, gv.URL, q)
				if err != nil {
					out[i] = gatevantage.Unreachable(gv.Name, err)
				} else {
					out[i] = compare.VantageVerdict{Vantage: gv.Name, Result: res, Reason: reason}
				}
			}
			out[i].Reason = h.scrubber.scrub(out[i].Reason)
		}()
	}
	wg.Wait()
	return out
}

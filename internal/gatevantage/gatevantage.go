// Package gatevantage asks another vantage's vllm_prober for its own /gate
// verdict on a target (docs/rollouts.md, "Vantages"), for GET /gate and
// `vllm_prober check`, which make one verdict over every vantage's
// (compare.JudgeVantages).
package gatevantage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/compare"
)

// Timeout bounds one question to another vantage.
const Timeout = 5 * time.Second

// maxAnswer bounds the answer read.
const maxAnswer = 1 << 20

// Ask asks the replica at base (its web endpoints' base URL) for its own
// verdict, GET /gate with the query q (target, module, reference, window,
// thresholds) and local=true, so that vantages never ask each other in a
// loop. It returns the verdict (compare.Pass, Fail or Inconclusive) and its
// reason, or an error saying why there is none.
func Ask(ctx context.Context, client *http.Client, base string, q url.Values) (result, reason string, err error) {
	ask := url.Values{}
	for k, vs := range q {
		ask[k] = vs
	}
	ask.Set("local", "true")
	ask.Set("always_200", "true")
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/gate?"+ask.Encode(), nil)
	if err != nil {
		return "", "", fmt.Errorf("building the request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return "", "", fmt.Errorf("reading its answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	var a struct {
		Verdict string `json:"verdict"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return "", "", fmt.Errorf("its answer is not a verdict: %w", err)
	}
	switch a.Verdict {
	case compare.Pass, compare.Fail, compare.Inconclusive:
		return a.Verdict, a.Reason, nil
	}
	return "", "", fmt.Errorf("its answer has no verdict (%q)", a.Verdict)
}

// Unreachable is the verdict of a vantage that could not be asked.
func Unreachable(name string, err error) compare.VantageVerdict {
	return compare.VantageVerdict{Vantage: name, Result: compare.Inconclusive, Reason: "could not ask vantage " + name + ": " + err.Error()}
}

package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Objectives are the latency objectives a probe must meet to count as good
// (goodput): a probe is good when it succeeded and met every objective set;
// a failed probe is bad. This is the definition of vLLM's `bench serve
// --goodput`, GuideLLM's slo_attainment, AIPerf's and inference-perf's
// goodput. An objective left 0 is not set. At least one must be set.
type Objectives struct {
	// TTFT: time to first token at most this long.
	TTFT model.Duration `yaml:"ttft,omitempty"`
	// TPOT: (E2E − TTFT) / (output tokens − 1) at most this long. A probe with
	// one output token has TPOT 0, as vLLM's bench counts it.
	TPOT model.Duration `yaml:"tpot,omitempty"`
	// ITLP99: the 99th percentile of the gaps between the probe's content
	// events at most this long (GuideLLM's "ITL ≤ 50 ms for 99 %").
	ITLP99 model.Duration `yaml:"itl_p99,omitempty"`
	// E2E: end-to-end latency at most this long.
	E2E model.Duration `yaml:"e2e,omitempty"`
}

// Objective names, the values of vllm_probe_objective_misses_total's
// objective label.
const (
	ObjectiveTTFT   = "ttft"
	ObjectiveTPOT   = "tpot"
	ObjectiveITLP99 = "itl_p99"
	ObjectiveE2E    = "e2e"
)

// ObjectiveNames lists the objectives in a fixed order.
func ObjectiveNames() []string {
	return []string{ObjectiveTTFT, ObjectiveTPOT, ObjectiveITLP99, ObjectiveE2E}
}

// limits returns the objectives by ObjectiveNames order (0: not set).
func (o *Objectives) limits() [4]time.Duration {
	return [4]time.Duration{time.Duration(o.TTFT), time.Duration(o.TPOT), time.Duration(o.ITLP99), time.Duration(o.E2E)}
}

// Latencies are what one request measured, for Objectives.Misses.
type Latencies struct {
	TTFT, TPOT, ITLP99, E2E time.Duration
}

// Misses returns, by ObjectiveNames order, whether a successful request with
// latencies l missed each objective. A latency equal to its objective meets
// it (vLLM's bench: "slo >= value").
func (o *Objectives) Misses(l Latencies) [4]bool {
	got := [4]time.Duration{l.TTFT, l.TPOT, l.ITLP99, l.E2E}
	var miss [4]bool
	for i, lim := range o.limits() {
		miss[i] = lim > 0 && got[i] > lim
	}
	return miss
}

// Good reports whether a successful request with latencies l met every objective.
func (o *Objectives) Good(l Latencies) bool {
	for _, m := range o.Misses(l) {
		if m {
			return false
		}
	}
	return true
}

// Has reports, by ObjectiveNames order, which objectives are set.
func (o *Objectives) Has() [4]bool {
	var has [4]bool
	for i, lim := range o.limits() {
		has[i] = lim > 0
	}
	return has
}

// Set reports whether any objective is set.
func (o *Objectives) Set() bool {
	for _, lim := range o.limits() {
		if lim > 0 {
			return true
		}
	}
	return false
}

func (o *Objectives) validate() error {
	for i, lim := range o.limits() {
		if lim < 0 {
			return fmt.Errorf("%s: must not be negative", ObjectiveNames()[i])
		}
	}
	if !o.Set() {
		return errors.New("no objective set (ttft, tpot, itl_p99 or e2e)")
	}
	return nil
}

// String writes the objectives in vLLM bench's --goodput syntax
// ("ttft:200 tpot:50 e2el:2000", milliseconds); itl_p99, which vLLM has not,
// as "itl_p99:50".
func (o *Objectives) String() string {
	var parts []string
	for i, lim := range o.limits() {
		if lim > 0 {
			parts = append(parts, goodputKeys[i]+":"+strconv.FormatFloat(float64(lim)/float64(time.Millisecond), 'f', -1, 64))
		}
	}
	return strings.Join(parts, " ")
}

// goodputKeys are vLLM bench's --goodput keys by ObjectiveNames order.
var goodputKeys = [4]string{"ttft", "tpot", "itl_p99", "e2el"}

// ParseGoodput parses objectives written as vLLM's `bench serve --goodput`
// takes them: KEY:MILLISECONDS pairs separated by spaces (or given as
// separate arguments), keys ttft, tpot and e2el (vLLM's), plus itl_p99.
func ParseGoodput(args ...string) (Objectives, error) {
	var o Objectives
	fields := strings.Fields(strings.Join(args, " "))
	if len(fields) == 0 {
		return o, errors.New("no objective given: want KEY:MS pairs such as ttft:200 tpot:50 e2el:2000")
	}
	seen := map[string]bool{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, ":")
		if !ok {
			return o, fmt.Errorf("goodput objective %q: want KEY:MS (keys ttft, tpot, itl_p99, e2el)", f)
		}
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 {
			return o, fmt.Errorf("goodput objective %q: %q is not a non-negative number of milliseconds", f, v)
		}
		if seen[k] {
			return o, fmt.Errorf("goodput objective %q given twice", k)
		}
		seen[k] = true
		d := model.Duration(ms * float64(time.Millisecond))
		switch k {
		case "ttft":
			o.TTFT = d
		case "tpot":
			o.TPOT = d
		case "itl_p99":
			o.ITLP99 = d
		case "e2el":
			o.E2E = d
		default:
			return o, fmt.Errorf("goodput objective %q: unknown key %q (keys ttft, tpot, itl_p99, e2el)", f, k)
		}
	}
	return o, o.validate()
}

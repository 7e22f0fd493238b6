package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/baseline"
	"github.com/vllm-prober/vllm_prober/prober"
)

// Verdict results, the exit codes of `vllm_prober check` (0, 1, 2) and the
// answers of the daemon's /gate (200, 503, 503).
const (
	Pass         = "pass"
	Fail         = "fail"
	Inconclusive = "inconclusive"
)

// MetricSuccessRatio names the success-ratio row of a verdict.
const MetricSuccessRatio = "success_ratio"

// Thresholds decide a verdict. The latency ratio is the one the
// latency-regression alerts use (mixin/slo.yml, alerts.latency_regression).
type Thresholds struct {
	// LatencyRatio: a latency ratio (measured / expected, above 1 is worse)
	// above it fails.
	LatencyRatio float64 `json:"latency_ratio"`
	// SuccessRatio: a share of successful probes below it fails.
	SuccessRatio float64 `json:"success_ratio"`
	// MinSuccesses: with fewer successful probes (of the target, or of the
	// reference) the verdict is inconclusive, never a pass.
	MinSuccesses int `json:"min_successes"`
}

// DefaultThresholds are those of `vllm_prober check` and /gate.
var DefaultThresholds = Thresholds{LatencyRatio: 1.2, SuccessRatio: 0.9, MinSuccesses: 3}

// Validate reports thresholds that cannot judge anything.
func (t Thresholds) Validate() error {
	switch {
	case !(t.LatencyRatio > 0) || math.IsInf(t.LatencyRatio, 0):
		return fmt.Errorf("latency ratio threshold %v is not a positive number", t.LatencyRatio)
	case !(t.SuccessRatio >= 0 && t.SuccessRatio <= 1):
		return fmt.Errorf("success ratio threshold %v is not between 0 and 1", t.SuccessRatio)
	case t.MinSuccesses < 1:
		return fmt.Errorf("minimum successful probes %d is below 1", t.MinSuccesses)
	}
	return nil
}

// Sample is what a verdict judges of one endpoint: the means of its
// successful probes and how many probes there were.
type Sample struct {
	Means     prober.Means
	Probes    int
	Successes int
}

// SuccessRatio is Successes / Probes, NaN without probes.
func (s Sample) SuccessRatio() float64 {
	if s.Probes == 0 {
		return math.NaN()
	}
	return float64(s.Successes) / float64(s.Probes)
}

// Row is one line of a verdict. Latencies are in seconds; a value nobody
// measured is NaN, and a row with a NaN ratio is not judged (Result "").
type Row struct {
	Metric   string
	Expected float64
	Measured float64
	// Ratio is measured / expected for latencies (above 1 is worse), the
	// measured ratio itself for the success ratio.
	Ratio  float64
	Result string // Pass, Fail or "" (not judged)
}

// Verdict is the judgement of one endpoint against a baseline or a
// reference endpoint.
type Verdict struct {
	// Target and Module name what was judged, Window how far back its
	// probes were read (the daemon's gate; empty for a one-shot check).
	Target, Module string
	Window         time.Duration

	Result string // Pass, Fail or Inconclusive
	// Reason says why, for humans: the failing rows, or what was missing.
	Reason string
	// Against names what the endpoint was compared with ("baseline NAME at
	// concurrency C", "reference NAME").
	Against    string
	Probes     int
	Successes  int
	Thresholds Thresholds
	Rows       []Row
	// For a gateway target whose members were probed beside it: each
	// member's median TTFT (seconds), the slowest member and its spread
	// (its median over the median of the members'); empty otherwise.
	MemberTTFT    map[string]float64
	SlowestMember string
	MemberSpread  float64
	// Vantages lists every vantage's verdict when other vantages were asked
	// (JudgeVantages), this one's first; empty otherwise.
	Vantages []VantageVerdict
}

// latencyMetrics are the rows a verdict judges, in table order.
var latencyMetrics = []baseline.Metric{baseline.MetricTTFT, baseline.MetricTPOT, baseline.MetricITL, baseline.MetricE2E}

// ExpectedFromBaseline turns a baseline's expectation into the means a
// sample is compared with. The expected E2E is the baseline's TTFT plus its
// TPOT for each further token the probes produced (outputTokens, their mean),
// as the regression series compare it: a probe's length is its module's, not
// the benchmark's.
func ExpectedFromBaseline(e baseline.Expectation, outputTokens float64) prober.Means {
	exp := prober.Means{TTFT: e.TTFTMean, TPOT: e.TPOTMean, ITL: e.ITLMean, E2E: math.NaN(), Load: e.Concurrency}
	if outputTokens >= 1 {
		exp.E2E = e.TTFTMean + e.TPOTMean*(outputTokens-1)
	}
	return exp
}

// Judge compares s with expected (a baseline's expectation, or a reference
// endpoint's means) under th. ref, when not nil, is the reference's sample:
// too few successes there make the verdict inconclusive too, and its success
// ratio is the expected one. ratios, when not nil, replace the ratio of a
// latency metric computed from the means (the daemon's gate passes the
// regression series' per-probe median ratios against a baseline).
func Judge(s Sample, expected prober.Means, ref *Sample, ratios map[baseline.Metric]float64, th Thresholds, against string) Verdict {
	v := Verdict{Against: against, Probes: s.Probes, Successes: s.Successes, Thresholds: th}
	var failed []string
	judged := 0
	for _, m := range latencyMetrics {
		r := Row{Metric: string(m), Expected: liveMean(expected, m), Measured: liveMean(s.Means, m)}
		r.Ratio = baseline.RegressionRatio(m, r.Measured, r.Expected)
		if q, ok := ratios[m]; ok {
			r.Ratio = q
		}
		if !math.IsNaN(r.Ratio) {
			judged++
			r.Result = Pass
			if r.Ratio > th.LatencyRatio {
				r.Result = Fail
				failed = append(failed, fmt.Sprintf("%s ratio %.3g > %g", m, r.Ratio, th.LatencyRatio))
			}
		}
		v.Rows = append(v.Rows, r)
	}
	sr := Row{Metric: MetricSuccessRatio, Expected: th.SuccessRatio, Measured: s.SuccessRatio(), Ratio: s.SuccessRatio()}
	if ref != nil {
		sr.Expected = ref.SuccessRatio()
	}
	if !math.IsNaN(sr.Ratio) {
		sr.Result = Pass
		if sr.Ratio < th.SuccessRatio {
			sr.Result = Fail
			failed = append(failed, fmt.Sprintf("success ratio %.3g < %g", sr.Ratio, th.SuccessRatio))
		}
	}
	v.Rows = append(v.Rows, sr)

	switch {
	case s.Successes < th.MinSuccesses:
		v.Result = Inconclusive
		v.Reason = fmt.Sprintf("%d successful probes of %d, fewer than the %d needed to judge", s.Successes, s.Probes, th.MinSuccesses)
	case ref != nil && ref.Successes < th.MinSuccesses:
		v.Result = Inconclusive
		v.Reason = fmt.Sprintf("the reference had %d successful probes of %d, fewer than the %d needed to judge", ref.Successes, ref.Probes, th.MinSuccesses)
	case len(failed) > 0:
		v.Result = Fail
		v.Reason = joinReasons(failed)
	case judged == 0:
		v.Result = Inconclusive
		v.Reason = "no latency could be compared: the " + against + " has no value for any of them"
	default:
		v.Result = Pass
		v.Reason = fmt.Sprintf("every ratio within the thresholds (%d latencies compared)", judged)
	}
	return v
}

func joinReasons(rs []string) string {
	out := rs[0]
	for _, r := range rs[1:] {
		out += "; " + r
	}
	return out
}

// verdictJSON is the JSON of a Verdict: `vllm_prober check --format json`
// and the body of /gate. Unknown numbers are null.
type verdictJSON struct {
	Target     string     `json:"target,omitempty"`
	Module     string     `json:"module,omitempty"`
	Window     float64    `json:"window_seconds,omitempty"`
	Verdict    string     `json:"verdict"`
	Reason     string     `json:"reason"`
	Against    string     `json:"against"`
	Probes     int        `json:"probes"`
	Successes  int        `json:"successful_probes"`
	Thresholds Thresholds `json:"thresholds"`
	Metrics    []rowJSON  `json:"metrics"`
	// A gateway target's members (Verdict.MemberTTFT), absent otherwise.
	MemberTTFT    map[string]float64 `json:"member_ttft_seconds,omitempty"`
	SlowestMember string             `json:"slowest_member,omitempty"`
	MemberSpread  *float64           `json:"member_spread_ratio,omitempty"`
	// Every vantage's verdict (Verdict.Vantages), absent with one vantage.
	Vantages []VantageVerdict `json:"vantages,omitempty"`
}

type rowJSON struct {
	Metric   string   `json:"metric"`
	Expected *float64 `json:"expected"`
	Measured *float64 `json:"measured"`
	Ratio    *float64 `json:"ratio"`
	Result   string   `json:"result"`
}

func num(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// MarshalJSON writes the verdict with NaN values as null.
func (v Verdict) MarshalJSON() ([]byte, error) {
	out := verdictJSON{Target: v.Target, Module: v.Module, Window: v.Window.Seconds(), Verdict: v.Result, Reason: v.Reason, Against: v.Against, Probes: v.Probes,
		Successes: v.Successes, Thresholds: v.Thresholds, Metrics: make([]rowJSON, 0, len(v.Rows)),
		MemberTTFT: v.MemberTTFT, SlowestMember: v.SlowestMember, Vantages: v.Vantages}
	if v.SlowestMember != "" {
		out.MemberSpread = num(v.MemberSpread)
	}
	for _, r := range v.Rows {
		res := r.Result
		if res == "" {
			res = "not judged"
		}
		out.Metrics = append(out.Metrics, rowJSON{Metric: r.Metric, Expected: num(r.Expected),
			Measured: num(r.Measured), Ratio: num(r.Ratio), Result: res})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // reasons say "ratio 3 > 1.2"
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// liveMean returns the live value of a latency metric, NaN for others.
func liveMean(p prober.Means, m baseline.Metric) float64 {
	switch m {
	case baseline.MetricTTFT:
		return p.TTFT
	case baseline.MetricTPOT:
		return p.TPOT
	case baseline.MetricITL:
		return p.ITL
	case baseline.MetricE2E:
		return p.E2E
	}
	return math.NaN()
}

// DefaultMemberRatio is the spread above which a gateway's slowest member
// fails a verdict (JudgeMembers), as the mixin's VLLMGatewayMemberSlow.
const DefaultMemberRatio = 1.5

// JudgeMembers adds a gateway's member join j to v and fails v when the
// slowest member answers its direct probes with a median TTFT above ratio
// times the median of the members' medians (j.Spread, as
// vllm_gateway_member_spread_ratio): a canary member slower than the others
// fails the gate, named, even when the gateway's own probes average it out.
func JudgeMembers(v *Verdict, j GatewayJoin, ratio float64) {
	if j.Slowest == "" || math.IsNaN(j.Spread) {
		return
	}
	v.MemberTTFT, v.MemberSpread, v.SlowestMember = j.MemberTTFT, j.Spread, j.Slowest
	if j.Spread <= ratio {
		return
	}
	v.Result = Fail
	v.Reason = fmt.Sprintf("member %s of the gateway answers its direct probes with a median TTFT %.2f times the median of the gateway's members (%.4gs against %.4gs; threshold %g): it fails even though the gateway's own probes average it out (the gateway alone: %s)",
		j.Slowest, j.Spread, j.MemberTTFT[j.Slowest], j.MemberTTFT[j.Slowest]/j.Spread, ratio, v.Reason)
}

package baseline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMinSuccessRatio is the success ratio (completed / (completed + failed)) below which a
// point is left out of expected values and the saturation figure unless kept explicitly.
const DefaultMinSuccessRatio = 0.99

// AssessOptions says how Assess treats points with failed requests.
type AssessOptions struct {
	// MinSuccessRatio: a point whose success ratio is below it is marked excluded.
	MinSuccessRatio float64
	// KeepFailedPoints keeps points below MinSuccessRatio usable (they are still reported).
	KeepFailedPoints bool
	// Force accepts a baseline with no usable point; it is then marked unusable.
	Force bool
}

// ErrNoUsablePoint is wrapped by Assess when a baseline has no usable point and Force is off.
var ErrNoUsablePoint = errors.New("no usable point")

// Assess makes failed requests visible in f, in place, and returns one note per finding for the
// user (stderr):
//   - a point without a failed count but with num_prompts and completed gets
//     failed = num_prompts - completed (FailedDerived);
//   - a point with failures is reported with its success ratio;
//   - a point whose success ratio is below MinSuccessRatio is marked Excluded unless
//     KeepFailedPoints;
//   - a baseline left with no usable point is an error wrapping ErrNoUsablePoint, unless Force,
//     in which case it is marked Unusable (and the daemon will still refuse it).
func Assess(f *File, opts AssessOptions) ([]string, error) {
	notes, refused := assess(f, opts)
	if len(refused) > 0 {
		msgs := make([]string, len(refused))
		for i, r := range refused {
			msgs[i] = fmt.Sprintf("baseline %q: %s", r.Name, r.Reason)
			if !r.AllFailed {
				msgs[i] += " (--keep-failed-points or a lower --min-success-ratio would use them)"
			}
		}
		return notes, fmt.Errorf("%w: %s (use --force to write it anyway, marked unusable)", ErrNoUsablePoint, strings.Join(msgs, "; "))
	}
	return notes, nil
}

// Exclusion is a baseline AssessAndLeaveOut removed from a file, and why.
type Exclusion struct {
	Name string
	// Reason is one short sentence: which points, and why none is usable.
	Reason string
	// AllFailed: every point of it had no successful request (no option
	// makes it usable); otherwise its points are below the minimum success
	// ratio.
	AllFailed bool
}

// AssessAndLeaveOut is Assess for a file of several baselines that keeps
// what is usable: a baseline with no usable point is removed from f (unless
// opts.Force, which marks it unusable as Assess does) and returned, and the
// notes about its points are left out (its Exclusion says it). It fails,
// wrapping ErrNoUsablePoint, only when no baseline is left; the notes then
// keep every point's finding.
func AssessAndLeaveOut(f *File, opts AssessOptions) (notes []string, left []Exclusion, err error) {
	notes, left = assess(f, opts)
	if len(left) == 0 {
		return notes, nil, nil
	}
	out := map[string]bool{}
	for _, e := range left {
		out[e.Name] = true
	}
	kept := f.Baselines[:0]
	for _, b := range f.Baselines {
		if !out[b.Name] {
			kept = append(kept, b)
		}
	}
	f.Baselines = kept
	if len(f.Baselines) == 0 {
		where := "its only baseline"
		if len(left) > 1 {
			where = fmt.Sprintf("any of its %d baselines", len(left))
		}
		why := "every point is below the minimum success ratio or has no successful request"
		if allLeftFailed(left) {
			why = "every request failed"
		}
		return notes, left, fmt.Errorf("%w in %s: %s", ErrNoUsablePoint, where, why)
	}
	notes = slices.DeleteFunc(notes, func(n string) bool {
		for name := range out {
			if strings.HasPrefix(n, fmt.Sprintf("baseline %q ", name)) || strings.HasPrefix(n, fmt.Sprintf("baseline %q:", name)) {
				return true
			}
		}
		return false
	})
	return notes, left, nil
}

func allLeftFailed(left []Exclusion) bool {
	for _, e := range left {
		if !e.AllFailed {
			return false
		}
	}
	return true
}

// assess marks the points of f and returns the notes and the baselines left
// with no usable point (when opts.Force is off).
func assess(f *File, opts AssessOptions) (notes []string, refused []Exclusion) {
	var unplaced []*Baseline // usable, but no point can be placed on the concurrency axis
	for _, b := range f.Baselines {
		for i := range b.Points {
			notes = append(notes, assessPoint(b, &b.Points[i], opts)...)
		}
		if b.UsablePoints() > 0 {
			b.Unusable = ""
			if b.PlacementProblem() != "" {
				unplaced = append(unplaced, b)
			}
			continue
		}
		why := noUsableReason(b)
		if !opts.Force {
			refused = append(refused, Exclusion{Name: b.Name, Reason: exclusionReason(b, opts.MinSuccessRatio, why), AllFailed: allFailed(b)})
			continue
		}
		b.Unusable = why + "; imported with --force"
		notes = append(notes, fmt.Sprintf("baseline %q: %s; written because of --force and marked unusable: the daemon refuses it", b.Name, why))
	}
	return append(notes, unplacedNote(unplaced)...), refused
}

// exclusionReason says in a few words why no point of b is usable, with the
// success ratios of its points when they are below the minimum.
func exclusionReason(b *Baseline, minRatio float64, fallback string) string {
	var ratios []string
	for i := range b.Points {
		p := &b.Points[i]
		if p.AllFailed {
			ratios = append(ratios, "0")
			continue
		}
		r, ok := p.SuccessRatio()
		if !ok {
			return fallback
		}
		ratios = append(ratios, strconv.FormatFloat(r, 'g', 4, 64))
	}
	switch {
	case allFailed(b):
		return fallback
	case len(ratios) == 1:
		return fmt.Sprintf("its only point has a success ratio of %s, below --min-success-ratio %g", ratios[0], minRatio)
	}
	return fmt.Sprintf("all %d points are below --min-success-ratio %g (success ratios %s)", len(ratios), minRatio, strings.Join(ratios, ", "))
}

// unplacedNote reports the baselines whose usable points cannot be placed on the concurrency
// axis: one note per baseline, or one for all when there are many (a report table gives dozens).
func unplacedNote(bs []*Baseline) []string {
	switch {
	case len(bs) == 0:
		return nil
	case len(bs) <= 3:
		out := make([]string, len(bs))
		for i, b := range bs {
			out[i] = fmt.Sprintf("baseline %q: %s", b.Name, b.PlacementProblem())
		}
		return out
	}
	return []string{fmt.Sprintf("%d baselines (%q, %q, ... %q) give no expected values: no usable point of theirs can be placed "+
		"on the concurrency axis (no finite concurrency, and no request throughput with a mean E2E, or TTFT and TPOT and output "+
		"throughput, for Little's law); their points are exported, but no expected values or regression ratios",
		len(bs), bs[0].Name, bs[1].Name, bs[len(bs)-1].Name)}
}

func allFailed(b *Baseline) bool {
	for i := range b.Points {
		if !b.Points[i].AllFailed {
			return false
		}
	}
	return true
}

func noUsableReason(b *Baseline) string {
	failed := 0
	for i := range b.Points {
		if b.Points[i].AllFailed {
			failed++
		}
	}
	if failed == len(b.Points) {
		if len(b.Points) == 1 {
			return "every request of its run failed (completed 0)"
		}
		return fmt.Sprintf("every request of its %d runs failed (completed 0)", len(b.Points))
	}
	if failed == 0 {
		return fmt.Sprintf("all %d points are below the minimum success ratio", len(b.Points))
	}
	return fmt.Sprintf("%d of %d points had no successful request and the others are below the minimum success ratio", failed, len(b.Points))
}

func assessPoint(b *Baseline, p *Point, opts AssessOptions) []string {
	var notes []string
	where := fmt.Sprintf("baseline %q point %s", b.Name, p.loadString())
	if p.Ref != "" {
		where += " (" + p.Ref + ")"
	}
	if p.Failed == nil && p.NumPrompts != nil && p.Completed != nil && *p.NumPrompts >= *p.Completed {
		p.Failed = ip(*p.NumPrompts - *p.Completed)
		p.FailedDerived = true
		if *p.Failed > 0 {
			notes = append(notes, fmt.Sprintf("%s: no failed count in the source; derived failed = num_prompts - completed = %d - %d = %d",
				where, *p.NumPrompts, *p.Completed, *p.Failed))
		}
	}
	if p.Completed != nil && *p.Completed == 0 {
		p.AllFailed = true
	}
	ratio, ok := p.SuccessRatio()
	if !ok {
		return notes // no counts: a mark from a re-imported baseline file stays
	}
	p.Excluded = "" // decided again below with this import's options
	if ratio >= 1 {
		return notes
	}
	if p.AllFailed {
		notes = append(notes, fmt.Sprintf("%s: every request failed (%d failed); its zeros are not measurements", where, *p.Failed))
		return notes
	}
	msg := fmt.Sprintf("%s: %d of %d requests failed (success ratio %.4g)", where, *p.Failed, *p.Completed+*p.Failed, ratio)
	switch {
	case ratio >= opts.MinSuccessRatio:
	case opts.KeepFailedPoints:
		msg += fmt.Sprintf("; below --min-success-ratio %g but kept (--keep-failed-points)", opts.MinSuccessRatio)
	default:
		p.Excluded = fmt.Sprintf("success ratio %.4g is below the minimum %g", ratio, opts.MinSuccessRatio)
		msg += fmt.Sprintf("; below --min-success-ratio %g: kept in the file but excluded from expected values and the saturation figure", opts.MinSuccessRatio)
	}
	return append(notes, msg)
}

// SuccessRatio is completed / (completed + failed), when both are known and not both 0.
func (p *Point) SuccessRatio() (float64, bool) {
	if p.Completed == nil || p.Failed == nil || *p.Completed+*p.Failed == 0 {
		return 0, false
	}
	return float64(*p.Completed) / float64(*p.Completed+*p.Failed), true
}

// normalizeFramework maps the names tools write for a serving framework to one spelling.
func normalizeFramework(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "sgl", "sglang":
		return "sglang"
	case "tgi", "text-generation-inference":
		return "tgi"
	case "trt", "trtllm", "trt-llm", "tensorrt-llm", "tensorrt_llm":
		return "tensorrt-llm"
	case "lmdeploy", "lmd":
		return "lmdeploy"
	}
	return s
}

// dateLayouts are the date formats tools write. Dates without a zone (vLLM's "%Y%m%d-%H%M%S" is
// local time of the benchmark host, which the file does not record) are read as UTC.
var dateLayouts = []string{
	time.RFC3339Nano,
	"20060102-150405",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02",
	"20060102",
}

// normalizeDate rewrites a date as RFC 3339 (UTC when the source has no zone). Epoch seconds or
// milliseconds (llmperf's timestamp) are accepted. An unrecognised date is kept as written.
func normalizeDate(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	// Epoch seconds (10 digits since 2001) or milliseconds (13); shorter numbers are dates.
	if n, err := strconv.ParseFloat(s, 64); err == nil && n >= 1e9 && !strings.ContainsAny(s, "-:") {
		sec := n
		if n >= 1e11 { // milliseconds
			sec = n / 1000
		}
		// Python's time.time() has microsecond resolution; a float64 of ~1.7e9 s holds about that
		// much, so the fraction is rounded to microseconds rather than printing float noise.
		whole := int64(sec)
		us := int64(math.Round((sec - float64(whole)) * 1e6))
		return time.Unix(whole, us*1000).UTC().Format(time.RFC3339Nano)
	}
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.Format(time.RFC3339Nano)
		}
	}
	return s
}

package baseline

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/config"
)

// Objectives are the goodput objectives a point's request_goodput and
// slo_attainment were measured against: config.Objectives (the objectives of
// vLLM's bench serve --goodput and of the prober's goodput SLI), written in
// seconds as the rest of the baseline file.
type Objectives struct {
	config.Objectives
}

// objectivesYAML is the file form of Objectives.
type objectivesYAML struct {
	TTFT   *float64 `yaml:"ttft_seconds,omitempty"`
	TPOT   *float64 `yaml:"tpot_seconds,omitempty"`
	ITLP99 *float64 `yaml:"itl_p99_seconds,omitempty"`
	E2E    *float64 `yaml:"e2e_seconds,omitempty"`
}

func (o *Objectives) fields() [4]*model.Duration {
	return [4]*model.Duration{&o.TTFT, &o.TPOT, &o.ITLP99, &o.E2E}
}

var objectiveKeys = [4]string{"ttft_seconds", "tpot_seconds", "itl_p99_seconds", "e2e_seconds"}

// MarshalYAML implements yaml.Marshaler: the objectives that are set, in seconds.
func (o Objectives) MarshalYAML() (interface{}, error) {
	var y objectivesYAML
	dst := [4]**float64{&y.TTFT, &y.TPOT, &y.ITLP99, &y.E2E}
	for i, d := range o.fields() {
		if *d > 0 {
			s := time.Duration(*d).Seconds()
			*dst[i] = &s
		}
	}
	return y, nil
}

// UnmarshalYAML implements yaml.Unmarshaler. Every objective given must be a
// positive number of seconds (0 would read as "not set").
func (o *Objectives) UnmarshalYAML(unmarshal func(interface{}) error) error {
	var y objectivesYAML
	if err := unmarshal(&y); err != nil {
		return err
	}
	*o = Objectives{}
	for i, v := range [4]*float64{y.TTFT, y.TPOT, y.ITLP99, y.E2E} {
		if v == nil {
			continue
		}
		if !(*v > 0) || math.IsInf(*v, 0) {
			return fmt.Errorf("goodput_objectives.%s %v is not a positive number of seconds", objectiveKeys[i], *v)
		}
		*o.fields()[i] = secondsDuration(*v)
	}
	return nil
}

func secondsDuration(s float64) model.Duration {
	return model.Duration(math.Round(s * float64(time.Second)))
}

func (o *Objectives) validate() error {
	for i, d := range o.fields() {
		if *d < 0 {
			return fmt.Errorf("%s is negative", objectiveKeys[i])
		}
	}
	if !o.Set() {
		return errors.New("no objective set (ttft_seconds, tpot_seconds, itl_p99_seconds or e2e_seconds)")
	}
	return nil
}

// Equal reports whether o and c are the same objectives.
func (o *Objectives) Equal(c config.Objectives) bool {
	return o != nil && o.Objectives == c
}

// hasGoodput reports whether a point carries a goodput figure.
func (p *Point) hasGoodput() bool {
	return p.RequestGoodput != nil || p.SLOAttainment != nil || p.TokenGoodput != nil
}

// deriveAttainment sets SLOAttainment, when the tool wrote none, from
// request_goodput × duration / (completed + failed): the good requests over
// every request sent, failed ones counted against it. It needs a failed count
// the tool wrote (a derived one may count requests a stopped run never sent).
// The good count is a whole number of requests; a product more than half a
// request above the total is an inconsistent file and gives no attainment.
func (p *Point) deriveAttainment() (note string) {
	if p.SLOAttainment != nil || p.RequestGoodput == nil || p.DurationSeconds == nil || p.Completed == nil || p.Failed == nil || p.FailedDerived {
		return ""
	}
	total := *p.Completed + *p.Failed
	if total == 0 {
		return ""
	}
	good := math.Round(*p.RequestGoodput * *p.DurationSeconds)
	if good > float64(total) {
		return fmt.Sprintf("request_goodput %g × duration %g s gives %g good requests, more than the %d sent: no slo_attainment derived", *p.RequestGoodput, *p.DurationSeconds, good, total)
	}
	a := good / float64(total)
	p.SLOAttainment = &a
	return ""
}

// goodCountAttainment is good / (completed + failed), nil without the counts.
func goodCountAttainment(good float64, completed, failed *int64) *float64 {
	if completed == nil || failed == nil || *completed+*failed == 0 || good < 0 || good > float64(*completed+*failed) {
		return nil
	}
	a := good / float64(*completed+*failed)
	return &a
}

// finishGoodput derives attainments, states the objectives opts give for
// points whose file did not store them, and notes every point whose goodput
// was measured against objectives nobody stated.
func (im *Import) finishGoodput(o *config.Objectives) error {
	unknown := 0
	for _, b := range im.Baselines {
		for i := range b.Points {
			p := &b.Points[i]
			if n := p.deriveAttainment(); n != "" {
				im.Notes = append(im.Notes, pointRef(im, p)+": "+n)
			}
			if !p.hasGoodput() {
				continue
			}
			switch {
			case o != nil && p.GoodputObjectives == nil:
				p.GoodputObjectives = &Objectives{*o}
			case o != nil && !p.GoodputObjectives.Equal(*o):
				return fmt.Errorf("%s: the file states goodput objectives %q, --goodput gives %q: leave out --goodput or give the file's", pointRef(im, p), p.GoodputObjectives.String(), o.String())
			case p.GoodputObjectives == nil:
				unknown++
			}
		}
	}
	if unknown > 0 {
		im.Notes = append(im.Notes, fmt.Sprintf("goodput objectives unknown: %d point(s) carry a goodput figure but the file does not say which objectives it was measured against; imported, but not compared with the live goodput: give them with --goodput (vLLM bench's syntax, e.g. --goodput 'ttft:200 tpot:50')",
			unknown))
	}
	return nil
}

func pointRef(im *Import, p *Point) string {
	if p.Ref != "" {
		return p.Ref
	}
	return filepathBase(im.File) + " " + p.loadString()
}

// namespaceGoodput reads the goodput objectives of a Namespace(...) line's
// goodput=['ttft:200', 'tpot:50'] (vLLM's --goodput, nargs="+").
func namespaceGoodput(v string) (*Objectives, error) {
	v = strings.Trim(strings.TrimSpace(v), "[]")
	var parts []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.Trim(strings.TrimSpace(f), `'"`); f != "" {
			parts = append(parts, f)
		}
	}
	o, err := config.ParseGoodput(parts...)
	if err != nil {
		return nil, err
	}
	return &Objectives{o}, nil
}

// aiperfObjectiveKeys maps the --goodput constraint names of aiperf and
// genai-perf (metric tags, milliseconds) to the objectives, by
// ObjectiveNames order (ttft, tpot, itl_p99, e2e). Their
// inter_token_latency is (latency - TTFT)/(OSL - 1), vLLM's TPOT.
var aiperfObjectiveKeys = map[string]int{"time_to_first_token": 0, "inter_token_latency": 1, "request_latency": 3}

// toolObjectives converts a tool's constraints (name -> value × scale
// seconds) into Objectives. A constraint the prober has no objective for
// makes the objectives unknown (the tool's good requests met it, the
// prober's would not be judged on it): nil and a note.
func toolObjectives(constraints map[string]any, keys map[string]int, scale float64) (*Objectives, string) {
	if len(constraints) == 0 {
		return nil, ""
	}
	var o Objectives
	var other []string
	for k, v := range constraints {
		i, ok := keys[k]
		f, present, err := toFloat(v)
		if !ok || err != nil || !present || !(f > 0) || math.IsInf(f, 0) {
			other = append(other, k)
			continue
		}
		*o.fields()[i] = secondsDuration(f * scale)
	}
	if len(other) > 0 {
		sort.Strings(other)
		return nil, fmt.Sprintf("goodput constraint %s has no prober objective (ttft, tpot, e2e): the goodput is imported without objectives and not compared with the live goodput", strings.Join(other, ", "))
	}
	if !o.Set() {
		return nil, ""
	}
	return &o, ""
}

// GoodputObjectives returns the objectives every usable point with an
// slo_attainment was measured against; false when no such point has
// objectives or two points differ (the curve would mix two definitions).
func (b *Baseline) GoodputObjectives() (config.Objectives, bool) {
	var out *Objectives
	for i := range b.Points {
		p := &b.Points[i]
		if !p.Usable() || p.SLOAttainment == nil {
			continue
		}
		if p.GoodputObjectives == nil {
			return config.Objectives{}, false
		}
		if out != nil && !out.Equal(p.GoodputObjectives.Objectives) {
			return config.Objectives{}, false
		}
		out = p.GoodputObjectives
	}
	if out == nil {
		return config.Objectives{}, false
	}
	return out.Objectives, true
}

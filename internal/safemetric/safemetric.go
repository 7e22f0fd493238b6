// Package safemetric builds the const metrics of the prober's unchecked
// collectors without ever panicking. A series that cannot be built (a label
// name of a target colliding with one of the series', a label value that is not
// valid UTF-8, a wrong number of label values) is left out, counted in
// vllm_prober_collect_errors_total and logged once per target: one bad target
// loses that series, never another target's series, the rest of /metrics or
// the process. client_golang's MustNewConstMetric panics inside the
// registry's (and the wrapping registerer's) collection goroutine instead.
package safemetric

import (
	"sync"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
)

// Errors counts and logs the series the collectors could not build. A nil
// *Errors is valid: it drops such series silently.
type Errors struct {
	counter prometheus.Counter
	logger  log.Logger

	mu     sync.Mutex
	logged map[string]bool // targets whose first error was logged
}

// MaxLogged bounds how many targets' first errors are remembered; past it
// errors are still counted but no longer logged, so that a churning fleet of
// hostile discovered targets cannot grow the set.
const MaxLogged = 1024

// New returns an Errors counting in a counter registered on reg.
func New(reg prometheus.Registerer, logger log.Logger) (*Errors, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	e := &Errors{
		counter: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vllm_prober_collect_errors_total",
			Help: "Series the prober could not build while collecting (a target label colliding with one of the series' own labels, a label value that is not valid UTF-8) and left out of /metrics; the first of each target is logged.",
		}),
		logger: logger,
		logged: map[string]bool{},
	}
	if reg != nil {
		if err := reg.Register(e.counter); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Report counts err, a failure to build a series of target, and logs the
// first one of each target.
func (e *Errors) Report(target string, err error) {
	if e == nil || err == nil {
		return
	}
	e.counter.Inc()
	e.mu.Lock()
	first := !e.logged[target] && len(e.logged) < MaxLogged
	if first {
		e.logged[target] = true
	}
	e.mu.Unlock()
	if first {
		level.Warn(e.logger).Log("msg", "A series of the target could not be built and is left out of /metrics; later ones are counted in vllm_prober_collect_errors_total, not logged", "target", target, "err", err)
	}
}

// Forget lets target's next error be logged again, for a target that was
// removed or reconfigured.
func (e *Errors) Forget(target string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	delete(e.logged, target)
	e.mu.Unlock()
}

// Send builds a const metric and sends it on ch; a metric that cannot be
// built is reported against target and left out.
func (e *Errors) Send(ch chan<- prometheus.Metric, target string, desc *prometheus.Desc, vt prometheus.ValueType, v float64, lv ...string) {
	NewSender(e).Send(ch, target, desc, vt, v, lv...)
}

// Reporter is what a Sender reports the series it cannot build to; *Errors is
// one. The public packages take it as an interface, so that their options
// name no internal type.
type Reporter interface {
	Report(target string, err error)
}

// Sender sends const metrics, reporting those it cannot build to a Reporter.
// The zero Sender reports nothing; it never panics.
type Sender struct{ r Reporter }

// NewSender returns a Sender reporting to r (nil: to nothing).
func NewSender(r Reporter) Sender { return Sender{r: r} }

// Report reports err, a failure to build a series of target.
func (s Sender) Report(target string, err error) {
	if s.r != nil && err != nil {
		s.r.Report(target, err)
	}
}

// Send builds a const metric and sends it on ch; a metric that cannot be
// built is reported against target and left out.
func (s Sender) Send(ch chan<- prometheus.Metric, target string, desc *prometheus.Desc, vt prometheus.ValueType, v float64, lv ...string) {
	m, err := prometheus.NewConstMetric(desc, vt, v, lv...)
	if err != nil {
		s.Report(target, err)
		return
	}
	ch <- m
}
